// Where compiled kernels are kept: a persistent folder of verified entries (one per kernel
// specialisation, content-addressed) under an in-memory layer. Warm it ahead of time with
// arfuse-warmup; a process without a compiler is served from it alone.
#pragma once

#include <cstdint>
#include <string>

#include "arfuse/error.hpp"

namespace arfuse {

// ARFUSE_CACHE_DIR, else $XDG_CACHE_HOME/arfuse, else ~/.cache/arfuse, else (no HOME)
// /tmp/arfuse-<uid>: a folder of this user's own, never one shared with other users.
ARFUSE_API std::string default_cache_dir();
// ARFUSE_CACHE_MAX_BYTES, else 1 GiB; throws ConfigError for a value that is no byte count.
ARFUSE_API std::uint64_t default_max_bytes();

struct ARFUSE_API CacheOptions {
  std::string dir = default_cache_dir();
  std::uint64_t max_bytes = default_max_bytes();
  bool use_disk = true;
  // False: never load a compiler, serve only what the disk has (ARFUSE_COMPILE=0 also).
  bool allow_compile = true;
};

}  // namespace arfuse
