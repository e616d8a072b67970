#include "cache_code_diff.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "arfuse/base/error.hpp"

namespace arfuse::tools {
namespace {

template <typename T>
T read_at(const std::vector<std::uint8_t>& bytes, std::uint64_t offset) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) {
    throw Error(fmt::format("the payload ends at byte {} inside its ELF headers (at {})", bytes.size(), offset));
  }
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

bool decides_behaviour(const std::string& name) {
  for (const char* prefix : {".text", ".nv.constant0.", ".rodata", ".nv.shared."}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

struct SectionHeader {
  std::uint32_t name, type;
  std::uint64_t offset, size;
};

SectionHeader section_header(const std::vector<std::uint8_t>& elf, std::uint64_t at) {
  SectionHeader h;
  h.name = read_at<std::uint32_t>(elf, at);
  h.type = read_at<std::uint32_t>(elf, at + 4);
  h.offset = read_at<std::uint64_t>(elf, at + 24);
  h.size = read_at<std::uint64_t>(elf, at + 32);
  return h;
}

std::string section_name(const std::vector<std::uint8_t>& elf, const SectionHeader& names, std::uint32_t at) {
  if (at >= names.size || names.offset + names.size > elf.size()) throw Error("a section name lies outside its table");
  const char* begin = reinterpret_cast<const char*>(elf.data() + names.offset + at);
  return std::string(begin, strnlen(begin, names.size - at));
}

// The spec of each good entry, with its code sections; bad entries are counted, as verify does.
std::map<std::string, std::map<std::string, std::string>> code_by_spec(cache::DiskCache& disk, int& unreadable) {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (const auto& info : disk.list()) {
    const auto checked = cache::DiskCache::check(info.path);
    std::string spec;
    if (checked.ok()) {
      const auto meta = nlohmann::json::parse(checked.entry.metadata, nullptr, false);
      if (meta.is_object() && meta.contains("spec") && meta["spec"].is_string()) spec = meta["spec"];
    }
    try {
      if (spec.empty()) throw Error(checked.ok() ? "no spec in its metadata" : checked.problem);
      out[spec] = code_sections(checked.entry.payload);
    } catch (const Error& e) {
      ++unreadable;
      std::printf("UNREADABLE %s: %s\n", info.path.c_str(), e.what());
    }
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> code_sections(const std::vector<std::uint8_t>& elf) {
  if (elf.size() < 64 || std::memcmp(elf.data(),
                                     "\x7f"
                                     "ELF\x02\x01",
                                     6) != 0) {
    throw Error("the payload is not a little-endian ELF64 file (a cubin or an AMD code object)");
  }
  const auto table = read_at<std::uint64_t>(elf, 0x28);
  const auto entry_size = read_at<std::uint16_t>(elf, 0x3a), count = read_at<std::uint16_t>(elf, 0x3c);
  const auto names_index = read_at<std::uint16_t>(elf, 0x3e);
  if (entry_size < 64 || names_index >= count) throw Error("the ELF section table is malformed");
  const SectionHeader names = section_header(elf, table + std::uint64_t(names_index) * entry_size);
  std::map<std::string, std::string> sections;
  for (std::uint16_t i = 0; i < count; ++i) {
    const SectionHeader h = section_header(elf, table + std::uint64_t(i) * entry_size);
    const std::string name = section_name(elf, names, h.name);
    if (!decides_behaviour(name)) continue;
    constexpr std::uint32_t kNoBits = 8;  // reserves memory, holds no bytes: its size is what counts
    if (h.type == kNoBits) {
      sections[name] = fmt::format("{} bytes", h.size);
    } else if (h.offset > elf.size() || elf.size() - h.offset < h.size) {
      throw Error(fmt::format("section {} lies outside the file", name));
    } else {
      sections[name].assign(reinterpret_cast<const char*>(elf.data() + h.offset), h.size);
    }
  }
  return sections;
}

int cmd_code_diff(cache::DiskCache& mine, cache::DiskCache& other) {
  int unreadable = 0;
  const auto a = code_by_spec(mine, unreadable), b = code_by_spec(other, unreadable);
  int same = 0, differ = 0, only_mine = 0, only_other = 0;
  for (const auto& [spec, code] : a) {
    const auto it = b.find(spec);
    if (it == b.end()) {
      ++only_mine;
      std::printf("ONLY IN %s: %s\n", mine.dir().c_str(), spec.c_str());
    } else if (it->second == code) {
      ++same;
    } else {
      ++differ;
      std::printf("DIFFERS %s\n", spec.c_str());
    }
  }
  for (const auto& [spec, code] : b) {
    if (a.count(spec) == 0) ++only_other, std::printf("ONLY IN %s: %s\n", other.dir().c_str(), spec.c_str());
  }
  std::printf("%d specs with the same code, %d differ, %d only in %s, %d only in %s, %d unreadable\n", same, differ,
              only_mine, mine.dir().c_str(), only_other, other.dir().c_str(), unreadable);
  return differ + only_mine + only_other + unreadable == 0 ? 0 : 1;
}

}  // namespace arfuse::tools
