// hiprtc backend: HIP C++ -> AMD code object for gfxNNN, hiprtc (in libamdhip64 up to ROCm
// 5.x, libhiprtc from 6.0) and the code-object manager loaded with dlopen.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "arfuse/error.hpp"

#include "base/dynamic_library.hpp"
#include "base/load_once.hpp"
#include "jit/compiler.hpp"
#include "jit/runtime_compiler.hpp"

namespace arfuse::jit {
namespace {

// The ISAs the local code-object manager knows. hiprtc 5.2 aborts the whole process when
// asked for an ISA outside this list (gfx942, gfx1100), so the list is checked first.
std::vector<std::string> comgr_isas(const DynamicLibrary& comgr) {
  int (*count_fn)(size_t*) = nullptr;
  int (*name_fn)(size_t, const char**) = nullptr;
  comgr.bind(count_fn, "amd_comgr_get_isa_count");
  comgr.bind(name_fn, "amd_comgr_get_isa_name");
  size_t count = 0;
  std::vector<std::string> isas;
  if (count_fn(&count) != 0) return isas;
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    if (name_fn(i, &name) != 0 || name == nullptr) continue;
    std::string full = name;  // "amdgcn-amd-amdhsa--gfx90a", maybe with ":xnack-" features
    size_t dash = full.rfind("--");
    std::string isa = dash == std::string::npos ? full : full.substr(dash + 2);
    isa = isa.substr(0, isa.find(':'));
    if (isa.rfind("gfx", 0) == 0) isas.push_back(isa);
  }
  return isas;
}

std::string file_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

class HiprtcCompiler final : public Compiler {
 public:
  HiprtcCompiler()
      : lib_("hiprtc (ROCm's runtime compiler)", with_rocm_folders({"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so",
                                                                    "libamdhip64.so.5", "libamdhip64.so"})),
        comgr_("the AMD code-object manager (comgr)",
               with_rocm_folders({"libamd_comgr.so.3", "libamd_comgr.so.2", "libamd_comgr.so"})),
        api_(lib_, "hiprtc", "Code") {
    int major = 0, minor = 0;
    api_.check(api_.version(&major, &minor), "Version");
    identity_ = fmt::format("hiprtc {}.{} ({}, {})", major, minor, file_name(lib_.path()), file_name(comgr_.path()));
    targets_ = comgr_isas(comgr_);
  }

  Vendor vendor() const override { return Vendor::amd; }
  const std::string& identity() const override { return identity_; }
  std::vector<std::string> supported_targets() const override { return targets_; }

  CompiledCode compile(const Source& source) const override {
    require_target(*this, source.spec.target);
    // hiprtc 5.x keeps global compiler state; concurrent compiles are not safe there.
    std::lock_guard<std::mutex> lock(mutex_);
    return compile_with(api_, "hiprtc", source);
  }

 private:
  DynamicLibrary lib_;
  DynamicLibrary comgr_;
  RuntimeCompilerApi api_;
  std::string identity_;
  std::vector<std::string> targets_;
  mutable std::mutex mutex_;
};

}  // namespace

std::shared_ptr<const Compiler> hiprtc_compiler() {
  static LoadOnce<Compiler> instance;
  return instance.shared([] { return std::make_shared<HiprtcCompiler>(); });
}

}  // namespace arfuse::jit
