#include "arfuse/version.hpp"

#ifndef ARFUSE_VERSION
#error "ARFUSE_VERSION is defined by CMakeLists.txt"
#endif

namespace arfuse {

const char* version() { return ARFUSE_VERSION; }

}  // namespace arfuse
