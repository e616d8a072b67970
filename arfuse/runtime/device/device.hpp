// The device layer's kernels: a module loaded from a code payload and its kernel functions, on
// the public Device and Stream (arfuse/device.hpp). Every vendor call goes through the backend of
// this process (runtime/device/backend.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "arfuse/device.hpp"
#include "arfuse/error.hpp"

namespace arfuse {

struct KernelResources {
  int registers = 0;
  int static_shared_bytes = 0;
  int local_bytes = 0;  // spills and stack
};

class LoadedModule;

// A kernel function of a loaded module; keeps the module alive.
class Kernel {
 public:
  Kernel(std::shared_ptr<const LoadedModule> module, void* function, int block_threads);
  // `args` are pointers to each kernel parameter, in order. programmatic_dependency: asked for;
  // a programmatic launch (Backend::launch) where the target has one (NVIDIA sm_90+), an ordinary
  // launch elsewhere. The kernel must begin with griddepcontrol.wait, as arfuse's do.
  void launch(unsigned grid, const Stream& stream, void** args, bool programmatic_dependency = false) const;
  int block_threads() const { return block_threads_; }
  int max_active_blocks_per_multiprocessor() const;
  KernelResources resources() const;

 private:
  std::shared_ptr<const LoadedModule> module_;
  void* function_;
  int block_threads_;
};

class LoadedModule : public std::enable_shared_from_this<LoadedModule> {
 public:
  static std::shared_ptr<const LoadedModule> load(const Device& device, const std::vector<std::uint8_t>& payload);
  ~LoadedModule();
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;
  Kernel kernel(const std::string& lowered_name, int block_threads) const;
  const Device& device() const { return *device_; }

 private:
  LoadedModule(const Device& device, void* module) : device_(&device), module_(module) {}
  const Device* device_;
  void* module_;
};

}  // namespace arfuse
