#include "reference/microscaling.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "arfuse/error.hpp"

#include "reference/numerics.hpp"

namespace arfuse::reference {
namespace {

// The eight E2M1 magnitudes by code (bits 2-0): subnormal 0.5 at exponent 0, then 1.m * 2^(e-1).
constexpr std::array<float, 8> kE2m1 = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

}  // namespace

float e2m1_to_float(std::uint8_t nibble) {
  if (nibble > 0xf) throw Error("e2m1_to_float: " + std::to_string(nibble) + " is not a 4-bit code");
  const float magnitude = kE2m1[nibble & 0x7];
  return (nibble & 0x8) ? -magnitude : magnitude;
}

std::uint8_t float_to_e2m1(float value) {
  if (std::isnan(value)) throw Error("float_to_e2m1: NaN has no E2M1 code");
  const std::uint8_t sign = std::signbit(value) ? 0x8 : 0;
  const double a = std::fabs(double(value));
  if (a >= 6.0) return sign | 0x7;
  int code = 0;
  while (kE2m1[code + 1] <= a) ++code;  // kE2m1[code] <= a < kE2m1[code + 1]
  const double down = a - kE2m1[code], up = kE2m1[code + 1] - a;
  if (up < down || (up == down && code % 2 == 1)) ++code;  // tie: the even code (mantissa 0)
  return sign | std::uint8_t(code);
}

float e8m0_to_float(std::uint8_t byte) {
  if (byte == kE8m0Nan) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int(byte) - 127);
}

std::uint8_t e8m0_of(float power_of_two) {
  if (std::isnan(power_of_two)) return kE8m0Nan;
  int exponent = 0;
  const float fraction = std::frexp(power_of_two, &exponent);  // 0.5 * 2^exponent
  if (!(power_of_two > 0.0f) || std::isinf(power_of_two) || fraction != 0.5f || exponent - 1 < -127 ||
      exponent - 1 > 127) {
    throw Error("e8m0_of: " + std::to_string(power_of_two) + " is not a power of two in [2^-127, 2^127]");
  }
  return std::uint8_t(exponent - 1 + 127);
}

int floor_log2(float x) {
  if (!(x > 0.0f) || std::isinf(x)) throw Error("floor_log2 needs a finite x > 0");
  const std::uint32_t b = float_to_bits(x);
  const int field = int(b >> 23);
  if (field != 0) return field - 127;
  // Subnormal: 2^-149 times the mantissa; the highest set bit gives the exponent.
  int top = 22;
  while (!(b & (1u << top))) --top;
  return top - 149;
}

float ue8m0_round_up(float scale) {
  if (!std::isfinite(scale)) return std::numeric_limits<float>::quiet_NaN();
  if (!(scale > 0.0f)) throw Error("ue8m0_round_up needs a positive scale");
  int e = floor_log2(scale);
  if (std::ldexp(1.0f, e) != scale) ++e;                        // not a power of two: the next one up
  if (e > 127) return std::numeric_limits<float>::quiet_NaN();  // 2^128 is not a float
  if (e < -127) e = -127;
  return std::ldexp(1.0f, e);
}

}  // namespace arfuse::reference
