#include "cache/kernel_cache.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

#include "base/bounded_json.hpp"

namespace arfuse::cache {
namespace {

bool compile_disabled_by_env() { return !settings::on_off("ARFUSE_COMPILE", true); }

}  // namespace

std::string spec_of(const CacheEntry& entry) {
  nlohmann::json meta;
  std::string why;
  if (!parse_json(entry.metadata, meta, why) || !meta.is_object() || !meta.contains("spec") ||
      !meta["spec"].is_string())
    return "";
  return meta["spec"].get<std::string>();
}

const char* to_string(CodeOrigin o) {
  return o == CodeOrigin::memory ? "memory" : o == CodeOrigin::disk ? "disk" : "compiled";
}

KernelCache::KernelCache(CacheOptions options) : options_(std::move(options)) {
  if (compile_disabled_by_env()) options_.allow_compile = false;
  if (options_.use_disk) disk_ = std::make_unique<DiskCache>(options_.dir, options_.max_bytes);
}

std::shared_ptr<const jit::Compiler> KernelCache::compiler(const Target& target) {
  if (!options_.allow_compile) {
    throw Unavailable("compiling is disabled (ARFUSE_COMPILE=0 or CacheOptions::allow_compile)");
  }
  return jit::compiler_for(target);
}

// The walk of a request: render, the compiler (once), the key (cache_key.cpp, every name at
// once), the memory layer here, then produce: the disk, the compiler, the disk again.
CompiledKernel KernelCache::get(const jit::KernelSpec& spec) {
  const jit::Source source = jit::render(spec);
  std::shared_ptr<const jit::Compiler> backend;
  std::string unavailable = "compiling is disabled (ARFUSE_COMPILE=0 or CacheOptions::allow_compile)";
  if (options_.allow_compile) {
    try {
      backend = jit::compiler_for(source.spec.target);  // UnsupportedTarget passes: a compiler refuses the target
    } catch (const Unavailable& e) {
      unavailable = e.what();
    }
  }
  const KernelKey key = kernel_key(source, backend ? &backend->identity() : nullptr);

  std::shared_future<std::shared_ptr<const CompiledKernel>> future;
  std::promise<std::shared_ptr<const CompiledKernel>> promise;
  bool producer = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = memory_.find(key.memory);
    if (it != memory_.end()) {
      future = it->second;
      ++memory_hits_;
    } else {
      future = promise.get_future().share();
      memory_.emplace(key.memory, future);
      producer = true;
    }
  }
  if (!producer) {
    CompiledKernel hit = *future.get();  // rethrows the producer's error
    hit.origin = CodeOrigin::memory;
    return hit;
  }
  try {
    std::shared_ptr<const CompiledKernel> result = produce(source, key, backend.get(), unavailable);
    promise.set_value(result);
    return *result;
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(mutex_);
    memory_.erase(key.memory);  // a later call may try again (e.g. after a disk fix)
    throw;
  }
}

std::shared_ptr<const CompiledKernel> KernelCache::produce(const jit::Source& source, const KernelKey& key,
                                                           const jit::Compiler* backend,
                                                           const std::string& unavailable) {
  auto k = std::make_shared<CompiledKernel>();
  k->spec = source.spec;
  k->block = source.block;
  k->key = key;
  if (disk_) {
    if (auto entry = disk_->find(key)) {
      k->entry = std::move(*entry);
      k->origin = CodeOrigin::disk;
      std::lock_guard<std::mutex> lock(mutex_);
      ++disk_hits_;
      return k;
    }
  }
  if (backend == nullptr) {
    throw Unavailable(fmt::format("{} is not in the kernel cache{} and cannot be compiled: {}", source.spec.text(),
                                  disk_ ? " (" + disk_->dir() + ")" : "", unavailable));
  }
  jit::CompiledCode code = backend->compile(source);
  k->entry.key = key.full;
  k->entry.lowered_name = code.lowered_name;
  k->entry.metadata = key.metadata;
  k->entry.payload = std::move(code.payload);
  k->compile_log = std::move(code.log);
  k->origin = CodeOrigin::compiled;
  if (disk_) disk_->store(key, k->entry);
  std::lock_guard<std::mutex> lock(mutex_);
  ++compiled_;
  return k;
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return KernelCacheStats{memory_hits_, disk_hits_, compiled_};
}

}  // namespace arfuse::cache
