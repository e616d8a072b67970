// The bit-level steps of block-scaled quantisation (contract steps 7b and 7c) that the kernels
// run, shared with the host build so that tests/test_block_scaled.cpp checks this very code
// against the reference model over every bf16 value and every exponent: UE8M0 rounding of a
// scale, floor(log2) of an amax, and the E2M1 code of an element. Plain C++ on the host.
#pragma once

#include "host_device.cuh"

namespace arfuse {

// x != 0.
ARFUSE_HOST_DEVICE inline int leading_zeros(unsigned x) {
#if defined(ARFUSE_VENDOR_NVIDIA) && (defined(__CUDA_ARCH__) || defined(__CUDACC_RTC__))
  return __clz(int(x));
#else
  return __builtin_clz(x);
#endif
}

// The smallest power of two >= a positive scale, at least 2^-127, read off the fp32 bits; the
// quiet NaN 0x7fc00000 for a non-finite scale and above 2^127.
ARFUSE_HOST_DEVICE inline float ue8m0_round_up(float scale) {
  const float nan = bits_to_float(0x7fc00000u);
  if (!(scale <= 0x1.fffffep127f)) return nan;
  const unsigned bits = float_to_bits(scale), exponent = bits >> 23, mantissa = bits & 0x7fffffu;
  if (exponent == 0) return bits_to_float(bits <= 0x00400000u ? 0x00400000u : 0x00800000u);  // 2^-127, 2^-126
  if (mantissa == 0) return scale;
  return exponent == 254 ? nan : bits_to_float((exponent + 1) << 23);
}

// The E8M0 byte of a power of two from ue8m0_round_up: 2^-127 (a subnormal) -> 0, NaN -> 0xff.
ARFUSE_HOST_DEVICE inline unsigned char e8m0_byte(float power_of_two) {
  return (unsigned char)(float_to_bits(power_of_two) >> 23);
}

// floor(log2(x)) of a finite x > 0, subnormals included.
ARFUSE_HOST_DEVICE inline int floor_log2(float x) {
  const unsigned bits = float_to_bits(x);
  const int exponent = int(bits >> 23);
  return exponent != 0 ? exponent - 127 : (31 - leading_zeros(bits)) - 149;
}

// MXFP4's shared exponent for a finite amax: floor(log2(amax)) - 2 (2 is E2M1's largest
// exponent), clamped to [-127, 127]; -127 for 0.
ARFUSE_HOST_DEVICE inline int mx_exponent(float amax) {
  if (!(amax > 0.0f)) return -127;
  const int e = floor_log2(amax) - 2;
  return e < -127 ? -127 : e > 127 ? 127 : e;
}

// E2M1 code of a finite v: round to nearest, ties to the even code, saturating at 6, sign kept
// (also for zero). Below 2 the values are the halves 0..1.5: 2|v| rounded to an integer by the
// one fp32 addition of 2^23 (spacing 1 there; the FPU's own ties-to-even), read off the low
// bits. From 2 up E2M1 is a float with one mantissa bit: |v|'s bits rounded to that bit with
// ties to even (add 2^21 - 1 plus the kept bit's parity), then exponent and bit are the code
// (2 -> 4 ... 6 -> 7), saturating at 7. No chain of comparisons: a few integer operations.
ARFUSE_HOST_DEVICE inline unsigned e2m1_code(float v) {
  const unsigned bits = float_to_bits(v), magnitude_bits = bits & 0x7fffffffu;
  const float a = bits_to_float(magnitude_bits);
  unsigned magnitude;
  if (a < 2.0f) {
    magnitude = float_to_bits(a * 2.0f + 0x1p23f) & 0x7u;  // a * 2 is exact, so a fused multiply-add rounds alike
  } else {
    const unsigned rounded = (magnitude_bits + 0x1fffffu + ((magnitude_bits >> 22) & 1u)) >> 22;
    magnitude = rounded - 252u < 7u ? rounded - 252u : 7u;  // exponent 128 (2.0) -> 4
  }
  return ((bits >> 28) & 0x8u) | magnitude;
}

}  // namespace arfuse
