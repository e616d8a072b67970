#include "arfuse/cache/entry_file.hpp"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <ftw.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "arfuse/base/system.hpp"

namespace arfuse::cache {
namespace {

// Closes the descriptor on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

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

// Why open() refused, in the words of what the path is.
std::string open_problem(const std::string& path, int error) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return fmt::format("{}, not a file", file_kind(st.st_mode));
  return fmt::format("cannot open: {}", std::strerror(error));
}

int remove_one(const char* path, const struct stat*, int type, struct FTW*) {
  return (type == FTW_DP ? ::rmdir(path) : ::unlink(path)) == 0 || errno == ENOENT ? 0 : errno;
}

}  // namespace

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "an unknown kind of file";
}

ReadOutcome read_entry_file(const std::string& path, CacheEntry& entry, std::string& problem) {
  // O_NOFOLLOW: a link is refused, not followed (to /dev/zero, or out of the folder).
  // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer.
  const FileDescriptor fd(system_calls().open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT) {
      problem = "no such file";
      return ReadOutcome::missing;
    }
    problem = error == ELOOP ? "a symbolic link, not a file" : open_problem(path, error);
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

bool remove_path(const std::string& path, std::string& why) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    why = fmt::format("cannot stat: {}", std::strerror(errno));
    return false;
  }
  // FTW_PHYS: links inside the folder are removed as links, never followed out of it.
  const int error = S_ISDIR(st.st_mode) ? ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS)
                                        : (::unlink(path.c_str()) == 0 || errno == ENOENT ? 0 : errno);
  if (error == 0) return true;
  why = fmt::format("cannot remove {}: {}", file_kind(st.st_mode), std::strerror(error > 0 ? error : errno));
  return false;
}

}  // namespace arfuse::cache
