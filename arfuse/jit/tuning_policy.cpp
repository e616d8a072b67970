#include <algorithm>

#include "jit/kernel_footprint.hpp"
#include "jit/tuning.hpp"
#include "templates/limits.cuh"

namespace arfuse::jit {

unsigned grid_blocks(int rows, int blocks_per_multiprocessor, int multiprocessors, int ranks_per_device) {
  const int resident = std::max(1, blocks_per_multiprocessor) * std::max(1, multiprocessors);
  const int cap = std::max(1, resident / std::max(1, ranks_per_device));
  return unsigned(std::max(1, std::min({rows, cap, kMaxBlocks})));
}

namespace {

// Whether `blocks` blocks of this shape fit the threads of one multiprocessor; where they do not,
// ptxas ignores the minimum with a warning.
bool fits(const KernelSpec& spec, const BlockShape& block, int blocks) {
  return blocks * block.threads <= nvidia_threads_per_multiprocessor(spec.target.generation());
}

// The quantising epilogue at 384 threads x 2 vectors (h6144) is compiled for 4 resident blocks
// (40 registers, no spill) rather than the compiler's 53 registers and 3 blocks; 5 blocks spill,
// and at 512 threads (h8192) a cap of 4 is slower (docs/performance.md, "Tuning decisions"). The
// unquantised epilogue was not measured with it, so it keeps no minimum.
int rmsnorm_quant_min_blocks(const KernelSpec& spec, const BlockShape& block) {
  if (spec.target.vendor() != Vendor::nvidia || spec.mode.quant == Quant::none) return 0;
  if (block.threads != 384 || block.vectors_per_thread != 2) return 0;
  return fits(spec, block, 4) ? 4 : 0;
}

// One-stage fused W = 8 at 384 threads (h6144) is compiled for 2 resident blocks (up to 85
// registers; left to itself the compiler takes 50 and 3 blocks): a fold over 8 peers wants more
// loads in flight (docs/performance.md, "Tuning decisions"). Not at 512 threads, where ptxas
// spills under 2 blocks.
int fused_w8_min_blocks(const KernelSpec& spec, const BlockShape& block) {
  return block.threads == 384 && fits(spec, block, 2) ? 2 : 0;
}

}  // namespace

int min_resident_blocks(const KernelSpec& spec, const BlockShape& block) {
  if (spec.module == Module::rmsnorm_quant) return rmsnorm_quant_min_blocks(spec, block);
  // Told the blocks per SM it already gets (2 of 512, 3 of 384 threads), ptxas uses the
  // registers that allows and schedules the one-stage fused kernel much better at the same
  // occupancy (docs/performance.md, "Tuning decisions"). Only where that was measured: a minimum
  // of 2 at 384 threads costs the third block, and at W = 8 the capped kernels spill, so W = 8
  // has its own rule (fused_w8_min_blocks).
  const bool fused_one_stage = spec.module == Module::fused_ar && spec.stage == 1;
  if (spec.target.vendor() != Vendor::nvidia || !fused_one_stage || block.vectors_per_thread != 2) return 0;
  if (spec.world > 4) return fused_w8_min_blocks(spec, block);
  const int blocks = block.threads == 512 ? 2 : block.threads == 384 ? 3 : 0;
  return fits(spec, block, blocks) ? blocks : 0;
}

}  // namespace arfuse::jit
