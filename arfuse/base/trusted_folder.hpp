// One rule for everything arfuse loads, reads as code or runs: the kernel cache (a stranger's
// entry would be loaded as code), the rendezvous socket's folder (a stranger's socket would
// receive the IPC handles), template folders, tuning tables, compilers and libraries named by a
// path. A path is resolved once, component by component from `/`, each component opened without
// following links and checked on its descriptor; from then on the file is reached through that
// descriptor (a folder's files relative to it), so renaming it or a parent afterwards changes
// nothing this process reads or writes.
//
// The checks are OpenSSH's StrictModes rules for a path: every folder above is owned by root or
// this user and writable by nobody else (a sticky folder such as /tmp may be writable by all,
// since nobody can rename what another user put there, and what lies in it must itself be root's
// or this user's); a link on the way must be owned by root or this user and sit in such a folder;
// the thing named is root's or this user's and writable by neither group nor others (a folder
// arfuse writes into must be this user's own, 0700 when created here).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace arfuse {

// Owns an open file descriptor (-1: none); closes it on every path out.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() { reset(); }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// A checked folder, held open. `path` names it in messages only; nothing is opened by it again.
struct TrustedFolder {
  FileDescriptor fd;
  std::string path;
};

// Resolves and checks `path` as above, creating missing folders (0700) when `create`. False with
// `why` naming the component at fault and the rule it breaks.
bool open_trusted_folder(const std::string& path, bool create, TrustedFolder& out, std::string& why);

// What a checked path must name.
enum class Trusted {
  private_folder,  // this user's folder, writable by nobody else: a folder arfuse writes into
  folder,          // a folder of root or this user that nobody else can write: one arfuse reads from
  file,            // a regular file of root or this user that nobody else can write, opened to read
  program,         // the same, executable; opened as a path only (O_PATH: no read permission needed)
};

// Resolves and checks `path` as above (nothing is created) and opens what it names; false with
// `why` naming the component at fault and the rule it breaks.
bool open_trusted(const std::string& path, Trusted kind, FileDescriptor& out, std::string& why);

// "" when `path` passes open_trusted's checks for `kind`, else why not.
std::string untrusted_reason(const std::string& path, Trusted kind);

// Reads the whole regular file open at `fd` when it holds at most `max_bytes`; false with `why`
// (not a regular file, larger than the bound, a read error) otherwise. Never reads past the bound,
// so a device or a growing file cannot exhaust memory.
bool read_bounded(int fd, std::size_t max_bytes, std::string& text, std::string& why);

// Removes the entry `name` of folder `dir`: a file, link or socket, or a folder with everything in
// it (links inside are removed, never followed; nesting deeper than 64 is left and reported).
// Missing is success. False with `why` when something stays.
bool remove_at(int dir, const std::string& name, std::string& why);

// "a folder", "a symbolic link", "a FIFO", ... for what a mode says a file is.
std::string file_kind(mode_t mode);

// A path through which the socket calls (bind, connect, which take no folder descriptor) reach
// `name` inside the open folder `dir`: /proc/self/fd/DIR/NAME, resolved by the kernel through the
// descriptor, not through the folder's path.
std::string path_through_descriptor(int dir, const std::string& name);

}  // namespace arfuse
