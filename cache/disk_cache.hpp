// The persistent layer: one folder of entries named <source key>-<full key>.arfuse.
// Publish is write-to-unique-temporary + fsync + rename, so a reader never sees a torn entry
// and many processes may fill one folder at once. A bad entry is removed, never loaded.
// A folder that is not ours (other owner, group/other-writable), unwritable or full makes the
// cache work from memory only, with one warning.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arfuse/cache/cache_entry.hpp"

namespace arfuse::cache {

constexpr std::uint64_t kDefaultMaxBytes = 1ull << 30;  // 1 GiB

// ARFUSE_CACHE_DIR, else $XDG_CACHE_HOME/arfuse, else ~/.cache/arfuse.
std::string default_cache_dir();
// ARFUSE_CACHE_MAX_BYTES, else kDefaultMaxBytes; throws Error for a value that is no number.
std::uint64_t default_max_bytes();

struct EntryInfo {
  std::string path;
  std::string file_name;
  std::uint64_t bytes = 0;
  std::int64_t last_use_ns = 0;  // modification time, refreshed on every hit
};

struct DiskCacheStats {
  std::uint64_t hits = 0, misses = 0, rejected = 0, writes = 0, evictions = 0;
};

class DiskCache {
 public:
  explicit DiskCache(std::string dir = default_cache_dir(), std::uint64_t max_bytes = default_max_bytes());

  const std::string& dir() const { return dir_; }
  // False when the folder is not used at all (untrusted or cannot be created).
  bool readable() const { return readable_; }
  bool writable() const { return writable_; }
  const std::string& problem() const { return problem_; }

  // The entry with exactly this key, verified; a bad one is removed and counted as rejected.
  std::optional<CacheEntry> get(const Digest& source, const Digest& full);
  // The newest valid entry for this source from any compiler (for a process without one).
  std::optional<CacheEntry> get_any(const Digest& source);
  // Publishes atomically; on failure warns once and carries on without the disk.
  bool put(const Digest& source, const CacheEntry& entry);

  std::vector<EntryInfo> list() const;
  std::uint64_t total_bytes() const;
  // Removes least recently used entries until the folder holds at most max_bytes.
  int prune(std::uint64_t max_bytes);
  int clear();
  DiskCacheStats stats() const;

  static std::string entry_name(const Digest& source, const Digest& full);
  // Whether an entry file's name carries this full key (a renamed or copied file does not).
  static bool name_matches_key(const std::string& file_name, const Digest& full);
  // Reads and verifies one file; false with `problem` when it is bad.
  static bool read_entry(const std::string& path, CacheEntry& entry, std::string& problem);

 private:
  std::optional<CacheEntry> load_verified(const std::string& path, const Digest* expected_key);
  void disable_writes(const std::string& why);

  std::string dir_;
  std::uint64_t max_bytes_;
  bool readable_ = false;
  bool writable_ = false;
  std::string problem_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, rejected_{0}, writes_{0}, evictions_{0};
};

}  // namespace arfuse::cache
