// [cpu][quant] Contract steps 7d (static per-tensor FP8) and 7e (NVFP4): the kernels' own bit-level
// steps (templates/microscaling.cuh, compiled here as plain C++) against the reference model
// exhaustively (every E4M3 code and every fp32 rounding neighbourhood of one, every positive bf16
// amax under several global scales, both scale layouts' index maps), then hand-worked rows.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "reference/block_scaled.hpp"
#include "reference/microscaling.hpp"
#include "reference/numerics.hpp"
#include "templates/microscaling.cuh"

#include "support.hpp"

namespace ref = arfuse::reference;
using arfuse::DType;
using arfuse::Fp8Format;
using arfuse::ScaleLayout;

namespace {
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

ref::Bits16 bf16_row(const std::vector<float>& values) {
  ref::Bits16 bits;
  for (float v : values) bits.push_back(ref::float_to_bf16(v));
  return bits;
}

std::uint32_t bits_of(float v) { return ref::float_to_bits(v); }

// e4m3fn_scale(x) against the reference: the code, and the code's value bit for bit (NaN for NaN).
bool scale_matches(float x) {
  const arfuse::E4m3Scale got = arfuse::e4m3fn_scale(x);
  if (std::isnan(x)) return got.code == 0x7fu && std::isnan(got.value);
  const std::uint8_t want = ref::float_to_fp8(x, Fp8Format::e4m3fn);
  return got.code == want && bits_of(got.value) == bits_of(ref::fp8_to_float(want, Fp8Format::e4m3fn));
}
}  // namespace

TEST_CASE("the kernels' E4M3 scale conversion equals the reference's e4m3fn", "[cpu][quant]") {
  for (unsigned code = 0; code < 256; ++code) {
    CAPTURE(code);
    const float want = ref::fp8_to_float(std::uint8_t(code), Fp8Format::e4m3fn);
    if (std::isnan(want)) continue;
    CHECK(arfuse::e4m3fn_code(want) == code);  // every finite code round-trips, -0 included
    // Around each value: the neighbouring floats, and the midpoints to the next code (ties).
    float v = want;
    for (int step = 0; step < 64; ++step) {
      CAPTURE(v);
      CHECK(scale_matches(v));
      v = std::nextafter(v, kInf);
    }
    const float next = ref::fp8_to_float(std::uint8_t(code + 1), Fp8Format::e4m3fn);
    if ((code & 0x7f) < 0x7e) {
      const float mid = (want + next) / 2;
      for (float m : {std::nextafter(mid, -kInf), mid, std::nextafter(mid, kInf)}) {
        CAPTURE(m);
        CHECK(scale_matches(m));
      }
    }
  }
  CHECK(arfuse::e4m3fn_code(kNaN) == 0x7fu);
  CHECK(std::isnan(arfuse::e4m3fn_scale(-kNaN).value));
  CHECK(arfuse::e4m3fn_code(kInf) == 0x7eu);   // saturates: 448
  CHECK(arfuse::e4m3fn_code(-kInf) == 0xfeu);  // -448
  CHECK(arfuse::e4m3fn_scale(-kInf).value == -448.0f);
  CHECK(arfuse::e4m3fn_code(464.0f) == 0x7eu);
  CHECK(arfuse::e4m3fn_code(0x1p-10f) == 0x00u);  // tie between 0 and 2^-9: even (0)
  CHECK(arfuse::e4m3fn_code(std::nextafter(0x1p-10f, 1.0f)) == 0x01u);
  CHECK(bits_of(arfuse::e4m3fn_scale(-0.0f).value) == 0x80000000u);
  // Every 251st fp32 bit pattern (both signs, NaNs included), and random ones.
  long mismatches = 0;
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 251)
    mismatches += !scale_matches(ref::bits_to_float(std::uint32_t(b)));
  CHECK(mismatches == 0);
  std::mt19937 rng(20261205);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    const float v = ref::bits_to_float(any(rng));
    CAPTURE(v);
    CHECK(scale_matches(v));
  }
}

TEST_CASE("the kernels' NVFP4 block scale and multiplier equal the reference for every bf16 amax", "[cpu][quant]") {
  // The scale is e4m3(global * (amax * (1/6))), the engines' form (they multiply by the
  // reciprocal of E2M1's largest value).
  for (float global : {1.0f, 336.0f, 2688.0f, 0.37f, 0x1p-20f, 0.0f, kInf, kNaN}) {
    CAPTURE(global);
    for (std::uint32_t b = 0; b < 0x7f80u; ++b) {  // every positive finite bf16
      const float amax = ref::bf16_to_float(std::uint16_t(b));
      const ref::Nvfp4Block want = ref::nvfp4_block_of(amax, global);
      const arfuse::Nvfp4Block got = arfuse::nvfp4_block(amax, global, 1.0f / global);
      if (got.scale_code != want.scale || got.encode != want.encode ||
          (want.encode && bits_of(got.multiplier) != bits_of(want.multiplier))) {
        FAIL("amax " << amax << ": scale 0x" << std::hex << got.scale_code << " vs 0x" << unsigned(want.scale)
                     << ", multiplier " << got.multiplier << " vs " << want.multiplier);
      }
    }
    const ref::Nvfp4Block nan_block = ref::nvfp4_block_of(kNaN, global);
    CHECK_FALSE(nan_block.encode);
    CHECK(nan_block.scale == 0x7f);
    CHECK_FALSE(arfuse::nvfp4_block(kNaN, global, 1.0f / global).encode);
  }
  // Zero blocks: scale 0, multiplier 0, elements +-0.
  const ref::Nvfp4Block zero = ref::nvfp4_block_of(0.0f, 336.0f);
  CHECK(zero.scale == 0);
  CHECK(zero.encode);
  CHECK(zero.multiplier == 0.0f);
  // An infinite amax saturates the scale to 448: its finite elements still encode.
  const ref::Nvfp4Block inf = ref::nvfp4_block_of(kInf, 336.0f);
  CHECK(inf.scale == 0x7e);
  CHECK(inf.encode);
  CHECK(arfuse::nvfp4_code(kNaN) == 0u);
  CHECK(arfuse::nvfp4_code(-kInf) == 0xfu);
}

TEST_CASE("the kernels' NVFP4 element encoder equals the reference's E2M1 for every magnitude", "[cpu][quant]") {
  // e2m1_rounded_magnitude: every fp32 of [2^-3, 16) (where every code boundary and tie lies),
  // every 61st pattern elsewhere, the largest finite value and Inf.
  long checked = 0;
  auto check = [&checked](std::uint32_t bits) {
    const float a = ref::bits_to_float(bits);
    const unsigned got = bits_of(arfuse::e2m1_rounded_magnitude(a)) - 0x4b000000u;
    const unsigned want = ref::float_to_e2m1(a);
    if (got != want) FAIL("|v| " << a << " (0x" << std::hex << bits << "): code " << got << ", reference " << want);
    ++checked;
  };
  for (std::uint32_t bits = 0x3e000000u; bits < 0x41800000u; ++bits) check(bits);
  for (std::uint64_t bits = 0; bits < 0x7f800000u; bits += 61) check(std::uint32_t(bits));
  check(0x7f7fffffu);
  check(0x7f800000u);
  CHECK(checked == 0x3800000L + (0x7f800000L + 60) / 61 + 2);
}

TEST_CASE("the kernels' NVFP4 vector packing equals the element-by-element encoding", "[cpu][quant]") {
  // e2m1_pack_codes over 8 elements of bf16 or f16 times a block multiplier (of either sign, zero,
  // tiny or huge) against the reference's E2M1 of each product, element j in nibble j.
  std::mt19937 rng = arfuse::test::fresh_rng();
  std::uniform_int_distribution<std::uint32_t> any16(0, 0xffff);
  std::uniform_real_distribution<float> exponent(-40.0f, 40.0f);
  long compared = 0;
  for (DType dtype : {DType::bf16, DType::f16}) {
    for (int trial = 0; trial < 200000; ++trial) {
      unsigned y[4];
      float v[8];
      for (int i = 0; i < 4; ++i) {
        std::uint32_t lo, hi;
        do {  // finite elements: a block with a NaN is not encoded
          lo = any16(rng), hi = any16(rng);
        } while (std::isnan(ref::widen(std::uint16_t(lo), dtype)) || std::isnan(ref::widen(std::uint16_t(hi), dtype)));
        y[i] = lo | hi << 16;
        v[2 * i] = ref::widen(std::uint16_t(lo), dtype);
        v[2 * i + 1] = ref::widen(std::uint16_t(hi), dtype);
      }
      float multiplier = std::exp2(exponent(rng)) * (trial % 2 ? -1.0f : 1.0f);
      if (trial % 97 == 0) multiplier = trial % 194 ? 0.0f : -0.0f;
      if (trial % 89 == 0) multiplier = std::numeric_limits<float>::max();
      float rounded[8];
      std::uint32_t want = 0;
      for (int j = 0; j < 8; ++j) {
        const float product = v[j] * multiplier;
        if (std::isnan(product)) goto next;  // Inf * 0: the kernels' element-by-element path
        rounded[j] = arfuse::e2m1_rounded_magnitude(std::fabs(v[j]) * std::fabs(multiplier));
        want |= std::uint32_t(ref::float_to_e2m1(product)) << (4 * j);
      }
      {
        const std::uint32_t got = arfuse::e2m1_pack_codes(rounded, y, (bits_of(multiplier) >> 31) * 0x88888888u);
        if (got != want) {
          FAIL("multiplier " << multiplier << ": 0x" << std::hex << got << ", reference 0x" << want);
        }
        ++compared;
      }
    next:;
    }
  }
  CHECK(compared > 390000);  // all but the few vectors with an Inf times a zero multiplier
}

TEST_CASE("NVFP4 scale layouts: the kernels' swizzled offsets equal the reference's index map", "[cpu][quant]") {
  for (int hidden : {2048, 2064, 2880, 7168}) {  // 128, 129, 180, 448 scale columns
    const int columns = hidden / 16, tiles = (columns + 3) / 4;
    for (int tokens : {1, 127, 128, 129, 300}) {
      CAPTURE(hidden, tokens);
      const std::size_t count = ref::nvfp4_scale_count(tokens, hidden, ScaleLayout::swizzled_128x4);
      CHECK(count == std::size_t((tokens + 127) / 128 * 128) * std::size_t(tiles * 4));
      CHECK(ref::nvfp4_scale_count(tokens, hidden, ScaleLayout::row_major) == std::size_t(tokens) * columns);
      std::set<std::size_t> used;
      for (int t = 0; t < tokens; ++t) {
        for (int c = 0; c < columns; ++c) {
          const std::size_t want = ref::nvfp4_scale_index(t, c, tokens, hidden, ScaleLayout::swizzled_128x4);
          const long long got = arfuse::swizzled_row_offset(t, tiles) + arfuse::swizzled_column_offset(c);
          REQUIRE(got == (long long)want);
          REQUIRE(want < count);
          REQUIRE(used.insert(want).second);  // no two scales share a byte
          CHECK(ref::nvfp4_scale_index(t, c, tokens, hidden, ScaleLayout::row_major) ==
                std::size_t(t) * columns + std::size_t(c));
        }
      }
      // The padding (rows to 128, columns to 4) is exactly the bytes no scale takes.
      CHECK(used.size() == std::size_t(tokens) * std::size_t(columns));
    }
  }
  // cuBLASLt's description of the 128x4 tile: row r, column c of a tile at (r % 32) * 16 + (r / 32) * 4 + c.
  CHECK(arfuse::swizzled_row_offset(0, 2) + arfuse::swizzled_column_offset(0) == 0);
  CHECK(arfuse::swizzled_row_offset(1, 2) + arfuse::swizzled_column_offset(0) == 16);
  CHECK(arfuse::swizzled_row_offset(32, 2) + arfuse::swizzled_column_offset(0) == 4);
  CHECK(arfuse::swizzled_row_offset(0, 2) + arfuse::swizzled_column_offset(3) == 3);
  CHECK(arfuse::swizzled_row_offset(0, 2) + arfuse::swizzled_column_offset(4) == 512);
  CHECK(arfuse::swizzled_row_offset(128, 2) + arfuse::swizzled_column_offset(0) == 1024);
}

TEST_CASE("NVFP4 on hand-worked blocks", "[cpu][quant]") {
  // Global scale 1: block scale e4m3(amax / 6 rounded through * (1/6)), multiplier 1 / s.
  // Block 0: amax 6 -> s = e4m3(1.0000000) = 1.0 (0x38), elements y * 1.
  // Block 1: amax 3 -> s = 0.5 (0x30), elements y * 2: 3 -> 6, -1.25 -> -2.5 -> tie -> -2 (0xc).
  std::vector<float> row(32, 0.0f);
  row[0] = 6.0f, row[1] = -0.5f, row[2] = 0.75f, row[3] = 5.0f;  // 5: tie 4 / 6 -> 4 (even code 6)
  row[16] = 3.0f, row[17] = -1.25f, row[18] = 0.1f;              // 0.2: below 0.25 -> 0
  const auto out = ref::nvfp4_quant(32, DType::bf16, 1, bf16_row(row), 1.0f, ScaleLayout::row_major);
  REQUIRE(out.scales.size() == 2);
  CHECK(out.scales[0] == 0x38);
  CHECK(out.scales[1] == 0x30);
  CHECK(out.packed[0] == (0x7 | 0x9 << 4));  // 6 -> 0x7; -0.5 -> 0x9
  CHECK(out.packed[1] == (0x2 | 0x6 << 4));  // 0.75 -> tie 0.5 / 1 -> 1.0 (0x2); 5 -> 4 (0x6)
  CHECK(out.packed[8] == (0x7 | 0xc << 4));  // 6; -2.5 -> -2
  CHECK(out.packed[9] == 0x0);               // 0.2 -> 0; +0
  // A NaN block: scale 0x7f, elements 0; a zero block: scale 0, elements +-0 by sign.
  std::vector<float> special(32, 0.0f);
  special[3] = kNaN, special[16] = -0.0f, special[17] = 0.0f;
  const auto s = ref::nvfp4_quant(32, DType::bf16, 1, bf16_row(special), 336.0f, ScaleLayout::row_major);
  CHECK(s.scales[0] == 0x7f);
  for (int i = 0; i < 8; ++i) CHECK(s.packed[std::size_t(i)] == 0);
  CHECK(s.scales[1] == 0x00);
  CHECK(s.packed[8] == 0x8);  // -0 keeps its sign, +0 is 0
  // Swizzled: one row of 32 scale columns' worth (hidden 512), padding rows all zero.
  ref::Bits16 wide(512, ref::float_to_bf16(1.0f));
  const auto sw = ref::nvfp4_quant(512, DType::bf16, 1, wide, 6.0f, ScaleLayout::swizzled_128x4);
  REQUIRE(sw.scales.size() == 128u * 32u);
  for (int c = 0; c < 32; ++c) CHECK(sw.scales[std::size_t((c / 4) * 512 + c % 4)] == 0x38);  // s = 6 * 1/6 = 1
  int nonzero = 0;
  for (auto b : sw.scales) nonzero += b != 0;
  CHECK(nonzero == 32);
}

TEST_CASE("static FP8 multiplies by the IEEE inverse of the scale, saturating", "[cpu][quant]") {
  // scale 3: inverse 0x3eaaaaab; 1.5 * inverse = 0.5 exactly? 1.5 * 0.33333334 = 0.50000001 -> 0.5.
  const ref::Bits16 y = bf16_row({1.5f, -3.0f, 1e30f, -kInf, kNaN, 0.0f, -0.0f, 1344.0f});
  const auto q = ref::static_fp8_quant(8, DType::bf16, Fp8Format::e4m3fn, 1, y, 3.0f);
  REQUIRE(q.size() == 8);
  CHECK(q[0] == ref::float_to_fp8(0.5f, Fp8Format::e4m3fn));
  CHECK(q[1] == ref::float_to_fp8(-1.0f, Fp8Format::e4m3fn));
  CHECK(q[2] == 0x7e);  // saturated
  CHECK(q[3] == 0xfe);
  CHECK(q[4] == 0x7f);  // NaN stays NaN
  CHECK(q[5] == 0x00);
  CHECK(q[6] == 0x80);
  CHECK(q[7] == 0x7e);  // 1344 / 3 = 448.00002 in f32 -> 448
  // The division form fp8(y / scale) rounds differently on a few values (about 1 in 2 million f16
  // values over random scales); this is one: the contract multiplies, as the engines do.
  const float scale = 0x1.ba1084p+1f, v = 0x1.ac4p-4f;
  REQUIRE(ref::float_to_fp8(v * (1.0f / scale), Fp8Format::e4m3fn) != ref::float_to_fp8(v / scale, Fp8Format::e4m3fn));
  const ref::Bits16 one{ref::float_to_f16(v), 0, 0, 0, 0, 0, 0, 0};
  CHECK(ref::static_fp8_quant(8, DType::f16, Fp8Format::e4m3fn, 1, one, scale)[0] ==
        ref::float_to_fp8(v * (1.0f / scale), Fp8Format::e4m3fn));
}
