// What the runtime does with a Context (arfuse/context.hpp): its kernel cache, and the in-memory
// layer of launchable kernels keyed by spec, so that a repeated load_kernel(ctx, spec) is a
// lookup that builds no string (jit::KernelSpec::packed).
#pragma once

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "arfuse/context.hpp"
#include "arfuse/error.hpp"

#include "cache/kernel_cache.hpp"
#include "runtime/device/device.hpp"

namespace arfuse {

struct LaunchableKernel {
  jit::KernelSpec spec;
  jit::BlockShape block{};
  Kernel kernel;
  cache::CodeOrigin origin = cache::CodeOrigin::compiled;
  int max_blocks_per_multiprocessor = 0;
};

struct ContextState {
  ContextState(int device, CacheOptions cache) : device(device), cache(std::move(cache)) {}
  Device device;
  cache::KernelCache cache;
  std::mutex mutex;
  std::map<std::string, std::shared_future<std::shared_ptr<const LaunchableKernel>>> kernels;
  // Loaded kernels for this device's own target by packed spec.
  std::unordered_map<std::uint64_t, std::shared_ptr<const LaunchableKernel>> loaded;
};

// The kernel for `spec`, loaded on ctx's device (compiled or read from the cache on first use).
// Throws Error when spec.target cannot run on this device, and whatever the cache throws.
const LaunchableKernel& load_kernel(Context& ctx, const jit::KernelSpec& spec);
// The kernel for `spec` (of ctx's device's own target) when it is loaded already, else null:
// loads nothing.
const LaunchableKernel* loaded_kernel(Context& ctx, const jit::KernelSpec& spec);
// A spec for ctx's device's target; throws Error for a hidden size or mode no kernel takes.
jit::KernelSpec spec_for(const Context& ctx, jit::Module module, int hidden, DType dtype, const EpilogueMode& mode = {},
                         int world = 1, int stage = 1, bool views = false);
cache::KernelCache& kernel_cache(Context& ctx);

}  // namespace arfuse
