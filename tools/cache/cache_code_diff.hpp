// arfuse-cache code-diff: whether two caches hold the same machine code for each spec. A change to
// the templates that should not change any kernel (a refactor, or one whose effect is confined to
// some modes) is shown to be exactly that, spec by spec, without a GPU: NVIDIA cubins and AMD code
// objects are both ELF files, and their code, shared-memory and constant sections say what runs.
#pragma once

#include "cache/disk_cache.hpp"

namespace arfuse::tools {

// Prints the specs whose code differs and those only one cache holds, then a count of each.
// Returns 0 when both hold the same specs with the same code, else 1.
int cmd_code_diff(cache::DiskCache& mine, cache::DiskCache& other);

}  // namespace arfuse::tools
