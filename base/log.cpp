#include "arfuse/base/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace arfuse {

void warn(const std::string& message) { std::fprintf(stderr, "arfuse: warning: %s\n", message.c_str()); }

void warn_once(const std::string& key, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(key).second) warn(message);
}

bool debug_enabled() {
  static const bool enabled = [] {
    const char* level = std::getenv("ARFUSE_LOG");
    return level != nullptr && std::strcmp(level, "debug") == 0;
  }();
  return enabled;
}

void debug(const std::string& message) {
  if (debug_enabled()) std::fprintf(stderr, "arfuse: %s\n", message.c_str());
}

}  // namespace arfuse
