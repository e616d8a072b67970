// [cpu] The quantiser's division without a division per element (templates/fp8_divide.cuh,
// the very code the kernels run) gives, for every y the quantiser can see (|y| <= amax, y and
// amax values of T), the FP8 code IEEE y / scale gives, in both FP8 formats. The host's f32
// multiply, FMA and division are IEEE round-to-nearest like the GPU's (no FTZ, no fast math),
// so this proves the device arithmetic too. [cpu] checks every y against sampled amax (edges
// and fresh random values); the hidden [exhaustive] case checks every amax.
// clang-format off
#include <cmath>  // first: the template calls fmaf and copysignf, which a device compiler provides
#include "templates/fp8_divide.cuh"
// clang-format on

#include <algorithm>

#include "reference/numerics.hpp"

#include "support.hpp"

using namespace arfuse;

namespace {

// Every positive finite value of T, ascending.
std::vector<float> positive_values(DType dtype) {
  std::vector<float> v;
  for (std::uint32_t bits = 1; bits < 0x8000; ++bits) {
    const float f = reference::widen(std::uint16_t(bits), dtype);
    if (std::isfinite(f)) v.push_back(f);
  }
  std::sort(v.begin(), v.end());
  return v;
}

struct Tally {
  long pairs = 0, mismatches = 0, short_rows = 0, general_rows = 0;
  float first_y = 0, first_amax = 0;
};

// Both signs of every y in [0, amax], against IEEE division by scale = amax / max.
void check_amax(float amax, const std::vector<float>& values, Fp8Format format, Tally& t) {
  const float scale = amax / reference::fp8_max(format);
  const Fp8Divisor d = fp8_divisor(amax, reference::fp8_max(format));
  REQUIRE(reference::float_to_bits(d.scale) == reference::float_to_bits(scale));
  ++(d.short_path ? t.short_rows : t.general_rows);
  for (std::size_t i = 0; i <= values.size(); ++i) {
    const float magnitude = i == 0 ? 0.0f : values[i - 1];
    if (magnitude > amax) break;
    for (const float y : {magnitude, -magnitude}) {
      ++t.pairs;
      const float fast = fp8_divide(y, d), exact = y / scale;
      if (reference::float_to_bits(fast) == reference::float_to_bits(exact)) continue;
      if (reference::float_to_fp8(fast, format) == reference::float_to_fp8(exact, format)) continue;
      if (t.mismatches++ == 0) t.first_y = y, t.first_amax = amax;
    }
  }
}

void require_no_mismatch(const Tally& t, DType dtype, Fp8Format format) {
  INFO(to_string(dtype) << (format == Fp8Format::e4m3fn ? " e4m3fn" : " e4m3fnuz") << ": " << t.pairs
                        << " pairs; rows on the short path " << t.short_rows << ", on the general path "
                        << t.general_rows << "; first mismatch y = " << t.first_y << ", amax = " << t.first_amax);
  REQUIRE(t.pairs > 0);
  REQUIRE(t.short_rows > 0);
  // Scales below 2^-100 exist in bf16 only (f16's smallest value is 2^-24).
  if (dtype == DType::bf16) REQUIRE(t.general_rows > 0);
  REQUIRE(t.mismatches == 0);
}

// amax values where the arithmetic has edges: the extremes, every power of two and every
// all-ones mantissa of T, and the neighbours of the 2^-100 prescale threshold.
std::vector<float> edge_amax(const std::vector<float>& values, DType dtype, Fp8Format format) {
  std::vector<float> picks = {values.front(), values.back(), 1.0f};
  const std::uint32_t mantissa = dtype == DType::bf16 ? 0x7f : 0x3ff;
  for (std::uint32_t bits = 1; bits < 0x8000; ++bits) {
    const float f = reference::widen(std::uint16_t(bits), dtype);
    if (std::isfinite(f) && ((bits & mantissa) == 0 || (bits & mantissa) == mantissa)) picks.push_back(f);
  }
  const float threshold = std::ldexp(reference::fp8_max(format), -100);
  const auto at = std::lower_bound(values.begin(), values.end(), threshold);
  for (auto it = at - std::min<std::ptrdiff_t>(4, at - values.begin()); it != values.end() && it < at + 4; ++it) {
    picks.push_back(*it);
  }
  return picks;
}

}  // namespace

TEST_CASE("fp8_divide gives IEEE division's FP8 code for every y, over edge and random amax", "[cpu][quant]") {
  auto rng = test::fresh_rng();
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const auto values = positive_values(dtype);
    for (const Fp8Format format : {Fp8Format::e4m3fn, Fp8Format::e4m3fnuz}) {
      std::vector<float> amaxes = edge_amax(values, dtype, format);
      std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
      for (int i = 0; i < 96; ++i) amaxes.push_back(values[pick(rng)]);
      Tally t;
      for (const float amax : amaxes) check_amax(amax, values, format, t);
      require_no_mismatch(t, dtype, format);
    }
  }
}

TEST_CASE("fp8_divide: NaN, Inf and zero rows behave as IEEE division", "[cpu][quant]") {
  const float inf = INFINITY, nan = NAN;
  for (const Fp8Format format : {Fp8Format::e4m3fn, Fp8Format::e4m3fnuz}) {
    const float max = reference::fp8_max(format);
    // A row with an Inf (scale Inf), a row with a NaN (scale 1, and it may hold an Inf too),
    // a row of zeros (scale 1), and an ordinary row for contrast.
    for (const float amax : {inf, nan, 0.0f, 3.0f}) {
      const Fp8Divisor d = fp8_divisor(amax, max);
      const float scale = amax > 0.0f ? amax / max : 1.0f;
      CHECK(reference::float_to_bits(d.scale) == reference::float_to_bits(scale));
      CHECK(d.short_path == (amax == 0.0f || amax == 3.0f));
      for (const float y : {0.0f, -0.0f, 1.5f, -3.0f, inf, -inf, nan}) {
        if (d.short_path && !(std::fabs(y) <= amax)) continue;  // not a value of this row
        CAPTURE(amax, y);
        CHECK(reference::float_to_fp8(fp8_divide(y, d), format) == reference::float_to_fp8(y / scale, format));
      }
    }
  }
}

TEST_CASE("fp8_divisor's scale, divisor and reciprocal are IEEE's for every amax of bf16 and f16", "[cpu][quant]") {
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (const Fp8Format format : {Fp8Format::e4m3fn, Fp8Format::e4m3fnuz}) {
      const float max = reference::fp8_max(format);
      long checked = 0;
      // Every bit pattern: negative values, zeros, subnormals, Inf and NaN included.
      for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
        const float amax = reference::widen(std::uint16_t(bits), dtype);
        const float scale = amax > 0.0f ? amax / max : 1.0f;
        const Fp8Divisor d = fp8_divisor(amax, max);
        CAPTURE(to_string(dtype), max, bits, amax);
        REQUIRE(reference::float_to_bits(fp8_scale(amax, max)) == reference::float_to_bits(scale));
        REQUIRE(reference::float_to_bits(d.scale) == reference::float_to_bits(scale));
        REQUIRE(d.short_path == (!std::isnan(amax) && amax != INFINITY && scale >= 0x1p-100f));  // -Inf: no real amax
        REQUIRE(reference::float_to_bits(d.divisor) == reference::float_to_bits(scale * d.prescale));
        REQUIRE(reference::float_to_bits(d.reciprocal) == reference::float_to_bits(1.0f / d.divisor));
        ++checked;
      }
      REQUIRE(checked == 0x10000);
    }
  }
}

TEST_CASE("fp8_divide gives IEEE division's FP8 code for every y and every amax", "[.][exhaustive][quant]") {
  for (const DType dtype : {DType::bf16, DType::f16}) {
    const auto values = positive_values(dtype);
    for (const Fp8Format format : {Fp8Format::e4m3fn, Fp8Format::e4m3fnuz}) {
      Tally t;
      for (const float amax : values) check_amax(amax, values, format, t);
      require_no_mismatch(t, dtype, format);
    }
  }
}
