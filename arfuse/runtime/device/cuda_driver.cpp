#include "runtime/device/cuda_driver.hpp"

#include <fmt/format.h>

#include <memory>

#include "arfuse/error.hpp"

#include "base/dynamic_library.hpp"
#include "base/load_once.hpp"

namespace arfuse::cuda {
namespace {

// Versioned names are the ones cuda.h maps the plain names to (the _v2 ABI).
Driver bind_driver(const DynamicLibrary& lib) {
  Driver d{};
  lib.bind(d.cuInit, "cuInit");
  lib.bind(d.cuGetErrorString, "cuGetErrorString");
  lib.bind(d.cuGetErrorName, "cuGetErrorName");
  lib.bind(d.cuDriverGetVersion, "cuDriverGetVersion");
  lib.bind(d.cuDeviceGetCount, "cuDeviceGetCount");
  lib.bind(d.cuDeviceGet, "cuDeviceGet");
  lib.bind(d.cuDeviceGetName, "cuDeviceGetName");
  lib.bind(d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  lib.bind(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  lib.bind(d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  lib.bind(d.cuCtxSetCurrent, "cuCtxSetCurrent");
  lib.bind(d.cuCtxSynchronize, "cuCtxSynchronize");
  lib.bind(d.cuMemAlloc, "cuMemAlloc_v2");
  lib.bind(d.cuMemFree, "cuMemFree_v2");
  lib.bind(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  lib.bind(d.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  lib.bind(d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  lib.bind(d.cuMemcpy2DAsync, "cuMemcpy2DAsync_v2");
  lib.bind(d.cuMemsetD8, "cuMemsetD8_v2");
  lib.bind(d.cuMemsetD8Async, "cuMemsetD8Async");
  lib.bind(d.cuModuleLoadData, "cuModuleLoadData");
  lib.bind(d.cuModuleUnload, "cuModuleUnload");
  lib.bind(d.cuModuleGetFunction, "cuModuleGetFunction");
  lib.bind(d.cuFuncGetAttribute, "cuFuncGetAttribute");
  lib.bind(d.cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  lib.bind(d.cuLaunchKernel, "cuLaunchKernel");
  lib.bind_if_present(d.cuLaunchKernelEx, "cuLaunchKernelEx");
  lib.bind(d.cuStreamCreate, "cuStreamCreate");
  lib.bind(d.cuStreamDestroy, "cuStreamDestroy_v2");
  lib.bind(d.cuStreamSynchronize, "cuStreamSynchronize");
  lib.bind(d.cuStreamBeginCapture, "cuStreamBeginCapture_v2");
  lib.bind(d.cuStreamIsCapturing, "cuStreamIsCapturing");
  lib.bind(d.cuStreamEndCapture, "cuStreamEndCapture");
  lib.bind(d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
  lib.bind(d.cuGraphLaunch, "cuGraphLaunch");
  lib.bind(d.cuGraphExecDestroy, "cuGraphExecDestroy");
  lib.bind(d.cuGraphDestroy, "cuGraphDestroy");
  lib.bind(d.cuEventCreate, "cuEventCreate");
  lib.bind(d.cuEventDestroy, "cuEventDestroy_v2");
  lib.bind(d.cuEventRecord, "cuEventRecord");
  lib.bind(d.cuEventSynchronize, "cuEventSynchronize");
  lib.bind(d.cuEventElapsedTime, "cuEventElapsedTime");
  lib.bind(d.cuStreamWaitEvent, "cuStreamWaitEvent");
  lib.bind(d.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer");
  lib.bind(d.cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess");
  lib.bind(d.cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId");
  lib.bind(d.cuIpcGetMemHandle, "cuIpcGetMemHandle");
  lib.bind(d.cuMemGetAddressRange, "cuMemGetAddressRange_v2");
  lib.bind(d.cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2");
  lib.bind(d.cuIpcCloseMemHandle, "cuIpcCloseMemHandle");
  return d;
}

}  // namespace

void check(CUresult result, const char* call) {
  if (result == 0) return;
  const char* name = nullptr;
  const char* text = nullptr;
  const Driver& d = driver();
  d.cuGetErrorName(result, &name);
  d.cuGetErrorString(result, &text);
  throw DeviceError(
      fmt::format("{} failed: {} ({}): {}", call, name ? name : "?", result, text ? text : "unknown error"), result);
}

namespace {

struct LoadedDriver {
  std::unique_ptr<DynamicLibrary> library;
  Driver api{};
};

std::unique_ptr<LoadedDriver> load_driver() {
  auto loaded = std::make_unique<LoadedDriver>();
  loaded->library =
      std::make_unique<DynamicLibrary>("the CUDA driver", std::vector<std::string>{"libcuda.so.1", "libcuda.so"});
  loaded->api = bind_driver(*loaded->library);
  const CUresult r = loaded->api.cuInit(0);
  if (r != 0) {
    const char* text = nullptr;
    loaded->api.cuGetErrorString(r, &text);
    throw Unavailable(
        fmt::format("the CUDA driver is installed but cuInit failed ({}): {}", r, text ? text : "no usable GPU"));
  }
  return loaded;
}

}  // namespace

const Driver& driver() {
  static LoadOnce<LoadedDriver> loaded;
  return loaded.get(load_driver).api;
}

}  // namespace arfuse::cuda
