// NVRTC backend: CUDA C++ -> cubin for sm_XX, NVRTC loaded with dlopen.
#include <fmt/format.h>

#include <memory>

#include "arfuse/error.hpp"

#include "base/dynamic_library.hpp"
#include "base/load_once.hpp"
#include "jit/compiler.hpp"
#include "jit/library_version.hpp"
#include "jit/runtime_compiler.hpp"

namespace arfuse::jit {
namespace {

class NvrtcCompiler final : public Compiler {
 public:
  NvrtcCompiler()
      : lib_("NVRTC (the CUDA toolkit's runtime compiler)",
             {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"}),
        api_(lib_, "nvrtc", "CUBIN") {
    lib_.bind(num_supported_archs_, "nvrtcGetNumSupportedArchs");
    lib_.bind(supported_archs_, "nvrtcGetSupportedArchs");
    int major = 0, minor = 0;
    api_.check(api_.version(&major, &minor), "Version");
    std::string build = embedded_version(lib_.path(), "Cuda compilation tools, release ");
    identity_ = fmt::format("nvrtc {}.{} ({})", major, minor, build.empty() ? lib_.path() : build);
    int count = 0;
    api_.check(num_supported_archs_(&count), "GetNumSupportedArchs");
    std::vector<int> archs(static_cast<size_t>(count));
    if (count > 0) api_.check(supported_archs_(archs.data()), "GetSupportedArchs");
    for (int a : archs) targets_.push_back(fmt::format("sm_{}", a));
  }

  Vendor vendor() const override { return Vendor::nvidia; }
  const std::string& identity() const override { return identity_; }
  std::vector<std::string> supported_targets() const override { return targets_; }

  CompiledCode compile(const Source& source) const override {
    require_target(*this, source.spec.target);
    return compile_with(api_, "NVRTC", source);
  }

 private:
  DynamicLibrary lib_;
  RuntimeCompilerApi api_;
  int (*num_supported_archs_)(int*) = nullptr;
  int (*supported_archs_)(int*) = nullptr;
  std::string identity_;
  std::vector<std::string> targets_;
};

}  // namespace

std::shared_ptr<const Compiler> nvrtc_compiler() {
  static LoadOnce<Compiler> instance;
  return instance.shared([] { return std::make_shared<NvrtcCompiler>(); });
}

}  // namespace arfuse::jit
