// Reading what a compiler wrote into an ELF64 file (an AMD code object): its symbol names and
// its notes (the AMDGPU metadata note says target and wavefront size). Every offset is checked
// against the file; a malformed file is an Error, never a read out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace arfuse::jit {

struct ElfNote {
  std::string name;  // e.g. "AMDGPU"
  std::uint32_t type = 0;
  std::vector<std::uint8_t> description;
};

std::vector<std::string> elf_symbol_names(const std::vector<std::uint8_t>& file);
std::vector<ElfNote> elf_notes(const std::vector<std::uint8_t>& file);
// The machine field (0xE0 for AMDGPU).
std::uint16_t elf_machine(const std::vector<std::uint8_t>& file);

}  // namespace arfuse::jit
