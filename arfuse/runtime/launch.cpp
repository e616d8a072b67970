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
  if (is_nvfp4(mode.quant)) {
    const int columns = hidden / kNvfp4BlockSize;
    return mode.scale_layout == ScaleLayout::swizzled_128x4
               ? ScaleStrides{(columns + kSwizzleColumns - 1) / kSwizzleColumns, 0}  // tiles per row; 0: swizzled
               : ScaleStrides{columns, 1};
  }
  if (is_static_fp8(mode.quant)) return {0, 0};
  if (is_group_fp8(mode.quant)) {
    return mode.scale_layout == ScaleLayout::row_major ? ScaleStrides{hidden / mode.group_size, 1}
                                                       : ScaleStrides{1, tokens};
  }
  return mode.quant == Quant::none ? ScaleStrides{0, 0} : ScaleStrides{1, 0};
}

namespace {

int or_width(int stride, int width) { return stride == 0 ? width : stride; }

// The strides of a call with one input and one output (its rows out_row units wide).
RowStrides input_output_strides(int input_stride, int out_stride, int hidden, int out_row) {
  return RowStrides{or_width(input_stride, hidden), 0, 0, or_width(out_stride, out_row), 0, hidden};
}

}  // namespace

RowStrides detail::row_strides(const RmsnormQuantArgs& a) {
  const int out_width = or_width(a.out_width, a.hidden);
  const int out_row = packs_fp4(a.mode.quant) ? a.hidden / 2 : out_width;
  return RowStrides{or_width(a.input_stride, a.hidden),        or_width(a.residual_in_stride, a.hidden),
                    or_width(a.residual_out_stride, a.hidden), or_width(a.out_stride, out_row),
                    or_width(a.mirror_stride, a.hidden),       out_width};
}

const float* detail::quant_scale(const RmsnormQuantArgs& a) {
  return is_nvfp4(a.mode.quant) ? a.global_scale : a.static_scale;
}

const float* detail::quant_scale(const GroupQuantArgs& a) {
  return is_nvfp4(a.mode.quant) ? a.global_scale : a.static_scale;
}

long long nvfp4_scale_bytes(int tokens, int hidden, ScaleLayout layout) {
  const long long columns = hidden / kNvfp4BlockSize;
  if (layout != ScaleLayout::swizzled_128x4) return tokens * columns;
  const long long rows = (tokens + kSwizzleRows - 1LL) / kSwizzleRows * kSwizzleRows;
  return rows * ((columns + kSwizzleColumns - 1) / kSwizzleColumns * kSwizzleColumns);
}

RowStrides detail::row_strides(const AllreduceArgs& a) {
  return input_output_strides(a.input_stride, a.out_stride, a.hidden, a.hidden);
}

RowStrides detail::row_strides(const TokenQuantArgs& a) {
  return input_output_strides(a.input_stride, a.out_stride, a.hidden, a.hidden);
}

RowStrides detail::row_strides(const GroupQuantArgs& a) {
  return input_output_strides(a.input_stride, a.out_stride, a.hidden,
                              packs_fp4(a.mode.quant) ? a.hidden / 2 : a.hidden);
}

namespace {

// The custom kernels' arguments every call shares.
FusedArgs fused_args(const Rank& rank, int tokens, const void* input, const RowStrides& strides) {
  const Group& group = RankAccess::group(rank);
  const GroupOptions& options = GroupAccess::options(group);
  FusedArgs f{};
  f.peers = topology_of(group).peers;
  f.rank = rank.index();
  f.tokens = tokens;
  f.timeout_ns = std::uint64_t(options.timeout.count()) * 1000000ull;
  f.check_call = options.check_calls ? 1 : 0;
  f.input = input == rank.input_buffer() ? nullptr : input;  // the kernel copies it in
  f.strides = strides;
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

// NCCL's sum of this rank's rows, contiguous, in `sum` (null: nccl_scratch), which it returns; a
// strided input is gathered there first and reduced in place.
void* nccl_sum(Rank& rank, const void* input, int input_stride, void* sum, int tokens, int hidden, DType dtype,
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
FusedArgs epilogue_fused_args(const Rank& rank, const AllreduceRmsnormArgs& a) {
  FusedArgs f = fused_args(rank, a.tokens, a.input, detail::row_strides(a));
  f.residual_in = a.residual_in, f.residual_out = a.residual_out, f.weight = a.weight, f.eps = a.eps;
  f.out = a.out, f.scales = a.scales, f.mirror = a.mirror;
  const detail::ScaleStrides scale = detail::scale_strides(a.mode, a.tokens, a.hidden);
  f.scale_row_stride = scale.row, f.scale_group_stride = scale.group;
  f.quant_scale = detail::quant_scale(a);
  return f;
}

}  // namespace

void launch_call(Rank& rank, const Plan& plan, const LaunchableKernel* kernel, const AllreduceRmsnormArgs& a,
                 const Stream& stream) {
  note_path(rank, plan, a.tokens, a.hidden);
  if (plan.path != Path::nccl) {
    launch_fused(rank, plan, *kernel, epilogue_fused_args(rank, a), a.pdl, stream);
    return;
  }
  void* sum = nccl_sum(rank, a.input, detail::row_strides(a).input, nullptr, a.tokens, a.hidden, a.dtype, stream);
  RmsnormQuantArgs epilogue = a;
  epilogue.input = sum;
  epilogue.input_stride = 0;
  launch_rmsnorm_quant(*kernel, epilogue, stream);
}

void launch_call(Rank& rank, const Plan& plan, const LaunchableKernel* kernel, const AllreduceArgs& a,
                 const Stream& stream) {
  note_path(rank, plan, a.tokens, a.hidden);
  const RowStrides strides = detail::row_strides(a);
  if (plan.path != Path::nccl) {
    FusedArgs f = fused_args(rank, a.tokens, a.input, strides);
    f.out = a.out;
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
