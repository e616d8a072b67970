#include "arfuse/settings.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "arfuse/error.hpp"

#include "base/log.hpp"
#include "base/trusted_folder.hpp"

namespace arfuse::settings {
namespace {

const Variable kVariables[] = {
    {"ARFUSE_CACHE_DIR", "path", "$XDG_CACHE_HOME/arfuse, else ~/.cache/arfuse, else /tmp/arfuse-<uid>",
     "the kernel cache folder (created 0700; one owned by another user, writable by others, or below a folder "
     "another user controls is not used)",
     nullptr},
    {"ARFUSE_CACHE_MAX_BYTES", "bytes", "1073741824", "the cache's size cap; least recently used entries go first",
     nullptr},
    {"ARFUSE_COMPILE", "switch", "on", "off: never load a compiler, serve only what the cache holds", nullptr},
    {"ARFUSE_TEMPLATE_DIR", "folder", "the embedded templates", "read kernel templates from this folder (development)",
     nullptr},
    {"ARFUSE_TUNING", "file", "the embedded table", "a JSON tuning table replacing the one-/two-stage thresholds",
     nullptr},
    {"ARFUSE_LOG", "choice", "warn", "debug: debug lines on stderr (set-up, the path each call takes, settings read)",
     "warn, debug"},
    {"ARFUSE_NCCL_LIBRARY", "library", "libnccl.so.2", "the NCCL library to load", nullptr},
    {"ARFUSE_AMD_CLANG", "program", ".deps/ziglang/zig (scripts/setup-deps.sh)",
     "a clang with the AMDGPU back end, or zig, for AMD targets the loaded hiprtc does not know", nullptr},
    {"ARFUSE_DEVICE_BACKEND", "choice", "auto",
     "cuda or hip: the vendor runtime the device layer uses (auto: CUDA where it finds a GPU, else HIP)",
     "auto, cuda, hip"},
    {"ARFUSE_BOOTSTRAP_SECRET", "secret", "none", "a job secret every rank of a socket rendezvous must prove", nullptr},
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

// Folders, files and programs a setting names are read as code or run: the rule of
// base/trusted_folder.hpp.
std::string trust_problem(const std::string& value, Trusted kind) {
  const std::string why = untrusted_reason(value, kind);
  if (why.empty()) return "";
  return fmt::format(
      "is refused: {}. Name one that only root and this user can change, in folders only they can "
      "write",
      why);
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::vector<std::string> words_of(const char* list) {
  std::vector<std::string> out;
  std::string word;
  for (const char* p = list;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (!word.empty()) out.push_back(word);
      word.clear();
      if (*p == '\0') break;
    } else if (*p != ' ') {
      word += *p;
    }
  }
  return out;
}

// Every value goes through here: "" when `value` is right for the variable's type, else what is
// wrong with it and what is allowed.
std::string problem_with(const Variable& v, const std::string& value) {
  const std::string type = v.type;
  if (type == "secret") return "";
  if (is_space(value.front()) || is_space(value.back()))
    return "starts or ends with a space; nothing is trimmed: remove the space";
  for (char c : value) {
    if (c == '\n' || c == '\r') return "holds a line break";
  }
  if (type == "bytes") {
    if (value.size() > 20 || value.find_first_not_of("0123456789") != std::string::npos)
      return "is not a byte count: use a whole number of bytes in decimal digits, e.g. 1073741824";
    errno = 0;
    std::strtoull(value.c_str(), nullptr, 10);
    if (errno == ERANGE) return "is not a byte count: it is larger than 2^64 - 1";
    return "";
  }
  if (type == "switch") {
    for (const char* w : {"1", "on", "true", "0", "off", "false"})
      if (value == w) return "";
    return "is neither on nor off: use 1, on, true or 0, off, false";
  }
  if (type == "choice") {
    std::string allowed;
    for (const auto& w : words_of(v.words)) {
      if (value == w) return "";
      allowed += (allowed.empty() ? "" : ", ") + w;
    }
    return "is not one of " + allowed;
  }
  struct stat st {};
  if (type == "folder") {
    if (::stat(value.c_str(), &st) != 0)
      return fmt::format("cannot be used: {}; name an existing folder", std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) return "is not a folder; name an existing folder";
    return trust_problem(value, Trusted::folder);
  }
  if (type == "file") {
    if (::stat(value.c_str(), &st) != 0)
      return fmt::format("cannot be used: {}; name an existing file", std::strerror(errno));
    if (!S_ISREG(st.st_mode) || ::access(value.c_str(), R_OK) != 0) return "is not a readable file";
    return trust_problem(value, Trusted::file);
  }
  if (type == "program") {
    if (::stat(value.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(value.c_str(), X_OK) != 0)
      return "is not an executable file";
    return trust_problem(value, Trusted::program);
  }
  return "";  // "path", "library": any name; what it leads to is checked where it is used
}

std::string parse(const Variable& v, const std::string& value) {
  const std::string problem = problem_with(v, value);
  if (!problem.empty()) throw ConfigError(fmt::format("{}='{}' {}", v.name, value, problem));
  return value;
}

}  // namespace

const std::vector<Variable>& all() {
  static const std::vector<Variable> variables(std::begin(kVariables), std::end(kVariables));
  return variables;
}

std::optional<std::string> text(const char* name) {
  const Variable& v = declared(name);
  auto value = raw(name);
  if (value) parse(v, *value);
  say_once(v, value);
  return value;
}

std::optional<std::uint64_t> byte_count(const char* name) {
  const auto value = text(name);
  if (!value) return std::nullopt;
  return std::strtoull(value->c_str(), nullptr, 10);  // checked by parse(): digits only, in range
}

bool on_off(const char* name, bool otherwise) {
  const auto value = text(name);
  if (!value) return otherwise;
  return *value == "1" || *value == "on" || *value == "true";  // parse() allowed only the six words
}

bool debug_logging() {
  // Read without say_once: the debug line itself depends on this answer.
  static const bool enabled = [] {
    const auto value = raw("ARFUSE_LOG");
    if (!value) return false;
    const std::string problem = problem_with(declared("ARFUSE_LOG"), *value);
    if (!problem.empty()) {
      std::fprintf(stderr, "arfuse: warning: ARFUSE_LOG=%s %s; logging at warn\n", value->c_str(), problem.c_str());
      return false;
    }
    return *value == "debug";
  }();
  return enabled;
}

void check_all() {
  for (const Variable& v : kVariables) {
    if (const auto value = raw(v.name)) parse(v, *value);
  }
}

}  // namespace arfuse::settings
