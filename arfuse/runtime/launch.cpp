#include "runtime/launch.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>

#include "base/log.hpp"
#include "base/names.hpp"
#include "jit/kernel_spec.hpp"
#include "runtime/epilogue_launch.hpp"
#include "runtime/kernel_args.hpp"

namespace arfuse {

namespace {

// A captured call's input slot (the graph_inputs kernels), recorded for register_graph_inputs;
// its input is offered to the peers only when the kernel could read it in place: contiguous rows,
// not already the staging buffer.
unsigned take_input_slot(RankState& rank, const Plan& plan, int tokens, const void* input, int input_stride) {
  CapturedInput c;
  c.slot = unsigned(rank.graph_slots_used++);
  c.input = input_stride == plan.spec.hidden && input != rank.input_buffer() ? input : nullptr;
  c.call = captured_call(plan.spec, tokens);
  rank.captured.push_back(c);
  return c.slot;
}

// The custom kernels' arguments every call shares.
FusedArgs fused_args(const RankState& rank, int tokens, const void* input, const RowStrides& strides) {
  const GroupOptions& options = rank.group->options;
  FusedArgs f{};
  f.peers = rank.group->topology().peers;
  f.rank = rank.index;
  f.tokens = tokens;
  f.timeout_ns = std::uint64_t(options.timeout.count()) * 1000000ull;
  f.check_call = options.check_calls ? 1 : 0;
  f.input = input == rank.input_buffer() ? nullptr : input;  // the kernel copies it in
  f.strides = strides;
  return f;
}

void launch_fused(const RankState& rank, const Plan& plan, const LaunchableKernel& k, FusedArgs f, bool pdl,
                  const Stream& stream) {
  rank.device().make_current();
  void* params[] = {&f};
  k.kernel.launch(plan.grid(k.max_blocks_per_multiprocessor), stream, params, pdl);
}

// Notes the path of the rank's call when it differs from the last one's.
void note_path(RankState& rank, const Plan& plan, int tokens, int hidden) {
  std::optional<Path>& last = rank.last_path;
  if (last == plan.path) return;
  last = plan.path;
  debug(fmt::format("rank {}: a {} x {} call takes the {} path", rank.index, tokens, hidden, plan.path));
}

// Where NCCL writes the sum: the gather buffer, or a larger one kept for messages above it.
void* nccl_scratch(RankState& rank, std::size_t bytes, const Stream& stream) {
  if (bytes <= rank.buffers->gather.size()) return rank.buffers->gather.get();
  DeviceBuffer& oversize = rank.oversize;
  if (oversize.size() < bytes) {
    stream.synchronize();  // an earlier call may still use the smaller buffer
    oversize = DeviceBuffer(rank.device(), bytes);
  }
  return oversize.get();
}

NcclCommunicator& nccl_of(const RankState& rank) { return *rank.group->resources.nccl; }

// NCCL's sum of this rank's rows, contiguous, in `sum` (null: nccl_scratch), which it returns; a
// strided input is gathered there first and reduced in place.
void* nccl_sum(RankState& rank, const void* input, int input_stride, void* sum, int tokens, int hidden, DType dtype,
               const Stream& stream) {
  const std::size_t row_bytes = std::size_t(hidden) * std::size_t(element_bytes(dtype));
  if (sum == nullptr) sum = nccl_scratch(rank, std::size_t(tokens) * row_bytes, stream);
  if (input_stride != hidden) {
    stream.copy_rows(sum, row_bytes, input, std::size_t(input_stride) * std::size_t(element_bytes(dtype)), row_bytes,
                     std::size_t(tokens));
    input = sum;
  }
  nccl_of(rank).allreduce(input, sum, std::size_t(tokens) * std::size_t(hidden), dtype, stream);
  return sum;
}

// The fused kernel's argument for an epilogue call.
FusedArgs epilogue_fused_args(const RankState& rank, const AllreduceRmsnormArgs& a) {
  FusedArgs f = fused_args(rank, a.tokens, a.input, detail::row_strides(a));
  f.residual_in = a.residual_in, f.residual_out = a.residual_out, f.weight = a.weight, f.eps = a.eps;
  f.out = a.out, f.scales = a.scales, f.mirror = a.mirror;
  const detail::ScaleStrides scale = detail::scale_strides(a.mode, a.tokens, a.hidden);
  f.scale_row_stride = scale.row, f.scale_group_stride = scale.group;
  f.quant_scale = detail::quant_scale(a);
  return f;
}

}  // namespace

void launch_call(RankState& rank, const Plan& plan, const LaunchableKernel* kernel, const AllreduceRmsnormArgs& a,
                 const Stream& stream) {
  note_path(rank, plan, a.tokens, a.hidden);
  if (plan.path != Path::nccl) {
    FusedArgs f = epilogue_fused_args(rank, a);
    if (plan.spec.graph_inputs) f.input_slot = take_input_slot(rank, plan, a.tokens, a.input, f.strides.input);
    launch_fused(rank, plan, *kernel, f, a.pdl, stream);
    return;
  }
  void* sum = nccl_sum(rank, a.input, detail::row_strides(a).input, nullptr, a.tokens, a.hidden, a.dtype, stream);
  RmsnormQuantArgs epilogue = a;
  epilogue.input = sum;
  epilogue.input_stride = 0;
  launch_rmsnorm_quant(*kernel, epilogue, stream);
}

void launch_call(RankState& rank, const Plan& plan, const LaunchableKernel* kernel, const AllreduceArgs& a,
                 const Stream& stream) {
  note_path(rank, plan, a.tokens, a.hidden);
  const RowStrides strides = detail::row_strides(a);
  if (plan.path != Path::nccl) {
    FusedArgs f = fused_args(rank, a.tokens, a.input, strides);
    f.out = a.out;
    if (plan.spec.graph_inputs) f.input_slot = take_input_slot(rank, plan, a.tokens, a.input, strides.input);
    launch_fused(rank, plan, *kernel, f, a.pdl, stream);
    return;
  }
  const std::size_t row_bytes = std::size_t(a.hidden) * std::size_t(element_bytes(a.dtype));
  if (strides.input == a.hidden && strides.out == a.hidden) {
    nccl_of(rank).allreduce(a.input, a.out, std::size_t(a.tokens) * std::size_t(a.hidden), a.dtype, stream);
    return;
  }
  void* sum = nccl_sum(rank, a.input, strides.input, strides.out == a.hidden ? a.out : nullptr, a.tokens, a.hidden,
                       a.dtype, stream);
  if (sum != a.out) {
    stream.copy_rows(a.out, std::size_t(strides.out) * std::size_t(element_bytes(a.dtype)), sum, row_bytes, row_bytes,
                     std::size_t(a.tokens));
  }
}

}  // namespace arfuse
