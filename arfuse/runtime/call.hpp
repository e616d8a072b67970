// One call of a rank, in the order it runs: validate the arguments once (runtime/validate.hpp),
// plan the path (runtime/plan/plan.hpp), launch the kernel of the plan (or NCCL, then the
// epilogue kernel). Rank::allreduce_rmsnorm and Rank::allreduce are these.
#pragma once

#include "arfuse/allreduce.hpp"

#include "runtime/group_state.hpp"

namespace arfuse {

// Throws Error when the group is closed or `dtype` is not the one it was created for.
void check_group_open(const GroupState& group, DType dtype);

void run_allreduce_rmsnorm(RankState& rank, const AllreduceRmsnormArgs& args, const Stream& stream);
void run_allreduce(RankState& rank, const AllreduceArgs& args, const Stream& stream);

}  // namespace arfuse
