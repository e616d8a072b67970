// The arfuse release this library was built from (CMake's project version). Ranks of one
// group must run the same release: the group handshake compares it.
#pragma once

namespace arfuse {

const char* version();

}  // namespace arfuse
