// The epilogue for one token row, shared by every kernel: residual add, RMSNorm (ordinary or
// Gemma) and optional per-token FP8 quantisation, steps 2-7 of the numeric contract
// (shared/design.md). Each thread owns VPT vectors of 8 elements, vector index
// tid + k * THREADS, so the order of every sum depends only on H and the block shape.
#pragma once

#include "fp8_divide.cuh"
#include "limits.cuh"
#include "microscaling.cuh"
#include "platform.cuh"

namespace arfuse {

// Shared memory for the two block reductions: one partial per warp, plus the broadcast slot.
struct ReduceScratch {
  float sum[kWarpSize + 1];
  float amax[kWarpSize + 1];
};

// Butterfly over the first LANES lanes: lane 0 ends with their sum (every one of them, with
// LANES = kWarpSize), and a + b == b + a bit for bit.
template <int LANES = kWarpSize>
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int mask = LANES / 2; mask > 0; mask >>= 1) v += shuffle_xor(v, mask);
  return v;
}

// The smallest power of two >= n (n >= 1).
ARFUSE_HOST_DEVICE constexpr int power_of_two_at_least(int n) {
  return n <= 1 ? 1 : 2 * power_of_two_at_least((n + 1) / 2);
}

// v >= 0 or a NaN with the sign bit clear (the amax partials): their bit patterns order as
// unsigned integers do, a NaN above Inf, so the integer maximum is the NaN-keeping float maximum
// (which NaN comes out does not matter, max_keep_nan's comment says why).
template <int LANES = kWarpSize>
__device__ __forceinline__ float warp_max(float v) {
  if constexpr (kWarpReduxMax) {
    return bits_to_float(warp_max_unsigned(float_to_bits(v)));
  } else {
#pragma unroll
    for (int mask = LANES / 2; mask > 0; mask >>= 1) v = max_keep_nan(v, shuffle_xor(v, mask));
    return v;
  }
}

// Cross-warp step: the first warp loads the per-warp partials (lanes without one load 0, the
// identity for these nonnegative partials) and reduces them with shuffles (the maximum with one
// redux.sync where the hardware has it). No thread folds partials serially. The contract's
// butterfly runs over the whole warp; its levels with a mask >= kLanes (the smallest power of two
// >= kWarps) only combine lane i < kLanes with a lane that holds +0, and x + 0 and max(x, 0) are
// x for these partials (>= +0, or a NaN, which stays a NaN), while the levels below never mix
// lanes >= kLanes into lane 0: so lane 0 gets the same bits without those levels (one shuffle
// less at 12 or 16 warps, three for 6 wave64 waves).
template <int THREADS, bool IS_MAX>
__device__ __forceinline__ float block_reduce(float v, float* partials) {
  constexpr int kWarps = THREADS / kWarpSize;
  constexpr int kLanes = power_of_two_at_least(kWarps);
  static_assert(THREADS % kWarpSize == 0 && kWarps <= kWarpSize, "block shape");
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = IS_MAX ? warp_max(v) : warp_sum(v);
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float p = lane < kWarps ? partials[lane] : 0.0f;
    p = IS_MAX ? warp_max<kLanes>(p) : warp_sum<kLanes>(p);
    if (lane == 0) partials[kWarpSize] = p;
  }
  __syncthreads();
  return partials[kWarpSize];
}

template <int H, int THREADS>
__device__ __forceinline__ bool owns_vector(int k) {
  // When the vectors fill the block exactly, a constant after unrolling: no per-vector
  // predicate for the compiler to keep (the block-scaled loops spilled under the register cap).
  if constexpr (H / 8 % THREADS == 0) return k < H / 8 / THREADS;
  return threadIdx.x + k * THREADS < H / 8;
}

// The 16-byte vectors of one row this thread owns. Callers issue these loads before they wait
// on anything else, so every load of a row is in flight at once (residual_out may alias
// residual_in, which would otherwise order each load after the previous store).
template <typename T, int H, int THREADS, int VPT>
__device__ __forceinline__ void load_vectors(const T* row, Vec16 (&v)[VPT]) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (owns_vector<H, THREADS>(k)) v[k] = load16(row + (threadIdx.x + k * THREADS) * 8);
  }
}

// Rows are held packed in T between the steps (every intermediate the contract keeps is
// T-rounded anyway): half the registers of floats, which doubles the blocks resident per SM.

__device__ __forceinline__ Vec8 pack_fp8x8(const float (&v)[8]) {
  Vec8 q;
#pragma unroll
  for (int i = 0; i < 2; ++i) q.w[i] = fp8x2(v[4 * i], v[4 * i + 1]) | (fp8x2(v[4 * i + 2], v[4 * i + 3]) << 16);
  return q;
}

// v / scale for 8 elements on one of fp8_divide.cuh's paths, chosen by the caller once per row
// (per-token FP8) or per group: a select per element would compute both paths.
template <bool SHORT_PATH>
__device__ __forceinline__ void fp8_divide8(float (&v)[8], const Fp8Divisor& divisor) {
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = SHORT_PATH ? fp8_divide_short(v[j], divisor) : fp8_divide_general(v[j], divisor);
}

// q = fp8(y / scale) for this thread's vectors.
template <typename T, int H, int THREADS, int VPT, bool SHORT_PATH>
__device__ __forceinline__ void quantize_vectors(const Vec16 (&y)[VPT], u8* out, const Fp8Divisor& divisor) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (!owns_vector<H, THREADS>(k)) continue;
    float v[8];
    unpack8<T>(y[k], v);
    fp8_divide8<SHORT_PATH>(v, divisor);
    store8(out + (threadIdx.x + k * THREADS) * 8, pack_fp8x8(v));
  }
}

// Step 7 for a row that is already y: amax, scale = amax > 0 ? amax / max : 1, q = fp8(y / scale),
// the division as fp8_divide.cuh does it (the same FP8 codes as IEEE y / scale).
template <typename T, int H, int THREADS, int VPT>
__device__ __forceinline__ void quantize_row(const Vec16 (&y)[VPT], u8* out, float* scale_out, ReduceScratch& scratch) {
  AbsMax<T> local;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (!owns_vector<H, THREADS>(k)) continue;
#pragma unroll
    for (int i = 0; i < 4; ++i) local.add(y[k].w[i]);
  }
  const float amax = block_reduce<THREADS, true>(local.value(), scratch.amax);
  const Fp8Divisor divisor = fp8_divisor(amax, kFp8Max);
  if (divisor.short_path) {
    quantize_vectors<T, H, THREADS, VPT, true>(y, out, divisor);
  } else {
    quantize_vectors<T, H, THREADS, VPT, false>(y, out, divisor);
  }
  if (threadIdx.x == 0) *scale_out = divisor.scale;
}

// ---- block-scaled quantisation (contract steps 7b and 7c) -----------------------------------
// A group of G consecutive elements is G / 8 consecutive vectors: G / 8 consecutive lanes of one
// warp in the same k (THREADS is a multiple of the warp size, and G / 8 divides it). Its amax is
// a max, which no shuffle order changes. Every lane takes part in the shuffles, owner or not,
// so they stay convergent; all lanes of a group own it or none do (G divides H).
template <typename T, int G>
__device__ __forceinline__ float group_amax(const Vec16& v, bool owned) {
  static_assert(G % 8 == 0 && kWarpSize % (G / 8) == 0, "a group must fit in one warp");
  AbsMax<T> local;
  if (owned) {
#pragma unroll
    for (int i = 0; i < 4; ++i) local.add(v.w[i]);
  }
  float amax = local.value();
  if constexpr (kWarpReduxMax && G / 8 == kWarpSize / 2) {
    // A group per half-warp: one redux.sync over each half (the other half gives 0), instead of
    // four dependent shuffle levels. The amaxes are >= 0 or NaNs with the sign bit clear, which
    // order as unsigned integers do (warp_max's comment).
    const bool low_half = threadIdx.x % kWarpSize < kWarpSize / 2;
    const u32 bits = float_to_bits(amax);
    const u32 low = warp_max_unsigned(low_half ? bits : 0u), high = warp_max_unsigned(low_half ? 0u : bits);
    return bits_to_float(low_half ? low : high);
  } else {
#pragma unroll
    for (int mask = G / 16; mask > 0; mask >>= 1) amax = max_keep_nan(amax, shuffle_xor(amax, mask));
    return amax;
  }
}

// Calls body(k, vec, amax) for each vector y[k] this thread owns (vec: its index in the row),
// with amax over its group of G elements; every lane takes part in the group's shuffles.
template <typename T, int H, int THREADS, int VPT, int G, typename Body>
__device__ __forceinline__ void for_each_owned_vector(const Vec16 (&y)[VPT], Body&& body) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const bool owned = owns_vector<H, THREADS>(k);
    const float amax = group_amax<T, G>(y[k], owned);
    if (owned) body(k, int(threadIdx.x) + k * THREADS, amax);
  }
}

// Step 7b: per-token-group FP8. scales: the row's first scale (float, or byte for E8M0);
// group_stride: elements between the row's consecutive group scales (1 row-major, M column-major).
template <typename T, int H, int THREADS, int VPT, int G, int SCALE>
__device__ __forceinline__ void quantize_groups(const Vec16 (&y)[VPT], u8* out, void* scales, int group_stride) {
  static_assert(H % G == 0, "the group size must divide H");
  constexpr int kLanes = G / 8;
  for_each_owned_vector<T, H, THREADS, VPT, G>(y, [&](int k, int vec, float amax) {
    float v[8];
    unpack8<T>(y[k], v);
    float scale;
    if constexpr (SCALE == kScaleF32) {
      const Fp8Divisor divisor = fp8_divisor(amax, kFp8Max);  // |y| <= amax: fp8_divide's premise
      scale = divisor.scale;
      if (divisor.short_path) {
        fp8_divide8<true>(v, divisor);
      } else {
        fp8_divide8<false>(v, divisor);
      }
    } else {
      scale = ue8m0_round_up(fp8_scale(amax, kFp8Max));
      const float inverse = 1.0f / scale;  // a power of two: y * inverse is IEEE's y / scale
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = v[j] * inverse;
    }
    store8(out + vec * 8, pack_fp8x8(v));
    if (vec % kLanes != 0) return;
    const int at = (vec / kLanes) * group_stride;
    if constexpr (SCALE == kScaleE8m0) {
      static_cast<u8*>(scales)[at] = e8m0_byte(scale);
    } else {
      static_cast<float*>(scales)[at] = scale;
    }
  });
}

// Step 7c: MXFP4. out: the row's packed elements (H / 2 bytes); scales: the row's first E8M0 byte.
template <typename T, int H, int THREADS, int VPT>
__device__ __forceinline__ void quantize_mx(const Vec16 (&y)[VPT], u8* out, u8* scales, int group_stride) {
  static_assert(H % kMxBlockSize == 0, "MXFP4 needs H divisible by 32");
  constexpr int kLanes = kMxBlockSize / 8;
  for_each_owned_vector<T, H, THREADS, VPT, kMxBlockSize>(y, [&](int k, int vec, float amax) {
    const bool finite = amax <= 0x1.fffffep127f;  // false for NaN and Inf: scale NaN, elements 0
    const int e = finite ? mx_exponent(amax) : 0;
    u32 packed = 0;
    if (finite && kBf16PairOps && kIsBf16<T>) {
      const u32 multiplier = u32(127 - e) << 7;  // 2^-e in bf16, normal for -127 <= e <= 125
      packed = e2m1_vector_bytes<Bf16PairOps>(y[k].w, multiplier * 0x10001u);
    } else if (finite) {
      const float multiplier = bits_to_float(u32(127 - e) << 23);  // 2^-e, a normal float for e <= 125
      float v[8];
      unpack8<T>(y[k], v);
#pragma unroll
      for (int j = 0; j < 8; ++j) packed |= e2m1_code(v[j] * multiplier) << (4 * j);  // element 2i: low nibble
    }
    *reinterpret_cast<u32*>(out + vec * 4) = packed;
    if (vec % kLanes == 0) scales[(vec / kLanes) * group_stride] = finite ? u8(e + 127) : u8(0xff);
  });
}

// Step 7d: static per-tensor FP8, q = fp8(y * inverse) with inverse = 1 / scale (the form the
// engines' kernels use, so their bytes): no amax, no scale written.
template <typename T, int H, int THREADS, int VPT>
__device__ __forceinline__ void quantize_static(const Vec16 (&y)[VPT], u8* out, float inverse) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (!owns_vector<H, THREADS>(k)) continue;
    float v[8];
    unpack8<T>(y[k], v);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = v[j] * inverse;
    store8(out + (threadIdx.x + k * THREADS) * 8, pack_fp8x8(v));
  }
}

// The call's scale for the modes that read one (fp8_static: its inverse; nvfp4: the global
// scale and its inverse), read where the kernel runs so that a graph replays with what the
// pointer holds then.
struct QuantScale {
  float value = 1.0f, inverse = 1.0f;
};
template <int QUANT>
__device__ __forceinline__ float load_quant_scale(const float* scale) {
  if constexpr (kQuantIsStaticFp8<QUANT> || kQuantIsNvfp4<QUANT>) return *scale;
  return 1.0f;
}
template <int QUANT>
__device__ __forceinline__ QuantScale quant_scale_of(float value) {
  QuantScale s;
  if constexpr (kQuantIsStaticFp8<QUANT> || kQuantIsNvfp4<QUANT>) s.value = value, s.inverse = 1.0f / value;
  return s;
}
template <int QUANT>
__device__ __forceinline__ QuantScale read_quant_scale(const float* scale) {
  return quant_scale_of<QUANT>(load_quant_scale<QUANT>(scale));
}

// Where NVFP4 scales go: `scales` is the row's first (row_scales; for the swizzled layout the
// row's part of the offset); swizzled_tiles: 0 for the linear layout [tokens, H / 16], else the
// swizzled layout's tiles per row.
__device__ __forceinline__ int nvfp4_column_offset(int column, int swizzled_tiles) {
  return swizzled_tiles ? swizzled_column_offset(column) : column;
}

// Step 7e: NVFP4. out: the row's packed elements (H / 2 bytes); blocks of 16 elements are two
// lanes' vectors. In the swizzled layout the row's padding columns (to a multiple of 4) are zeros.
template <typename T, int H, int THREADS, int VPT>
__device__ __forceinline__ void quantize_nvfp4(const Vec16 (&y)[VPT], u8* out, u8* scales, int swizzled_tiles,
                                               QuantScale global) {
  static_assert(H % kNvfp4BlockSize == 0, "NVFP4 needs H divisible by 16");
  constexpr int kColumns = H / kNvfp4BlockSize, kLanes = kNvfp4BlockSize / 8;
  for_each_owned_vector<T, H, THREADS, VPT, kNvfp4BlockSize>(y, [&](int k, int vec, float amax) {
    const Nvfp4Block block = nvfp4_block(amax, global.value, global.inverse);
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

// The first scale of `row`: scales hold bytes (E8M0, MXFP4, NVFP4) or floats, row_stride apart;
// NVFP4's swizzled layout (group_stride 0) places the row by swizzled_row_offset, row_stride its
// tiles per row.
template <int QUANT, int SCALE>
__device__ __forceinline__ void* row_scales(void* scales, int row, int row_stride, int group_stride) {
  if constexpr (kQuantIsNvfp4<QUANT>) {
    return static_cast<u8*>(scales) +
           (group_stride == 0 ? swizzled_row_offset(row, row_stride) : (long long)row * row_stride);
  }
  const long long offset = (long long)row * row_stride;
  if constexpr (SCALE == kScaleE8m0 || kQuantIsMxfp4<QUANT>) return static_cast<u8*>(scales) + offset;
  return static_cast<float*>(scales) + offset;
}

// The bytes of one unit of `out`'s row stride: T without quant; fp8 and MXFP4 outputs count bytes.
template <typename T, int QUANT>
inline constexpr int kOutUnitBytes = QUANT == kQuantNone ? int(sizeof(T)) : 1;

// Bytes of one row of a contiguous `out`.
template <typename T, int H, int QUANT>
inline constexpr long long kOutRowBytes = kQuantPacksFp4<QUANT> ? H / 2 : H*(long long)kOutUnitBytes<T, QUANT>;

// Where row `row` of each caller tensor starts, in its elements (out_bytes: in bytes). VIEWS (the
// spec's views field): the strides the call passed; otherwise every tensor is contiguous and out
// unpadded, the widths compile-time constants (run-time strides cost the contiguous calls time at
// small row counts: docs/performance.md, "Tuning decisions").
template <typename T, int H, int QUANT, bool VIEWS>
struct RowOffsets {
  RowStrides s;
  __device__ __forceinline__ long long input(int row) const { return (long long)row * (VIEWS ? s.input : H); }
  __device__ __forceinline__ long long residual_in(int row) const {
    return (long long)row * (VIEWS ? s.residual_in : H);
  }
  __device__ __forceinline__ long long residual_out(int row) const {
    return (long long)row * (VIEWS ? s.residual_out : H);
  }
  __device__ __forceinline__ long long mirror(int row) const { return (long long)row * (VIEWS ? s.mirror : H); }
  __device__ __forceinline__ long long out(int row) const { return (long long)row * (VIEWS ? s.out : H); }  // T out
  __device__ __forceinline__ long long out_bytes(int row) const {
    return VIEWS ? (long long)row * s.out * kOutUnitBytes<T, QUANT> : row * kOutRowBytes<T, H, QUANT>;
  }
  __device__ __forceinline__ int out_width() const { return VIEWS ? s.out_width : H; }
};

// Zeros over columns [H, width) of one row of `out`, T or per-tensor or per-token FP8 (width: a
// multiple of 8; the block-scaled modes take no padding).
template <typename T, int H, int THREADS, int QUANT>
__device__ __forceinline__ void zero_padding(void* out_row, int width) {
  if constexpr (QUANT == kQuantNone || kQuantIsTokenFp8<QUANT> || kQuantIsStaticFp8<QUANT>) {
    // A constant H (contiguous kernels) drops the loop here: the compiler cannot tell that the
    // signed loop index below never starts negative.
    if (width <= H) return;
    constexpr int kUnit = kOutUnitBytes<T, QUANT>;
    u8* padding = static_cast<u8*>(out_row) + H * kUnit;
    const int words = (width - H) * kUnit / 8;
    for (int i = threadIdx.x; i < words; i += THREADS) store8(padding + i * 8, Vec8{});
  }
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
  o.swizzled_tiles = kQuantIsNvfp4<QUANT> && group_stride == 0 ? row_stride : 0;
  o.quant_scale = quant_scale;
}

// Step 7b, 7c, 7d or 7e of a row that is y: the quantisers that need no block reduction (the
// epilogue's last step, and group_quant's whole work).
template <typename T, int H, int THREADS, int VPT, int QUANT, int GROUP, int SCALE>
__device__ __forceinline__ void quantize_without_reduction(const Vec16 (&y)[VPT], const RowOutputs<T>& row) {
  u8* out = static_cast<u8*>(row.out);
  if constexpr (kQuantIsMxfp4<QUANT>) {
    quantize_mx<T, H, THREADS, VPT>(y, out, static_cast<u8*>(row.scale), row.scale_group_stride);
  } else if constexpr (kQuantIsGroupFp8<QUANT>) {
    quantize_groups<T, H, THREADS, VPT, GROUP, SCALE>(y, out, row.scale, row.scale_group_stride);
  } else if constexpr (kQuantIsStaticFp8<QUANT>) {
    quantize_static<T, H, THREADS, VPT>(y, out, row.quant_scale.inverse);
  } else if constexpr (kQuantIsNvfp4<QUANT>) {
    quantize_nvfp4<T, H, THREADS, VPT>(y, out, static_cast<u8*>(row.scale), row.swizzled_tiles, row.quant_scale);
  }
}

// NVFP4's swizzled padding rows, by every block of a kernel that quantises rows [0, tokens).
template <int THREADS, int QUANT>
__device__ __forceinline__ void zero_scale_padding(void* scales, int tokens, int row_stride, int group_stride) {
  if constexpr (kQuantIsNvfp4<QUANT>) {
    if (group_stride == 0) zero_swizzled_padding_rows<THREADS>(static_cast<u8*>(scales), tokens, row_stride);
  }
}

// The weight, copied into shared memory by stage_weight while the row's loads are in flight:
// step 5's read after the reductions is then a shared-memory hit instead of an L1/L2 round trip
// on the row's critical path, and no register holds it across the reductions (faster than either
// alternative: docs/performance.md, "Tuning decisions"). Without an asynchronous copy (AMD)
// `vectors` is the weight in global memory, read after the reductions.
struct StagedWeight {
  const Vec16* vectors;
  __device__ __forceinline__ void wait() const { wait_async_copies(); }
};

// Each thread copies the weight vectors it will read (the ones it owns), so reading them needs
// no block barrier, only the thread's own wait.
template <typename T, int H, int THREADS, int VPT>
__device__ __forceinline__ StagedWeight stage_weight(const T* weight, Vec16 (&staged)[THREADS * VPT]) {
  if constexpr (kAsyncCopy) {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int vec = threadIdx.x + k * THREADS;
      if (owns_vector<H, THREADS>(k)) copy_async16(&staged[vec], weight + vec * 8);
    }
    return StagedWeight{staged};
  } else {
    return StagedWeight{reinterpret_cast<const Vec16*>(weight)};
  }
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
  if constexpr (kQuantIsTokenFp8<QUANT>) {
    quantize_row<T, H, THREADS, VPT>(y, static_cast<u8*>(row.out), static_cast<float*>(row.scale), scratch);
  } else {
    quantize_without_reduction<T, H, THREADS, VPT, QUANT, GROUP, SCALE>(y, row);
  }
  zero_padding<T, H, THREADS, QUANT>(row.out, row.out_width);
}

}  // namespace arfuse
