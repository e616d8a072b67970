// Step 7d of the numeric contract: static per-tensor FP8 with a calibrated scale.
#pragma once

#include "quant/fp8_vectors.cuh"
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

}  // namespace arfuse
