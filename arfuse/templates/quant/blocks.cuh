// What the block-scaled quantisers (steps 7b, 7c and 7e) share: the amax of each group of G
// consecutive elements, and a walk over the row's vectors with their group's amax.
#pragma once

#include "platform.cuh"
#include "row.cuh"

namespace arfuse {

// A group of G consecutive elements is G / 8 consecutive vectors: G / 8 consecutive lanes of one
// warp in the same k (THREADS is a multiple of the warp size, and G / 8 divides it). Its amax is
// a max, which no shuffle order changes. Every lane takes part in the shuffles, owner or not,
// so they stay convergent; all lanes of a group own it or none do (G divides H).
template <typename T, int G>
__device__ __forceinline__ float group_amax(const Vec16& v, bool owned) {
  static_assert(G % 8 == 0 && kWarpSize % (G / 8) == 0, "a group must fit in one warp");
  AbsMax<T> local;
  if (owned) {
#pragma unroll
    for (int i = 0; i < 4; ++i) local.add(v.w[i]);
  }
  float amax = local.value();
  if constexpr (kWarpReduxMax && G / 8 == kWarpSize / 2) {
    // A group per half-warp: one redux.sync over each half (the other half gives 0), instead of
    // four dependent shuffle levels. The amaxes are >= 0 or NaNs with the sign bit clear, which
    // order as unsigned integers do (warp_max's comment).
    const bool low_half = threadIdx.x % kWarpSize < kWarpSize / 2;
    const u32 bits = float_to_bits(amax);
    const u32 low = warp_max_unsigned(low_half ? bits : 0u), high = warp_max_unsigned(low_half ? 0u : bits);
    return bits_to_float(low_half ? low : high);
  } else {
#pragma unroll
    for (int mask = G / 16; mask > 0; mask >>= 1) amax = max_keep_nan(amax, shuffle_xor(amax, mask));
    return amax;
  }
}

// Calls body(k, vec, amax) for each vector y[k] this thread owns (vec: its index in the row),
// with amax over its group of G elements; every lane takes part in the group's shuffles.
template <typename T, int H, int THREADS, int VPT, int G, typename Body>
__device__ __forceinline__ void for_each_owned_vector(const Vec16 (&y)[VPT], Body&& body) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const bool owned = owns_vector<H, THREADS>(k);
    const float amax = group_amax<T, G>(y[k], owned);
    if (owned) body(k, int(threadIdx.x) + k * THREADS, amax);
  }
}

}  // namespace arfuse
