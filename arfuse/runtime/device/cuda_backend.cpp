// The device layer's CUDA backend: every CUDA driver call arfuse makes, through the driver
// loaded at run time (cuda_driver.hpp).
#include <fmt/format.h>

#include <cstring>

#include "arfuse/error.hpp"

#include "runtime/device/backend.hpp"
#include "runtime/device/cuda_driver.hpp"

namespace arfuse::device {
namespace {

using cuda::check;
using cuda::driver;

cuda::CUdeviceptr address(const void* p) { return reinterpret_cast<cuda::CUdeviceptr>(p); }
cuda::CUstream stream_of(NativeStream s) { return static_cast<cuda::CUstream>(s); }
cuda::CUevent event_of(NativeEvent e) { return static_cast<cuda::CUevent>(e); }
cuda::CUfunction function_of(NativeFunction f) { return static_cast<cuda::CUfunction>(f); }

cuda::CUdevice device_of(int ordinal) {
  cuda::CUdevice handle = 0;
  check(driver().cuDeviceGet(&handle, ordinal), "cuDeviceGet");
  return handle;
}

// cuMemcpyHtoD and cuMemsetD8 run on the legacy default stream and may return before the data
// lands; arfuse's non-blocking streams do not wait for that stream. Wait for it alone: a
// context-wide synchronisation would also wait for kernels of other ranks on this device
// (threads of one engine), which may be waiting for this very thread at a barrier.
void finish_legacy_stream() { check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize (legacy stream)"); }

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "CUDA driver"; }

  int device_count() const override {
    int n = 0;
    check(driver().cuDeviceGetCount(&n), "cuDeviceGetCount");
    return n;
  }

  DeviceProperties properties(int ordinal) const override {
    const auto& d = driver();
    const cuda::CUdevice h = device_of(ordinal);
    DeviceProperties p;
    char name[256] = {};
    check(d.cuDeviceGetName(name, sizeof(name), h), "cuDeviceGetName");
    p.name = name;
    int major = 0, minor = 0;
    check(d.cuDeviceGetAttribute(&major, cuda::kAttrComputeCapabilityMajor, h), "cuDeviceGetAttribute");
    check(d.cuDeviceGetAttribute(&minor, cuda::kAttrComputeCapabilityMinor, h), "cuDeviceGetAttribute");
    check(d.cuDeviceGetAttribute(&p.multiprocessors, cuda::kAttrMultiprocessorCount, h), "cuDeviceGetAttribute");
    p.target = Target::parse(fmt::format("sm_{}{}", major, minor));
    char bus[64] = {};
    check(d.cuDeviceGetPCIBusId(bus, sizeof(bus), h), "cuDeviceGetPCIBusId");
    p.pci_bus_id = bus;
    return p;
  }

  NativeContext retain_context(int ordinal) const override {
    cuda::CUcontext context = nullptr;
    check(driver().cuDevicePrimaryCtxRetain(&context, device_of(ordinal)), "cuDevicePrimaryCtxRetain");
    return context;
  }
  void release_context(int ordinal) const noexcept override {
    try {
      driver().cuDevicePrimaryCtxRelease(device_of(ordinal));
    } catch (...) {  // the driver is gone (process exit): nothing left to release
    }
  }
  void make_current(NativeContext c) const override {
    check(driver().cuCtxSetCurrent(static_cast<cuda::CUcontext>(c)), "cuCtxSetCurrent");
  }
  void make_current_quietly(NativeContext c) const noexcept override {
    driver().cuCtxSetCurrent(static_cast<cuda::CUcontext>(c));
  }
  bool can_access_peer(int ordinal, int peer) const override {
    int can = 0;
    check(driver().cuDeviceCanAccessPeer(&can, device_of(ordinal), device_of(peer)), "cuDeviceCanAccessPeer");
    return can != 0;
  }
  void enable_peer_access(NativeContext peer) const override {
    const cuda::CUresult r = driver().cuCtxEnablePeerAccess(static_cast<cuda::CUcontext>(peer), 0);
    if (r != cuda::kErrorPeerAccessAlreadyEnabled) check(r, "cuCtxEnablePeerAccess");
  }

  // Signal memory needs nothing special on NVIDIA: the kernels' system-scope acquire/release
  // accesses keep peers' flags coherent.
  void* allocate(std::size_t bytes, MemoryKind) const override {
    cuda::CUdeviceptr p = 0;
    check(driver().cuMemAlloc(&p, bytes), fmt::format("cuMemAlloc of {} bytes", bytes).c_str());
    return reinterpret_cast<void*>(p);
  }
  void free(void* p) const noexcept override { driver().cuMemFree(address(p)); }
  void copy_to_device(void* to, const void* host, std::size_t bytes) const override {
    check(driver().cuMemcpyHtoD(address(to), host, bytes), "cuMemcpyHtoD");
    finish_legacy_stream();
  }
  void copy_to_host(void* host, const void* from, std::size_t bytes) const override {
    check(driver().cuMemcpyDtoH(host, address(from), bytes), "cuMemcpyDtoH");
  }
  void fill(void* to, std::uint8_t value, std::size_t bytes) const override {
    check(driver().cuMemsetD8(address(to), value, bytes), "cuMemsetD8");
    finish_legacy_stream();
  }
  void copy_async(void* to, const void* from, std::size_t bytes, NativeStream s) const override {
    check(driver().cuMemcpyDtoDAsync(address(to), address(from), bytes, stream_of(s)), "cuMemcpyDtoDAsync");
  }

  void copy_rows_async(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch, std::size_t row_bytes,
                       std::size_t rows, NativeStream s) const override {
    cuda::CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = copy.dstMemoryType = cuda::kMemoryTypeDevice;
    copy.srcDevice = address(from), copy.srcPitch = from_pitch;
    copy.dstDevice = address(to), copy.dstPitch = to_pitch;
    copy.WidthInBytes = row_bytes, copy.Height = rows;
    check(driver().cuMemcpy2DAsync(&copy, stream_of(s)), "cuMemcpy2DAsync");
  }

  NativeStream create_stream() const override {
    cuda::CUstream s = nullptr;
    check(driver().cuStreamCreate(&s, cuda::kStreamNonBlocking), "cuStreamCreate");
    return s;
  }
  void destroy_stream(NativeStream s) const noexcept override { driver().cuStreamDestroy(stream_of(s)); }
  void synchronize(NativeStream s) const override {
    check(driver().cuStreamSynchronize(stream_of(s)), "cuStreamSynchronize");
  }
  void wait(NativeStream s, NativeEvent e) const override {
    check(driver().cuStreamWaitEvent(stream_of(s), event_of(e), 0), "cuStreamWaitEvent");
  }
  NativeEvent create_event() const override {
    cuda::CUevent e = nullptr;
    check(driver().cuEventCreate(&e, 0), "cuEventCreate");
    return e;
  }
  void destroy_event(NativeEvent e) const noexcept override { driver().cuEventDestroy(event_of(e)); }
  void record(NativeEvent e, NativeStream s) const override {
    check(driver().cuEventRecord(event_of(e), stream_of(s)), "cuEventRecord");
  }
  void synchronize_event(NativeEvent e) const override {
    check(driver().cuEventSynchronize(event_of(e)), "cuEventSynchronize");
  }
  float elapsed_ms(NativeEvent start, NativeEvent end) const override {
    float ms = 0;
    check(driver().cuEventElapsedTime(&ms, event_of(start), event_of(end)), "cuEventElapsedTime");
    return ms;
  }

  void begin_capture(NativeStream s) const override {
    check(driver().cuStreamBeginCapture(stream_of(s), cuda::kCaptureModeThreadLocal), "cuStreamBeginCapture");
  }
  bool capturing(NativeStream s) const override {
    int status = 0;
    check(driver().cuStreamIsCapturing(stream_of(s), &status), "cuStreamIsCapturing");
    return status != 0;
  }
  void abort_capture(NativeStream s) const noexcept override {
    cuda::CUgraph discard = nullptr;
    driver().cuStreamEndCapture(stream_of(s), &discard);
    if (discard != nullptr) driver().cuGraphDestroy(discard);
  }
  // The executable graph does not refer to the captured one, which goes at once.
  NativeGraph end_capture(NativeStream s) const override {
    const auto& d = driver();
    cuda::CUgraph graph = nullptr;
    check(d.cuStreamEndCapture(stream_of(s), &graph), "cuStreamEndCapture");
    cuda::CUgraphExec exec = nullptr;
    const cuda::CUresult r = d.cuGraphInstantiateWithFlags(&exec, graph, 0);
    d.cuGraphDestroy(graph);
    check(r, "cuGraphInstantiateWithFlags");
    return exec;
  }
  void launch_graph(NativeGraph g, NativeStream s) const override {
    check(driver().cuGraphLaunch(static_cast<cuda::CUgraphExec>(g), stream_of(s)), "cuGraphLaunch");
  }
  void destroy_graph(NativeGraph g) const noexcept override {
    driver().cuGraphExecDestroy(static_cast<cuda::CUgraphExec>(g));
  }

  NativeModule load_module(const std::vector<std::uint8_t>& payload) const override {
    cuda::CUmodule m = nullptr;
    check(driver().cuModuleLoadData(&m, payload.data()), "cuModuleLoadData");
    return m;
  }
  void unload_module(NativeModule m) const noexcept override {
    driver().cuModuleUnload(static_cast<cuda::CUmodule>(m));
  }
  NativeFunction function(NativeModule m, const std::string& name) const override {
    cuda::CUfunction f = nullptr;
    check(driver().cuModuleGetFunction(&f, static_cast<cuda::CUmodule>(m), name.c_str()),
          fmt::format("cuModuleGetFunction({})", name).c_str());
    return f;
  }
  void launch(NativeFunction f, unsigned grid, unsigned block, NativeStream s, void** args,
              bool programmatic_dependency) const override {
    const auto& d = driver();
    if (!programmatic_dependency) {
      check(d.cuLaunchKernel(function_of(f), grid, 1, 1, block, 1, 1, 0, stream_of(s), args, nullptr),
            "cuLaunchKernel");
      return;
    }
    if (d.cuLaunchKernelEx == nullptr) {
      throw Unavailable("programmatic dependent launch needs cuLaunchKernelEx (a CUDA 12 driver or newer)");
    }
    cuda::CUlaunchAttribute attribute{};
    attribute.id = cuda::kLaunchAttributeProgrammaticStreamSerialization;
    attribute.value.programmatic_stream_serialization_allowed = 1;
    const cuda::CUlaunchConfig config{grid, 1, 1, block, 1, 1, 0, stream_of(s), &attribute, 1};
    check(d.cuLaunchKernelEx(&config, function_of(f), args, nullptr), "cuLaunchKernelEx");
  }
  int max_active_blocks(NativeFunction f, int block_threads) const override {
    int blocks = 0;
    check(driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, function_of(f), block_threads, 0),
          "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    return blocks;
  }
  KernelResources resources(NativeFunction f) const override {
    const auto& d = driver();
    KernelResources r;
    check(d.cuFuncGetAttribute(&r.registers, cuda::kFuncAttrNumRegs, function_of(f)), "cuFuncGetAttribute");
    check(d.cuFuncGetAttribute(&r.static_shared_bytes, cuda::kFuncAttrSharedSizeBytes, function_of(f)),
          "cuFuncGetAttribute");
    check(d.cuFuncGetAttribute(&r.local_bytes, cuda::kFuncAttrLocalSizeBytes, function_of(f)), "cuFuncGetAttribute");
    return r;
  }

  std::string export_ipc(const void* p) const override {
    cuda::IpcMemHandle handle{};
    check(driver().cuIpcGetMemHandle(&handle, address(p)), "cuIpcGetMemHandle");
    return std::string(handle.reserved, sizeof(handle.reserved));
  }
  const void* allocation_base(const void* p) const override {
    cuda::CUdeviceptr base = 0;
    size_t bytes = 0;
    check(driver().cuMemGetAddressRange(&base, &bytes, address(p)), "cuMemGetAddressRange");
    return reinterpret_cast<const void*>(base);
  }
  void* open_ipc(const std::string& bytes) const override {
    cuda::IpcMemHandle handle{};
    if (bytes.size() != sizeof(handle.reserved)) {
      throw Error(fmt::format("an IPC handle is {} bytes; got {}", sizeof(handle.reserved), bytes.size()));
    }
    std::memcpy(handle.reserved, bytes.data(), bytes.size());
    cuda::CUdeviceptr p = 0;
    check(driver().cuIpcOpenMemHandle(&p, handle, cuda::kIpcMemLazyEnablePeerAccess), "cuIpcOpenMemHandle");
    return reinterpret_cast<void*>(p);
  }
  void close_ipc(void* p) const noexcept override { driver().cuIpcCloseMemHandle(address(p)); }
};

}  // namespace

const Backend& cuda_backend() {
  static const CudaBackend instance;
  return instance;
}

}  // namespace arfuse::device
