// [cpu] One EpilogueMode, one validate(hidden): every entry point that takes a mode refuses a bad
// one with the very message EpilogueMode::validate gives, so a shape rule is written once.
#include "arfuse/modes.hpp"

#include <string>
#include <utility>
#include <vector>

#include "arfuse/epilogue.hpp"
#include "arfuse/error.hpp"
#include "arfuse/group.hpp"

#include "jit/kernel_spec.hpp"

#include "support.hpp"

using namespace arfuse;
using Catch::Contains;

namespace {

struct BadCase {
  const char* what;
  EpilogueMode mode;
  int hidden;
  bool kernel_rule;  // false: a rule of the launch (the scale layout), not of the kernel spec
};

std::vector<BadCase> bad_cases() {
  return {
      {"hidden not a multiple of 8", EpilogueMode{Quant::fp8}, 6145, true},
      {"hidden 0", EpilogueMode{}, 0, true},
      {"hidden above 32768", EpilogueMode{Quant::none}, 32776, true},
      {"group size 48", EpilogueMode{Quant::fp8_group, Norm::rms, 48}, 256, true},
      {"group size not dividing hidden",
       EpilogueMode{Quant::fp8_group, Norm::gemma, 128, ScaleFormat::f32, ScaleLayout::row_major, true}, 96, true},
      {"mxfp4 hidden not divisible by 32", EpilogueMode{Quant::mxfp4}, 40, true},
      {"nvfp4 hidden not divisible by 16", EpilogueMode{Quant::nvfp4}, 2056, true},
      {"mxfp4 column-major scales",
       EpilogueMode{Quant::mxfp4, Norm::rms, 128, ScaleFormat::f32, ScaleLayout::column_major, true}, 256, false},
      {"fp8 swizzled scales", EpilogueMode{Quant::fp8, Norm::rms, 128, ScaleFormat::f32, ScaleLayout::swizzled_128x4},
       256, false},
      {"the mirror without a quant mode",
       EpilogueMode{Quant::none, Norm::rms, 128, ScaleFormat::f32, ScaleLayout::row_major, true}, 256, true},
  };
}

// The message `call` throws, or "" when it throws nothing.
template <typename Call>
std::string message_of(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Pointers that pass every pointer check, so only the mode can be at fault.
void* aligned() {
  alignas(16) static unsigned char storage[16];
  return storage;
}

}  // namespace

TEST_CASE("every entry point refuses a bad mode with EpilogueMode::validate's message", "[cpu][modes]") {
  for (const BadCase& c : bad_cases()) {
    CAPTURE(c.what, c.mode.text(), c.hidden);
    const std::string expected = message_of([&] { c.mode.validate(c.hidden); });
    REQUIRE_FALSE(expected.empty());

    AllreduceRmsnormArgs fused;
    fused.input = fused.residual_in = fused.weight = aligned();
    fused.residual_out = fused.out = fused.scales = fused.mirror = aligned();
    fused.tokens = 4, fused.hidden = c.hidden, fused.mode = c.mode;
    CHECK(message_of([&] { validate_args(fused, 64, 32768); }) == expected);

    RmsnormQuantArgs epilogue = fused;
    CHECK(message_of([&] { validate_args(epilogue); }) == expected);

    if (group_quant_takes(c.mode.quant)) {
      GroupQuantArgs group;
      group.input = group.out = group.scales = aligned();
      group.tokens = 4, group.hidden = c.hidden;
      group.mode = c.mode;
      group.mode.mirror = false;
      const std::string own = message_of([&] { group.mode.validate(c.hidden); });  // names its own quant
      REQUIRE_FALSE(own.empty());
      CHECK(message_of([&] { validate_args(group); }) == own);
    }

    if (c.kernel_rule) {
      jit::KernelSpec spec;
      spec.module = jit::Module::fused_ar, spec.hidden = c.hidden, spec.mode = c.mode, spec.world = 4;
      CHECK(message_of([&] { spec.validate(); }) == expected);
    }
  }
}

TEST_CASE("the bench refuses a bad shape or mode with the same message", "[cpu][modes]") {
  const std::string bench = std::string(ARFUSE_BINARY_DIR) + "/tools/arfuse-bench";
  const auto odd = test::run(bench + " epilogue --shapes 12x6145 --quant fp8");
  CHECK(odd.status == 2);
  CHECK_THAT(odd.output, Contains(message_of([] { EpilogueMode{Quant::fp8}.validate(6145); })));
  const auto mx = test::run(bench + " epilogue --shapes 12x2888 --quant mxfp4");
  CHECK(mx.status == 2);
  CHECK_THAT(mx.output, Contains(message_of([] { EpilogueMode{Quant::mxfp4}.validate(2888); })));
}

TEST_CASE("modes by name: every name parses back, unknown names list the accepted ones", "[cpu][modes]") {
  for (Quant q : all_quants()) CHECK(parse_quant(to_string(q)) == q);
  for (Norm n : all_norms()) CHECK(parse_norm(to_string(n)) == n);
  for (DType d : all_dtypes()) CHECK(parse_dtype(to_string(d)) == d);
  for (ScaleFormat f : all_scale_formats()) CHECK(parse_scale_format(to_string(f)) == f);
  for (ScaleLayout l : all_scale_layouts()) CHECK(parse_scale_layout(to_string(l)) == l);
  REQUIRE_THROWS_WITH(parse_quant("fp4"),
                      Contains("unknown quant mode 'fp4': allowed are none, fp8, fp8_group, mxfp4, fp8_static, nvfp4"));
  REQUIRE_THROWS_WITH(parse_scale_layout("rows"), Contains("allowed are row_major, column_major"));
  CHECK(EpilogueMode{Quant::fp8_group, Norm::gemma, 64, ScaleFormat::e8m0}.text() ==
        "fp8_group g64 e8m0 row_major gemma");
  CHECK(EpilogueMode{Quant::nvfp4, Norm::rms, 128, ScaleFormat::f32, ScaleLayout::swizzled_128x4, true}.text() ==
        "nvfp4 swizzled_128x4 mirror rms");
  CHECK(EpilogueMode{Quant::mxfp4}.text() == "mxfp4 rms");
}

// What each mode writes and reads, as the mode table says and the outputs' shapes follow.
TEST_CASE("the mode table gives each mode's outputs, scales and scale argument", "[cpu][modes]") {
  const int hidden = 2048;
  const auto shape = [&](Quant q, ScaleLayout layout = ScaleLayout::row_major, int group = 64,
                         ScaleFormat format = ScaleFormat::f32) {
    return EpilogueMode{q, Norm::rms, group, format, layout}.scale_shape(hidden);
  };
  CHECK(shape(Quant::none).columns == 0);
  CHECK(shape(Quant::fp8_static).columns == 0);
  CHECK((shape(Quant::fp8).per_row && shape(Quant::fp8).columns == 1 && shape(Quant::fp8).element_bytes == 4));
  CHECK(shape(Quant::fp8_group).columns == hidden / 64);
  CHECK(shape(Quant::fp8_group).element_bytes == 4);
  CHECK(shape(Quant::fp8_group, ScaleLayout::row_major, 64, ScaleFormat::e8m0).element_bytes == 1);
  CHECK(shape(Quant::fp8_group, ScaleLayout::column_major).transposed);
  CHECK((shape(Quant::mxfp4).columns == hidden / 32 && shape(Quant::mxfp4).element_bytes == 1));
  CHECK(shape(Quant::nvfp4).columns == hidden / 16);
  CHECK(shape(Quant::nvfp4, ScaleLayout::swizzled_128x4).bytes(129) == 256 * (hidden / 16));
  for (Quant q : all_quants()) {
    CAPTURE(to_string(q));
    CHECK(EpilogueMode{q}.out_row(hidden) == (packs_fp4(q) ? hidden / 2 : hidden));
    CHECK(writes_scales(q) == (shape(q).columns > 0));
    CHECK((quant_scale_argument(q) != nullptr) == reads_quant_scale(q));
  }
  CHECK(std::string(quant_scale_argument(Quant::fp8_static)) == "static_scale");
  CHECK(std::string(quant_scale_argument(Quant::nvfp4)) == "global_scale");
  CHECK(pads_out(Quant::fp8));
  CHECK_FALSE(pads_out(Quant::mxfp4));
  CHECK_FALSE(group_quant_takes(Quant::fp8));
  CHECK(group_quant_takes(Quant::nvfp4));
}
