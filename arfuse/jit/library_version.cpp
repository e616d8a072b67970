#include "jit/library_version.hpp"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>

namespace arfuse::jit {

std::string embedded_version(const std::string& library_path, const std::string& marker) {
  int fd = ::open(library_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  std::string version;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    void* map = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
      const char* data = static_cast<const char*>(map);
      const void* hit = memmem(data, size_t(st.st_size), marker.data(), marker.size());
      if (hit != nullptr) {
        const char* p = static_cast<const char*>(hit) + marker.size();
        const char* end = data + st.st_size;
        while (p < end && (std::isalnum(static_cast<unsigned char>(*p)) || *p == '.' || *p == '_' || *p == '-' ||
                           *p == ',' || *p == ' ')) {
          version += *p++;
        }
      }
      munmap(map, size_t(st.st_size));
    }
  }
  ::close(fd);
  return version;
}

}  // namespace arfuse::jit
