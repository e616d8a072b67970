// The device layer: one GPU, its memory, streams, events, graphs, and modules loaded from a
// code payload. NVIDIA only for now (CUDA driver API through runtime/cuda_driver); the HIP
// runtime behind the same classes is future work, AMD targets are compile-only today.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "arfuse/jit/target.hpp"
#include "arfuse/runtime/cuda_driver.hpp"

namespace arfuse {

class Device {
 public:
  // Throws Unavailable when there is no driver or no GPU, Error for a bad ordinal.
  explicit Device(int ordinal = 0);
  static int count();  // 0 when there is no driver or no GPU

  int ordinal() const { return ordinal_; }
  const std::string& name() const { return name_; }
  const jit::Target& target() const { return target_; }
  int multiprocessors() const { return multiprocessors_; }
  // "0000:19:00.0": names the physical GPU across processes, whatever CUDA_VISIBLE_DEVICES says.
  const std::string& pci_bus_id() const { return pci_bus_id_; }
  // Makes this device's primary context current on the calling thread.
  void make_current() const;
  void make_current_quietly() const;  // for destructors: errors ignored
  // Lets kernels on this device read and write `peer`'s memory; throws Error when the
  // hardware cannot.
  void enable_peer_access(const Device& peer) const;

 private:
  int ordinal_;
  cuda::CUdevice handle_ = 0;
  cuda::CUcontext context_ = nullptr;
  std::string name_;
  jit::Target target_ = jit::Target::parse("sm_90");
  int multiprocessors_ = 0;
  std::string pci_bus_id_;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const Device& device, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return reinterpret_cast<void*>(pointer_); }
  std::size_t size() const { return bytes_; }
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const;
  void fill(std::uint8_t value);
  template <typename T>
  void upload(const std::vector<T>& host) { upload(host.data(), host.size() * sizeof(T)); }
  template <typename T>
  std::vector<T> download(std::size_t count) const {
    std::vector<T> host(count);
    download(host.data(), count * sizeof(T));
    return host;
  }

 private:
  const Device* device_ = nullptr;
  cuda::CUdeviceptr pointer_ = 0;
  std::size_t bytes_ = 0;
};

class Stream {
 public:
  explicit Stream(const Device& device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cuda::CUstream handle() const { return stream_; }
  void synchronize() const;

 private:
  const Device* device_;
  cuda::CUstream stream_ = nullptr;
};

class Event {
 public:
  explicit Event(const Device& device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const Stream& stream);
  void synchronize() const;
  cuda::CUevent handle() const { return event_; }
  // Milliseconds from `start` to this event; both must have completed.
  float elapsed_ms_since(const Event& start) const;

 private:
  cuda::CUevent event_ = nullptr;
};

// A graph captured from the work `record` enqueues on `stream`, instantiated for replay.
class Graph {
 public:
  Graph(const Stream& stream, const std::function<void()>& record);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void launch(const Stream& stream) const;

 private:
  cuda::CUgraph graph_ = nullptr;
  cuda::CUgraphExec exec_ = nullptr;
};

struct KernelResources {
  int registers = 0;
  int static_shared_bytes = 0;
  int local_bytes = 0;  // spills and stack
};

class LoadedModule;

// A kernel function of a loaded module; keeps the module alive.
class Kernel {
 public:
  Kernel(std::shared_ptr<const LoadedModule> module, cuda::CUfunction function, int block_threads);
  // `args` are pointers to each kernel parameter, in order.
  void launch(unsigned grid, const Stream& stream, void** args) const;
  int block_threads() const { return block_threads_; }
  int max_active_blocks_per_multiprocessor() const;
  KernelResources resources() const;

 private:
  std::shared_ptr<const LoadedModule> module_;
  cuda::CUfunction function_;
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
  LoadedModule(const Device& device, cuda::CUmodule module) : device_(&device), module_(module) {}
  const Device* device_;
  cuda::CUmodule module_;
};

}  // namespace arfuse
