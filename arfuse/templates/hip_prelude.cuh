// HIP's device vocabulary for a clang with the AMDGPU back end and no ROCm headers (the clang
// back end, jit/amd_clang_compiler.cpp, passes it with -include; hiprtc brings its own). Only
// what the templates use, each on a clang builtin, with hiprtc's semantics: IEEE sqrt and
// division stay correctly rounded (clang's default for HIP), shuffles are ds_bpermute,
// atomicCAS is device-scoped.
#pragma once

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))

// threadIdx.x and friends read the hardware registers through a property, as HIP's do.
struct arfuse_hip_thread_idx {
  __declspec(property(get = get_x)) unsigned x;
  __device__ static unsigned get_x() { return __builtin_amdgcn_workitem_id_x(); }
};
struct arfuse_hip_block_idx {
  __declspec(property(get = get_x)) unsigned x;
  __device__ static unsigned get_x() { return __builtin_amdgcn_workgroup_id_x(); }
};
struct arfuse_hip_block_dim {
  __declspec(property(get = get_x)) unsigned x;
  __device__ static unsigned get_x() { return __builtin_amdgcn_workgroup_size_x(); }
};
struct arfuse_hip_grid_dim {
  __declspec(property(get = get_x)) unsigned x;
  __device__ static unsigned get_x() { return __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(); }
};
extern const __device__ __attribute__((weak)) arfuse_hip_thread_idx threadIdx;
extern const __device__ __attribute__((weak)) arfuse_hip_block_idx blockIdx;
extern const __device__ __attribute__((weak)) arfuse_hip_block_dim blockDim;
extern const __device__ __attribute__((weak)) arfuse_hip_grid_dim gridDim;

// Workgroup barrier with the workgroup-scope fences HIP's __syncthreads() implies.
__device__ inline void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

__device__ inline int arfuse_hip_lane_id() {
  return int(__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u)));
}

// Lane self ^ lane_mask within groups of `width` lanes (a lane outside the group reads its own
// value), through the LDS crossbar (ds_bpermute), as HIP's __shfl_xor.
__device__ inline float __shfl_xor(float v, int lane_mask, int width) {
  const int self = arfuse_hip_lane_id();
  const int index = self ^ lane_mask;
  const int source = index >= ((self + width) & ~(width - 1)) ? self : index;
  return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(source << 2, __builtin_bit_cast(int, v)));
}

__device__ inline unsigned atomicCAS(unsigned* address, unsigned compare, unsigned value) {
  __hip_atomic_compare_exchange_strong(address, &compare, value, __ATOMIC_RELAXED, __ATOMIC_RELAXED,
                                       __HIP_MEMORY_SCOPE_AGENT);
  return compare;  // the old value
}

__device__ inline float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
__device__ inline unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
__device__ inline float sqrtf(float x) { return __builtin_sqrtf(x); }
__device__ inline float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__device__ inline float fabsf(float x) { return __builtin_fabsf(x); }
__device__ inline float fminf(float a, float b) { return __builtin_fminf(a, b); }
__device__ inline float copysignf(float x, float y) { return __builtin_copysignf(x, y); }
__device__ inline int min(int a, int b) { return a < b ? a : b; }
__device__ inline int max(int a, int b) { return a > b ? a : b; }
