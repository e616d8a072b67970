// What arfuse-cache says of a cached kernel's occupancy, without a GPU: the footprint of an NVIDIA
// entry's cubin (jit::cubin_footprint) and the blocks per SM it allows, at the block size the
// entry's spec gives. AMD code objects have none here (their descriptors are compared as code).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arfuse/jit/kernel_footprint.hpp"

namespace arfuse::tools {

// nullopt for an AMD code object; throws Error for a malformed cubin.
std::optional<jit::KernelFootprint> footprint_of(const std::vector<std::uint8_t>& payload);

// "38 registers, 16656 B shared, 3 blocks of 512 threads per SM" for the kernel of `spec_text`.
std::string describe_footprint(const std::string& spec_text, const jit::KernelFootprint& footprint);

// The blocks per SM `footprint` allows the kernel of `spec_text` (NVIDIA).
int blocks_per_sm(const std::string& spec_text, const jit::KernelFootprint& footprint);

// " (registers 38 -> 32; 3 -> 4 blocks of 512 threads per SM)": the fields that differ and the
// blocks per SM on each side; empty when nothing differs.
std::string footprint_change(const std::string& spec_text, const jit::KernelFootprint& before,
                             const jit::KernelFootprint& after);

}  // namespace arfuse::tools
