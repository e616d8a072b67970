// Step 7 of the numeric contract: per-token FP8, one scale per row from the row's amax.
#pragma once

#include "quant/fp8_vectors.cuh"
#include "quant/quantiser.cuh"
#include "quant_table.cuh"
#include "reduce.cuh"
#include "row.cuh"

namespace arfuse {

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

// Per-token FP8 reduces its amax over the row, in the caller's scratch.
template <>
struct Quantiser<kQuantFp8> : QuantiserDefaults {
  template <typename T, int H, int THREADS, int VPT, int GROUP, int SCALE, typename Row>
  __device__ __forceinline__ static void quantize(const Vec16 (&y)[VPT], const Row& row, ReduceScratch* scratch) {
    quantize_row<T, H, THREADS, VPT>(y, static_cast<u8*>(row.out), static_cast<float*>(row.scale), *scratch);
  }
};

}  // namespace arfuse
