// Step 7d of the numeric contract: static per-tensor FP8 with a calibrated scale.
#pragma once

#include "quant/fp8_vectors.cuh"
#include "quant/quantiser.cuh"
#include "quant_table.cuh"
#include "row.cuh"

namespace arfuse {

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

template <>
struct Quantiser<kQuantFp8Static> : QuantiserDefaults {
  template <typename T, int H, int THREADS, int VPT, int GROUP, int SCALE, typename Row>
  __device__ __forceinline__ static void quantize(const Vec16 (&y)[VPT], const Row& row, ReduceScratch*) {
    quantize_static<T, H, THREADS, VPT>(y, static_cast<u8*>(row.out), row.quant_scale.inverse);
  }
};

}  // namespace arfuse
