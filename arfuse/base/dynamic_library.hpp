// A library loaded at run time (dlopen), so one arfuse binary runs on machines that lack
// NVRTC, hiprtc, the CUDA driver or HIP, and says clearly which one is missing.
#pragma once

#include <string>
#include <vector>

#include "arfuse/error.hpp"

namespace arfuse {

class DynamicLibrary {
 public:
  // Opens the first of `candidates` that loads; throws Unavailable naming all of them.
  DynamicLibrary(std::string what, const std::vector<std::string>& candidates);
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // Throws Unavailable naming the symbol and the library when it is not exported.
  void* symbol(const char* name) const;
  template <typename Fn>
  void bind(Fn*& fn, const char* name) const {
    fn = reinterpret_cast<Fn*>(symbol(name));
  }
  // For entry points newer drivers add: nullptr when the library does not export `name`.
  template <typename Fn>
  void bind_if_present(Fn*& fn, const char* name) const {
    fn = reinterpret_cast<Fn*>(symbol_if_present(name));
  }
  void* symbol_if_present(const char* name) const;
  // The file that was loaded, with symbolic links resolved.
  const std::string& path() const { return path_; }

 private:
  std::string what_;
  std::string path_;
  void* handle_ = nullptr;
};

// The library names as the loader finds them, then the same names in every ROCm install
// (/opt/rocm/lib, /opt/rocm-7.0.2/lib, ...), newest first: ROCm 6 and 7 are often not on the
// loader's path.
std::vector<std::string> with_rocm_folders(const std::vector<std::string>& names);

}  // namespace arfuse
