#include "arfuse/runtime/device.hpp"

#include <fmt/format.h>

#include "arfuse/base/error.hpp"

namespace arfuse {

using cuda::check;
using cuda::driver;

int Device::count() {
  try {
    int n = 0;
    return driver().cuDeviceGetCount(&n) == 0 ? n : 0;
  } catch (const Unavailable&) {
    return 0;
  }
}

Device::Device(int ordinal) : ordinal_(ordinal) {
  const auto& d = driver();
  int n = 0;
  check(d.cuDeviceGetCount(&n), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= n) {
    throw Error(fmt::format("device {} does not exist: this machine has {} GPU(s)", ordinal, n));
  }
  check(d.cuDeviceGet(&handle_, ordinal), "cuDeviceGet");
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof(name), handle_), "cuDeviceGetName");
  name_ = name;
  int major = 0, minor = 0;
  check(d.cuDeviceGetAttribute(&major, cuda::kAttrComputeCapabilityMajor, handle_), "cuDeviceGetAttribute");
  check(d.cuDeviceGetAttribute(&minor, cuda::kAttrComputeCapabilityMinor, handle_), "cuDeviceGetAttribute");
  check(d.cuDeviceGetAttribute(&multiprocessors_, cuda::kAttrMultiprocessorCount, handle_), "cuDeviceGetAttribute");
  target_ = jit::Target::parse(fmt::format("sm_{}{}", major, minor));
  char bus[64] = {};
  check(d.cuDeviceGetPCIBusId(bus, sizeof(bus), handle_), "cuDeviceGetPCIBusId");
  pci_bus_id_ = bus;
  check(d.cuDevicePrimaryCtxRetain(&context_, handle_), "cuDevicePrimaryCtxRetain");
  make_current();
}

void Device::make_current() const { check(driver().cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

void Device::enable_peer_access(const Device& peer) const {
  if (peer.handle_ == handle_) return;
  int can = 0;
  check(driver().cuDeviceCanAccessPeer(&can, handle_, peer.handle_), "cuDeviceCanAccessPeer");
  if (!can) {
    throw Error(fmt::format("device {} cannot access device {} directly (no P2P path); use the NCCL path",
                            ordinal_, peer.ordinal_));
  }
  make_current();
  cuda::CUresult r = driver().cuCtxEnablePeerAccess(peer.context_, 0);
  if (r != cuda::kErrorPeerAccessAlreadyEnabled) check(r, "cuCtxEnablePeerAccess");
}

namespace {

// cuMemcpyHtoD and cuMemsetD8 run on the legacy default stream and may return before the data
// lands; arfuse's non-blocking streams do not wait for that stream. Wait for it alone: a
// context-wide synchronisation would also wait for kernels of other ranks on this device
// (threads of one engine), which may be waiting for this very thread at a barrier.
void finish_legacy_stream() { check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize (legacy stream)"); }

}  // namespace

DeviceBuffer::DeviceBuffer(const Device& device, std::size_t bytes) : device_(&device), bytes_(bytes) {
  if (bytes == 0) throw Error("a device buffer of 0 bytes was requested");
  device.make_current();
  check(driver().cuMemAlloc(&pointer_, bytes),
        fmt::format("cuMemAlloc of {} bytes on device {}", bytes, device.ordinal()).c_str());
}

// Destructors never throw: at process exit the driver may already be shut down
// (CUDA_ERROR_DEINITIALIZED), and then there is nothing left to release.
void Device::make_current_quietly() const { driver().cuCtxSetCurrent(context_); }

DeviceBuffer::~DeviceBuffer() {
  if (pointer_ == 0) return;
  device_->make_current_quietly();
  driver().cuMemFree(pointer_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : device_(o.device_), pointer_(o.pointer_), bytes_(o.bytes_) {
  o.pointer_ = 0, o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    DeviceBuffer old(std::move(*this));
    device_ = o.device_, pointer_ = o.pointer_, bytes_ = o.bytes_;
    o.pointer_ = 0, o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  if (offset + bytes > bytes_) throw Error(fmt::format("upload of {} bytes at {} overruns a {}-byte buffer", bytes, offset, bytes_));
  device_->make_current();
  check(driver().cuMemcpyHtoD(pointer_ + offset, host, bytes), "cuMemcpyHtoD");
  finish_legacy_stream();
}

void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset) const {
  if (offset + bytes > bytes_) throw Error(fmt::format("download of {} bytes at {} overruns a {}-byte buffer", bytes, offset, bytes_));
  device_->make_current();
  check(driver().cuMemcpyDtoH(host, pointer_ + offset, bytes), "cuMemcpyDtoH");
}

void DeviceBuffer::fill(std::uint8_t value) {
  device_->make_current();
  check(driver().cuMemsetD8(pointer_, value, bytes_), "cuMemsetD8");
  finish_legacy_stream();
}

Stream::Stream(const Device& device) : device_(&device) {
  device.make_current();
  check(driver().cuStreamCreate(&stream_, cuda::kStreamNonBlocking), "cuStreamCreate");
}

Stream::~Stream() {
  device_->make_current_quietly();
  driver().cuStreamDestroy(stream_);
}

void Stream::synchronize() const { check(driver().cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

Event::Event(const Device& device) {
  device.make_current();
  check(driver().cuEventCreate(&event_, 0), "cuEventCreate");
}

Event::~Event() { driver().cuEventDestroy(event_); }
void Event::record(const Stream& stream) { check(driver().cuEventRecord(event_, stream.handle()), "cuEventRecord"); }
void Event::synchronize() const { check(driver().cuEventSynchronize(event_), "cuEventSynchronize"); }

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  check(driver().cuEventElapsedTime(&ms, start.event_, event_), "cuEventElapsedTime");
  return ms;
}

Graph::Graph(const Stream& stream, const std::function<void()>& record) {
  const auto& d = driver();
  check(d.cuStreamBeginCapture(stream.handle(), cuda::kCaptureModeThreadLocal), "cuStreamBeginCapture");
  try {
    record();
  } catch (...) {
    cuda::CUgraph discard = nullptr;
    d.cuStreamEndCapture(stream.handle(), &discard);
    if (discard != nullptr) d.cuGraphDestroy(discard);
    throw;
  }
  check(d.cuStreamEndCapture(stream.handle(), &graph_), "cuStreamEndCapture");
  check(d.cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiateWithFlags");
}

Graph::~Graph() {
  if (exec_ != nullptr) driver().cuGraphExecDestroy(exec_);
  if (graph_ != nullptr) driver().cuGraphDestroy(graph_);
}

void Graph::launch(const Stream& stream) const { check(driver().cuGraphLaunch(exec_, stream.handle()), "cuGraphLaunch"); }

Kernel::Kernel(std::shared_ptr<const LoadedModule> module, cuda::CUfunction function, int block_threads)
    : module_(std::move(module)), function_(function), block_threads_(block_threads) {}

void Kernel::launch(unsigned grid, const Stream& stream, void** args) const {
  if (grid == 0) return;
  check(driver().cuLaunchKernel(function_, grid, 1, 1, unsigned(block_threads_), 1, 1, 0,
                                stream.handle(), args, nullptr),
        "cuLaunchKernel");
}

int Kernel::max_active_blocks_per_multiprocessor() const {
  int blocks = 0;
  check(driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, function_, block_threads_, 0),
        "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  return blocks;
}

KernelResources Kernel::resources() const {
  KernelResources r;
  const auto& d = driver();
  check(d.cuFuncGetAttribute(&r.registers, cuda::kFuncAttrNumRegs, function_), "cuFuncGetAttribute");
  check(d.cuFuncGetAttribute(&r.static_shared_bytes, cuda::kFuncAttrSharedSizeBytes, function_), "cuFuncGetAttribute");
  check(d.cuFuncGetAttribute(&r.local_bytes, cuda::kFuncAttrLocalSizeBytes, function_), "cuFuncGetAttribute");
  return r;
}

std::shared_ptr<const LoadedModule> LoadedModule::load(const Device& device, const std::vector<std::uint8_t>& payload) {
  if (payload.empty()) throw Error("cannot load a module from an empty code payload");
  device.make_current();
  cuda::CUmodule module = nullptr;
  check(driver().cuModuleLoadData(&module, payload.data()), "cuModuleLoadData");
  return std::shared_ptr<const LoadedModule>(new LoadedModule(device, module));
}

LoadedModule::~LoadedModule() {
  device_->make_current_quietly();
  driver().cuModuleUnload(module_);
}

Kernel LoadedModule::kernel(const std::string& lowered_name, int block_threads) const {
  cuda::CUfunction function = nullptr;
  check(driver().cuModuleGetFunction(&function, module_, lowered_name.c_str()),
        fmt::format("cuModuleGetFunction({})", lowered_name).c_str());
  return Kernel(shared_from_this(), function, block_threads);
}

}  // namespace arfuse
