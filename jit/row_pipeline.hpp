// The row pipeline (templates/row_pipeline.cuh): whether a spec's kernel keeps its next row's
// loads in flight through shared memory, the occupancy it is compiled for, and the dynamic
// shared memory a block needs. Part of the kernel's instantiation (the name expression), so
// of the cache key; the numbers, their order and every rounding are the same either way.
#pragma once

#include "arfuse/jit/block_shape.hpp"
#include "arfuse/jit/kernel_spec.hpp"

namespace arfuse::jit {

struct RowPipeline {
  // Blocks per multiprocessor the kernel is compiled for (its __launch_bounds__ minimum),
  // and the shared memory each needs for its slots; 0 and 0 where there is no pipeline.
  int blocks_per_multiprocessor = 0;
  int shared_bytes = 0;
  bool enabled() const { return blocks_per_multiprocessor > 0; }
};

// Enabled where the target copies asynchronously into shared memory (NVIDIA sm_80+), the
// kernel reads whole rows from global memory (rmsnorm_quant; fused_ar in one stage), a thread
// owns two vectors of a row (hidden 4104 to 8192: smaller rows are latency-bound, larger ones
// spill at the register budget), and the blocks a 64-register kernel of this shape reaches
// still fit the target's shared memory.
RowPipeline row_pipeline(const KernelSpec& spec, const BlockShape& block);

}  // namespace arfuse::jit
