// The scale a call passes by pointer for the modes that read one (kQuantReadsScale).
#pragma once

#include "platform.cuh"
#include "quant_table.cuh"

namespace arfuse {

// The call's scale for the modes that read one, and its inverse (the static scale's, or the
// global scale's), read where the kernel runs so that a graph replays with what the
// pointer holds then.
struct QuantScale {
  float value = 1.0f, inverse = 1.0f;
};
template <int QUANT>
__device__ __forceinline__ float load_quant_scale(const float* scale) {
  if constexpr (kQuantReadsScale<QUANT>) return *scale;
  return 1.0f;
}
template <int QUANT>
__device__ __forceinline__ QuantScale quant_scale_of(float value) {
  QuantScale s;
  if constexpr (kQuantReadsScale<QUANT>) s.value = value, s.inverse = 1.0f / value;
  return s;
}
template <int QUANT>
__device__ __forceinline__ QuantScale read_quant_scale(const float* scale) {
  return quant_scale_of<QUANT>(load_quant_scale<QUANT>(scale));
}

}  // namespace arfuse
