// [cpu][emulated] The standalone epilogue kernels of AMD targets, executed on the CPU
// (tests/emulated/emulated_kernel.hpp: the exact program the JIT renders, compiled for the host, one fiber
// per GPU thread) against the reference model, bit for bit, on fresh random inputs with special
// rows, rows that probe the inverse norm (tests/support/norm_probe.hpp) and poisoned outputs. wave32
// (gfx1250, gfx1100, gfx1200) and wave64 (gfx942 with e4m3fnuz, gfx90a, gfx950) block shapes; what
// is not checked here is the AMD hardware itself (see emulated_kernel.hpp).
#include <cmath>
#include <limits>

#include "jit/spec_set.hpp"
#include "reference/block_scaled.hpp"
#include "reference/model.hpp"
#include "runtime/kernel_args.hpp"

#include "emulated_kernel.hpp"
#include "norm_probe.hpp"
#include "row_layout.hpp"
#include "support.hpp"

using namespace arfuse;
using namespace arfuse::jit;
using arfuse::test::Bits16;
using arfuse::test::EmulatedKernel;

namespace {

constexpr int kFirstProbeRow = 6, kProbeRows = 4;

struct Case {
  std::string target;
  int tokens, hidden;
  DType dtype;
  test::QuantCase quant;
  Norm norm;
  int group = 128;
  ScaleFormat scale_format = ScaleFormat::f32;
  ScaleLayout scale_layout = ScaleLayout::row_major;
  bool strided = false;  // every tensor a view of a wider buffer, each with its own row stride
  int out_width = 0;     // 0: hidden; more: a padded output
};

void add_special_rows(Bits16& input, int tokens, int hidden, DType dtype) {
  auto set_row = [&](int row, float value) {
    for (int i = 0; i < hidden; ++i) input[size_t(row) * hidden + i] = reference::narrow(value, dtype);
  };
  REQUIRE(tokens >= kFirstProbeRow + kProbeRows);
  set_row(1, 0.0f);
  input[size_t(2) * hidden + 17] = reference::narrow(std::numeric_limits<float>::quiet_NaN(), dtype);
  input[size_t(3) * hidden + 5] = reference::narrow(std::numeric_limits<float>::infinity(), dtype);
  set_row(4, dtype == DType::f16 ? 60000.0f : 1e30f);
  set_row(5, 1e-7f);
}

// From row 10 on, the row scaled by powers of two (exact in T): by one in [2^-6, 2^6] for each warp
// of the block shape, times one in [2^-3, 2^3] for each vector. The partial sums of squares at
// every level of the reduction tree (a thread's chain, the warp's butterfly, the cross-warp step)
// then span many binades, so the f32 sum depends on the order in which the tree adds them, and a
// kernel whose tree differs from the contract's changes most such rows' inverse norm. With plain
// normal rows the partials are alike, and most reorderings give the same bits.
void scale_by_warp(Bits16& input, const Case& c, std::mt19937& rng) {
  const int warp_size = Target::parse(c.target).warp_size();
  const BlockShape shape = block_shape(c.hidden, warp_size);
  std::uniform_int_distribution<int> warp_exponent(-6, 6), vector_exponent(-3, 3);
  for (int row = kFirstProbeRow + kProbeRows; row < c.tokens; ++row) {
    std::vector<int> by_warp(size_t(shape.threads / warp_size));
    for (auto& e : by_warp) e = warp_exponent(rng);
    for (int v = 0; v < c.hidden / 8; ++v) {
      const float scale = std::ldexp(1.0f, by_warp[size_t(v % shape.threads / warp_size)] + vector_exponent(rng));
      for (int i = 0; i < 8; ++i) {
        auto& x = input[size_t(row) * c.hidden + size_t(v) * 8 + i];
        x = reference::narrow(reference::widen(x, c.dtype) * scale, c.dtype);
      }
    }
  }
}

KernelSpec spec_of(const Case& c, Module module, const test::QuantCase& quant) {
  KernelSpec s;
  s.module = module, s.hidden = c.hidden, s.dtype = c.dtype, s.mode = test::mode_of(quant, c.norm);
  if (quant.quant == Quant::fp8_group) s.mode.group_size = c.group, s.mode.scale_format = c.scale_format;
  s.target = Target::parse(c.target);
  s.views = c.strided || c.out_width != 0;
  return s;
}

// rmsnorm_quant, then token_quant or group_quant of its mirror (contract step 8), every output
// against the reference.
void check_epilogue(const Case& c) {
  CAPTURE(c.target, to_string(c.dtype), test::text(c.quant), to_string(c.norm), c.tokens, c.hidden, c.strided,
          c.out_width, c.group, to_string(c.scale_format), to_string(c.scale_layout));
  auto rng = test::fresh_rng();
  const int tokens = c.tokens, hidden = c.hidden;
  const size_t n = size_t(tokens) * hidden;
  Bits16 in = test::random_tensor(rng, n, c.dtype), residual = test::random_tensor(rng, n, c.dtype);
  Bits16 weight = test::random_tensor(rng, size_t(hidden), c.dtype, 0.5f);
  add_special_rows(in, tokens, hidden, c.dtype);
  const EpilogueMode mode = test::mode_of(c.quant, c.norm, c.group, c.scale_format, c.scale_layout);
  reference::EpilogueConfig config{
      hidden, c.dtype, mode, 1e-5f, Target::parse(c.target), test::test_quant_scale(c.quant.quant)};
  // Rows 6-9 probe the inverse norm (visible where y is: no quant, the mirror modes), the rest
  // are scaled by warp.
  test::plant_norm_probe_rows(config, kFirstProbeRow, kProbeRows, rng, in, residual, weight);
  scale_by_warp(in, c, rng);
  const auto expected = reference::epilogue(config, tokens, in, residual, weight);

  const bool mx = packs_fp4(c.quant.quant), nv = c.quant.quant == Quant::nvfp4,
             statik = c.quant.quant == Quant::fp8_static;
  const bool grouped = c.quant.quant == Quant::fp8_group || mx;
  const bool byte_scales = mx || (grouped && c.scale_format == ScaleFormat::e8m0);
  const int out_unit = c.quant == Quant::none ? 2 : 1;  // bytes per unit of out's stride
  const int out_row_bytes = mx ? hidden / 2 : hidden * out_unit;
  const size_t scale_count = nv        ? reference::nvfp4_scale_count(tokens, hidden, c.scale_layout)
                             : statik  ? 0
                             : grouped ? n / size_t(c.quant.quant == Quant::mxfp4 ? 32 : c.group)
                                       : size_t(tokens);
  float quant_scale = config.quant_scale;
  RmsnormQuantArgs call = test::epilogue_layout(tokens, hidden, c.dtype, mode, c.strided, c.out_width);
  const RowStrides rows = detail::row_strides(call);
  const Bits16 in_rows = test::spread_rows(in, tokens, hidden, rows.input);
  const Bits16 residual_rows = test::spread_rows(residual, tokens, hidden, rows.residual_in);
  auto residual_out = test::poisoned<std::uint16_t>(size_t(tokens) * size_t(rows.residual_out));
  auto mirror = test::poisoned<std::uint16_t>(size_t(tokens) * size_t(rows.mirror));
  auto out = test::poisoned<std::uint8_t>(size_t(tokens) * size_t(rows.out) * size_t(out_unit));
  auto scales = test::poisoned<std::uint8_t>(scale_count * 4);
  call.input = in_rows.data(), call.residual_in = residual_rows.data(), call.residual_out = residual_out.data();
  call.weight = weight.data(), call.out = out.data(), call.scales = statik ? nullptr : scales.data(),
  call.mirror = mirror.data();
  if (statik) call.static_scale = &quant_scale;
  if (nv) call.global_scale = &quant_scale;
  validate_args(call);

  const EmulatedKernel kernel(spec_of(c, Module::rmsnorm_quant, c.quant));
  const auto strides = detail::scale_strides(mode, tokens, hidden);
  const void *in_p = in_rows.data(), *residual_p = residual_rows.data(), *weight_p = weight.data();
  void *residual_out_p = residual_out.data(), *out_p = out.data(), *scales_p = scales.data(), *mirror_p = mirror.data();
  float eps = 1e-5f;
  int tokens_arg = tokens, row_stride = strides.row, group_stride = strides.group;
  RowStrides rows_arg = rows;
  const float* quant_scale_p = detail::quant_scale(call);
  void* params[] = {&in_p,     &residual_p, &residual_out_p, &weight_p,     &eps,      &out_p,        &scales_p,
                    &mirror_p, &tokens_arg, &row_stride,     &group_stride, &rows_arg, &quant_scale_p};
  kernel.launch(unsigned(tokens), params);

  const Bits16 residual_out_packed =
      test::packed_rows(residual_out, tokens, hidden, rows.residual_out, hidden, "residual_out");
  const auto out_packed = test::packed_rows(out, tokens, out_row_bytes, rows.out * out_unit,
                                            mx ? out_row_bytes : rows.out_width * out_unit, "out");
  const Bits16 mirror_packed = c.quant.mirror ? test::packed_rows(mirror, tokens, hidden, rows.mirror, hidden, "mirror")
                                              : Bits16(mirror.begin(), mirror.begin() + long(n));
  test::require_epilogue_bytes({residual_out_packed, out_packed, scales, mirror_packed}, expected, config, tokens);
  if (!c.quant.mirror) return;

  // Step 8: quantising the mirror alone gives the same bytes and scales.
  auto q2 = test::poisoned<std::uint8_t>(size_t(tokens) * size_t(out_row_bytes)),
       s2 = test::poisoned<std::uint8_t>(scale_count * 4);
  void *q2_p = q2.data(), *s2_p = s2.data();
  const void* mirror_in = mirror.data();
  if (grouped || statik) {
    const Quant alone = c.quant.quant;
    GroupQuantArgs quant_call;
    quant_call.hidden = hidden, quant_call.mode = EpilogueMode{alone};
    quant_call.input_stride = rows.mirror;
    RowStrides quant_rows = detail::row_strides(quant_call);
    const EmulatedKernel quantiser(spec_of(c, Module::group_quant, alone));
    void* qparams[] = {&mirror_in, &q2_p, &s2_p, &tokens_arg, &row_stride, &group_stride, &quant_rows, &quant_scale_p};
    quantiser.launch(unsigned(tokens), qparams);
  } else {
    TokenQuantArgs quant_call;
    quant_call.hidden = hidden, quant_call.input_stride = rows.mirror;
    RowStrides quant_rows = detail::row_strides(quant_call);
    const EmulatedKernel quantiser(spec_of(c, Module::token_quant, Quant::fp8));
    void* qparams[] = {&mirror_in, &q2_p, &s2_p, &tokens_arg, &quant_rows};
    quantiser.launch(unsigned(tokens), qparams);
  }
  test::require_bits_equal(q2, out_packed, "quantised mirror vs the epilogue's bytes", mx ? hidden / 2 : hidden);
  const size_t scale_bytes = scale_count * (byte_scales ? 1 : 4);
  test::require_bits_equal(std::vector<std::uint8_t>(s2.begin(), s2.begin() + long(scale_bytes)),
                           std::vector<std::uint8_t>(scales.begin(), scales.begin() + long(scale_bytes)),
                           "quantised mirror's scales vs the epilogue's", int(scale_bytes / size_t(tokens)));
}

}  // namespace

// Every quant mode on each wave size and FP8 encoding, with hidden sizes that are not powers of
// two (2880: vectors that do not fill the block), odd token counts, both norms and dtypes, every
// group size, scale format and layout.
TEST_CASE("emulated AMD epilogue kernels equal the reference", "[cpu][emulated]") {
  using F = ScaleFormat;
  using L = ScaleLayout;
  const Case cases[] = {
      // wave32: gfx1250 (the seed's target), gfx1100, gfx1200
      {"gfx1250", 11, 6144, DType::bf16, Quant::none, Norm::rms},
      {"gfx1250", 13, 2880, DType::f16, Quant::fp8, Norm::gemma},
      {"gfx1250", 11, 7168, DType::bf16, test::mirror(Quant::fp8), Norm::rms},
      {"gfx1250", 15, 8192, DType::bf16, Quant::fp8_group, Norm::rms, 128, F::e8m0, L::column_major},
      {"gfx1250", 11, 2880, DType::f16, test::mirror(Quant::fp8_group), Norm::gemma, 32, F::ue8m0_f32, L::row_major},
      {"gfx1250", 13, 7168, DType::bf16, Quant::mxfp4, Norm::gemma},
      {"gfx1250", 11, 2880, DType::bf16, test::mirror(Quant::mxfp4), Norm::rms},
      {"gfx1100", 11, 2048, DType::f16, Quant::none, Norm::gemma},
      {"gfx1100", 17, 5120, DType::bf16, test::mirror(Quant::fp8), Norm::rms},
      {"gfx1100", 11, 6144, DType::f16, test::mirror(Quant::fp8_group), Norm::rms, 64, F::f32, L::column_major},
      {"gfx1100", 11, 4096, DType::f16, test::mirror(Quant::mxfp4), Norm::gemma},
      {"gfx1200", 13, 7168, DType::bf16, test::mirror(Quant::fp8_group), Norm::rms, 128, F::ue8m0_f32, L::row_major},
      // wave64: gfx942 (e4m3fnuz), gfx90a, gfx950
      {"gfx942", 11, 2880, DType::bf16, Quant::none, Norm::rms},
      {"gfx942", 13, 8192, DType::bf16, Quant::fp8, Norm::rms},
      {"gfx942", 11, 6144, DType::f16, test::mirror(Quant::fp8), Norm::gemma},
      {"gfx942", 11, 7168, DType::bf16, Quant::fp8_group, Norm::gemma, 128, F::f32, L::row_major},
      {"gfx942", 15, 2880, DType::bf16, test::mirror(Quant::fp8_group), Norm::rms, 64, F::e8m0, L::row_major},
      {"gfx942", 11, 8192, DType::f16, Quant::mxfp4, Norm::rms},
      {"gfx942", 11, 6144, DType::bf16, test::mirror(Quant::mxfp4), Norm::gemma},
      {"gfx90a", 11, 7168, DType::f16, Quant::none, Norm::rms},
      {"gfx90a", 13, 2048, DType::bf16, test::mirror(Quant::fp8), Norm::gemma},
      {"gfx90a", 11, 5120, DType::bf16, Quant::fp8_group, Norm::rms, 32, F::ue8m0_f32, L::column_major},
      {"gfx90a", 11, 2880, DType::bf16, Quant::mxfp4, Norm::rms},
      {"gfx950", 11, 6144, DType::bf16, test::mirror(Quant::fp8), Norm::rms},
      {"gfx950", 13, 2880, DType::f16, test::mirror(Quant::mxfp4), Norm::rms},
      // every tensor strided (each its own stride), padded outputs
      {"gfx1250", 11, 2880, DType::bf16, Quant::none, Norm::rms, 128, F::f32, L::row_major, true, 3072},
      {"gfx942", 13, 6144, DType::f16, test::mirror(Quant::fp8), Norm::gemma, 128, F::f32, L::row_major, true, 6400},
      {"gfx1250", 11, 7168, DType::bf16, test::mirror(Quant::fp8_group), Norm::rms, 64, F::ue8m0_f32, L::column_major,
       true},
      {"gfx942", 11, 2880, DType::bf16, test::mirror(Quant::mxfp4), Norm::rms, 128, F::f32, L::row_major, true},
      {"gfx1100", 11, 4096, DType::bf16, Quant::fp8, Norm::rms, 128, F::f32, L::row_major, false, 4352},
      // static per-tensor FP8 and NVFP4 (both scale layouts; 2880 / 16 = 180 columns, 5120 / 16 = 320,
      // 2064 / 16 = 129: swizzled column padding)
      {"gfx1250", 11, 6144, DType::bf16, Quant::fp8_static, Norm::rms},
      {"gfx942", 13, 2880, DType::f16, test::mirror(Quant::fp8_static), Norm::gemma},
      {"gfx950", 11, 7168, DType::bf16, test::mirror(Quant::fp8_static), Norm::rms, 128, F::f32, L::row_major, true,
       7424},
      {"gfx1250", 13, 2880, DType::bf16, Quant::nvfp4, Norm::rms, 128, F::f32, L::swizzled_128x4},
      {"gfx1250", 170, 2880, DType::bf16, Quant::nvfp4, Norm::rms, 128, F::f32,
       L::swizzled_128x4},  // band 1, rows 42-127
      {"gfx942", 11, 5120, DType::f16, test::mirror(Quant::nvfp4), Norm::gemma, 128, F::f32, L::row_major},
      {"gfx950", 11, 2064, DType::bf16, test::mirror(Quant::nvfp4), Norm::rms, 128, F::f32, L::swizzled_128x4},
      {"gfx1100", 11, 7168, DType::bf16, test::mirror(Quant::nvfp4), Norm::rms, 128, F::f32, L::swizzled_128x4, true},
  };
  for (const auto& c : cases) check_epilogue(c);
}

// Hidden (about 5 minutes a target on 2 cores; run by hand after a template change): every
// standalone kernel of the default set, rmsnorm_quant in each mode and token_quant and
// group_quant through the mirror modes, as in the CI case above.
namespace {

void sweep_standalone(const std::string& target) {
  int ran = 0;
  for (const KernelSpec& s : default_specs({Target::parse(target)})) {
    Case c{target,
           11,
           s.hidden,
           s.dtype,
           test::QuantCase{s.mode.quant, s.mode.mirror},
           s.mode.norm,
           s.mode.group_size,
           s.mode.scale_format,
           ScaleLayout::row_major};
    if (s.module == Module::token_quant) c.quant = test::mirror(Quant::fp8);
    if (s.module == Module::group_quant) c.quant = test::mirror(s.mode.quant);
    if (s.module != Module::rmsnorm_quant && s.module != Module::token_quant && s.module != Module::group_quant)
      continue;
    check_epilogue(c);
    ++ran;
  }
  WARN(ran << " default-set standalone specs of " << target << " ran bit-exact in emulation");
}

}  // namespace

TEST_CASE("emulated: every default-set standalone kernel of gfx1250", "[.][emulated-sweep][gfx1250]") {
  sweep_standalone("gfx1250");
}
TEST_CASE("emulated: every default-set standalone kernel of gfx942", "[.][emulated-sweep][gfx942]") {
  sweep_standalone("gfx942");
}
