#include "base/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "arfuse/settings.hpp"

namespace arfuse {

namespace {

std::atomic<WarningSink> warning_sink{nullptr};

}  // namespace

void set_warning_sink(WarningSink sink) { warning_sink.store(sink); }

void warn(const std::string& message) {
  if (WarningSink sink = warning_sink.load()) return sink(std::string(), message);
  std::fprintf(stderr, "arfuse: warning: %s\n", message.c_str());
}

void warn_once(const std::string& key, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  if (WarningSink sink = warning_sink.load()) return sink(key, message);  // the sink's owner says it once
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(key).second) warn(message);
}

bool debug_enabled() { return settings::debug_logging(); }

void debug(const std::string& message) {
  if (debug_enabled()) std::fprintf(stderr, "arfuse: %s\n", message.c_str());
}

}  // namespace arfuse
