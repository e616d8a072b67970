#include "runtime/device/ipc.hpp"

#include "arfuse/error.hpp"

#include "runtime/device/backend.hpp"

namespace arfuse {

std::string export_ipc_handle(const DeviceBuffer& buffer) {
  if (buffer.get() == nullptr) throw Error("cannot export an empty device buffer");
  return device::backend().export_ipc(buffer.get());
}

IpcAddress export_ipc_address(const Device& device, const void* pointer) {
  if (pointer == nullptr) throw Error("cannot export a null address");
  device.make_current();
  const device::Backend& b = device::backend();
  const void* base = b.allocation_base(pointer);
  return IpcAddress{b.export_ipc(base),
                    std::size_t(static_cast<const char*>(pointer) - static_cast<const char*>(base))};
}

IpcMapping::IpcMapping(const Device& device, const std::string& handle) : device_(&device) {
  device.make_current();
  pointer_ = device::backend().open_ipc(handle);
}

IpcMapping::IpcMapping(IpcMapping&& other) noexcept : device_(other.device_), pointer_(other.pointer_) {
  other.pointer_ = nullptr;
}

IpcMapping::~IpcMapping() {
  if (pointer_ == nullptr) return;
  device_->make_current_quietly();
  device::backend().close_ipc(pointer_);
}

}  // namespace arfuse
