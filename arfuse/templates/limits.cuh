// The limits and mode codes that the host runtime and the kernels must agree on, defined once
// for both (plain C++, no vendor code): the JIT's enums take their values from here, and the
// signal block is sized by it.
#pragma once

namespace arfuse {

inline constexpr int kMinWorld = 2;
inline constexpr int kMaxWorld = 8;
inline constexpr int kMaxBlocks = 1024;  // barrier slots per rank: the most blocks a launch gets
inline constexpr int kMaxHidden = 32768;

enum QuantMode { kQuantNone = 0, kQuantFp8 = 1, kQuantFp8Mirror = 2 };
enum NormMode { kNormRms = 0, kNormGemma = 1 };

}  // namespace arfuse
