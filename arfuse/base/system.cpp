#include "base/system.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace arfuse {
namespace {

int open_file_at(int dir, const char* path, int flags, mode_t mode) { return ::openat(dir, path, flags, mode); }

}  // namespace

const SystemCalls& real_system_calls() {
  static const SystemCalls calls{open_file_at, ::write, ::fsync, ::renameat, ::bind, ::dlopen, ::dlsym};
  return calls;
}

SystemCalls& system_calls() {
  static SystemCalls calls = real_system_calls();
  return calls;
}

}  // namespace arfuse
