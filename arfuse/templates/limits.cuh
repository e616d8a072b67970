// The limits and codes that the host runtime and the kernels must agree on, defined once for
// both (plain C++, no vendor code): the JIT's enums take their values from here, and the signal
// block is sized by it. The quant modes are the mode table's (arfuse/quant_modes.hpp).
#pragma once

namespace arfuse {

inline constexpr int kMinWorld = 2;
inline constexpr int kMaxWorld = 8;
inline constexpr int kMaxBlocks = 1024;  // barrier slots per rank: the most blocks a launch gets
inline constexpr int kMaxHidden = 32768;

enum NormMode { kNormRms = 0, kNormGemma = 1 };
// How per-group FP8 scales are stored (7b): fp32 amax / FP8_MAX, that rounded up to a power of
// two (UE8M0) as fp32, or as its E8M0 byte.
enum ScaleFormatCode { kScaleF32 = 0, kScaleUe8m0F32 = 1, kScaleE8m0 = 2 };
// NVFP4's swizzled scales: tiles of 128 rows x 4 scale columns, 512 bytes each (the layout
// cuBLASLt and CUTLASS block-scaled GEMMs read).
inline constexpr int kSwizzleRows = 128, kSwizzleColumns = 4, kSwizzleTileBytes = 512;

// Elements between the starts of consecutive rows of each row-major tensor a kernel reads or
// writes (a contiguous tensor's is its row's width; `out` counts in its own units: T, fp8 bytes
// or MXFP4 bytes), and the columns of `out` each row fills: hidden values, then zeros up to
// out_width (T and per-token FP8 outputs).
struct RowStrides {
  int input, residual_in, residual_out, out, mirror, out_width;
};

}  // namespace arfuse
