// [cpu] One EpilogueMode, one validate(hidden): every entry point that takes a mode refuses a bad
// one with the very message EpilogueMode::validate gives, so a shape rule is written once.
#include "arfuse/modes.hpp"

#include <string>
#include <utility>
#include <vector>

#include "arfuse/epilogue.hpp"
#include "arfuse/error.hpp"
#include "arfuse/group.hpp"
#include "arfuse/jit/kernel_spec.hpp"

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
      {"group size not dividing hidden", EpilogueMode{Quant::fp8_group_mirror, Norm::gemma, 128}, 96, true},
      {"mxfp4 hidden not divisible by 32", EpilogueMode{Quant::mxfp4}, 40, true},
      {"mxfp4 column-major scales",
       EpilogueMode{Quant::mxfp4_mirror, Norm::rms, 128, ScaleFormat::f32, ScaleLayout::column_major}, 256, false},
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

    if (is_group_fp8(c.mode.quant) || is_mxfp4(c.mode.quant)) {
      GroupQuantArgs group;
      group.input = group.out = group.scales = aligned();
      group.tokens = 4, group.hidden = c.hidden;
      group.mode = c.mode;
      group.mode.quant = is_mxfp4(c.mode.quant) ? Quant::mxfp4 : Quant::fp8_group;
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
  REQUIRE_THROWS_WITH(parse_quant("fp4"), Contains("unknown quant mode 'fp4': allowed are none, fp8, fp8_mirror"));
  REQUIRE_THROWS_WITH(parse_scale_layout("rows"), Contains("allowed are row_major, column_major"));
  CHECK(EpilogueMode{Quant::fp8_group, Norm::gemma, 64, ScaleFormat::e8m0}.text() ==
        "fp8_group g64 e8m0 row_major gemma");
}
