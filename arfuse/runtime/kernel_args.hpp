// The custom and standalone kernels' arguments from validated call arguments: row strides with
// each 0 resolved, where the scales of a row and its groups lie, the scale pointer the kernel
// reads, and whether the call needs the spec's views kernels. Pure functions of the arguments;
// nothing here checks one (runtime/validate.hpp did).
#pragma once

#include "arfuse/allreduce.hpp"
#include "arfuse/epilogue_args.hpp"

#include "templates/limits.cuh"

namespace arfuse {

// Whether a validated call's tensors need the spec's views kernels: a row stride other than its
// row's width, or a padded out.
bool is_view(const RmsnormQuantArgs& args);
bool is_view(const AllreduceArgs& args);
bool is_view(const TokenQuantArgs& args);
bool is_view(const GroupQuantArgs& args);

namespace detail {

// Where a row's scales start (row * row) and how far apart its groups' are, in scale elements.
struct ScaleStrides {
  int row = 0, group = 0;
};
// `mode` has been validated for `hidden`.
ScaleStrides scale_strides(const EpilogueMode& mode, int tokens, int hidden);

// The kernels' row strides of validated arguments: each 0 resolved to its row's width.
RowStrides row_strides(const RmsnormQuantArgs& args);
RowStrides row_strides(const AllreduceArgs& args);
RowStrides row_strides(const TokenQuantArgs& args);
RowStrides row_strides(const GroupQuantArgs& args);
// The scale pointer the kernel reads: the one argument the mode reads it from, else null.
const float* quant_scale(const RmsnormQuantArgs& args);
const float* quant_scale(const GroupQuantArgs& args);

}  // namespace detail
}  // namespace arfuse
