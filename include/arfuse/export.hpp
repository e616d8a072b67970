// ARFUSE_API marks what libarfuse exports. The library is built with hidden visibility, so a
// shared build (BUILD_SHARED_LIBS=ON) exports exactly the declarations marked here.
#pragma once

#define ARFUSE_API __attribute__((visibility("default")))
