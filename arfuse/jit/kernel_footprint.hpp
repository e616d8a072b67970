// What a compiled NVIDIA kernel asks of a multiprocessor, read from its cubin without a GPU, and
// how many of its blocks fit one multiprocessor by the rules of NVIDIA's occupancy calculator. A
// template change that moves a kernel's registers can change its blocks per SM, and with it the
// kernel's speed (docs/performance-notes.md section 27): arfuse-cache code-diff shows this before
// any device time is spent. The [gpu] tests hold the estimate against the driver's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arfuse/base/export.hpp"
#include "arfuse/jit/target.hpp"

namespace arfuse::jit {

struct ARFUSE_API KernelFootprint {
  int registers = 0;     // per thread
  int shared_bytes = 0;  // static shared memory per block, as the driver counts it (no system reserve)
  int local_bytes = 0;   // per thread: spills and stack (the frame)
  bool operator==(const KernelFootprint& o) const {
    return registers == o.registers && shared_bytes == o.shared_bytes && local_bytes == o.local_bytes;
  }
  bool operator!=(const KernelFootprint& o) const { return !(*this == o); }
};

// The footprint of the one kernel a JIT cubin holds; throws Error for anything else (an AMD code
// object, a cubin of several kernels or none, a malformed file).
ARFUSE_API KernelFootprint cubin_footprint(const std::vector<std::uint8_t>& cubin);

// The resident threads per multiprocessor of an NVIDIA generation (sm_70 and later).
ARFUSE_API int nvidia_threads_per_multiprocessor(int generation);

// Blocks of `threads` threads that fit one multiprocessor of NVIDIA `target` at once, each with
// `footprint` and `dynamic_shared_bytes` more shared memory: the least of the limits by threads,
// blocks, registers (allocated per warp in units of 256) and shared memory (the largest carve-out,
// less 1 KiB reserved per block from sm_80 on). 0 when one block does not fit.
ARFUSE_API int nvidia_resident_blocks(const Target& target, int threads, const KernelFootprint& footprint,
                                      int dynamic_shared_bytes = 0);

// "38 registers, 17680 B shared, 3 blocks of 512 threads per SM" (and "N B local" when it spills).
ARFUSE_API std::string describe(const Target& target, int threads, const KernelFootprint& footprint);

}  // namespace arfuse::jit
