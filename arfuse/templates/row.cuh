// How a block holds one token row: each thread owns VPT vectors of 8 elements, vector index
// tid + k * THREADS; where each caller tensor's row starts; the padding after a row of `out`; the
// weight staged in shared memory. Rows are held packed in T between the steps (every intermediate
// the contract keeps is T-rounded anyway): half the registers of floats, which doubles the blocks
// resident per SM.
#pragma once

#include "limits.cuh"
#include "platform.cuh"
#include "quant_table.cuh"

namespace arfuse {

template <int H, int THREADS>
__device__ __forceinline__ bool owns_vector(int k) {
  // When the vectors fill the block exactly, a constant after unrolling: no per-vector
  // predicate for the compiler to keep (the block-scaled loops spilled under the register cap).
  if constexpr (H / 8 % THREADS == 0) return k < H / 8 / THREADS;
  return threadIdx.x + k * THREADS < H / 8;
}

// The 16-byte vectors of one row this thread owns. Callers issue these loads before they wait
// on anything else, so every load of a row is in flight at once (residual_out may alias
// residual_in, which would otherwise order each load after the previous store).
template <typename T, int H, int THREADS, int VPT>
__device__ __forceinline__ void load_vectors(const T* row, Vec16 (&v)[VPT]) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (owns_vector<H, THREADS>(k)) v[k] = load16(row + (threadIdx.x + k * THREADS) * 8);
  }
}

// The bytes of one unit of `out`'s row stride: T without quant; fp8 and MXFP4 outputs count bytes.
template <typename T, int QUANT>
inline constexpr int kOutUnitBytes = QUANT == kQuantNone ? int(sizeof(T)) : 1;

// Bytes of one row of a contiguous `out`.
template <typename T, int H, int QUANT>
inline constexpr long long kOutRowBytes = kQuantPacksFp4<QUANT> ? H / 2 : H*(long long)kOutUnitBytes<T, QUANT>;

// Where row `row` of each caller tensor starts, in its elements (out_bytes: in bytes). VIEWS (the
// spec's views field): the strides the call passed; otherwise every tensor is contiguous and out
// unpadded, the widths compile-time constants (run-time strides cost the contiguous calls time at
// small row counts: docs/performance.md, "Tuning decisions").
template <typename T, int H, int QUANT, bool VIEWS>
struct RowOffsets {
  RowStrides s;
  __device__ __forceinline__ long long input(int row) const { return (long long)row * (VIEWS ? s.input : H); }
  __device__ __forceinline__ long long residual_in(int row) const {
    return (long long)row * (VIEWS ? s.residual_in : H);
  }
  __device__ __forceinline__ long long residual_out(int row) const {
    return (long long)row * (VIEWS ? s.residual_out : H);
  }
  __device__ __forceinline__ long long mirror(int row) const { return (long long)row * (VIEWS ? s.mirror : H); }
  __device__ __forceinline__ long long out(int row) const { return (long long)row * (VIEWS ? s.out : H); }  // T out
  __device__ __forceinline__ long long out_bytes(int row) const {
    return VIEWS ? (long long)row * s.out * kOutUnitBytes<T, QUANT> : row * kOutRowBytes<T, H, QUANT>;
  }
  __device__ __forceinline__ int out_width() const { return VIEWS ? s.out_width : H; }
};

// Zeros over columns [H, width) of one row of `out`, T or per-tensor or per-token FP8 (width: a
// multiple of 8; the block-scaled modes take no padding).
template <typename T, int H, int THREADS, int QUANT>
__device__ __forceinline__ void zero_padding(void* out_row, int width) {
  if constexpr (kQuantPadsOut<QUANT>) {
    // A constant H (contiguous kernels) drops the loop here: the compiler cannot tell that the
    // signed loop index below never starts negative.
    if (width <= H) return;
    constexpr int kUnit = kOutUnitBytes<T, QUANT>;
    u8* padding = static_cast<u8*>(out_row) + H * kUnit;
    const int words = (width - H) * kUnit / 8;
    for (int i = threadIdx.x; i < words; i += THREADS) store8(padding + i * 8, Vec8{});
  }
}

// The weight, copied into shared memory by stage_weight while the row's loads are in flight:
// step 5's read after the reductions is then a shared-memory hit instead of an L1/L2 round trip
// on the row's critical path, and no register holds it across the reductions (faster than either
// alternative: docs/performance.md, "Tuning decisions"). Without an asynchronous copy (AMD)
// `vectors` is the weight in global memory, read after the reductions.
struct StagedWeight {
  const Vec16* vectors;
  __device__ __forceinline__ void wait() const { wait_async_copies(); }
};

// Each thread copies the weight vectors it will read (the ones it owns), so reading them needs
// no block barrier, only the thread's own wait.
template <typename T, int H, int THREADS, int VPT>
__device__ __forceinline__ StagedWeight stage_weight(const T* weight, Vec16 (&staged)[THREADS * VPT]) {
  if constexpr (kAsyncCopy) {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int vec = threadIdx.x + k * THREADS;
      if (owns_vector<H, THREADS>(k)) copy_async16(&staged[vec], weight + vec * 8);
    }
    return StagedWeight{staged};
  } else {
    return StagedWeight{reinterpret_cast<const Vec16*>(weight)};
  }
}

}  // namespace arfuse
