#include "arfuse/jit/launch_bounds.hpp"

namespace arfuse::jit {

int min_resident_blocks(const KernelSpec& spec, const BlockShape& block) {
  // Left to itself, ptxas gives this kernel 60 registers (2 blocks of 512 already); told 2
  // blocks, it uses the 64 that 2 blocks allow and schedules differently: fused W = 4
  // [2048, 8192] FP8 201.7 -> 156.8 µs (same occupancy, so the schedule is the cause; which
  // part of it is not pinned down, ncu cannot profile the virtual-rank kernels). Not wider:
  // at 384 threads a minimum of 2 let it take 72 registers and lose the third block
  // (+20 % at [2517, 6144]), rmsnorm_quant at h8192 did not change, and at W = 8 the 64
  // registers spill (ptxas, sm_90: 4-36 bytes; without the minimum 66-73 registers, 1 block).
  const bool fused_one_stage = spec.module == Module::fused_ar && spec.stage == 1 && spec.world <= 4;
  if (spec.target.vendor() != Vendor::nvidia || !fused_one_stage || block.vectors_per_thread != 2) return 0;
  // 2 at 512 threads (hidden 7688-8192); 3 at 384 (h6144: BF16 rows 20 % faster, FP8
  // unchanged, notes 9a). Other block sizes not measured yet.
  return block.threads == 512 ? 2 : block.threads == 384 ? 3 : 0;
}

}  // namespace arfuse::jit
