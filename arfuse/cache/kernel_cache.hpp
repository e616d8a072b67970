// KernelCache: KernelSpec -> compiled code, through three layers:
//   memory (this process) -> disk (DiskCache, verified) -> compile (jit backend) + publish.
// Thread-safe; concurrent requests for one missing kernel compile it once. A process whose
// compiler is missing (or with compile disabled) is served from disk by source key alone.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "arfuse/cache.hpp"
#include "arfuse/cache/disk_cache.hpp"
#include "arfuse/error.hpp"
#include "arfuse/jit/compiler.hpp"
#include "arfuse/jit/kernel_spec.hpp"

namespace arfuse::cache {

enum class CodeOrigin { memory, disk, compiled };
ARFUSE_API const char* to_string(CodeOrigin origin);

// The spec an entry's metadata names (the KernelCache writes it), or "" when the metadata is not
// that JSON: an entry is checked by its checksums, not by what its metadata says.
ARFUSE_API std::string spec_of(const CacheEntry& entry);

struct ARFUSE_API CompiledKernel {
  jit::KernelSpec spec;
  jit::BlockShape block{};
  Digest source_digest{};  // with entry.key, names the entry on disk (DiskCache::entry_name)
  CacheEntry entry;
  CodeOrigin origin = CodeOrigin::compiled;
  std::string compile_log;
};

struct ARFUSE_API KernelCacheStats {
  std::uint64_t memory_hits = 0, disk_hits = 0, compiled = 0;
};

class ARFUSE_API KernelCache {
 public:
  explicit KernelCache(CacheOptions options = {});

  // Throws CompileError, UnsupportedTarget, Unavailable (no compiler and nothing on disk).
  CompiledKernel get(const jit::KernelSpec& spec);

  DiskCache* disk() { return disk_.get(); }
  // False with ARFUSE_COMPILE=0 or CacheOptions::allow_compile = false: served from disk only.
  bool compile_allowed() const { return options_.allow_compile; }
  KernelCacheStats stats() const;
  // The compiler for a target, loaded on first use; throws Unavailable or UnsupportedTarget.
  std::shared_ptr<const jit::Compiler> compiler(const Target& target);

 private:
  std::shared_ptr<const CompiledKernel> produce(const jit::Source& source, const Digest& source_digest,
                                                const jit::Compiler& backend);

  CacheOptions options_;
  std::unique_ptr<DiskCache> disk_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_future<std::shared_ptr<const CompiledKernel>>> memory_;
  std::uint64_t memory_hits_ = 0, disk_hits_ = 0, compiled_ = 0;
};

}  // namespace arfuse::cache
