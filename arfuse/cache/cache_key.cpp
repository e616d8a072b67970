#include "cache/cache_key.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cache/cache_entry.hpp"

namespace arfuse::cache {
namespace {

std::string hex32(const Digest& d) { return to_hex(d).substr(0, 32); }

}  // namespace

std::string entry_file_prefix(const Digest& source) { return hex32(source) + "-"; }

std::string entry_file_name(const Digest& source, const Digest& full) {
  return entry_file_prefix(source) + hex32(full) + kEntrySuffix;
}

// Every part in one pass, so that a reader finds the whole key here; entry_file_name and
// entry_file_prefix, for files of the folder, spell the same names (disk_cache.cpp reads a
// name back with file_name_carries).
KernelKey kernel_key(const jit::Source& s, const std::string* compiler_identity) {
  KernelKey k;
  Sha256 source;
  source.field(fmt::format("arfuse cache format {}", kCacheFormatVersion));
  for (const auto& t : s.templates) source.field(t.name).field(t.text);
  source.field(s.text).field(s.name_expression);
  source.field(std::to_string(s.options.size()));
  for (const auto& o : s.options) source.field(o);
  source.field(s.spec.target.name());
  k.source = source.finish();
  const std::string source_hex = to_hex(k.source);
  k.file_prefix = source_hex.substr(0, 32) + "-";
  if (compiler_identity == nullptr) {
    k.memory = "any:" + source_hex;
    return k;
  }
  k.has_compiler = true;
  k.full = Sha256().update(k.source.data(), k.source.size()).field(*compiler_identity).finish();
  k.memory = to_hex(k.full);
  k.file = k.file_prefix + k.memory.substr(0, 32) + kEntrySuffix;
  nlohmann::json templates = nlohmann::json::object();
  for (const auto& t : s.templates) templates[t.name] = to_hex(sha256(t.text.data(), t.text.size()));
  k.metadata = nlohmann::json{
      {"spec", s.spec.text()},
      {"compiler", *compiler_identity},
      {"name_expression", s.name_expression},
      {"options", s.options},
      {"templates",
       templates}}.dump();
  return k;
}

}  // namespace arfuse::cache
