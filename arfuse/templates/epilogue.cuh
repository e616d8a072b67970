// The epilogue for one token row, shared by every kernel: residual add, RMSNorm (ordinary or
// Gemma) and optional per-token FP8 quantisation, steps 2-7 of the numeric contract
// (shared/design.md). Each thread owns VPT vectors of 8 elements, vector index
// tid + k * THREADS, so the order of every sum depends only on H and the block shape.
#pragma once

#include "fp8_divide.cuh"
#include "limits.cuh"
#include "platform.cuh"

namespace arfuse {

// Shared memory for the two block reductions: one partial per warp, plus the broadcast slot.
struct ReduceScratch {
  float sum[kWarpSize + 1];
  float amax[kWarpSize + 1];
};

__device__ __forceinline__ float warp_sum(float v) {
  // Butterfly: every lane ends with the same value, and a + b == b + a bit for bit.
#pragma unroll
  for (int mask = kWarpSize / 2; mask > 0; mask >>= 1) v += shuffle_xor(v, mask);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int mask = kWarpSize / 2; mask > 0; mask >>= 1) v = max_keep_nan(v, shuffle_xor(v, mask));
  return v;
}

// Cross-warp step: the first warp loads the per-warp partials (lanes without one load 0, the
// identity for these nonnegative partials) and reduces them with shuffles. No thread folds
// partials serially.
template <int THREADS, bool IS_MAX>
__device__ __forceinline__ float block_reduce(float v, float* partials) {
  constexpr int kWarps = THREADS / kWarpSize;
  static_assert(THREADS % kWarpSize == 0 && kWarps <= kWarpSize, "block shape");
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = IS_MAX ? warp_max(v) : warp_sum(v);
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float p = lane < kWarps ? partials[lane] : 0.0f;
    p = IS_MAX ? warp_max(p) : warp_sum(p);
    if (lane == 0) partials[kWarpSize] = p;
  }
  __syncthreads();
  return partials[kWarpSize];
}

template <int H, int THREADS>
__device__ __forceinline__ bool owns_vector(int k) {
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

// q = fp8(y / scale) for this thread's vectors, the division on one of fp8_divide.cuh's paths.
template <typename T, int H, int THREADS, int VPT, bool SHORT_PATH>
__device__ __forceinline__ void quantize_vectors(const Vec16 (&y)[VPT], u8* out, const Fp8Divisor& divisor) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (!owns_vector<H, THREADS>(k)) continue;
    float v[8];
    unpack8<T>(y[k], v);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = SHORT_PATH ? fp8_divide_short(v[j], divisor) : fp8_divide_general(v[j], divisor);
    Vec8 q;
#pragma unroll
    for (int i = 0; i < 2; ++i) q.w[i] = fp8x2(v[4 * i], v[4 * i + 1]) | (fp8x2(v[4 * i + 2], v[4 * i + 3]) << 16);
    store8(out + (threadIdx.x + k * THREADS) * 8, q);
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

// Outputs of one row; pointers already offset to the row. `out` is T (no quant) or fp8 bytes.
template <typename T>
struct RowOutputs {
  T* residual_out;
  void* out;
  float* scale;  // one float, quant modes only
  T* mirror;     // kQuantFp8Mirror only
};

// ar = T(fold) (step 1, done by the caller) and the row's residual_in, packed. The weight is
// read only after the sum of squares (an L1 hit after the first row), so it holds no registers
// across the reductions.
template <typename T, int H, int THREADS, int VPT, int QUANT, int NORM>
__device__ __forceinline__ void epilogue_row(const Vec16 (&ar)[VPT], const Vec16 (&residual)[VPT], const T* weight,
                                             float eps, const RowOutputs<T>& row, ReduceScratch& scratch) {
  // Step 2: res = T(ar + residual_in) -> residual_out.
  Vec16 res[VPT];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (!owns_vector<H, THREADS>(k)) continue;
    float a[8], r[8];
    unpack8<T>(ar[k], a);
    unpack8<T>(residual[k], r);
#pragma unroll
    for (int j = 0; j < 8; ++j) a[j] = a[j] + r[j];
    res[k] = pack8<T>(a);
    store16(row.residual_out + (threadIdx.x + k * THREADS) * 8, res[k]);
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
  // Step 4: IEEE division and sqrt (the JIT never passes fast-math options).
  const float inv = 1.0f / sqrtf(ss / float(H) + eps);
  // Steps 5-6: g = f(w) (+ 1 for Gemma), y = T((res * inv) * g).
  Vec16 y[VPT];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (!owns_vector<H, THREADS>(k)) continue;
    const int vec = threadIdx.x + k * THREADS;
    float v[8], g[8];
    unpack8<T>(res[k], v);
    unpack8<T>(load16(weight + vec * 8), g);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = (v[j] * inv) * (NORM == kNormGemma ? g[j] + 1.0f : g[j]);
    y[k] = pack8<T>(v);
    if (QUANT == kQuantNone) store16(static_cast<T*>(row.out) + vec * 8, y[k]);
    if (QUANT == kQuantFp8Mirror) store16(row.mirror + vec * 8, y[k]);
  }
  // Step 7.
  if (QUANT != kQuantNone) quantize_row<T, H, THREADS, VPT>(y, static_cast<u8*>(row.out), row.scale, scratch);
}

}  // namespace arfuse
