// Every ARFUSE_* environment variable arfuse reads, declared in one table (settings.cpp): its
// name, type, default and meaning. Every value is checked by one function for its type before
// anything uses it: nothing is trimmed or guessed, so a value with spaces, a sign, an unknown
// word or a path that is not there is a ConfigError naming the variable, its value and what is
// allowed (exit 2 in the tools). What was read is said once per process at debug level
// (ARFUSE_LOG=debug). Variables are read when used, not cached, so a test or a tool may set one
// before the call it affects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arfuse/error.hpp"

namespace arfuse::settings {

struct ARFUSE_API Variable {
  const char* name;
  // "path" (any path, no surrounding spaces), "folder" (an existing folder), "file" (an existing
  // readable file), "program" (an executable file), "library" (a file name or path dlopen
  // takes), "bytes" (decimal digits), "switch" (on/off words), "choice" (one of `words`),
  // "secret" (anything; never printed)
  const char* type;
  const char* default_value;  // what applies when it is unset or empty
  const char* meaning;
  const char* words;  // for "choice": the accepted values, comma-separated; else nullptr
};

// The declared variables, in the order docs/tools.md lists them.
ARFUSE_API const std::vector<Variable>& all();

// The value checked for its type, or nullopt when unset or empty. Throws ConfigError for a bad
// value, Error for a name not in all().
ARFUSE_API std::optional<std::string> text(const char* name);
// A whole number of bytes ("1073741824").
ARFUSE_API std::optional<std::uint64_t> byte_count(const char* name);
// "1", "on", "true" or "0", "off", "false"; `otherwise` when unset.
ARFUSE_API bool on_off(const char* name, bool otherwise);
// Whether ARFUSE_LOG asks for debug lines ("debug"; unset or "warn": no). Read once; a bad value
// is warned about once and read as "warn" here (check_all() refuses it).
ARFUSE_API bool debug_logging();
// Checks every declared variable that is set; throws ConfigError for the first bad one. The
// tools call it before they start work.
ARFUSE_API void check_all();

}  // namespace arfuse::settings
