#include "arfuse/runtime/context.hpp"

#include <fmt/format.h>

#include "arfuse/error.hpp"

namespace arfuse {

Context::Context(ContextOptions options) : device_(options.device), cache_(std::move(options.cache)) {}

jit::KernelSpec Context::spec(jit::Module module, int hidden, DType dtype, const EpilogueMode& mode, int world,
                              int stage) const {
  jit::KernelSpec s;
  s.module = module, s.hidden = hidden, s.dtype = dtype, s.mode = mode;
  s.world = world, s.stage = stage, s.target = device_.target();
  s.validate();
  return s.canonical();
}

const LaunchableKernel& Context::kernel(const jit::KernelSpec& requested) {
  const bool own_target = requested.target == device_.target();
  const std::uint64_t packed = requested.packed();
  if (own_target) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = loaded_.find(packed);
    if (it != loaded_.end()) return *it->second;
  }
  const std::string key = requested.text();
  std::shared_future<std::shared_ptr<const LaunchableKernel>> future;
  std::promise<std::shared_ptr<const LaunchableKernel>> promise;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = kernels_.find(key);
    if (it != kernels_.end()) return *it->second.get();
    future = promise.get_future().share();
    kernels_.emplace(key, future);
  }
  try {
    const jit::Target& t = requested.target;
    if (t.vendor() != device_.target().vendor() || t.generation() > device_.target().generation()) {
      throw Error(fmt::format("spec {} is for {}, which cannot run on device {} ({}, {})", key, t.name(),
                              device_.ordinal(), device_.name(), device_.target().name()));
    }
    cache::CompiledKernel code = cache_.get(requested);
    auto module = LoadedModule::load(device_, code.entry.payload);
    auto k = std::make_shared<LaunchableKernel>(LaunchableKernel{
        code.spec, code.block, module->kernel(code.entry.lowered_name, code.block.threads), code.origin, 0});
    k->max_blocks_per_multiprocessor = k->kernel.max_active_blocks_per_multiprocessor();
    promise.set_value(k);
    if (own_target) {
      std::lock_guard<std::mutex> lock(mutex_);
      loaded_.emplace(packed, k);
    }
    return *k;
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(mutex_);
    kernels_.erase(key);
    throw;
  }
}

}  // namespace arfuse
