#include "reference/numerics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace arfuse::reference {
namespace {

// The nonnegative finite values of an e4m3 format, indexed by code 0..0x7f (NaN slots hold
// NaN). fn: bias 7, 0x7f is NaN, max 448. fnuz: bias 8, 0x80 is NaN, max 240.
std::array<float, 128> fp8_table(Fp8Format format) {
  const int bias = format == Fp8Format::e4m3fn ? 7 : 8;
  std::array<float, 128> table{};
  for (int code = 0; code < 128; ++code) {
    const int exponent = code >> 3, mantissa = code & 7;
    table[code] = exponent == 0 ? std::ldexp(float(mantissa) / 8.0f, 1 - bias)
                                : std::ldexp(1.0f + float(mantissa) / 8.0f, exponent - bias);
  }
  if (format == Fp8Format::e4m3fn) table[0x7f] = std::numeric_limits<float>::quiet_NaN();
  return table;
}

const std::array<float, 128>& table_for(Fp8Format format) {
  static const auto fn = fp8_table(Fp8Format::e4m3fn);
  static const auto fnuz = fp8_table(Fp8Format::e4m3fnuz);
  return format == Fp8Format::e4m3fn ? fn : fnuz;
}

}  // namespace

float bits_to_float(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint32_t float_to_bits(float value) {
  std::uint32_t b;
  std::memcpy(&b, &value, 4);
  return b;
}

float bf16_to_float(std::uint16_t bits) { return bits_to_float(std::uint32_t(bits) << 16); }

std::uint16_t float_to_bf16(float value) {
  if (std::isnan(value)) return 0x7fff;
  const std::uint32_t b = float_to_bits(value);
  const std::uint32_t lower = b & 0xffff, upper = b >> 16;
  const bool up = lower > 0x8000 || (lower == 0x8000 && (upper & 1));
  return std::uint16_t(upper + (up ? 1 : 0));  // a carry into the exponent is right, to Inf too
}

float f16_to_float(std::uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  float magnitude;
  if (exponent == 31) {
    magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(float(mantissa), -24);
  } else {
    magnitude = std::ldexp(float(1024 + mantissa), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

std::uint16_t float_to_f16(float value) {
  if (std::isnan(value)) return 0x7fff;
  const std::uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isinf(value)) return sign | 0x7c00;
  const double a = std::fabs(double(value));
  if (a < std::ldexp(1.0, -14)) {
    // Subnormal: an exact scaling, then round-to-nearest-even to an integer (0..1024).
    return std::uint16_t(sign | std::uint16_t(std::nearbyint(a * std::ldexp(1.0, 24))));
  }
  int exponent = 0;
  const double fraction = std::frexp(a, &exponent);          // a = fraction * 2^exponent, [0.5, 1)
  double scaled = std::nearbyint(std::ldexp(fraction, 11));  // 1024..2048, RNE
  if (scaled == 2048.0) scaled = 1024.0, ++exponent;
  const int biased = exponent - 1 + 15;
  if (biased >= 31) return sign | 0x7c00;
  return std::uint16_t(sign | (biased << 10) | (int(scaled) - 1024));
}

float max_keep_nan(float a, float b) { return (a != a || a > b) ? a : b; }

float fp8_max(Fp8Format format) { return format == Fp8Format::e4m3fn ? 448.0f : 240.0f; }

float fp8_to_float(std::uint8_t code, Fp8Format format) {
  if (format == Fp8Format::e4m3fnuz && code == 0x80) return std::numeric_limits<float>::quiet_NaN();
  const float magnitude = table_for(format)[code & 0x7f];
  return (code & 0x80) ? -magnitude : magnitude;
}

std::uint8_t float_to_fp8(float value, Fp8Format format) {
  const bool fn = format == Fp8Format::e4m3fn;
  if (std::isnan(value)) return fn ? 0x7f : 0x80;
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0;
  const float a = std::fabs(value);
  const int max_code = fn ? 0x7e : 0x7f;
  const auto& table = table_for(format);
  std::uint8_t code;
  if (a >= table[max_code]) {
    code = std::uint8_t(max_code);  // saturate, Inf too
  } else {
    // The first code whose value is >= a; then choose between it and the one below.
    const auto it = std::lower_bound(table.begin(), table.begin() + max_code + 1, a);
    int above = int(it - table.begin());
    if (table[above] == a) {
      code = std::uint8_t(above);
    } else {
      const int below = above - 1;
      const float down = a - table[below], up = table[above] - a;  // both exact in f32
      code = std::uint8_t(down < up ? below : up < down ? above : (below % 2 == 0 ? below : above));
    }
  }
  if (!fn && code == 0) return 0;  // fnuz has no negative zero
  return sign | code;
}

}  // namespace arfuse::reference
