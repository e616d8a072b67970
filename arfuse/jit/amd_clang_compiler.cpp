// clang back end: HIP C++ -> AMD code object with any clang that has the AMDGPU back end
// (upstream clang, ROCm's amdclang++, or the clang inside PyPI's ziglang wheel), for the AMD
// targets the loaded hiprtc does not know (gfx942, gfx950, gfx1250 with Debian's hiprtc 5.2).
// A build machine with no ROCm at all can warm AMD caches with it.
//
// The compiler is a program: one run per kernel, in a private temporary folder. No ROCm
// header or device library is used: templates/hip_prelude.cuh supplies the few HIP names the
// templates use, so the identity (part of every cache key) is the exact clang version and the
// prelude's digest. The kernel is instantiated explicitly and its lowered name is found in the
// code object's symbol table by demangling, never guessed.
#include <cxxabi.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

#include "base/sha256.hpp"
#include "base/subprocess.hpp"
#include "base/trusted_folder.hpp"
#include "jit/compiler.hpp"
#include "jit/elf_file.hpp"
#include "jit/templates.hpp"

namespace arfuse::jit {
namespace {

constexpr auto kCompileTimeout = std::chrono::minutes(10);
constexpr const char* kPrelude = "hip_prelude.cuh";

bool is_zig(const std::string& path) {
  const std::string base = path.substr(path.rfind('/') + 1);
  return base == "zig";
}

// The program to run: `zig clang` for the ziglang wheel, the path itself otherwise.
std::vector<std::string> clang_command(const std::string& path) {
  if (is_zig(path)) return {path, "clang"};
  return {path};
}

// A folder of its own for one compile, removed with everything in it.
class ScratchFolder {
 public:
  ScratchFolder() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/arfuse-clang-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      throw Error(fmt::format("cannot create a folder for the AMD compile: {}", pattern));
    path_ = pattern;
  }
  ~ScratchFolder() {
    for (const auto& f : files_) ::unlink((path_ + "/" + f).c_str());
    ::rmdir(path_.c_str());
  }
  std::string file(const std::string& name) {
    files_.insert(name);
    return path_ + "/" + name;
  }
  void write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string path = file(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw Error(fmt::format("cannot write {}", path));
    ::chmod(path.c_str(), mode);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::set<std::string> files_;
};

std::vector<std::uint8_t> read_binary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string demangle(const std::string& symbol) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status),
                                              std::free);
  return status == 0 && text ? std::string(text.get()) : std::string();
}

// The kernel's symbol: a function with a kernel descriptor (name.kd) whose demangled name is
// the name expression. Empty when there is none.
std::string kernel_symbol(const std::vector<std::uint8_t>& code_object, const std::string& name_expression) {
  const auto names = elf_symbol_names(code_object);
  const std::set<std::string> all(names.begin(), names.end());
  for (const auto& name : all) {
    if (!all.count(name + ".kd")) continue;
    const std::string plain = demangle(name);
    if (plain.rfind("void " + name_expression + "(", 0) == 0) return name;
  }
  return {};
}

class AmdClangCompiler final : public Compiler {
 public:
  explicit AmdClangCompiler(std::string path) : path_(std::move(path)), command_(clang_command(path_)) {
    auto args = command_;
    args.insert(args.end(), {"--target=amdgcn-amd-amdhsa", "--print-supported-cpus"});
    const auto listed = run_process(args, std::chrono::seconds(60));
    if (listed.exit_code != 0) {
      throw Unavailable(fmt::format("{} cannot list AMD targets (is it a clang with the AMDGPU back end?): {}", path_,
                                    listed.output.substr(0, 500)));
    }
    std::istringstream lines(listed.output);
    std::string line, version;
    while (std::getline(lines, line)) {
      const size_t at = line.find("clang version ");
      if (at != std::string::npos && version.empty()) version = line.substr(at + 14);
      const size_t gfx = line.find_first_not_of(" \t");
      if (gfx != std::string::npos && line.compare(gfx, 3, "gfx") == 0) targets_.push_back(line.substr(gfx));
    }
    if (targets_.empty()) throw Unavailable(fmt::format("{} knows no AMD target: it has no AMDGPU back end", path_));
    const std::string prelude = load_template(kPrelude).text;
    prelude_ = prelude;
    // The whole version line: a vendor's build (ROCm's "roc-6.0.0 ...") differs in its tail.
    identity_ = fmt::format("clang {}{}, prelude {}", version, is_zig(path_) ? " (zig " + zig_version() + ")" : "",
                            to_hex(sha256(prelude.data(), prelude.size())).substr(0, 16));
  }

  Vendor vendor() const override { return Vendor::amd; }
  const std::string& identity() const override { return identity_; }

  std::string zig_version() const {
    const auto r = run_process({path_, "version"}, std::chrono::seconds(60));
    std::string v = r.output.substr(0, r.output.find('\n'));
    return r.exit_code == 0 && !v.empty() ? v : "version unknown";
  }
  std::vector<std::string> supported_targets() const override { return targets_; }

  CompiledCode compile(const Source& source) const override {
    ScratchFolder folder;
    CompiledCode code;
    code.log = run_clang(source, folder, {}, "kernel.co");
    code.payload = read_binary(folder.file("kernel.co"));
    code.lowered_name = kernel_symbol(code.payload, source.name_expression);
    if (code.lowered_name.empty()) {
      throw CompileError(fmt::format("{} compiled {}, but its code object has no kernel named {}", identity_,
                                     source.spec.text(), source.name_expression),
                         code.log, source.name_expression, source.options);
    }
    return code;
  }

  // The same compile, stopped at the assembly: the machine code as text.
  std::string assembly(const Source& source) const {
    ScratchFolder folder;
    run_clang(source, folder, {"-S"}, "kernel.s");
    std::ifstream in(folder.file("kernel.s"));
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  // Compiles `source` in `folder` into `output`; returns the compiler's messages.
  std::string run_clang(const Source& source, ScratchFolder& folder, const std::vector<std::string>& extra,
                        const std::string& output) const {
    require_target(*this, source.spec.target);
    folder.write("prelude.h", prelude_);
    // An explicit instantiation: the kernel exists in the code object under its own name.
    folder.write("kernel.hip", fmt::format("{}\ntemplate __global__ decltype({}) {};\n", source.text,
                                           source.name_expression, source.name_expression));
    auto args = command_;
    args.insert(args.end(), {"-x", "hip", "--cuda-device-only", "-nogpulib", "-nogpuinc", "--no-gpu-bundle-output",
                             "-mcode-object-version=5", "-include", folder.file("prelude.h")});
    // The wavefront size is explicit: gfx10 and later could build either.
    if (source.spec.target.warp_size() == 32) args.push_back("-mno-wavefrontsize64");
    args.insert(args.end(), source.options.begin(), source.options.end());
    args.insert(args.end(), extra.begin(), extra.end());
    if (is_zig(path_)) {
      // clang links AMD code objects with `lld -flavor gnu`; the wheel's linker is `zig ld.lld`.
      folder.write("lld", fmt::format("#!/bin/sh\n[ \"$1\" = -flavor ] && shift 2\nexec '{}' ld.lld \"$@\"\n", path_),
                   0700);
      args.insert(args.end(), {"-B", folder.path() + "/"});
    }
    args.insert(args.end(), {"-o", folder.file(output), folder.file("kernel.hip")});
    const ProcessResult result = run_process(args, kCompileTimeout);
    if (result.exit_code != 0) {
      throw CompileError(fmt::format("{} failed to compile {} ({}){}", identity_, source.spec.text(),
                                     source.name_expression, result.timed_out ? ": timed out" : ""),
                         result.output, source.name_expression, source.options);
    }
    return result.output;
  }

  std::string path_;
  std::vector<std::string> command_;
  std::string prelude_;
  std::string identity_;
  std::vector<std::string> targets_;
};

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

// ARFUSE_AMD_CLANG, else the clang scripts/setup-deps.sh installs (the build records where).
std::string clang_path() {
  // Checked there: an executable file that only root and this user can change (trusted_folder.hpp).
  if (const auto p = settings::text("ARFUSE_AMD_CLANG")) return *p;
#ifdef ARFUSE_DEFAULT_AMD_CLANG
  if (executable(ARFUSE_DEFAULT_AMD_CLANG)) {
    const std::string why = untrusted_reason(ARFUSE_DEFAULT_AMD_CLANG, Trusted::program);
    if (!why.empty()) throw Unavailable(fmt::format("the AMD clang {} is not run: {}", ARFUSE_DEFAULT_AMD_CLANG, why));
    return ARFUSE_DEFAULT_AMD_CLANG;
  }
#endif
  throw Unavailable(
      "no clang with the AMDGPU back end: set ARFUSE_AMD_CLANG to one (upstream clang, ROCm's amdclang++, or the zig "
      "binary of PyPI's ziglang wheel), or run scripts/setup-deps.sh, which installs the wheel in .deps/");
}

}  // namespace

std::string amd_clang_assembly(const Source& source) {
  return static_cast<const AmdClangCompiler&>(*amd_clang_compiler()).assembly(source);
}

// Not a LoadOnce (base/load_once.hpp): the compiler is re-made when ARFUSE_AMD_CLANG names
// another clang, so the path is read on every call.
std::shared_ptr<const Compiler> amd_clang_compiler() {
  static std::mutex mutex;
  static std::shared_ptr<const Compiler> instance;
  static std::string loaded_from;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string path = clang_path();
  if (!instance || loaded_from != path) instance = std::make_shared<AmdClangCompiler>(path), loaded_from = path;
  return instance;
}

}  // namespace arfuse::jit
