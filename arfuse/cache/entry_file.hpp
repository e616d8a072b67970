// Reading and removing the files of a cache folder without trusting them. Anyone who can write
// the folder (or a damaged disk) may have left anything under an entry's name: a link to
// /dev/zero, a FIFO, a folder, a file of gigabytes, a header whose sizes overflow. Every reader
// of entries (DiskCache, arfuse-cache, warmup workers) goes through read_entry_file(), which
// never follows a link, never blocks on a FIFO, accepts only regular files, and checks the
// header against the file size before it allocates or reads anything else.
#pragma once

#include <sys/stat.h>

#include <string>

#include "arfuse/base/export.hpp"
#include "arfuse/cache/cache_entry.hpp"

namespace arfuse::cache {

enum class ReadOutcome { ok, missing, bad };

// `problem` says why the file is bad (or that it is missing).
ARFUSE_API ReadOutcome read_entry_file(const std::string& path, CacheEntry& entry, std::string& problem);

// "a folder", "a symbolic link", "a FIFO", ... for a file that is not a regular file.
ARFUSE_API std::string file_kind(mode_t mode);

// Removes whatever is at `path`, a folder with everything in it (links are removed, never
// followed). False with `why` when something stays.
ARFUSE_API bool remove_path(const std::string& path, std::string& why);

}  // namespace arfuse::cache
