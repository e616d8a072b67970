#include "runtime/device/hip_runtime.hpp"

#include <fmt/format.h>

#include <atomic>
#include <memory>

#include "arfuse/error.hpp"
#include "arfuse/target.hpp"

#include "base/dynamic_library.hpp"
#include "base/load_once.hpp"

namespace arfuse::hip {
namespace {

std::atomic<const Runtime*> emulated_runtime{nullptr};

struct LoadedRuntime {
  std::unique_ptr<DynamicLibrary> library;
  Runtime runtime;
};

void bind(const DynamicLibrary& lib, Api& a) {
  lib.bind(a.hipInit, "hipInit");
  lib.bind(a.hipGetErrorName, "hipGetErrorName");
  lib.bind(a.hipGetErrorString, "hipGetErrorString");
  lib.bind(a.hipRuntimeGetVersion, "hipRuntimeGetVersion");
  lib.bind(a.hipGetDeviceCount, "hipGetDeviceCount");
  lib.bind(a.hipDeviceGetAttribute, "hipDeviceGetAttribute");
  // ROCm 6 changed hipDeviceProp_t and kept the old layout under the old name.
  try {
    lib.bind(a.hipGetDeviceProperties, "hipGetDevicePropertiesR0600");
    a.gcn_arch_name_offset = kGcnArchNameOffsetR0600;
  } catch (const Unavailable&) {
    lib.bind(a.hipGetDeviceProperties, "hipGetDeviceProperties");
    a.gcn_arch_name_offset = kGcnArchNameOffsetR0000;
  }
  lib.bind(a.hipDeviceGetName, "hipDeviceGetName");
  lib.bind(a.hipDeviceGetPCIBusId, "hipDeviceGetPCIBusId");
  lib.bind(a.hipSetDevice, "hipSetDevice");
  lib.bind(a.hipDeviceCanAccessPeer, "hipDeviceCanAccessPeer");
  lib.bind(a.hipDeviceEnablePeerAccess, "hipDeviceEnablePeerAccess");
  lib.bind(a.hipMalloc, "hipMalloc");
  lib.bind(a.hipExtMallocWithFlags, "hipExtMallocWithFlags");
  lib.bind(a.hipFree, "hipFree");
  lib.bind(a.hipMemcpyHtoD, "hipMemcpyHtoD");
  lib.bind(a.hipMemcpyDtoH, "hipMemcpyDtoH");
  lib.bind(a.hipMemcpyDtoDAsync, "hipMemcpyDtoDAsync");
  lib.bind(a.hipMemcpy2DAsync, "hipMemcpy2DAsync");
  lib.bind(a.hipMemsetD8, "hipMemsetD8");
  lib.bind(a.hipStreamCreateWithFlags, "hipStreamCreateWithFlags");
  lib.bind(a.hipStreamDestroy, "hipStreamDestroy");
  lib.bind(a.hipStreamSynchronize, "hipStreamSynchronize");
  lib.bind(a.hipStreamWaitEvent, "hipStreamWaitEvent");
  lib.bind(a.hipEventCreate, "hipEventCreate");
  lib.bind(a.hipEventDestroy, "hipEventDestroy");
  lib.bind(a.hipEventRecord, "hipEventRecord");
  lib.bind(a.hipEventSynchronize, "hipEventSynchronize");
  lib.bind(a.hipEventElapsedTime, "hipEventElapsedTime");
  lib.bind(a.hipStreamBeginCapture, "hipStreamBeginCapture");
  lib.bind(a.hipStreamIsCapturing, "hipStreamIsCapturing");
  lib.bind(a.hipStreamEndCapture, "hipStreamEndCapture");
  lib.bind(a.hipGraphInstantiateWithFlags, "hipGraphInstantiateWithFlags");
  lib.bind(a.hipGraphLaunch, "hipGraphLaunch");
  lib.bind(a.hipGraphExecDestroy, "hipGraphExecDestroy");
  lib.bind(a.hipGraphDestroy, "hipGraphDestroy");
  lib.bind(a.hipModuleLoadData, "hipModuleLoadData");
  lib.bind(a.hipModuleUnload, "hipModuleUnload");
  lib.bind(a.hipModuleGetFunction, "hipModuleGetFunction");
  lib.bind(a.hipModuleLaunchKernel, "hipModuleLaunchKernel");
  lib.bind(a.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor, "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor");
  lib.bind(a.hipFuncGetAttribute, "hipFuncGetAttribute");
  lib.bind(a.hipIpcGetMemHandle, "hipIpcGetMemHandle");
  lib.bind(a.hipMemGetAddressRange, "hipMemGetAddressRange");
  lib.bind(a.hipIpcOpenMemHandle, "hipIpcOpenMemHandle");
  lib.bind(a.hipIpcCloseMemHandle, "hipIpcCloseMemHandle");
}

// hipRuntimeGetVersion's number: major * 10,000,000 + minor * 100,000 + patch.
std::string version_text(int v) { return fmt::format("{}.{}.{}", v / 10000000, (v / 100000) % 100, v % 100000); }

std::string describe_error(const Api& a, hipError_t r) {
  const char* name = a.hipGetErrorName(r);
  const char* text = a.hipGetErrorString(r);
  return fmt::format("{} ({}): {}", name ? name : "?", r, text ? text : "unknown error");
}

std::unique_ptr<LoadedRuntime> bind_runtime() {
  auto loaded = std::make_unique<LoadedRuntime>();
  loaded->library = std::make_unique<DynamicLibrary>(
      "the HIP runtime",
      with_rocm_folders({"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"}));
  Api& a = loaded->runtime.api;
  bind(*loaded->library, a);
  int version = 0;
  const std::string number = a.hipRuntimeGetVersion(&version) == kSuccess ? version_text(version) : "(version unknown)";
  loaded->runtime.description = fmt::format("HIP {} ({})", number, loaded->library->path());
  return loaded;
}

// The table, bound once; initialised or not.
const Runtime& bound() {
  if (const Runtime* r = emulated_runtime.load(std::memory_order_acquire)) return *r;
  static LoadOnce<LoadedRuntime> loaded;
  return loaded.get(bind_runtime).runtime;
}

struct Initialised {
  const Runtime* runtime;
};

std::unique_ptr<Initialised> initialise() {
  const Runtime& r = bound();
  const Api& a = r.api;
  const hipError_t init = a.hipInit(0);
  if (init != kSuccess) {
    throw Unavailable(fmt::format("{} is installed but has no usable AMD GPU: hipInit failed: {}", r.description,
                                  describe_error(a, init)));
  }
  int count = 0;
  const hipError_t c = a.hipGetDeviceCount(&count);
  if (c != kSuccess || count == 0) {
    throw Unavailable(fmt::format("{} finds no AMD GPU: hipGetDeviceCount {}", r.description,
                                  c != kSuccess ? describe_error(a, c) : std::string("returned 0 devices")));
  }
  return std::make_unique<Initialised>(Initialised{&r});
}

}  // namespace

const Runtime& runtime() {
  if (const Runtime* r = emulated_runtime.load(std::memory_order_acquire)) return *r;
  static LoadOnce<Initialised> initialised;
  return *initialised.get(initialise).runtime;
}

std::string bind_without_init() { return bound().description; }

void use_emulated_runtime(const Runtime* r) { emulated_runtime.store(r, std::memory_order_release); }

void check(hipError_t result, const char* call) {
  if (result == kSuccess) return;
  const Runtime& r = bound();
  throw DeviceError(fmt::format("{} failed: {} [{}]", call, describe_error(r.api, result), r.description), result);
}

std::string target_of_arch_name(const std::string& gcn_arch_name) {
  const std::string isa = gcn_arch_name.substr(0, gcn_arch_name.find(':'));
  try {
    return Target::parse(isa).name();
  } catch (const Error& e) {
    throw Error(fmt::format("the HIP device reports the architecture '{}', which arfuse does not know: {}",
                            gcn_arch_name, e.what()));
  }
}

}  // namespace arfuse::hip
