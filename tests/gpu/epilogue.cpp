// [gpu] The standalone epilogue kernels against the CPU reference model, bit for bit, on
// fresh random inputs, with poisoned outputs; and the device FP8 conversion against the
// software one over a sweep of fp32 bit patterns, and the FP8 divisor over every amax.
#include "arfuse/epilogue.hpp"

#include <algorithm>
#include <cmath>  // before fp8_divide.cuh, whose host build uses fmaf
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include "jit/compiler.hpp"
#include "reference/block_scaled.hpp"
#include "reference/numerics.hpp"
#include "runtime/context.hpp"
#include "templates/fp8_divide.cuh"
#include "templates/quant_table.cuh"

#include "device_outputs.hpp"
#include "helper_kernels.hpp"
#include "norm_probe.hpp"
#include "row_layout.hpp"
#include "support.hpp"

using namespace arfuse;
using namespace arfuse::jit;
using arfuse::test::Bits16;

namespace {

constexpr std::uint8_t kPoison = 0xff;

Context& gpu_context() {
  static Context ctx;
  return ctx;
}

// Rows with the values that break careless kernels: zeros, NaN, Inf, huge, subnormal.
void add_special_rows(Bits16& input, int tokens, int hidden, DType dtype) {
  auto set_row = [&](int row, float value) {
    if (row >= tokens) return;
    for (int i = 0; i < hidden; ++i) input[size_t(row) * hidden + i] = reference::narrow(value, dtype);
  };
  if (tokens < 8) return;
  set_row(1, 0.0f);
  input[size_t(2) * hidden + 17] = reference::narrow(std::numeric_limits<float>::quiet_NaN(), dtype);
  input[size_t(3) * hidden + 5] = reference::narrow(std::numeric_limits<float>::infinity(), dtype);
  set_row(4, dtype == DType::f16 ? 60000.0f : 1e30f);
  set_row(5, 1e-7f);
}

// Rows 6-9 probe the inverse norm (tests/support/norm_probe.hpp) where the call has them and the row has
// room for 256 probes: a kernel whose reduction tree moves inv by one ulp changes y there.
void plant_probe_rows(const reference::EpilogueConfig& config, int tokens, std::mt19937& rng, Bits16& ar,
                      Bits16& residual, Bits16& weight) {
  const jit::BlockShape shape = jit::block_shape(config.hidden, config.target.warp_size());
  if (tokens < 10 || std::min(shape.threads, config.hidden / 8) < 4 * 64) return;
  test::plant_norm_probe_rows(config, 6, 4, rng, ar, residual, weight);
}

struct EpilogueCase {
  int tokens, hidden;
  DType dtype;
  test::QuantCase quant;
  Norm norm;
  bool in_place;     // residual_out over residual_in, as engines call it
  bool pdl = false;  // a producer kernel writes the input; every launch is programmatic
};

// One rmsnorm_quant call on fresh random inputs (special rows included) with poisoned outputs,
// every output against the reference bit for bit; with the mirror, token_quant of it too.
void check_rmsnorm_quant(Context& ctx, const EpilogueCase& c) {
  Stream stream(ctx.device());
  auto rng = test::fresh_rng();
  const int tokens = c.tokens, hidden = c.hidden;
  CAPTURE(to_string(c.dtype), test::text(c.quant), to_string(c.norm), tokens, hidden, c.in_place, c.pdl);
  const size_t n = size_t(tokens) * hidden;

  Bits16 ar = test::random_tensor(rng, n, c.dtype), residual = test::random_tensor(rng, n, c.dtype);
  Bits16 weight = test::random_tensor(rng, size_t(hidden), c.dtype, 0.5f);
  add_special_rows(ar, tokens, hidden, c.dtype);
  reference::EpilogueConfig config{hidden, c.dtype, test::mode_of(c.quant, c.norm), 1e-5f, ctx.device().target()};
  plant_probe_rows(config, tokens, rng, ar, residual, weight);
  const auto expected = reference::epilogue(config, tokens, ar, residual, weight);

  DeviceBuffer d_in(ctx.device(), n * 2), d_res(ctx.device(), n * 2), d_res_out(ctx.device(), n * 2),
      d_weight(ctx.device(), size_t(hidden) * 2), d_out(ctx.device(), n * 2),
      d_scales(ctx.device(), size_t(tokens) * 4), d_mirror(ctx.device(), n * 2);
  d_res.upload(residual), d_weight.upload(weight);
  for (auto* b : {&d_res_out, &d_out, &d_scales, &d_mirror}) b->fill(kPoison);
  DeviceBuffer& res_out = c.in_place ? d_res : d_res_out;
  // With PDL the input is poison until the producer writes it, and nothing synchronises between
  // the launches: a kernel that read before its wait would read poison.
  DeviceBuffer d_source(ctx.device(), n * 2);
  std::unique_ptr<Kernel> producer;  // loaded until the stream is synchronised
  if (c.pdl) {
    d_source.upload(ar), d_in.fill(kPoison);
    producer = std::make_unique<Kernel>(testing::load_producer(ctx.device()));
    testing::launch_producer(*producer, d_source.get(), d_in.get(), n * 2, stream);
  } else {
    d_in.upload(ar);
  }

  RmsnormQuantArgs args;
  args.input = d_in.get(), args.residual_in = d_res.get(), args.residual_out = res_out.get();
  args.weight = d_weight.get(), args.eps = 1e-5f, args.out = d_out.get(),
  args.scales = static_cast<float*>(d_scales.get());
  args.mirror = d_mirror.get(), args.tokens = tokens, args.hidden = hidden;
  args.dtype = c.dtype, args.mode.quant = c.quant.quant, args.mode.mirror = c.quant.mirror, args.mode.norm = c.norm,
  args.pdl = c.pdl;
  rmsnorm_quant(ctx, args, stream);
  // Contract step 8: token_quant of the mirror reproduces the fused bytes and scales (with PDL
  // it waits for rmsnorm_quant's mirror itself).
  DeviceBuffer d_q2(ctx.device(), n), d_s2(ctx.device(), size_t(tokens) * 4);
  if (c.quant == test::mirror(Quant::fp8)) {
    d_q2.fill(kPoison), d_s2.fill(kPoison);
    TokenQuantArgs tq;
    tq.input = d_mirror.get(), tq.out = d_q2.get(), tq.scales = static_cast<float*>(d_s2.get());
    tq.tokens = tokens, tq.hidden = hidden, tq.dtype = c.dtype, tq.pdl = c.pdl;
    token_quant(ctx, tq, stream);
  }
  stream.synchronize();

  test::require_device_epilogue({res_out, d_out, d_scales, d_mirror}, expected, config, tokens);
  if (c.quant == test::mirror(Quant::fp8)) {
    test::require_bits_equal(d_q2.download<std::uint8_t>(n), expected.q, "token_quant(mirror)", hidden);
    test::require_scales_equal(d_s2.download<float>(size_t(tokens)), expected.scales, "token_quant(mirror)");
  }
}

struct BlockScaledCase {
  int tokens, hidden;
  DType dtype;
  test::QuantCase quant;
  Norm norm;
  int group;
  ScaleFormat scale_format;
  ScaleLayout scale_layout;
};

// Contract steps 7b and 7c through rmsnorm_quant: fresh inputs with the special rows, poisoned
// outputs, every output byte and scale against the reference.
void check_block_scaled(Context& ctx, const BlockScaledCase& c) {
  Stream stream(ctx.device());
  auto rng = test::fresh_rng();
  const int tokens = c.tokens, hidden = c.hidden;
  CAPTURE(to_string(c.dtype), test::text(c.quant), to_string(c.norm), tokens, hidden, c.group,
          to_string(c.scale_format), to_string(c.scale_layout));
  const size_t n = size_t(tokens) * hidden;
  Bits16 ar = test::random_tensor(rng, n, c.dtype), residual = test::random_tensor(rng, n, c.dtype);
  Bits16 weight = test::random_tensor(rng, size_t(hidden), c.dtype, 0.5f);
  add_special_rows(ar, tokens, hidden, c.dtype);
  reference::EpilogueConfig config{hidden,
                                   c.dtype,
                                   test::mode_of(c.quant, c.norm),
                                   1e-5f,
                                   ctx.device().target(),
                                   test::test_quant_scale(c.quant.quant)};
  config.mode.group_size = c.group, config.mode.scale_format = c.scale_format,
  config.mode.scale_layout = c.scale_layout;
  plant_probe_rows(config, tokens, rng, ar, residual, weight);
  const auto expected = reference::epilogue(config, tokens, ar, residual, weight);

  const bool fp4 = packs_fp4(c.quant.quant), nv = c.quant.quant == Quant::nvfp4,
             statik = c.quant.quant == Quant::fp8_static;
  const size_t out_bytes = fp4 ? n / 2 : n;
  const size_t groups = nv       ? reference::nvfp4_scale_count(tokens, hidden, c.scale_layout)
                        : statik ? 0
                                 : size_t(tokens) * size_t(hidden / (fp4 ? kMxBlockSize : c.group));
  const bool byte_scales = fp4 || c.scale_format == ScaleFormat::e8m0;
  DeviceBuffer d_in(ctx.device(), n * 2), d_res(ctx.device(), n * 2), d_res_out(ctx.device(), n * 2),
      d_weight(ctx.device(), size_t(hidden) * 2), d_out(ctx.device(), out_bytes),
      d_scales(ctx.device(), std::max<size_t>(groups * 4, 16)), d_mirror(ctx.device(), n * 2),
      d_quant_scale(ctx.device(), 16);
  d_in.upload(ar), d_res.upload(residual), d_weight.upload(weight);
  d_quant_scale.upload(std::vector<float>{config.quant_scale});
  for (auto* b : {&d_res_out, &d_out, &d_scales, &d_mirror}) b->fill(kPoison);
  const float* quant_scale = static_cast<const float*>(d_quant_scale.get());

  RmsnormQuantArgs args;
  args.input = d_in.get(), args.residual_in = d_res.get(), args.residual_out = d_res_out.get();
  args.weight = d_weight.get(), args.eps = 1e-5f, args.out = d_out.get(), args.scales = d_scales.get();
  args.mirror = d_mirror.get(), args.tokens = tokens, args.hidden = hidden;
  args.dtype = c.dtype, args.mode.quant = c.quant.quant, args.mode.mirror = c.quant.mirror, args.mode.norm = c.norm;
  args.mode.group_size = c.group, args.mode.scale_format = c.scale_format, args.mode.scale_layout = c.scale_layout;
  if (statik) args.static_scale = quant_scale, args.scales = nullptr;
  if (nv) args.global_scale = quant_scale;
  rmsnorm_quant(ctx, args, stream);
  stream.synchronize();

  test::require_device_epilogue({d_res_out, d_out, d_scales, d_mirror}, expected, config, tokens);
  if (c.quant.mirror) {
    // As contract step 8 for per-token FP8: group_quant of the mirror gives the same bytes and scales.
    DeviceBuffer d_q2(ctx.device(), out_bytes), d_s2(ctx.device(), std::max<size_t>(groups * 4, 16));
    d_q2.fill(kPoison), d_s2.fill(kPoison);
    GroupQuantArgs gq;
    gq.input = d_mirror.get(), gq.out = d_q2.get(), gq.scales = statik ? nullptr : d_s2.get(), gq.tokens = tokens;
    gq.hidden = hidden, gq.dtype = c.dtype, gq.mode.quant = c.quant.quant;
    gq.mode.group_size = c.group, gq.mode.scale_format = c.scale_format, gq.mode.scale_layout = c.scale_layout;
    if (statik) gq.static_scale = quant_scale;
    if (nv) gq.global_scale = quant_scale;
    group_quant(ctx, gq, stream);
    stream.synchronize();
    test::require_bits_equal(d_q2.download<std::uint8_t>(out_bytes), expected.q, "group_quant(mirror)",
                             fp4 ? hidden / 2 : hidden);
    const size_t scale_bytes = groups * (byte_scales ? 1 : 4);
    if (scale_bytes > 0) {
      test::require_bits_equal(d_s2.download<std::uint8_t>(scale_bytes), d_scales.download<std::uint8_t>(scale_bytes),
                               "group_quant(mirror) scales vs the epilogue's", int(scale_bytes / size_t(tokens)));
    }
  }
}

// rmsnorm_quant on views of wider buffers (each tensor its own row stride) with a padded output
// where the mode takes one, then token_quant or group_quant of the strided mirror into a strided
// output: the reference's bytes, the gaps untouched, the padding zero.
void check_strided(Context& ctx, const EpilogueMode& mode, int tokens, int hidden, DType dtype, int out_width) {
  Stream stream(ctx.device());
  auto rng = test::fresh_rng();
  CAPTURE(mode.text(), tokens, hidden, to_string(dtype), out_width);
  const size_t n = size_t(tokens) * hidden;
  Bits16 ar = test::random_tensor(rng, n, dtype), residual = test::random_tensor(rng, n, dtype);
  Bits16 weight = test::random_tensor(rng, size_t(hidden), dtype, 0.5f);
  add_special_rows(ar, tokens, hidden, dtype);
  reference::EpilogueConfig config{hidden, dtype, mode, 1e-5f, ctx.device().target()};
  const auto expected = reference::epilogue(config, tokens, ar, residual, weight);

  RmsnormQuantArgs args = test::epilogue_layout(tokens, hidden, dtype, mode, true, out_width);
  const RowStrides rows = detail::row_strides(args);
  const size_t bytes = size_t(tokens) * size_t(std::max(out_width, hidden) + 64) * 2;
  const Device& d = ctx.device();
  DeviceBuffer d_in(d, bytes), d_res(d, bytes), d_res_out(d, bytes), d_weight(d, size_t(hidden) * 2), d_out(d, bytes),
      d_scales(d, n * 4), d_mirror(d, bytes);
  d_in.upload(test::spread_rows(ar, tokens, hidden, rows.input));
  d_res.upload(test::spread_rows(residual, tokens, hidden, rows.residual_in)), d_weight.upload(weight);
  for (auto* b : {&d_res_out, &d_out, &d_scales, &d_mirror}) b->fill(kPoison);
  args.input = d_in.get(), args.residual_in = d_res.get(), args.residual_out = d_res_out.get();
  args.weight = d_weight.get(), args.eps = 1e-5f, args.out = d_out.get(), args.scales = d_scales.get();
  args.mirror = d_mirror.get();
  rmsnorm_quant(ctx, args, stream);
  stream.synchronize();
  test::require_device_epilogue({d_res_out, d_out, d_scales, d_mirror}, expected, config, tokens, rows, "strided");
  if (!mode.mirror) return;

  const bool mx = mode.quant == Quant::mxfp4, grouped = mx || mode.quant == Quant::fp8_group;
  const int out_row = mx ? hidden / 2 : hidden, out_stride = (out_row + 31) / 16 * 16;
  DeviceBuffer d_q2(d, size_t(tokens) * size_t(out_stride)), d_s2(d, n * 4);
  d_q2.fill(kPoison), d_s2.fill(kPoison);
  if (grouped) {
    GroupQuantArgs gq;
    gq.input = d_mirror.get(), gq.out = d_q2.get(), gq.scales = d_s2.get(), gq.tokens = tokens, gq.hidden = hidden;
    gq.dtype = dtype, gq.mode = mode, gq.mode.quant = mx ? Quant::mxfp4 : Quant::fp8_group, gq.mode.mirror = false;
    gq.input_stride = rows.mirror, gq.out_stride = out_stride;
    group_quant(ctx, gq, stream);
  } else {
    TokenQuantArgs tq;
    tq.input = d_mirror.get(), tq.out = d_q2.get(), tq.scales = static_cast<float*>(d_s2.get());
    tq.tokens = tokens, tq.hidden = hidden, tq.dtype = dtype, tq.input_stride = rows.mirror, tq.out_stride = out_stride;
    token_quant(ctx, tq, stream);
  }
  stream.synchronize();
  const auto q2 = test::packed_rows(d_q2.download<std::uint8_t>(size_t(tokens) * size_t(out_stride)), tokens, out_row,
                                    out_stride, out_row, "quantised mirror");
  test::require_bits_equal(q2, expected.q, "quantised strided mirror", out_row);
}

// A test kernel `name` (extern "C") over one of the templates, `header` and what it includes,
// compiled with the options the JIT gives the target's own kernels; 256 threads a block.
Kernel load_template_test_kernel(const Device& device, const char* header, const std::string& name,
                                 const std::string& body) {
  Source src;
  src.spec = KernelSpec::parse("token_quant/h8/bf16/" + device.target().name());
  src.program_name = name + ".cu";
  std::vector<TemplateFile> included;
  src.text = expand_includes({header}, included) + body;
  src.name_expression = name;
  src.options = render(src.spec).options;
  const auto code = nvrtc_compiler()->compile(src);
  return LoadedModule::load(device, code.payload)->kernel(code.lowered_name, 256);
}

}  // namespace

TEST_CASE("standalone kernels on strided views and padded outputs match the reference bit for bit",
          "[gpu][epilogue][strided]") {
  using F = ScaleFormat;
  using L = ScaleLayout;
  Context& ctx = gpu_context();
  check_strided(ctx, EpilogueMode{Quant::none, Norm::rms}, 129, 2880, DType::bf16, 3072);
  check_strided(ctx, test::mode_of(test::mirror(Quant::fp8), Norm::gemma), 1000, 5120, DType::f16, 5376);
  check_strided(ctx, EpilogueMode{Quant::fp8, Norm::rms}, 7, 7168, DType::bf16, 0);
  check_strided(ctx, test::mode_of(test::mirror(Quant::fp8_group), Norm::rms, 128, F::e8m0, L::column_major), 129, 7168,
                DType::bf16, 0);
  check_strided(ctx, test::mode_of(test::mirror(Quant::fp8_group), Norm::gemma, 64, F::f32, L::row_major), 7, 2880,
                DType::f16, 0);
  check_strided(ctx, test::mode_of(test::mirror(Quant::mxfp4), Norm::rms), 1000, 2880, DType::bf16, 0);
}

TEST_CASE("rmsnorm_quant block-scaled modes match the reference bit for bit", "[gpu][epilogue][quant]") {
  const DType dtype = GENERATE(DType::bf16, DType::f16);
  const auto shape = GENERATE(std::pair<int, int>{1, 7168}, std::pair<int, int>{9, 2880}, std::pair<int, int>{33, 8192},
                              std::pair<int, int>{513, 7168}, std::pair<int, int>{2517, 6144});
  const Norm norm = shape.first % 2 == 1 ? Norm::gemma : Norm::rms;
  for (test::QuantCase quant : {test::QuantCase(Quant::mxfp4), test::mirror(Quant::mxfp4)}) {
    check_block_scaled(gpu_context(),
                       {shape.first, shape.second, dtype, quant, norm, 0, ScaleFormat::f32, ScaleLayout::row_major});
  }
  // Every group size, scale format and layout on the small shapes; two of them on the large ones
  // (the reference model of a 2517-row call takes seconds).
  const bool small = shape.first < 100;
  for (test::QuantCase quant : {test::QuantCase(Quant::fp8_group), test::mirror(Quant::fp8_group)}) {
    for (int group : {32, 64, 128}) {
      if (shape.second % group != 0) continue;
      for (ScaleFormat format : all_scale_formats()) {
        for (ScaleLayout layout : {ScaleLayout::row_major, ScaleLayout::column_major}) {
          const bool chosen = (group == 128 && format == ScaleFormat::f32 && layout == ScaleLayout::row_major) ||
                              (group == 64 && format == ScaleFormat::e8m0 && layout == ScaleLayout::column_major);
          if (!small && !chosen) continue;
          check_block_scaled(gpu_context(), {shape.first, shape.second, dtype, quant, norm, group, format, layout});
        }
      }
    }
  }
}

TEST_CASE("rmsnorm_quant static FP8 and NVFP4 match the reference bit for bit", "[gpu][epilogue][quant]") {
  const DType dtype = GENERATE(DType::bf16, DType::f16);
  const int tokens = GENERATE(1, 7, 129, 1000);
  const int hidden = GENERATE(2880, 5120, 7168);
  const Norm norm = tokens % 2 == 1 ? Norm::gemma : Norm::rms;
  using L = ScaleLayout;
  for (test::QuantCase quant : {test::QuantCase(Quant::fp8_static), test::mirror(Quant::fp8_static)}) {
    check_block_scaled(gpu_context(), {tokens, hidden, dtype, quant, norm, 0, ScaleFormat::f32, L::row_major});
  }
  for (test::QuantCase quant : {test::QuantCase(Quant::nvfp4), test::mirror(Quant::nvfp4)}) {
    for (L layout : {L::row_major, L::swizzled_128x4}) {
      check_block_scaled(gpu_context(), {tokens, hidden, dtype, quant, norm, 0, ScaleFormat::f32, layout});
    }
  }
}

TEST_CASE("rmsnorm_quant matches the reference bit for bit", "[gpu][epilogue]") {
  const DType dtype = GENERATE(DType::f16, DType::bf16);
  const test::QuantCase quant = GENERATE(as<test::QuantCase>{}, Quant::none, Quant::fp8, test::mirror(Quant::fp8));
  const Norm norm = GENERATE(Norm::rms, Norm::gemma);
  const auto shape =
      GENERATE(std::pair<int, int>{1, 2880}, std::pair<int, int>{7, 5120}, std::pair<int, int>{513, 2880},
               std::pair<int, int>{300, 5120}, std::pair<int, int>{2517, 6144}, std::pair<int, int>{33, 8192},
               std::pair<int, int>{9, 2048}, std::pair<int, int>{3, 16384});
  check_rmsnorm_quant(gpu_context(), EpilogueCase{shape.first, shape.second, dtype, quant, norm, false});
}

// More rows (blocks) than are resident at once, so blocks start as others finish; in place too
// (residual_out over residual_in), as engines call it, where a row's loads must all be issued
// before its stores.
// Programmatic dependent launch: a producer kernel writes the input and lets the next kernel
// start early; each arfuse kernel must wait for it before reading (poisoned inputs otherwise).
TEST_CASE("programmatic launches of rmsnorm_quant and token_quant wait for what they read", "[gpu][epilogue][pdl]") {
  const test::QuantCase quant = GENERATE(as<test::QuantCase>{}, Quant::none, Quant::fp8, test::mirror(Quant::fp8));
  const auto shape =
      GENERATE(std::pair<int, int>{1, 6144}, std::pair<int, int>{33, 8192}, std::pair<int, int>{2517, 6144});
  check_rmsnorm_quant(gpu_context(),
                      EpilogueCase{shape.first, shape.second, DType::bf16, quant, Norm::rms, false, true});
}

TEST_CASE("a graph of producer, programmatic rmsnorm_quant and group_quant replays exactly", "[gpu][epilogue][pdl]") {
  Context& ctx = gpu_context();
  Stream stream(ctx.device());
  auto rng = test::fresh_rng();
  const int tokens = 257, hidden = 7168, group = 128;
  const size_t n = size_t(tokens) * hidden, groups = size_t(tokens) * (hidden / group);
  const Bits16 residual = test::random_tensor(rng, n, DType::bf16);
  const Bits16 weight = test::random_tensor(rng, size_t(hidden), DType::bf16, 0.5f);
  DeviceBuffer d_source(ctx.device(), n * 2), d_in(ctx.device(), n * 2), d_res(ctx.device(), n * 2),
      d_res_out(ctx.device(), n * 2), d_weight(ctx.device(), size_t(hidden) * 2), d_out(ctx.device(), n),
      d_scales(ctx.device(), groups * 4), d_mirror(ctx.device(), n * 2), d_q2(ctx.device(), n),
      d_s2(ctx.device(), groups * 4);
  d_res.upload(residual), d_weight.upload(weight);
  const Kernel producer = testing::load_producer(ctx.device());
  RmsnormQuantArgs args;
  args.input = d_in.get(), args.residual_in = d_res.get(), args.residual_out = d_res_out.get();
  args.weight = d_weight.get(), args.out = d_out.get(), args.scales = d_scales.get(), args.mirror = d_mirror.get();
  args.tokens = tokens, args.hidden = hidden, args.mode.quant = Quant::fp8_group, args.mode.mirror = true,
  args.mode.group_size = group;
  args.pdl = true;
  GroupQuantArgs gq;
  gq.input = d_mirror.get(), gq.out = d_q2.get(), gq.scales = d_s2.get(), gq.tokens = tokens, gq.hidden = hidden;
  gq.mode.group_size = group, gq.pdl = true;
  // Loaded before the capture: a module load is no stream work.
  load_kernel(ctx, spec_for(ctx, Module::rmsnorm_quant, hidden, DType::bf16,
                            test::mode_of(test::mirror(Quant::fp8_group), Norm::rms, group)));
  load_kernel(
      ctx, spec_for(ctx, Module::group_quant, hidden, DType::bf16, EpilogueMode{Quant::fp8_group, Norm::rms, group}));
  Graph graph(stream, [&] {
    testing::launch_producer(producer, d_source.get(), d_in.get(), n * 2, stream);
    rmsnorm_quant(ctx, args, stream);
    group_quant(ctx, gq, stream);
  });
  for (int replay = 0; replay < 3; ++replay) {
    CAPTURE(replay);
    const Bits16 ar = test::random_tensor(rng, n, DType::bf16);
    reference::EpilogueConfig config{hidden, DType::bf16, test::mode_of(test::mirror(Quant::fp8_group), Norm::rms),
                                     1e-6f, ctx.device().target()};
    config.mode.group_size = group;
    const auto expected = reference::epilogue(config, tokens, ar, residual, weight);
    d_source.upload(ar);
    for (auto* b : {&d_in, &d_res_out, &d_out, &d_scales, &d_mirror, &d_q2, &d_s2}) b->fill(kPoison);
    graph.launch(stream);
    stream.synchronize();
    test::require_device_epilogue({d_res_out, d_out, d_scales, d_mirror}, expected, config, tokens);
    test::require_bits_equal(d_q2.download<std::uint8_t>(n), expected.q, "group_quant(mirror)", hidden);
    test::require_scales_equal(d_s2.download<float>(groups), expected.scales, "group_quant(mirror) scales");
  }
}

TEST_CASE("rmsnorm_quant: more rows than resident blocks, and in place", "[gpu][epilogue]") {
  const bool in_place = GENERATE(false, true);
  const test::QuantCase quant = GENERATE(as<test::QuantCase>{}, Quant::fp8, test::mirror(Quant::fp8), Quant::none);
  const auto shape = GENERATE(std::pair<int, int>{600, 8192}, std::pair<int, int>{2517, 6144},
                              std::pair<int, int>{1001, 5120}, std::pair<int, int>{777, 7176});
  Context& ctx = gpu_context();
  const EpilogueCase c{shape.first, shape.second, DType::bf16, quant, Norm::gemma, in_place};
  const auto& kernel =
      load_kernel(ctx, spec_for(ctx, Module::rmsnorm_quant, c.hidden, c.dtype, test::mode_of(c.quant, c.norm)));
  REQUIRE(c.tokens > kernel.max_blocks_per_multiprocessor * ctx.device().multiprocessors());
  check_rmsnorm_quant(ctx, c);
}

TEST_CASE("the device's FP8 divisor is the host's for every amax of bf16 and f16", "[gpu][numerics][quant]") {
  Context& ctx = gpu_context();
  const Target target = ctx.device().target();
  // fp8_divisor as the quantisers call it (kFp8Max of the target), for every 16-bit pattern of
  // both types widened: the device's reciprocal skips rcp.rn's range check, which only this
  // comparison with the host's IEEE arithmetic can show to be exact.
  const Kernel kernel = load_template_test_kernel(ctx.device(), "epilogue.cuh", "fp8_divisors", R"(
extern "C" __global__ void fp8_divisors(const float* amax, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const arfuse::Fp8Divisor d = arfuse::fp8_divisor(amax[i], arfuse::kFp8Max);
  out[5 * i + 0] = arfuse::float_to_bits(d.scale);
  out[5 * i + 1] = arfuse::float_to_bits(d.divisor);
  out[5 * i + 2] = arfuse::float_to_bits(d.reciprocal);
  out[5 * i + 3] = arfuse::float_to_bits(d.prescale);
  out[5 * i + 4] = d.short_path ? 1u : 0u;
}
)");

  std::vector<float> amaxes;
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) amaxes.push_back(reference::widen(std::uint16_t(bits), dtype));
  }
  const int n = int(amaxes.size());
  Stream stream(ctx.device());
  DeviceBuffer d_amax(ctx.device(), size_t(n) * 4), d_out(ctx.device(), size_t(n) * 20);
  d_amax.upload(amaxes);
  d_out.fill(0xee);
  const void* in = d_amax.get();
  void* out = d_out.get();
  int count = n;
  void* params[] = {&in, &out, &count};
  kernel.launch(unsigned((n + 255) / 256), stream, params);
  stream.synchronize();

  const auto got = d_out.download<std::uint32_t>(size_t(n) * 5);
  std::vector<std::uint32_t> want(got.size());
  const float max = reference::fp8_max(target.fp8_format());
  for (int i = 0; i < n; ++i) {
    const Fp8Divisor d = fp8_divisor(amaxes[size_t(i)], max);
    const std::uint32_t fields[] = {reference::float_to_bits(d.scale), reference::float_to_bits(d.divisor),
                                    reference::float_to_bits(d.reciprocal), reference::float_to_bits(d.prescale),
                                    d.short_path ? 1u : 0u};
    std::copy(std::begin(fields), std::end(fields), want.begin() + 5 * i);
  }
  // One "row" per amax: scale, divisor, reciprocal, prescale, short path.
  test::require_bits_equal(got, want, "fp8_divisor fields", 5);
}

TEST_CASE("the paired residual add is the f32 sum rounded to T for every pair of values", "[gpu][numerics]") {
  Context& ctx = gpu_context();
  const Target target = ctx.device().target();
  // Thread a (one per 16-bit pattern) adds every pattern b to a, as bf16 and as f16, two b at a
  // time in the pair's halves, and compares add_pair with the f32 sum rounded by round_pair (the
  // path the other kernels take, itself checked against the reference above): all 2^32 ordered
  // pairs of each type, NaN payloads, Inf, subnormals and overflow included.
  const Kernel kernel = load_template_test_kernel(ctx.device(), "platform.cuh", "pair_add", R"(
template <typename T>
__device__ unsigned sum_pair(unsigned a, unsigned b) {
  return arfuse::round_pair<T>(arfuse::widen(T{(unsigned short)a}) + arfuse::widen(T{(unsigned short)b}),
                               arfuse::widen(T{(unsigned short)a}) + arfuse::widen(T{(unsigned short)(b + 1)}));
}
template <typename T>
__device__ void check(unsigned a, unsigned b, unsigned* mismatches, unsigned* first) {
  const unsigned got = arfuse::add_pair<T>(a | a << 16, b | (b + 1) << 16), want = sum_pair<T>(a, b);
  if (got != want && atomicAdd(mismatches, 1u) == 0) first[0] = a << 16 | b, first[1] = got, first[2] = want;
}
extern "C" __global__ void pair_add(unsigned* mismatches, unsigned* first, int* has_pair_add) {
  const unsigned a = blockIdx.x * blockDim.x + threadIdx.x;
  if (a == 0) *has_pair_add = arfuse::kPairAdd ? 1 : 0;
  if (!arfuse::kPairAdd || a > 0xffffu) return;
  for (unsigned b = 0; b < 0x10000u; b += 2) {
    check<arfuse::bf16_t>(a, b, mismatches, first);
    check<arfuse::f16_t>(a, b, mismatches + 1, first + 3);
  }
}
)");
  Stream stream(ctx.device());
  DeviceBuffer d_mismatches(ctx.device(), 2 * 4), d_first(ctx.device(), 6 * 4), d_has(ctx.device(), 4);
  d_mismatches.fill(0), d_first.fill(0xee), d_has.fill(0xee);
  void *mismatches = d_mismatches.get(), *first = d_first.get(), *has = d_has.get();
  void* params[] = {&mismatches, &first, &has};
  kernel.launch(0x10000u / 256, stream, params);
  stream.synchronize();
  const auto has_pair_add = d_has.download<std::int32_t>(1)[0];
  const bool expected = target.vendor() == Vendor::nvidia && target.generation() >= 90;
  INFO(target.name());
  REQUIRE(has_pair_add == (expected ? 1 : 0));
  if (!expected) {
    WARN("not checked: " << target.name() << " has no paired add (its kernels add in f32)");
    return;
  }
  const auto counts = d_mismatches.download<std::uint32_t>(2), where = d_first.download<std::uint32_t>(6);
  for (int t = 0; t < 2; ++t) {
    INFO((t == 0 ? "bf16" : "f16") << ": first mismatch at a << 16 | b = " << std::hex << where[size_t(3 * t)]
                                   << ", got " << where[size_t(3 * t + 1)] << ", want " << where[size_t(3 * t + 2)]);
    CHECK(counts[size_t(t)] == 0u);
  }
}

TEST_CASE("the device FP8, f16 and bf16 conversions match the software ones", "[gpu][numerics]") {
  Context& ctx = gpu_context();
  const Target target = ctx.device().target();
  // A test kernel over platform.cuh: hardware fp8x2 (where the target has it), the software
  // fp8 path, the f16/bf16 rounding, and the paired rounding the kernels use (each input paired
  // with the input at the mirrored index), for every input.
  const Kernel kernel = load_template_test_kernel(ctx.device(), "platform.cuh", "conversions", R"(
extern "C" __global__ void conversions(const float* in, unsigned char* hw, unsigned char* sw,
                                       unsigned short* h, unsigned short* b, unsigned* h2, unsigned* b2,
                                       int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = in[i], partner = in[n - 1 - i];
  hw[i] = (unsigned char)(arfuse::fp8x2(x, 0.0f) & 0xff);
  sw[i] = (unsigned char)arfuse::fp8_software(x);
  h[i] = arfuse::round_f16(x).bits;
  b[i] = arfuse::round_bf16(x).bits;
  h2[i] = arfuse::round_pair<arfuse::f16_t>(x, partner);
  b2[i] = arfuse::round_pair<arfuse::bf16_t>(x, partner);
}
)");

  // Every 2^-10-th bit pattern over all of fp32 and every pattern near the FP8 range, plus
  // the edge cases: zeros, max, ties, Inf, NaN.
  std::vector<float> inputs;
  for (std::uint64_t bits = 0; bits <= 0xffffffffull; bits += 1021)
    inputs.push_back(reference::bits_to_float(std::uint32_t(bits)));
  for (std::uint32_t bits = 0x3a000000u; bits < 0x44000000u; bits += 7) {
    inputs.push_back(reference::bits_to_float(bits));
    inputs.push_back(-reference::bits_to_float(bits));
  }
  for (float v : {0.0f, -0.0f, 448.0f, 464.0f, 480.0f, 240.0f, 248.0f, 65504.0f, 65520.0f, 1.0f / 1024,
                  1.0f / 512 * 1.5f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()}) {
    inputs.push_back(v);
    inputs.push_back(-v);
  }
  const int n = int(inputs.size());
  Stream stream(ctx.device());
  DeviceBuffer d_in(ctx.device(), size_t(n) * 4), d_hw(ctx.device(), size_t(n)), d_sw(ctx.device(), size_t(n)),
      d_h(ctx.device(), size_t(n) * 2), d_b(ctx.device(), size_t(n) * 2), d_h2(ctx.device(), size_t(n) * 4),
      d_b2(ctx.device(), size_t(n) * 4);
  d_in.upload(inputs);
  for (auto* b : {&d_hw, &d_sw, &d_h, &d_b, &d_h2, &d_b2}) b->fill(0xee);
  const void* in = d_in.get();
  void *hw = d_hw.get(), *sw = d_sw.get(), *h = d_h.get(), *b = d_b.get(), *h2 = d_h2.get(), *b2 = d_b2.get();
  int count = n;
  void* params[] = {&in, &hw, &sw, &h, &b, &h2, &b2, &count};
  kernel.launch(unsigned((n + 255) / 256), stream, params);
  stream.synchronize();

  const auto got_hw = d_hw.download<std::uint8_t>(size_t(n)), got_sw = d_sw.download<std::uint8_t>(size_t(n));
  const auto got_h = d_h.download<std::uint16_t>(size_t(n)), got_b = d_b.download<std::uint16_t>(size_t(n));
  const auto got_h2 = d_h2.download<std::uint32_t>(size_t(n)), got_b2 = d_b2.download<std::uint32_t>(size_t(n));
  std::vector<std::uint8_t> want_fp8(inputs.size());
  std::vector<std::uint16_t> want_h(inputs.size()), want_b(inputs.size());
  for (int i = 0; i < n; ++i) {
    want_fp8[size_t(i)] = reference::float_to_fp8(inputs[size_t(i)], target.fp8_format());
    want_h[size_t(i)] = reference::float_to_f16(inputs[size_t(i)]);
    want_b[size_t(i)] = reference::float_to_bf16(inputs[size_t(i)]);
  }
  INFO(n << " inputs; hardware fp8: " << (target.hardware_fp8() ? "yes" : "no"));
  test::require_bits_equal(got_sw, want_fp8, "software fp8 on the device", 1);
  test::require_bits_equal(got_hw, want_fp8, "fp8x2 (hardware where available)", 1);
  test::require_bits_equal(got_h, want_h, "f16 rounding", 1);
  test::require_bits_equal(got_b, want_b, "bf16 rounding", 1);
  std::vector<std::uint32_t> want_h2(inputs.size()), want_b2(inputs.size());
  for (int i = 0; i < n; ++i) {
    want_h2[size_t(i)] = want_h[size_t(i)] | std::uint32_t(want_h[size_t(n - 1 - i)]) << 16;
    want_b2[size_t(i)] = want_b[size_t(i)] | std::uint32_t(want_b[size_t(n - 1 - i)]) << 16;
  }
  test::require_bits_equal(got_h2, want_h2, "paired f16 rounding", 1);
  test::require_bits_equal(got_b2, want_b2, "paired bf16 rounding", 1);
}

TEST_CASE("NVFP4 with the peers' approximate reciprocals: how many bytes differ from arfuse's IEEE ones",
          "[gpu][numerics][quant]") {
  // vLLM's and FlashInfer's NVFP4 quantisers take two reciprocals with rcp.approx.ftz: 1 / 6 in the
  // block scale and 1 / (s * (1 / global)) in the elements' multiplier (their published kernels).
  // Their formula, with that instruction, against arfuse's IEEE one (contract step 7e) on the same y.
  Context& ctx = gpu_context();
  const Kernel kernel = load_template_test_kernel(ctx.device(), "quant/nvfp4.cuh", "peer_nvfp4", R"(
__device__ float rcp_approx_ftz(float a) {
  float b;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(b) : "f"(a));
  return b;
}
extern "C" __global__ void peer_nvfp4(const float* y, const float* global, unsigned char* out,
                                      unsigned char* scales, int blocks) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= blocks) return;
  const float* v = y + 16 * b;
  float amax = 0.0f;
  for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(v[i]));
  const float g = *global;
  // Their scale conversion is the hardware's cvt.rn.satfinite.e4m3x2.f32, as nvfp4_scale's on sm_89+.
  const arfuse::E4m3Scale scale = arfuse::nvfp4_scale(g * (amax * rcp_approx_ftz(6.0f)));
  const unsigned code = scale.code;
  const float s = scale.value;
  const float multiplier = s != 0.0f ? rcp_approx_ftz(s * rcp_approx_ftz(g)) : 0.0f;
  for (int i = 0; i < 8; ++i) {
    out[8 * b + i] = (unsigned char)(arfuse::e2m1_code(v[2 * i] * multiplier) |
                                     arfuse::e2m1_code(v[2 * i + 1] * multiplier) << 4);
  }
  scales[b] = (unsigned char)code;
}
)");

  const int tokens = 1000, hidden = 7168, blocks = tokens * hidden / 16;
  std::mt19937 rng = test::fresh_rng();
  Bits16 y = test::random_tensor(rng, size_t(tokens) * hidden, DType::bf16);
  // Rows over 40 binades, a row of zeros and a row of tiny values: the block scales cover E4M3's
  // range, its subnormals and 0.
  for (int r = 0; r < tokens; ++r) {
    const float row_scale = std::ldexp(1.0f, r % 40 - 20) * (r == 1 ? 0.0f : r == 2 ? 1e-30f : 1.0f);
    for (int i = 0; i < hidden; ++i) {
      Bits16::value_type& e = y[size_t(r) * hidden + i];
      e = reference::narrow(reference::widen(e, DType::bf16) * row_scale, DType::bf16);
    }
  }
  std::vector<float> widened(y.size());
  float tensor_amax = 0.0f;
  for (size_t i = 0; i < y.size(); ++i) {
    widened[i] = reference::widen(y[i], DType::bf16);
    tensor_amax = std::max(tensor_amax, std::fabs(widened[i]));
  }

  Stream stream(ctx.device());
  DeviceBuffer d_y(ctx.device(), y.size() * 2), d_wide(ctx.device(), widened.size() * 4), d_global(ctx.device(), 4),
      d_q(ctx.device(), size_t(blocks) * 8), d_s(ctx.device(), size_t(blocks)),
      d_peer_q(ctx.device(), size_t(blocks) * 8), d_peer_s(ctx.device(), size_t(blocks));
  d_y.upload(y);
  d_wide.upload(widened);
  // The engines' global scale: E4M3's largest value times E2M1's over the tensor's amax; and one
  // that is not a round number.
  for (const float global : {448.0f * 6.0f / tensor_amax, 0.7f}) {
    d_global.upload(std::vector<float>{global});
    for (auto* b : {&d_q, &d_s, &d_peer_q, &d_peer_s}) b->fill(kPoison);
    GroupQuantArgs args;
    args.input = d_y.get();
    args.out = d_q.get();
    args.scales = d_s.get();
    args.tokens = tokens;
    args.hidden = hidden;
    args.dtype = DType::bf16;
    args.mode = EpilogueMode{Quant::nvfp4};
    args.mode.scale_layout = ScaleLayout::row_major;
    args.global_scale = static_cast<const float*>(d_global.get());
    group_quant(ctx, args, stream);
    const void* in = d_wide.get();
    const void* g = d_global.get();
    void *peer_q = d_peer_q.get(), *peer_s = d_peer_s.get();
    int count = blocks;
    void* params[] = {&in, &g, &peer_q, &peer_s, &count};
    kernel.launch(unsigned((blocks + 255) / 256), stream, params);
    stream.synchronize();

    const auto q = d_q.download<std::uint8_t>(size_t(blocks) * 8), s = d_s.download<std::uint8_t>(size_t(blocks));
    const auto peer_q_bytes = d_peer_q.download<std::uint8_t>(size_t(blocks) * 8);
    const auto peer_s_bytes = d_peer_s.download<std::uint8_t>(size_t(blocks));
    const auto want = reference::nvfp4_quant(hidden, DType::bf16, tokens, y, global, ScaleLayout::row_major);
    INFO("global scale " << global);
    test::require_bits_equal(q, want.packed, "arfuse's NVFP4 elements", hidden / 2);
    test::require_bits_equal(s, want.scales, "arfuse's NVFP4 scales", hidden / 16);

    // Differences: scale bytes; element bytes; per element, the distance in E2M1 steps (same
    // sign) in blocks whose scale bytes agree, and the blocks whose scales differ.
    long scale_bytes = 0, element_bytes = 0, elements = 0, farther = 0;
    int largest_step = 0;
    for (int b = 0; b < blocks; ++b) {
      const bool same_scale = s[size_t(b)] == peer_s_bytes[size_t(b)];
      scale_bytes += same_scale ? 0 : 1;
      for (int i = 0; i < 8; ++i) {
        const std::uint8_t mine = q[size_t(b) * 8 + i], theirs = peer_q_bytes[size_t(b) * 8 + i];
        element_bytes += mine != theirs ? 1 : 0;
        for (int half = 0; half < 2; ++half) {
          const int a = (mine >> (4 * half)) & 0xf, p = (theirs >> (4 * half)) & 0xf;
          if (a == p) continue;
          ++elements;
          const int step = (a & 8) == (p & 8) ? std::abs((a & 7) - (p & 7)) : (a & 7) + (p & 7);
          if (same_scale) largest_step = std::max(largest_step, step);
          farther += same_scale && step > 1 ? 1 : 0;
        }
      }
    }
    std::printf(
        "NVFP4, peers' rcp.approx.ftz formula against arfuse's IEEE one, %dx%d bf16, global scale %.9g: "
        "%ld of %d scale bytes differ, %ld of %d element bytes (%ld elements; largest distance where the "
        "scales agree: %d E2M1 step%s)\n",
        tokens, hidden, double(global), scale_bytes, blocks, element_bytes, blocks * 8, elements, largest_step,
        largest_step == 1 ? "" : "s");
    // A multiplier an ulp or two away moves an element across at most one rounding boundary.
    CHECK(farther == 0);
  }
}

TEST_CASE("the NVFP4 block scale the hardware converts equals e4m3fn_scale for every fp32", "[gpu][numerics][quant]") {
  // quant/nvfp4.cuh's nvfp4_scale (on NVIDIA sm_89+ the e4m3 conversion instruction and its way
  // back through f16) against the software e4m3fn_scale that tests/cpu checks against the
  // reference, over all 2^32 bit patterns: the code and the value's bits (NaN for NaN).
  Context& ctx = gpu_context();
  const Kernel kernel = load_template_test_kernel(ctx.device(), "quant/nvfp4.cuh", "scale_sweep", R"(
extern "C" __global__ void scale_sweep(unsigned long long* mismatches, unsigned* first) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const unsigned long long start = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (unsigned long long i = start; i < (1ull << 32); i += stride) {
    const float x = __uint_as_float(unsigned(i));
    const arfuse::E4m3Scale hw = arfuse::nvfp4_scale(x), sw = arfuse::e4m3fn_scale(x);
    if (hw.code != sw.code || __float_as_uint(hw.value) != __float_as_uint(sw.value)) {
      atomicAdd(mismatches, 1ull);
      atomicMin(first, unsigned(i));
    }
  }
}
)");
  Stream stream(ctx.device());
  DeviceBuffer d_mismatches(ctx.device(), 8), d_first(ctx.device(), 4);
  d_mismatches.fill(0);
  d_first.fill(0xff);
  void* mismatches = d_mismatches.get();
  void* first = d_first.get();
  void* params[] = {&mismatches, &first};
  kernel.launch(4096u, stream, params);
  stream.synchronize();
  const auto count = d_mismatches.download<unsigned long long>(1);
  const auto at = d_first.download<std::uint32_t>(1);
  INFO("first mismatch at fp32 bits 0x" << std::hex << at[0]);
  CHECK(count[0] == 0);
}
