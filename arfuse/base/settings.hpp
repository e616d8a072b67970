// Every ARFUSE_* environment variable arfuse reads, declared in one table (settings.cpp): its
// name, type, default and meaning. Each is read through one of the parsers below, which throw
// ConfigError naming the variable, its value and what is allowed, and say once per process at
// debug level (ARFUSE_LOG=debug) what they read. Variables are read when used, not cached, so
// a test or a tool may set one before the call it affects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arfuse/base/export.hpp"

namespace arfuse::settings {

struct ARFUSE_API Variable {
  const char* name;
  const char* type;           // "path", "text", "secret", "bytes", "switch", "level"
  const char* default_value;  // what applies when it is unset or empty
  const char* meaning;
};

// The declared variables, in the order README.md lists them.
ARFUSE_API const std::vector<Variable>& all();

// The value, or nullopt when unset or empty. Throws Error for a name not in all().
ARFUSE_API std::optional<std::string> text(const char* name);
// A whole number of bytes ("1073741824").
ARFUSE_API std::optional<std::uint64_t> byte_count(const char* name);
// "1", "on", "true" or "0", "off", "false"; `otherwise` when unset.
ARFUSE_API bool on_off(const char* name, bool otherwise);
// Whether ARFUSE_LOG asks for debug lines ("debug"; unset or "warn": no). Read once.
ARFUSE_API bool debug_logging();

}  // namespace arfuse::settings
