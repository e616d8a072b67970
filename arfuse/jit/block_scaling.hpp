// The choices of block-scaled quantisation (contract steps 7b and 7c) that the reference model,
// and later the kernels and the runtime, share: group sizes, how per-group scales are stored,
// and where.
#pragma once

#include "arfuse/templates/limits.cuh"

namespace arfuse::jit {

// Per-token-group FP8: one scale per G consecutive elements of a row.
inline constexpr bool valid_group_size(int g) { return g == 32 || g == 64 || g == 128; }

// MXFP4 (OCP MX v1.0): blocks of 32 elements share one E8M0 scale.
inline constexpr int kMxBlock = kMxBlockSize;

// The device code's codes (templates/limits.cuh), passed to a kernel as int(format).
enum class ScaleFormat {
  f32 = kScaleF32,             // amax / FP8_MAX (1 when amax is 0), as fp32
  ue8m0_f32 = kScaleUe8m0F32,  // that scale rounded up to a power of two, as fp32
  e8m0 = kScaleE8m0,           // the same power of two as its E8M0 byte
};

enum class ScaleLayout {
  row_major,     // [tokens, groups]
  column_major,  // [groups, tokens]: for GEMMs that read the scales transposed
};

}  // namespace arfuse::jit
