#include "arfuse/runtime/call.hpp"

#include <fmt/format.h>

#include <cstddef>

#include "arfuse/base/log.hpp"
#include "arfuse/runtime/context.hpp"
#include "arfuse/runtime/epilogue_launch.hpp"
#include "arfuse/runtime/group_state.hpp"
#include "arfuse/runtime/validate.hpp"

namespace arfuse {
namespace {

// The plan of a call of a validated shape, noted as the rank's last path; none for 0 tokens.
std::optional<Plan> plan_for(Rank& rank, const CallShape& shape) {
  if (shape.tokens == 0) return std::nullopt;
  const Group& group = RankAccess::group(rank);
  Plan plan = plan_call(topology_of(group), GroupAccess::state(group).policy, shape);
  std::optional<Path>& last = RankAccess::last_path(rank);
  if (last != plan.path) {
    last = plan.path;
    debug(fmt::format("rank {}: a {} x {} call takes the {} path", rank.index(), shape.tokens, shape.hidden,
                      to_string(plan.path)));
  }
  return plan;
}

// The custom kernels' arguments every call shares.
FusedArgs fused_args(const Rank& rank, int tokens) {
  const Group& group = RankAccess::group(rank);
  const GroupOptions& options = GroupAccess::options(group);
  FusedArgs f{};
  f.peers = topology_of(group).peers;
  f.rank = rank.index();
  f.tokens = tokens;
  f.timeout_ns = std::uint64_t(options.timeout.count()) * 1000000ull;
  f.check_call = options.check_calls ? 1 : 0;
  return f;
}

void launch(Rank& rank, const Plan& plan, FusedArgs a, const void* input, bool pdl, const Stream& stream) {
  const auto& k = load_kernel(rank.context(), plan.spec);
  a.input = input == rank.input_buffer() ? nullptr : input;  // the kernel copies it in
  rank.device().make_current();
  void* params[] = {&a};
  k.kernel.launch(plan.grid(k.max_blocks_per_multiprocessor), stream, params, pdl);
}

// Where NCCL writes the sum: the gather buffer, or a larger one kept for messages above it.
void* nccl_scratch(Rank& rank, std::size_t bytes, const Stream& stream) {
  RankBuffers& buffers = RankAccess::buffers(rank);
  if (bytes <= buffers.gather.size()) return buffers.gather.get();
  DeviceBuffer& oversize = RankAccess::oversize(rank);
  if (oversize.size() < bytes) {
    stream.synchronize();  // an earlier call may still use the smaller buffer
    oversize = DeviceBuffer(rank.device(), bytes);
  }
  return oversize.get();
}

const Topology& checked(const Rank& rank, DType dtype) {
  const Group& group = RankAccess::group(rank);
  GroupAccess::check_open(group, dtype);
  return topology_of(group);
}

}  // namespace

void run_allreduce_rmsnorm(Rank& rank, const AllreduceRmsnormArgs& a, const Stream& stream) {
  const Topology& t = checked(rank, a.dtype);
  validate_args(a, t.call_max_tokens(), t.call_max_hidden());
  const auto plan = plan_for(rank, CallShape{true, a.tokens, a.hidden, a.dtype, a.mode});
  if (!plan) return;
  if (plan->path == Path::nccl) {
    const std::size_t count = std::size_t(a.tokens) * std::size_t(a.hidden);
    void* sum = nccl_scratch(rank, count * std::size_t(element_bytes(a.dtype)), stream);
    GroupAccess::state(RankAccess::group(rank)).resources.nccl->allreduce(a.input, sum, count, a.dtype, stream);
    RmsnormQuantArgs epilogue = a;
    epilogue.input = sum;
    launch_rmsnorm_quant(rank.context(), epilogue, stream);  // validated above
    return;
  }
  FusedArgs f = fused_args(rank, a.tokens);
  f.residual_in = a.residual_in;
  f.residual_out = a.residual_out;
  f.weight = a.weight;
  f.eps = a.eps;
  f.out = a.out;
  f.scales = a.scales;
  f.mirror = a.mirror;
  const auto strides = detail::scale_strides(a.mode, a.tokens, a.hidden);
  f.scale_row_stride = strides.row, f.scale_group_stride = strides.group;
  launch(rank, *plan, f, a.input, a.pdl, stream);
}

void run_allreduce(Rank& rank, const AllreduceArgs& a, const Stream& stream) {
  const Topology& t = checked(rank, a.dtype);
  validate_args(a, t.call_max_tokens(), t.call_max_hidden());
  const auto plan = plan_for(rank, CallShape{false, a.tokens, a.hidden, a.dtype, {}});
  if (!plan) return;
  if (plan->path == Path::nccl) {
    GroupAccess::state(RankAccess::group(rank))
        .resources.nccl->allreduce(a.input, a.out, std::size_t(a.tokens) * std::size_t(a.hidden), a.dtype, stream);
    return;
  }
  FusedArgs f = fused_args(rank, a.tokens);
  f.out = a.out;
  launch(rank, *plan, f, a.input, a.pdl, stream);
}

}  // namespace arfuse
