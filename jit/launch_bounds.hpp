// The register budget a kernel is compiled to: the resident blocks per multiprocessor given to
// __launch_bounds__ as its minimum (0: none, the compiler's own choice). Part of the
// instantiation (the name expression), so of the cache key; the numbers are the same either
// way, only the schedule changes.
#pragma once

#include "arfuse/jit/block_shape.hpp"
#include "arfuse/jit/kernel_spec.hpp"

namespace arfuse::jit {

// For the one-stage fused kernel of up to 4 ranks with two vectors a thread on NVIDIA: 2 at
// 512 threads (hidden 7688 to 8192), 3 at 384 (hidden 5640 to 6144), measured on the H200
// (docs/performance-notes.md sections 9, 9a, 10); 0 elsewhere.
int min_resident_blocks(const KernelSpec& spec, const BlockShape& block);

}  // namespace arfuse::jit
