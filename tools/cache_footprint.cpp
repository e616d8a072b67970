#include "cache_footprint.hpp"

#include <fmt/format.h>

#include "arfuse/jit/block_shape.hpp"
#include "arfuse/jit/kernel_spec.hpp"

namespace arfuse::tools {
namespace {

struct Launch {
  jit::Target target;
  int threads;
};

Launch launch_of(const std::string& spec_text) {
  const jit::KernelSpec spec = jit::KernelSpec::parse(spec_text);
  return {spec.target, jit::block_shape(spec.hidden, spec.target.warp_size()).threads};
}

}  // namespace

std::string describe_footprint(const std::string& spec_text, const jit::KernelFootprint& footprint) {
  const Launch l = launch_of(spec_text);
  return jit::describe(l.target, l.threads, footprint);
}

int blocks_per_sm(const std::string& spec_text, const jit::KernelFootprint& footprint) {
  const Launch l = launch_of(spec_text);
  return l.target.vendor() == jit::Vendor::nvidia ? jit::nvidia_resident_blocks(l.target, l.threads, footprint) : 0;
}

std::string footprint_change(const std::string& spec_text, const jit::KernelFootprint& before,
                             const jit::KernelFootprint& after) {
  if (before == after) return "";
  const Launch l = launch_of(spec_text);
  const bool amd = l.target.vendor() == jit::Vendor::amd;
  std::string fields;
  const auto field = [&](const char* name, int x, int y, const char* unit) {
    if (x != y) fields += fmt::format("{}{} {} -> {}{}", fields.empty() ? "" : ", ", name, x, y, unit);
  };
  field(amd ? "VGPRs" : "registers", before.registers, after.registers, "");
  field("AGPRs", before.accumulation_registers, after.accumulation_registers, "");
  field("SGPRs", before.scalar_registers, after.scalar_registers, "");
  field(amd ? "LDS" : "shared", before.shared_bytes, after.shared_bytes, " B");
  field(amd ? "scratch" : "local", before.local_bytes, after.local_bytes, " B");
  if (amd) return fmt::format(" ({})", fields);
  return fmt::format(" ({}; {} -> {} blocks of {} threads per SM)", fields, blocks_per_sm(spec_text, before),
                     blocks_per_sm(spec_text, after), l.threads);
}

}  // namespace arfuse::tools
