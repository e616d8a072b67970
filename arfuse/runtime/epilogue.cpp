#include "arfuse/epilogue.hpp"

#include "runtime/context.hpp"
#include "runtime/epilogue_launch.hpp"
#include "runtime/kernel_args.hpp"
#include "runtime/validate.hpp"

namespace arfuse {

namespace {

// A standalone call: validated, then (when it has rows) the kernel of `module` for its layout.
template <typename Args>
void run_standalone(Context& ctx, const Args& a, jit::Module module, const EpilogueMode& mode,
                    void (*launch)(const LaunchableKernel&, const Args&, const Stream&), const Stream& stream) {
  validate_args(a);
  if (a.tokens == 0) return;
  launch(load_kernel(ctx, spec_for(ctx, module, a.hidden, a.dtype, mode, 1, 1, is_view(a))), a, stream);
}

}  // namespace

void rmsnorm_quant(Context& ctx, const RmsnormQuantArgs& a, const Stream& stream) {
  run_standalone(ctx, a, jit::Module::rmsnorm_quant, a.mode, launch_rmsnorm_quant, stream);
}

void token_quant(Context& ctx, const TokenQuantArgs& a, const Stream& stream) {
  run_standalone(ctx, a, jit::Module::token_quant, {}, launch_token_quant, stream);
}

void group_quant(Context& ctx, const GroupQuantArgs& a, const Stream& stream) {
  run_standalone(ctx, a, jit::Module::group_quant, a.mode, launch_group_quant, stream);
}

void launch_rmsnorm_quant(const LaunchableKernel& k, const RmsnormQuantArgs& a, const Stream& stream) {
  const detail::ScaleStrides strides = detail::scale_strides(a.mode, a.tokens, a.hidden);
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
  RowStrides rows = detail::row_strides(a);
  const float* quant_scale = detail::quant_scale(a);
  void* params[] = {&in,
                    &res_in,
                    &res_out,
                    &weight,
                    &eps,
                    &out,
                    &scales,
                    &mirror,
                    &tokens,
                    &scale_row_stride,
                    &scale_group_stride,
                    &rows,
                    &quant_scale};
  k.kernel.launch(unsigned(a.tokens), stream, params, a.pdl);
}

void launch_group_quant(const LaunchableKernel& k, const GroupQuantArgs& a, const Stream& stream) {
  const detail::ScaleStrides strides = detail::scale_strides(a.mode, a.tokens, a.hidden);
  const void* in = a.input;
  void* out = a.out;
  void* scales = a.scales;
  int tokens = a.tokens, scale_row_stride = strides.row, scale_group_stride = strides.group;
  RowStrides rows = detail::row_strides(a);
  const float* quant_scale = detail::quant_scale(a);
  void* params[] = {&in, &out, &scales, &tokens, &scale_row_stride, &scale_group_stride, &rows, &quant_scale};
  k.kernel.launch(unsigned(a.tokens), stream, params, a.pdl);
}

void launch_token_quant(const LaunchableKernel& k, const TokenQuantArgs& a, const Stream& stream) {
  const void* in = a.input;
  void* out = a.out;
  float* scales = a.scales;
  int tokens = a.tokens;
  RowStrides rows = detail::row_strides(a);
  void* params[] = {&in, &out, &scales, &tokens, &rows};
  k.kernel.launch(unsigned(a.tokens), stream, params, a.pdl);
}

}  // namespace arfuse
