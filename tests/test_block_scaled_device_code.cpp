// [cpu][quant] The kernels' own bit-level steps of block-scaled quantisation
// (templates/microscaling.cuh, compiled here as plain C++) against the reference model: the
// E2M1 code of every bf16 and f16 value and of dense fp32 samples around each rounding
// threshold, UE8M0 rounding and E8M0 bytes for every exponent, floor(log2) and MXFP4's shared
// exponent for every exponent and subnormal. Host f32 arithmetic is IEEE like the GPU's, and
// these steps use no other arithmetic, so this checks what the GPU computes.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "arfuse/reference/block_scaled.hpp"
#include "arfuse/reference/microscaling.hpp"
#include "arfuse/reference/numerics.hpp"
#include "arfuse/templates/microscaling.cuh"

#include "support.hpp"

namespace ref = arfuse::reference;

namespace {

void check_e2m1(float v) {
  if (std::isnan(v)) return;
  if (arfuse::e2m1_code(v) != ref::float_to_e2m1(v)) {
    FAIL("e2m1_code(" << v << " = 0x" << std::hex << ref::float_to_bits(v) << ") is " << arfuse::e2m1_code(v)
                      << ", the reference says " << unsigned(ref::float_to_e2m1(v)));
  }
}

}  // namespace

TEST_CASE("the kernels' E2M1 encoder equals the reference on every bf16 and f16 value", "[cpu][quant]") {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    check_e2m1(ref::bf16_to_float(std::uint16_t(b)));
    check_e2m1(ref::f16_to_float(std::uint16_t(b)));
  }
  // Every fp32 within 4096 ulps of each threshold and of each code's value, both signs.
  for (float anchor : {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f}) {
    const std::uint32_t a = ref::float_to_bits(anchor);
    for (std::int64_t d = -4096; d <= 4096; ++d) {
      const std::int64_t u = std::int64_t(a) + d;
      if (u < 0) continue;
      check_e2m1(ref::bits_to_float(std::uint32_t(u)));
      check_e2m1(-ref::bits_to_float(std::uint32_t(u)));
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) check_e2m1(ref::bits_to_float(std::uint32_t(rng())));
  SUCCEED("every E2M1 code matched");
}

TEST_CASE("the kernels' UE8M0 rounding and E8M0 bytes equal the reference for every exponent", "[cpu][quant]") {
  std::mt19937 rng(11);
  for (std::uint32_t exponent = 0; exponent < 256; ++exponent) {
    for (std::uint32_t mantissa :
         {0u, 1u, 0x400000u, 0x400001u, 0x3fffffu, 0x7fffffu, std::uint32_t(rng()) & 0x7fffffu}) {
      const float s = ref::bits_to_float(exponent << 23 | mantissa);
      if (s == 0.0f) continue;  // scales are positive: amax / max > 0, or 1
      CAPTURE(exponent, mantissa, s);
      const float mine = arfuse::ue8m0_round_up(s), theirs = ref::ue8m0_round_up(s);
      REQUIRE(ref::float_to_bits(mine) == ref::float_to_bits(theirs));  // the same quiet NaN too
      REQUIRE(arfuse::e8m0_byte(mine) == ref::e8m0_of(theirs));
    }
  }
}

TEST_CASE("the kernels' floor(log2) and MXFP4 exponent equal the reference", "[cpu][quant]") {
  for (std::uint32_t exponent = 0; exponent < 255; ++exponent) {
    for (int top = 0; top < 23; ++top) {
      const std::uint32_t mantissa = exponent == 0 ? (1u << top) | ((1u << top) - 1) / 3 : (1u << top);
      const float x = ref::bits_to_float(exponent << 23 | mantissa);
      CAPTURE(exponent, top, x);
      REQUIRE(arfuse::floor_log2(x) == ref::floor_log2(x));
      int e = 0;
      REQUIRE(ref::mx_shared_exponent(x, e));
      REQUIRE(arfuse::mx_exponent(x) == e);
    }
  }
  int e = 0;
  REQUIRE(ref::mx_shared_exponent(0.0f, e));
  CHECK(arfuse::mx_exponent(0.0f) == e);
  CHECK(arfuse::mx_exponent(std::numeric_limits<float>::max()) == 125);
}
