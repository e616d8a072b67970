// HIP-shaped calls on an NVIDIA GPU: the HIP backend's table (arfuse/runtime/device/
// hip_runtime.hpp) filled with HIP entry points implemented 1:1 over the CUDA driver, so that
// everything of the HIP backend except libamdhip64 itself runs on an NVIDIA GPU. A development
// tool: used by the test binary when HIP_OVER_CUDA_FOR_TESTS=1 (tests/support/main.cpp) and by
// arfuse-bench --backend hip-over-cuda; never part of libarfuse, and never used when the real HIP
// runtime is asked for.
#pragma once

#include <cstdlib>
#include <cstring>

namespace arfuse::tools {

// Whether this test run asks for the adapter (HIP_OVER_CUDA_FOR_TESTS=1).
inline bool hip_over_cuda_requested() {
  const char* v = std::getenv("HIP_OVER_CUDA_FOR_TESTS");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// Makes the HIP backend use the adapter and selects that backend (ARFUSE_DEVICE_BACKEND=hip).
void install_hip_over_cuda();

}  // namespace arfuse::tools
