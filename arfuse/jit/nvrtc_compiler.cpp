// NVRTC backend: CUDA C++ -> cubin for sm_XX, NVRTC loaded with dlopen.
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <mutex>

#include "arfuse/base/dynamic_library.hpp"
#include "arfuse/base/load_once.hpp"
#include "arfuse/error.hpp"
#include "arfuse/jit/compiler.hpp"
#include "arfuse/jit/library_version.hpp"

namespace arfuse::jit {
namespace {

using nvrtcProgram = struct _nvrtcProgram*;
using nvrtcResult = int;

struct NvrtcApi {
  explicit NvrtcApi(const DynamicLibrary& lib) {
    lib.bind(version, "nvrtcVersion");
    lib.bind(error_string, "nvrtcGetErrorString");
    lib.bind(num_supported_archs, "nvrtcGetNumSupportedArchs");
    lib.bind(supported_archs, "nvrtcGetSupportedArchs");
    lib.bind(create, "nvrtcCreateProgram");
    lib.bind(destroy, "nvrtcDestroyProgram");
    lib.bind(add_name_expression, "nvrtcAddNameExpression");
    lib.bind(compile, "nvrtcCompileProgram");
    lib.bind(lowered_name, "nvrtcGetLoweredName");
    lib.bind(log_size, "nvrtcGetProgramLogSize");
    lib.bind(log, "nvrtcGetProgramLog");
    lib.bind(cubin_size, "nvrtcGetCUBINSize");
    lib.bind(cubin, "nvrtcGetCUBIN");
  }
  nvrtcResult (*version)(int*, int*);
  const char* (*error_string)(nvrtcResult);
  nvrtcResult (*num_supported_archs)(int*);
  nvrtcResult (*supported_archs)(int*);
  nvrtcResult (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
  nvrtcResult (*destroy)(nvrtcProgram*);
  nvrtcResult (*add_name_expression)(nvrtcProgram, const char*);
  nvrtcResult (*compile)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*lowered_name)(nvrtcProgram, const char*, const char**);
  nvrtcResult (*log_size)(nvrtcProgram, size_t*);
  nvrtcResult (*log)(nvrtcProgram, char*);
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t*);
  nvrtcResult (*cubin)(nvrtcProgram, char*);
};

class NvrtcCompiler final : public Compiler {
 public:
  NvrtcCompiler()
      : lib_("NVRTC (the CUDA toolkit's runtime compiler)",
             {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"}),
        api_(lib_) {
    int major = 0, minor = 0;
    check(api_.version(&major, &minor), "nvrtcVersion");
    std::string build = embedded_version(lib_.path(), "Cuda compilation tools, release ");
    identity_ = fmt::format("nvrtc {}.{} ({})", major, minor, build.empty() ? lib_.path() : build);
    int count = 0;
    check(api_.num_supported_archs(&count), "nvrtcGetNumSupportedArchs");
    std::vector<int> archs(static_cast<size_t>(count));
    if (count > 0) check(api_.supported_archs(archs.data()), "nvrtcGetSupportedArchs");
    for (int a : archs) targets_.push_back(fmt::format("sm_{}", a));
  }

  Vendor vendor() const override { return Vendor::nvidia; }
  const std::string& identity() const override { return identity_; }
  std::vector<std::string> supported_targets() const override { return targets_; }

  CompiledCode compile(const Source& source) const override {
    require_target(*this, source.spec.target);
    nvrtcProgram program = nullptr;
    check(api_.create(&program, source.text.c_str(), source.program_name.c_str(), 0, nullptr, nullptr),
          "nvrtcCreateProgram");
    std::unique_ptr<_nvrtcProgram, std::function<void(nvrtcProgram)>> guard(
        program, [this](nvrtcProgram p) { api_.destroy(&p); });
    check(api_.add_name_expression(program, source.name_expression.c_str()), "nvrtcAddNameExpression");
    std::vector<const char*> options;
    for (const auto& o : source.options) options.push_back(o.c_str());
    nvrtcResult result = api_.compile(program, int(options.size()), options.data());
    CompiledCode code;
    code.log = program_log(program);
    if (result != 0) {
      throw CompileError(fmt::format("NVRTC failed to compile {} ({}): {}", source.spec.text(), source.name_expression,
                                     api_.error_string(result)),
                         code.log, source.name_expression, source.options);
    }
    const char* lowered = nullptr;
    check(api_.lowered_name(program, source.name_expression.c_str(), &lowered), "nvrtcGetLoweredName");
    code.lowered_name = lowered;
    size_t size = 0;
    check(api_.cubin_size(program, &size), "nvrtcGetCUBINSize");
    code.payload.resize(size);
    check(api_.cubin(program, reinterpret_cast<char*>(code.payload.data())), "nvrtcGetCUBIN");
    return code;
  }

 private:
  void check(nvrtcResult result, const char* call) const {
    if (result != 0) throw Error(fmt::format("{} failed: {}", call, api_.error_string(result)));
  }
  std::string program_log(nvrtcProgram program) const {
    size_t size = 0;
    if (api_.log_size(program, &size) != 0 || size <= 1) return {};
    std::string log(size, '\0');
    api_.log(program, log.data());
    log.resize(size - 1);
    return log;
  }

  DynamicLibrary lib_;
  NvrtcApi api_;
  std::string identity_;
  std::vector<std::string> targets_;
};

}  // namespace

std::shared_ptr<const Compiler> nvrtc_compiler() {
  static LoadOnce<Compiler> instance;
  return instance.shared([] { return std::make_shared<NvrtcCompiler>(); });
}

}  // namespace arfuse::jit
