// q = y / scale for the per-token FP8 quantiser (step 7 of the contract) with one IEEE
// division per row instead of one per element: a product with the correctly rounded
// reciprocal, then one FMA correction step (Markstein), which is the correctly rounded
// quotient wherever nothing underflows. Scales below 2^-100 (rows of bf16 values near the
// bottom of the range) are taken together with y times 2^64, exact for powers of two, so the
// reciprocal never overflows. Where the steps still differ from y / scale in f32, both are
// below 2^-12 in magnitude with the same sign: the same FP8 code (+-0) in both formats.
// tests/test_fp8_divide.cpp checks that claim against IEEE division, for every bf16 and f16
// y with |y| <= amax, over sampled amax in [cpu] and over every amax in its [.exhaustive] case.
// Shared with that host test, so it proves this very code.
#pragma once

#include "host_device.cuh"  // a host includer includes <cmath> first (fmaf, copysignf)

namespace arfuse {

struct Fp8Divisor {
  float scale;       // scale * prescale
  float reciprocal;  // 1 / (scale * prescale), correctly rounded
  float prescale;    // 1, or 2^64 for scales below 2^-100
};

ARFUSE_HOST_DEVICE inline Fp8Divisor fp8_divisor(float scale) {
  Fp8Divisor d;
  d.prescale = scale < 0x1p-100f ? 0x1p64f : 1.0f;
  d.scale = scale * d.prescale;
  d.reciprocal = 1.0f / d.scale;
  return d;
}

// The sign is the dividend's (scale > 0): the correction step alone would turn -0 into +0.
// The correction is NaN only where an Inf took part (y = Inf in a row whose NaN made the scale
// 1, or a scale of Inf); the product alone is then IEEE's quotient (Inf, +-0 or NaN).
ARFUSE_HOST_DEVICE inline float fp8_divide(float y, const Fp8Divisor& d) {
  const float a = y * d.prescale;
  const float q = a * d.reciprocal;
  const float r = fmaf(-q, d.scale, a);
  const float corrected = fmaf(r, d.reciprocal, q);
  return copysignf(corrected == corrected ? corrected : q, y);
}

}  // namespace arfuse
