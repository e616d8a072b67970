// The last step of a rank's call: the kernel's arguments from validated call arguments, and the
// launch (the NCCL path: NCCL's all-reduce, then the standalone epilogue's launch). Nothing here checks an argument
// (runtime/validate.hpp did) or chooses a path (runtime/plan/plan.hpp did).
#pragma once

#include "arfuse/allreduce.hpp"
#include "arfuse/epilogue_args.hpp"

#include "runtime/context.hpp"
#include "runtime/group_state.hpp"
#include "runtime/plan/plan.hpp"

namespace arfuse {

// A rank's call on its plan, with the plan's kernel (null: a plain all-reduce on NCCL).
void launch_call(RankState& rank, const Plan& plan, const LaunchableKernel* kernel, const AllreduceRmsnormArgs& args,
                 const Stream& stream);
void launch_call(RankState& rank, const Plan& plan, const LaunchableKernel* kernel, const AllreduceArgs& args,
                 const Stream& stream);

}  // namespace arfuse
