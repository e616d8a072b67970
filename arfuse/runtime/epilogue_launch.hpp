// The standalone kernels' launches, one block per row, without their argument checks: for a
// caller that made them (the public calls in runtime/epilogue.cpp, the group's NCCL path on
// the sum NCCL wrote).
#pragma once

#include "arfuse/epilogue_args.hpp"

#include "runtime/context.hpp"

namespace arfuse {

void launch_rmsnorm_quant(const LaunchableKernel& kernel, const RmsnormQuantArgs& args, const Stream& stream);
void launch_group_quant(const LaunchableKernel& kernel, const GroupQuantArgs& args, const Stream& stream);
void launch_token_quant(const LaunchableKernel& kernel, const TokenQuantArgs& args, const Stream& stream);

}  // namespace arfuse
