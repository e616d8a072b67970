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

#include "arfuse/cache/kernel_cache.hpp"
#include "arfuse/runtime/device.hpp"

namespace arfuse {

struct ContextOptions {
  int device = 0;
  cache::CacheOptions cache;
  // Give kernels that have a row pipeline (jit/row_pipeline.hpp) its shared memory. Off, they
  // run their direct path: the same bits, for comparing the two (tests, arfuse-bench).
  bool row_pipeline = true;
};

struct LaunchableKernel {
  jit::KernelSpec spec;
  jit::BlockShape block{};
  Kernel kernel;
  cache::CodeOrigin origin = cache::CodeOrigin::compiled;
  int max_blocks_per_multiprocessor = 0;
  // Dynamic shared memory that turns the row pipeline on; 0 where the kernel has none, the
  // device cannot give it without losing resident blocks, or the context has it off.
  int row_pipeline_bytes = 0;

  // What a launch of `grid` blocks over `rows` rows gives each block: the pipeline only pays
  // where a block has a next row.
  int shared_bytes_for(int rows, unsigned grid) const {
    return rows > int(grid) ? row_pipeline_bytes : 0;
  }
};

class Context {
 public:
  explicit Context(ContextOptions options = {});
  const Device& device() const { return device_; }
  cache::KernelCache& cache() { return cache_; }

  // Throws Error when spec.target cannot run on this device, and whatever the cache throws.
  const LaunchableKernel& kernel(const jit::KernelSpec& spec);
  // A spec for this device's target.
  jit::KernelSpec spec(jit::Module module, int hidden, jit::DType dtype, jit::Quant quant = jit::Quant::none,
                       jit::Norm norm = jit::Norm::rms, int world = 1, int stage = 1) const;

 private:
  void enable_row_pipeline(LaunchableKernel& kernel) const;

  Device device_;
  cache::KernelCache cache_;
  bool row_pipeline_;
  std::mutex mutex_;
  std::map<std::string, std::shared_future<std::shared_ptr<const LaunchableKernel>>> kernels_;
};

}  // namespace arfuse
