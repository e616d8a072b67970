// Step 7b of the numeric contract: per-token-group FP8, one scale per group of G elements.
#pragma once

#include "microscaling.cuh"
#include "quant/blocks.cuh"
#include "quant/fp8_vectors.cuh"
#include "quant/quantiser.cuh"
#include "quant_table.cuh"

namespace arfuse {

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

template <>
struct Quantiser<kQuantFp8Group> : QuantiserDefaults {
  template <typename T, int H, int THREADS, int VPT, int GROUP, int SCALE, typename Row>
  __device__ __forceinline__ static void quantize(const Vec16 (&y)[VPT], const Row& row, ReduceScratch*) {
    quantize_groups<T, H, THREADS, VPT, GROUP, SCALE>(y, static_cast<u8*>(row.out), row.scale, row.scale_group_stride);
  }
};

}  // namespace arfuse
