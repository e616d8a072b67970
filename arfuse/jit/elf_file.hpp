// Reading what a compiler wrote into an ELF64 file (an AMD code object or a cubin): its symbol
// names, its notes (the AMDGPU metadata note says target and wavefront size) and its sections.
// Every offset is checked against the file; a malformed file is an Error, never a read out of
// bounds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "arfuse/error.hpp"

namespace arfuse::jit {

struct ElfNote {
  std::string name;  // e.g. "AMDGPU"
  std::uint32_t type = 0;
  std::vector<std::uint8_t> description;
};

struct ElfSection {
  std::string name;
  std::uint32_t type = 0;
  std::uint64_t address = 0, offset = 0, size = 0;  // offset: where its bytes lie in the file
  std::vector<std::uint8_t> bytes;                  // empty for a section that only reserves memory (NOBITS)
};
inline constexpr std::uint32_t kElfNoBits = 8;

struct ElfSymbol {
  std::string name;
  std::uint64_t value = 0;
  std::uint16_t section = 0;  // index into elf_sections()
};

std::vector<std::string> elf_symbol_names(const std::vector<std::uint8_t>& file);
std::vector<ElfNote> elf_notes(const std::vector<std::uint8_t>& file);
// The machine field (kElfMachineAmdgpu for an AMD code object, 190 for a cubin).
std::uint16_t elf_machine(const std::vector<std::uint8_t>& file);
inline constexpr std::uint16_t kElfMachineAmdgpu = 0xE0;
std::vector<ElfSymbol> elf_symbols(const std::vector<std::uint8_t>& file);
// Where symbol `name` stands in the first symbol table (the index other sections refer to it by),
// or -1.
long elf_symbol_index(const std::vector<std::uint8_t>& file, const std::string& name);
// Every section, in file order, named from the section-name table.
std::vector<ElfSection> elf_sections(const std::vector<std::uint8_t>& file);

// What decides what a compiled kernel does, by section name: code (.text*), constant data
// (.nv.constant0.*, .rodata*: AMD's kernel descriptors, with their register counts), shared
// memory (.nv.shared.*, by size), and the relocations of those sections with each symbol by name
// ("relocations of .text.X"). Left out: symbol and string tables, which also name unused
// constants and temporary file names; NVRTC's table of namespace-scope constants' addresses
// (.nv.constant4, reordered by any added constant; no arfuse kernel reads it, so adding a constant
// leaves every kernel's .text as it was); and in each AMD
// kernel descriptor (64 bytes at a ".kd" symbol) the code's offset from it (bytes 16-23), which
// moves with those tables. (arfuse-cache code-diff compares these maps.)
std::map<std::string, std::string> elf_code_sections(const std::vector<std::uint8_t>& file);

}  // namespace arfuse::jit
