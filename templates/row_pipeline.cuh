// The row pipeline: while a block works on one row, the loads of its next row (row +
// gridDim.x) are already in flight into shared memory, so the memory system is busy during
// the reductions and stores that would otherwise leave it idle. Only where the hardware has
// asynchronous copies, and only when the launch gave the kernel the slots' shared memory
// (jit/row_pipeline.hpp sizes them, the runtime decides; 0 bytes means no pipeline).
//
// Values, their order and every rounding stay as on the direct path: only where a thread
// waits for its loads changes.
#pragma once

#include "epilogue.cuh"

namespace arfuse {

__device__ __forceinline__ Vec16* row_slot_memory() {
  extern __shared__ Vec16 arfuse_row_slots[];
  return arfuse_row_slots;
}

// Rows of VPT vectors per thread from several sources. Slot (source, k) of thread t is
// row_slot_memory()[(source * VPT + k) * THREADS + t]: a warp's copies fill 512 contiguous
// bytes, and each thread reads back only the slots it filled, so its own wait suffices (no
// block barrier).
template <typename T, int H, int THREADS, int VPT>
struct RowSlots {
  Vec16* mine = row_slot_memory() + threadIdx.x;

  // Starts the copies of this thread's vectors of `row` into the slots of SOURCE.
  template <int SOURCE>
  __device__ __forceinline__ void fetch(const T* row) const {
    fetch_vectors<SOURCE, 0>(row + threadIdx.x * 8);
  }
  // Sources SOURCE, SOURCE + 1, ... from rows[0], rows[1], ... (offset by `offset` elements).
  template <int SOURCE, int COUNT>
  __device__ __forceinline__ void fetch_each(const void* const* rows, long long offset) const {
    if constexpr (COUNT > 0) {
      fetch<SOURCE>(static_cast<const T*>(rows[0]) + offset);
      fetch_each<SOURCE + 1, COUNT - 1>(rows + 1, offset);
    }
  }
  // After async_copy_wait_all(): this thread's vector k of `source`.
  __device__ __forceinline__ Vec16 at(int source, int k) const { return mine[(source * VPT + k) * THREADS]; }
  __device__ __forceinline__ void read(int source, Vec16 (&v)[VPT]) const {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      if (owns_vector<H, THREADS>(k)) v[k] = at(source, k);
    }
  }

 private:
  // Recursion instead of a loop, so that both offsets are constant expressions (immediates).
  template <int SOURCE, int K>
  __device__ __forceinline__ void fetch_vectors(const T* vectors) const {
    if constexpr (K < VPT) {
      if (owns_vector<H, THREADS>(K)) {
        async_copy16_l2<(SOURCE * VPT + K) * THREADS * 16, K * THREADS * 16>(mine, vectors);
      }
      fetch_vectors<SOURCE, K + 1>(vectors);
    }
  }
};

// The block has the pipeline when the launch gave it shared memory for the slots.
__device__ __forceinline__ bool row_pipeline_on() { return dynamic_shared_bytes() != 0; }

}  // namespace arfuse
