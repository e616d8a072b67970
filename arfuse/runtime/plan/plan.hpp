// The plan of one call: a pure function of the group's Topology, its stage policy and the
// call's shape to the path it takes, the kernel it launches and how many rows its grid covers.
// It touches no device, so the CPU tests check it on synthetic machines (one GPU with virtual
// ranks, W GPUs with and without peer access, messages above the staging capacity).
//
//   validate once -> plan_call -> load_kernel(ctx, plan.spec) -> launch with plan.grid(occupancy)
#pragma once

#include <cstdint>
#include <optional>

#include "arfuse/allreduce.hpp"
#include "arfuse/error.hpp"

#include "jit/kernel_spec.hpp"
#include "jit/tuning.hpp"
#include "runtime/plan/topology.hpp"

namespace arfuse {

// What a call asks for. epilogue: allreduce_rmsnorm (residual add + norm + quant after the
// sum); otherwise a plain all-reduce.
struct CallShape {
  bool epilogue = true;
  int tokens = 0;
  int hidden = 0;
  DType dtype = DType::bf16;
  EpilogueMode mode;          // epilogue calls
  bool views = false;         // a strided or padded tensor: the spec's views kernel
  bool graph_inputs = false;  // captured with an input slot: the spec's graph_inputs kernel
};

// The tuning that applies to one group, looked up once when the group is made (not per call).
struct StagePolicy {
  std::uint64_t two_stage_min_bytes = UINT64_MAX;  // messages of this size and above take two stages
  std::optional<int> forced_stage;                 // 1 or 2 overrides the threshold

  static StagePolicy resolve(const jit::TuningTable& tuning, const Topology& topology);
  int stage_for(std::uint64_t message_bytes) const;
};

struct Plan {
  Path path = Path::one_stage;
  // The kernel to launch: fused_ar or allreduce on the custom path, rmsnorm_quant after NCCL
  // (has_kernel false: a plain all-reduce on NCCL launches nothing of ours).
  jit::KernelSpec spec;
  bool has_kernel = true;
  int rows = 0;  // rows the grid covers: every token, or a stage-2 rank's share of them
  int multiprocessors = 0;
  int ranks_per_device = 1;

  // Blocks for a kernel with this occupancy (jit::grid_blocks).
  unsigned grid(int blocks_per_multiprocessor) const {
    return jit::grid_blocks(rows, blocks_per_multiprocessor, multiprocessors, ranks_per_device);
  }
};

// Throws Error when no path serves the call: the custom kernels cannot run, or the message does
// not fit the staging buffers, and the group has no NCCL. The shape must already be valid
// (validate_args); a call of 0 tokens has no plan.
Plan plan_call(const Topology& topology, const StagePolicy& policy, const CallShape& call);

}  // namespace arfuse
