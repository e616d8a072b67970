// The register budget a kernel is compiled to: the resident blocks per multiprocessor given to
// __launch_bounds__ as its minimum (0: none, the compiler's own choice). Part of the
// instantiation (the name expression), so of the cache key; the numbers are the same either
// way, only the schedule changes.
#pragma once

#include "arfuse/jit/block_shape.hpp"
#include "arfuse/jit/kernel_spec.hpp"

namespace arfuse::jit {

// 2 for the one-stage fused kernel of up to 4 ranks with 512 threads of two vectors (hidden
// 7688 to 8192) on NVIDIA, measured on the H200 (docs/performance-notes.md section 9); 0
// elsewhere.
int min_resident_blocks(const KernelSpec& spec, const BlockShape& block);

}  // namespace arfuse::jit
