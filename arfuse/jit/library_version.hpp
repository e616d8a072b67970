// Reads a version string that a vendor embeds in its shared library (e.g. NVRTC's
// "Cuda compilation tools, release 13.0, V13.0.88"), which tells patch releases apart where
// the library's API only gives major.minor.
#pragma once

#include <string>

namespace arfuse::jit {

// The text after `marker` up to the first character that is not [0-9A-Za-z._-], or empty.
std::string embedded_version(const std::string& library_path, const std::string& marker);

}  // namespace arfuse::jit
