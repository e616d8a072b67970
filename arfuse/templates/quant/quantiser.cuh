// What every quantiser under quant/ provides: a specialisation of Quantiser for its mode's row,
//
//   template <typename T, int H, int THREADS, int VPT, int GROUP, int SCALE, typename Row>
//   static void quantize(const Vec16 (&y)[VPT], const Row& row, ReduceScratch* scratch);
//
// the contract's step 7 (7b-7e) for a row that is y: Row is epilogue.cuh's RowOutputs<T>, scratch
// the block's reduction scratch (null where the kernel has none: the modes group_quant takes never
// reduce over the row). It derives from QuantiserDefaults; a layout that pads scale rows defines
// its own zero_scale_padding. The kernels call Quantiser<row> only; the program includes every
// row's file (QuantRow::quantiser, jit/render.cpp), so no kernel template names a quantiser.
#pragma once

#include "platform.cuh"
#include "reduce.cuh"

namespace arfuse {

// What a quantiser need not define: the scale rows past `tokens` that a layout pads, zeroed by
// every block; none unless the quantiser says so.
struct QuantiserDefaults {
  template <int THREADS>
  __device__ __forceinline__ static void zero_scale_padding(void*, int, int, int) {}
};

template <int FAMILY>
struct Quantiser : QuantiserDefaults {};

}  // namespace arfuse
