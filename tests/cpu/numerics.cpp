// [cpu] The reference conversions against known values, and the reference model's rules.
#include "reference/numerics.hpp"

#include <cmath>
#include <limits>

#include "reference/model.hpp"

#include "support.hpp"

using namespace arfuse;
using namespace arfuse::reference;

namespace {
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
}  // namespace

TEST_CASE("bf16 rounding is round-to-nearest-even with canonical NaN", "[cpu][numerics]") {
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(float_to_bf16(bits_to_float(0x3f808000)) == 0x3f80);  // tie, even stays
  CHECK(float_to_bf16(bits_to_float(0x3f818000)) == 0x3f82);  // tie, odd rounds up
  CHECK(float_to_bf16(bits_to_float(0x3f808001)) == 0x3f81);
  CHECK(float_to_bf16(bits_to_float(0x7f7fffff)) == 0x7f80);  // overflow to Inf
  CHECK(float_to_bf16(-kInf) == 0xff80);
  CHECK(float_to_bf16(kNaN) == 0x7fff);
  CHECK(float_to_bf16(-0.0f) == 0x8000);
  CHECK(bf16_to_float(0x4049) == 3.140625f);
}

TEST_CASE("f16 rounding handles ties, subnormals, overflow and NaN", "[cpu][numerics]") {
  CHECK(float_to_f16(1.0f) == 0x3c00);
  CHECK(float_to_f16(65504.0f) == 0x7bff);
  CHECK(float_to_f16(65519.0f) == 0x7bff);
  CHECK(float_to_f16(65520.0f) == 0x7c00);  // the midpoint to the next binade rounds to even: Inf
  CHECK(float_to_f16(1.0f + 1.0f / 2048) == 0x3c00);
  CHECK(float_to_f16(1.0f + 3.0f / 2048) == 0x3c02);
  CHECK(float_to_f16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float_to_f16(std::ldexp(1.0f, -25)) == 0x0000);  // tie to even zero
  CHECK(float_to_f16(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(float_to_f16(std::ldexp(1.0f, -14)) == 0x0400);
  CHECK(float_to_f16(-std::ldexp(1023.5f, -24)) == 0x8400);  // rounds up into the normals
  CHECK(float_to_f16(kNaN) == 0x7fff);
  CHECK(float_to_f16(-kInf) == 0xfc00);
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const std::uint16_t bits = std::uint16_t(h);
    if (((bits >> 10) & 31) == 31 && (bits & 1023)) continue;  // NaN
    REQUIRE(float_to_f16(f16_to_float(bits)) == bits);
  }
}

TEST_CASE("e4m3fn conversion: RNE, saturation, NaN", "[cpu][numerics]") {
  const auto fn = Fp8Format::e4m3fn;
  CHECK(float_to_fp8(448.0f, fn) == 0x7e);
  CHECK(float_to_fp8(464.0f, fn) == 0x7e);  // tie between 448 and (NaN) 480: saturates
  CHECK(float_to_fp8(1e6f, fn) == 0x7e);
  CHECK(float_to_fp8(kInf, fn) == 0x7e);
  CHECK(float_to_fp8(-kInf, fn) == 0xfe);
  CHECK(float_to_fp8(kNaN, fn) == 0x7f);
  CHECK(float_to_fp8(1.0f, fn) == 0x38);
  CHECK(float_to_fp8(1.0625f, fn) == 0x38);                 // tie: even mantissa 0
  CHECK(float_to_fp8(1.1875f, fn) == 0x3a);                 // tie: 1.125 (odd) vs 1.25 (even)
  CHECK(float_to_fp8(std::ldexp(1.0f, -9), fn) == 0x01);    // smallest subnormal
  CHECK(float_to_fp8(std::ldexp(1.0f, -10), fn) == 0x00);   // tie to zero
  CHECK(float_to_fp8(-std::ldexp(1.0f, -10), fn) == 0x80);  // negative zero exists in fn
  CHECK(float_to_fp8(std::ldexp(1.0f, -6), fn) == 0x08);
  CHECK(fp8_to_float(0x7e, fn) == 448.0f);
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    REQUIRE(float_to_fp8(fp8_to_float(std::uint8_t(c), fn), fn) == c);
  }
}

TEST_CASE("e4m3fnuz conversion: max 240, no negative zero, NaN 0x80", "[cpu][numerics]") {
  const auto fnuz = Fp8Format::e4m3fnuz;
  CHECK(float_to_fp8(240.0f, fnuz) == 0x7f);
  CHECK(float_to_fp8(300.0f, fnuz) == 0x7f);
  CHECK(float_to_fp8(-kInf, fnuz) == 0xff);
  CHECK(float_to_fp8(kNaN, fnuz) == 0x80);
  CHECK(float_to_fp8(-0.0f, fnuz) == 0x00);
  CHECK(float_to_fp8(-std::ldexp(1.0f, -12), fnuz) == 0x00);
  CHECK(float_to_fp8(std::ldexp(1.0f, -10), fnuz) == 0x01);
  CHECK(float_to_fp8(1.0f, fnuz) == 0x40);
  for (int c = 0; c < 256; ++c) {
    if (c == 0x80) continue;
    REQUIRE(float_to_fp8(fp8_to_float(std::uint8_t(c), fnuz), fnuz) == c);
  }
}

TEST_CASE("the reference fold is strictly in rank order and rounds once", "[cpu][numerics]") {
  // bf16: 256 + 1 + 1 in f32 is 258 exactly; rounding after each add would give 256.
  const std::uint16_t big = float_to_bf16(256.0f), one = float_to_bf16(1.0f);
  CHECK(bf16_to_float(fold({{big}, {one}, {one}}, DType::bf16)[0]) == 258.0f);
  // -0 + -0 stays -0 (the fold starts from x0, not from +0).
  CHECK(fold({{0x8000}, {0x8000}}, DType::bf16)[0] == 0x8000);
}

TEST_CASE("the reference epilogue: zero rows, scales and the mirror", "[cpu][numerics]") {
  EpilogueConfig c;
  c.hidden = 64, c.dtype = DType::bf16, c.mode.quant = Quant::fp8, c.mode.mirror = true;
  Bits16 zeros(64, 0), weight(64, float_to_bf16(1.0f));
  auto o = epilogue(c, 1, zeros, zeros, weight);
  CHECK(o.scales[0] == 1.0f);  // amax 0 -> scale 1
  CHECK(o.q == std::vector<std::uint8_t>(64, 0));
  Bits16 ones(64, float_to_bf16(1.0f));
  o = epilogue(c, 1, ones, zeros, weight);
  // res = 1 everywhere: ss/H = 1, inv = 1/sqrt(1 + eps) < 1, y rounds to 1 in bf16.
  CHECK(o.mirror[0] == float_to_bf16(1.0f));
  CHECK(o.scales[0] == 1.0f / 448.0f);
  CHECK(o.q[0] == 0x7e);
  std::vector<std::uint8_t> q;
  std::vector<float> s;
  token_quant(c, 1, o.mirror, q, s);
  CHECK(q == o.q);
  CHECK(s == o.scales);
}
