#include "arfuse/epilogue.hpp"

#include <fmt/format.h>

#include "arfuse/error.hpp"
#include "arfuse/runtime/context.hpp"
#include "arfuse/runtime/epilogue_launch.hpp"
#include "arfuse/runtime/validate.hpp"

namespace arfuse {

using detail::require_pointer;

namespace {

void launch_kernel(Context& ctx, const RmsnormQuantArgs& a, const Stream& stream) {
  const auto& k = load_kernel(ctx, spec_for(ctx, jit::Module::rmsnorm_quant, a.hidden, a.dtype, a.mode));
  const auto strides = detail::scale_strides(a.mode, a.tokens, a.hidden);
  const void* in = a.input;
  const void* res_in = a.residual_in;
  void* res_out = a.residual_out;
  const void* weight = a.weight;
  float eps = a.eps;
  void* out = a.out;
  void* scales = a.scales;
  void* mirror = a.mirror;
  int tokens = a.tokens;
  int scale_row_stride = strides.row, scale_group_stride = strides.group;
  void* params[] = {&in,     &res_in,           &res_out,           &weight, &eps, &out, &scales, &mirror,
                    &tokens, &scale_row_stride, &scale_group_stride};
  // One block per row.
  k.kernel.launch(unsigned(a.tokens), stream, params, a.pdl);
}

}  // namespace

void rmsnorm_quant(Context& ctx, const RmsnormQuantArgs& a, const Stream& stream) {
  validate_args(a);
  if (a.tokens == 0) return;
  launch_kernel(ctx, a, stream);
}

void launch_rmsnorm_quant(Context& ctx, const RmsnormQuantArgs& a, const Stream& stream) {
  launch_kernel(ctx, a, stream);
}

void token_quant(Context& ctx, const TokenQuantArgs& a, const Stream& stream) {
  check_hidden(a.hidden);
  detail::require_tokens(a.tokens);
  if (a.tokens == 0) return;
  require_pointer(a.input, "input", "(the tensor to quantise)");
  require_pointer(a.out, "out", "(the fp8 output)");
  require_pointer(a.scales, "scales", "(the per-token scales)");
  const auto& k = load_kernel(ctx, spec_for(ctx, jit::Module::token_quant, a.hidden, a.dtype));
  const void* in = a.input;
  void* out = a.out;
  float* scales = a.scales;
  int tokens = a.tokens;
  void* params[] = {&in, &out, &scales, &tokens};
  // One block per row.
  k.kernel.launch(unsigned(a.tokens), stream, params, a.pdl);
}

void group_quant(Context& ctx, const GroupQuantArgs& a, const Stream& stream) {
  validate_args(a);
  if (a.tokens == 0) return;
  const auto& k = load_kernel(ctx, spec_for(ctx, jit::Module::group_quant, a.hidden, a.dtype, a.mode));
  const auto strides = detail::scale_strides(a.mode, a.tokens, a.hidden);
  const void* in = a.input;
  void* out = a.out;
  void* scales = a.scales;
  int tokens = a.tokens, scale_row_stride = strides.row, scale_group_stride = strides.group;
  void* params[] = {&in, &out, &scales, &tokens, &scale_row_stride, &scale_group_stride};
  // One block per row.
  k.kernel.launch(unsigned(a.tokens), stream, params, a.pdl);
}

}  // namespace arfuse
