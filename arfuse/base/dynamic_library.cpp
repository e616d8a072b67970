#include "arfuse/base/dynamic_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>

#include "arfuse/base/system.hpp"

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

}  // namespace arfuse
