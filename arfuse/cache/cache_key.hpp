// Everything that names one compiled kernel, computed here and nowhere else:
//   source key: cache format version, the name and bytes of every template the program
//               includes, the program text, the name expression, the ordered options, target;
//   full key:   the source key and the compiler identity;
//   file:       <source key>-<full key>.arfuse (the first 16 bytes of each, in hex);
//   metadata:   the entry's JSON description (spec, compiler, name expression, options, and each
//               template's digest), stored in the entry for the tools.
// The full key is what the contract calls the key; the source key groups the entries of
// different compilers for one program, so a process with no compiler (driver only) can still
// find one. Nothing else (paths, host name, time) enters any of them.
#pragma once

#include <string>

#include "arfuse/error.hpp"

#include "base/sha256.hpp"
#include "jit/render.hpp"

namespace arfuse::cache {

// What every entry's file name ends with.
inline constexpr const char* kEntrySuffix = ".arfuse";

struct KernelKey {
  Digest source{};
  Digest full{};              // with a compiler only
  bool has_compiler = false;  // false: any compiler's entry of this source will do (get_any)
  std::string memory;         // the in-memory layer's key: the full key, or "any:" and the source key
  std::string file;           // the entry's file name (with a compiler)
  std::string file_prefix;    // "<source key>-": the names of every compiler's entry of this source
  std::string metadata;       // the entry's description (with a compiler)
};

// The key of `source` compiled by the compiler of `compiler_identity` (nullptr: none at hand).
KernelKey kernel_key(const jit::Source& source, const std::string* compiler_identity);

// An entry's file name, and the prefix every entry of one source key shares.
std::string entry_file_name(const Digest& source, const Digest& full);
std::string entry_file_prefix(const Digest& source);

}  // namespace arfuse::cache
