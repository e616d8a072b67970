#include "arfuse/cache/cache_key.hpp"

#include <fmt/format.h>

#include "arfuse/cache/cache_entry.hpp"

namespace arfuse::cache {

Digest source_key(const jit::Source& s) {
  Sha256 h;
  h.field(fmt::format("arfuse cache format {}", kCacheFormatVersion));
  for (const auto& t : s.templates) h.field(t.name).field(t.text);
  h.field(s.text).field(s.name_expression);
  h.field(std::to_string(s.options.size()));
  for (const auto& o : s.options) h.field(o);
  h.field(s.spec.target.name());
  return h.finish();
}

Digest full_key(const Digest& source, const std::string& compiler_identity) {
  return Sha256().update(source.data(), source.size()).field(compiler_identity).finish();
}

}  // namespace arfuse::cache
