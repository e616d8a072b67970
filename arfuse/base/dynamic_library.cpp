#include "base/dynamic_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <glob.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>

#include <algorithm>

#include "base/system.hpp"
#include "base/trusted_folder.hpp"

namespace arfuse {
namespace {

std::string loaded_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr ||
      map->l_name[0] == '\0') {
    return fallback;
  }
  char resolved[PATH_MAX];
  return realpath(map->l_name, resolved) != nullptr ? std::string(resolved) : map->l_name;
}

}  // namespace

DynamicLibrary::DynamicLibrary(std::string what, const std::vector<std::string>& candidates) : what_(std::move(what)) {
  std::string errors;
  for (const auto& name : candidates) {
    // A name with a slash is a path: checked before its constructors can run. It is opened by
    // that path, not through a descriptor, since vendor libraries find their companions relative
    // to where they were loaded from ($ORIGIN); the check leaves nobody but root and this user
    // able to swap it. Bare names are found by the system's loader in the system's folders.
    if (name.find('/') != std::string::npos) {
      const std::string why = untrusted_reason(name, Trusted::file);
      if (!why.empty()) {
        const bool missing = why.rfind("cannot open", 0) == 0;
        errors += fmt::format("\n  {}: {}{}", name, missing ? "" : "refused: ", why);
        continue;
      }
    }
    handle_ = system_calls().dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      path_ = loaded_path(handle_, name);
      return;
    }
    const char* why = dlerror();
    errors += fmt::format("\n  {}: {}", name, why != nullptr ? why : "not found");
  }
  throw Unavailable(fmt::format("{} is not available: none of these libraries could be loaded{}", what_, errors));
}

DynamicLibrary::~DynamicLibrary() {
  // Deliberately not dlclose()d: vendor runtimes register exit handlers that crash when
  // their library is unloaded before process exit.
}

void* DynamicLibrary::symbol(const char* name) const {
  void* fn = system_calls().dlsym(handle_, name);
  if (fn == nullptr) {
    throw Unavailable(
        fmt::format("{} ({}) does not export {}: the library is too old or not "
                    "the one expected",
                    what_, path_, name));
  }
  return fn;
}

void* DynamicLibrary::symbol_if_present(const char* name) const { return system_calls().dlsym(handle_, name); }

// The library names as the loader finds them, then the same names in every ROCm install
// (/opt/rocm/lib, /opt/rocm-7.0.2/lib, ...), newest first: ROCm 6 and 7 are often not on the
// loader's path.
std::vector<std::string> with_rocm_folders(const std::vector<std::string>& names) {
  std::vector<std::string> candidates = names;
  glob_t found{};
  if (::glob("/opt/rocm*/lib", 0, nullptr, &found) == 0) {
    std::vector<std::string> folders(found.gl_pathv, found.gl_pathv + found.gl_pathc);
    std::sort(folders.rbegin(), folders.rend());
    for (const auto& folder : folders) {
      for (const auto& name : names) candidates.push_back(folder + "/" + name);
    }
  }
  ::globfree(&found);
  return candidates;
}

}  // namespace arfuse
