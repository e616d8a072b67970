#include "runtime/kernel_args.hpp"

namespace arfuse {

detail::ScaleStrides detail::scale_strides(const EpilogueMode& mode, int tokens, int hidden) {
  const ScaleShape shape = mode.scale_shape(hidden);
  if (shape.columns == 0) return {0, 0};
  if (shape.per_row) return {1, 0};
  if (mode.scale_layout == ScaleLayout::swizzled_128x4)  // tiles per row; group stride 0 marks the layout
    return {(shape.columns + shape.column_multiple - 1) / shape.column_multiple, 0};
  return shape.transposed ? ScaleStrides{1, tokens} : ScaleStrides{shape.columns, 1};
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
  const int out_row = packs_fp4(a.mode.quant) ? a.mode.out_row(a.hidden) : out_width;
  return RowStrides{or_width(a.input_stride, a.hidden),        or_width(a.residual_in_stride, a.hidden),
                    or_width(a.residual_out_stride, a.hidden), or_width(a.out_stride, out_row),
                    or_width(a.mirror_stride, a.hidden),       out_width};
}

const float* detail::quant_scale(const RmsnormQuantArgs& a) {
  return a.static_scale != nullptr ? a.static_scale : a.global_scale;
}

const float* detail::quant_scale(const GroupQuantArgs& a) {
  return a.static_scale != nullptr ? a.static_scale : a.global_scale;
}

RowStrides detail::row_strides(const AllreduceArgs& a) {
  return input_output_strides(a.input_stride, a.out_stride, a.hidden, a.hidden);
}

RowStrides detail::row_strides(const TokenQuantArgs& a) {
  return input_output_strides(a.input_stride, a.out_stride, a.hidden, a.hidden);
}

RowStrides detail::row_strides(const GroupQuantArgs& a) {
  return input_output_strides(a.input_stride, a.out_stride, a.hidden, a.mode.out_row(a.hidden));
}

namespace {

bool strided(int stride, int width) { return stride != 0 && stride != width; }

// A call with one input and one output (its rows out_row units wide).
bool input_output_view(int input_stride, int out_stride, int hidden, int out_row) {
  return strided(input_stride, hidden) || strided(out_stride, out_row);
}

}  // namespace

bool is_view(const RmsnormQuantArgs& a) {
  const int out_row = a.mode.out_row(a.hidden);
  return strided(a.input_stride, a.hidden) || strided(a.residual_in_stride, a.hidden) ||
         strided(a.residual_out_stride, a.hidden) || strided(a.mirror_stride, a.hidden) ||
         strided(a.out_stride, out_row) || strided(a.out_width, a.hidden);
}

bool is_view(const AllreduceArgs& a) { return input_output_view(a.input_stride, a.out_stride, a.hidden, a.hidden); }

bool is_view(const TokenQuantArgs& a) { return input_output_view(a.input_stride, a.out_stride, a.hidden, a.hidden); }

bool is_view(const GroupQuantArgs& a) {
  return input_output_view(a.input_stride, a.out_stride, a.hidden, a.mode.out_row(a.hidden));
}
}  // namespace arfuse
