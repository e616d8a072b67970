#include "arfuse/runtime/ipc.hpp"

#include <cstring>

#include <fmt/format.h>

#include "arfuse/base/error.hpp"

namespace arfuse {

std::string export_ipc_handle(const DeviceBuffer& buffer) {
  if (buffer.get() == nullptr) throw Error("cannot export an empty device buffer");
  cuda::IpcMemHandle handle{};
  cuda::check(cuda::driver().cuIpcGetMemHandle(&handle, reinterpret_cast<cuda::CUdeviceptr>(buffer.get())),
              "cuIpcGetMemHandle");
  return std::string(handle.reserved, sizeof(handle.reserved));
}

IpcMapping::IpcMapping(const Device& device, const std::string& bytes) : device_(&device) {
  cuda::IpcMemHandle handle{};
  if (bytes.size() != sizeof(handle.reserved)) {
    throw Error(fmt::format("an IPC handle is {} bytes; got {}", sizeof(handle.reserved), bytes.size()));
  }
  std::memcpy(handle.reserved, bytes.data(), bytes.size());
  device.make_current();
  cuda::check(cuda::driver().cuIpcOpenMemHandle(&pointer_, handle, cuda::kIpcMemLazyEnablePeerAccess),
              "cuIpcOpenMemHandle");
}

IpcMapping::IpcMapping(IpcMapping&& other) noexcept : device_(other.device_), pointer_(other.pointer_) {
  other.pointer_ = 0;
}

IpcMapping::~IpcMapping() {
  if (pointer_ == 0) return;
  device_->make_current_quietly();
  cuda::driver().cuIpcCloseMemHandle(pointer_);
}

}  // namespace arfuse
