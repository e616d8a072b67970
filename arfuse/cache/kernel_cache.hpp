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
#include "arfuse/error.hpp"

#include "cache/cache_key.hpp"
#include "cache/disk_cache.hpp"
#include "jit/compiler.hpp"
#include "jit/kernel_spec.hpp"

namespace arfuse::cache {

enum class CodeOrigin { memory, disk, compiled };
const char* to_string(CodeOrigin origin);

// The spec an entry's metadata names (the KernelCache writes it), or "" when the metadata is not
// that JSON: an entry is checked by its checksums, not by what its metadata says.
std::string spec_of(const CacheEntry& entry);

struct CompiledKernel {
  jit::KernelSpec spec;
  jit::BlockShape block{};
  KernelKey key;  // what names it in memory and on disk (cache_key.hpp)
  CacheEntry entry;
  CodeOrigin origin = CodeOrigin::compiled;
  std::string compile_log;
};

struct KernelCacheStats {
  std::uint64_t memory_hits = 0, disk_hits = 0, compiled = 0;
};

class KernelCache {
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
  // The kernel from disk, or compiled by `backend` and stored; without a backend only from disk,
  // else Unavailable saying why there is none (`unavailable`).
  std::shared_ptr<const CompiledKernel> produce(const jit::Source& source, const KernelKey& key,
                                                const jit::Compiler* backend, const std::string& unavailable);

  CacheOptions options_;
  std::unique_ptr<DiskCache> disk_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_future<std::shared_ptr<const CompiledKernel>>> memory_;
  std::uint64_t memory_hits_ = 0, disk_hits_ = 0, compiled_ = 0;
};

}  // namespace arfuse::cache
