// One call of a rank, in the order it runs: validate the arguments once (runtime/validate.hpp),
// plan the path (runtime/plan/plan.hpp), launch the kernel of the plan (or NCCL, then the
// epilogue kernel). Rank::allreduce_rmsnorm and Rank::allreduce are these.
#pragma once

#include "arfuse/group.hpp"

namespace arfuse {

void run_allreduce_rmsnorm(Rank& rank, const AllreduceRmsnormArgs& args, const Stream& stream);
void run_allreduce(Rank& rank, const AllreduceArgs& args, const Stream& stream);

}  // namespace arfuse
