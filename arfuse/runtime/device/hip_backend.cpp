// The device layer's HIP backend: every HIP runtime call arfuse makes, through the table
// hip_runtime.hpp loads. HIP has no context handles to retain: a device is made current with
// hipSetDevice, so a "context" here is the device ordinal (plus one, so that none is null).
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "arfuse/error.hpp"

#include "runtime/device/backend.hpp"
#include "runtime/device/hip_runtime.hpp"

namespace arfuse::device {
namespace {

using hip::api;
using hip::check;

NativeContext context_of(int ordinal) { return reinterpret_cast<NativeContext>(std::intptr_t(ordinal) + 1); }
int ordinal_of(NativeContext c) { return int(reinterpret_cast<std::intptr_t>(c) - 1); }

// The default stream's copies and fills may return before they land; wait for that stream
// alone (the same reasoning as the CUDA backend's legacy stream).
void finish_default_stream() { check(api().hipStreamSynchronize(nullptr), "hipStreamSynchronize (default stream)"); }

int attribute(int attr, int ordinal, const char* what) {
  int value = 0;
  check(api().hipDeviceGetAttribute(&value, attr, ordinal), what);
  return value;
}

class HipBackend final : public Backend {
 public:
  const char* name() const override { return "HIP"; }

  int device_count() const override {
    int n = 0;
    check(api().hipGetDeviceCount(&n), "hipGetDeviceCount");
    return n;
  }

  DeviceProperties properties(int ordinal) const override {
    const auto& a = api();
    DeviceProperties p;
    char name[256] = {};
    check(a.hipDeviceGetName(name, sizeof(name), ordinal), "hipDeviceGetName");
    p.name = name;
    std::vector<char> props(hip::kPropertiesBytes, 0);
    check(a.hipGetDeviceProperties(props.data(), ordinal), "hipGetDeviceProperties");
    const char* arch = props.data() + a.gcn_arch_name_offset;
    p.target = Target::parse(hip::target_of_arch_name(std::string(arch, strnlen(arch, 256))));
    // The kernels are compiled for the target's wavefront size; a device running another
    // (an RDNA part in wave64 mode) would run them with the wrong reduction tree.
    const int warp = attribute(hip::kAttrWarpSize, ordinal, "hipDeviceGetAttribute(warpSize)");
    if (warp != p.target.warp_size()) {
      throw Error(fmt::format("HIP device {} ({}) runs wavefronts of {} lanes, but {} kernels are built for {}",
                              ordinal, p.target.name(), warp, p.target.name(), p.target.warp_size()));
    }
    p.multiprocessors = attribute(hip::kAttrMultiprocessorCount, ordinal, "hipDeviceGetAttribute(multiProcessorCount)");
    char bus[64] = {};
    check(a.hipDeviceGetPCIBusId(bus, sizeof(bus), ordinal), "hipDeviceGetPCIBusId");
    p.pci_bus_id = bus;
    return p;
  }

  NativeContext retain_context(int ordinal) const override {
    check(api().hipSetDevice(ordinal), "hipSetDevice");
    return context_of(ordinal);
  }
  void release_context(int) const noexcept override {}
  void make_current(NativeContext c) const override { check(api().hipSetDevice(ordinal_of(c)), "hipSetDevice"); }
  void make_current_quietly(NativeContext c) const noexcept override {
    try {
      api().hipSetDevice(ordinal_of(c));
    } catch (...) {  // the runtime is gone (process exit)
    }
  }
  bool can_access_peer(int ordinal, int peer) const override {
    int can = 0;
    check(api().hipDeviceCanAccessPeer(&can, ordinal, peer), "hipDeviceCanAccessPeer");
    return can != 0;
  }
  void enable_peer_access(NativeContext peer) const override {
    const hip::hipError_t r = api().hipDeviceEnablePeerAccess(ordinal_of(peer), 0);
    if (r != hip::kErrorPeerAccessAlreadyEnabled) check(r, "hipDeviceEnablePeerAccess");
  }

  void* allocate(std::size_t bytes, MemoryKind kind) const override {
    void* p = nullptr;
    if (kind == MemoryKind::signal) {
      check(api().hipExtMallocWithFlags(&p, bytes, hip::kDeviceMallocUncached),
            fmt::format("hipExtMallocWithFlags(uncached) of {} bytes", bytes).c_str());
    } else {
      check(api().hipMalloc(&p, bytes), fmt::format("hipMalloc of {} bytes", bytes).c_str());
    }
    return p;
  }
  void free(void* p) const noexcept override {
    try {
      api().hipFree(p);
    } catch (...) {}
  }
  void copy_to_device(void* to, const void* host, std::size_t bytes) const override {
    check(api().hipMemcpyHtoD(to, const_cast<void*>(host), bytes), "hipMemcpyHtoD");
    finish_default_stream();
  }
  void copy_to_host(void* host, const void* from, std::size_t bytes) const override {
    check(api().hipMemcpyDtoH(host, const_cast<void*>(from), bytes), "hipMemcpyDtoH");
  }
  void fill(void* to, std::uint8_t value, std::size_t bytes) const override {
    check(api().hipMemsetD8(to, value, bytes), "hipMemsetD8");
    finish_default_stream();
  }
  void copy_async(void* to, const void* from, std::size_t bytes, NativeStream s) const override {
    check(api().hipMemcpyDtoDAsync(to, const_cast<void*>(from), bytes, s), "hipMemcpyDtoDAsync");
  }

  void copy_rows_async(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch, std::size_t row_bytes,
                       std::size_t rows, NativeStream s) const override {
    check(api().hipMemcpy2DAsync(to, to_pitch, from, from_pitch, row_bytes, rows, hip::kMemcpyDeviceToDevice, s),
          "hipMemcpy2DAsync");
  }

  NativeStream create_stream() const override {
    hip::hipStream_t s = nullptr;
    check(api().hipStreamCreateWithFlags(&s, hip::kStreamNonBlocking), "hipStreamCreateWithFlags");
    return s;
  }
  void destroy_stream(NativeStream s) const noexcept override {
    quietly([&] { api().hipStreamDestroy(s); });
  }
  void synchronize(NativeStream s) const override { check(api().hipStreamSynchronize(s), "hipStreamSynchronize"); }
  void wait(NativeStream s, NativeEvent e) const override {
    check(api().hipStreamWaitEvent(s, e, 0), "hipStreamWaitEvent");
  }
  NativeEvent create_event() const override {
    hip::hipEvent_t e = nullptr;
    check(api().hipEventCreate(&e), "hipEventCreate");
    return e;
  }
  void destroy_event(NativeEvent e) const noexcept override {
    quietly([&] { api().hipEventDestroy(e); });
  }
  void record(NativeEvent e, NativeStream s) const override { check(api().hipEventRecord(e, s), "hipEventRecord"); }
  void synchronize_event(NativeEvent e) const override { check(api().hipEventSynchronize(e), "hipEventSynchronize"); }
  float elapsed_ms(NativeEvent start, NativeEvent end) const override {
    float ms = 0;
    check(api().hipEventElapsedTime(&ms, start, end), "hipEventElapsedTime");
    return ms;
  }

  void begin_capture(NativeStream s) const override {
    check(api().hipStreamBeginCapture(s, hip::kCaptureModeThreadLocal), "hipStreamBeginCapture");
  }
  bool capturing(NativeStream s) const override {
    int status = 0;
    check(api().hipStreamIsCapturing(s, &status), "hipStreamIsCapturing");
    return status != 0;
  }
  void abort_capture(NativeStream s) const noexcept override {
    quietly([&] {
      hip::hipGraph_t discard = nullptr;
      api().hipStreamEndCapture(s, &discard);
      if (discard != nullptr) api().hipGraphDestroy(discard);
    });
  }
  NativeGraph end_capture(NativeStream s) const override {
    const auto& a = api();
    hip::hipGraph_t graph = nullptr;
    check(a.hipStreamEndCapture(s, &graph), "hipStreamEndCapture");
    hip::hipGraphExec_t exec = nullptr;
    const hip::hipError_t r = a.hipGraphInstantiateWithFlags(&exec, graph, 0);
    a.hipGraphDestroy(graph);
    check(r, "hipGraphInstantiateWithFlags");
    return exec;
  }
  void launch_graph(NativeGraph g, NativeStream s) const override {
    check(api().hipGraphLaunch(g, s), "hipGraphLaunch");
  }
  void destroy_graph(NativeGraph g) const noexcept override {
    quietly([&] { api().hipGraphExecDestroy(g); });
  }

  NativeModule load_module(const std::vector<std::uint8_t>& payload) const override {
    hip::hipModule_t m = nullptr;
    check(api().hipModuleLoadData(&m, payload.data()), "hipModuleLoadData");
    return m;
  }
  void unload_module(NativeModule m) const noexcept override {
    quietly([&] { api().hipModuleUnload(m); });
  }
  NativeFunction function(NativeModule m, const std::string& name) const override {
    hip::hipFunction_t f = nullptr;
    check(api().hipModuleGetFunction(&f, m, name.c_str()), fmt::format("hipModuleGetFunction({})", name).c_str());
    return f;
  }
  void launch(NativeFunction f, unsigned grid, unsigned block, NativeStream s, void** args,
              bool /*programmatic_dependency: no HIP equivalent, an ordinary launch is correct*/) const override {
    check(api().hipModuleLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, args, nullptr), "hipModuleLaunchKernel");
  }
  int max_active_blocks(NativeFunction f, int block_threads) const override {
    int blocks = 0;
    check(api().hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, block_threads, 0),
          "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor");
    return blocks;
  }
  KernelResources resources(NativeFunction f) const override {
    const auto& a = api();
    KernelResources r;
    check(a.hipFuncGetAttribute(&r.registers, hip::kFuncAttrNumRegs, f), "hipFuncGetAttribute");
    check(a.hipFuncGetAttribute(&r.static_shared_bytes, hip::kFuncAttrSharedSizeBytes, f), "hipFuncGetAttribute");
    check(a.hipFuncGetAttribute(&r.local_bytes, hip::kFuncAttrLocalSizeBytes, f), "hipFuncGetAttribute");
    return r;
  }

  std::string export_ipc(const void* p) const override {
    hip::hipIpcMemHandle_t handle{};
    check(api().hipIpcGetMemHandle(&handle, const_cast<void*>(p)), "hipIpcGetMemHandle");
    return std::string(handle.reserved, sizeof(handle.reserved));
  }
  const void* allocation_base(const void* p) const override {
    void* base = nullptr;
    size_t bytes = 0;
    check(api().hipMemGetAddressRange(&base, &bytes, const_cast<void*>(p)), "hipMemGetAddressRange");
    return base;
  }
  void* open_ipc(const std::string& bytes) const override {
    hip::hipIpcMemHandle_t handle{};
    if (bytes.size() != sizeof(handle.reserved)) {
      throw Error(fmt::format("an IPC handle is {} bytes; got {}", sizeof(handle.reserved), bytes.size()));
    }
    std::memcpy(handle.reserved, bytes.data(), bytes.size());
    void* p = nullptr;
    check(api().hipIpcOpenMemHandle(&p, handle, hip::kIpcMemLazyEnablePeerAccess), "hipIpcOpenMemHandle");
    return p;
  }
  void close_ipc(void* p) const noexcept override {
    quietly([&] { api().hipIpcCloseMemHandle(p); });
  }

 private:
  // Destructors' calls: the runtime may already be gone at process exit; nothing is left then.
  template <typename Call>
  static void quietly(Call call) noexcept {
    try {
      call();
    } catch (...) {}
  }
};

}  // namespace

const Backend& hip_backend() {
  static const HipBackend instance;
  return instance;
}

}  // namespace arfuse::device
