#include "arfuse/runtime/context.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "arfuse/base/error.hpp"
#include "arfuse/jit/row_pipeline.hpp"

namespace arfuse {

Context::Context(ContextOptions options)
    : device_(options.device), cache_(std::move(options.cache)), row_pipeline_(options.row_pipeline) {}

jit::KernelSpec Context::spec(jit::Module module, int hidden, jit::DType dtype, jit::Quant quant, jit::Norm norm,
                              int world, int stage) const {
  jit::KernelSpec s;
  s.module = module, s.hidden = hidden, s.dtype = dtype, s.quant = quant, s.norm = norm;
  s.world = world, s.stage = stage, s.target = device_.target();
  s.validate();
  return s.canonical();
}

const LaunchableKernel& Context::kernel(const jit::KernelSpec& requested) {
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
    enable_row_pipeline(*k);
    promise.set_value(k);
    return *k;
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(mutex_);
    kernels_.erase(key);
    throw;
  }
}

// On where the kernel was compiled with a pipeline and this device keeps at least the blocks
// per multiprocessor it was compiled for resident with the slots' shared memory (a device
// with less shared memory than its target's table says runs the direct path instead).
void Context::enable_row_pipeline(LaunchableKernel& k) const {
  const jit::RowPipeline pipeline = jit::row_pipeline(k.spec, k.block);
  if (!row_pipeline_ || !pipeline.enabled()) return;
  if (!k.kernel.allow_dynamic_shared(pipeline.shared_bytes, device_)) return;
  const int blocks = k.kernel.max_active_blocks_per_multiprocessor(pipeline.shared_bytes);
  if (blocks < pipeline.blocks_per_multiprocessor) return;
  k.row_pipeline_bytes = pipeline.shared_bytes;
  k.max_blocks_per_multiprocessor = std::min(k.max_blocks_per_multiprocessor, blocks);
}

}  // namespace arfuse
