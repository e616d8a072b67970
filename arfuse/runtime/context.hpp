// Context: one device, its kernel cache, and the in-memory layer of launchable kernels keyed
// by spec (a repeated ctx.kernel(spec) is a lookup). Thread-safe.
//
//   arfuse::Context ctx;                                   // device 0, default cache folder
//   auto& k = ctx.kernel(ctx.spec_rmsnorm_quant(6144, DType::bf16, Quant::fp8, Norm::rms));
#pragma once

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "arfuse/cache/kernel_cache.hpp"
#include "arfuse/export.hpp"
#include "arfuse/runtime/device/device.hpp"

namespace arfuse {

struct ARFUSE_API ContextOptions {
  int device = 0;
  cache::CacheOptions cache;
};

struct ARFUSE_API LaunchableKernel {
  jit::KernelSpec spec;
  jit::BlockShape block{};
  Kernel kernel;
  cache::CodeOrigin origin = cache::CodeOrigin::compiled;
  int max_blocks_per_multiprocessor = 0;
};

class ARFUSE_API Context {
 public:
  explicit Context(ContextOptions options = {});
  const Device& device() const { return device_; }
  cache::KernelCache& cache() { return cache_; }

  // Throws Error when spec.target cannot run on this device, and whatever the cache throws.
  const LaunchableKernel& kernel(const jit::KernelSpec& spec);
  // A spec for this device's target; throws Error for a hidden size or mode no kernel takes.
  jit::KernelSpec spec(jit::Module module, int hidden, DType dtype, const EpilogueMode& mode = {}, int world = 1,
                       int stage = 1) const;

 private:
  Device device_;
  cache::KernelCache cache_;
  std::mutex mutex_;
  std::map<std::string, std::shared_future<std::shared_ptr<const LaunchableKernel>>> kernels_;
  // Loaded kernels for this device's own target by packed spec: the per-call lookup builds no
  // string (jit::KernelSpec::packed).
  std::unordered_map<std::uint64_t, std::shared_ptr<const LaunchableKernel>> loaded_;
};

}  // namespace arfuse
