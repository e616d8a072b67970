// The CPU reference of the quantisers of y that keep no per-token amax (contract steps 7b-7e),
// bit for bit: per-token-group FP8 with fp32, UE8M0-as-fp32 or E8M0-byte scales in either layout,
// MXFP4 (OCP MX v1.0), static per-tensor FP8 and NVFP4 in either scale layout. y is T bits [tokens, hidden], as the
// epilogue model produces it (model.hpp). A group's amax is a max, which no reduction order changes, so no device
// layout is modelled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "arfuse/error.hpp"
#include "arfuse/target.hpp"

#include "jit/kernel_spec.hpp"
#include "reference/model.hpp"

namespace arfuse::reference {

// Steps 7b-7e of every row's y (T bits [tokens, hidden]) for a block-scaled mode (every mode but
// none and per-token fp8), into o's q, scales and scale_bytes: the one place the reference picks a
// mode's step (epilogue() calls it), so a new mode's step is written in this file only.
void quantize_block_scaled(const EpilogueConfig& config, int tokens, const Bits16& y, EpilogueOutputs& o);

struct GroupQuantConfig {
  int hidden = 0;
  int group_size = 128;
  DType dtype = DType::bf16;
  Fp8Format format = Fp8Format::e4m3fn;
  ScaleFormat scale_format = ScaleFormat::f32;
  ScaleLayout layout = ScaleLayout::row_major;
};

struct GroupQuantOutputs {
  std::vector<std::uint8_t> q;            // fp8 [tokens, hidden]
  std::vector<float> scales;              // f32 and ue8m0_f32: [tokens, groups] or [groups, tokens]
  std::vector<std::uint8_t> scale_bytes;  // e8m0: the same shape, one byte each
};

// Step 7b. Throws Error for a group size that is not 32, 64 or 128 or does not divide hidden.
GroupQuantOutputs group_quant(const GroupQuantConfig& config, int tokens, const Bits16& y);

// One group's scale before storing: amax > 0 ? amax / fp8_max : 1, rounded up to a power of two
// (NaN when not finite) unless the format is f32.
float group_scale(float amax, float fp8_max, ScaleFormat format);

struct Mxfp4Outputs {
  std::vector<std::uint8_t> packed;  // [tokens, hidden / 2]: element 2k in the low nibble
  std::vector<std::uint8_t> scales;  // E8M0 [tokens, hidden / 32]
};

// Step 7c. Throws Error unless 32 divides hidden.
Mxfp4Outputs mxfp4_quant(int hidden, DType dtype, int tokens, const Bits16& y);

// One block's shared exponent e (scale 2^e) for its amax, clamped to [-127, 127]; nullopt-like
// sentinel: returns false when amax is not finite (scale byte 0xFF, elements 0).
bool mx_shared_exponent(float amax, int& exponent);

// Step 7d: q = fp8(f(y) * (1 / scale)), one IEEE division for the call.
std::vector<std::uint8_t> static_fp8_quant(int hidden, DType dtype, Fp8Format format, int tokens, const Bits16& y,
                                           float scale);

inline constexpr int kNvfp4Block = 16;

// Step 7e for one block: the E4M3 scale byte e4m3fn(global * (amax * (1/6))), its multiplier
// 1 / (s * (1 / global)) (0 when s is 0), and whether its elements are encoded (s not NaN).
struct Nvfp4Block {
  std::uint8_t scale = 0;
  float multiplier = 0.0f;
  bool encode = false;
};
Nvfp4Block nvfp4_block_of(float amax, float global);

struct Nvfp4Outputs {
  std::vector<std::uint8_t> packed;  // [tokens, hidden / 2]: element 2k in the low nibble
  std::vector<std::uint8_t> scales;  // E4M3, nvfp4_scale_count bytes in the layout (padding 0)
};

// Where the scale of (token, column) goes, and how many scale bytes a call writes: row-major
// [tokens, hidden / 16], or the swizzled 128x4 layout with rows padded to 128 and columns to 4.
std::size_t nvfp4_scale_index(int token, int column, int tokens, int hidden, ScaleLayout layout);
std::size_t nvfp4_scale_count(int tokens, int hidden, ScaleLayout layout);

// Step 7e. Throws Error unless 16 divides hidden.
Nvfp4Outputs nvfp4_quant(int hidden, DType dtype, int tokens, const Bits16& y, float global, ScaleLayout layout);

}  // namespace arfuse::reference
