// Reading and removing the files of a cache folder without trusting them. Anyone who can write
// the folder (or a damaged disk) may have left anything under an entry's name: a link to
// /dev/zero, a FIFO, a folder, a file of gigabytes, a header whose sizes overflow. Every reader
// of entries (DiskCache, arfuse-cache, warmup workers) goes through read_entry_file(), which
// never follows a link, never blocks on a FIFO, accepts only regular files, and checks the
// header against the file size before it allocates or reads anything else. Files are named
// relative to the descriptor of their checked folder (base/trusted_folder.hpp), never by a path
// that could lead elsewhere once the folder is renamed.
#pragma once

#include <string>

#include "arfuse/error.hpp"

#include "cache/cache_entry.hpp"

namespace arfuse::cache {

enum class ReadOutcome { ok, missing, bad };

// Reads entry `name` of the open folder `dir`; `problem` says why the file is bad (or that it is
// missing).
ReadOutcome read_entry_at(int dir, const std::string& name, CacheEntry& entry, std::string& problem);

}  // namespace arfuse::cache
