#include "cache_code_diff.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <new>
#include <string>
#include <utility>

#include "arfuse/error.hpp"

#include "cache/kernel_cache.hpp"
#include "jit/elf_file.hpp"
#include "jit/kernel_spec.hpp"

#include "cache_footprint.hpp"

namespace arfuse::tools {
namespace {

// What code-diff compares of one entry: the sections that decide what the code does, and its
// registers, shared and local memory (which decide how many blocks share an SM).
struct EntryCode {
  std::map<std::string, std::string> sections;
  jit::KernelFootprint footprint;
  bool operator==(const EntryCode& o) const { return sections == o.sections && footprint == o.footprint; }
};

EntryCode entry_code(const std::vector<std::uint8_t>& payload) {
  return EntryCode{jit::elf_code_sections(payload), jit::kernel_footprint(payload)};
}

// Bytes of machine code (the .text sections) of an entry.
size_t code_bytes(const EntryCode& code) {
  size_t bytes = 0;
  for (const auto& [name, content] : code.sections) {
    if (name.rfind(".text", 0) == 0) bytes += content.size();
  }
  return bytes;
}

// How much code `bytes` of a vendor's machine code is: a cubin's code is whole 16-byte
// instructions (sm_70 and later); AMD's instructions vary in length, so their code is told in bytes.
struct CodeSize {
  size_t count;
  const char* unit;
};
CodeSize code_size(Vendor vendor, size_t bytes) {
  return vendor == Vendor::nvidia ? CodeSize{bytes / 16, "instructions"} : CodeSize{bytes, "bytes"};
}

// The spec of each good entry, with its code; bad entries are counted, as verify does.
std::map<std::string, EntryCode> code_by_spec(cache::DiskCache& disk, int& unreadable) {
  std::map<std::string, EntryCode> out;
  for (const auto& info : disk.list()) {
    const auto checked = disk.check(info.file_name);
    const std::string spec = checked.ok() ? cache::spec_of(checked.entry) : "";
    try {
      if (spec.empty()) throw Error(checked.ok() ? "no spec in its metadata" : checked.problem);
      out[spec] = entry_code(checked.entry.payload);
    } catch (const std::bad_alloc&) {
      ++unreadable;
      std::printf("UNREADABLE %s: reading it would take more memory than this process has\n", info.path.c_str());
    } catch (const std::exception& e) {  // one entry's report, never the end of the run
      ++unreadable;
      std::printf("UNREADABLE %s: %s\n", info.path.c_str(), e.what());
    }
  }
  return out;
}

}  // namespace

int cmd_code_diff(cache::DiskCache& mine, cache::DiskCache& other) {
  int unreadable = 0;
  const auto a = code_by_spec(mine, unreadable), b = code_by_spec(other, unreadable);
  int same = 0, differ = 0, only_mine = 0, only_other = 0, footprints = 0, occupancy = 0, unmodelled = 0;
  std::map<Vendor, std::pair<size_t, size_t>> differing_bytes;  // code of the specs that differ, mine and other's
  for (const auto& [spec, code] : a) {
    const auto it = b.find(spec);
    if (it == b.end()) {
      ++only_mine;
      std::printf("ONLY IN %s: %s\n", mine.dir().c_str(), spec.c_str());
    } else if (it->second == code) {
      ++same;
    } else {
      ++differ;
      const jit::KernelSpec parsed = jit::KernelSpec::parse(spec);
      const std::string change = footprint_change(parsed, code.footprint, it->second.footprint);
      if (!change.empty()) {
        ++footprints;
        if (parsed.target.vendor() != Vendor::nvidia) ++unmodelled;
        if (blocks_per_sm(parsed, code.footprint) != blocks_per_sm(parsed, it->second.footprint)) ++occupancy;
      }
      const size_t before = code_bytes(code), after = code_bytes(it->second);
      auto& total = differing_bytes[parsed.target.vendor()];
      total.first += before, total.second += after;
      const CodeSize was = code_size(parsed.target.vendor(), before), is = code_size(parsed.target.vendor(), after);
      std::printf("DIFFERS %s: code %zu %s -> %zu %s%s\n", spec.c_str(), was.count, was.unit, is.count, is.unit,
                  change.c_str());
    }
  }
  for (const auto& [spec, code] : b) {
    if (a.count(spec) == 0) ++only_other, std::printf("ONLY IN %s: %s\n", other.dir().c_str(), spec.c_str());
  }
  std::printf("%d specs with the same code, %d differ, %d only in %s, %d only in %s, %d unreadable\n", same, differ,
              only_mine, mine.dir().c_str(), only_other, other.dir().c_str(), unreadable);
  for (const auto& [vendor, total] : differing_bytes) {
    const CodeSize was = code_size(vendor, total.first), is = code_size(vendor, total.second);
    std::printf("code of the %s specs that differ: %zu -> %zu %s\n", vendor == Vendor::nvidia ? "NVIDIA" : "AMD",
                was.count, is.count, is.unit);
  }
  if (footprints > 0) {
    std::printf("of those that differ, %d have another footprint, %d of them other blocks per SM%s\n", footprints,
                occupancy, unmodelled > 0 ? " (AMD kernels' occupancy is not estimated)" : "");
  }
  return differ + only_mine + only_other + unreadable == 0 ? 0 : 1;
}

}  // namespace arfuse::tools
