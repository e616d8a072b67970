// What arfuse-cache says of a cached kernel's resources, without a GPU: the footprint of an entry's
// cubin or AMD code object (jit::kernel_footprint) and, for NVIDIA, the blocks per SM it allows at
// the block size the entry's spec gives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jit/kernel_footprint.hpp"
#include "jit/kernel_spec.hpp"

namespace arfuse::tools {

// "38 registers, 16656 B shared, 3 blocks of 512 threads per SM" for the kernel of `spec`
// (AMD: its register and LDS counts).
std::string describe_footprint(const jit::KernelSpec& spec, const jit::KernelFootprint& footprint);

// The blocks per SM `footprint` allows the kernel of `spec`; 0 for an AMD target (not modelled).
int blocks_per_sm(const jit::KernelSpec& spec, const jit::KernelFootprint& footprint);

// " (registers 38 -> 32; 3 -> 4 blocks of 512 threads per SM)": the fields that differ and, for
// NVIDIA, the blocks per SM on each side; " (VGPRs 36 -> 40)" for AMD; empty when nothing differs.
std::string footprint_change(const jit::KernelSpec& spec, const jit::KernelFootprint& before,
                             const jit::KernelFootprint& after);

}  // namespace arfuse::tools
