// The block reductions of the numeric contract: the sum of squares (step 3) and the amax (step 7)
// of a row, a fixed tree per block shape, so every sum's order depends only on H, the block shape
// and the warp size.
#pragma once

#include "platform.cuh"

namespace arfuse {

// Shared memory for the two block reductions: one partial per warp, plus the broadcast slot.
struct ReduceScratch {
  float sum[kWarpSize + 1];
  float amax[kWarpSize + 1];
};

// Butterfly over the first LANES lanes: lane 0 ends with their sum (every one of them, with
// LANES = kWarpSize), and a + b == b + a bit for bit.
template <int LANES = kWarpSize>
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int mask = LANES / 2; mask > 0; mask >>= 1) v += shuffle_xor(v, mask);
  return v;
}

// The smallest power of two >= n (n >= 1).
ARFUSE_HOST_DEVICE constexpr int power_of_two_at_least(int n) {
  return n <= 1 ? 1 : 2 * power_of_two_at_least((n + 1) / 2);
}

// v >= 0 or a NaN with the sign bit clear (the amax partials): their bit patterns order as
// unsigned integers do, a NaN above Inf, so the integer maximum is the NaN-keeping float maximum
// (which NaN comes out does not matter, max_keep_nan's comment says why).
template <int LANES = kWarpSize>
__device__ __forceinline__ float warp_max(float v) {
  if constexpr (kWarpReduxMax) {
    return bits_to_float(warp_max_unsigned(float_to_bits(v)));
  } else {
#pragma unroll
    for (int mask = LANES / 2; mask > 0; mask >>= 1) v = max_keep_nan(v, shuffle_xor(v, mask));
    return v;
  }
}

// Cross-warp step: the first warp loads the per-warp partials (lanes without one load 0, the
// identity for these nonnegative partials) and reduces them with shuffles (the maximum with one
// redux.sync where the hardware has it). No thread folds partials serially. The contract's
// butterfly runs over the whole warp; its levels with a mask >= kLanes (the smallest power of two
// >= kWarps) only combine lane i < kLanes with a lane that holds +0, and x + 0 and max(x, 0) are
// x for these partials (>= +0, or a NaN, which stays a NaN), while the levels below never mix
// lanes >= kLanes into lane 0: so lane 0 gets the same bits without those levels (one shuffle
// less at 12 or 16 warps, three for 6 wave64 waves).
template <int THREADS, bool IS_MAX>
__device__ __forceinline__ float block_reduce(float v, float* partials) {
  constexpr int kWarps = THREADS / kWarpSize;
  constexpr int kLanes = power_of_two_at_least(kWarps);
  static_assert(THREADS % kWarpSize == 0 && kWarps <= kWarpSize, "block shape");
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = IS_MAX ? warp_max(v) : warp_sum(v);
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float p = lane < kWarps ? partials[lane] : 0.0f;
    p = IS_MAX ? warp_max<kLanes>(p) : warp_sum<kLanes>(p);
    if (lane == 0) partials[kWarpSize] = p;
  }
  __syncthreads();
  return partials[kWarpSize];
}

}  // namespace arfuse
