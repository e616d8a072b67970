// [cpu] What the Group decides without a GPU: argument validation messages, tuning-table
// parsing and the one-/two-stage dispatch.
#include "arfuse/group.hpp"

#include <fmt/format.h>

#include <memory>
#include <type_traits>

#include "arfuse/error.hpp"

#include "base/load_once.hpp"
#include "jit/tuning.hpp"
#include "runtime/signal_error.hpp"
#include "templates/quant_table.cuh"
#include "templates/signal.cuh"

#include "row_layout.hpp"
#include "support.hpp"

using namespace arfuse;
using Catch::Contains;

namespace {

alignas(16) unsigned char buffers[6][64];

AllreduceRmsnormArgs good_args() {
  AllreduceRmsnormArgs a;
  a.input = buffers[0], a.residual_in = buffers[1], a.residual_out = buffers[2], a.weight = buffers[3];
  a.out = buffers[4], a.scales = reinterpret_cast<float*>(buffers[5]), a.mirror = buffers[5];
  a.tokens = 16, a.hidden = 6144, a.mode.quant = Quant::fp8, a.mode.mirror = true;
  return a;
}

}  // namespace

TEST_CASE("fused call arguments are validated with messages that name them", "[cpu][group]") {
  REQUIRE_NOTHROW(validate_args(good_args(), 512, 8192));
  auto a = good_args();
  a.tokens = 513;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("tokens is 513") && Contains("capacity of 512"));
  a = good_args(), a.tokens = -1;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("tokens is -1"));
  a = good_args(), a.hidden = 8200;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("hidden is 8200") && Contains("max_hidden of 8192"));
  a = good_args(), a.hidden = 6100;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("multiple of 8"));
  a = good_args(), a.eps = -1e-6f;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("eps") && Contains(">= 0"));
  a = good_args(), a.eps = std::numeric_limits<float>::quiet_NaN();
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("finite"));
  a = good_args(), a.residual_in = nullptr;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("residual_in is null"));
  a = good_args(), a.mirror = nullptr;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("mirror is null") && Contains("fp8 mirror"));
  a = good_args(), a.mode.mirror = false, a.mirror = nullptr;
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));
  a.scales = nullptr;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("scales is null") && Contains("quant fp8"));
  a = good_args(), a.out = buffers[4] + 2;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("out") && Contains("16-byte aligned"));
  a = good_args(), a.tokens = 0, a.input = nullptr;
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));  // an empty call needs no tensors
  AllreduceArgs p;
  p.input = buffers[0], p.out = nullptr, p.tokens = 4, p.hidden = 4096;
  REQUIRE_THROWS_WITH(validate_args(p, 512, 8192), Contains("out is null"));
}

// The static FP8 and NVFP4 modes: their scale pointer, their scale layouts, their shapes.
TEST_CASE("static FP8 and NVFP4 arguments are validated with messages that name them", "[cpu][group]") {
  alignas(16) static float scale[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  auto a = good_args();
  a.mode.quant = Quant::fp8_static, a.scales = nullptr;  // with the mirror
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("static_scale is null") && Contains("fp8_static"));
  a.static_scale = scale;
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));  // no scales written: none needed
  a.global_scale = scale;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("global_scale is set") && Contains("nvfp4"));
  a = good_args(), a.mode.quant = Quant::nvfp4;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("global_scale is null") && Contains("global scale"));
  a.global_scale = scale;
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));
  a.static_scale = scale;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("static_scale is set") && Contains("fp8_static"));
  a.static_scale = nullptr, a.global_scale = reinterpret_cast<const float*>(reinterpret_cast<const char*>(scale) + 2);
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("global_scale") && Contains("4-byte aligned"));
  a.global_scale = scale, a.scales = nullptr;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("scales is null") && Contains("nvfp4"));
  a = good_args(), a.mode.quant = Quant::nvfp4, a.global_scale = scale, a.hidden = 6152;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("divisible by 16") && Contains("6152"));
  a.hidden = 6144, a.mode.scale_layout = ScaleLayout::column_major;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("column_major") && Contains("swizzled_128x4"));
  a.mode.scale_layout = ScaleLayout::swizzled_128x4;
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));
  a.mode.quant = Quant::fp8_group, a.global_scale = nullptr;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("swizzled_128x4 is not a layout quant fp8_group takes") &&
                                                       Contains("row_major or column_major"));
  a = good_args(), a.mode.quant = Quant::nvfp4, a.global_scale = scale, a.out_width = 6400;  // with the mirror
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("out_width is 6400 with quant nvfp4"));
  a.out_width = 0, a.out_stride = 3072 + 16;  // packed rows are hidden / 2 bytes wide
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));
  a = good_args(), a.mode.quant = Quant::fp8_static, a.static_scale = scale, a.out_width = 6400;
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));  // static FP8 rows take padding like per-token FP8
  // The scale bytes an NVFP4 call writes: rows to 128 and columns to 4 when swizzled.
  EpilogueMode nv{Quant::nvfp4};
  CHECK(nv.scale_shape(2880).bytes(1) == 180);
  nv.scale_layout = ScaleLayout::swizzled_128x4;
  CHECK(nv.scale_shape(2880).bytes(1) == 128 * 180);
  CHECK(nv.scale_shape(2064).bytes(129) == 256 * 132);
  GroupQuantArgs g;
  g.input = buffers[0], g.out = buffers[1], g.tokens = 4, g.hidden = 4096, g.mode.quant = Quant::fp8_static;
  REQUIRE_THROWS_WITH(validate_args(g), Contains("static_scale is null"));
  g.static_scale = scale;
  REQUIRE_NOTHROW(validate_args(g));
  g.mode.quant = Quant::nvfp4, g.mode.mirror = true;
  REQUIRE_THROWS_WITH(validate_args(g), Contains("without the mirror, not nvfp4 mirror"));
}

// Row strides: 0 or the row's width is contiguous; a wider one must keep every row 16-byte
// aligned; out counts its own units; out_width pads T and per-token FP8 rows only.
TEST_CASE("row strides and padded widths are validated with messages that name them", "[cpu][group]") {
  auto a = good_args();  // bf16, fp8 with the mirror, hidden 6144
  a.input_stride = 6144 + 8, a.residual_in_stride = 6144, a.residual_out_stride = 8192, a.mirror_stride = 6144 + 64;
  a.out_stride = 6144 + 16;  // fp8 bytes
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));
  a.input_stride = 6000;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192),
                      Contains("input_stride is 6000") && Contains("at least the row's 6144"));
  a.input_stride = 6144 + 4;  // 8 bytes past the row: rows no longer 16-byte aligned
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192),
                      Contains("input_stride is 6148") && Contains("multiple of 16 bytes"));
  a = good_args(), a.mirror_stride = -8;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("mirror_stride is -8"));
  a = good_args(), a.out_stride = 6144 + 8;  // fp8: 8 bytes wider
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("out_stride is 6152") && Contains("16 bytes"));
  a.mode.quant = Quant::none, a.mode.mirror = false, a.mirror = nullptr;  // T: 16 bytes wider
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));
  a = good_args(), a.out_width = 6400;
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));
  a.out_stride = 6144 + 16;  // narrower than the padded row
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("out_stride is 6160") && Contains("6400"));
  a = good_args(), a.out_width = 6148;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("out_width is 6148") && Contains("multiple of 8"));
  a.out_width = 4096;
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("out_width is 4096") && Contains("at least hidden"));
  a.out_width = 6400, a.mode.quant = Quant::mxfp4;  // with the mirror
  std::string padded;                               // the modes whose row in the mode table says pads_out
  for (Quant q : all_quants()) padded += pads_out(q) ? (padded.empty() ? "" : ", ") + std::string(to_string(q)) : "";
  REQUIRE_THROWS_WITH(validate_args(a, 512, 8192), Contains("out_width is 6400 with quant mxfp4") &&
                                                       Contains("only quant " + padded + " write padded rows"));
  a.out_width = 6144;  // no padding: every mode
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));
  a.out_stride = 3072 + 16;  // MXFP4 bytes: hidden / 2 per row
  REQUIRE_NOTHROW(validate_args(a, 512, 8192));

  AllreduceArgs p;
  p.input = buffers[0], p.out = buffers[1], p.tokens = 4, p.hidden = 4096, p.out_stride = 4100;
  REQUIRE_THROWS_WITH(validate_args(p, 512, 8192), Contains("out_stride is 4100"));
  p.out_stride = 4104, p.input_stride = 4096;
  REQUIRE_NOTHROW(validate_args(p, 512, 8192));
  RmsnormQuantArgs e = good_args();
  e.residual_out_stride = 100;
  REQUIRE_THROWS_WITH(validate_args(e), Contains("residual_out_stride is 100"));
  GroupQuantArgs g;
  g.input = buffers[0], g.out = buffers[1], g.scales = buffers[2], g.tokens = 2, g.hidden = 4096;
  g.out_stride = 4096 + 8;
  REQUIRE_THROWS_WITH(validate_args(g), Contains("out_stride is 4104") && Contains("16 bytes"));
  TokenQuantArgs t;
  t.input = buffers[0], t.out = buffers[1], t.scales = reinterpret_cast<float*>(buffers[2]), t.tokens = 2;
  t.hidden = 4096, t.input_stride = 4095;
  REQUIRE_THROWS_WITH(validate_args(t), Contains("input_stride is 4095"));
}

// The tests' strided layouts: a row round-trips through a strided buffer, and packed_rows sees a
// byte written outside every row.
TEST_CASE("strided test layouts round-trip and expose writes outside the rows", "[cpu][group]") {
  std::vector<std::uint16_t> rows(3 * 16);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = std::uint16_t(i * 7 + 1);
  const auto strided = test::spread_rows(rows, 3, 16, 24);
  REQUIRE(strided.size() == 3 * 24);
  CHECK(strided[16] == 0xffff);  // row 0's gap is poisoned
  CHECK(strided[24] == rows[16]);
  CHECK(test::packed_rows(strided, 3, 16, 24, 16, "rows") == rows);
  auto padded = strided;
  for (int r = 0; r < 3; ++r) padded[size_t(r) * 24 + 16] = padded[size_t(r) * 24 + 17] = 0;
  CHECK(test::packed_rows(padded, 3, 16, 24, 18, "padded rows") == rows);
  CHECK(test::first_gap_error(padded, 3, 16, 24, 16) == 16 * 2);   // zeros where nothing may be written
  CHECK(test::first_gap_error(strided, 3, 16, 24, 18) == 16 * 2);  // poison where padding belongs
  CHECK(test::first_gap_error(strided, 3, 16, 24, 16) == -1);
}

TEST_CASE("tuning tables parse, validate and drive the stage choice", "[cpu][group]") {
  const auto table = jit::TuningTable::parse(R"({"version": 1, "targets": {
      "sm_90": {"4": {"two_stage_min_bytes": 1048576}},
      "sm_90:virtual": {"4": {"two_stage_min_bytes": 4294967296}},
      "default": {"2": {"two_stage_min_bytes": 100}}}})",
                                             "test");
  CHECK(table.stage_for("sm_90", 4, 1048575) == 1);
  CHECK(table.stage_for("sm_90", 4, 1048576) == 2);
  CHECK(table.stage_for("sm_90", 4, 1048576, true) == 1);  // virtual ranks look up sm_90:virtual
  CHECK(table.stage_for("sm_100", 2, 100) == 2);           // falls back to default
  CHECK(table.stage_for("sm_100", 8, 1ull << 40) == 1);    // no entry: one stage
  // The same inputs give the same decision: every rank evaluates the same table.
  for (std::uint64_t bytes : {0ull, 1ull << 10, 1ull << 20, 1ull << 30}) {
    CHECK(table.stage_for("sm_90", 4, bytes) == table.stage_for("sm_90", 4, bytes));
  }
  const auto embedded = jit::TuningTable::embedded_default();
  CHECK(embedded.stage_for("sm_90", 4, 512ull << 20, true) == 1);
  CHECK(embedded.stage_for("sm_90", 8, 128ull * 6144 * 2, true) == 1);  // measured: one stage at 128 x 6144
  CHECK(embedded.stage_for("sm_90", 8, 512ull * 6144 * 2, true) == 2);  // two stages from 512 x 6144
  CHECK(embedded.stage_for("sm_90", 4, 64ull << 20, false) == 2);

  REQUIRE_THROWS_WITH(jit::TuningTable::parse("{", "t.json"), Contains("t.json is not valid JSON"));
  REQUIRE_THROWS_WITH(jit::TuningTable::parse(R"({"version": 2, "targets": {}})", "t"), Contains("$.version"));
  REQUIRE_THROWS_WITH(jit::TuningTable::parse(R"({"version": 1, "targets": {}, "extra": 1})", "t"),
                      Contains("$.extra") && Contains("unknown key"));
  REQUIRE_THROWS_WITH(
      jit::TuningTable::parse(R"({"version": 1, "targets": {"sm_90": {"9": {"two_stage_min_bytes": 1}}}})", "t"),
      Contains("$.targets.sm_90.9") && Contains("2 to 8"));
  REQUIRE_THROWS_WITH(
      jit::TuningTable::parse(R"({"version": 1, "targets": {"sm_90": {"4": {"two_stage_min_bytes": -5}}}})", "t"),
      Contains("two_stage_min_bytes") && Contains("-5"));
  REQUIRE_THROWS_WITH(jit::TuningTable::parse(R"({"version": 1, "targets": {"sm_90": {"4": {"threshold": 5}}}})", "t"),
                      Contains("$.targets.sm_90.4"));
  for (const char* world : {" 4", "+4", "4x", "-4", ""}) {
    CAPTURE(world);
    const std::string table =
        std::string(R"({"version": 1, "targets": {"sm_90": {")") + world + R"(": {"two_stage_min_bytes": 1}}}})";
    REQUIRE_THROWS_WITH(jit::TuningTable::parse(table, "t"), Contains("a world size must be a number from 2 to 8"));
  }
  test::ScopedEnv missing("ARFUSE_TUNING", "/nonexistent/tuning.json");
  REQUIRE_THROWS_AS(jit::TuningTable::from_environment(), ConfigError);
  REQUIRE_THROWS_WITH(jit::TuningTable::from_environment(), Contains("ARFUSE_TUNING='/nonexistent/tuning.json'"));
}

TEST_CASE("a group with bad options is refused before touching a device", "[cpu][group]") {
  GroupOptions o;
  o.devices = {};
  o.max_tokens = 16, o.max_hidden = 4096;
  REQUIRE_THROWS_WITH(Group(o), Contains("1 to 8 ranks") && Contains("got 0"));
  o.devices = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  REQUIRE_THROWS_WITH(Group(o), Contains("got 9"));
  o.devices = {0};
  o.transport = Transport::custom;
  REQUIRE_THROWS_WITH(Group(o), Contains("custom kernels need 2 or more ranks"));
  o.devices = {0, 0};
  o.transport = Transport::nccl;
  REQUIRE_THROWS_WITH(Group(o), Contains("one rank per process or thread"));
  o.transport = Transport::automatic;
  o.bootstrap = callback_bootstrap(0, 2, [](const std::string& m) { return std::vector<std::string>{m, m}; });
  REQUIRE_THROWS_WITH(Group(o), Contains("this rank's one device ordinal") && Contains("got 2 entries"));
  o.bootstrap.reset();
  o.devices = {0, 0};
  o.max_tokens = 0;
  REQUIRE_THROWS_WITH(Group(o), Contains("max_tokens"));
  o.max_tokens = int(kMaxCallTokens) + 1;  // the call descriptor carries 27 bits of tokens
  REQUIRE_THROWS_WITH(Group(o), Contains("max_tokens is 134217728; it must be from 1 to 134217727"));
  o.max_tokens = 16, o.max_hidden = 4100;
  REQUIRE_THROWS_WITH(Group(o), Contains("max_hidden"));
  o.max_hidden = 4096;
  for (int calls : {-1, kMaxGraphCalls + 1}) {
    o.graph_calls = calls;
    REQUIRE_THROWS_WITH(Group(o),
                        Contains(fmt::format("graph_calls is {}; it must be from 0 to {}", calls, kMaxGraphCalls)));
  }
}

TEST_CASE("a group of one rank without a GPU says the device is unavailable", "[cpu][group][nogpu]") {
  GroupOptions o;
  o.devices = {0};
  o.max_tokens = 16, o.max_hidden = 4096;
  REQUIRE_THROWS_AS(Group(o), Unavailable);
}

TEST_CASE("call descriptors tell every field apart, decode to what was encoded and fit above the epoch",
          "[cpu][group]") {
  const auto base = call_descriptor(2517, 6144, true, 1, 0, 1, true);
  CHECK(base != 0);
  CHECK(call_tokens(base) == 2517);
  CHECK(call_hidden(base) == 6144);
  CHECK(call_bf16(base));
  CHECK(call_quant(base) == 1);
  CHECK(call_norm(base) == 0);
  CHECK(call_stage(base) == 1);
  CHECK(call_epilogue(base));
  const std::vector<unsigned long long> others{
      call_descriptor(2516, 6144, true, 1, 0, 1, true),     call_descriptor(2517 + 8192, 6144, true, 1, 0, 1, true),
      call_descriptor(2517, 6136, true, 1, 0, 1, true),     call_descriptor(2517, 6144, false, 1, 0, 1, true),
      call_descriptor(2517, 6144, true, 2, 0, 1, true),     call_descriptor(2517, 6144, true, 1, 1, 1, true),
      call_descriptor(2517, 6144, true, 1, 0, 2, true),     call_descriptor(2517, 6144, true, 1, 0, 1, false),
      call_descriptor(2517, 6144, true, 1, 0, 1, true, 64), call_descriptor(2517, 6144, true, 1, 0, 1, true, 0, 2)};
  for (auto d : others) CHECK(d != base);
  for (unsigned group : {32u, 64u, 128u}) {
    for (unsigned format : {0u, 1u, 2u}) {
      const auto d = call_descriptor(7, 2048, true, 3, 0, 1, true, group, format);
      CHECK(call_group(d) == group);
      CHECK(call_scale_format(d) == format);
      CHECK(call_tokens(d) == 7);
      CHECK(call_quant(d) == 3);
    }
  }
  for (unsigned quant = 0; quant < 16; ++quant)
    CHECK(call_quant(call_descriptor(9, 2048, true, quant, 1, 2, true)) == quant);
  const auto largest = call_descriptor(kMaxCallTokens, kMaxHidden, true, 15, 1, 2, true, 128, 3);
  CHECK(call_tokens(largest) == kMaxCallTokens);
  CHECK(call_hidden(largest) == unsigned(kMaxHidden));
  CHECK((largest << kEpochBits) >> kEpochBits == largest);  // nothing lost in the flag word
}

TEST_CASE("flag epochs compare by wrapped 13-bit difference, whatever call rides above them", "[cpu][group]") {
  const unsigned long long call = call_descriptor(64, 2048, true, 1, 0, 1, true) << kEpochBits;
  for (unsigned epoch : {1u, 2u, 8191u, 8192u, 8193u, 123456789u, 0xffffffffu}) {
    CAPTURE(epoch);
    const unsigned long long at = call | (epoch & kEpochMask), next = call | ((epoch + 1) & kEpochMask),
                             before = call | ((epoch - 1) & kEpochMask);
    CHECK(epoch_reached(at, epoch));
    CHECK(epoch_reached(next, epoch));  // the peer is already at the following barrier
    CHECK_FALSE(epoch_reached(before, epoch));
  }
}

TEST_CASE("a call descriptor names every quant mode in a CallMismatch message", "[cpu][mismatch]") {
  for (auto quant : all_quants()) {
    for (bool mirror : {false, true}) {
      CAPTURE(to_string(quant), mirror);
      const auto code = unsigned(quant_code(int(quant), mirror && quant != Quant::none));
      const auto d = call_descriptor(12, 7168, true, code, 1, 2, true, quant == Quant::fp8_group ? 128 : 0);
      const std::string group = quant == Quant::fp8_group ? " (group 128, f32 scales)"
                                : quant == Quant::nvfp4   ? " (linear scales)"
                                                          : "";
      const std::string with = mirror && quant != Quant::none ? " with the mirror" : "";
      CHECK_THAT(describe_call(d), Contains(std::string("quant ") + to_string(quant) + group + with + ", norm gemma"));
    }
  }
  CHECK_THAT(describe_call(call_descriptor(3, 2048, false, 0, 0, 1, false)), Contains("plain all-reduce"));
  CHECK_THAT(describe_call(call_descriptor(3, 2048, true, unsigned(quant_code(kQuantNvfp4, false)), 0, 1, true, 0, 1)),
             Contains("quant nvfp4 (swizzled scales)"));
  CHECK_THAT(
      describe_call(call_descriptor(12, 7168, true, unsigned(quant_code(kQuantFp8Group, false)), 0, 1, true, 64, 2)),
      Contains("quant fp8_group (group 64, e8m0 scales), norm rms"));
}

TEST_CASE("what is loaded lazily is built once, retried after a failure, and never unloaded", "[cpu][group]") {
  // No destructor: a static Group destroyed at exit must still find the driver loaded.
  STATIC_REQUIRE(std::is_trivially_destructible_v<LoadOnce<int>>);
  static LoadOnce<int> value;
  int builds = 0;
  auto failing = [&]() -> std::unique_ptr<int> {
    ++builds;
    throw Error("not installed");
  };
  REQUIRE_THROWS_AS(value.get(failing), Error);
  auto make = [&] {
    ++builds;
    return std::make_unique<int>(42);
  };
  REQUIRE(value.get(make) == 42);
  REQUIRE(value.get(make) == 42);
  REQUIRE(*value.shared(make) == 42);
  REQUIRE(builds == 2);
}
