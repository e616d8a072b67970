#include "arfuse/jit/launch_bounds.hpp"

namespace arfuse::jit {

int min_resident_blocks(const KernelSpec& spec, const BlockShape& block) {
  // Told the blocks per SM it already gets (2 of 512, 3 of 384 threads), ptxas uses the
  // registers that allows and schedules differently: fused W = 4 [2048, 8192] FP8 201.7 ->
  // 156.8 µs, [2517, 6144] BF16 176.3 -> 141.6 µs (same occupancy, so the schedule is the
  // cause; ncu cannot profile the virtual-rank kernels to say which part). Only where it was
  // measured: a minimum of 2 at 384 threads took 72 registers and lost the third block (+20 %),
  // rmsnorm_quant at h8192 did not change, and at W = 8 the capped kernels spill (ptxas,
  // sm_90: 4-84 bytes), so W = 8 keeps no minimum.
  const bool fused_one_stage = spec.module == Module::fused_ar && spec.stage == 1 && spec.world <= 4;
  if (spec.target.vendor() != Vendor::nvidia || !fused_one_stage || block.vectors_per_thread != 2) return 0;
  return block.threads == 512 ? 2 : block.threads == 384 ? 3 : 0;
}

}  // namespace arfuse::jit
