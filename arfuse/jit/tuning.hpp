// Every tuning decision in one place: which stage a message takes (a threshold table per
// target and world size), how many blocks a launch gets (grid caps), and the register budget a
// kernel is compiled to (minimum resident blocks). None of them changes a result bit: the
// numeric contract fixes the reduction order whatever the stage, grid or schedule.
//
// The stage table has embedded defaults; ARFUSE_TUNING=FILE replaces them. Every rank evaluates
// the same table on the same (world, bytes), so all ranks pick the same stage.
//
//   {"version": 1,
//    "targets": {"sm_90": {"2": {"two_stage_min_bytes": 4194304}, "4": {...}, "8": {...}},
//                "sm_90:virtual": {...}},
//    "measured": "free text: machine and date"}
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "arfuse/error.hpp"

#include "jit/block_shape.hpp"
#include "jit/kernel_spec.hpp"

namespace arfuse::jit {

class TuningTable {
 public:
  // Throws arfuse::Error naming the JSON path, the value and what is allowed.
  static TuningTable parse(const std::string& json_text, const std::string& origin);
  static TuningTable embedded_default();
  // ARFUSE_TUNING when set (a file), else the embedded default.
  static TuningTable from_environment();

  // 1 or 2. Groups whose ranks share a GPU look up "<target>:virtual" first.
  int stage_for(const std::string& target, int world, std::uint64_t message_bytes, bool virtual_ranks = false) const;
  // UINT64_MAX when no entry applies (always one stage).
  std::uint64_t two_stage_min_bytes(const std::string& target, int world, bool virtual_ranks = false) const;
  const std::string& origin() const { return origin_; }

 private:
  std::map<std::string, std::map<int, std::uint64_t>> thresholds_;
  std::string origin_;
};

// Blocks for a launch of `rows` rows: at most one per row, at most kMaxBlocks (the signal
// slots), and no more than are resident at once on the smallest device of the group divided by
// the ranks that share a device, so that every rank's blocks of a barrier kernel run together.
unsigned grid_blocks(int rows, int blocks_per_multiprocessor, int multiprocessors, int ranks_per_device);

// The resident blocks per multiprocessor given to __launch_bounds__ as its minimum (0: none,
// the compiler's own choice). Part of the instantiation, so of the cache key. For the one-stage
// fused kernel of up to 4 ranks with two vectors a thread on NVIDIA: 2 at 512 threads (hidden
// 7688 to 8192), 3 at 384 (hidden 5640 to 6144); for the quantising rmsnorm_quant on NVIDIA:
// 4 at 384 threads x 2 vectors; for the one-stage fused kernel of 8 ranks, 2 at 384 threads
// (each measured: docs/performance.md, "Tuning decisions"); 0 elsewhere, and where those blocks would not fit
// the threads of one multiprocessor (sm_75 holds 1024: ptxas would ignore the minimum).
int min_resident_blocks(const KernelSpec& spec, const BlockShape& block);

}  // namespace arfuse::jit
