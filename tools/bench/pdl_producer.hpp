// The producer kernel of the programmatic-dependent-launch (PDL) bench rows and tests: a copy
// that lets the kernel after it on the stream be scheduled as soon as all its blocks have
// started, as a GEMM written for PDL would; the consumer must then wait for it itself. Source
// text for NVRTC (sm_90 and later have the trigger; elsewhere it is a plain copy). Header-only,
// for the tests and arfuse-bench; never installed.
#pragma once

#include <cstddef>

namespace arfuse::testing {

inline constexpr const char* kProducerName = "produce";
inline constexpr int kProducerThreads = 128;
inline constexpr const char* kProducerSource = R"(
extern "C" __global__ void produce(const uint4* __restrict__ in, uint4* __restrict__ out, long long n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const long long i = (long long)blockIdx.x * blockDim.x * 2 + threadIdx.x;
  uint4 a, b;
  if (i < n) a = in[i];
  if (i + blockDim.x < n) b = in[i + blockDim.x];
  if (i < n) out[i] = a;
  if (i + blockDim.x < n) out[i + blockDim.x] = b;
})";

// Blocks for a copy of `bytes` (a multiple of 16): two 16-byte vectors per thread.
inline unsigned producer_blocks(std::size_t bytes) {
  const std::size_t vectors = bytes / 16, per_block = std::size_t(kProducerThreads) * 2;
  return unsigned((vectors + per_block - 1) / per_block);
}

}  // namespace arfuse::testing
