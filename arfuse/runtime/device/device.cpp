#include "runtime/device/device.hpp"

#include <fmt/format.h>

#include "arfuse/error.hpp"

#include "runtime/device/backend.hpp"

namespace arfuse {

using device::backend;

int Device::count() {
  try {
    return backend().device_count();
  } catch (const Unavailable&) {
    return 0;
  }
}

const char* Device::runtime() { return backend().name(); }

Device::Device(int ordinal) : ordinal_(ordinal) {
  const auto& b = backend();
  const int n = b.device_count();
  if (ordinal < 0 || ordinal >= n) {
    throw Error(fmt::format("device {} does not exist: this machine has {} GPU(s)", ordinal, n));
  }
  auto properties = b.properties(ordinal);
  name_ = std::move(properties.name);
  target_ = properties.target;
  multiprocessors_ = properties.multiprocessors;
  pci_bus_id_ = std::move(properties.pci_bus_id);
  context_ = b.retain_context(ordinal);
  make_current();
}

Device::Device(const Device& o)
    : ordinal_(o.ordinal_),
      name_(o.name_),
      target_(o.target_),
      multiprocessors_(o.multiprocessors_),
      pci_bus_id_(o.pci_bus_id_) {
  context_ = backend().retain_context(ordinal_);
}

// Destructors never throw: at process exit the driver may already be shut down, and then
// there is nothing left to release.
Device::~Device() { backend().release_context(ordinal_); }

void Device::make_current() const { backend().make_current(context_); }
void Device::make_current_quietly() const { backend().make_current_quietly(context_); }

void Device::enable_peer_access(const Device& peer) const {
  if (peer.ordinal_ == ordinal_) return;
  if (!backend().can_access_peer(ordinal_, peer.ordinal_)) {
    throw Error(fmt::format("device {} cannot access device {} directly (no P2P path); use the NCCL path", ordinal_,
                            peer.ordinal_));
  }
  make_current();
  backend().enable_peer_access(peer.context_);
}

void Device::copy_to_device(void* device_pointer, const void* host, std::size_t bytes) const {
  if (device_pointer == nullptr || host == nullptr) throw Error("copy_to_device: a pointer is null");
  make_current();
  backend().copy_to_device(device_pointer, host, bytes);
}

void Device::copy_to_host(void* host, const void* device_pointer, std::size_t bytes) const {
  if (device_pointer == nullptr || host == nullptr) throw Error("copy_to_host: a pointer is null");
  make_current();
  backend().copy_to_host(host, device_pointer, bytes);
}

DeviceBuffer::DeviceBuffer(const Device& device, std::size_t bytes, MemoryKind kind) : device_(&device), bytes_(bytes) {
  if (bytes == 0) throw Error("a device buffer of 0 bytes was requested");
  device.make_current();
  pointer_ = backend().allocate(bytes, kind);
}

DeviceBuffer::~DeviceBuffer() {
  if (pointer_ == nullptr) return;
  device_->make_current_quietly();
  backend().free(pointer_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : device_(o.device_), pointer_(o.pointer_), bytes_(o.bytes_) {
  o.pointer_ = nullptr, o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    DeviceBuffer old(std::move(*this));
    device_ = o.device_, pointer_ = o.pointer_, bytes_ = o.bytes_;
    o.pointer_ = nullptr, o.bytes_ = 0;
  }
  return *this;
}

namespace {

void check_range(const char* what, std::size_t bytes, std::size_t offset, std::size_t size) {
  if (offset > size || bytes > size - offset) {
    throw Error(fmt::format("{} of {} bytes at {} overruns a {}-byte buffer", what, bytes, offset, size));
  }
}

}  // namespace

void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  check_range("upload", bytes, offset, bytes_);
  device_->copy_to_device(static_cast<char*>(pointer_) + offset, host, bytes);
}

void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset) const {
  check_range("download", bytes, offset, bytes_);
  device_->copy_to_host(host, static_cast<const char*>(pointer_) + offset, bytes);
}

void DeviceBuffer::fill(std::uint8_t value) {
  device_->make_current();
  backend().fill(pointer_, value, bytes_);
}

Stream::Stream(const Device& device) : device_(&device) {
  device.make_current();
  stream_ = backend().create_stream();
}

Stream::~Stream() {
  if (!owned_) return;
  device_->make_current_quietly();
  backend().destroy_stream(stream_);
}

void Stream::synchronize() const { backend().synchronize(stream_); }
bool Stream::capturing() const { return backend().capturing(stream_); }
void Stream::wait(const Event& event) const { backend().wait(stream_, event.native()); }

void Stream::copy(void* to, const void* from, std::size_t bytes) const {
  if (to == nullptr || from == nullptr) throw Error("Stream::copy: a pointer is null");
  backend().copy_async(to, from, bytes, stream_);
}

void Stream::copy_rows(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch, std::size_t row_bytes,
                       std::size_t rows) const {
  if (to == nullptr || from == nullptr) throw Error("Stream::copy_rows: a pointer is null");
  if (to_pitch < row_bytes || from_pitch < row_bytes) {
    throw Error(fmt::format("Stream::copy_rows: a pitch ({} or {} bytes) is shorter than a row ({} bytes)", to_pitch,
                            from_pitch, row_bytes));
  }
  if (rows == 0 || row_bytes == 0) return;
  backend().copy_rows_async(to, to_pitch, from, from_pitch, row_bytes, rows, stream_);
}

Event::Event(const Device& device) {
  device.make_current();
  event_ = backend().create_event();
}

Event::~Event() { backend().destroy_event(event_); }
void Event::record(const Stream& stream) { backend().record(event_, stream.native()); }
void Event::synchronize() const { backend().synchronize_event(event_); }
float Event::elapsed_ms_since(const Event& start) const { return backend().elapsed_ms(start.event_, event_); }

Graph::Graph(const Stream& stream, const std::function<void()>& record) {
  const auto& b = backend();
  b.begin_capture(stream.native());
  try {
    record();
  } catch (...) {
    b.abort_capture(stream.native());
    throw;
  }
  graph_ = b.end_capture(stream.native());
}

Graph::~Graph() {
  if (graph_ != nullptr) backend().destroy_graph(graph_);
}

void Graph::launch(const Stream& stream) const { backend().launch_graph(graph_, stream.native()); }

Kernel::Kernel(std::shared_ptr<const LoadedModule> module, void* function, int block_threads)
    : module_(std::move(module)), function_(function), block_threads_(block_threads) {}

void Kernel::launch(unsigned grid, const Stream& stream, void** args, bool programmatic_dependency) const {
  if (grid == 0) return;
  const bool programmatic = programmatic_dependency && module_->device().target().programmatic_dependent_launch();
  backend().launch(function_, grid, unsigned(block_threads_), stream.native(), args, programmatic);
}

int Kernel::max_active_blocks_per_multiprocessor() const {
  return backend().max_active_blocks(function_, block_threads_);
}

KernelResources Kernel::resources() const { return backend().resources(function_); }

std::shared_ptr<const LoadedModule> LoadedModule::load(const Device& device, const std::vector<std::uint8_t>& payload) {
  if (payload.empty()) throw Error("cannot load a module from an empty code payload");
  device.make_current();
  void* module = backend().load_module(payload);
  return std::shared_ptr<const LoadedModule>(new LoadedModule(device, module));
}

LoadedModule::~LoadedModule() {
  device_->make_current_quietly();
  backend().unload_module(module_);
}

Kernel LoadedModule::kernel(const std::string& lowered_name, int block_threads) const {
  return Kernel(shared_from_this(), backend().function(module_, lowered_name), block_threads);
}

}  // namespace arfuse
