// [cpu] Every rmsnorm_quant spec compiles with NVRTC for sm_90; a representative set with
// hiprtc for the AMD ISAs this machine's hiprtc supports; unsupported targets are refused
// before any compile is attempted; the bench's own kernels compile too.
#include <algorithm>
#include <set>

#include "arfuse/error.hpp"

#include "jit/compiler.hpp"
#include "jit/elf_file.hpp"
#include "jit/kernel_footprint.hpp"
#include "jit/spec_set.hpp"

#include "bench_kernels.hpp"
#include "helper_kernels.hpp"
#include "support.hpp"

using namespace arfuse;
using namespace arfuse::jit;
using Catch::Contains;

TEST_CASE("render: self-contained program, name expression, options", "[cpu][jit]") {
  const Source src = render(KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8/gemma/sm_90"));
  CHECK(src.name_expression == "arfuse::rmsnorm_quant_kernel<arfuse::bf16_t, 6144, 384, 2, 1, 1, 0, 0, false, 4>");
  CHECK(src.text.find("#include") == std::string::npos);
  // The kernel's template and every one it includes, each once, then every mode's quantiser in
  // the mode table's order with what it includes (their bytes enter the key).
  std::vector<std::string> names;
  for (const auto& t : src.templates) names.push_back(t.name);
  const std::vector<std::string> root{
      "rmsnorm_quant.cuh", "epilogue.cuh",           "fp8_divide.cuh",       "host_device.cuh",
      "limits.cuh",        "microscaling.cuh",       "platform.cuh",         "quant/call_scale.cuh",
      "quant_table.cuh",   "arfuse/quant_modes.hpp", "quant/quantiser.cuh",  "reduce.cuh",
      "row.cuh",           "quant/token_fp8.cuh",    "quant/fp8_vectors.cuh"};
  REQUIRE(names.size() > root.size());
  CHECK(std::equal(root.begin(), root.end(), names.begin()));
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  for (auto name = names.begin() + std::ptrdiff_t(root.size()); name != names.end(); ++name) {
    CHECK(name->rfind("quant/", 0) == 0);
  }
  for (const QuantRow& row : kQuantRows) {
    if (*row.quantiser != '\0') CHECK(std::find(names.begin(), names.end(), row.quantiser) != names.end());
  }
  CHECK(src.options[0] == "--gpu-architecture=sm_90");
  CHECK(std::find(src.options.begin(), src.options.end(), "--fmad=false") != src.options.end());
  CHECK(std::find(src.options.begin(), src.options.end(), "-DARFUSE_HW_PAIRED_F16=1") != src.options.end());
  const Source amd = render(KernelSpec::parse("fused_ar/h2880/f16/fp8/rms/w4/s2/gfx942"));
  CHECK(amd.options[0] == "--offload-arch=gfx942");
  CHECK(std::find(amd.options.begin(), amd.options.end(), "-DARFUSE_WARP_SIZE=64") != amd.options.end());
  CHECK(std::find(amd.options.begin(), amd.options.end(), "-DARFUSE_FP8_FNUZ=1") != amd.options.end());
  CHECK(std::find(amd.options.begin(), amd.options.end(), "-DARFUSE_HW_PAIRED_F16=0") != amd.options.end());
  // The same, fused_ar.cuh in place of rmsnorm_quant.cuh, and signal.cuh with the codec it packs with.
  CHECK(amd.templates.size() == names.size() + 2);
}

TEST_CASE("launch bounds: a minimum of resident blocks only where it was measured to pay", "[cpu][jit]") {
  auto min_blocks = [](const char* text) {
    const KernelSpec s = KernelSpec::parse(text);
    const Source src = render(s);
    const int blocks = min_resident_blocks(s, src.block);
    if (s.module == Module::fused_ar || s.module == Module::allreduce || s.module == Module::rmsnorm_quant) {
      // The instantiation carries it, so a change of rule is a change of cache key.
      CHECK_THAT(src.name_expression, Catch::EndsWith(", " + std::to_string(blocks) + ">"));
    }
    return blocks;
  };
  CHECK(min_blocks("fused_ar/h8192/bf16/fp8/rms/w4/s1/sm_90") == 2);
  CHECK(min_blocks("fused_ar/h7688/f16/none/gemma/w2/s1/sm_80") == 2);
  CHECK(min_blocks("fused_ar/h6144/bf16/none/rms/w4/s1/sm_90") == 3);
  CHECK(min_blocks("fused_ar/h6144/f16/fp8/mirror/gemma/w8/s1/sm_90") == 2);
  CHECK(min_blocks("fused_ar/h6144/bf16/mxfp4/rms/w8/s1/sm_90") == 2);
  CHECK(min_blocks("rmsnorm_quant/h6144/bf16/fp8/rms/sm_90") == 4);
  CHECK(min_blocks("rmsnorm_quant/h6144/f16/mxfp4/mirror/gemma/sm_90") == 4);
  CHECK(min_blocks("rmsnorm_quant/h6144/bf16/fp8/rms/sm_89") == 4);  // 1536 threads per SM: 4 x 384 fit
  for (const char* none : {"fused_ar/h8192/bf16/fp8/rms/w4/s2/sm_90", "fused_ar/h8192/f16/fp8/mirror/gemma/w8/s1/sm_90",
                           "fused_ar/h6144/bf16/fp8/rms/w8/s2/sm_90", "fused_ar/h7680/bf16/fp8/rms/w4/s1/sm_90",
                           "fused_ar/h4096/bf16/fp8/rms/w4/s1/sm_90", "fused_ar/h16384/bf16/fp8/rms/w2/s1/sm_90",
                           "fused_ar/h8192/bf16/fp8/rms/w4/s1/gfx942", "allreduce/h8192/bf16/w4/s1/sm_90",
                           "rmsnorm_quant/h8192/bf16/fp8/rms/sm_90", "rmsnorm_quant/h6144/bf16/none/rms/sm_90",
                           "rmsnorm_quant/h6144/bf16/fp8/rms/gfx942", "rmsnorm_quant/h2880/bf16/fp8/rms/sm_90",
                           "rmsnorm_quant/h6144/bf16/fp8/rms/sm_75", "fused_ar/h6144/bf16/none/rms/w4/s1/sm_75"}) {
    CAPTURE(none);
    CHECK(min_blocks(none) == 0);
  }
}

TEST_CASE("a cubin's code sections: its kernel's code, constants, shared memory and code relocations", "[cpu][nvrtc]") {
  const CompiledCode code =
      nvrtc_compiler()->compile(render(KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8/rms/sm_90")));
  const auto sections = elf_code_sections(code.payload);
  REQUIRE(sections.count(".text." + code.lowered_name) == 1);
  CHECK(sections.at(".text." + code.lowered_name).size() > 1000);
  CHECK(sections.count(".nv.constant0." + code.lowered_name) == 1);
  CHECK_THAT(sections.at(".nv.shared." + code.lowered_name), Catch::EndsWith(" bytes"));
  // NVRTC 13 leaves .rela.text empty for these kernels; present, it is compared by symbol name.
  CHECK(sections.count("relocations of .text." + code.lowered_name) == 1);
  for (const auto& [name, bytes] : sections) CHECK(name.find(".nv.info") == std::string::npos);
}

namespace {

// An epilogue kernel that spills moves every spilled value through local memory on each row; none
// does today (jit::cubin_footprint), and a template change that makes one spill should be seen.
void require_no_local_memory(const CompiledCode& code) {
  const KernelFootprint f = cubin_footprint(code.payload);
  INFO(f.registers << " registers, " << f.shared_bytes << " B shared");
  CHECK(f.local_bytes == 0);
}

}  // namespace

TEST_CASE("NVRTC compiles every rmsnorm_quant and token_quant spec for sm_90, none spilling", "[cpu][nvrtc]") {
  auto nvrtc = nvrtc_compiler();
  INFO(nvrtc->identity());
  CHECK_THAT(nvrtc->identity(), Contains("nvrtc"));
  const int hidden = GENERATE(from_range(default_hidden_sizes()));
  const DType dtype = GENERATE(DType::f16, DType::bf16);
  for (Quant quant : all_quants()) {
    for (Norm norm : all_norms()) {
      KernelSpec s;
      s.module = Module::rmsnorm_quant, s.hidden = hidden, s.dtype = dtype, s.mode.quant = quant, s.mode.norm = norm;
      // Block-scaled modes: the largest group that divides hidden, the scale formats in turn.
      s.mode.group_size = hidden % 128 == 0 ? 128 : hidden % 64 == 0 ? 64 : 32;
      s.mode.scale_format = all_scale_formats()[size_t(hidden / 8 + int(norm)) % all_scale_formats().size()];
      CAPTURE(s.text());
      const CompiledCode code = nvrtc->compile(render(s));
      REQUIRE(code.payload.size() > 1000);
      REQUIRE(code.lowered_name.rfind("_Z", 0) == 0);  // a mangled template instance
      require_no_local_memory(code);
    }
  }
  KernelSpec tq = KernelSpec::parse("token_quant/h6144/bf16/sm_90");
  tq.hidden = hidden, tq.dtype = dtype;
  const CompiledCode token_quant = nvrtc->compile(render(tq));
  REQUIRE(token_quant.payload.size() > 1000);
  require_no_local_memory(token_quant);
  for (Quant quant : {Quant::fp8_group, Quant::mxfp4, Quant::fp8_static, Quant::nvfp4}) {
    KernelSpec gq = KernelSpec::parse("group_quant/h2048/bf16/mxfp4/sm_90");
    gq.hidden = hidden, gq.dtype = dtype, gq.mode.quant = quant, gq.mode.group_size = hidden % 128 == 0 ? 128 : 32;
    gq.mode.scale_format = all_scale_formats()[size_t(hidden / 8) % all_scale_formats().size()];
    CAPTURE(gq.text());
    const CompiledCode group_quant = nvrtc->compile(render(gq));
    REQUIRE(group_quant.payload.size() > 1000);
    require_no_local_memory(group_quant);
  }
}

TEST_CASE("NVRTC compiles the fused kernels' block-scaled and static modes for sm_90", "[cpu][nvrtc]") {
  auto nvrtc = nvrtc_compiler();
  for (const char* spec :
       {"fused_ar/h7168/bf16/fp8_group/g128/f32/rms/w8/s1/sm_90",
        "fused_ar/h8192/f16/fp8_group/g64/ue8m0_f32/mirror/gemma/w4/s2/sm_90",
        "fused_ar/h2880/bf16/fp8_group/g32/e8m0/rms/w2/s1/sm_90", "fused_ar/h2880/bf16/mxfp4/rms/w4/s1/sm_90",
        "fused_ar/h6144/f16/mxfp4/mirror/gemma/w8/s2/sm_90", "fused_ar/h7168/bf16/fp8_static/rms/w4/s1/sm_90",
        "fused_ar/h5120/f16/nvfp4/mirror/gemma/w8/s2/sm_90", "fused_ar/h2064/bf16/nvfp4/rms/w2/s1/sm_90"}) {
    CAPTURE(spec);
    REQUIRE(nvrtc->compile(render(KernelSpec::parse(spec))).payload.size() > 1000);
  }
}

// Blackwell: compile-only (no Blackwell GPU has run them); the software E4M3 and E2M1 encoders,
// so the same bytes as sm_90 by construction.
TEST_CASE("NVRTC compiles the static FP8 and NVFP4 kernels for sm_100 and sm_120", "[cpu][nvrtc]") {
  auto nvrtc = nvrtc_compiler();
  const std::string target = GENERATE(as<std::string>{}, "sm_100", "sm_120");
  for (const char* body : {"rmsnorm_quant/h7168/bf16/nvfp4/rms/", "rmsnorm_quant/h2880/f16/fp8_static/mirror/gemma/",
                           "fused_ar/h5120/bf16/nvfp4/mirror/rms/w4/s2/", "fused_ar/h6144/bf16/fp8_static/rms/w8/s1/",
                           "group_quant/h2880/bf16/nvfp4/", "group_quant/h7168/f16/fp8_static/"}) {
    const std::string spec = body + target;
    CAPTURE(spec);
    REQUIRE(nvrtc->compile(render(KernelSpec::parse(spec))).payload.size() > 1000);
  }
}

TEST_CASE("NVRTC compiles the bench's own kernels for sm_90 (copies, the floor's stream, the PDL producer)",
          "[cpu][nvrtc]") {
  auto compile = [](const std::string& name, const std::string& text) {
    return nvrtc_compiler()->compile(testing::helper_kernel_source(Target::parse("sm_90"), name, text));
  };
  for (const auto& v : testing::kCopyVariants) {
    CAPTURE(v.unroll, v.streaming, v.persistent, v.threads);
    CHECK(compile("copy", testing::copy_kernel_source(v)).lowered_name == "copy");
  }
  CHECK(compile("stream", testing::kStreamSource).lowered_name == "stream");
  CHECK(compile(testing::kProducerName, testing::kProducerSource).lowered_name == testing::kProducerName);
}

TEST_CASE("hiprtc compiles a representative set for gfx90a (wave64) and gfx1030 (wave32)", "[cpu][hiprtc]") {
  auto hiprtc = hiprtc_compiler();
  INFO(hiprtc->identity());
  const std::string target = GENERATE(as<std::string>{}, "gfx90a", "gfx1030");
  for (const char* body : {"rmsnorm_quant/h2880/f16/fp8/mirror/gemma/", "rmsnorm_quant/h6144/bf16/none/rms/",
                           "token_quant/h5120/bf16/", "fused_ar/h6144/bf16/fp8/rms/w4/s1/",
                           "fused_ar/h8192/f16/fp8/mirror/gemma/w8/s2/", "allreduce/h4096/bf16/w2/s2/",
                           "rmsnorm_quant/h4096/bf16/fp8_group/g64/f32/rms/", "fused_ar/h2880/f16/mxfp4/rms/w2/s1/"}) {
    const std::string spec = body + target;
    CAPTURE(spec);
    const CompiledCode code = hiprtc->compile(render(KernelSpec::parse(spec)));
    REQUIRE(code.payload.size() > 1000);
    REQUIRE(!code.lowered_name.empty());
    CHECK(kernel_footprint(code.payload).registers > 0);  // hiprtc 5.2's metadata note has the counts
  }
}

TEST_CASE("unsupported targets are refused before compiling, with the supported list", "[cpu][nvrtc][hiprtc]") {
  auto hiprtc = hiprtc_compiler();
  // Which of these a hiprtc knows depends on its version (Debian's 5.2 none, ROCm 5.7 gfx942 and
  // gfx1100): ask it. Debian's 5.2 aborts the process on an unknown one; the refusal must come first.
  const auto known = hiprtc->supported_targets();
  std::vector<std::string> unknown;
  for (const char* t : {"gfx942", "gfx1100", "gfx950", "gfx1250", "gfx1201"}) {
    if (std::find(known.begin(), known.end(), t) == known.end()) unknown.push_back(t);
  }
  REQUIRE_FALSE(unknown.empty());  // gfx1250 is known to no hiprtc this project has met
  for (const auto& t : unknown) {
    CAPTURE(t);
    REQUIRE_THROWS_AS(hiprtc->compile(render(KernelSpec::parse("token_quant/h6144/bf16/" + t))), UnsupportedTarget);
  }
  REQUIRE_THROWS_WITH(hiprtc->compile(render(KernelSpec::parse("token_quant/h6144/bf16/" + unknown[0]))),
                      Contains(unknown[0] + " is not supported") && Contains("gfx90a"));
  auto nvrtc = nvrtc_compiler();
  REQUIRE_THROWS_AS(nvrtc->compile(render(KernelSpec::parse("token_quant/h6144/bf16/gfx90a"))), UnsupportedTarget);
  REQUIRE_THROWS_WITH(nvrtc->compile(render(KernelSpec::parse("token_quant/h6144/bf16/sm_71"))), Contains("sm_90"));
}

TEST_CASE("a failing compile carries the log, the name expression and the options", "[cpu][nvrtc]") {
  Source src = render(KernelSpec::parse("token_quant/h6144/bf16/sm_90"));
  src.text += "\nthis is not C++;\n";
  try {
    nvrtc_compiler()->compile(src);
    FAIL("the compile did not fail");
  } catch (const CompileError& e) {
    CHECK_THAT(e.log(), Contains("error"));
    CHECK(e.name_expression() == src.name_expression);
    CHECK(e.options() == src.options);
    CHECK_THAT(e.what(), Contains("token_quant/h6144/bf16/sm_90"));
  }
}

TEST_CASE("ARFUSE_TEMPLATE_DIR reads the templates from disk", "[cpu][jit]") {
  setenv("ARFUSE_TEMPLATE_DIR", ARFUSE_SOURCE_DIR "/arfuse/templates", 1);
  const Source from_disk = render(KernelSpec::parse("token_quant/h6144/bf16/sm_90"));
  setenv("ARFUSE_TEMPLATE_DIR", "/nonexistent", 1);
  REQUIRE_THROWS_WITH(render(KernelSpec::parse("token_quant/h6144/bf16/sm_90")), Contains("ARFUSE_TEMPLATE_DIR"));
  unsetenv("ARFUSE_TEMPLATE_DIR");
  CHECK(render(KernelSpec::parse("token_quant/h6144/bf16/sm_90")).text == from_disk.text);
}
