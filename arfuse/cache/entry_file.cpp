#include "cache/entry_file.hpp"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "base/system.hpp"
#include "base/trusted_folder.hpp"

namespace arfuse::cache {
namespace {

bool read_at(int fd, void* data, std::size_t size, off_t offset) {
  auto* p = static_cast<std::uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n, size -= std::size_t(n), offset += n;
  }
  return true;
}

// Why openat() refused, in the words of what the file is.
std::string open_problem(int dir, const std::string& name, int error) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
    return fmt::format("{}, not a file", file_kind(st.st_mode));
  return fmt::format("cannot open: {}", std::strerror(error));
}

}  // namespace

ReadOutcome read_entry_at(int dir, const std::string& name, CacheEntry& entry, std::string& problem) {
  // O_NOFOLLOW: a link is refused, not followed (to /dev/zero, or out of the folder).
  // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer.
  const FileDescriptor fd(system_calls().openat(dir, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT) {
      problem = "no such file";
      return ReadOutcome::missing;
    }
    problem = error == ELOOP ? "a symbolic link, not a file" : open_problem(dir, name, error);
    return ReadOutcome::bad;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    problem = fmt::format("cannot stat: {}", std::strerror(errno));
    return ReadOutcome::bad;
  }
  if (!S_ISREG(st.st_mode)) {
    problem = fmt::format("{}, not a file", file_kind(st.st_mode));
    return ReadOutcome::bad;
  }
  const std::uint64_t size = std::uint64_t(st.st_size);
  std::uint8_t fixed[sizeof(EntryHeader)];
  if (size < sizeof(fixed) || !read_at(fd.get(), fixed, sizeof(fixed), 0)) {
    problem = fmt::format("truncated: {} bytes, shorter than the {}-byte header", size, sizeof(fixed));
    return ReadOutcome::bad;
  }
  EntryHeader header{};
  std::uint64_t expected = 0;
  if (!parse_header(fixed, header, expected, problem)) return ReadOutcome::bad;
  if (size != expected) {  // decided from the header alone: a huge file is never read
    problem = fmt::format("size is {} bytes, the header says {}", size, expected);
    return ReadOutcome::bad;
  }
  std::vector<std::uint8_t> bytes(expected);
  std::memcpy(bytes.data(), fixed, sizeof(fixed));
  if (!read_at(fd.get(), bytes.data() + sizeof(fixed), expected - sizeof(fixed), off_t(sizeof(fixed)))) {
    problem = "the file shrank while it was read";
    return ReadOutcome::bad;
  }
  return deserialize(bytes, entry, problem) ? ReadOutcome::ok : ReadOutcome::bad;
}

}  // namespace arfuse::cache
