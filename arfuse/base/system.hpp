// The seam around the system calls whose failures or timing the tests provoke: writing a cache
// entry (openat, write, fsync, renameat), binding the rendezvous socket (bind) and loading a
// library (dlopen, dlsym) go through system_calls(), so a test can make one fail on purpose (disk
// full, rename refused, a library or symbol missing) or act just before it (swap a folder) without
// touching the machine. Reading, listing and removing cache files and reading a library's
// version call POSIX directly: their failures are provoked with real files.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>

namespace arfuse {

struct SystemCalls {
  int (*openat)(int dir, const char* path, int flags, mode_t mode);
  ssize_t (*write)(int fd, const void* data, size_t size);
  int (*fsync)(int fd);
  int (*renameat)(int from_dir, const char* from, int to_dir, const char* to);
  int (*bind)(int fd, const sockaddr* address, socklen_t size);
  void* (*dlopen)(const char* file, int flags);
  void* (*dlsym)(void* handle, const char* name);
};

// The calls in force; tests may assign members and must restore them (ScopedSystemCalls).
SystemCalls& system_calls();
const SystemCalls& real_system_calls();

// Restores the real calls when it goes out of scope.
class ScopedSystemCalls {
 public:
  ScopedSystemCalls() : saved_(system_calls()) {}
  ~ScopedSystemCalls() { system_calls() = saved_; }
  ScopedSystemCalls(const ScopedSystemCalls&) = delete;
  ScopedSystemCalls& operator=(const ScopedSystemCalls&) = delete;

 private:
  SystemCalls saved_;
};

}  // namespace arfuse
