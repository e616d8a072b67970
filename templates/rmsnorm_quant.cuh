// Standalone epilogue kernels, for use after an all-reduce done elsewhere (NCCL/RCCL):
//   rmsnorm_quant_kernel: steps 2-7 of the contract on an already reduced tensor `in`;
//   token_quant_kernel:   step 7 alone (per-token FP8) on a tensor that already is y, which is
//                         how the mirror output of the fused kernel quantises to the same bytes.
// One block per row, blocks stride over the rows.
#pragma once

#include "epilogue.cuh"
#include "row_pipeline.cuh"

namespace arfuse {

template <typename T>
struct RmsnormQuantParams {
  const T* in;
  const T* residual_in;
  T* residual_out;
  const T* weight;
  float eps;
  void* out;
  float* scales;
  T* mirror;
  int tokens;
};

template <typename T, int H, int THREADS, int VPT, int QUANT, int NORM>
__device__ __forceinline__ void rmsnorm_quant_row(const RmsnormQuantParams<T>& a, int row, const Vec16 (&input)[VPT],
                                                  const Vec16 (&residual)[VPT], ReduceScratch& scratch) {
  const long long offset = (long long)row * H;
  RowOutputs<T> outputs;
  outputs.residual_out = a.residual_out + offset;
  outputs.out = QUANT == kQuantNone ? static_cast<void*>(static_cast<T*>(a.out) + offset)
                                    : static_cast<void*>(static_cast<u8*>(a.out) + offset);
  outputs.scale = a.scales + row;
  outputs.mirror = QUANT == kQuantFp8Mirror ? a.mirror + offset : a.mirror;
  epilogue_row<T, H, THREADS, VPT, QUANT, NORM>(input, residual, a.weight, a.eps, outputs, scratch);
}

// The block's rows with the next row's input and residual_in in flight (row_pipeline.cuh);
// false where the pipeline is not compiled in or this launch has it off, and nothing was done.
template <typename T, int H, int THREADS, int VPT, int QUANT, int NORM, int PIPELINE_BLOCKS>
__device__ __forceinline__ bool rmsnorm_quant_rows_pipelined(const RmsnormQuantParams<T>& a, ReduceScratch& scratch) {
  if constexpr (PIPELINE_BLOCKS > 0) {
    static_assert(kHasAsyncCopy || PIPELINE_BLOCKS == 0, "a row pipeline needs asynchronous copies");
    if (!row_pipeline_on()) return false;
    enum { kInput, kResidual };
    const RowSlots<T, H, THREADS, VPT> slots;
    int row = blockIdx.x;
    if (row >= a.tokens) return true;
    Vec16 input[VPT], residual[VPT];
    load_vectors<T, H, THREADS, VPT>(a.in + (long long)row * H, input);
    load_vectors<T, H, THREADS, VPT>(a.residual_in + (long long)row * H, residual);
    for (;;) {
      const int next = row + gridDim.x;
      if (next < a.tokens) {
        slots.template fetch<kInput>(a.in + (long long)next * H);
        slots.template fetch<kResidual>(a.residual_in + (long long)next * H);
      }
      rmsnorm_quant_row<T, H, THREADS, VPT, QUANT, NORM>(a, row, input, residual, scratch);
      if (next >= a.tokens) return true;
      async_copy_wait_all();
      slots.read(kInput, input);
      slots.read(kResidual, residual);
      row = next;
    }
  }
  return false;
}

// PIPELINE_BLOCKS: 0, or the blocks per multiprocessor the row pipeline is compiled for
// (jit/row_pipeline.hpp).
template <typename T, int H, int THREADS, int VPT, int QUANT, int NORM, int PIPELINE_BLOCKS>
__global__ void ARFUSE_LAUNCH_BOUNDS(THREADS, PIPELINE_BLOCKS)
rmsnorm_quant_kernel(const T* in, const T* residual_in, T* residual_out, const T* weight,
                     float eps, void* out, float* scales, T* mirror, int tokens) {
  __shared__ ReduceScratch scratch;
  const RmsnormQuantParams<T> a{in, residual_in, residual_out, weight, eps, out, scales, mirror, tokens};
  if (rmsnorm_quant_rows_pipelined<T, H, THREADS, VPT, QUANT, NORM, PIPELINE_BLOCKS>(a, scratch)) return;
  for (int row = blockIdx.x; row < tokens; row += gridDim.x) {
    Vec16 input[VPT], residual[VPT];
    load_vectors<T, H, THREADS, VPT>(in + (long long)row * H, input);
    load_vectors<T, H, THREADS, VPT>(residual_in + (long long)row * H, residual);
    rmsnorm_quant_row<T, H, THREADS, VPT, QUANT, NORM>(a, row, input, residual, scratch);
  }
}

template <typename T, int H, int THREADS, int VPT>
__global__ void __launch_bounds__(THREADS)
token_quant_kernel(const T* in, u8* out, float* scales, int tokens) {
  __shared__ ReduceScratch scratch;
  for (int row = blockIdx.x; row < tokens; row += gridDim.x) {
    const long long offset = (long long)row * H;
    Vec16 y[VPT];
    load_vectors<T, H, THREADS, VPT>(in + offset, y);
    quantize_row<T, H, THREADS, VPT>(y, out + offset, scales + row, scratch);
  }
}

}  // namespace arfuse
