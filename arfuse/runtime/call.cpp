#include "runtime/call.hpp"

#include <fmt/format.h>

#include <optional>

#include "arfuse/error.hpp"

#include "base/names.hpp"
#include "runtime/context.hpp"
#include "runtime/kernel_args.hpp"
#include "runtime/launch.hpp"
#include "runtime/validate.hpp"

namespace arfuse {

namespace {

void require_open(const GroupState& group) {
  if (group.closed) throw Error("the group is closed");
}

void require_group_dtype(const GroupState& group, DType dtype) {
  const std::optional<DType>& own = group.options.dtype;
  if (own && dtype != *own) throw Error(fmt::format("dtype {} was passed to a group created for {}", dtype, *own));
}

}  // namespace

void check_group_open(const GroupState& group, DType dtype) {
  require_open(group);
  require_group_dtype(group, dtype);
}

namespace {

// The dtype's check comes last: it names the dtype.
template <typename Args>
CallShape checked_shape(const RankState& rank, const Args& a, bool epilogue, const EpilogueMode& mode) {
  const GroupState& group = *rank.group;
  require_open(group);
  const Topology& t = group.topology();
  validate_args(a, t.call_max_tokens(), t.call_max_hidden());
  const bool views = is_view(a);
  require_group_dtype(group, a.dtype);
  return CallShape{epilogue, a.tokens, a.hidden, a.dtype, mode, views};
}

}  // namespace

CallShape validate_call(const RankState& rank, const AllreduceRmsnormArgs& a) {
  return checked_shape(rank, a, true, a.mode);
}

CallShape validate_call(const RankState& rank, const AllreduceArgs& a) { return checked_shape(rank, a, false, {}); }

namespace {

Plan plan_of(const RankState& rank, const CallShape& shape) {
  return plan_call(rank.group->topology(), rank.group->policy, shape);
}

const LaunchableKernel* kernel_of(const RankState& rank, const Plan& plan) {
  return plan.has_kernel ? &load_kernel(*rank.context, plan.spec) : nullptr;
}

}  // namespace

void run_allreduce_rmsnorm(RankState& rank, const AllreduceRmsnormArgs& args, const Stream& stream) {
  const CallShape shape = validate_call(rank, args);
  if (shape.tokens == 0) return;
  const Plan plan = plan_of(rank, shape);
  launch_call(rank, plan, kernel_of(rank, plan), args, stream);
}

void run_allreduce(RankState& rank, const AllreduceArgs& args, const Stream& stream) {
  const CallShape shape = validate_call(rank, args);
  if (shape.tokens == 0) return;
  const Plan plan = plan_of(rank, shape);
  launch_call(rank, plan, kernel_of(rank, plan), args, stream);
}

}  // namespace arfuse
