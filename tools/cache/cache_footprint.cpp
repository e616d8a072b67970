#include "cache_footprint.hpp"

#include <fmt/format.h>

#include "jit/block_shape.hpp"

namespace arfuse::tools {
namespace {

int block_threads(const jit::KernelSpec& spec) {
  return jit::block_shape(spec.hidden, spec.target.warp_size()).threads;
}

}  // namespace

std::string describe_footprint(const jit::KernelSpec& spec, const jit::KernelFootprint& footprint) {
  return jit::describe(spec.target, block_threads(spec), footprint);
}

int blocks_per_sm(const jit::KernelSpec& spec, const jit::KernelFootprint& footprint) {
  if (spec.target.vendor() != Vendor::nvidia) return 0;
  return jit::nvidia_resident_blocks(spec.target, block_threads(spec), footprint);
}

std::string footprint_change(const jit::KernelSpec& spec, const jit::KernelFootprint& before,
                             const jit::KernelFootprint& after) {
  if (before == after) return "";
  const bool amd = spec.target.vendor() == Vendor::amd;
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
  return fmt::format(" ({}; {} -> {} blocks of {} threads per SM)", fields, blocks_per_sm(spec, before),
                     blocks_per_sm(spec, after), block_threads(spec));
}

}  // namespace arfuse::tools
