// arfuse-cache code-diff: whether two caches hold the same machine code for each spec. A change to
// the templates that should not change any kernel (a refactor, or one whose effect is confined to
// some modes) is shown to be exactly that, spec by spec, without a GPU: NVIDIA cubins and AMD code
// objects are both ELF files, and their code, shared-memory and constant sections say what runs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "arfuse/cache/disk_cache.hpp"

namespace arfuse::tools {

// The sections of an ELF64 file that decide what a kernel does: code (.text*), constant data
// (.nv.constant0.*, .rodata*: AMD's kernel descriptors hold its register counts) and shared memory
// (.nv.shared.*, by size). Symbol tables and relocations are left out: they also name unused
// constants and reorder with them. Throws arfuse::Error for a payload that is not such a file.
std::map<std::string, std::string> code_sections(const std::vector<std::uint8_t>& elf);

// Prints the specs whose code differs and those only one cache holds, then a count of each.
// Returns 0 when both hold the same specs with the same code, else 1.
int cmd_code_diff(cache::DiskCache& mine, cache::DiskCache& other);

}  // namespace arfuse::tools
