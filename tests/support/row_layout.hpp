// The row strides and padded widths the tests give a call: every tensor a view of a wider buffer,
// each with a stride of its own (so a kernel that mixes two strides up is seen), or contiguous.
#pragma once

#include "arfuse/epilogue.hpp"
#include "arfuse/group.hpp"

namespace arfuse::test {

// An epilogue call's shape, strides and out_width (pointers unset).
inline RmsnormQuantArgs epilogue_layout(int tokens, int hidden, DType dtype, const EpilogueMode& mode, bool strided,
                                        int out_width = 0) {
  RmsnormQuantArgs a;
  a.tokens = tokens, a.hidden = hidden, a.dtype = dtype, a.mode = mode, a.out_width = out_width;
  if (strided) {
    a.input_stride = hidden + 8, a.residual_in_stride = hidden + 16, a.residual_out_stride = hidden + 24;
    a.mirror_stride = hidden + 32;
    const int out_row = packs_fp4(mode.quant) ? hidden / 2 : out_width ? out_width : hidden;
    a.out_stride = mode.quant == Quant::none ? out_row + 8 : (out_row + 31) / 16 * 16;
  }
  return a;
}

// A plain all-reduce's shape and strides (pointers unset).
inline AllreduceArgs allreduce_layout(int tokens, int hidden, DType dtype, bool strided) {
  AllreduceArgs a;
  a.tokens = tokens, a.hidden = hidden, a.dtype = dtype;
  if (strided) a.input_stride = hidden + 8, a.out_stride = hidden + 24;
  return a;
}

}  // namespace arfuse::test
