// The arguments of the standalone epilogue calls (arfuse/epilogue.hpp makes the calls, and the
// fused all-reduce's arguments extend RmsnormQuantArgs): values without state, with the checks
// every call makes, so that engines can validate at set-up and the tests without a GPU. All
// pointers are device pointers, 16-byte aligned, row-major [tokens, hidden]: contiguous, or with
// the row strides below.
#pragma once

#include "arfuse/error.hpp"
#include "arfuse/modes.hpp"

namespace arfuse {

struct ARFUSE_API RmsnormQuantArgs {
  const void* input = nullptr;  // T [tokens, hidden], the reduced sum
  const void* residual_in = nullptr;
  void* residual_out = nullptr;  // may equal residual_in
  const void* weight = nullptr;  // T [hidden]
  float eps = 1e-6f;
  void* out = nullptr;     // T (quant none), fp8 bytes [tokens, hidden], or E2M1 pairs [tokens, hidden / 2]
                           // (mxfp4, nvfp4: element 2k in the low nibble)
  void* scales = nullptr;  // fp8: fp32 [tokens]; fp8_group: one per group (scale_format, scale_layout);
                           // mxfp4: E8M0 bytes [tokens, hidden / 32]; nvfp4: E4M3 bytes, row_major
                           // [tokens, hidden / 16] or swizzled_128x4; fp8_static: none (null). Their
                           // shape and bytes: mode.scale_shape(hidden).
  void* mirror = nullptr;  // T [tokens, hidden], with mode.mirror
  int tokens = 0;
  int hidden = 0;
  DType dtype = DType::bf16;
  // Quant and norm; for the fp8_group modes the elements per scale (32, 64 or 128, dividing
  // hidden), fp32 or UE8M0 scales (as fp32 or E8M0 bytes), [tokens, hidden / group_size] or
  // [hidden / group_size, tokens]; for the nvfp4 modes the scale layout.
  EpilogueMode mode;
  // fp8_static: the fp32 scale, q = fp8(y * (1 / scale)). nvfp4: the fp32 global
  // scale (typically 448 * 6 / amax of the tensor). Device pointers, read by the kernel when it
  // runs, so a CUDA graph replays with whatever they hold then.
  const float* static_scale = nullptr;
  const float* global_scale = nullptr;
  // Programmatic dependent launch (NVIDIA sm_90 and later; elsewhere an ordinary launch): the
  // kernel is launched before the kernel ahead of it on the stream ends, and waits for it in its
  // prologue, so the launch overlaps that kernel's tail.
  bool pdl = false;
  // Elements between the starts of consecutive rows; 0 is contiguous (the row's own width).
  // `out` counts in its own units (T, fp8 bytes, MXFP4 bytes). A stride other than the row's
  // width is wider than the row and a multiple of 16 bytes.
  int input_stride = 0;
  int residual_in_stride = 0;
  int residual_out_stride = 0;
  int out_stride = 0;  // 0: out_width
  int mirror_stride = 0;
  // Columns of `out` each row fills (0: hidden): its hidden values, then zeros up to out_width,
  // for a GEMM that wants an aligned K. Quant none, fp8 and fp8_static (pads_out); a multiple of 8.
  int out_width = 0;
};

// Each tensor's row stride (as RmsnormQuantArgs' strides) follows it.
struct ARFUSE_API TokenQuantArgs {
  const void* input = nullptr;  // T [tokens, hidden]
  int input_stride = 0;
  void* out = nullptr;  // fp8 bytes [tokens, hidden]
  int out_stride = 0;
  float* scales = nullptr;  // fp32 [tokens]
  int tokens = 0;
  int hidden = 0;
  DType dtype = DType::bf16;
  bool pdl = false;  // as RmsnormQuantArgs::pdl
};

// Per-token-group FP8, MXFP4, static FP8 or NVFP4 of a tensor that already is y (steps 7b-7e
// alone): for the fused kernels' mirror output it gives their bytes and scales.
struct ARFUSE_API GroupQuantArgs {
  const void* input = nullptr;  // T [tokens, hidden]
  int input_stride = 0;         // as TokenQuantArgs
  void* out = nullptr;          // fp8 bytes [tokens, hidden], or E2M1 pairs [tokens, hidden / 2]
  int out_stride = 0;
  void* scales = nullptr;  // as RmsnormQuantArgs::scales for the mode
  int tokens = 0;
  int hidden = 0;
  DType dtype = DType::bf16;
  EpilogueMode mode{Quant::fp8_group};  // a mode group_quant_takes(), no mirror (norm is not used)
  const float* static_scale = nullptr;  // as RmsnormQuantArgs'
  const float* global_scale = nullptr;
  bool pdl = false;  // as RmsnormQuantArgs::pdl
};

// The checks each call makes before it launches; arfuse::Error names the argument. Public so that
// an engine can validate once at set-up (and the tests without a GPU).
ARFUSE_API void validate_args(const RmsnormQuantArgs& args);
ARFUSE_API void validate_args(const GroupQuantArgs& args);
ARFUSE_API void validate_args(const TokenQuantArgs& args);

}  // namespace arfuse
