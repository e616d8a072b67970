// The persistent layer: one folder of entries named <source key>-<full key>.arfuse.
// Publish is write-to-unique-temporary + fsync + rename, so a reader never sees a torn entry
// and many processes may fill one folder at once. A bad entry is removed, never loaded.
// The folder is resolved and checked once (base/trusted_folder.hpp) and held open: every entry is
// read, written, renamed and removed relative to that descriptor, so a folder swapped in under
// the same path later is never read or written. A folder that is not ours (other owner,
// group/other-writable, or a parent another user controls), unwritable or full makes the cache
// work from memory only, with one warning. Temporaries (.tmp-*) of writers that died are
// removed once older than kStaleTemporaryAge, so a live writer's file is never taken.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arfuse/cache.hpp"
#include "arfuse/error.hpp"

#include "base/trusted_folder.hpp"
#include "cache/cache_entry.hpp"
#include "cache/cache_key.hpp"
#include "cache/entry_file.hpp"

namespace arfuse::cache {

constexpr std::uint64_t kDefaultMaxBytes = 1ull << 30;  // 1 GiB
// A publish takes milliseconds; a temporary this old belongs to a writer that died.
constexpr std::int64_t kStaleTemporaryAgeSeconds = 3600;

// Whether nothing is at `dir` (false also when it cannot be looked at: opening it then says why).
// Opening a cache creates its folder, so the commands that only read check this first: a mistyped
// path is reported, not created and read as an empty cache.
bool cache_folder_missing(const std::string& dir);

// Whether `dir` can hold a cache: created (0700) if missing, a folder of this user that nobody
// else may write, below folders only root or this user control. False with the reason
// otherwise. Says nothing itself.
bool usable_cache_folder(const std::string& dir, std::string& why);

// Whether an entry file's name (entry_file_name) carries this full key: the hex digits after its
// dash spell the key's first 16 bytes. A renamed or copied file's do not.
bool file_name_carries(const std::string& file_name, const Digest& full);

struct EntryInfo {
  std::string path;  // folder and name, for messages (files are opened by name in the open folder)
  std::string file_name;
  std::uint64_t bytes = 0;
  std::int64_t last_use_ns = 0;  // modification time, refreshed on every hit
  bool regular = true;           // false: a folder, link, FIFO... named like an entry (bad)
};

// What a cache folder holds, read in one pass.
struct FolderContents {
  std::vector<EntryInfo> entries;      // named like an entry, of any kind
  std::vector<EntryInfo> temporaries;  // .tmp-*
  std::uint64_t bytes() const;         // what the size cap counts
};

// One entry checked: readable, verified, and its header's key is the one its name carries.
struct CheckedEntry {
  ReadOutcome outcome = ReadOutcome::missing;
  std::string problem;
  CacheEntry entry;
  bool ok() const { return outcome == ReadOutcome::ok; }
};

struct DiskCacheStats {
  std::uint64_t hits = 0, misses = 0, rejected = 0, writes = 0, evictions = 0;
};

class DiskCache {
 public:
  explicit DiskCache(std::string dir = default_cache_dir(), std::uint64_t max_bytes = default_max_bytes());
  ~DiskCache();  // out of line: libarfuse closes the folder

  const std::string& dir() const { return dir_; }
  // False when the folder is not used at all (untrusted or cannot be created).
  bool readable() const { return readable_; }
  bool writable() const { return writable_; }
  const std::string& problem() const { return problem_; }

  // The entry `key` names, verified (a bad one is removed and counted as rejected); without a
  // compiler in the key, the newest valid entry of its source from any compiler.
  std::optional<CacheEntry> find(const KernelKey& key);
  // Publishes atomically under the name `key` gives; on failure warns once and carries on
  // without the disk.
  bool store(const KernelKey& key, const CacheEntry& entry);
  // The same by digests: the entry with exactly this key; the newest of this source; a put.
  std::optional<CacheEntry> get(const Digest& source, const Digest& full);
  std::optional<CacheEntry> get_any(const Digest& source);
  bool put(const Digest& source, const CacheEntry& entry);

  // Everything named like an entry, whatever kind of file it is, sorted by name.
  std::vector<EntryInfo> list() const;
  // Writers' temporaries (.tmp-*), live or left by a writer that died.
  std::vector<EntryInfo> temporaries() const;
  // Entries and temporaries together: what the size cap counts.
  std::uint64_t total_bytes() const;
  // Whether a temporary is older than `age_seconds`: its writer died.
  static bool is_stale(const EntryInfo& temporary, std::int64_t age_seconds = kStaleTemporaryAgeSeconds);
  // Removes temporaries older than `age_seconds`; returns how many.
  int remove_stale_temporaries(std::int64_t age_seconds = kStaleTemporaryAgeSeconds);
  // Removes the temporaries process `pid` of this machine was writing; returns how many. For a
  // parent that saw that process die (a warm-up worker): they can have no other writer.
  int remove_temporaries_of(long pid);
  // Removes stale temporaries, then least recently used entries until the folder holds at
  // most max_bytes.
  int prune(std::uint64_t max_bytes);
  // Removes every entry and every temporary; returns how many entries.
  int clear();
  DiskCacheStats stats() const;

  // Reads and verifies entry `file_name` of this folder, and that its name carries its key. Every
  // reader uses this.
  CheckedEntry check(const std::string& file_name) const;
  // Removes entry `file_name` of this folder, whatever it is (a folder with all in it). False
  // with `why` when something stays.
  bool remove(const std::string& file_name, std::string& why);

 private:
  std::optional<CacheEntry> load_verified(const std::string& file_name, const Digest* expected_key);
  std::optional<CacheEntry> get_named(const std::string& file_name, const Digest& full);
  std::optional<CacheEntry> get_newest(const std::string& file_prefix);
  bool put_named(const std::string& final_name, const CacheEntry& entry);
  void remove_bad(const std::string& file_name, const std::string& problem);
  bool publish(const std::string& temp_name, const std::string& final_name, int& error);
  FolderContents scan() const;
  // `why` is the reason (problem()), `path` the file it happened to, for the warning.
  void disable_writes(const std::string& why, const std::string& path);

  std::string dir_;
  FileDescriptor folder_;  // the checked folder, held open; none when it is not used
  std::uint64_t max_bytes_;
  bool readable_ = false;
  bool writable_ = false;
  std::string problem_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, rejected_{0}, writes_{0}, evictions_{0};
};

}  // namespace arfuse::cache
