// Bit-exact software conversions for block-scaled formats (contract steps 7b and 7c), written
// from the OCP Microscaling (MX) v1.0 definitions, independently of any device code:
//   E2M1 (FP4): sign bit 3, exponent bits 2-1 (bias 1), mantissa bit 0; values
//     {0, 0.5, 1, 1.5, 2, 3, 4, 6}, no Inf or NaN;
//   E8M0: an unsigned biased exponent, 2^(byte - 127), byte 0xFF is NaN;
//   UE8M0 rounding: a positive scale rounded up to a power of two.
#pragma once

#include <cstdint>

#include "arfuse/error.hpp"

namespace arfuse::reference {

inline constexpr std::uint8_t kE8m0Nan = 0xff;

float e2m1_to_float(std::uint8_t nibble);
// Round to nearest, ties to the even code (mantissa bit 0), saturating at +-6; the sign is kept,
// also for a zero result. Defined for every float but NaN (block quantisers zero those blocks).
std::uint8_t float_to_e2m1(float value);

float e8m0_to_float(std::uint8_t byte);
// The byte of a power of two in [2^-127, 2^127], or kE8m0Nan for NaN; Error otherwise.
std::uint8_t e8m0_of(float power_of_two);

// floor(log2(x)) for a finite x > 0, subnormals included, read off the fp32 bits.
int floor_log2(float x);

// The smallest power of two >= scale, at least 2^-127; NaN for a non-finite scale (and above
// 2^127, which no amax / FP8_MAX reaches). Scales are positive (amax / FP8_MAX, or 1).
float ue8m0_round_up(float scale);

}  // namespace arfuse::reference
