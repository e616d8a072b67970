// The last step of a rank's call: the kernel's arguments from validated call arguments, and the
// launch (the NCCL path: NCCL's all-reduce, then the standalone epilogue's launch). Nothing here checks an argument
// (runtime/validate.hpp did) or chooses a path (runtime/plan/plan.hpp did).
#pragma once

#include "arfuse/epilogue.hpp"
#include "arfuse/group.hpp"
#include "arfuse/runtime/context.hpp"
#include "arfuse/runtime/plan/plan.hpp"

namespace arfuse {

// A rank's call on its plan, with the plan's kernel (null: a plain all-reduce on NCCL).
void launch_call(Rank& rank, const Plan& plan, const LaunchableKernel* kernel, const AllreduceRmsnormArgs& args,
                 const Stream& stream);
void launch_call(Rank& rank, const Plan& plan, const LaunchableKernel* kernel, const AllreduceArgs& args,
                 const Stream& stream);

namespace detail {

// Where a row's scales start (row * row) and how far apart its groups' are, in scale elements.
struct ScaleStrides {
  int row = 0, group = 0;
};
// `mode` has been validated for `hidden`.
ScaleStrides scale_strides(const EpilogueMode& mode, int tokens, int hidden);

// The kernels' row strides of validated arguments: each 0 resolved to its row's width.
RowStrides row_strides(const RmsnormQuantArgs& args);
RowStrides row_strides(const AllreduceArgs& args);
RowStrides row_strides(const TokenQuantArgs& args);
RowStrides row_strides(const GroupQuantArgs& args);
// The scale pointer the kernel reads: static_scale (fp8_static), global_scale (nvfp4), else null.
const float* quant_scale(const RmsnormQuantArgs& args);
const float* quant_scale(const GroupQuantArgs& args);

}  // namespace detail
}  // namespace arfuse
