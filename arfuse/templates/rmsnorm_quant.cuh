// Standalone epilogue kernels, for use after an all-reduce done elsewhere (NCCL/RCCL):
//   rmsnorm_quant_kernel: steps 2-7 of the contract on an already reduced tensor `in`;
//   token_quant_kernel:   step 7 alone (per-token FP8) on a tensor that already is y, which is
//                         how the mirror output of the fused kernel quantises to the same bytes;
//   group_quant_kernel:   a block-scaled or static step alone on y (the modes whose row in
//                         the mode table, arfuse/quant_modes.hpp, says group_quant), the same
//                         for those modes.
// One block per row, and the runtime launches one block for every row: the hardware then starts
// a block wherever one finishes, so the SMs stay busy to the last row and the blocks' loads
// spread out in time (a grid of resident blocks striding over the rows is slower on the large
// rows: docs/performance.md, "Tuning decisions").
#pragma once

#include "epilogue.cuh"
#include "quant/token_fp8.cuh"

namespace arfuse {

// Every standalone kernel's start: it overlaps the neighbouring kernels (programmatic dependent
// launch).
__device__ __forceinline__ void overlap_neighbouring_kernels() {
  wait_for_previous_kernel();
  let_next_kernel_start();
}

// fp8_group's residual_out goes out after the sum-of-squares reduction here, which is faster for
// it; MXFP4 and the fused fp8_group kernel are slower so and keep the early store
// (docs/performance.md, "Tuning decisions").
template <int QUANT>
inline constexpr ResidualStore kStandaloneResidualStore =
    kQuantIsGroupFp8<QUANT> ? ResidualStore::after_reduction : ResidualStore::after_add;

// scales: per-token FP8 [tokens] (scale_row_stride 1); group FP8, MXFP4 and linear NVFP4: the
// row's scales start at scale_row_stride * row, its groups scale_group_stride apart (row- or
// column-major); swizzled NVFP4: scale_group_stride 0, scale_row_stride the tiles per row.
// quant_scale: fp8_static's scale, NVFP4's global scale.
// MIN_BLOCKS: 0, or the resident blocks per multiprocessor the kernel is compiled for
// (jit/tuning_policy.cpp).
template <typename T, int H, int THREADS, int VPT, int QUANT, int NORM, int GROUP, int SCALE, bool VIEWS,
          int MIN_BLOCKS>
__global__ void ARFUSE_LAUNCH_BOUNDS(THREADS, MIN_BLOCKS)
    rmsnorm_quant_kernel(const T* in, const T* residual_in, T* residual_out, const T* weight, float eps, void* out,
                         void* scales, T* mirror, int tokens, int scale_row_stride, int scale_group_stride,
                         RowStrides strides, const float* quant_scale) {
  overlap_neighbouring_kernels();
  __shared__ ReduceScratch scratch;
  const int row = blockIdx.x;
  if (row >= tokens) {
    zero_scale_padding<THREADS, QUANT>(scales, tokens, scale_row_stride, scale_group_stride);
    return;
  }
  const RowOffsets<T, H, QUANT, VIEWS> at{strides};
  Vec16 input[VPT], residual[VPT];
  load_vectors<T, H, THREADS, VPT>(in + at.input(row), input);
  load_vectors<T, H, THREADS, VPT>(residual_in + at.residual_in(row), residual);
  __shared__ Vec16 staged_weight[THREADS * VPT];
  const StagedWeight w = stage_weight<T, H, THREADS, VPT>(weight, staged_weight);
  RowOutputs<T> outputs;
  outputs.residual_out = residual_out + at.residual_out(row);
  outputs.out = static_cast<u8*>(out) + at.out_bytes(row);
  outputs.out_width = at.out_width();
  place_row_scales<T, QUANT, SCALE>(outputs, scales, row, scale_row_stride, scale_group_stride,
                                    read_quant_scale<QUANT>(quant_scale));
  outputs.mirror = kQuantWritesMirror<QUANT> ? mirror + at.mirror(row) : mirror;
  epilogue_row<T, H, THREADS, VPT, QUANT, NORM, GROUP, SCALE, kStandaloneResidualStore<QUANT>>(input, residual, w, eps,
                                                                                               outputs, scratch);
  // After the row: no register of the row is live then.
  zero_scale_padding<THREADS, QUANT>(scales, tokens, scale_row_stride, scale_group_stride);
}

template <typename T, int H, int THREADS, int VPT, bool VIEWS>
__global__ void __launch_bounds__(THREADS)
    token_quant_kernel(const T* in, u8* out, float* scales, int tokens, RowStrides strides) {
  overlap_neighbouring_kernels();
  __shared__ ReduceScratch scratch;
  const int row = blockIdx.x;
  if (row >= tokens) return;
  const RowOffsets<T, H, quant_code(kQuantFp8, false), VIEWS> at{strides};
  Vec16 y[VPT];
  load_vectors<T, H, THREADS, VPT>(in + at.input(row), y);
  quantize_row<T, H, THREADS, VPT>(y, out + at.out_bytes(row), scales + row, scratch);
}

// Group amaxes reduce inside warps: no shared memory, no block barrier. scales and quant_scale
// as rmsnorm_quant_kernel's (fp8_static writes no scales).
template <typename T, int H, int THREADS, int VPT, int QUANT, int GROUP, int SCALE, bool VIEWS>
__global__ void __launch_bounds__(THREADS)
    group_quant_kernel(const T* in, u8* out, void* scales, int tokens, int scale_row_stride, int scale_group_stride,
                       RowStrides strides, const float* quant_scale) {
  static_assert(kQuantRows[quant_family(QUANT)].group_quant && !kQuantWritesMirror<QUANT>,
                "group_quant takes the modes whose row in the mode table says so, without the mirror");
  overlap_neighbouring_kernels();
  zero_scale_padding<THREADS, QUANT>(scales, tokens, scale_row_stride, scale_group_stride);
  const int row = blockIdx.x;
  if (row >= tokens) return;
  const RowOffsets<T, H, QUANT, VIEWS> at{strides};
  Vec16 y[VPT];
  load_vectors<T, H, THREADS, VPT>(in + at.input(row), y);
  RowOutputs<T> outputs;
  outputs.out = out + at.out_bytes(row);
  place_row_scales<T, QUANT, SCALE>(outputs, scales, row, scale_row_stride, scale_group_stride,
                                    read_quant_scale<QUANT>(quant_scale));
  quantize_y<T, H, THREADS, VPT, QUANT, GROUP, SCALE>(y, outputs, nullptr);
}

}  // namespace arfuse
