// What a compiled kernel asks of a multiprocessor, read from its cubin or AMD code object without a
// GPU, and for NVIDIA how many of its blocks fit one multiprocessor by the rules of NVIDIA's
// occupancy calculator (AMD's rules are not modelled: nothing here could check them). A
// template change that moves a kernel's registers can change its blocks per SM, and with it the
// kernel's speed: arfuse-cache code-diff shows this without a GPU. The [gpu] tests hold the
// estimate against the driver's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arfuse/error.hpp"
#include "arfuse/target.hpp"

namespace arfuse::jit {

struct KernelFootprint {
  int registers = 0;               // per thread (AMD: VGPRs per lane)
  int shared_bytes = 0;            // static shared memory per block, as the driver counts it (no system reserve);
                                   // AMD: the group segment (LDS)
  int local_bytes = 0;             // per thread: spills and stack (the frame; AMD: the private segment)
  int scalar_registers = 0;        // AMD: SGPRs
  int accumulation_registers = 0;  // AMD: AGPRs (gfx90a and later)
  bool operator==(const KernelFootprint& o) const {
    return registers == o.registers && shared_bytes == o.shared_bytes && local_bytes == o.local_bytes &&
           scalar_registers == o.scalar_registers && accumulation_registers == o.accumulation_registers;
  }
  bool operator!=(const KernelFootprint& o) const { return !(*this == o); }
};

// The footprint of the one kernel a JIT cubin holds; throws Error for anything else (an AMD code
// object, a cubin of several kernels or none, a malformed file).
KernelFootprint cubin_footprint(const std::vector<std::uint8_t>& cubin);

// The footprint of the one kernel an AMD code object holds, from its AMDGPU metadata note (what
// clang and hiprtc record: .vgpr_count, .agpr_count, .sgpr_count, the group and private segment
// sizes); throws Error where the note is missing, malformed or names no kernel or several.
KernelFootprint code_object_footprint(const std::vector<std::uint8_t>& code_object);

// cubin_footprint or code_object_footprint, by the file's machine.
KernelFootprint kernel_footprint(const std::vector<std::uint8_t>& payload);

// The resident threads per multiprocessor of an NVIDIA generation (sm_70 and later).
int nvidia_threads_per_multiprocessor(int generation);

// Blocks of `threads` threads that fit one multiprocessor of NVIDIA `target` at once, each with
// `footprint` and `dynamic_shared_bytes` more shared memory: the least of the limits by threads,
// blocks, registers (allocated per warp in units of 256) and shared memory (the largest carve-out,
// less 1 KiB reserved per block from sm_80 on). 0 when one block does not fit.
int nvidia_resident_blocks(const Target& target, int threads, const KernelFootprint& footprint,
                           int dynamic_shared_bytes = 0);

// NVIDIA: "38 registers, 16656 B shared, 3 blocks of 512 threads per SM" (and "N B local" when it
// spills); AMD: "36 VGPRs, 0 AGPRs, 24 SGPRs, 520 B LDS" (and "N B scratch").
std::string describe(const Target& target, int threads, const KernelFootprint& footprint);

}  // namespace arfuse::jit
