#include "cache/disk_cache.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

#include "base/log.hpp"
#include "base/system.hpp"
#include "base/trusted_folder.hpp"

namespace arfuse::cache {
namespace {

constexpr const char* kTemporaryPrefix = ".tmp-";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool write_all(int fd, const std::vector<std::uint8_t>& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = system_calls().write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

std::string unique_suffix() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ (std::uint64_t(::getpid()) << 32));
  return fmt::format("{}.{:016x}", ::getpid(), rng());
}

// A lower-case hex digit's value (entry_file_name spells no other); -1 for any other character.
int hex_digit(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

}  // namespace

bool file_name_carries(const std::string& file_name, const Digest& full) {
  const size_t dash = file_name.find('-');
  if (dash == std::string::npos || file_name.size() < dash + 1 + 32) return false;
  for (size_t i = 0; i < 16; ++i) {
    const int high = hex_digit(file_name[dash + 1 + 2 * i]), low = hex_digit(file_name[dash + 2 + 2 * i]);
    if (high < 0 || low < 0 || std::uint8_t(high * 16 + low) != full[i]) return false;
  }
  return true;
}

bool cache_folder_missing(const std::string& dir) {
  struct stat st;
  return ::lstat(dir.c_str(), &st) != 0 && errno == ENOENT;
}

bool usable_cache_folder(const std::string& dir, std::string& why) {
  TrustedFolder folder;
  return open_trusted_folder(dir, true, folder, why);
}

DiskCache::DiskCache(std::string dir, std::uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  std::string why;
  TrustedFolder folder;
  if (!open_trusted_folder(dir_, true, folder, why)) {
    problem_ = why;
    warn_once("cache-untrusted:" + dir_,
              fmt::format("kernel cache {} is not used ({}); compiling in memory only", dir_, why));
    return;
  }
  folder_ = std::move(folder.fd);
  readable_ = true;
  writable_ = ::faccessat(folder_.get(), ".", W_OK, AT_EACCESS) == 0;
  if (!writable_) disable_writes(fmt::format("the folder is not writable: {}", std::strerror(errno)), dir_);
}

DiskCache::~DiskCache() = default;

void DiskCache::disable_writes(const std::string& why, const std::string& path) {
  writable_ = false;
  problem_ = why;
  warn_once("cache-unwritable:" + dir_,
            fmt::format("kernel cache {}: {} ({}); new kernels are kept in memory only", dir_, why, path));
}

CheckedEntry DiskCache::check(const std::string& file_name) const {
  CheckedEntry c;
  if (!folder_.valid()) {
    c.outcome = ReadOutcome::bad;
    c.problem = "the cache folder is not used: " + problem_;
    return c;
  }
  c.outcome = read_entry_at(folder_.get(), file_name, c.entry, c.problem);
  if (c.ok() && !file_name_carries(file_name, c.entry.key)) {
    c.outcome = ReadOutcome::bad;
    c.problem = "key in the header does not match the file name";
  }
  return c;
}

bool DiskCache::remove(const std::string& file_name, std::string& why) {
  if (!folder_.valid()) {
    why = "the cache folder is not used: " + problem_;
    return false;
  }
  return remove_at(folder_.get(), file_name, why);
}

void DiskCache::remove_bad(const std::string& file_name, const std::string& problem) {
  ++rejected_;
  std::string why;
  const std::string path = dir_ + "/" + file_name;
  if (remove(file_name, why)) {
    warn(fmt::format("removed bad cache entry {}: {}", path, problem));
  } else {
    warn(fmt::format("bad cache entry {} ({}) could not be removed: {}", path, problem, why));
  }
}

std::optional<CacheEntry> DiskCache::load_verified(const std::string& file_name, const Digest* expected_key) {
  CheckedEntry c = check(file_name);
  if (c.outcome == ReadOutcome::missing) return std::nullopt;
  if (c.ok() && expected_key != nullptr && c.entry.key != *expected_key) {
    c.outcome = ReadOutcome::bad;
    c.problem = "key in the header does not match the file name";
  }
  if (!c.ok()) {
    remove_bad(file_name, c.problem);
    return std::nullopt;
  }
  ::utimensat(folder_.get(), file_name.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // a hit refreshes the LRU time
  return std::move(c.entry);
}

std::optional<CacheEntry> DiskCache::find(const KernelKey& key) {
  return key.has_compiler ? get_named(key.file, key.full) : get_newest(key.file_prefix);
}

std::optional<CacheEntry> DiskCache::get(const Digest& source, const Digest& full) {
  return get_named(entry_file_name(source, full), full);
}

std::optional<CacheEntry> DiskCache::get_any(const Digest& source) { return get_newest(entry_file_prefix(source)); }

std::optional<CacheEntry> DiskCache::get_named(const std::string& file_name, const Digest& full) {
  if (!readable_) return std::nullopt;
  auto e = load_verified(file_name, &full);
  ++(e ? hits_ : misses_);
  return e;
}

std::optional<CacheEntry> DiskCache::get_newest(const std::string& prefix) {
  if (!readable_) return std::nullopt;
  std::vector<EntryInfo> candidates;
  for (auto& info : list()) {
    if (info.file_name.compare(0, prefix.size(), prefix) == 0) candidates.push_back(info);
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.last_use_ns > b.last_use_ns; });
  for (const auto& c : candidates) {
    if (auto e = load_verified(c.file_name, nullptr)) {
      ++hits_;
      return e;
    }
  }
  ++misses_;
  return std::nullopt;
}

// rename() replaces a file, link or FIFO of the entry's name, but not a folder: a folder there
// is a bad entry, removed, and the rename tried once more.
bool DiskCache::publish(const std::string& temp_name, const std::string& final_name, int& error) {
  if (system_calls().renameat(folder_.get(), temp_name.c_str(), folder_.get(), final_name.c_str()) == 0) return true;
  error = errno;
  if (error != EISDIR && error != ENOTEMPTY && error != EEXIST) return false;
  remove_bad(final_name, "a folder, not a file");
  if (system_calls().renameat(folder_.get(), temp_name.c_str(), folder_.get(), final_name.c_str()) == 0) return true;
  error = errno;
  return false;
}

bool DiskCache::store(const KernelKey& key, const CacheEntry& entry) { return put_named(key.file, entry); }

bool DiskCache::put(const Digest& source, const CacheEntry& entry) {
  return put_named(entry_file_name(source, entry.key), entry);
}

bool DiskCache::put_named(const std::string& final_name, const CacheEntry& entry) {
  if (!writable_) return false;
  const std::string temp_name = kTemporaryPrefix + final_name + "." + unique_suffix();
  const auto bytes = serialize(entry);
  int fd = system_calls().openat(folder_.get(), temp_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                                 0600);
  if (fd < 0) {
    disable_writes(fmt::format("cannot create a file: {}", std::strerror(errno)), dir_ + "/" + temp_name);
    return false;
  }
  bool ok = write_all(fd, bytes);
  int saved = errno;
  if (ok && system_calls().fsync(fd) != 0) ok = false, saved = errno;
  ::close(fd);
  if (ok && !publish(temp_name, final_name, saved)) ok = false;
  if (!ok) {
    ::unlinkat(folder_.get(), temp_name.c_str(), 0);
    disable_writes(fmt::format("cannot write an entry: {}", std::strerror(saved)), dir_ + "/" + final_name);
    return false;
  }
  ++writes_;
  if (total_bytes() > max_bytes_) prune(max_bytes_);
  return true;
}

FolderContents DiskCache::scan() const {
  FolderContents out;
  if (!readable_) return out;
  // A descriptor of its own: readdir moves an open folder's position, which a dup() would share.
  const int listing = ::openat(folder_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listing < 0) return out;
  DIR* d = ::fdopendir(listing);
  if (d == nullptr) {
    ::close(listing);
    return out;
  }
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const bool temporary = name.compare(0, std::strlen(kTemporaryPrefix), kTemporaryPrefix) == 0;
    if (!temporary && (name.empty() || name[0] == '.' || !ends_with(name, kEntrySuffix))) continue;
    EntryInfo info;
    info.path = dir_ + "/" + name;
    info.file_name = name;
    struct stat st {};
    if (::fstatat(folder_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // removed meanwhile
    info.regular = S_ISREG(st.st_mode);
    info.bytes = info.regular ? std::uint64_t(st.st_size) : 0;
    info.last_use_ns = std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    (temporary ? out.temporaries : out.entries).push_back(info);
  }
  ::closedir(d);
  for (auto* files : {&out.entries, &out.temporaries}) {
    std::sort(files->begin(), files->end(),
              [](const EntryInfo& a, const EntryInfo& b) { return a.file_name < b.file_name; });
  }
  return out;
}

std::vector<EntryInfo> DiskCache::list() const { return scan().entries; }

std::vector<EntryInfo> DiskCache::temporaries() const { return scan().temporaries; }

std::uint64_t FolderContents::bytes() const {
  std::uint64_t total = 0;
  for (const auto* files : {&entries, &temporaries}) {
    for (const auto& f : *files) total += f.bytes;
  }
  return total;
}

std::uint64_t DiskCache::total_bytes() const { return scan().bytes(); }

bool DiskCache::is_stale(const EntryInfo& temporary, std::int64_t age_seconds) {
  return std::int64_t(::time(nullptr)) * 1000000000 - temporary.last_use_ns >= age_seconds * 1000000000;
}

int DiskCache::remove_stale_temporaries(std::int64_t age_seconds) {
  int removed = 0;
  for (const auto& t : temporaries()) {
    std::string why;
    if (is_stale(t, age_seconds) && remove(t.file_name, why)) ++removed;
  }
  return removed;
}

int DiskCache::remove_temporaries_of(long pid) {
  // A temporary's name ends in ".<pid>.<16 hex digits>" (unique_suffix).
  const std::string mark = fmt::format(".{}.", pid);
  int removed = 0;
  for (const auto& t : temporaries()) {
    const std::string& name = t.file_name;
    if (name.size() < mark.size() + 16 || name.compare(name.size() - 16 - mark.size(), mark.size(), mark) != 0)
      continue;
    std::string why;
    if (remove(name, why)) ++removed;
  }
  return removed;
}

int DiskCache::prune(std::uint64_t max_bytes) {
  remove_stale_temporaries();
  const FolderContents contents = scan();
  std::uint64_t total = contents.bytes();  // live writers' temporaries count, and stay
  auto entries = contents.entries;
  std::sort(entries.begin(), entries.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.last_use_ns < b.last_use_ns; });
  int removed = 0;
  for (const auto& e : entries) {
    if (total <= max_bytes) break;
    std::string why;
    if (remove(e.file_name, why)) total -= e.bytes, ++removed, ++evictions_;
  }
  return removed;
}

int DiskCache::clear() {
  int removed = 0;
  std::string why;
  const FolderContents contents = scan();
  for (const auto& e : contents.entries) removed += remove(e.file_name, why) ? 1 : 0;
  for (const auto& t : contents.temporaries) remove(t.file_name, why);
  return removed;
}

DiskCacheStats DiskCache::stats() const {
  return DiskCacheStats{hits_.load(), misses_.load(), rejected_.load(), writes_.load(), evictions_.load()};
}

}  // namespace arfuse::cache
