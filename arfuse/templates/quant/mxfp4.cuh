// Step 7c of the numeric contract: MXFP4 (OCP MX v1.0), blocks of 32 E2M1 elements sharing one
// E8M0 scale.
#pragma once

#include "microscaling.cuh"
#include "quant/blocks.cuh"
#include "quant/quantiser.cuh"
#include "quant_table.cuh"

namespace arfuse {

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

template <>
struct Quantiser<kQuantMxfp4> : QuantiserDefaults {
  template <typename T, int H, int THREADS, int VPT, int GROUP, int SCALE, typename Row>
  __device__ __forceinline__ static void quantize(const Vec16 (&y)[VPT], const Row& row, ReduceScratch*) {
    quantize_mx<T, H, THREADS, VPT>(y, static_cast<u8*>(row.out), static_cast<u8*>(row.scale), row.scale_group_stride);
  }
};

}  // namespace arfuse
