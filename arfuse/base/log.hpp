// Warnings and debug lines on stderr. warn_once() says a thing once per process, for
// conditions that would otherwise repeat on every call (an untrusted cache folder, a full disk).
#pragma once

#include <string>

#include "arfuse/error.hpp"

namespace arfuse {

void warn(const std::string& message);
// Where warnings go: stderr unless set. A warmup worker process forwards them to its parent,
// which prints each once per run. `once_key` is warn_once()'s key, or empty for warn().
// nullptr restores stderr.
using WarningSink = void (*)(const std::string& once_key, const std::string& message);
void set_warning_sink(WarningSink sink);
void warn_once(const std::string& key, const std::string& message);
// Printed only when ARFUSE_LOG=debug.
void debug(const std::string& message);
bool debug_enabled();

}  // namespace arfuse
