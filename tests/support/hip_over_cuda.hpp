// HIP-shaped calls on an NVIDIA GPU: the HIP backend's table (arfuse/runtime/device/
// hip_runtime.hpp) filled with HIP entry points implemented 1:1 over the CUDA driver, so that
// everything of the HIP backend except libamdhip64 itself runs on the H200. Used by the test
// binary when HIP_OVER_CUDA_FOR_TESTS=1 (tests/support/main.cpp) and by arfuse-bench --backend
// hip-over-cuda; never part of libarfuse, and never used when the real HIP runtime is asked for.
#pragma once

namespace arfuse::test {

// Makes the HIP backend use the adapter and selects that backend (ARFUSE_DEVICE_BACKEND=hip).
void install_hip_over_cuda();

}  // namespace arfuse::test
