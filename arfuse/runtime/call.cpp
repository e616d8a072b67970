#include "runtime/call.hpp"

#include <fmt/format.h>

#include <optional>

#include "arfuse/error.hpp"

#include "base/log.hpp"
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

// A captured call loads no module where it can help it (a module load can end the capture), so
// the first eager call of a custom kernel also loads its graph twin. When a captured call's graph
// kernel is not loaded (no eager call or Rank::prepare came first) but the eager one is, it takes
// that one and copies its input, as the call would without an input slot.
const LaunchableKernel* kernel_of(const RankState& rank, Plan& plan) {
  if (!plan.has_kernel) return nullptr;
  if (const LaunchableKernel* k = loaded_kernel(*rank.context, plan.spec)) return k;
  const bool has_twin = plan.path != Path::nccl && rank.group->options.graph_calls > 0;
  if (!plan.spec.graph_inputs && has_twin) {
    const LaunchableKernel& k = load_kernel(*rank.context, plan.spec);
    jit::KernelSpec twin = plan.spec;
    twin.graph_inputs = true;
    load_kernel(*rank.context, twin);
    return &k;
  }
  if (plan.spec.graph_inputs) {
    jit::KernelSpec eager = plan.spec;
    eager.graph_inputs = false;
    if (const LaunchableKernel* k = loaded_kernel(*rank.context, eager)) {
      warn_once("graph kernel not loaded " + eager.text(),
                fmt::format("a call captured into a graph takes {} and copies its input: its graph kernel was not "
                            "loaded before the capture (Rank::prepare loads it)",
                            eager.text()));
      plan.spec = eager;
      return k;
    }
  }
  return &load_kernel(*rank.context, plan.spec);
}

}  // namespace

void run_allreduce_rmsnorm(RankState& rank, const AllreduceRmsnormArgs& args, const Stream& stream) {
  CallShape shape = validate_call(rank, args);
  if (shape.tokens == 0) return;
  shape.graph_inputs = rank.takes_input_slot(stream);
  Plan plan = plan_of(rank, shape);
  const LaunchableKernel* kernel = kernel_of(rank, plan);
  launch_call(rank, plan, kernel, args, stream);
}

void run_allreduce(RankState& rank, const AllreduceArgs& args, const Stream& stream) {
  CallShape shape = validate_call(rank, args);
  if (shape.tokens == 0) return;
  shape.graph_inputs = rank.takes_input_slot(stream);
  Plan plan = plan_of(rank, shape);
  const LaunchableKernel* kernel = kernel_of(rank, plan);
  launch_call(rank, plan, kernel, args, stream);
}

}  // namespace arfuse
