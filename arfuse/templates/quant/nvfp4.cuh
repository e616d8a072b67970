// Step 7e of the numeric contract: NVFP4, blocks of 16 E2M1 elements with an E4M3 scale each and
// the call's fp32 global scale; scales linear or in the swizzled 128x4 layout.
#pragma once

#include "microscaling.cuh"
#include "quant/blocks.cuh"
#include "quant/call_scale.cuh"
#include "quant/quantiser.cuh"
#include "quant_table.cuh"

namespace arfuse {

// Where NVFP4 scales go: `scales` is the row's first (row_scales; for the swizzled layout the
// row's part of the offset); swizzled_tiles: 0 for the linear layout [tokens, H / 16], else the
// swizzled layout's tiles per row.
__device__ __forceinline__ int nvfp4_column_offset(int column, int swizzled_tiles) {
  return swizzled_tiles ? swizzled_column_offset(column) : column;
}

// The block scale's code and value (e4m3fn_scale). On NVIDIA sm_89+ the hardware converts: the
// f32 -> e4m3 conversion the per-token FP8 path uses (round to nearest even, saturating to +-448)
// and the exact way back through f16; a NaN stays code 0x7f with a NaN value, as e4m3fn_scale
// gives it whatever sign the NaN has.
__device__ __forceinline__ E4m3Scale nvfp4_scale(float x) {
#if ARFUSE_HW_FP8 && defined(ARFUSE_VENDOR_NVIDIA)
  const u32 code = fp8x2(x, 0.0f) & 0xffu;
  u32 halves;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(u16(code)));
  return x == x ? E4m3Scale{code, widen(f16_t{u16(halves)})} : E4m3Scale{0x7fu, x};
#else
  return e4m3fn_scale(x);
#endif
}

// Step 7e: NVFP4. out: the row's packed elements (H / 2 bytes); blocks of 16 elements are two
// lanes' vectors. In the swizzled layout the row's padding columns (to a multiple of 4) are zeros.
template <typename T, int H, int THREADS, int VPT>
__device__ __forceinline__ void quantize_nvfp4(const Vec16 (&y)[VPT], u8* out, u8* scales, int swizzled_tiles,
                                               QuantScale global) {
  static_assert(H % kNvfp4BlockSize == 0, "NVFP4 needs H divisible by 16");
  constexpr int kColumns = H / kNvfp4BlockSize, kLanes = kNvfp4BlockSize / 8;
  for_each_owned_vector<T, H, THREADS, VPT, kNvfp4BlockSize>(y, [&](int k, int vec, float amax) {
    const Nvfp4Block block = nvfp4_block_with(nvfp4_scale(nvfp4_unrounded_scale(amax, global.value)), global.inverse);
    u32 packed = 0;
    const float magnitude = fabsf(block.multiplier);
    if (block.encode && magnitude <= 0x1.fffffep127f) {
      // |y * m| is |y| * |m| exactly, and not NaN for a finite m (an infinite y only comes with
      // a finite block scale); the signs are y's, flipped for a negative m.
      float v[8];
      unpack8<T>(y[k], v);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = e2m1_rounded_magnitude(fabsf(v[j]) * magnitude);
      packed = e2m1_pack_codes(v, y[k].w, (float_to_bits(block.multiplier) >> 31) * 0x88888888u);
    } else if (block.encode) {
      // An infinite multiplier (a global scale near FLT_MAX): y = 0 makes NaN, code 0.
      float v[8];
      unpack8<T>(y[k], v);
#pragma unroll
      for (int j = 0; j < 8; ++j) packed |= nvfp4_code(v[j] * block.multiplier) << (4 * j);  // element 2i: low nibble
    }
    *reinterpret_cast<u32*>(out + vec * 4) = packed;
    if (vec % kLanes != 0) return;
    const int column = vec / kLanes;
    scales[nvfp4_column_offset(column, swizzled_tiles)] = u8(block.scale_code);
    if constexpr (kColumns % kSwizzleColumns != 0) {
      if (swizzled_tiles && column == kColumns - 1) {
        for (int c = kColumns; c % kSwizzleColumns != 0; ++c) scales[swizzled_column_offset(c)] = 0;
      }
    }
  });
}

// The swizzled layout's padding rows [tokens, tokens rounded up to 128) as zeros, spread over the
// grid's blocks. They lie in the last 128-row band, where 4-byte word 4u + q of each tile holds row
// u + 32q of the band (u < 32): consecutive threads take consecutive words, so a warp writes 128
// contiguous bytes, and a word is written when its row is padding.
template <int THREADS>
__device__ __forceinline__ void zero_swizzled_padding_rows(u8* scales, int tokens, int swizzled_tiles) {
  const int first = tokens % kSwizzleRows;  // the band's first padding row
  if (first == 0) return;
  u32* band = reinterpret_cast<u32*>(scales + (long long)(tokens / kSwizzleRows) * swizzled_tiles * kSwizzleTileBytes);
  constexpr int kWords = kSwizzleTileBytes / 4;  // 128
  for (int i = blockIdx.x * THREADS + threadIdx.x; i < swizzled_tiles * kWords; i += gridDim.x * THREADS) {
    const int row = (i / 4) % 32 + 32 * (i % 4);
    if (row >= first) band[i] = 0;
  }
}

template <>
struct Quantiser<kQuantNvfp4> : QuantiserDefaults {
  template <typename T, int H, int THREADS, int VPT, int GROUP, int SCALE, typename Row>
  __device__ __forceinline__ static void quantize(const Vec16 (&y)[VPT], const Row& row, ReduceScratch*) {
    quantize_nvfp4<T, H, THREADS, VPT>(y, static_cast<u8*>(row.out), static_cast<u8*>(row.scale), row.swizzled_tiles,
                                       row.quant_scale);
  }
  // The swizzled layout (group_stride 0) pads the rows to a multiple of 128 with zero scales.
  template <int THREADS>
  __device__ __forceinline__ static void zero_scale_padding(void* scales, int tokens, int row_stride,
                                                            int group_stride) {
    if (group_stride == 0) zero_swizzled_padding_rows<THREADS>(static_cast<u8*>(scales), tokens, row_stride);
  }
};

}  // namespace arfuse
