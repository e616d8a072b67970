// Internal to runtime/device/ (the HIP backend). The HIP runtime API, loaded with dlopen
// (libamdhip64.so of ROCm 7, 6 or 5, also from /opt/rocm*/lib), so one arfuse binary runs with
// or without ROCm. The table keeps HIP's own signatures and error codes; every value below is
// HIP's ABI (hip_runtime_api.h), stable across ROCm 5.2 to 7.
#pragma once

#include <cstddef>
#include <string>

#include "arfuse/error.hpp"

namespace arfuse::hip {

using hipError_t = int;
using hipStream_t = void*;
using hipEvent_t = void*;
using hipModule_t = void*;
using hipFunction_t = void*;
using hipGraph_t = void*;
using hipGraphExec_t = void*;

struct hipIpcMemHandle_t {
  char reserved[64];
};

constexpr hipError_t kSuccess = 0;
constexpr hipError_t kErrorNotReady = 600;
constexpr hipError_t kErrorNoDevice = 100;
constexpr hipError_t kErrorInvalidDevice = 101;
constexpr hipError_t kErrorPeerAccessAlreadyEnabled = 704;
// hipDeviceAttribute_t
constexpr int kMemcpyDeviceToDevice = 3;  // hipMemcpyKind
constexpr int kAttrMultiprocessorCount = 63;
constexpr int kAttrWarpSize = 87;
// hipFunction_attribute
constexpr int kFuncAttrNumRegs = 4;
constexpr int kFuncAttrSharedSizeBytes = 1;
constexpr int kFuncAttrLocalSizeBytes = 3;
constexpr unsigned kStreamNonBlocking = 1;
constexpr int kCaptureModeThreadLocal = 1;
constexpr unsigned kIpcMemLazyEnablePeerAccess = 0;  // HIP's value (CUDA's is 1)
// hipExtMallocWithFlags: memory whose writes bypass the caches, so a flag a peer stores over
// XGMI is seen by a spinning reader (fine-grained alone is not enough on MI300).
constexpr unsigned kDeviceMallocUncached = 3;
// Where hipDeviceProp_t keeps gcnArchName: ROCm 6 and 7 (hipGetDevicePropertiesR0600) and
// ROCm 5 (hipGetDeviceProperties, the R0000 layout); buffers are kPropertiesBytes, larger than both.
constexpr std::size_t kGcnArchNameOffsetR0600 = 1160;
constexpr std::size_t kGcnArchNameOffsetR0000 = 396;
constexpr std::size_t kPropertiesBytes = 4096;

struct Api {
  hipError_t (*hipInit)(unsigned);
  const char* (*hipGetErrorName)(hipError_t);
  const char* (*hipGetErrorString)(hipError_t);
  hipError_t (*hipRuntimeGetVersion)(int*);
  hipError_t (*hipGetDeviceCount)(int*);
  hipError_t (*hipDeviceGetAttribute)(int*, int, int);
  hipError_t (*hipGetDeviceProperties)(void*, int);  // the R0600 entry point where there is one
  std::size_t gcn_arch_name_offset;                  // where that entry point puts gcnArchName
  hipError_t (*hipDeviceGetName)(char*, int, int);
  hipError_t (*hipDeviceGetPCIBusId)(char*, int, int);
  hipError_t (*hipSetDevice)(int);
  hipError_t (*hipDeviceCanAccessPeer)(int*, int, int);
  hipError_t (*hipDeviceEnablePeerAccess)(int, unsigned);
  hipError_t (*hipMalloc)(void**, std::size_t);
  hipError_t (*hipExtMallocWithFlags)(void**, std::size_t, unsigned);
  hipError_t (*hipFree)(void*);
  hipError_t (*hipMemcpyHtoD)(void*, void*, std::size_t);
  hipError_t (*hipMemcpyDtoH)(void*, void*, std::size_t);
  hipError_t (*hipMemcpyDtoDAsync)(void*, void*, std::size_t, hipStream_t);
  // (to, to_pitch, from, from_pitch, row_bytes, rows, hipMemcpyKind, stream)
  hipError_t (*hipMemcpy2DAsync)(void*, std::size_t, const void*, std::size_t, std::size_t, std::size_t, int,
                                 hipStream_t);
  hipError_t (*hipMemsetD8)(void*, unsigned char, std::size_t);
  hipError_t (*hipStreamCreateWithFlags)(hipStream_t*, unsigned);
  hipError_t (*hipStreamDestroy)(hipStream_t);
  hipError_t (*hipStreamSynchronize)(hipStream_t);
  hipError_t (*hipStreamWaitEvent)(hipStream_t, hipEvent_t, unsigned);
  hipError_t (*hipEventCreate)(hipEvent_t*);
  hipError_t (*hipEventDestroy)(hipEvent_t);
  hipError_t (*hipEventRecord)(hipEvent_t, hipStream_t);
  hipError_t (*hipEventSynchronize)(hipEvent_t);
  hipError_t (*hipEventElapsedTime)(float*, hipEvent_t, hipEvent_t);
  hipError_t (*hipStreamBeginCapture)(hipStream_t, int);
  hipError_t (*hipStreamIsCapturing)(hipStream_t, int*);  // status: 0 none, 1 active, 2 invalidated
  hipError_t (*hipStreamEndCapture)(hipStream_t, hipGraph_t*);
  hipError_t (*hipGraphInstantiateWithFlags)(hipGraphExec_t*, hipGraph_t, unsigned long long);
  hipError_t (*hipGraphLaunch)(hipGraphExec_t, hipStream_t);
  hipError_t (*hipGraphExecDestroy)(hipGraphExec_t);
  hipError_t (*hipGraphDestroy)(hipGraph_t);
  hipError_t (*hipModuleLoadData)(hipModule_t*, const void*);
  hipError_t (*hipModuleUnload)(hipModule_t);
  hipError_t (*hipModuleGetFunction)(hipFunction_t*, hipModule_t, const char*);
  hipError_t (*hipModuleLaunchKernel)(hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, hipStream_t, void**, void**);
  hipError_t (*hipModuleOccupancyMaxActiveBlocksPerMultiprocessor)(int*, hipFunction_t, int, std::size_t);
  hipError_t (*hipFuncGetAttribute)(int*, int, hipFunction_t);
  hipError_t (*hipIpcGetMemHandle)(hipIpcMemHandle_t*, void*);
  hipError_t (*hipMemGetAddressRange)(void**, size_t*, void*);
  hipError_t (*hipIpcOpenMemHandle)(void**, hipIpcMemHandle_t, unsigned);
  hipError_t (*hipIpcCloseMemHandle)(void*);
};

// The loaded runtime: its table and what it is ("HIP 5.2.21153 (/usr/lib/.../libamdhip64.so.5)").
struct Runtime {
  Api api{};
  std::string description;
};

// Loads libamdhip64 once (base/load_once.hpp) and calls hipInit; throws Unavailable naming the
// library and its version when it does not load or finds no AMD GPU.
const Runtime& runtime();
inline const Api& api() { return runtime().api; }

// Throws DeviceError naming `call`, HIP's error name and text, and the runtime, when result != 0.
void check(hipError_t result, const char* call);

// "gfx942" from gcnArchName "gfx942:sramecc+:xnack-" (the feature suffixes name the ISA's
// modes, not another ISA); throws Error for a name that is not an AMD (or, through the test
// adapter, NVIDIA) target.
std::string target_of_arch_name(const std::string& gcn_arch_name);

// Loads libamdhip64 and binds every entry point without initialising it; its description.
// Throws Unavailable when the library or an entry point is missing. For the tests of the
// binding on machines without an AMD GPU.
std::string bind_without_init();

// For the HIP-over-CUDA emulation only (tools/hip_over_cuda/, used by the tests and the bench):
// the table to use instead of loading libamdhip64. Must be called before the first runtime() call.
void use_emulated_runtime(const Runtime* runtime);

}  // namespace arfuse::hip
