// [cpu][quant] The kernels' own bit-level steps of block-scaled quantisation
// (templates/microscaling.cuh, compiled here as plain C++) against the reference model: the
// E2M1 code of every bf16 and f16 value and of dense fp32 samples around each rounding
// threshold, UE8M0 rounding and E8M0 bytes for every exponent, floor(log2) and MXFP4's shared
// exponent for every exponent and subnormal. Host f32 arithmetic is IEEE like the GPU's, and
// these steps use no other arithmetic, so this checks what the GPU computes.
#include "reference/microscaling.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "reference/block_scaled.hpp"
#include "reference/numerics.hpp"
#include "templates/microscaling.cuh"

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

namespace {

// The bf16x2 and u16x2 operations of e2m1_pair_codes, on the host: each bf16 result is the exact
// result rounded to nearest even (through double, then float, then bf16: where that double
// rounding could differ from one rounding, below 2^-16, the code is 0 either way).
struct HostBf16PairOps {
  static double half(unsigned pair, int i) { return ref::bf16_to_float(std::uint16_t(pair >> (16 * i))); }
  static unsigned join(double lo, double hi) {
    return unsigned(ref::float_to_bf16(float(lo))) | unsigned(ref::float_to_bf16(float(hi))) << 16;
  }
  static unsigned mul(unsigned a, unsigned b) { return join(half(a, 0) * half(b, 0), half(a, 1) * half(b, 1)); }
  static unsigned fma(unsigned a, unsigned b, unsigned c) {
    return join(half(a, 0) * half(b, 0) + half(c, 0), half(a, 1) * half(b, 1) + half(c, 1));
  }
  static unsigned min(unsigned a, unsigned b) {
    return std::min(a & 0xffffu, b & 0xffffu) | std::min(a >> 16, b >> 16) << 16;
  }
};

}  // namespace

TEST_CASE("the packed bf16 E2M1 encoder's arithmetic gives e2m1_code's codes", "[cpu][quant]") {
  // Every bf16 element the kernel can pass for every shared exponent: |y| * 2^-e < 8, since
  // e = floor(log2(amax)) - 2 and |y| <= amax (NaN and Inf blocks never reach the encoder).
  // Consecutive pairs go through e2m1_vector_bytes four at a time, so each pair position of a
  // vector sees a quarter of them.
  long long pairs = 0;
  for (int e = -127; e <= 125; ++e) {
    const float scale = std::ldexp(1.0f, -e);
    const unsigned multiplier = unsigned(127 - e) << 7;
    auto in_range = [&](std::uint32_t b) {
      const float y = ref::bf16_to_float(std::uint16_t(b));
      return std::isfinite(y) && double(std::fabs(y)) * double(scale) < 8.0;
    };
    auto code = [&](std::uint32_t b) { return arfuse::e2m1_code(ref::bf16_to_float(std::uint16_t(b)) * scale); };
    unsigned vector[4] = {}, expected = 0;
    int filled = 0;
    for (std::uint32_t lo = 0; lo < 0x10000; ++lo) {
      if (!in_range(lo)) continue;
      std::uint32_t hi = (lo * 7919u + 13u) & 0xffffu;
      if (!in_range(hi)) hi = 0x8000u;  // -0
      vector[filled] = lo | hi << 16;
      expected |= (code(lo) | code(hi) << 4) << (8 * filled);
      ++pairs;
      if (++filled < 4) continue;
      const unsigned got = arfuse::e2m1_vector_bytes<HostBf16PairOps>(vector, multiplier * 0x10001u);
      if (got != expected) {
        FAIL("e = " << e << ", bf16 pairs 0x" << std::hex << vector[0] << " 0x" << vector[1] << " 0x" << vector[2]
                    << " 0x" << vector[3] << ": bytes 0x" << got << ", e2m1_code gives 0x" << expected);
      }
      filled = 0;
      expected = 0;
    }
  }
  CHECK(pairs > 8000000);  // every in-range bf16 value (both signs) at each of the 253 exponents
  SUCCEED("every vector matched");
}

TEST_CASE("byte_perm picks the bytes its selector names", "[cpu][quant]") {
  CHECK(arfuse::byte_perm(0x33221100u, 0x77665544u, 0x3210u) == 0x33221100u);
  CHECK(arfuse::byte_perm(0x33221100u, 0x77665544u, 0x7654u) == 0x77665544u);
  CHECK(arfuse::byte_perm(0x33221100u, 0x77665544u, 0x6240u) == 0x66224400u);
  CHECK(arfuse::byte_perm(0x33221100u, 0x77665544u, 0x5410u) == 0x55441100u);
}
