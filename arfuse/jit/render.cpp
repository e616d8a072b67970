#include "jit/render.hpp"

#include <fmt/format.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "arfuse/quant_modes.hpp"

namespace arfuse::jit {
namespace {

const char* device_type(DType dtype) { return dtype == DType::f16 ? "arfuse::f16_t" : "arfuse::bf16_t"; }

const char* root_template(Module module) {
  return module == Module::fused_ar || module == Module::allreduce ? "fused_ar.cuh" : "rmsnorm_quant.cuh";
}

// One template argument as the kernel's source spells it: a type, a number or a truth value.
struct TemplateArgument {
  std::string text;
  TemplateArgument(const char* type) : text(type) {}            // NOLINT(google-explicit-constructor): a type's name
  TemplateArgument(int value) : text(std::to_string(value)) {}  // NOLINT(google-explicit-constructor)
  TemplateArgument(bool value) : text(value ? "true" : "false") {}  // NOLINT(google-explicit-constructor)
};

// "name<a, b, ...>": the instantiation NVRTC and hiprtc look up by name.
std::string instantiate(const char* name, std::initializer_list<TemplateArgument> arguments) {
  std::string s = std::string(name) + "<";
  for (const auto& a : arguments) s += (s.back() == '<' ? "" : ", ") + a.text;
  return s + ">";
}

// The arguments in each kernel template's parameter order (templates/rmsnorm_quant.cuh,
// templates/fused_ar.cuh).
std::string name_expression(const KernelSpec& s, const BlockShape& b) {
  const char* t = device_type(s.dtype);
  const int quant = s.quant_code(), norm = int(s.mode.norm), format = int(s.mode.scale_format);
  switch (s.module) {
    case Module::rmsnorm_quant:
      return instantiate("arfuse::rmsnorm_quant_kernel",
                         {t, s.hidden, b.threads, b.vectors_per_thread, quant, norm, s.mode.group_size, format, s.views,
                          min_resident_blocks(s, b)});
    case Module::token_quant:
      return instantiate("arfuse::token_quant_kernel", {t, s.hidden, b.threads, b.vectors_per_thread, s.views});
    case Module::group_quant:
      return instantiate("arfuse::group_quant_kernel",
                         {t, s.hidden, b.threads, b.vectors_per_thread, quant, s.mode.group_size, format, s.views});
    case Module::fused_ar:
    case Module::allreduce:
      return instantiate(s.graph_inputs ? "arfuse::fused_ar_graph_kernel" : "arfuse::fused_ar_kernel",
                         {t, s.hidden, b.threads, b.vectors_per_thread, quant, norm, s.mode.group_size, format, s.world,
                          s.stage, s.module == Module::fused_ar, s.views, min_resident_blocks(s, b)});
  }
  return {};
}

// IEEE division and square root, denormals kept, no contraction into FMA: the contract's
// rounding steps must survive the compiler.
std::vector<std::string> options_for(const Target& target) {
  std::vector<std::string> o;
  if (target.vendor() == Vendor::nvidia) {
    o = {"--gpu-architecture=" + target.name(),
         "--std=c++17",
         "--fmad=false",
         "--ftz=false",
         "--prec-div=true",
         "--prec-sqrt=true",
         "-DARFUSE_VENDOR_NVIDIA=1"};
  } else {
    o = {"--offload-arch=" + target.name(),
         "-std=c++17",
         "-O3",
         "-ffp-contract=off",
         "-fno-fast-math",
         "-DARFUSE_VENDOR_AMD=1"};
  }
  o.push_back(fmt::format("-DARFUSE_WARP_SIZE={}", target.warp_size()));
  o.push_back(fmt::format("-DARFUSE_FP8_FNUZ={}", target.fp8_format() == Fp8Format::e4m3fnuz ? 1 : 0));
  o.push_back(fmt::format("-DARFUSE_HW_FP8={}", target.hardware_fp8() ? 1 : 0));
  o.push_back(fmt::format("-DARFUSE_HW_PAIRED_F16={}", target.hardware_paired_f16() ? 1 : 0));
  return o;
}

}  // namespace

Source render(const KernelSpec& requested) {
  requested.validate();
  Source s;
  s.spec = requested.canonical();
  s.block = block_shape(s.spec.hidden, s.spec.target.warp_size());
  const std::string root = root_template(s.spec.module);
  s.program_name = std::string(to_string(s.spec.module)) + ".cu";
  // The root, then every mode's quantiser, which the root's kernels reach through Quantiser
  // (templates/quant/quantiser.cuh): the mode table is the one list of them.
  std::vector<std::string> roots{root};
  for (const QuantRow& row : kQuantRows) {
    if (*row.quantiser != '\0') roots.emplace_back(row.quantiser);
  }
  s.text = expand_includes(roots, s.templates);
  s.name_expression = name_expression(s.spec, s.block);
  s.options = options_for(s.spec.target);
  return s;
}

}  // namespace arfuse::jit
