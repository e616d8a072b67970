// [gpu] The fused all-reduce with W virtual ranks on one GPU: every output bit-identical to
// the CPU reference (rank-order fold, then the epilogue) on every rank, for both stages,
// eager and graph (inputs copied, then registered and read where they lie); long runs; a
// missing rank gives PeerTimeout instead of a hang.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include "arfuse/epilogue.hpp"
#include "arfuse/error.hpp"
#include "arfuse/group.hpp"

#include "device_outputs.hpp"
#include "helper_kernels.hpp"
#include "row_layout.hpp"
#include "support.hpp"

using namespace arfuse;
using namespace arfuse::jit;
using arfuse::test::Bits16;

namespace {

constexpr std::uint8_t kPoison = 0xff;
constexpr int kMaxTokens = 2517;
constexpr int kMaxHidden = 8192;

struct Case {
  int tokens, hidden;
  DType dtype;
  test::QuantCase quant;
  Norm norm;
  int group = 128;  // fp8_group modes
  ScaleFormat scale_format = ScaleFormat::f32;
  ScaleLayout scale_layout = ScaleLayout::row_major;
  bool special_rows = false;  // a zero row, a NaN, an Inf, huge values
  bool strided = false;       // every tensor a view with its own row stride (tests/support/row_layout.hpp)
  int out_width = 0;          // 0: hidden; more: a padded output
};

RmsnormQuantArgs layout_of(const Case& c) {
  return test::epilogue_layout(c.tokens, c.hidden, c.dtype,
                               test::mode_of(c.quant, c.norm, c.group, c.scale_format, c.scale_layout), c.strided,
                               c.out_width);
}

struct RankBuffers {
  DeviceBuffer input, residual, residual_out, weight, out, scales, mirror;
  std::unique_ptr<Stream> stream;
  DeviceBuffer quant_scale;  // fp8_static's scale, nvfp4's global scale
};

// One group of W virtual ranks on device 0, with per-rank buffers at full capacity.
struct VirtualGroup {
  explicit VirtualGroup(int world, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    GroupOptions o;
    o.devices.assign(size_t(world), 0);
    o.max_tokens = kMaxTokens, o.max_hidden = kMaxHidden, o.timeout = timeout;
    o.graph_calls = 1 << 16;  // every graph of the suite's cases gets its slots
    group = std::make_unique<Group>(o);
    const Device& dev = group->rank(0).device();
    const size_t n = size_t(kMaxTokens) * kMaxHidden;
    for (int r = 0; r < world; ++r) {
      ranks.push_back(RankBuffers{DeviceBuffer(dev, n * 2), DeviceBuffer(dev, n * 2), DeviceBuffer(dev, n * 2),
                                  DeviceBuffer(dev, kMaxHidden * 2), DeviceBuffer(dev, n * 2),
                                  DeviceBuffer(dev, std::max<size_t>(kMaxTokens * 4, n / 8)),  // fp32 per 32
                                  DeviceBuffer(dev, n * 2), std::make_unique<Stream>(dev), DeviceBuffer(dev, 16)});
    }
  }
  int world() const { return group->world(); }
  void sync() {
    for (auto& r : ranks) r.stream->synchronize();
    group->check();
  }
  AllreduceRmsnormArgs args(int r, const Case& c);
  AllreduceRmsnormArgs args(int r, int tokens, int hidden, DType dtype, test::QuantCase quant, Norm norm) {
    AllreduceRmsnormArgs a;
    auto& b = ranks[size_t(r)];
    a.input = b.input.get(), a.residual_in = b.residual.get(), a.residual_out = b.residual_out.get();
    a.weight = b.weight.get(), a.eps = 1e-6f, a.out = b.out.get(), a.scales = static_cast<float*>(b.scales.get());
    a.mirror = b.mirror.get(), a.tokens = tokens, a.hidden = hidden, a.dtype = dtype, a.mode.quant = quant.quant,
    a.mode.mirror = quant.mirror, a.mode.norm = norm;
    return a;
  }
  void poison() {
    for (auto& b : ranks) {
      for (auto* d : {&b.residual_out, &b.out, &b.scales, &b.mirror}) d->fill(kPoison);
    }
  }
  std::unique_ptr<Group> group;
  std::vector<RankBuffers> ranks;
};

AllreduceRmsnormArgs VirtualGroup::args(int r, const Case& c) {
  AllreduceRmsnormArgs a = args(r, c.tokens, c.hidden, c.dtype, c.quant, c.norm);
  a.scales = ranks[size_t(r)].scales.get();
  a.mode.group_size = c.group, a.mode.scale_format = c.scale_format, a.mode.scale_layout = c.scale_layout;
  const RmsnormQuantArgs layout = layout_of(c);
  a.input_stride = layout.input_stride, a.residual_in_stride = layout.residual_in_stride;
  a.residual_out_stride = layout.residual_out_stride, a.out_stride = layout.out_stride;
  a.mirror_stride = layout.mirror_stride, a.out_width = layout.out_width;
  const float* scale = static_cast<const float*>(ranks[size_t(r)].quant_scale.get());
  if (c.quant.quant == Quant::fp8_static) a.static_scale = scale;
  if (c.quant.quant == Quant::nvfp4) a.global_scale = scale;
  return a;
}

// Values that break careless kernels, in the inputs of every rank (so the sums keep them).
void add_special_rows(std::vector<Bits16>& inputs, const Case& c) {
  if (c.tokens < 6) return;
  const auto at = [&](int row, int column) { return size_t(row) * size_t(c.hidden) + size_t(column); };
  for (auto& x : inputs) {
    for (int i = 0; i < c.hidden; ++i) x[at(1, i)] = reference::narrow(0.0f, c.dtype);
    for (int i = 0; i < c.hidden; ++i)
      x[at(4, i)] = reference::narrow(c.dtype == DType::f16 ? 8000.0f : 1e30f, c.dtype);
  }
  inputs[0][at(2, 17)] = reference::narrow(std::numeric_limits<float>::quiet_NaN(), c.dtype);
  inputs[0][at(3, 40)] = reference::narrow(std::numeric_limits<float>::infinity(), c.dtype);
}

VirtualGroup& group_of(int world) {
  static std::map<int, std::unique_ptr<VirtualGroup>> groups;
  auto& g = groups[world];
  if (!g) g = std::make_unique<VirtualGroup>(world);
  return *g;
}

reference::EpilogueConfig config_of(VirtualGroup& g, const Case& c, float quant_scale) {
  reference::EpilogueConfig config{
      c.hidden, c.dtype, test::mode_of(c.quant, c.norm), 1e-6f, g.group->rank(0).device().target(), quant_scale};
  config.mode.group_size = c.group, config.mode.scale_format = c.scale_format,
  config.mode.scale_layout = c.scale_layout;
  return config;
}

// Uploads fresh inputs (distinct per rank; residual and weight shared, as in tensor parallel),
// and the call's scale where the mode reads one; returns the reference's outputs for that scale.
reference::EpilogueOutputs prepare(VirtualGroup& g, const Case& c, std::mt19937& rng,
                                   float quant_scale = std::numeric_limits<float>::quiet_NaN()) {
  if (std::isnan(quant_scale)) quant_scale = test::test_quant_scale(c.quant.quant);
  const size_t n = size_t(c.tokens) * c.hidden;
  std::vector<Bits16> inputs;
  for (int r = 0; r < g.world(); ++r) inputs.push_back(test::random_tensor(rng, n, c.dtype));
  if (c.special_rows) add_special_rows(inputs, c);
  const Bits16 residual = test::random_tensor(rng, n, c.dtype),
               weight = test::random_tensor(rng, size_t(c.hidden), c.dtype, 0.5f);
  const RowStrides rows = detail::row_strides(layout_of(c));
  for (int r = 0; r < g.world(); ++r) {
    g.ranks[size_t(r)].input.upload(test::spread_rows(inputs[size_t(r)], c.tokens, c.hidden, rows.input));
    g.ranks[size_t(r)].residual.upload(test::spread_rows(residual, c.tokens, c.hidden, rows.residual_in));
    g.ranks[size_t(r)].weight.upload(weight);
    g.ranks[size_t(r)].quant_scale.upload(std::vector<float>{quant_scale});
  }
  return reference::epilogue(config_of(g, c, quant_scale), c.tokens, reference::fold(inputs, c.dtype), residual,
                             weight);
}

void require_outputs(VirtualGroup& g, const Case& c, const reference::EpilogueOutputs& e, const std::string& label,
                     float quant_scale = std::numeric_limits<float>::quiet_NaN()) {
  if (std::isnan(quant_scale)) quant_scale = test::test_quant_scale(c.quant.quant);
  for (int r = 0; r < g.world(); ++r) {
    const auto& b = g.ranks[size_t(r)];
    test::require_device_epilogue({b.residual_out, b.out, b.scales, b.mirror}, e, config_of(g, c, quant_scale),
                                  c.tokens, detail::row_strides(layout_of(c)), label + " rank " + std::to_string(r));
  }
}

// Every rank's staging buffer, poisoned or read back (the first `bytes`).
void poison_staging(VirtualGroup& g, std::size_t bytes) {
  const std::vector<std::uint8_t> poison(bytes, kPoison);
  for (int r = 0; r < g.world(); ++r)
    g.group->rank(r).device().copy_to_device(g.group->rank(r).input_buffer(), poison.data(), bytes);
}
bool staging_poisoned(VirtualGroup& g, int r, std::size_t bytes) {
  std::vector<std::uint8_t> got(bytes);
  g.group->rank(r).device().copy_to_host(got.data(), g.group->rank(r).input_buffer(), bytes);
  return std::all_of(got.begin(), got.end(), [](std::uint8_t b) { return b == kPoison; });
}

void run_eager(VirtualGroup& g, const Case& c) {
  for (int r = 0; r < g.world(); ++r) g.group->rank(r).allreduce_rmsnorm(g.args(r, c), *g.ranks[size_t(r)].stream);
  g.sync();
}

void check_case(int world, const Case& c, bool with_graph) {
  VirtualGroup& g = group_of(world);
  auto rng = test::fresh_rng();
  CAPTURE(world, c.tokens, c.hidden, to_string(c.dtype), test::text(c.quant), to_string(c.norm), c.strided,
          c.out_width);
  const auto expected = prepare(g, c, rng);
  for (int stage : {1, 2}) {
    g.group->force_stage(stage);
    g.poison();
    run_eager(g, c);
    require_outputs(g, c, expected, "stage " + std::to_string(stage) + " eager");
    if (!with_graph) continue;
    // 16 calls captured per rank, replayed 3 times: the epochs advance on the device.
    g.group->register_graph_inputs();  // what other cases captured, so that this graph's calls are all that follow
    g.poison();
    std::vector<std::unique_ptr<Graph>> graphs;
    for (int r = 0; r < world; ++r) {
      graphs.push_back(std::make_unique<Graph>(*g.ranks[size_t(r)].stream, [&] {
        for (int i = 0; i < 16; ++i) g.group->rank(r).allreduce_rmsnorm(g.args(r, c), *g.ranks[size_t(r)].stream);
      }));
    }
    for (int replay = 0; replay < 3; ++replay) {
      for (int r = 0; r < world; ++r) graphs[size_t(r)]->launch(*g.ranks[size_t(r)].stream);
    }
    g.sync();
    require_outputs(g, c, expected, "stage " + std::to_string(stage) + " graph");
    // Registered: the replays read every contiguous input where it lies, the staging buffers
    // untouched; strided inputs keep the copy.
    const Group::GraphInputs registered = g.group->register_graph_inputs();
    REQUIRE(registered.calls == 16);
    REQUIRE(registered.in_place == (layout_of(c).input_stride == c.hidden || layout_of(c).input_stride == 0 ? 16 : 0));
    g.poison();
    const std::size_t input_bytes = std::size_t(c.tokens) * std::size_t(c.hidden) * 2;
    poison_staging(g, input_bytes);
    for (int replay = 0; replay < 2; ++replay) {
      for (int r = 0; r < world; ++r) graphs[size_t(r)]->launch(*g.ranks[size_t(r)].stream);
    }
    g.sync();
    require_outputs(g, c, expected, "stage " + std::to_string(stage) + " registered graph");
    for (int r = 0; r < world; ++r) {
      INFO("rank " << r);
      CHECK(staging_poisoned(g, r, input_bytes) == (registered.in_place == 16));
    }
  }
  g.group->force_stage(std::nullopt);
}

}  // namespace

TEST_CASE("fused all-reduce: every mode, every world size, bit-exact on every rank", "[gpu][fused]") {
  const int world = GENERATE(2, 4, 8);
  const DType dtype = GENERATE(DType::bf16, DType::f16);
  const test::QuantCase quant = GENERATE(as<test::QuantCase>{}, Quant::none, Quant::fp8, test::mirror(Quant::fp8));
  const Norm norm = GENERATE(Norm::rms, Norm::gemma);
  const auto shape =
      GENERATE(std::pair<int, int>{12, 6144}, std::pair<int, int>{513, 6144}, std::pair<int, int>{7, 2880});
  check_case(world, Case{shape.first, shape.second, dtype, quant, norm}, false);
}

// Views of wider buffers (each tensor its own row stride; the staging copy reads the strided
// input) and padded outputs: the same bytes as the contiguous call, the gaps untouched, the
// padding zero.
TEST_CASE("fused all-reduce: strided views and padded outputs, every world size, both stages, eager and graph",
          "[gpu][fused][strided]") {
  const int world = GENERATE(2, 4, 8);
  using F = ScaleFormat;
  using L = ScaleLayout;
  const Case cases[] = {
      {12, 6144, DType::bf16, Quant::none, Norm::rms, 128, F::f32, L::row_major, true, true, 6400},
      {513, 2880, DType::f16, test::mirror(Quant::fp8), Norm::gemma, 128, F::f32, L::row_major, false, true, 3072},
      {7, 7168, DType::bf16, test::mirror(Quant::fp8_group), Norm::rms, 64, F::ue8m0_f32, L::column_major, false, true},
      {129, 5120, DType::bf16, test::mirror(Quant::mxfp4), Norm::rms, 128, F::f32, L::row_major, false, true},
      {300, 4096, DType::bf16, Quant::fp8, Norm::rms, 128, F::f32, L::row_major, false, false, 4352},
  };
  for (const Case& c : cases) check_case(world, c, true);
}

TEST_CASE("fused all-reduce: every shape, eager and graph", "[gpu][fused]") {
  const int world = GENERATE(2, 4, 8);
  const auto shape =
      GENERATE(std::pair<int, int>{12, 6144}, std::pair<int, int>{511, 6144}, std::pair<int, int>{512, 6144},
               std::pair<int, int>{513, 6144}, std::pair<int, int>{2517, 6144}, std::pair<int, int>{513, 6176},
               std::pair<int, int>{513, 6160}, std::pair<int, int>{2048, 8192}, std::pair<int, int>{7, 2880},
               std::pair<int, int>{300, 5120});
  const test::QuantCase quant = GENERATE(as<test::QuantCase>{}, test::mirror(Quant::fp8), Quant::none);
  const DType dtype = quant == Quant::none ? DType::f16 : DType::bf16;
  check_case(world, Case{shape.first, shape.second, dtype, quant, Norm::gemma}, true);
}

TEST_CASE("fused all-reduce: block-scaled modes, every world size, both stages, eager and graph",
          "[gpu][fused][quant]") {
  const int world = GENERATE(2, 4, 8);
  const auto shape =
      GENERATE(std::pair<int, int>{7, 2880}, std::pair<int, int>{33, 7168}, std::pair<int, int>{513, 8192});
  const DType dtype = shape.first == 33 ? DType::f16 : DType::bf16;
  const Norm norm = shape.first == 7 ? Norm::gemma : Norm::rms;
  const bool graph = shape.first == 33;
  check_case(
      world,
      Case{shape.first, shape.second, dtype, Quant::mxfp4, norm, 0, ScaleFormat::f32, ScaleLayout::row_major, true},
      graph);
  check_case(world, Case{shape.first, shape.second, dtype, test::mirror(Quant::mxfp4), norm}, false);
  // Group sizes, scale formats and layouts in turn (2880 takes 32 and 64; 128 does not divide it).
  const Case groups[] = {
      {shape.first, shape.second, dtype, Quant::fp8_group, norm, 64, ScaleFormat::f32, ScaleLayout::row_major, true},
      {shape.first, shape.second, dtype, test::mirror(Quant::fp8_group), norm, 32, ScaleFormat::ue8m0_f32,
       ScaleLayout::column_major},
      {shape.first, shape.second, dtype, Quant::fp8_group, norm, shape.second % 128 == 0 ? 128 : 64, ScaleFormat::e8m0,
       ScaleLayout::row_major, true}};
  for (const Case& c : groups) {
    CAPTURE(c.group, to_string(c.scale_format));
    check_case(world, c, graph);
  }
}

// Static per-tensor FP8 and NVFP4 (both scale layouts), then a graph replayed after the scale
// changed on the device: the kernels read the scale when they run.
TEST_CASE("fused all-reduce: static FP8 and NVFP4, every world size, both stages, eager and graph",
          "[gpu][fused][quant]") {
  const int world = GENERATE(2, 4, 8);
  const auto shape = GENERATE(std::pair<int, int>{1, 5120}, std::pair<int, int>{7, 2880},
                              std::pair<int, int>{129, 7168}, std::pair<int, int>{1000, 5120});
  const DType dtype = shape.first == 129 ? DType::f16 : DType::bf16;
  const Norm norm = shape.first == 7 ? Norm::gemma : Norm::rms;
  const bool graph = shape.first != 1000;
  using F = ScaleFormat;
  using L = ScaleLayout;
  const Case cases[] = {
      {shape.first, shape.second, dtype, Quant::fp8_static, norm, 0, F::f32, L::row_major, true},
      {shape.first, shape.second, dtype, test::mirror(Quant::fp8_static), norm},
      {shape.first, shape.second, dtype, Quant::nvfp4, norm, 0, F::f32, L::swizzled_128x4, true},
      {shape.first, shape.second, dtype, test::mirror(Quant::nvfp4), norm, 0, F::f32, L::row_major},
      {shape.first, shape.second, dtype, test::mirror(Quant::nvfp4), norm, 0, F::f32, L::swizzled_128x4}};
  for (const Case& c : cases) {
    CAPTURE(to_string(c.scale_layout));
    check_case(world, c, graph);
  }
  if (shape.first != 129) return;
  for (const Case& c : {cases[0], cases[2]}) {
    VirtualGroup& g = group_of(world);
    auto rng = test::fresh_rng();
    CAPTURE(world, test::text(c.quant), "scale changed between replays");
    const float first = test::test_quant_scale(c.quant.quant), second = first * 0.37f;
    auto expected = prepare(g, c, rng, first);
    g.poison();
    std::vector<std::unique_ptr<Graph>> graphs;
    for (int r = 0; r < world; ++r) {
      graphs.push_back(std::make_unique<Graph>(*g.ranks[size_t(r)].stream, [&] {
        for (int i = 0; i < 4; ++i) g.group->rank(r).allreduce_rmsnorm(g.args(r, c), *g.ranks[size_t(r)].stream);
      }));
    }
    for (int r = 0; r < world; ++r) graphs[size_t(r)]->launch(*g.ranks[size_t(r)].stream);
    g.sync();
    require_outputs(g, c, expected, "graph, first scale", first);
    expected = prepare(g, c, rng, second);  // fresh inputs and the second scale, into the same buffers
    g.poison();
    for (int r = 0; r < world; ++r) graphs[size_t(r)]->launch(*g.ranks[size_t(r)].stream);
    g.sync();
    require_outputs(g, c, expected, "graph, second scale", second);
  }
}

// Programmatic dependent launch: each rank's producer writes its input (poison before) and lets
// the fused kernel start early; the kernel must wait before staging or folding. Eager, then a
// graph of 4 producer + call pairs per rank replayed twice.
TEST_CASE("fused all-reduce launched programmatically waits for the kernel that wrote its input", "[gpu][fused][pdl]") {
  const int world = GENERATE(2, 4, 8);
  const int stage = GENERATE(1, 2);
  VirtualGroup& g = group_of(world);
  auto rng = test::fresh_rng();
  const Case c{257, 6144, DType::bf16, test::mirror(Quant::fp8), Norm::rms};
  CAPTURE(world, stage);
  const auto expected = prepare(g, c, rng);
  const size_t n = size_t(c.tokens) * c.hidden;
  const Kernel producer = testing::load_producer(g.group->rank(0).device());
  std::vector<DeviceBuffer> sources;
  for (int r = 0; r < world; ++r) {
    sources.emplace_back(g.group->rank(0).device(), n * 2);
    sources.back().upload(g.ranks[size_t(r)].input.download<std::uint16_t>(n));
  }
  auto call = [&](int r) {
    auto& b = g.ranks[size_t(r)];
    testing::launch_producer(producer, sources[size_t(r)].get(), b.input.get(), n * 2, *b.stream);
    AllreduceRmsnormArgs a = g.args(r, c);
    a.pdl = true;
    g.group->rank(r).allreduce_rmsnorm(a, *b.stream);
  };
  g.group->force_stage(stage);
  for (auto& b : g.ranks) b.input.fill(kPoison);
  g.poison();
  for (int r = 0; r < world; ++r) call(r);
  g.sync();
  require_outputs(g, c, expected, "eager");

  for (auto& b : g.ranks) b.input.fill(kPoison);
  g.poison();
  std::vector<std::unique_ptr<Graph>> graphs;
  for (int r = 0; r < world; ++r) {
    graphs.push_back(std::make_unique<Graph>(*g.ranks[size_t(r)].stream, [&] {
      for (int i = 0; i < 4; ++i) call(r);
    }));
  }
  for (int replay = 0; replay < 2; ++replay) {
    for (int r = 0; r < world; ++r) graphs[size_t(r)]->launch(*g.ranks[size_t(r)].stream);
  }
  g.sync();
  require_outputs(g, c, expected, "graph");
  g.group->force_stage(std::nullopt);
}

TEST_CASE("fused fp8 output equals token_quant of the fused mirror", "[gpu][fused][sanitize]") {
  VirtualGroup& g = group_of(4);
  auto rng = test::fresh_rng();
  const Case c{513, 6144, DType::bf16, test::mirror(Quant::fp8), Norm::rms};
  const auto expected = prepare(g, c, rng);
  g.poison();
  run_eager(g, c);
  const size_t n = size_t(c.tokens) * c.hidden;
  Context& ctx = g.group->rank(0).context();
  DeviceBuffer q(ctx.device(), n), s(ctx.device(), size_t(c.tokens) * 4);
  q.fill(kPoison), s.fill(kPoison);
  TokenQuantArgs tq;
  tq.input = g.ranks[0].mirror.get(), tq.out = q.get(), tq.scales = static_cast<float*>(s.get());
  tq.tokens = c.tokens, tq.hidden = c.hidden, tq.dtype = c.dtype;
  token_quant(ctx, tq, *g.ranks[0].stream);
  g.ranks[0].stream->synchronize();
  test::require_bits_equal(q.download<std::uint8_t>(n), g.ranks[0].out.download<std::uint8_t>(n),
                           "token_quant(mirror) vs fused", c.hidden);
  test::require_scales_equal(s.download<float>(size_t(c.tokens)), g.ranks[0].scales.download<float>(size_t(c.tokens)),
                             "token_quant(mirror) vs fused");
  test::require_bits_equal(q.download<std::uint8_t>(n), expected.q, "token_quant(mirror) vs reference", c.hidden);
}

TEST_CASE("plain all-reduce matches the rank-order fold", "[gpu][fused][sanitize]") {
  const int world = GENERATE(2, 4, 8);
  const int stage = GENERATE(1, 2);
  VirtualGroup& g = group_of(world);
  auto rng = test::fresh_rng();
  const bool strided = GENERATE(false, true);
  const int tokens = 513, hidden = 6144;
  const size_t n = size_t(tokens) * hidden;
  const AllreduceArgs layout = test::allreduce_layout(tokens, hidden, DType::bf16, strided);
  const RowStrides rows = detail::row_strides(layout);
  std::vector<Bits16> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(test::random_tensor(rng, n, DType::bf16));
  for (int r = 0; r < world; ++r)
    g.ranks[size_t(r)].input.upload(test::spread_rows(inputs[size_t(r)], tokens, hidden, rows.input));
  g.poison();
  g.group->force_stage(stage);
  for (int r = 0; r < world; ++r) {
    AllreduceArgs a = layout;
    a.input = g.ranks[size_t(r)].input.get(), a.out = g.ranks[size_t(r)].out.get();
    g.group->rank(r).allreduce(a, *g.ranks[size_t(r)].stream);
  }
  g.sync();
  g.group->force_stage(std::nullopt);
  const Bits16 expected = reference::fold(inputs, DType::bf16);
  for (int r = 0; r < world; ++r) {
    const auto got = test::packed_rows(g.ranks[size_t(r)].out.download<std::uint16_t>(size_t(tokens) * rows.out),
                                       tokens, hidden, rows.out, hidden, "allreduce out");
    test::require_bits_equal(got, expected, "allreduce rank " + std::to_string(r), hidden);
  }
}

TEST_CASE("10,000 consecutive calls with changing data stay exact", "[gpu][fused][long]") {
  // Each call's out feeds the next call's input, and its residual_out the next residual: a
  // single stale read anywhere in the chain changes the final bits.
  const int world = 4, tokens = 12, hidden = 2048, calls = 10000;
  VirtualGroup& g = group_of(world);
  auto rng = test::fresh_rng();
  const size_t n = size_t(tokens) * hidden;
  std::vector<Bits16> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(test::random_tensor(rng, n, DType::bf16));
  Bits16 residual = test::random_tensor(rng, n, DType::bf16),
         weight = test::random_tensor(rng, size_t(hidden), DType::bf16, 0.5f);
  for (int r = 0; r < world; ++r) {
    auto& b = g.ranks[size_t(r)];
    b.input.upload(inputs[size_t(r)]), b.residual.upload(residual), b.weight.upload(weight);
  }
  for (int i = 0; i < calls; ++i) {
    g.group->force_stage(i % 2 + 1);
    for (int r = 0; r < world; ++r) {
      auto& b = g.ranks[size_t(r)];
      auto a = g.args(r, tokens, hidden, DType::bf16, Quant::none, Norm::rms);
      // Ping-pong: even calls read input/residual and write out/residual_out, odd the reverse.
      if (i % 2 == 1)
        a.input = b.out.get(), a.out = b.input.get(), a.residual_in = b.residual_out.get(),
        a.residual_out = b.residual.get();
      g.group->rank(r).allreduce_rmsnorm(a, *b.stream);
    }
  }
  g.sync();
  g.group->force_stage(std::nullopt);
  reference::EpilogueConfig config{hidden, DType::bf16, EpilogueMode{Quant::none, Norm::rms}, 1e-6f,
                                   g.group->rank(0).device().target()};
  Bits16 out;
  for (int i = 0; i < calls; ++i) {
    auto e = reference::epilogue(config, tokens, reference::fold(inputs, DType::bf16), residual, weight);
    residual = e.residual_out;
    for (auto& in : inputs) in = e.out;
    out = e.out;
  }
  // After an even number of calls the last out went to `input`, the residual to `residual`.
  for (int r = 0; r < world; ++r) {
    test::require_bits_equal(g.ranks[size_t(r)].input.download<std::uint16_t>(n), out,
                             "after 10,000 calls, rank " + std::to_string(r), hidden);
    test::require_bits_equal(g.ranks[size_t(r)].residual.download<std::uint16_t>(n), residual,
                             "residual after 10,000 calls", hidden);
  }
}

TEST_CASE("a rank that never launches gives PeerTimeout, then reset() recovers", "[gpu][fused][timeout]") {
  const int world = 4;
  VirtualGroup g(world, std::chrono::milliseconds(300));
  const int missing = 2;
  for (int r = 0; r < world; ++r) {
    if (r == missing) continue;
    g.group->rank(r).allreduce_rmsnorm(g.args(r, 64, 2048, DType::bf16, Quant::fp8, Norm::rms),
                                       *g.ranks[size_t(r)].stream);
  }
  for (auto& r : g.ranks) r.stream->synchronize();  // returns: the kernels gave up, no hang
  try {
    g.group->check();
    FAIL("no PeerTimeout was raised");
  } catch (const PeerTimeout& e) {
    CHECK(e.rank() == missing);
    CHECK_THAT(e.what(), Catch::Contains("did not arrive"));
  }
  g.group->reset();
  auto rng = test::fresh_rng();
  const Case c{64, 2048, DType::bf16, Quant::fp8, Norm::rms};
  const auto expected = prepare(g, c, rng);
  g.poison();
  run_eager(g, c);
  require_outputs(g, c, expected, "after reset");
}

// Every rank must make the same call; one that differs is found at the entry barrier, before
// any peer row is read: no output is written, check() names both ranks and both calls.
TEST_CASE("a rank whose call differs gives CallMismatch naming both calls, writes nothing, then reset() recovers",
          "[gpu][fused][mismatch]") {
  const int world = GENERATE(2, 4, 8);
  const int stage = GENERATE(1, 2);
  const std::string differs =
      GENERATE(as<std::string>{}, "tokens", "hidden", "dtype", "quant", "norm", "all-reduce", "group", "scale format");
  CAPTURE(world, stage, differs);
  // A long timeout: the failing call must end through the check, not by running into it.
  VirtualGroup g(world, std::chrono::milliseconds(20000));
  g.group->force_stage(stage);
  const int odd = world - 1;
  const bool grouped = differs == "group" || differs == "scale format";
  const Case base{64, 2048, DType::bf16, grouped ? Quant::fp8_group : Quant::fp8, Norm::rms};
  Case other = base;
  if (differs == "group") other.group = 64;
  if (differs == "scale format") other.scale_format = ScaleFormat::e8m0;
  if (differs == "tokens") other.tokens = 200;
  if (differs == "hidden") other.hidden = 4096;
  if (differs == "dtype") other.dtype = DType::f16;
  if (differs == "quant") other.quant = Quant::none;
  if (differs == "norm") other.norm = Norm::gemma;
  for (int r = 0; r < world; ++r) {
    g.group->rank(r).prepare(base.hidden, base.dtype,
                             test::mode_of(base.quant, base.norm, base.group, base.scale_format));
    g.group->rank(r).prepare(other.hidden, other.dtype,
                             test::mode_of(other.quant, other.norm, other.group, other.scale_format));
  }
  g.poison();
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < world; ++r) {
    const Case& c = r == odd ? other : base;
    auto a = g.args(r, c);
    if (r == odd && differs == "all-reduce") {
      AllreduceArgs plain;
      plain.input = a.input, plain.out = a.out, plain.tokens = c.tokens, plain.hidden = c.hidden, plain.dtype = c.dtype;
      g.group->rank(r).allreduce(plain, *g.ranks[size_t(r)].stream);
    } else {
      g.group->rank(r).allreduce_rmsnorm(a, *g.ranks[size_t(r)].stream);
    }
  }
  for (auto& r : g.ranks) r.stream->synchronize();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  UNSCOPED_INFO("the mismatched call ended after " << seconds << " s (timeout 20 s)");
  try {
    g.group->check();
    FAIL("no CallMismatch was raised");
  } catch (const CallMismatch& e) {
    CHECK(e.rank() == 0);
    CHECK(e.peer() == odd);
    const std::string mine = "rank 0 called 64 x 2048 bf16";
    CHECK_THAT(e.what(), Catch::Contains(mine) &&
                             Catch::Contains(fmt::format("rank {} called {} x {}", odd, other.tokens, other.hidden)));
    if (differs == "group") CHECK_THAT(e.what(), Catch::Contains("(group 64, f32 scales)"));
    if (differs == "scale format") CHECK_THAT(e.what(), Catch::Contains("(group 128, e8m0 scales)"));
  }
  // Nothing was computed from rows nobody wrote: every output still holds the poison.
  const size_t n = size_t(base.tokens) * base.hidden;
  for (int r = 0; r < world; ++r) {
    CAPTURE(r);
    const auto out = g.ranks[size_t(r)].out.download<std::uint8_t>(n);
    CHECK(std::all_of(out.begin(), out.end(), [](std::uint8_t b) { return b == kPoison; }));
    const auto res = g.ranks[size_t(r)].residual_out.download<std::uint8_t>(n * 2);
    CHECK(std::all_of(res.begin(), res.end(), [](std::uint8_t b) { return b == kPoison; }));
  }
  g.group->reset();
  auto rng = test::fresh_rng();
  const auto expected = prepare(g, base, rng);
  g.poison();
  run_eager(g, base);
  require_outputs(g, base, expected, "after reset");
}
