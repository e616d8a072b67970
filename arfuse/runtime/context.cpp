#include "runtime/context.hpp"

#include <fmt/format.h>

#include "arfuse/error.hpp"

namespace arfuse {

struct ContextAccess {
  static ContextState& of(const Context& ctx) { return *ctx.state_; }
};

Context::Context(ContextOptions options)
    : state_(std::make_unique<ContextState>(options.device, std::move(options.cache))) {}

Context::~Context() = default;

const Device& Context::device() const { return state_->device; }

cache::KernelCache& kernel_cache(Context& ctx) { return ContextAccess::of(ctx).cache; }

jit::KernelSpec spec_for(const Context& ctx, jit::Module module, int hidden, DType dtype, const EpilogueMode& mode,
                         int world, int stage, bool views) {
  jit::KernelSpec s;
  s.module = module, s.hidden = hidden, s.dtype = dtype, s.mode = mode, s.views = views;
  s.world = world, s.stage = stage, s.target = ctx.device().target();
  s.validate();
  return s.canonical();
}

const LaunchableKernel* loaded_kernel(Context& ctx, const jit::KernelSpec& spec) {
  ContextState& c = ContextAccess::of(ctx);
  if (spec.target != c.device.target()) return nullptr;
  const std::uint64_t packed = spec.packed();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.loaded.find(packed);
  return it != c.loaded.end() ? it->second.get() : nullptr;
}

const LaunchableKernel& load_kernel(Context& ctx, const jit::KernelSpec& requested) {
  if (const LaunchableKernel* k = loaded_kernel(ctx, requested)) return *k;
  ContextState& c = ContextAccess::of(ctx);
  const bool own_target = requested.target == c.device.target();
  const std::string key = requested.text();
  std::shared_future<std::shared_ptr<const LaunchableKernel>> future;
  std::promise<std::shared_ptr<const LaunchableKernel>> promise;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.kernels.find(key);
    if (it != c.kernels.end()) return *it->second.get();
    future = promise.get_future().share();
    c.kernels.emplace(key, future);
  }
  try {
    const Target& t = requested.target;
    if (t.vendor() != c.device.target().vendor() || t.generation() > c.device.target().generation()) {
      throw Error(fmt::format("spec {} is for {}, which cannot run on device {} ({}, {})", key, t.name(),
                              c.device.ordinal(), c.device.name(), c.device.target().name()));
    }
    cache::CompiledKernel code = c.cache.get(requested);
    auto module = LoadedModule::load(c.device, code.entry.payload);
    auto k = std::make_shared<LaunchableKernel>(LaunchableKernel{
        code.spec, code.block, module->kernel(code.entry.lowered_name, code.block.threads), code.origin, 0});
    k->max_blocks_per_multiprocessor = k->kernel.max_active_blocks_per_multiprocessor();
    promise.set_value(k);
    if (own_target) {
      std::lock_guard<std::mutex> lock(c.mutex);
      c.loaded.emplace(requested.packed(), k);
    }
    return *k;
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(c.mutex);
    c.kernels.erase(key);
    throw;
  }
}

}  // namespace arfuse
