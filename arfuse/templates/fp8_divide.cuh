// q = y / scale for the per-token FP8 quantiser (step 7 of the contract) with one IEEE
// division per row instead of one per element: a product with the correctly rounded
// reciprocal, then one FMA correction step (Markstein), which is the correctly rounded
// quotient wherever nothing underflows.
//
// Two paths, chosen once per row. A row whose amax is finite and whose scale is at least
// 2^-100 (every row of real activations) takes the short one: three operations, and the
// correction written as q - (q * scale - y) / scale keeps the sign of a zero quotient. Every
// other row (NaN or Inf in it, or values near the bottom of the bf16 range) takes the general
// one: y times 2^64 when the scale is below 2^-100 (exact for powers of two), so the reciprocal
// never overflows, and the product alone where an Inf makes the correction NaN.
// Where the steps still differ from y / scale in f32, both are below 2^-12 in magnitude with
// the same sign: the same FP8 code (+-0) in both formats. tests/cpu/fp8_divide.cpp checks
// that claim against IEEE division, for every bf16 and f16 y with |y| <= amax, over sampled
// amax in [cpu] and over every amax in its [exhaustive] case. Shared with that host test, so
// it proves this very code.
#pragma once

#include "host_device.cuh"  // a host includer includes <cmath> first (fmaf, copysignf)

namespace arfuse {

struct Fp8Divisor {
  float scale;       // the row's scale: amax > 0 ? amax / fp8_max : 1
  float divisor;     // scale * prescale
  float reciprocal;  // 1 / divisor, correctly rounded
  float prescale;    // 1, or 2^64 for scales below 2^-100
  bool short_path;   // amax finite and scale >= 2^-100
};

// amax / fp8_max for amax > 0 a finite value of T (bf16 or f16) and fp8_max 448 or 240: the
// product with the rounded reciprocal and one FMA correction, which is IEEE's quotient for every
// such amax, subnormal quotients included (tests/cpu/fp8_divide.cpp checks all of them). A
// division is about a dozen instructions with its range check, and the block-scaled modes need
// one per group of every lane.
ARFUSE_HOST_DEVICE inline float quotient_by_fp8_max(float amax, float fp8_max) {
  const float reciprocal = 1.0f / fp8_max;  // a constant where fp8_max is one
  const float q = amax * reciprocal;
  return fmaf(fmaf(-q, fp8_max, amax), reciprocal, q);
}

// The rule of the contract: amax > 0 ? amax / fp8_max : 1 (NaN gives 1, Inf gives Inf).
ARFUSE_HOST_DEVICE inline float fp8_scale(float amax, float fp8_max) {
  if (!(amax > 0.0f)) return 1.0f;
  return amax <= 0x1.fffffep127f ? quotient_by_fp8_max(amax, fp8_max) : amax;
}

// 1 / d correctly rounded, for 2^-126 <= |d| < 2^126. On NVIDIA the hardware's approximation and
// one Newton step, which is what rcp.rn computes in that range, without the range check and the
// branch to its slow path (tests/gpu/epilogue.cpp compares every divisor the quantisers can
// form with IEEE's). Elsewhere the IEEE division.
ARFUSE_HOST_DEVICE inline float reciprocal_in_normal_range(float d) {
#if defined(ARFUSE_VENDOR_NVIDIA) && (defined(__CUDA_ARCH__) || defined(__CUDACC_RTC__))
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return fmaf(r, fmaf(-d, r, 1.0f), r);
#else
  return 1.0f / d;
#endif
}

ARFUSE_HOST_DEVICE inline Fp8Divisor fp8_divisor(float amax, float fp8_max) {
  Fp8Divisor d;
  d.scale = fp8_scale(amax, fp8_max);
  d.short_path = amax <= 0x1.fffffep127f && d.scale >= 0x1p-100f;  // false for NaN and Inf
  if (d.short_path) {
    // scale <= max(T) / 240 < 2^121: inside the reciprocal's range.
    d.prescale = 1.0f;
    d.divisor = d.scale;
    d.reciprocal = reciprocal_in_normal_range(d.divisor);
  } else {
    d.prescale = d.scale < 0x1p-100f ? 0x1p64f : 1.0f;
    d.divisor = d.scale * d.prescale;
    d.reciprocal = 1.0f / d.divisor;
  }
  return d;
}

// y / scale for a row on the short path: a zero y gives q = +-0 and a zero residual, so the
// correction leaves q, sign and all.
ARFUSE_HOST_DEVICE inline float fp8_divide_short(float y, const Fp8Divisor& d) {
  const float q = y * d.reciprocal;
  const float overshoot = fmaf(q, d.divisor, -y);
  return fmaf(-overshoot, d.reciprocal, q);
}

// Any row. The sign is the dividend's (scale > 0): the correction step alone would turn -0
// into +0. The correction is NaN only where an Inf took part (y = Inf in a row whose NaN made
// the scale 1, or a scale of Inf); the product alone is then IEEE's quotient (Inf, +-0, NaN).
ARFUSE_HOST_DEVICE inline float fp8_divide_general(float y, const Fp8Divisor& d) {
  const float a = y * d.prescale;
  const float q = a * d.reciprocal;
  const float r = fmaf(-q, d.divisor, a);
  const float corrected = fmaf(r, d.reciprocal, q);
  return copysignf(corrected == corrected ? corrected : q, y);
}

// The kernels pick the path once per row (a uniform branch); this is the same choice per call.
ARFUSE_HOST_DEVICE inline float fp8_divide(float y, const Fp8Divisor& d) {
  return d.short_path ? fp8_divide_short(y, d) : fp8_divide_general(y, d);
}

}  // namespace arfuse
