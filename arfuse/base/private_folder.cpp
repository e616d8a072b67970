#include "arfuse/base/private_folder.hpp"

#include <errno.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace arfuse {

bool create_private_folders(const std::string& path, std::string& why) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      why = fmt::format("cannot create {}: {}", prefix, std::strerror(errno));
      return false;
    }
  }
  return true;
}

bool is_private_folder(const std::string& path, std::string& why) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    why = fmt::format("cannot stat {}: {}", path, std::strerror(errno));
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    why = fmt::format("{} is not a folder", path);
    return false;
  }
  if (st.st_uid != ::geteuid()) {
    why = fmt::format("{} is owned by uid {}, not by this user (uid {})", path, st.st_uid, ::geteuid());
    return false;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    why = fmt::format("{} is writable by group or others (mode {:o})", path, st.st_mode & 07777);
    return false;
  }
  return true;
}

}  // namespace arfuse
