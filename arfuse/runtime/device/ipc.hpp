// Sharing device memory with other processes (CUDA IPC): the owner exports a handle, a peer
// process opens it and gets a pointer in its own address space to the same memory.
#pragma once

#include <cstddef>
#include <string>

#include "arfuse/error.hpp"

#include "runtime/device/device.hpp"

namespace arfuse {

// The 64 bytes a peer needs to open `buffer`, as a string for the bootstrap.
std::string export_ipc_handle(const DeviceBuffer& buffer);

// Where memory the caller allocated (a tensor captured in a graph) lies for a peer: the handle
// of its allocation and its offset in it. Throws DeviceError when the driver will not export it
// (memory of a virtual-memory pool, of another kind of allocator).
struct IpcAddress {
  std::string handle;
  std::size_t offset = 0;
};
IpcAddress export_ipc_address(const Device& device, const void* pointer);

// A peer's buffer opened in this process on `device`; closed on destruction. Throws
// DeviceError when the driver refuses (another node, no P2P path between the GPUs) and Error
// when `handle` is not 64 bytes.
class IpcMapping {
 public:
  IpcMapping(const Device& device, const std::string& handle);
  ~IpcMapping();
  IpcMapping(IpcMapping&& other) noexcept;
  IpcMapping& operator=(IpcMapping&&) = delete;
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  void* get() const { return pointer_; }

 private:
  const Device* device_;
  void* pointer_ = nullptr;
};

}  // namespace arfuse
