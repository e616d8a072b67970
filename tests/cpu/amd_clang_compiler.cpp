// [cpu] The clang back end for the AMD targets the loaded hiprtc does not know: every module
// compiles for gfx90a, gfx942, gfx950, gfx1030, gfx1100, gfx1200 and gfx1250; the code objects
// carry the right target, wavefront size and FP8 range; the machine code keeps the contract's
// cross-warp step (one warp loads the partials and reduces them across lanes, no serial fold).
// Nothing here runs on an AMD GPU.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "arfuse/error.hpp"

#include "jit/compiler.hpp"
#include "jit/elf_file.hpp"
#include "jit/kernel_footprint.hpp"

#include "support.hpp"

using namespace arfuse;
using namespace arfuse::jit;
using Catch::Contains;

namespace {

CompiledCode compile(const std::string& spec) { return amd_clang_compiler()->compile(render(KernelSpec::parse(spec))); }

bool contains_bytes(const std::vector<std::uint8_t>& haystack, const void* needle, size_t size) {
  const auto* n = static_cast<const std::uint8_t*>(needle);
  return std::search(haystack.begin(), haystack.end(), n, n + size) != haystack.end();
}

// The AMDGPU metadata note (NT_AMDGPU_METADATA, msgpack) as bytes.
std::vector<std::uint8_t> metadata_note(const std::vector<std::uint8_t>& code_object) {
  for (const auto& note : elf_notes(code_object)) {
    if (note.name == "AMDGPU" && note.type == 32) return note.description;
  }
  FAIL("the code object has no AMDGPU metadata note");
  return {};
}

// The kernel's own instructions: the assembly between its label and its end marker.
std::string kernel_body(const std::string& assembly, const std::string& symbol) {
  const size_t begin = assembly.find("\n" + symbol + ":");
  const size_t end = assembly.find(".Lfunc_end0", begin);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  return assembly.substr(begin, end - begin);
}

// Where the kernel's descriptor (64 bytes at its ".kd" symbol) lies in the code object's file.
std::uint64_t descriptor_offset(const CompiledCode& code) {
  const auto sections = elf_sections(code.payload);
  const auto symbols = elf_symbols(code.payload);
  const auto kd = std::find_if(symbols.begin(), symbols.end(),
                               [&](const ElfSymbol& s) { return s.name == code.lowered_name + ".kd"; });
  REQUIRE(kd != symbols.end());
  REQUIRE(kd->section < sections.size());
  const ElfSection& rodata = sections[kd->section];
  return rodata.offset + (kd->value - rodata.address);
}

}  // namespace

TEST_CASE("the clang back end builds every module for the AMD targets", "[cpu][amdclang]") {
  const std::string target =
      GENERATE(as<std::string>{}, "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1200", "gfx1250");
  for (const char* body :
       {"rmsnorm_quant/h7168/bf16/fp8/rms/", "rmsnorm_quant/h2880/f16/fp8/mirror/gemma/", "token_quant/h2048/bf16/",
        "fused_ar/h6144/bf16/fp8/rms/w4/s1/", "fused_ar/h2880/f16/fp8/mirror/gemma/w8/s2/",
        "allreduce/h4096/bf16/w2/s2/", "rmsnorm_quant/h7168/bf16/fp8_group/g128/e8m0/rms/",
        "rmsnorm_quant/h2880/f16/mxfp4/gemma/", "fused_ar/h7168/bf16/fp8_group/g32/ue8m0_f32/rms/w8/s1/",
        "fused_ar/h2880/bf16/mxfp4/mirror/rms/w4/s2/", "group_quant/h7168/bf16/fp8_group/g64/e8m0/",
        "group_quant/h2880/f16/mxfp4/", "rmsnorm_quant/h5120/bf16/fp8_static/mirror/rms/",
        "fused_ar/h7168/f16/nvfp4/gemma/w4/s2/", "rmsnorm_quant/h2064/bf16/nvfp4/mirror/rms/",
        "group_quant/h2880/bf16/nvfp4/", "group_quant/h6144/f16/fp8_static/"}) {
    const std::string spec = body + target;
    CAPTURE(spec);
    const CompiledCode code = compile(spec);
    CHECK(code.payload.size() > 1000);
    CHECK(elf_machine(code.payload) == 0xE0);  // EM_AMDGPU
    const auto symbols = elf_symbol_names(code.payload);
    CHECK(std::count(symbols.begin(), symbols.end(), code.lowered_name + ".kd") == 1);  // a kernel, found by demangling
  }
}

TEST_CASE("a code object's sections are read by name; a cut or foreign file is an Error", "[cpu][amdclang]") {
  const CompiledCode code = compile("rmsnorm_quant/h2048/bf16/fp8/rms/gfx942");
  const auto sections = elf_sections(code.payload);
  const auto text =
      std::find_if(sections.begin(), sections.end(), [](const ElfSection& s) { return s.name == ".text"; });
  REQUIRE(text != sections.end());
  CHECK(text->bytes.size() == text->size);
  CHECK(text->size > 100);
  std::vector<std::uint8_t> cut(code.payload.begin(), code.payload.begin() + long(code.payload.size() / 2));
  CHECK_THROWS_AS(elf_sections(cut), arfuse::Error);  // its section table lies past the end
  std::vector<std::uint8_t> foreign(code.payload.size(), 0x7f);
  CHECK_THROWS_AS(elf_sections(foreign), arfuse::Error);
}

TEST_CASE("a code object's code sections: its instructions and register counts count, the descriptor's code offset not",
          "[cpu][amdclang]") {
  const CompiledCode code = compile("rmsnorm_quant/h2048/bf16/mxfp4/rms/gfx942");
  const std::uint64_t descriptor = descriptor_offset(code);
  const auto sections = elf_sections(code.payload);
  const auto text =
      std::find_if(sections.begin(), sections.end(), [](const ElfSection& s) { return s.name == ".text"; });
  REQUIRE(text != sections.end());
  const auto original = elf_code_sections(code.payload);
  auto changed = [&](std::uint64_t at) {
    std::vector<std::uint8_t> file = code.payload;
    file.at(at) ^= 0x01;
    return elf_code_sections(file) != original;
  };
  CHECK_FALSE(changed(descriptor + 16));  // kernel_code_entry_byte_offset: where the linker put the code
  CHECK(changed(descriptor + 48));        // compute_pgm_rsrc1: the VGPR and SGPR counts
  CHECK(changed(descriptor + 0));         // group_segment_fixed_size: the LDS bytes
  CHECK(changed(text->offset + text->size / 2));
}

TEST_CASE("an AMD code object's footprint: its metadata's counts, which its kernel descriptor agrees with",
          "[cpu][amdclang]") {
  const std::string target = GENERATE(as<std::string>{}, "gfx942", "gfx1250");
  const CompiledCode code = compile("rmsnorm_quant/h6144/bf16/fp8/rms/" + target);
  const KernelFootprint f = code_object_footprint(code.payload);
  CAPTURE(target, f.registers, f.accumulation_registers, f.scalar_registers, f.shared_bytes, f.local_bytes);
  CHECK(kernel_footprint(code.payload) == f);
  // The LDS is the block reductions' scratch (AMD stages no weight): two arrays of warp size + 1 floats.
  const int warp = Target::parse(target).warp_size();
  CHECK(f.shared_bytes == 2 * (warp + 1) * 4);
  CHECK(f.local_bytes == 0);
  CHECK(f.accumulation_registers == 0);
  CHECK(f.scalar_registers > 0);
  // The descriptor (64 bytes at the .kd symbol): LDS and scratch bytes, and compute_pgm_rsrc1's
  // granulated VGPR count: blocks of 8 on gfx942 (wave64, VGPRs and AGPRs together; LLVM's
  // AMDGPUUsage); clang 22 encodes gfx1250's in blocks of 16 (2 for 44 VGPRs).
  const std::uint64_t descriptor = descriptor_offset(code);
  REQUIRE(descriptor + 64 <= code.payload.size());
  const auto word = [&](std::uint64_t at) {
    std::uint32_t v;
    std::memcpy(&v, code.payload.data() + descriptor + at, 4);
    return v;
  };
  CHECK(word(0) == std::uint32_t(f.shared_bytes));
  CHECK(word(4) == std::uint32_t(f.local_bytes));
  const int granule = target == "gfx942" ? 8 : 16;
  CHECK((word(48) & 0x3f) == std::uint32_t((f.registers + granule - 1) / granule - 1));
  CHECK(describe(Target::parse(target), 384, f) ==
        fmt::format("{} VGPRs, 0 AGPRs, {} SGPRs, {} B LDS", f.registers, f.scalar_registers, f.shared_bytes));
  // A metadata note without the VGPR count is an error, not a footprint of 0 registers.
  std::vector<std::uint8_t> renamed = code.payload;
  const std::string key = ".vgpr_count";
  const auto at = std::search(renamed.begin(), renamed.end(), key.begin(), key.end());
  REQUIRE(at != renamed.end());
  at[6] = 'x';  // ".vgpr_xount"
  CHECK_THROWS_WITH(code_object_footprint(renamed), Catch::Contains("no .vgpr_count"));
}

TEST_CASE("AMD code objects say their target, wavefront size and FP8 range", "[cpu][amdclang]") {
  struct Expect {
    const char* target;
    std::uint8_t wavefront;  // msgpack positive fixint: the value itself
    float fp8_max;
  };
  const auto e = GENERATE(Expect{"gfx942", 64, 240.0f}, Expect{"gfx950", 64, 448.0f}, Expect{"gfx1250", 32, 448.0f},
                          Expect{"gfx1100", 32, 448.0f});
  CAPTURE(e.target);
  const CompiledCode code = compile(std::string("rmsnorm_quant/h6144/bf16/fp8/rms/") + e.target);
  const auto note = metadata_note(code.payload);
  const std::string target = std::string("amdgcn-amd-amdhsa--") + e.target;
  CHECK(contains_bytes(note, target.data(), target.size()));
  const std::string key = ".wavefront_size";
  std::vector<std::uint8_t> entry(key.begin(), key.end());
  entry.push_back(e.wavefront);
  CHECK(contains_bytes(note, entry.data(), entry.size()));
  // The FP8 range is a 32-bit literal in the machine code: 240 (e4m3fnuz) only on gfx942.
  const float other = e.fp8_max == 240.0f ? 448.0f : 240.0f;
  CHECK(contains_bytes(code.payload, &e.fp8_max, 4));
  CHECK_FALSE(contains_bytes(code.payload, &other, 4));
}

TEST_CASE("AMD machine code keeps the contract's cross-warp step for the square sum and the amax", "[cpu][amdclang]") {
  const std::string target = GENERATE(as<std::string>{}, "gfx1250", "gfx942");
  CAPTURE(target);
  const Source source = render(KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8/rms/" + target));
  const int wave = source.spec.target.warp_size(), warps = source.block.threads / wave;
  const int log2_wave = wave == 64 ? 6 : 5;
  const std::string lowered = amd_clang_compiler()->compile(source).lowered_name;
  const std::string body = kernel_body(amd_clang_assembly(source), lowered);
  const int cross_lane =
      test::count_of(body, "ds_bpermute") + test::count_of(body, "_dpp") + test::count_of(body, "permlane");
  const int lds_loads = test::count_of(body, "ds_load") + test::count_of(body, "ds_read");
  CAPTURE(wave, warps, cross_lane, lds_loads);
  // Two reductions (square sum, amax), each a warp step of log2(wave) cross-lane exchanges and a
  // cross-warp step of log2 of the smallest power of two >= warps (the levels above it cannot
  // change lane 0's bits: epilogue.cuh's block_reduce).
  int log2_lanes = 0;
  while ((1 << log2_lanes) < warps) ++log2_lanes;
  CHECK(cross_lane >= 2 * (log2_wave + log2_lanes));
  // Per reduction one load of a lane's partial and one of the block's result: a serial fold
  // would load every warp's partial (warps > 2 here).
  CHECK(warps > 2);
  CHECK(lds_loads <= 4);
}

TEST_CASE("hiprtc builds the targets it knows, clang the rest; a bad ARFUSE_AMD_CLANG is a clear error",
          "[cpu][amdclang]") {
  CHECK_THAT(compiler_for(Target::parse("gfx1250"))->identity(), Contains("clang 2"));
  try {
    if (hiprtc_compiler()->supports(Target::parse("gfx90a"))) {
      CHECK_THAT(compiler_for(Target::parse("gfx90a"))->identity(), Contains("hiprtc"));
    }
  } catch (const Unavailable&) {
    WARN("no hiprtc here: only the clang path was checked");
  }
  const char* saved = std::getenv("ARFUSE_AMD_CLANG");
  const std::string restore = saved != nullptr ? saved : "";
  setenv("ARFUSE_AMD_CLANG", "/nonexistent/clang", 1);
  REQUIRE_THROWS_WITH(amd_clang_compiler(), Contains("ARFUSE_AMD_CLANG='/nonexistent/clang' is not an executable"));
  setenv("ARFUSE_AMD_CLANG", "/bin/true", 1);
  REQUIRE_THROWS_WITH(amd_clang_compiler(), Contains("knows no AMD target"));
  REQUIRE_THROWS_AS(compiler_for(Target::parse("gfx1999")), UnsupportedTarget);
  if (restore.empty())
    unsetenv("ARFUSE_AMD_CLANG");
  else
    setenv("ARFUSE_AMD_CLANG", restore.c_str(), 1);
  REQUIRE_THROWS_AS(compile("token_quant/h2048/bf16/gfx1999"), UnsupportedTarget);
}
