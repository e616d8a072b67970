// The limits and mode codes that the host runtime and the kernels must agree on, defined once
// for both (plain C++, no vendor code): the JIT's enums take their values from here, and the
// signal block is sized by it.
#pragma once

namespace arfuse {

inline constexpr int kMinWorld = 2;
inline constexpr int kMaxWorld = 8;
inline constexpr int kMaxBlocks = 1024;  // barrier slots per rank: the most blocks a launch gets
inline constexpr int kMaxHidden = 32768;

// Per-token FP8 (contract step 7), per-token-group FP8 (7b), MXFP4 (7c), static per-tensor FP8
// (7d) and NVFP4 (7e); the _mirror modes also write y in T. A call descriptor holds the mode in 4
// bits (signal.cuh): at most 15.
enum QuantMode {
  kQuantNone = 0,
  kQuantFp8 = 1,
  kQuantFp8Mirror = 2,
  kQuantFp8Group = 3,
  kQuantFp8GroupMirror = 4,
  kQuantMxfp4 = 5,
  kQuantMxfp4Mirror = 6,
  kQuantFp8Static = 7,
  kQuantFp8StaticMirror = 8,
  kQuantNvfp4 = 9,
  kQuantNvfp4Mirror = 10,
};
enum NormMode { kNormRms = 0, kNormGemma = 1 };
// How per-group FP8 scales are stored (7b): fp32 amax / FP8_MAX, that rounded up to a power of
// two (UE8M0) as fp32, or as its E8M0 byte.
enum ScaleFormatCode { kScaleF32 = 0, kScaleUe8m0F32 = 1, kScaleE8m0 = 2 };
inline constexpr int kMxBlockSize = 32;     // MXFP4 elements per shared scale
inline constexpr int kNvfp4BlockSize = 16;  // NVFP4 elements per E4M3 block scale
// NVFP4's swizzled scales: tiles of 128 rows x 4 scale columns, 512 bytes each (the layout
// cuBLASLt and CUTLASS block-scaled GEMMs read).
inline constexpr int kSwizzleRows = 128, kSwizzleColumns = 4, kSwizzleTileBytes = 512;

template <int Q>
inline constexpr bool kQuantIsTokenFp8 = Q == kQuantFp8 || Q == kQuantFp8Mirror;
template <int Q>
inline constexpr bool kQuantIsGroupFp8 = Q == kQuantFp8Group || Q == kQuantFp8GroupMirror;
template <int Q>
inline constexpr bool kQuantIsMxfp4 = Q == kQuantMxfp4 || Q == kQuantMxfp4Mirror;
template <int Q>
inline constexpr bool kQuantIsStaticFp8 = Q == kQuantFp8Static || Q == kQuantFp8StaticMirror;
template <int Q>
inline constexpr bool kQuantIsNvfp4 = Q == kQuantNvfp4 || Q == kQuantNvfp4Mirror;
// Two E2M1 elements per output byte.
template <int Q>
inline constexpr bool kQuantPacksFp4 = kQuantIsMxfp4<Q> || kQuantIsNvfp4<Q>;
template <int Q>
inline constexpr bool kQuantWritesMirror =
    Q == kQuantFp8Mirror || Q == kQuantFp8GroupMirror || Q == kQuantMxfp4Mirror || Q == kQuantFp8StaticMirror ||
    Q == kQuantNvfp4Mirror;

// Elements between the starts of consecutive rows of each row-major tensor a kernel reads or
// writes (a contiguous tensor's is its row's width; `out` counts in its own units: T, fp8 bytes
// or MXFP4 bytes), and the columns of `out` each row fills: hidden values, then zeros up to
// out_width (T and per-token FP8 outputs).
struct RowStrides {
  int input, residual_in, residual_out, out, mirror, out_width;
};

}  // namespace arfuse
