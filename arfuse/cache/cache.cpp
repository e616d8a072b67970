#include "arfuse/cache.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>

#include "arfuse/settings.hpp"

#include "cache/disk_cache.hpp"

namespace arfuse {

std::string default_cache_dir() {
  if (auto d = settings::text("ARFUSE_CACHE_DIR")) return *d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] != '\0') return std::string(x) + "/arfuse";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return std::string(home) + "/.cache/arfuse";
  return fmt::format("/tmp/arfuse-{}", ::geteuid());
}

std::uint64_t default_max_bytes() {
  return settings::byte_count("ARFUSE_CACHE_MAX_BYTES").value_or(cache::kDefaultMaxBytes);
}

}  // namespace arfuse
