#include "base/trusted_folder.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

namespace arfuse {
namespace {

constexpr int kMaxLinks = 40;         // as the kernel's own limit (ELOOP)
constexpr int kMaxRemovalDepth = 64;  // a hostile tree deeper than this is left, not recursed into
constexpr int kFolderFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

std::deque<std::string> components(const std::string& path) {
  std::deque<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string::npos ? path.size() : slash;
    const std::string part = path.substr(start, end - start);
    if (!part.empty() && part != ".") out.push_back(part);
    start = end + 1;
  }
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += "/" + n;
  return out.empty() ? "/" : out;
}

// Only root or this user can change what `where` is or holds: it is theirs, and nobody else may
// write it (a sticky folder may be writable by all when `sticky_ok`: nobody can rename what another
// user put there). `otherwise` says what the others could do.
bool only_root_or_me_can_change(const struct stat& st, const std::string& where, bool sticky_ok, const char* otherwise,
                                std::string& why) {
  const uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me) {
    why = fmt::format("{} is owned by uid {}, neither root nor this user (uid {}): whoever owns it {}", where,
                      st.st_uid, me, otherwise);
    return false;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !(sticky_ok && (st.st_mode & S_ISVTX) != 0)) {
    why = fmt::format("{} is writable by group or others{} (mode {:o}): they {}", where,
                      sticky_ok ? " and not sticky" : "", st.st_mode & 07777, otherwise);
    return false;
  }
  return true;
}

// A folder above the one we keep.
bool safe_parent(const struct stat& st, const std::string& where, std::string& why) {
  return only_root_or_me_can_change(st, where, true, "can replace what lies below", why);
}

bool private_folder(const struct stat& st, const std::string& where, std::string& why) {
  if (!S_ISDIR(st.st_mode)) {
    why = fmt::format("{} is not a folder", where);
    return false;
  }
  if (st.st_uid != ::geteuid()) {
    why = fmt::format("{} is owned by uid {}, not by this user (uid {})", where, st.st_uid, ::geteuid());
    return false;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    why = fmt::format("{} is writable by group or others (mode {:o})", where, st.st_mode & 07777);
    return false;
  }
  return true;
}

bool remove_tree_at(int dir, const std::string& name, int depth, std::string& why) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return true;
    why = fmt::format("cannot stat {}: {}", name, std::strerror(errno));
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dir, name.c_str(), 0) == 0 || errno == ENOENT) return true;
    why = fmt::format("cannot remove {} ({}): {}", name, file_kind(st.st_mode), std::strerror(errno));
    return false;
  }
  if (depth >= kMaxRemovalDepth) {
    why = fmt::format("{} nests folders deeper than {}: left in place", name, kMaxRemovalDepth);
    return false;
  }
  const int inner = ::openat(dir, name.c_str(), kFolderFlags);
  if (inner < 0) {
    why = fmt::format("cannot open folder {}: {}", name, std::strerror(errno));
    return false;
  }
  DIR* listing = ::fdopendir(inner);
  if (listing == nullptr) {
    ::close(inner);
    why = fmt::format("cannot list folder {}: {}", name, std::strerror(errno));
    return false;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(listing)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  bool ok = true;
  for (const auto& n : names) ok = remove_tree_at(::dirfd(listing), n, depth + 1, why) && ok;
  ::closedir(listing);
  if (!ok) return false;
  if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) return true;
  why = fmt::format("cannot remove folder {}: {}", name, std::strerror(errno));
  return false;
}

}  // namespace

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int FileDescriptor::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void FileDescriptor::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "an unknown kind of file";
}

namespace {

// The thing `path` names, checked for `kind` on its descriptor.
bool final_check(const struct stat& st, Trusted kind, const std::string& where, std::string& why) {
  if (kind == Trusted::private_folder) return private_folder(st, where, why);
  const bool folder = kind == Trusted::folder;
  if (folder ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    why = fmt::format("{} is {}, not {}", where, file_kind(st.st_mode), folder ? "a folder" : "a regular file");
    return false;
  }
  if (!only_root_or_me_can_change(st, where, false, "can change what arfuse reads or runs", why)) return false;
  if (kind == Trusted::program && (st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)) == 0) {
    why = fmt::format("{} is not executable (mode {:o})", where, st.st_mode & 07777);
    return false;
  }
  return true;
}

int open_flags(Trusted kind) {
  switch (kind) {
    case Trusted::file:
      return O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;  // O_NONBLOCK: a FIFO does not stall the open
    case Trusted::program: return O_PATH | O_NOFOLLOW | O_CLOEXEC;
    default: return kFolderFlags;
  }
}

// Walks `path` from `/` as the header says; `create` makes missing folders (0700) on the way.
bool walk(const std::string& path, bool create, Trusted kind, FileDescriptor& out, std::string& why) {
  if (path.empty()) {
    why = "the path is empty";
    return false;
  }
  std::string absolute = path;
  if (path[0] != '/') {
    std::vector<char> cwd(4096);
    if (::getcwd(cwd.data(), cwd.size()) == nullptr) {
      why = fmt::format("cannot resolve {}: the current folder is unknown ({})", path, std::strerror(errno));
      return false;
    }
    absolute = std::string(cwd.data()) + "/" + path;
  }
  std::deque<std::string> pending = components(absolute);
  // The open folders from `/` down to the current one, and their names.
  std::vector<FileDescriptor> chain;
  std::vector<std::string> names;
  chain.emplace_back(::open("/", kFolderFlags));
  if (!chain.back().valid()) {
    why = fmt::format("cannot open /: {}", std::strerror(errno));
    return false;
  }
  struct stat st {};
  if (::fstat(chain.back().get(), &st) != 0 || !safe_parent(st, "/", why)) {
    if (why.empty()) why = fmt::format("cannot stat /: {}", std::strerror(errno));
    return false;
  }
  int links = 0;
  FileDescriptor found;  // the last component, once opened
  while (!pending.empty()) {
    const std::string name = pending.front();
    pending.pop_front();
    if (name == "..") {
      if (chain.size() > 1) chain.pop_back(), names.pop_back();
      continue;
    }
    const int parent = chain.back().get();
    names.push_back(name);
    const std::string here = joined(names);
    if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT || !create) {
        why = fmt::format("cannot open {}: {}", here, std::strerror(errno));
        return false;
      }
      if (::mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) {
        why = fmt::format("cannot create {}: {}", here, std::strerror(errno));
        return false;
      }
      if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        why = fmt::format("cannot open {}: {}", here, std::strerror(errno));
        return false;
      }
    }
    if (S_ISLNK(st.st_mode)) {
      if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
        why = fmt::format("{} is a link owned by uid {}, neither root nor this user", here, st.st_uid);
        return false;
      }
      if (++links > kMaxLinks) {
        why = fmt::format("{}: more than {} links on the way", here, kMaxLinks);
        return false;
      }
      std::vector<char> target(4096);
      const ssize_t n = ::readlinkat(parent, name.c_str(), target.data(), target.size() - 1);
      if (n < 0) {
        why = fmt::format("cannot read the link {}: {}", here, std::strerror(errno));
        return false;
      }
      const std::string to(target.data(), size_t(n));
      names.pop_back();
      std::deque<std::string> rest = components(to);
      rest.insert(rest.end(), pending.begin(), pending.end());
      pending = std::move(rest);
      if (!to.empty() && to[0] == '/') chain.resize(1), names.clear();
      continue;
    }
    const bool last = pending.empty();
    FileDescriptor next(::openat(parent, name.c_str(), last ? open_flags(kind) : kFolderFlags));
    if (!next.valid()) {
      why = errno == ENOTDIR ? fmt::format("{} is not a folder", here)
                             : fmt::format("cannot open {}: {}", here, std::strerror(errno));
      return false;
    }
    if (::fstat(next.get(), &st) != 0) {
      why = fmt::format("cannot stat {}: {}", here, std::strerror(errno));
      return false;
    }
    // Every folder is checked as a parent when opened; the last one is checked for its kind below.
    if (!last && !safe_parent(st, here, why)) return false;
    if (last) {
      found = std::move(next);
    } else {
      chain.push_back(std::move(next));
    }
  }
  if (!found.valid()) found = std::move(chain.back());  // the path named `/` or ended in ".."
  if (::fstat(found.get(), &st) != 0) {
    why = fmt::format("cannot stat {}: {}", joined(names), std::strerror(errno));
    return false;
  }
  if (!final_check(st, kind, path, why)) return false;
  out = std::move(found);
  return true;
}

}  // namespace

bool open_trusted_folder(const std::string& path, bool create, TrustedFolder& out, std::string& why) {
  if (path.empty()) {
    why = "the folder's path is empty";
    return false;
  }
  if (!walk(path, create, Trusted::private_folder, out.fd, why)) return false;
  out.path = path;
  return true;
}

bool open_trusted(const std::string& path, Trusted kind, FileDescriptor& out, std::string& why) {
  return walk(path, false, kind, out, why);
}

std::string untrusted_reason(const std::string& path, Trusted kind) {
  FileDescriptor fd;
  std::string why;
  return open_trusted(path, kind, fd, why) ? std::string() : why;
}

bool read_bounded(int fd, std::size_t max_bytes, std::string& text, std::string& why) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    why = fmt::format("cannot stat it: {}", std::strerror(errno));
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    why = fmt::format("it is {}, not a regular file", file_kind(st.st_mode));
    return false;
  }
  if (std::uint64_t(st.st_size) > max_bytes) {
    why = fmt::format("it holds {} bytes; at most {} are read", std::uint64_t(st.st_size), max_bytes);
    return false;
  }
  text.clear();
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      why = fmt::format("cannot read it: {}", std::strerror(errno));
      return false;
    }
    if (n == 0) return true;
    if (text.size() + std::size_t(n) > max_bytes) {
      why = fmt::format("it grew past {} bytes while being read", max_bytes);
      return false;
    }
    text.append(buffer, std::size_t(n));
  }
}

bool remove_at(int dir, const std::string& name, std::string& why) { return remove_tree_at(dir, name, 0, why); }

std::string path_through_descriptor(int dir, const std::string& name) {
  return fmt::format("/proc/self/fd/{}/{}", dir, name);
}

}  // namespace arfuse
