#include <catch2/catch.hpp>

#include "arfuse/base/error.hpp"
#include "arfuse/jit/compiler.hpp"
#include "arfuse/jit/render.hpp"

using namespace arfuse;
using namespace arfuse::jit;

TEST_CASE("render gives a self-contained program, name expression and options", "[cpu][jit]") {
  KernelSpec s = KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8/gemma/sm_90");
  Source src = render(s);
  CHECK(src.name_expression == "arfuse::rmsnorm_quant_kernel<arfuse::bf16_t, 6144, 384, 2, 1, 1>");
  CHECK(src.text.find("#include") == std::string::npos);
  REQUIRE(src.templates.size() == 3);
  CHECK(src.templates[0].name == "rmsnorm_quant.cuh");
  CHECK(src.options[0] == "--gpu-architecture=sm_90");
}

TEST_CASE("nvrtc smoke", "[cpu][nvrtc]") {
  auto c = nvrtc_compiler();
  INFO(c->identity());
  Source src = render(KernelSpec::parse("fused_ar/h6144/bf16/fp8/gemma/w4/s2/sm_90"));
  auto code = c->compile(src);
  CHECK(code.payload.size() > 1000);
  CHECK(!code.lowered_name.empty());
}

TEST_CASE("hiprtc smoke", "[cpu][hiprtc]") {
  auto c = hiprtc_compiler();
  INFO(c->identity());
  for (const char* s : {"rmsnorm_quant/h2880/f16/fp8_mirror/gemma/gfx90a", "fused_ar/h6144/bf16/fp8/rms/w4/s2/gfx1030", "token_quant/h6144/bf16/gfx90a"}) {
    auto code = c->compile(render(KernelSpec::parse(s)));
    CHECK(code.payload.size() > 1000);
  }
}
