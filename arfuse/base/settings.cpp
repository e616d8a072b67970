#include "arfuse/base/settings.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "arfuse/base/error.hpp"
#include "arfuse/base/log.hpp"

namespace arfuse::settings {
namespace {

const Variable kVariables[] = {
    {"ARFUSE_CACHE_DIR", "path", "$XDG_CACHE_HOME/arfuse, else ~/.cache/arfuse",
     "the kernel cache folder (created 0700; one owned by another user or writable by others is not used)"},
    {"ARFUSE_CACHE_MAX_BYTES", "bytes", "1073741824", "the cache's size cap; least recently used entries go first"},
    {"ARFUSE_COMPILE", "switch", "on", "off: never load a compiler, serve only what the cache holds"},
    {"ARFUSE_TEMPLATE_DIR", "path", "the embedded templates", "read kernel templates from this folder (development)"},
    {"ARFUSE_TUNING", "path", "the embedded table", "a JSON tuning table replacing the one-/two-stage thresholds"},
    {"ARFUSE_LOG", "level", "warn", "debug: debug lines on stderr (set-up, the path each call takes, settings read)"},
    {"ARFUSE_NCCL_LIBRARY", "path", "libnccl.so.2", "the NCCL library to load"},
    {"ARFUSE_AMD_CLANG", "path", ".deps/ziglang/zig (scripts/setup-deps.sh)",
     "a clang with the AMDGPU back end, or zig, for AMD targets the loaded hiprtc does not know"},
    {"ARFUSE_DEVICE_BACKEND", "text", "auto",
     "cuda or hip: the vendor runtime the device layer uses (auto: CUDA where it finds a GPU, else HIP)"},
    {"ARFUSE_BOOTSTRAP_SECRET", "secret", "none", "a job secret every rank of a socket rendezvous must prove"},
};

const Variable& declared(const char* name) {
  for (const Variable& v : kVariables) {
    if (std::strcmp(v.name, name) == 0) return v;
  }
  throw Error(fmt::format("{} is not a declared arfuse setting (base/settings.cpp)", name));
}

// One debug line per variable and value; a secret's value is never printed.
void say_once(const Variable& v, const std::optional<std::string>& value) {
  static std::mutex mutex;
  static std::set<std::string> said;
  const std::string shown = !value                               ? fmt::format("unset (default: {})", v.default_value)
                            : std::strcmp(v.type, "secret") == 0 ? std::string("set")
                                                                 : *value;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(std::string(v.name) + "=" + shown).second) debug(fmt::format("setting {} = {}", v.name, shown));
}

std::optional<std::string> raw(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return std::nullopt;
  return std::string(value);
}

}  // namespace

const std::vector<Variable>& all() {
  static const std::vector<Variable> variables(std::begin(kVariables), std::end(kVariables));
  return variables;
}

std::optional<std::string> text(const char* name) {
  const Variable& v = declared(name);
  auto value = raw(name);
  say_once(v, value);
  return value;
}

std::optional<std::uint64_t> byte_count(const char* name) {
  const auto value = text(name);
  if (!value) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(value->c_str(), &end, 10);
  if (errno != 0 || end == value->c_str() || *end != '\0' || (*value)[0] == '-') {
    throw ConfigError(fmt::format("{}='{}' is not a byte count (a whole number, e.g. 1073741824)", name, *value));
  }
  return n;
}

bool on_off(const char* name, bool otherwise) {
  const auto value = text(name);
  if (!value) return otherwise;
  if (*value == "1" || *value == "on" || *value == "true") return true;
  if (*value == "0" || *value == "off" || *value == "false") return false;
  throw ConfigError(fmt::format("{}='{}' is neither on nor off: use 1, on, true or 0, off, false", name, *value));
}

bool debug_logging() {
  // Read without say_once: the debug line itself depends on this answer.
  static const bool enabled = [] {
    const auto value = raw("ARFUSE_LOG");
    return value && *value == "debug";
  }();
  return enabled;
}

}  // namespace arfuse::settings
