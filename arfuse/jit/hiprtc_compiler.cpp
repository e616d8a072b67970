// hiprtc backend: HIP C++ -> AMD code object for gfxNNN, hiprtc (in libamdhip64 up to ROCm
// 5.x, libhiprtc from 6.0) and the code-object manager loaded with dlopen.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>

#include "arfuse/base/dynamic_library.hpp"
#include "arfuse/base/load_once.hpp"
#include "arfuse/error.hpp"
#include "arfuse/jit/compiler.hpp"

namespace arfuse::jit {
namespace {

using hiprtcProgram = struct _hiprtcProgram*;
using hiprtcResult = int;

struct HiprtcApi {
  explicit HiprtcApi(const DynamicLibrary& lib) {
    lib.bind(version, "hiprtcVersion");
    lib.bind(error_string, "hiprtcGetErrorString");
    lib.bind(create, "hiprtcCreateProgram");
    lib.bind(destroy, "hiprtcDestroyProgram");
    lib.bind(add_name_expression, "hiprtcAddNameExpression");
    lib.bind(compile, "hiprtcCompileProgram");
    lib.bind(lowered_name, "hiprtcGetLoweredName");
    lib.bind(log_size, "hiprtcGetProgramLogSize");
    lib.bind(log, "hiprtcGetProgramLog");
    lib.bind(code_size, "hiprtcGetCodeSize");
    lib.bind(code, "hiprtcGetCode");
  }
  hiprtcResult (*version)(int*, int*);
  const char* (*error_string)(hiprtcResult);
  hiprtcResult (*create)(hiprtcProgram*, const char*, const char*, int, const char**, const char**);
  hiprtcResult (*destroy)(hiprtcProgram*);
  hiprtcResult (*add_name_expression)(hiprtcProgram, const char*);
  hiprtcResult (*compile)(hiprtcProgram, int, const char**);
  hiprtcResult (*lowered_name)(hiprtcProgram, const char*, const char**);
  hiprtcResult (*log_size)(hiprtcProgram, size_t*);
  hiprtcResult (*log)(hiprtcProgram, char*);
  hiprtcResult (*code_size)(hiprtcProgram, size_t*);
  hiprtcResult (*code)(hiprtcProgram, char*);
};

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
        api_(lib_) {
    int major = 0, minor = 0;
    check(api_.version(&major, &minor), "hiprtcVersion");
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
    hiprtcProgram program = nullptr;
    check(api_.create(&program, source.text.c_str(), source.program_name.c_str(), 0, nullptr, nullptr),
          "hiprtcCreateProgram");
    std::unique_ptr<_hiprtcProgram, std::function<void(hiprtcProgram)>> guard(
        program, [this](hiprtcProgram p) { api_.destroy(&p); });
    check(api_.add_name_expression(program, source.name_expression.c_str()), "hiprtcAddNameExpression");
    std::vector<const char*> options;
    for (const auto& o : source.options) options.push_back(o.c_str());
    hiprtcResult result = api_.compile(program, int(options.size()), options.data());
    CompiledCode code;
    code.log = program_log(program);
    if (result != 0) {
      throw CompileError(fmt::format("hiprtc failed to compile {} ({}): {}", source.spec.text(), source.name_expression,
                                     api_.error_string(result)),
                         code.log, source.name_expression, source.options);
    }
    const char* lowered = nullptr;
    check(api_.lowered_name(program, source.name_expression.c_str(), &lowered), "hiprtcGetLoweredName");
    code.lowered_name = lowered;
    size_t size = 0;
    check(api_.code_size(program, &size), "hiprtcGetCodeSize");
    code.payload.resize(size);
    check(api_.code(program, reinterpret_cast<char*>(code.payload.data())), "hiprtcGetCode");
    return code;
  }

 private:
  void check(hiprtcResult result, const char* call) const {
    if (result != 0) throw Error(fmt::format("{} failed: {}", call, api_.error_string(result)));
  }
  std::string program_log(hiprtcProgram program) const {
    size_t size = 0;
    if (api_.log_size(program, &size) != 0 || size <= 1) return {};
    std::string log(size, '\0');
    api_.log(program, log.data());
    log.resize(log.find('\0') == std::string::npos ? size : log.find('\0'));
    return log;
  }

  DynamicLibrary lib_;
  DynamicLibrary comgr_;
  HiprtcApi api_;
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
