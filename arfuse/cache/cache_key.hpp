// The content address of a compiled kernel. Two digests:
//   source key: cache format version, the name and bytes of every template the program
//               includes, the program text, the name expression, the ordered options, target;
//   full key:   the source key and the compiler identity.
// The full key is what the contract calls the key; the source key groups the entries of
// different compilers for one program, so a process with no compiler (driver only) can still
// find one. Nothing else (paths, host name, time) enters either.
#pragma once

#include <string>

#include "arfuse/base/sha256.hpp"
#include "arfuse/error.hpp"
#include "arfuse/jit/render.hpp"

namespace arfuse::cache {

ARFUSE_API Digest source_key(const jit::Source& source);
ARFUSE_API Digest full_key(const Digest& source_key, const std::string& compiler_identity);

}  // namespace arfuse::cache
