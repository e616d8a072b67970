// NVRTC and hiprtc are one API under two prefixes ("nvrtc", "hiprtc"), with the compiled code
// named CUBIN by one and Code by the other: one table binds either library, one driver compiles
// a Source with it. The backends (nvrtc_compiler.cpp, hiprtc_compiler.cpp) add what differs:
// which library, the identity, the targets, hiprtc's lock.
#pragma once

#include <cstddef>
#include <string>

#include "base/dynamic_library.hpp"
#include "jit/compiler.hpp"

namespace arfuse::jit {

struct RuntimeCompilerApi {
  using Program = struct RuntimeProgram*;
  // prefix: "nvrtc" or "hiprtc"; code: "CUBIN" or "Code" (nvrtcGetCUBIN, hiprtcGetCode).
  RuntimeCompilerApi(const DynamicLibrary& library, std::string prefix, const std::string& code_word);

  // Throws Error naming the call ("nvrtcCreateProgram failed: ...") for a nonzero result.
  void check(int result, const char* call) const;

  std::string prefix;
  std::string code_name;
  int (*version)(int*, int*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  int (*add_name_expression)(Program, const char*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*lowered_name)(Program, const char*, const char**) = nullptr;
  int (*log_size)(Program, std::size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*code_size)(Program, std::size_t*) = nullptr;
  int (*code)(Program, char*) = nullptr;
};

// Compiles `source` with `api`; `compiler` names it in a CompileError ("NVRTC", "hiprtc").
CompiledCode compile_with(const RuntimeCompilerApi& api, const char* compiler, const Source& source);

}  // namespace arfuse::jit
