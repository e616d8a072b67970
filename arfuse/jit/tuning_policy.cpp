#include <algorithm>

#include "arfuse/jit/kernel_footprint.hpp"
#include "arfuse/jit/tuning.hpp"
#include "arfuse/templates/limits.cuh"

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

// The quantising epilogue at 384 threads x 2 vectors (h6144): NVRTC 12 gives per-token FP8
// 53 registers there (3 blocks per SM); compiled for 4 blocks (40 registers, no spill) it was
// 2-7 % faster on the H200 (512x6144 FP8 8.48 -> 7.88 µs, 2517x6144 28.94 -> 28.35;
// fp8_group and MXFP4, already at 40 registers, 0.5 %). 5 blocks (32 registers) spilled and
// lost 3-10 %; at 512 threads (h8192) the cap of 4 blocks lost 3-4 % (docs/performance-notes.md
// section 17). The unquantised epilogue was not measured with it, so it keeps no minimum.
int rmsnorm_quant_min_blocks(const KernelSpec& spec, const BlockShape& block) {
  if (spec.target.vendor() != Vendor::nvidia || spec.mode.quant == Quant::none) return 0;
  if (block.threads != 384 || block.vectors_per_thread != 2) return 0;
  return fits(spec, block, 4) ? 4 : 0;
}

// One-stage fused W = 8 at 384 threads (h6144): left to itself NVRTC gives it 50 registers (3
// blocks per SM), and a variant it happened to give 66-74 ran 8-13 % faster at 12-128 tokens
// (docs/performance-notes.md section 21): a fold over 8 peers wants more loads in flight. 2 blocks
// allow 85 registers. Not at 512 threads, where ptxas spills under 2 blocks.
int fused_w8_min_blocks(const KernelSpec& spec, const BlockShape& block) {
  return block.threads == 384 && fits(spec, block, 2) ? 2 : 0;
}

}  // namespace

int min_resident_blocks(const KernelSpec& spec, const BlockShape& block) {
  if (spec.module == Module::rmsnorm_quant) return rmsnorm_quant_min_blocks(spec, block);
  // Told the blocks per SM it already gets (2 of 512, 3 of 384 threads), ptxas uses the
  // registers that allows and schedules differently: fused W = 4 [2048, 8192] FP8 201.7 ->
  // 156.8 µs, [2517, 6144] BF16 176.3 -> 141.6 µs (same occupancy, so the schedule is the
  // cause; ncu cannot profile the virtual-rank kernels to say which part). Only where it was
  // measured: a minimum of 2 at 384 threads took 72 registers and lost the third block (+20 %),
  // rmsnorm_quant at h8192 did not change, and at W = 8 the capped kernels spill (ptxas,
  // sm_90: 4-84 bytes), so W = 8 has its own rule (fused_w8_min_blocks).
  const bool fused_one_stage = spec.module == Module::fused_ar && spec.stage == 1;
  if (spec.target.vendor() != Vendor::nvidia || !fused_one_stage || block.vectors_per_thread != 2) return 0;
  if (spec.world > 4) return fused_w8_min_blocks(spec, block);
  const int blocks = block.threads == 512 ? 2 : block.threads == 384 ? 3 : 0;
  return fits(spec, block, blocks) ? blocks : 0;
}

}  // namespace arfuse::jit
