// Reading what a compiler wrote into an ELF64 file (an AMD code object or a cubin): its symbol
// names, its notes (the AMDGPU metadata note says target and wavefront size) and its sections.
// Every offset is checked against the file; a malformed file is an Error, never a read out of
// bounds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arfuse/base/export.hpp"

namespace arfuse::jit {

struct ElfNote {
  std::string name;  // e.g. "AMDGPU"
  std::uint32_t type = 0;
  std::vector<std::uint8_t> description;
};

struct ElfSection {
  std::string name;
  std::uint32_t type = 0;
  std::uint64_t size = 0;
  std::vector<std::uint8_t> bytes;  // empty for a section that only reserves memory (NOBITS)
};
inline constexpr std::uint32_t kElfNoBits = 8;

std::vector<std::string> elf_symbol_names(const std::vector<std::uint8_t>& file);
std::vector<ElfNote> elf_notes(const std::vector<std::uint8_t>& file);
// The machine field (0xE0 for AMDGPU).
std::uint16_t elf_machine(const std::vector<std::uint8_t>& file);
// Every section, named from the section-name table (arfuse-cache code-diff compares them).
ARFUSE_API std::vector<ElfSection> elf_sections(const std::vector<std::uint8_t>& file);

}  // namespace arfuse::jit
