// The epilogue for one token row, shared by every kernel: residual add, RMSNorm (ordinary or
// Gemma) and the row's quantiser, steps 2-7 of the numeric contract (docs/numeric-contract.md).
// The reductions are reduce.cuh's, the row layout row.cuh's; each mode's quantiser is its
// Quantiser specialisation under quant/, which the kernel program includes from the mode table.
#pragma once

#include "fp8_divide.cuh"
#include "limits.cuh"
#include "microscaling.cuh"
#include "platform.cuh"
#include "quant/call_scale.cuh"
#include "quant/quantiser.cuh"
#include "quant_table.cuh"
#include "reduce.cuh"
#include "row.cuh"

namespace arfuse {

// The first scale of `row`: scales hold bytes (E8M0, MXFP4, NVFP4) or floats, row_stride apart;
// NVFP4's swizzled layout (group_stride 0) places the row by swizzled_row_offset, row_stride its
// tiles per row.
template <int QUANT, int SCALE>
__device__ __forceinline__ void* row_scales(void* scales, int row, int row_stride, int group_stride) {
  if constexpr (kQuantSwizzles<QUANT>) {
    return static_cast<u8*>(scales) +
           (group_stride == 0 ? swizzled_row_offset(row, row_stride) : (long long)row * row_stride);
  }
  const long long offset = (long long)row * row_stride;
  if constexpr (SCALE == kScaleE8m0 || kQuantScaleBytes<QUANT>) return static_cast<u8*>(scales) + offset;
  return static_cast<float*>(scales) + offset;
}

// Outputs of one row; pointers already offset to the row. `out` is T (no quant), fp8 bytes, or
// packed E2M1 (MXFP4, NVFP4), out_width columns of it (zeros after H).
template <typename T>
struct RowOutputs {
  T* residual_out;
  void* out;
  int out_width;
  void* scale;             // the row's first scale: float (per-token and group FP8), byte (E8M0, MXFP4, E4M3)
  int scale_group_stride;  // elements between the row's group scales (NVFP4: 1 linear, 0 swizzled)
  int swizzled_tiles;      // NVFP4's swizzled layout: tiles per row (0: linear)
  QuantScale quant_scale;  // fp8_static, nvfp4
  T* mirror;               // the _mirror modes only
};

// The scale fields of a row's outputs: where its scales go (row_scales), and the call's scale.
template <typename T, int QUANT, int SCALE>
__device__ __forceinline__ void place_row_scales(RowOutputs<T>& o, void* scales, int row, int row_stride,
                                                 int group_stride, QuantScale quant_scale) {
  o.scale = row_scales<QUANT, SCALE>(scales, row, row_stride, group_stride);
  o.scale_group_stride = group_stride;
  o.swizzled_tiles = kQuantSwizzles<QUANT> && group_stride == 0 ? row_stride : 0;
  o.quant_scale = quant_scale;
}

// Step 7 (7b-7e) of a row that is y: the mode's quantiser. scratch: the block's reduction
// scratch, for the modes that reduce over the row (null in group_quant, which takes none of them).
template <typename T, int H, int THREADS, int VPT, int QUANT, int GROUP, int SCALE>
__device__ __forceinline__ void quantize_y(const Vec16 (&y)[VPT], const RowOutputs<T>& row, ReduceScratch* scratch) {
  Quantiser<quant_family(QUANT)>::template quantize<T, H, THREADS, VPT, GROUP, SCALE>(y, row, scratch);
}

// The scale rows a mode's layout pads past `tokens`, zeroed by every block of a kernel that
// quantises rows [0, tokens).
template <int THREADS, int QUANT>
__device__ __forceinline__ void zero_scale_padding(void* scales, int tokens, int row_stride, int group_stride) {
  Quantiser<quant_family(QUANT)>::template zero_scale_padding<THREADS>(scales, tokens, row_stride, group_stride);
}

// Which epilogues add in pairs (add_pair: bf16 on sm_90): the block-scaled ones, which it makes
// faster; BF16 and per-token FP8 output were slower with it, so they keep the f32 add
// (docs/performance.md, "Tuning decisions").
template <typename T, int QUANT>
inline constexpr bool kEpiloguePairAdd = kPairAddFor<T> && (kQuantIsGroupFp8<QUANT> || kQuantIsMxfp4<QUANT>);

// When residual_out goes out: right after the add, or after the sum-of-squares reduction. Only
// the timing differs (the same bits either way); each kernel chooses by measurement.
enum class ResidualStore { after_add, after_reduction };

// ar = T(fold) (step 1, done by the caller) and the row's residual_in, packed.
template <typename T, int H, int THREADS, int VPT, int QUANT, int NORM, int GROUP, int SCALE, ResidualStore STORE>
__device__ __forceinline__ void epilogue_row(const Vec16 (&ar)[VPT], const Vec16 (&residual)[VPT], StagedWeight weight,
                                             float eps, const RowOutputs<T>& row, ReduceScratch& scratch) {
  // Step 2: res = T(ar + residual_in) -> residual_out. On pairs where kEpiloguePairAdd says so
  // (the same bits, platform.cuh's add_pair says why): half an instruction an element instead of
  // three and a half.
  Vec16 res[VPT];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (!owns_vector<H, THREADS>(k)) continue;
    if constexpr (kEpiloguePairAdd<T, QUANT>) {
#pragma unroll
      for (int i = 0; i < 4; ++i) res[k].w[i] = add_pair<T>(ar[k].w[i], residual[k].w[i]);
    } else {
      float a[8], r[8];
      unpack8<T>(ar[k], a);
      unpack8<T>(residual[k], r);
#pragma unroll
      for (int j = 0; j < 8; ++j) a[j] = a[j] + r[j];
      res[k] = pack8<T>(a);
    }
    if constexpr (STORE == ResidualStore::after_add) {
      store16(row.residual_out + (threadIdx.x + k * THREADS) * 8, res[k]);
    }
  }
  // Step 3: ss, thread-local fmaf chain in element order, then the fixed block tree.
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (!owns_vector<H, THREADS>(k)) continue;
    float v[8];
    unpack8<T>(res[k], v);
#pragma unroll
    for (int j = 0; j < 8; ++j) ss = fmaf(v[j], v[j], ss);
  }
  ss = block_reduce<THREADS, false>(ss, scratch.sum);
  if constexpr (STORE == ResidualStore::after_reduction) {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      if (owns_vector<H, THREADS>(k)) store16(row.residual_out + (threadIdx.x + k * THREADS) * 8, res[k]);
    }
  }
  // Step 4: IEEE division and sqrt (the JIT never passes fast-math options).
  const float inv = 1.0f / sqrtf(ss / float(H) + eps);
  // Steps 5-6: g = f(w) (+ 1 for Gemma), y = T((res * inv) * g).
  weight.wait();
  Vec16 y[VPT];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (!owns_vector<H, THREADS>(k)) continue;
    const int vec = threadIdx.x + k * THREADS;
    float v[8], g[8];
    unpack8<T>(res[k], v);
    unpack8<T>(weight.vectors[vec], g);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = (v[j] * inv) * (NORM == kNormGemma ? g[j] + 1.0f : g[j]);
    y[k] = pack8<T>(v);
    if (QUANT == kQuantNone) store16(static_cast<T*>(row.out) + vec * 8, y[k]);
    if (kQuantWritesMirror<QUANT>) store16(row.mirror + vec * 8, y[k]);
  }
  // Step 7 (7b-7e).
  if constexpr (QUANT != kQuantNone) quantize_y<T, H, THREADS, VPT, QUANT, GROUP, SCALE>(y, row, &scratch);
  zero_padding<T, H, THREADS, QUANT>(row.out, row.out_width);
}

}  // namespace arfuse
