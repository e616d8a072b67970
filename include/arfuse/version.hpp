// The arfuse release this library was built from (CMake's project version). Ranks of one
// group must run the same release: the group handshake compares it.
#pragma once

#include "arfuse/error.hpp"

namespace arfuse {

ARFUSE_API const char* version();

}  // namespace arfuse
