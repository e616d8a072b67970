// Eight elements to FP8 at once: the packing every FP8 quantiser stores, and the division by a
// scale on one of fp8_divide.cuh's paths.
#pragma once

#include "fp8_divide.cuh"
#include "platform.cuh"

namespace arfuse {

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

}  // namespace arfuse
