#include "arfuse/runtime/launch.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>

#include "arfuse/base/log.hpp"
#include "arfuse/base/names.hpp"
#include "arfuse/jit/kernel_spec.hpp"
#include "arfuse/runtime/epilogue_launch.hpp"
#include "arfuse/runtime/group_state.hpp"

namespace arfuse {

detail::ScaleStrides detail::scale_strides(const EpilogueMode& mode, int tokens, int hidden) {
  if (is_mxfp4(mode.quant)) return {hidden / kMxBlockSize, 1};
  if (is_group_fp8(mode.quant)) {
    return mode.scale_layout == ScaleLayout::row_major ? ScaleStrides{hidden / mode.group_size, 1}
                                                       : ScaleStrides{1, tokens};
  }
  return mode.quant == Quant::none ? ScaleStrides{0, 0} : ScaleStrides{1, 0};
}

namespace {

// The custom kernels' arguments every call shares.
FusedArgs fused_args(const Rank& rank, int tokens, const void* input) {
  const Group& group = RankAccess::group(rank);
  const GroupOptions& options = GroupAccess::options(group);
  FusedArgs f{};
  f.peers = topology_of(group).peers;
  f.rank = rank.index();
  f.tokens = tokens;
  f.timeout_ns = std::uint64_t(options.timeout.count()) * 1000000ull;
  f.check_call = options.check_calls ? 1 : 0;
  f.input = input == rank.input_buffer() ? nullptr : input;  // the kernel copies it in
  return f;
}

void launch_fused(Rank& rank, const Plan& plan, const LaunchableKernel& k, FusedArgs f, bool pdl,
                  const Stream& stream) {
  rank.device().make_current();
  void* params[] = {&f};
  k.kernel.launch(plan.grid(k.max_blocks_per_multiprocessor), stream, params, pdl);
}

// Notes the path of the rank's call when it differs from the last one's.
void note_path(Rank& rank, const Plan& plan, int tokens, int hidden) {
  std::optional<Path>& last = RankAccess::last_path(rank);
  if (last == plan.path) return;
  last = plan.path;
  debug(fmt::format("rank {}: a {} x {} call takes the {} path", rank.index(), tokens, hidden, plan.path));
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

NcclCommunicator& nccl_of(const Rank& rank) { return *GroupAccess::state(RankAccess::group(rank)).resources.nccl; }

}  // namespace

void launch_call(Rank& rank, const Plan& plan, const LaunchableKernel* kernel, const AllreduceRmsnormArgs& a,
                 const Stream& stream) {
  note_path(rank, plan, a.tokens, a.hidden);
  if (plan.path != Path::nccl) {
    FusedArgs f = fused_args(rank, a.tokens, a.input);
    f.residual_in = a.residual_in, f.residual_out = a.residual_out, f.weight = a.weight, f.eps = a.eps;
    f.out = a.out, f.scales = a.scales, f.mirror = a.mirror;
    const detail::ScaleStrides strides = detail::scale_strides(a.mode, a.tokens, a.hidden);
    f.scale_row_stride = strides.row, f.scale_group_stride = strides.group;
    launch_fused(rank, plan, *kernel, f, a.pdl, stream);
    return;
  }
  const std::size_t count = std::size_t(a.tokens) * std::size_t(a.hidden);
  void* sum = nccl_scratch(rank, count * std::size_t(element_bytes(a.dtype)), stream);
  nccl_of(rank).allreduce(a.input, sum, count, a.dtype, stream);
  RmsnormQuantArgs epilogue = a;
  epilogue.input = sum;
  launch_rmsnorm_quant(*kernel, epilogue, stream);
}

void launch_call(Rank& rank, const Plan& plan, const LaunchableKernel* kernel, const AllreduceArgs& a,
                 const Stream& stream) {
  note_path(rank, plan, a.tokens, a.hidden);
  if (plan.path != Path::nccl) {
    FusedArgs f = fused_args(rank, a.tokens, a.input);
    f.out = a.out;
    launch_fused(rank, plan, *kernel, f, a.pdl, stream);
    return;
  }
  nccl_of(rank).allreduce(a.input, a.out, std::size_t(a.tokens) * std::size_t(a.hidden), a.dtype, stream);
}

}  // namespace arfuse
