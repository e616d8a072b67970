#include "arfuse/runtime/call.hpp"

#include "arfuse/runtime/context.hpp"
#include "arfuse/runtime/group_state.hpp"
#include "arfuse/runtime/launch.hpp"
#include "arfuse/runtime/validate.hpp"

namespace arfuse {
namespace {

Plan plan_of(const Rank& rank, const CallShape& shape) {
  const Group& group = RankAccess::group(rank);
  return plan_call(topology_of(group), GroupAccess::state(group).policy, shape);
}

const LaunchableKernel* kernel_of(Rank& rank, const Plan& plan) {
  return plan.has_kernel ? &load_kernel(rank.context(), plan.spec) : nullptr;
}

}  // namespace

void run_allreduce_rmsnorm(Rank& rank, const AllreduceRmsnormArgs& args, const Stream& stream) {
  const CallShape shape = validate_call(rank, args);
  if (shape.tokens == 0) return;
  const Plan plan = plan_of(rank, shape);
  launch_call(rank, plan, kernel_of(rank, plan), args, stream);
}

void run_allreduce(Rank& rank, const AllreduceArgs& args, const Stream& stream) {
  const CallShape shape = validate_call(rank, args);
  if (shape.tokens == 0) return;
  const Plan plan = plan_of(rank, shape);
  launch_call(rank, plan, kernel_of(rank, plan), args, stream);
}

}  // namespace arfuse
