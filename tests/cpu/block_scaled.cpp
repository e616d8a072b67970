// [cpu][quant] The block-scaled formats of contract steps 7b and 7c in the reference model:
// E2M1, E8M0 and UE8M0 conversions (every code, the edge exponents, ties), then per-token-group
// FP8 and MXFP4 on hand-worked rows.
#include "reference/block_scaled.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "arfuse/error.hpp"

#include "reference/microscaling.hpp"
#include "reference/numerics.hpp"

#include "support.hpp"

using namespace arfuse;
using namespace arfuse::reference;

namespace {
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const Fp8Format kFn = Fp8Format::e4m3fn;

Bits16 bf16_row(const std::vector<float>& values) {
  Bits16 bits;
  for (float v : values) bits.push_back(float_to_bf16(v));
  return bits;
}

// The E2M1 code nearest to v by distance to all eight magnitudes (ties: even code), the sign kept.
std::uint8_t nearest_e2m1(double v) {
  const double magnitudes[] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const double a = std::fabs(v);
  int best = 0;
  if (a >= 6.0) return std::uint8_t((std::signbit(v) ? 0x8 : 0) | 7);  // saturation (and Inf)
  for (int c = 1; c < 8; ++c) {
    const double d = std::fabs(magnitudes[c] - a), b = std::fabs(magnitudes[best] - a);
    if (d < b || (d == b && c % 2 == 0)) best = c;
  }
  return std::uint8_t((std::signbit(v) ? 0x8 : 0) | best);
}
}  // namespace

TEST_CASE("E2M1: every code decodes to its value and encodes back", "[cpu][quant]") {
  const float expected[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    const float v = e2m1_to_float(std::uint8_t(c));
    CHECK(v == (c & 8 ? -expected[c & 7] : expected[c & 7]));
    CHECK(std::signbit(v) == bool(c & 8));  // 0x8 is -0
    CHECK(float_to_e2m1(v) == c);
  }
  CHECK_THROWS_AS(e2m1_to_float(16), Error);
}

TEST_CASE("E2M1: round to nearest even, saturation at 6, sign kept for zero", "[cpu][quant]") {
  CHECK(float_to_e2m1(0.25f) == 0x0);  // tie 0 / 0.5: even (0)
  CHECK(float_to_e2m1(0.75f) == 0x2);  // tie 0.5 / 1: even (1.0)
  CHECK(float_to_e2m1(1.25f) == 0x2);  // tie 1 / 1.5: 1.0
  CHECK(float_to_e2m1(1.75f) == 0x4);  // tie 1.5 / 2: 2.0
  CHECK(float_to_e2m1(2.5f) == 0x4);   // tie 2 / 3: 2.0
  CHECK(float_to_e2m1(3.5f) == 0x6);   // tie 3 / 4: 4.0
  CHECK(float_to_e2m1(5.0f) == 0x6);   // tie 4 / 6: 4.0
  CHECK(float_to_e2m1(5.0001f) == 0x7);
  CHECK(float_to_e2m1(7.9f) == 0x7);  // saturates
  CHECK(float_to_e2m1(1e30f) == 0x7);
  CHECK(float_to_e2m1(kInf) == 0x7);
  CHECK(float_to_e2m1(-kInf) == 0xf);
  CHECK(float_to_e2m1(std::nextafter(0.25f, 1.0f)) == 0x1);
  CHECK(float_to_e2m1(std::nextafter(0.75f, 0.0f)) == 0x1);
  CHECK(float_to_e2m1(-0.25f) == 0x8);  // rounds to zero, keeps the sign
  CHECK(float_to_e2m1(-0.0f) == 0x8);
  CHECK(float_to_e2m1(-3.0f) == 0xd);
  CHECK_THROWS_AS(float_to_e2m1(kNaN), Error);
  // Every bf16 value (the inputs the kernels see), against the nearest code by distance.
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float v = bf16_to_float(std::uint16_t(b));
    if (std::isnan(v)) continue;
    REQUIRE(float_to_e2m1(v) == nearest_e2m1(v));
  }
}

TEST_CASE("E8M0: every byte, the edge exponents and NaN", "[cpu][quant]") {
  CHECK(e8m0_to_float(0) == std::ldexp(1.0f, -127));  // a subnormal float, exactly
  CHECK(e8m0_to_float(127) == 1.0f);
  CHECK(e8m0_to_float(254) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(e8m0_to_float(kE8m0Nan)));
  for (int b = 0; b < 255; ++b) REQUIRE(e8m0_of(e8m0_to_float(std::uint8_t(b))) == b);
  CHECK(e8m0_of(kNaN) == kE8m0Nan);
  CHECK_THROWS_AS(e8m0_of(3.0f), Error);
  CHECK_THROWS_AS(e8m0_of(0.0f), Error);
  CHECK_THROWS_AS(e8m0_of(kInf), Error);
  CHECK_THROWS_AS(e8m0_of(std::ldexp(1.0f, -128)), Error);
}

TEST_CASE("floor_log2 reads normal and subnormal floats", "[cpu][quant]") {
  for (int k = -149; k <= 127; ++k) {
    REQUIRE(floor_log2(std::ldexp(1.0f, k)) == k);
    if (k < 127 && k > -149) REQUIRE(floor_log2(std::nextafter(std::ldexp(1.0f, k + 1), 0.0f)) == k);
  }
  CHECK(floor_log2(6.0f) == 2);
  CHECK(floor_log2(std::numeric_limits<float>::max()) == 127);
  CHECK(floor_log2(std::ldexp(1.5f, -140)) == -140);
  CHECK_THROWS_AS(floor_log2(0.0f), Error);
  CHECK_THROWS_AS(floor_log2(kInf), Error);
}

TEST_CASE("UE8M0: a scale rounds up to a power of two, at least 2^-127, NaN when not finite", "[cpu][quant]") {
  CHECK(ue8m0_round_up(1.0f) == 1.0f);
  CHECK(ue8m0_round_up(std::nextafter(1.0f, 2.0f)) == 2.0f);  // mantissa non-zero: exponent + 1
  CHECK(ue8m0_round_up(0.75f) == 1.0f);
  CHECK(ue8m0_round_up(3.0f) == 4.0f);
  CHECK(ue8m0_round_up(2.0f / 448.0f) == std::ldexp(1.0f, -7));
  CHECK(ue8m0_round_up(std::ldexp(1.0f, -127)) == std::ldexp(1.0f, -127));
  CHECK(ue8m0_round_up(std::ldexp(1.0f, -140)) == std::ldexp(1.0f, -127));  // the floor
  CHECK(ue8m0_round_up(std::ldexp(1.5f, -127)) == std::ldexp(1.0f, -126));  // subnormal, above 2^-127
  CHECK(ue8m0_round_up(std::ldexp(1.0f, 127)) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(ue8m0_round_up(std::numeric_limits<float>::max())));  // 2^128 is not a float
  CHECK(std::isnan(ue8m0_round_up(kInf)));
  CHECK(std::isnan(ue8m0_round_up(kNaN)));
  // Sampled: the result is a power of two, >= the scale, and half of it is < the scale.
  for (int k = -126; k <= 126; ++k) {
    for (float m : {1.0f, 1.0000001f, 1.25f, 1.5f, 1.9999999f}) {
      const float s = std::ldexp(m, k), r = ue8m0_round_up(s);
      REQUIRE(r >= s);
      REQUIRE(r / 2.0f < s);
      REQUIRE(e8m0_of(r) == floor_log2(r) + 127);
    }
  }
}

TEST_CASE("per-token-group FP8 on hand-worked rows", "[cpu][quant]") {
  // Two tokens, hidden 64, groups of 32. Token 0: group 0 is 1.0 with one 2.0, group 1 zeros;
  // token 1: group 0 has a NaN, group 1 an Inf.
  std::vector<float> values(128, 0.0f);
  for (int i = 0; i < 32; ++i) values[size_t(i)] = 1.0f;
  values[5] = 2.0f;
  for (int i = 64; i < 128; ++i) values[size_t(i)] = 0.5f;
  values[64 + 3] = kNaN;
  values[96 + 7] = kInf;
  const Bits16 y = bf16_row(values);
  GroupQuantConfig c;
  c.hidden = 64;
  c.group_size = 32;

  SECTION("fp32 scales, row-major") {
    const auto o = group_quant(c, 2, y);
    REQUIRE(o.scales.size() == 4);
    CHECK(o.scales[0] == 2.0f / 448.0f);
    CHECK(o.q[0] == float_to_fp8(1.0f / (2.0f / 448.0f), kFn));  // 224 or its neighbour: IEEE y / scale
    CHECK(o.q[5] == 0x7e);                                       // 2 / (2 / 448) = 448
    CHECK(o.scales[1] == 1.0f);                                  // zeros: scale 1, q 0
    CHECK(o.q[32] == 0x00);
    CHECK(o.scales[2] == 1.0f);  // NaN amax: not > 0, so 1; NaN stays NaN, 0.5 stays 0.5
    CHECK(o.q[64 + 3] == 0x7f);
    CHECK(o.q[64] == float_to_fp8(0.5f, kFn));
    CHECK(std::isinf(o.scales[3]));  // Inf / 448
    CHECK(o.q[96] == 0x00);          // 0.5 / Inf
    CHECK(o.q[96 + 7] == 0x7f);      // Inf / Inf
  }
  SECTION("column-major puts group g of token t at g * tokens + t") {
    c.layout = ScaleLayout::column_major;
    const auto o = group_quant(c, 2, y);
    CHECK(o.scales[0] == 2.0f / 448.0f);  // (t0, g0)
    CHECK(o.scales[1] == 1.0f);           // (t1, g0): the NaN group
    CHECK(o.scales[2] == 1.0f);           // (t0, g1): zeros
    CHECK(std::isinf(o.scales[3]));       // (t1, g1)
  }
  SECTION("UE8M0 scales as fp32 and as E8M0 bytes") {
    c.scale_format = ScaleFormat::ue8m0_f32;
    const auto f = group_quant(c, 2, y);
    CHECK(f.scales[0] == std::ldexp(1.0f, -7));  // 2/448 = 0.00446 -> 2^-7
    CHECK(fp8_to_float(f.q[0], kFn) == 128.0f);  // 1 / 2^-7, exact
    CHECK(fp8_to_float(f.q[5], kFn) == 256.0f);
    CHECK(f.scales[1] == 1.0f);
    CHECK(std::isnan(f.scales[3]));  // Inf scale -> NaN, and every q NaN
    CHECK(f.q[96] == 0x7f);
    c.scale_format = ScaleFormat::e8m0;
    const auto b = group_quant(c, 2, y);
    CHECK(b.scales.empty());
    CHECK(b.scale_bytes == std::vector<std::uint8_t>{120, 127, 127, kE8m0Nan});
    CHECK(b.q == f.q);
  }
  SECTION("bad group sizes are refused") {
    c.group_size = 48;
    CHECK_THROWS_AS(group_quant(c, 2, y), Error);
    c.group_size = 128;  // does not divide 64
    CHECK_THROWS_AS(group_quant(c, 2, y), Error);
  }
}

TEST_CASE("group FP8 with fp32 scales is the per-token quantiser when the group is the row", "[cpu][quant]") {
  // A property, not a restatement: per-token FP8 (contract step 7) over 128 elements equals
  // group FP8 with G = hidden = 128, on sampled rows with varied magnitudes.
  std::uint64_t state = 12345;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> row(128);
    const int exponent = int(next() >> 59) - 16;
    for (float& v : row) v = std::ldexp(float(std::int64_t(next() >> 40) - (1ll << 23)) / float(1 << 23), exponent);
    const Bits16 y = bf16_row(row);
    GroupQuantConfig c;
    c.hidden = 128;
    c.group_size = 128;
    const auto group = group_quant(c, 1, y);
    EpilogueConfig e;
    e.hidden = 128;
    e.mode.quant = Quant::fp8;
    std::vector<std::uint8_t> q;
    std::vector<float> scales;
    token_quant(e, 1, y, q, scales);
    REQUIRE(group.q == q);
    REQUIRE(group.scales == scales);
  }
}

TEST_CASE("MXFP4 on hand-worked blocks", "[cpu][quant]") {
  std::vector<float> values(96, 0.0f);
  // Block 0: amax 6 -> floor(log2 6) - 2 = 0, scale 2^0 (byte 127); elements are y itself.
  const float block0[] = {6.0f, 3.0f, -1.5f, 0.25f, 0.75f, -5.0f, 7.0f};
  for (int i = 0; i < 7; ++i) values[size_t(i)] = block0[i];
  // Block 1: amax 1 -> e = -2, v = 4y.
  values[32] = 1.0f, values[33] = 0.375f, values[34] = -0.0625f, values[35] = -0.03125f;
  // Block 2: a NaN -> scale NaN, elements 0.
  values[64] = 1.0f, values[65] = kNaN;
  const auto o = mxfp4_quant(96, DType::bf16, 1, bf16_row(values));
  CHECK(o.scales == std::vector<std::uint8_t>{127, 125, kE8m0Nan});
  REQUIRE(o.packed.size() == 48);
  CHECK(o.packed[0] == (0x7 | 0x5 << 4));                         // 6, 3
  CHECK(o.packed[1] == (0xb | 0x0 << 4));                         // -1.5, 0.25 (tie to 0)
  CHECK(o.packed[2] == (0x2 | 0xe << 4));                         // 0.75 (tie to 1.0), -5 (tie to -4)
  CHECK(o.packed[3] == (0x7 | 0x0 << 4));                         // 7 saturates to 6; then +0
  CHECK(o.packed[16] == (0x6 | 0x3 << 4));                        // 4 -> 4, 1.5 -> 1.5
  CHECK(o.packed[17] == (0x8 | 0x8 << 4));                        // -0.25 -> -0 (tie), -0.125 -> -0
  for (int i = 32; i < 48; ++i) CHECK(o.packed[size_t(i)] == 0);  // the NaN block
}

TEST_CASE("MXFP4 shared exponents at the edges", "[cpu][quant]") {
  int e = 0;
  CHECK(mx_shared_exponent(0.0f, e));
  CHECK(e == -127);  // a zero block
  CHECK(mx_shared_exponent(std::ldexp(1.0f, -133), e));
  CHECK(e == -127);  // clamped
  CHECK(mx_shared_exponent(std::ldexp(1.0f, -124), e));
  CHECK(e == -126);
  CHECK(mx_shared_exponent(std::numeric_limits<float>::max(), e));
  CHECK(e == 125);
  CHECK_FALSE(mx_shared_exponent(kInf, e));
  CHECK_FALSE(mx_shared_exponent(kNaN, e));
  // A zero block keeps the signs of its zeros; a tiny block far below its scale rounds to zeros.
  std::vector<float> values(32, 0.0f);
  values[1] = -0.0f;
  auto o = mxfp4_quant(32, DType::bf16, 1, bf16_row(values));
  CHECK(o.scales[0] == 0);
  CHECK(o.packed[0] == (0x0 | 0x8 << 4));
  values.assign(32, std::ldexp(1.0f, -133));  // the smallest bf16 subnormal
  values[0] = std::ldexp(1.0f, 120);
  o = mxfp4_quant(32, DType::bf16, 1, bf16_row(values));
  CHECK(o.scales[0] == 118 + 127);
  CHECK(o.packed[0] == 0x06);  // 2^120 / 2^118 = 4, then 0
  CHECK_THROWS_AS(mxfp4_quant(48, DType::bf16, 1, Bits16(48)), Error);
}

TEST_CASE("the reference epilogue's block-scaled outputs quantise its own mirror", "[cpu][quant]") {
  // Steps 2-6 give y (the mirror); 7b / 7c of y must be what the epilogue reports, for every
  // layout and format: the composition the kernels must reproduce.
  std::uint64_t state = 99;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  auto random_bits = [&](size_t n) {
    Bits16 v(n);
    for (auto& x : v) x = float_to_bf16(float(std::int64_t(next() >> 40) - (1ll << 23)) / float(1 << 21));
    return v;
  };
  const int tokens = 5, hidden = 192;
  const Bits16 ar = random_bits(size_t(tokens) * hidden), residual = random_bits(size_t(tokens) * hidden),
               weight = random_bits(size_t(hidden));
  for (ScaleFormat format : all_scale_formats()) {
    for (ScaleLayout layout : {ScaleLayout::row_major, ScaleLayout::column_major}) {
      EpilogueConfig c;
      c.hidden = hidden, c.mode = EpilogueMode{Quant::fp8_group, Norm::rms, 64, format, layout, true};
      const auto e = epilogue(c, tokens, ar, residual, weight);
      GroupQuantConfig g{hidden, 64, DType::bf16, kFn, format, layout};
      const auto direct = group_quant(g, tokens, e.mirror);
      CHECK(e.q == direct.q);
      CHECK(e.scales == direct.scales);
      CHECK(e.scale_bytes == direct.scale_bytes);
    }
  }
  EpilogueConfig c;
  c.hidden = hidden, c.mode.quant = Quant::mxfp4, c.mode.mirror = true;
  const auto e = epilogue(c, tokens, ar, residual, weight);
  const auto direct = mxfp4_quant(hidden, DType::bf16, tokens, e.mirror);
  CHECK(e.q == direct.packed);
  CHECK(e.scale_bytes == direct.scales);
  CHECK(e.q.size() == size_t(tokens) * hidden / 2);
}
