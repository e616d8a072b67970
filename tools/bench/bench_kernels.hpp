// The bench's own kernels (not arfuse modules): the copies behind the ceiling and the floor
// at each size. Source text for NVRTC, header-only so that a [cpu] test compiles every one of
// them before a GPU run does; for arfuse-bench and the tests, never installed.
#pragma once

#include <fmt/format.h>

#include <string>

namespace arfuse::testing {

// Copy kernels with more bytes in flight per thread than one 16-byte vector: U loads issued
// before any store (coalesced: vector i + k * blockDim), optionally with the streaming cache
// hints (evict-first loads and stores), which keep a 1 GiB stream from churning L2. Either a
// persistent grid (a few blocks per SM, striding over the buffer) or one block per
// blockDim * U vectors (each block's span contiguous, as PyTorch's elementwise kernels do).
struct CopyVariant {
  int unroll;
  bool streaming;
  bool persistent;
  int threads;
};

inline std::string copy_kernel_source(const CopyVariant& v) {
  const char* load = v.streaming ? "__ldcs(&in[j])" : "in[j]";
  const char* store = v.streaming ? "__stcs(&out[j], v[k])" : "out[j] = v[k]";
  return fmt::format(R"(
extern "C" __global__ void copy(const uint4* __restrict__ in, uint4* __restrict__ out, long long n) {{
  constexpr int U = {0};
  const long long step = {3} ? (long long)gridDim.x * blockDim.x * U : n;
  for (long long base = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; base < n; base += step) {{
    uint4 v[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {{
      const long long j = base + (long long)k * blockDim.x;
      if (j < n) v[k] = {1};
    }}
#pragma unroll
    for (int k = 0; k < U; ++k) {{
      const long long j = base + (long long)k * blockDim.x;
      if (j < n) {2};
    }}
  }}
}})",
                     v.unroll, load, store, v.persistent ? 1 : 0);
}

// Every variant arfuse-bench times for the ceiling; the first one-shot 128 x 2 is the best on
// the H200 and the one the floor rows use.
inline const CopyVariant kCopyVariants[] = {{1, false, true, 512},  {8, false, true, 512},  {8, true, true, 512},
                                            {2, false, false, 128}, {4, false, false, 128}, {8, false, false, 128},
                                            {4, true, false, 128},  {4, false, false, 64},  {4, false, false, 256}};

// Reads vectors [0, n_read) and writes vectors [0, n_write): a copy where they overlap, a plain
// read or a plain write beyond. One block of kStreamThreads per kStreamThreads x 2 vectors, as
// the best copy kernel. A value read but not written feeds an impossible store, so the load stays.
inline constexpr int kStreamThreads = 128;
inline unsigned stream_blocks(long long vectors) {
  const long long per_block = kStreamThreads * 2;
  return unsigned(vectors > 0 ? (vectors + per_block - 1) / per_block : 1);
}
inline constexpr const char* kStreamSource = R"(
extern "C" __global__ void stream(const uint4* __restrict__ in, uint4* __restrict__ out, long long n_read,
                                  long long n_write) {
  const long long base = (long long)blockIdx.x * blockDim.x * 2 + threadIdx.x;
  uint4 v[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const long long j = base + (long long)k * blockDim.x;
    if (j < n_read) {
      v[k] = in[j];
    } else {
      v[k].x = unsigned(j), v[k].y = 1u, v[k].z = 2u, v[k].w = 3u;
    }
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const long long j = base + (long long)k * blockDim.x;
    if (j < n_write) {
      out[j] = v[k];
    } else if (v[k].x == 0x9e3779b9u && v[k].y == unsigned(n_write) && n_write < 0) {
      out[0] = v[k];
    }
  }
})";

}  // namespace arfuse::testing
