// Folders that must hold only what this user put there: the kernel cache (a stranger's entry
// would be loaded as code) and the rendezvous socket's folder (a stranger's socket would receive
// the IPC handles). A folder is resolved once, component by component from `/`, each component
// opened without following links and checked on its descriptor; from then on every file in it is
// reached relative to that descriptor, so renaming the folder or a parent afterwards changes
// nothing this process reads or writes.
//
// The checks are OpenSSH's StrictModes rules for a path: every folder above is owned by root or
// this user and writable by nobody else (a sticky folder such as /tmp may be writable by all,
// since nobody can rename what another user put there); a link on the way must be owned by root
// or this user and sit in such a folder; the folder itself is this user's, 0700 when created here,
// and writable by neither group nor others.
#pragma once

#include <sys/types.h>

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
