#include "jit/elf_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "arfuse/error.hpp"

namespace arfuse::jit {
namespace {

struct SectionHeader {
  std::uint32_t name, type;
  std::uint64_t flags, address, offset, size;
  std::uint32_t link, info;
  std::uint64_t alignment, entry_size;
};
static_assert(sizeof(SectionHeader) == 64, "ELF64 section header");

constexpr std::uint32_t kSymbolTable = 2, kNote = 7;

// Bounds on what one file may make a reader build, so that a hostile file (65,535 sections each
// spanning the file, names that each run to the end of their table) is refused as malformed
// instead of exhausting memory or time. Real code objects and cubins have tens of sections.
constexpr std::size_t kMaxSections = 4096;
constexpr std::size_t kMaxNameBytes = 64u << 10;

// The bytes a reader may copy out of one file: a few times its size, enough for every section,
// symbol name and relocation line of a well-formed file once.
class CopyBudget {
 public:
  explicit CopyBudget(const std::vector<std::uint8_t>& file) : left_(4 * std::uint64_t(file.size()) + (1u << 20)) {}
  void take(std::uint64_t bytes) {
    if (bytes > left_) {
      throw Error(
          "malformed ELF file: its sections, names or notes overlap so much that reading them would copy "
          "more than four times the file");
    }
    left_ -= bytes;
  }

 private:
  std::uint64_t left_;
};

template <typename T>
T read_at(const std::vector<std::uint8_t>& file, std::uint64_t offset) {
  if (offset > file.size() || file.size() - offset < sizeof(T)) {
    throw Error(fmt::format("malformed ELF file: read of {} bytes at {} past its end ({} bytes)", sizeof(T), offset,
                            file.size()));
  }
  T value;
  std::memcpy(&value, file.data() + offset, sizeof(T));
  return value;
}

std::vector<SectionHeader> sections(const std::vector<std::uint8_t>& file) {
  if (file.size() < 64 ||
      std::memcmp(file.data(),
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      file[4] != 2 || file[5] != 1) {
    throw Error("not a little-endian ELF64 file");
  }
  const auto offset = read_at<std::uint64_t>(file, 0x28);
  const auto entry = read_at<std::uint16_t>(file, 0x3A), count = read_at<std::uint16_t>(file, 0x3C);
  if (entry != sizeof(SectionHeader)) throw Error(fmt::format("malformed ELF file: section header size {}", entry));
  if (count > kMaxSections) {
    throw Error(fmt::format("malformed ELF file: {} sections (a kernel's file has tens, at most {} are read)", count,
                            kMaxSections));
  }
  std::vector<SectionHeader> out;
  for (std::uint16_t i = 0; i < count; ++i)
    out.push_back(read_at<SectionHeader>(file, offset + std::uint64_t(i) * entry));
  return out;
}

std::string string_at(const std::vector<std::uint8_t>& file, const SectionHeader& table, std::uint32_t index) {
  if (index >= table.size || table.offset > file.size() || table.size > file.size() - table.offset) {
    throw Error("malformed ELF file: string index outside its table");
  }
  const char* begin = reinterpret_cast<const char*>(file.data() + table.offset + index);
  const std::size_t length = strnlen(begin, std::min<std::uint64_t>(table.size - index, kMaxNameBytes + 1));
  if (length > kMaxNameBytes)
    throw Error(fmt::format("malformed ELF file: a name longer than {} bytes", kMaxNameBytes));
  return std::string(begin, length);
}

std::string string_at(const std::vector<std::uint8_t>& file, const SectionHeader& table, std::uint32_t index,
                      CopyBudget& budget) {
  std::string s = string_at(file, table, index);
  budget.take(s.size());
  return s;
}

// The section-name table (e_shstrndx).
const SectionHeader& section_name_table(const std::vector<std::uint8_t>& file, const std::vector<SectionHeader>& all) {
  const auto index = read_at<std::uint16_t>(file, 0x3E);
  if (index >= all.size()) throw Error("malformed ELF file: no section-name table");
  return all[index];
}

struct SymbolEntry {
  std::uint32_t name;  // 0: unnamed
  std::uint8_t type;
  std::uint16_t section;
  std::uint64_t value;
};

// Every entry of symbol table all[table], by index (relocations name symbols by it).
std::vector<SymbolEntry> symbol_entries(const std::vector<std::uint8_t>& file, const std::vector<SectionHeader>& all,
                                        std::uint32_t table) {
  if (table >= all.size() || all[table].type != kSymbolTable || all[table].link >= all.size() ||
      all[table].entry_size != 24) {
    throw Error("malformed ELF file: symbol table");
  }
  const SectionHeader& s = all[table];
  std::vector<SymbolEntry> entries;
  for (std::uint64_t at = 0; at + 24 <= s.size; at += 24) {
    entries.push_back({read_at<std::uint32_t>(file, s.offset + at),
                       std::uint8_t(read_at<std::uint8_t>(file, s.offset + at + 4) & 0xf),
                       read_at<std::uint16_t>(file, s.offset + at + 6),
                       read_at<std::uint64_t>(file, s.offset + at + 8)});
  }
  return entries;
}

}  // namespace

std::uint16_t elf_machine(const std::vector<std::uint8_t>& file) {
  sections(file);  // validates the header
  return read_at<std::uint16_t>(file, 0x12);
}

std::vector<ElfSymbol> elf_symbols(const std::vector<std::uint8_t>& file) {
  const auto all = sections(file);
  CopyBudget budget(file);
  std::vector<ElfSymbol> symbols;
  for (std::uint32_t t = 0; t < all.size(); ++t) {
    if (all[t].type != kSymbolTable) continue;
    budget.take(all[t].size);
    for (const SymbolEntry& e : symbol_entries(file, all, t)) {
      if (e.name == 0) continue;
      budget.take(sizeof(ElfSymbol));
      symbols.push_back({string_at(file, all[all[t].link], e.name, budget), e.value, e.section});
    }
  }
  return symbols;
}

long elf_symbol_index(const std::vector<std::uint8_t>& file, const std::string& name) {
  const auto all = sections(file);
  for (std::uint32_t t = 0; t < all.size(); ++t) {
    if (all[t].type != kSymbolTable) continue;
    const auto entries = symbol_entries(file, all, t);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].name != 0 && string_at(file, all[all[t].link], entries[i].name) == name) return long(i);
    }
    return -1;
  }
  return -1;
}

std::vector<std::string> elf_symbol_names(const std::vector<std::uint8_t>& file) {
  std::vector<std::string> names;
  for (auto& symbol : elf_symbols(file)) names.push_back(std::move(symbol.name));
  return names;
}

std::vector<ElfNote> elf_notes(const std::vector<std::uint8_t>& file) {
  CopyBudget budget(file);
  std::vector<ElfNote> notes;
  for (const auto& s : sections(file)) {
    if (s.type != kNote) continue;
    for (std::uint64_t at = s.offset; at + 12 <= s.offset + s.size;) {
      const auto name_size = read_at<std::uint32_t>(file, at), desc_size = read_at<std::uint32_t>(file, at + 4);
      ElfNote note;
      note.type = read_at<std::uint32_t>(file, at + 8);
      const std::uint64_t name_at = at + 12, desc_at = name_at + ((std::uint64_t(name_size) + 3) & ~3ull);
      const std::uint64_t end = desc_at + ((std::uint64_t(desc_size) + 3) & ~3ull);
      if (end > file.size() || end > s.offset + s.size) throw Error("malformed ELF file: note past its section");
      const char* name = reinterpret_cast<const char*>(file.data() + name_at);
      note.name.assign(name, strnlen(name, name_size));
      budget.take(sizeof(ElfNote) + std::uint64_t(name_size) + desc_size);
      note.description.assign(file.begin() + long(desc_at), file.begin() + long(desc_at + desc_size));
      notes.push_back(std::move(note));
      at = end;
    }
  }
  return notes;
}

std::vector<ElfSection> elf_sections(const std::vector<std::uint8_t>& file) {
  const auto all = sections(file);
  const SectionHeader& names = section_name_table(file, all);
  CopyBudget budget(file);
  std::vector<ElfSection> out;
  for (const auto& s : all) {
    ElfSection section;
    section.name = string_at(file, names, s.name, budget);
    section.type = s.type;
    section.address = s.address;
    section.offset = s.offset;
    section.size = s.size;
    if (s.type != kElfNoBits) {
      if (s.offset > file.size() || s.size > file.size() - s.offset) {
        throw Error(fmt::format("malformed ELF file: section {} past its end", section.name));
      }
      budget.take(s.size);
      section.bytes.assign(file.begin() + long(s.offset), file.begin() + long(s.offset + s.size));
    }
    out.push_back(std::move(section));
  }
  return out;
}

namespace {

bool decides_behaviour(const std::string& section_name) {
  for (const char* prefix : {".text", ".nv.constant0.", ".rodata", ".nv.shared."}) {
    if (section_name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

constexpr std::uint64_t kKernelDescriptorBytes = 64, kCodeEntryOffsetAt = 16;

// Zeroes the code-entry offset of every AMD kernel descriptor in `sections`.
void blank_code_entry_offsets(const std::vector<std::uint8_t>& file, std::vector<ElfSection>& sections) {
  const std::string suffix = ".kd";
  for (const auto& symbol : elf_symbols(file)) {
    const bool descriptor = symbol.name.size() > suffix.size() &&
                            symbol.name.compare(symbol.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (!descriptor) continue;
    if (symbol.section >= sections.size()) continue;
    ElfSection& s = sections[symbol.section];
    const std::uint64_t at = symbol.value - s.address;
    if (symbol.value < s.address || at > s.bytes.size() || s.bytes.size() - at < kKernelDescriptorBytes) {
      throw Error(fmt::format("malformed ELF file: kernel descriptor {} outside its section {}", symbol.name, s.name));
    }
    std::fill_n(s.bytes.begin() + long(at + kCodeEntryOffsetAt), 8, std::uint8_t{0});
  }
}

constexpr std::uint32_t kRela = 4, kRel = 9;
constexpr std::uint8_t kSectionSymbol = 3;

// The symbols of symbol table `table` by index, each named by its name or, for a section symbol,
// by its section's: indices shift when a symbol is added; names do not.
std::vector<std::string> symbol_names_by_index(const std::vector<std::uint8_t>& file,
                                               const std::vector<SectionHeader>& all, std::uint32_t table,
                                               const SectionHeader& section_names, CopyBudget& budget) {
  std::vector<std::string> names;
  for (const SymbolEntry& e : symbol_entries(file, all, table)) {
    if (e.name != 0) {
      names.push_back(string_at(file, all[all[table].link], e.name, budget));
    } else if (e.type == kSectionSymbol && e.section < all.size()) {
      names.push_back("section " + string_at(file, section_names, all[e.section].name, budget));
    } else {
      names.emplace_back();
    }
  }
  return names;
}

// One line per relocation: where, which kind, which symbol (by name), the addend. `names_of`
// holds each symbol table's names once, however many relocation sections refer to it.
std::string relocations_text(const std::vector<std::uint8_t>& file, const std::vector<SectionHeader>& all,
                             const SectionHeader& r, const SectionHeader& section_names,
                             std::map<std::uint32_t, std::vector<std::string>>& names_of, CopyBudget& budget) {
  const std::uint64_t entry = r.type == kRela ? 24 : 16;
  if (r.entry_size != entry) throw Error("malformed ELF file: relocation entry size");
  auto known = names_of.find(r.link);
  if (known == names_of.end())
    known = names_of.emplace(r.link, symbol_names_by_index(file, all, r.link, section_names, budget)).first;
  const auto& symbols = known->second;
  std::string text;
  for (std::uint64_t at = 0; at + entry <= r.size; at += entry) {
    const auto where = read_at<std::uint64_t>(file, r.offset + at),
               info = read_at<std::uint64_t>(file, r.offset + at + 8);
    const auto addend = r.type == kRela ? read_at<std::int64_t>(file, r.offset + at + 16) : 0;
    const std::uint64_t symbol = info >> 32;
    if (symbol >= symbols.size()) throw Error("malformed ELF file: relocation of a symbol past its table");
    budget.take(symbols[symbol].size() + 64);
    text += fmt::format("{} {} {} {}\n", where, info & 0xffffffffu, symbols[symbol], addend);
  }
  return text;
}

}  // namespace

std::map<std::string, std::string> elf_code_sections(const std::vector<std::uint8_t>& file) {
  auto all = elf_sections(file);
  if (elf_machine(file) == kElfMachineAmdgpu) blank_code_entry_offsets(file, all);
  std::map<std::string, std::string> code;
  for (const auto& s : all) {
    if (!decides_behaviour(s.name)) continue;
    code[s.name] = s.type == kElfNoBits ? fmt::format("{} bytes", s.size) : std::string(s.bytes.begin(), s.bytes.end());
  }
  // What the code's relocations point at, by symbol name, so that two kernels differing only in
  // which object an instruction addresses are not read as equal.
  const auto headers = sections(file);
  const SectionHeader& section_names = section_name_table(file, headers);
  CopyBudget budget(file);
  std::map<std::uint32_t, std::vector<std::string>> names_of;
  for (const auto& r : headers) {
    if ((r.type != kRela && r.type != kRel) || r.info >= headers.size()) continue;
    const std::string target = string_at(file, section_names, headers[r.info].name);
    if (decides_behaviour(target))
      code["relocations of " + target] = relocations_text(file, headers, r, section_names, names_of, budget);
  }
  return code;
}

}  // namespace arfuse::jit
