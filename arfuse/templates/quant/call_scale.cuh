// The scale a call passes by pointer for the modes that read one (static FP8, NVFP4).
#pragma once

#include "limits.cuh"
#include "platform.cuh"

namespace arfuse {

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

}  // namespace arfuse
