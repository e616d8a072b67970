#include "hip_over_cuda.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "runtime/device/cuda_driver.hpp"
#include "runtime/device/hip_runtime.hpp"

namespace arfuse::tools {
namespace {

using cuda::driver;
using hip::hipError_t;

constexpr int kCuAttrWarpSize = 10;
constexpr int kCuAttrMultiprocessorCount = 16;
constexpr hipError_t kHipErrorInvalidValue = 1;

cuda::CUdeviceptr ptr(const void* p) { return reinterpret_cast<cuda::CUdeviceptr>(p); }

// HIP's runtime owns one context per device and makes it current with hipSetDevice: the
// primary context, retained once and kept for the process (as the HIP runtime keeps its own).
cuda::CUcontext primary_context(int ordinal, hipError_t& error) {
  static std::mutex mutex;
  static cuda::CUcontext contexts[64] = {};
  std::lock_guard<std::mutex> lock(mutex);
  if (ordinal < 0 || ordinal >= 64) return error = 101, nullptr;  // hipErrorInvalidDevice
  if (contexts[ordinal] == nullptr) {
    cuda::CUdevice device = 0;
    error = driver().cuDeviceGet(&device, ordinal);
    if (error == 0) error = driver().cuDevicePrimaryCtxRetain(&contexts[ordinal], device);
    if (error != 0) return nullptr;
  }
  error = 0;
  return contexts[ordinal];
}

hipError_t set_device(int ordinal) {
  hipError_t error = 0;
  cuda::CUcontext c = primary_context(ordinal, error);
  return error != 0 ? error : driver().cuCtxSetCurrent(c);
}

hipError_t device_attribute(int* value, int attr, int ordinal) {
  // Only the attributes the HIP backend asks for; HIP's numbering differs from CUDA's.
  int cu_attr = attr == hip::kAttrMultiprocessorCount ? kCuAttrMultiprocessorCount
                : attr == hip::kAttrWarpSize          ? kCuAttrWarpSize
                                                      : -1;
  if (cu_attr < 0) return kHipErrorInvalidValue;
  cuda::CUdevice device = 0;
  if (hipError_t e = driver().cuDeviceGet(&device, ordinal)) return e;
  return driver().cuDeviceGetAttribute(value, cu_attr, device);
}

// The R0600 properties with gcnArchName filled: an NVIDIA GPU names its architecture "sm_90".
hipError_t device_properties(void* properties, int ordinal) {
  cuda::CUdevice device = 0;
  if (hipError_t e = driver().cuDeviceGet(&device, ordinal)) return e;
  int major = 0, minor = 0;
  if (hipError_t e = driver().cuDeviceGetAttribute(&major, cuda::kAttrComputeCapabilityMajor, device)) return e;
  if (hipError_t e = driver().cuDeviceGetAttribute(&minor, cuda::kAttrComputeCapabilityMinor, device)) return e;
  char* arch = static_cast<char*>(properties) + hip::kGcnArchNameOffsetR0600;
  std::snprintf(arch, 256, "sm_%d%d", major, minor);
  return 0;
}

hip::Runtime make_runtime() {
  hip::Runtime r;
  r.description = "HIP over the CUDA driver (the development adapter, tools/hip_over_cuda/hip_over_cuda.cpp)";
  hip::Api& a = r.api;
  a.hipInit = [](unsigned) -> hipError_t { return driver().cuInit(0); };
  a.hipGetErrorName = [](hipError_t e) -> const char* {
    const char* name = nullptr;
    driver().cuGetErrorName(e, &name);
    return name;
  };
  a.hipGetErrorString = [](hipError_t e) -> const char* {
    const char* text = nullptr;
    driver().cuGetErrorString(e, &text);
    return text;
  };
  a.hipRuntimeGetVersion = [](int* v) -> hipError_t { return driver().cuDriverGetVersion(v); };
  a.hipGetDeviceCount = [](int* n) -> hipError_t { return driver().cuDeviceGetCount(n); };
  a.hipDeviceGetAttribute = device_attribute;
  a.hipGetDeviceProperties = device_properties;
  a.gcn_arch_name_offset = hip::kGcnArchNameOffsetR0600;
  a.hipDeviceGetName = [](char* name, int length, int ordinal) -> hipError_t {
    cuda::CUdevice device = 0;
    if (hipError_t e = driver().cuDeviceGet(&device, ordinal)) return e;
    return driver().cuDeviceGetName(name, length, device);
  };
  a.hipDeviceGetPCIBusId = [](char* bus, int length, int ordinal) -> hipError_t {
    cuda::CUdevice device = 0;
    if (hipError_t e = driver().cuDeviceGet(&device, ordinal)) return e;
    return driver().cuDeviceGetPCIBusId(bus, length, device);
  };
  a.hipSetDevice = set_device;
  a.hipDeviceCanAccessPeer = [](int* can, int ordinal, int peer) -> hipError_t {
    cuda::CUdevice d = 0, p = 0;
    if (hipError_t e = driver().cuDeviceGet(&d, ordinal)) return e;
    if (hipError_t e = driver().cuDeviceGet(&p, peer)) return e;
    return driver().cuDeviceCanAccessPeer(can, d, p);
  };
  a.hipDeviceEnablePeerAccess = [](int peer, unsigned) -> hipError_t {
    hipError_t error = 0;
    cuda::CUcontext c = primary_context(peer, error);
    return error != 0 ? error : driver().cuCtxEnablePeerAccess(c, 0);
  };
  a.hipMalloc = [](void** p, std::size_t bytes) -> hipError_t {
    return driver().cuMemAlloc(reinterpret_cast<cuda::CUdeviceptr*>(p), bytes);
  };
  // NVIDIA has no uncached device memory type: the flags are dropped, as coherence of the
  // flags comes from the kernels' system-scope accesses there.
  a.hipExtMallocWithFlags = [](void** p, std::size_t bytes, unsigned) -> hipError_t {
    return driver().cuMemAlloc(reinterpret_cast<cuda::CUdeviceptr*>(p), bytes);
  };
  a.hipFree = [](void* p) -> hipError_t { return driver().cuMemFree(ptr(p)); };
  a.hipMemcpyHtoD = [](void* to, void* from, std::size_t n) -> hipError_t {
    return driver().cuMemcpyHtoD(ptr(to), from, n);
  };
  a.hipMemcpyDtoH = [](void* to, void* from, std::size_t n) -> hipError_t {
    return driver().cuMemcpyDtoH(to, ptr(from), n);
  };
  a.hipMemcpyDtoDAsync = [](void* to, void* from, std::size_t n, void* s) -> hipError_t {
    return driver().cuMemcpyDtoDAsync(ptr(to), ptr(from), n, static_cast<cuda::CUstream>(s));
  };
  a.hipMemcpy2DAsync = [](void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch,
                          std::size_t row_bytes, std::size_t rows, int, void* s) -> hipError_t {
    cuda::CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = copy.dstMemoryType = cuda::kMemoryTypeDevice;
    copy.srcDevice = ptr(from), copy.srcPitch = from_pitch;
    copy.dstDevice = ptr(to), copy.dstPitch = to_pitch;
    copy.WidthInBytes = row_bytes, copy.Height = rows;
    return driver().cuMemcpy2DAsync(&copy, static_cast<cuda::CUstream>(s));
  };
  a.hipMemsetD8 = [](void* to, unsigned char v, std::size_t n) -> hipError_t {
    return driver().cuMemsetD8(ptr(to), v, n);
  };
  a.hipStreamCreateWithFlags = [](void** s, unsigned flags) -> hipError_t {
    return driver().cuStreamCreate(reinterpret_cast<cuda::CUstream*>(s), flags);
  };
  a.hipStreamDestroy = [](void* s) -> hipError_t { return driver().cuStreamDestroy(static_cast<cuda::CUstream>(s)); };
  a.hipStreamSynchronize = [](void* s) -> hipError_t {
    return driver().cuStreamSynchronize(static_cast<cuda::CUstream>(s));
  };
  a.hipStreamWaitEvent = [](void* s, void* e, unsigned flags) -> hipError_t {
    return driver().cuStreamWaitEvent(static_cast<cuda::CUstream>(s), static_cast<cuda::CUevent>(e), flags);
  };
  a.hipEventCreate = [](void** e) -> hipError_t {
    return driver().cuEventCreate(reinterpret_cast<cuda::CUevent*>(e), 0);
  };
  a.hipEventDestroy = [](void* e) -> hipError_t { return driver().cuEventDestroy(static_cast<cuda::CUevent>(e)); };
  a.hipEventRecord = [](void* e, void* s) -> hipError_t {
    return driver().cuEventRecord(static_cast<cuda::CUevent>(e), static_cast<cuda::CUstream>(s));
  };
  a.hipEventSynchronize = [](void* e) -> hipError_t {
    return driver().cuEventSynchronize(static_cast<cuda::CUevent>(e));
  };
  a.hipEventElapsedTime = [](float* ms, void* start, void* end) -> hipError_t {
    return driver().cuEventElapsedTime(ms, static_cast<cuda::CUevent>(start), static_cast<cuda::CUevent>(end));
  };
  a.hipStreamBeginCapture = [](void* s, int mode) -> hipError_t {
    return driver().cuStreamBeginCapture(static_cast<cuda::CUstream>(s), mode);
  };
  a.hipStreamIsCapturing = [](void* s, int* status) -> hipError_t {
    return driver().cuStreamIsCapturing(static_cast<cuda::CUstream>(s), status);
  };
  a.hipStreamEndCapture = [](void* s, void** g) -> hipError_t {
    return driver().cuStreamEndCapture(static_cast<cuda::CUstream>(s), reinterpret_cast<cuda::CUgraph*>(g));
  };
  a.hipGraphInstantiateWithFlags = [](void** exec, void* g, unsigned long long flags) -> hipError_t {
    return driver().cuGraphInstantiateWithFlags(reinterpret_cast<cuda::CUgraphExec*>(exec),
                                                static_cast<cuda::CUgraph>(g), flags);
  };
  a.hipGraphLaunch = [](void* exec, void* s) -> hipError_t {
    return driver().cuGraphLaunch(static_cast<cuda::CUgraphExec>(exec), static_cast<cuda::CUstream>(s));
  };
  a.hipGraphExecDestroy = [](void* exec) -> hipError_t {
    return driver().cuGraphExecDestroy(static_cast<cuda::CUgraphExec>(exec));
  };
  a.hipGraphDestroy = [](void* g) -> hipError_t { return driver().cuGraphDestroy(static_cast<cuda::CUgraph>(g)); };
  a.hipModuleLoadData = [](void** m, const void* image) -> hipError_t {
    return driver().cuModuleLoadData(reinterpret_cast<cuda::CUmodule*>(m), image);
  };
  a.hipModuleUnload = [](void* m) -> hipError_t { return driver().cuModuleUnload(static_cast<cuda::CUmodule>(m)); };
  a.hipModuleGetFunction = [](void** f, void* m, const char* name) -> hipError_t {
    return driver().cuModuleGetFunction(reinterpret_cast<cuda::CUfunction*>(f), static_cast<cuda::CUmodule>(m), name);
  };
  a.hipModuleLaunchKernel = [](void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned shared, void* s, void** args, void** extra) -> hipError_t {
    return driver().cuLaunchKernel(static_cast<cuda::CUfunction>(f), gx, gy, gz, bx, by, bz, shared,
                                   static_cast<cuda::CUstream>(s), args, extra);
  };
  a.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor = [](int* n, void* f, int threads,
                                                            std::size_t shared) -> hipError_t {
    return driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(n, static_cast<cuda::CUfunction>(f), threads, shared);
  };
  // HIP's function attribute numbers are CUDA's.
  a.hipFuncGetAttribute = [](int* v, int attr, void* f) -> hipError_t {
    return driver().cuFuncGetAttribute(v, attr, static_cast<cuda::CUfunction>(f));
  };
  a.hipIpcGetMemHandle = [](hip::hipIpcMemHandle_t* h, void* p) -> hipError_t {
    return driver().cuIpcGetMemHandle(reinterpret_cast<cuda::IpcMemHandle*>(h), ptr(p));
  };
  // HIP's lazy-peer-access flag is 0 and CUDA's is 1: the one value that needs translating.
  a.hipIpcOpenMemHandle = [](void** p, hip::hipIpcMemHandle_t h, unsigned flags) -> hipError_t {
    cuda::IpcMemHandle handle{};
    std::memcpy(handle.reserved, h.reserved, sizeof(handle.reserved));
    const unsigned cu_flags = flags == hip::kIpcMemLazyEnablePeerAccess ? cuda::kIpcMemLazyEnablePeerAccess : flags;
    return driver().cuIpcOpenMemHandle(reinterpret_cast<cuda::CUdeviceptr*>(p), handle, cu_flags);
  };
  a.hipIpcCloseMemHandle = [](void* p) -> hipError_t { return driver().cuIpcCloseMemHandle(ptr(p)); };
  a.hipMemGetAddressRange = [](void** base, std::size_t* bytes, void* p) -> hipError_t {
    return driver().cuMemGetAddressRange(reinterpret_cast<cuda::CUdeviceptr*>(base), bytes, ptr(p));
  };
  return r;
}

}  // namespace

void install_hip_over_cuda() {
  static const hip::Runtime runtime = make_runtime();
  hip::use_emulated_runtime(&runtime);
  setenv("ARFUSE_DEVICE_BACKEND", "hip", 1);
}

}  // namespace arfuse::tools
