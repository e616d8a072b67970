// What one vendor's GPU runtime provides, as the device layer's classes (device.hpp) use it.
// Internal: only files of runtime/device/ include it. Handles are opaque pointers; each backend
// casts them to its own types (CUstream, hipStream_t, ...). The CUDA driver is the first
// backend (cuda_backend.cpp), HIP the second (hip_backend.cpp); backend() picks one for the
// process, and nothing above this folder knows which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "arfuse/target.hpp"

#include "runtime/device/device.hpp"

namespace arfuse::device {

using NativeContext = void*;
using NativeModule = void*;
using NativeFunction = void*;
using NativeGraph = void*;

struct DeviceProperties {
  std::string name;
  Target target = Target::parse("sm_90");
  int multiprocessors = 0;
  std::string pci_bus_id;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;  // "CUDA driver", "HIP"
  virtual int device_count() const = 0;  // throws Unavailable when there is no driver
  virtual DeviceProperties properties(int ordinal) const = 0;
  // The device's primary context, retained until release_context.
  virtual NativeContext retain_context(int ordinal) const = 0;
  virtual void release_context(int ordinal) const noexcept = 0;
  virtual void make_current(NativeContext context) const = 0;
  virtual void make_current_quietly(NativeContext context) const noexcept = 0;
  virtual bool can_access_peer(int ordinal, int peer_ordinal) const = 0;
  virtual void enable_peer_access(NativeContext peer_context) const = 0;  // from the current context

  virtual void* allocate(std::size_t bytes, MemoryKind kind) const = 0;
  virtual void free(void* pointer) const noexcept = 0;
  // Synchronous with respect to the host (the copy or fill has landed when they return).
  virtual void copy_to_device(void* device, const void* host, std::size_t bytes) const = 0;
  virtual void copy_to_host(void* host, const void* device, std::size_t bytes) const = 0;
  virtual void fill(void* device, std::uint8_t value, std::size_t bytes) const = 0;
  virtual void copy_async(void* to, const void* from, std::size_t bytes, NativeStream stream) const = 0;
  virtual void copy_rows_async(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch,
                               std::size_t row_bytes, std::size_t rows, NativeStream stream) const = 0;

  virtual NativeStream create_stream() const = 0;
  virtual void destroy_stream(NativeStream stream) const noexcept = 0;
  virtual void synchronize(NativeStream stream) const = 0;
  virtual void wait(NativeStream stream, NativeEvent event) const = 0;
  virtual NativeEvent create_event() const = 0;
  virtual void destroy_event(NativeEvent event) const noexcept = 0;
  virtual void record(NativeEvent event, NativeStream stream) const = 0;
  virtual void synchronize_event(NativeEvent event) const = 0;
  virtual float elapsed_ms(NativeEvent start, NativeEvent end) const = 0;

  virtual void begin_capture(NativeStream stream) const = 0;
  // Whether work enqueued on `stream` now is captured into a graph rather than run.
  virtual bool capturing(NativeStream stream) const = 0;
  virtual void abort_capture(NativeStream stream) const noexcept = 0;
  virtual NativeGraph end_capture(NativeStream stream) const = 0;  // instantiated for replay
  virtual void launch_graph(NativeGraph graph, NativeStream stream) const = 0;
  virtual void destroy_graph(NativeGraph graph) const noexcept = 0;

  virtual NativeModule load_module(const std::vector<std::uint8_t>& payload) const = 0;
  virtual void unload_module(NativeModule module) const noexcept = 0;
  virtual NativeFunction function(NativeModule module, const std::string& lowered_name) const = 0;
  // programmatic_dependency: the kernel may start before the previous one on the stream ends
  // (NVIDIA sm_90+; the kernel waits for it in griddepcontrol.wait). HIP has no such launch:
  // the HIP backend launches as usual, which is correct, only without the overlap.
  virtual void launch(NativeFunction function, unsigned grid, unsigned block, NativeStream stream, void** args,
                      bool programmatic_dependency) const = 0;
  virtual int max_active_blocks(NativeFunction function, int block_threads) const = 0;
  virtual KernelResources resources(NativeFunction function) const = 0;

  virtual std::string export_ipc(const void* pointer) const = 0;
  // The start of the allocation `pointer` lies in (what an IPC handle opens at).
  virtual const void* allocation_base(const void* pointer) const = 0;
  virtual void* open_ipc(const std::string& handle) const = 0;  // on the current context
  virtual void close_ipc(void* pointer) const noexcept = 0;
};

// The backend of this process, chosen once (backend.cpp): ARFUSE_DEVICE_BACKEND=cuda or hip,
// or by default the CUDA driver where it finds a GPU, else HIP where it finds one. Throws
// Unavailable (naming both) when neither has a GPU.
const Backend& backend();
// What backend() does with ARFUSE_DEVICE_BACKEND's value ("cuda", "hip", "auto"); ConfigError
// for another, Unavailable for "auto" without a GPU.
const Backend& select_backend(const std::string& wanted);
const Backend& cuda_backend();  // cuda_backend.cpp
const Backend& hip_backend();   // hip_backend.cpp

}  // namespace arfuse::device
