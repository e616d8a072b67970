// Compiler: Source -> CompiledCode for one vendor. Backends load their library at run time
// (dlopen), so constructing one on a machine without it throws arfuse::Unavailable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "arfuse/error.hpp"
#include "arfuse/target.hpp"

#include "jit/render.hpp"

namespace arfuse::jit {

struct CompiledCode {
  std::vector<std::uint8_t> payload;  // cubin (NVIDIA) or AMD code object
  std::string lowered_name;           // the mangled kernel name to look up in the module
  std::string log;                    // compiler messages, kept even on success
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual Vendor vendor() const = 0;
  // Backend and exact version, precise enough to tell patch releases apart; part of the
  // cache key. e.g. "nvrtc 13.0 V13.0.88", "hiprtc 5.2 libamdhip64.so.5.2.21153".
  virtual const std::string& identity() const = 0;
  // Targets this compiler can build for, as Target names.
  virtual std::vector<std::string> supported_targets() const = 0;
  bool supports(const Target& target) const;
  // Throws UnsupportedTarget before compiling for a target it cannot build, CompileError
  // (with log, name expression and options) when the compile fails.
  virtual CompiledCode compile(const Source& source) const = 0;
};

// The backend for a target: NVRTC for NVIDIA; for AMD, hiprtc where it knows the target, else
// the clang back end. Loaded once per process. Throws Unavailable when no backend can be
// loaded, UnsupportedTarget when the ones that load cannot build the target.
std::shared_ptr<const Compiler> compiler_for(const Target& target);
std::shared_ptr<const Compiler> nvrtc_compiler();
std::shared_ptr<const Compiler> hiprtc_compiler();
// Any clang with the AMDGPU back end: ARFUSE_AMD_CLANG, else the one scripts/setup-deps.sh
// installs in .deps/ (jit/amd_clang_compiler.cpp).
std::shared_ptr<const Compiler> amd_clang_compiler();
// The machine code the clang back end makes for `source`, as assembly text (tests, reports).
std::string amd_clang_assembly(const Source& source);

// Throws UnsupportedTarget naming the target, the compiler and the targets it does support.
void require_target(const Compiler& compiler, const Target& target);

}  // namespace arfuse::jit
