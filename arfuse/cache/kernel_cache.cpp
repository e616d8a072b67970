#include "arfuse/cache/kernel_cache.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "arfuse/base/bounded_json.hpp"
#include "arfuse/cache/cache_key.hpp"
#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

namespace arfuse::cache {
namespace {

bool compile_disabled_by_env() { return !settings::on_off("ARFUSE_COMPILE", true); }

std::string metadata_for(const jit::Source& s, const std::string& compiler) {
  nlohmann::json templates = nlohmann::json::object();
  for (const auto& t : s.templates) templates[t.name] = to_hex(sha256(t.text.data(), t.text.size()));
  return nlohmann::json{{"spec", s.spec.text()},
                        {"compiler", compiler},
                        {"name_expression", s.name_expression},
                        {"options", s.options},
                        {"templates", templates}}
      .dump();
}

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

CompiledKernel KernelCache::get(const jit::KernelSpec& spec) {
  const jit::Source source = jit::render(spec);
  std::shared_ptr<const jit::Compiler> backend;
  std::string unavailable;
  try {
    backend = compiler(source.spec.target);
  } catch (const Unavailable& e) {
    unavailable = e.what();
  }
  const Digest source_digest = source_key(source);
  const std::string memory_key =
      backend ? to_hex(full_key(source_digest, backend->identity())) : "any:" + to_hex(source_digest);

  std::shared_future<std::shared_ptr<const CompiledKernel>> future;
  std::promise<std::shared_ptr<const CompiledKernel>> promise;
  bool producer = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = memory_.find(memory_key);
    if (it != memory_.end()) {
      future = it->second;
      ++memory_hits_;
    } else {
      future = promise.get_future().share();
      memory_.emplace(memory_key, future);
      producer = true;
    }
  }
  if (!producer) {
    CompiledKernel hit = *future.get();  // rethrows the producer's error
    hit.origin = CodeOrigin::memory;
    return hit;
  }
  try {
    std::shared_ptr<const CompiledKernel> result;
    if (backend) {
      result = produce(source, source_digest, *backend);
    } else {
      auto entry = disk_ ? disk_->get_any(source_digest) : std::nullopt;
      if (!entry) {
        throw Unavailable(fmt::format("{} is not in the kernel cache{} and cannot be compiled: {}", source.spec.text(),
                                      disk_ ? " (" + disk_->dir() + ")" : "", unavailable));
      }
      auto k = std::make_shared<CompiledKernel>();
      k->spec = source.spec, k->block = source.block, k->entry = std::move(*entry), k->origin = CodeOrigin::disk;
      k->source_digest = source_digest;
      std::lock_guard<std::mutex> lock(mutex_);
      ++disk_hits_;
      result = k;
    }
    promise.set_value(result);
    return *result;
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(mutex_);
    memory_.erase(memory_key);  // a later call may try again (e.g. after a disk fix)
    throw;
  }
}

std::shared_ptr<const CompiledKernel> KernelCache::produce(const jit::Source& source, const Digest& source_digest,
                                                           const jit::Compiler& backend) {
  jit::require_target(backend, source.spec.target);
  const Digest key = full_key(source_digest, backend.identity());
  auto k = std::make_shared<CompiledKernel>();
  k->spec = source.spec;
  k->block = source.block;
  k->source_digest = source_digest;
  if (disk_) {
    if (auto entry = disk_->get(source_digest, key)) {
      k->entry = std::move(*entry);
      k->origin = CodeOrigin::disk;
      std::lock_guard<std::mutex> lock(mutex_);
      ++disk_hits_;
      return k;
    }
  }
  jit::CompiledCode code = backend.compile(source);
  k->entry.key = key;
  k->entry.lowered_name = code.lowered_name;
  k->entry.metadata = metadata_for(source, backend.identity());
  k->entry.payload = std::move(code.payload);
  k->compile_log = std::move(code.log);
  k->origin = CodeOrigin::compiled;
  if (disk_) disk_->put(source_digest, k->entry);
  std::lock_guard<std::mutex> lock(mutex_);
  ++compiled_;
  return k;
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return KernelCacheStats{memory_hits_, disk_hits_, compiled_};
}

}  // namespace arfuse::cache
