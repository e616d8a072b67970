#include "arfuse/jit/render.hpp"

#include <fmt/format.h>

namespace arfuse::jit {
namespace {

const char* device_type(DType dtype) { return dtype == DType::f16 ? "arfuse::f16_t" : "arfuse::bf16_t"; }

const char* root_template(Module module) {
  return module == Module::fused_ar || module == Module::allreduce ? "fused_ar.cuh" : "rmsnorm_quant.cuh";
}

std::string name_expression(const KernelSpec& s, const BlockShape& b) {
  const char* t = device_type(s.dtype);
  const char* views = s.views ? "true" : "false";
  switch (s.module) {
    case Module::rmsnorm_quant:
      return fmt::format("arfuse::rmsnorm_quant_kernel<{}, {}, {}, {}, {}, {}, {}, {}, {}, {}>", t, s.hidden, b.threads,
                         b.vectors_per_thread, int(s.mode.quant), int(s.mode.norm), s.mode.group_size,
                         int(s.mode.scale_format), views, min_resident_blocks(s, b));
    case Module::token_quant:
      return fmt::format("arfuse::token_quant_kernel<{}, {}, {}, {}, {}>", t, s.hidden, b.threads, b.vectors_per_thread,
                         views);
    case Module::group_quant:
      return fmt::format("arfuse::group_quant_kernel<{}, {}, {}, {}, {}, {}, {}, {}>", t, s.hidden, b.threads,
                         b.vectors_per_thread, int(s.mode.quant), s.mode.group_size, int(s.mode.scale_format), views);
    case Module::fused_ar:
    case Module::allreduce: {
      const bool epilogue = s.module == Module::fused_ar;
      return fmt::format("arfuse::fused_ar_kernel<{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}>", t, s.hidden,
                         b.threads, b.vectors_per_thread, int(s.mode.quant), int(s.mode.norm), s.mode.group_size,
                         int(s.mode.scale_format), s.world, s.stage, epilogue ? "true" : "false", views,
                         min_resident_blocks(s, b));
    }
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
  s.text = expand_includes(root, s.templates);
  s.name_expression = name_expression(s.spec, s.block);
  s.options = options_for(s.spec.target);
  return s;
}

}  // namespace arfuse::jit
