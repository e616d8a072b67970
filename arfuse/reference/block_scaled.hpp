// The CPU reference of block-scaled quantisation of y (contract steps 7b and 7c), bit for bit:
// per-token-group FP8 with fp32, UE8M0-as-fp32 or E8M0-byte scales in either layout, and MXFP4
// (OCP MX v1.0). y is T bits [tokens, hidden], as the epilogue model produces it (model.hpp).
// A group's amax is a max, which no reduction order changes, so no device layout is modelled.
#pragma once

#include <cstdint>
#include <vector>

#include "arfuse/error.hpp"
#include "arfuse/jit/kernel_spec.hpp"
#include "arfuse/reference/model.hpp"
#include "arfuse/target.hpp"

namespace arfuse::reference {

struct ARFUSE_API GroupQuantConfig {
  int hidden = 0;
  int group_size = 128;
  DType dtype = DType::bf16;
  Fp8Format format = Fp8Format::e4m3fn;
  ScaleFormat scale_format = ScaleFormat::f32;
  ScaleLayout layout = ScaleLayout::row_major;
};

struct ARFUSE_API GroupQuantOutputs {
  std::vector<std::uint8_t> q;            // fp8 [tokens, hidden]
  std::vector<float> scales;              // f32 and ue8m0_f32: [tokens, groups] or [groups, tokens]
  std::vector<std::uint8_t> scale_bytes;  // e8m0: the same shape, one byte each
};

// Step 7b. Throws Error for a group size that is not 32, 64 or 128 or does not divide hidden.
ARFUSE_API GroupQuantOutputs group_quant(const GroupQuantConfig& config, int tokens, const Bits16& y);

// One group's scale before storing: amax > 0 ? amax / fp8_max : 1, rounded up to a power of two
// (NaN when not finite) unless the format is f32.
ARFUSE_API float group_scale(float amax, float fp8_max, ScaleFormat format);

struct ARFUSE_API Mxfp4Outputs {
  std::vector<std::uint8_t> packed;  // [tokens, hidden / 2]: element 2k in the low nibble
  std::vector<std::uint8_t> scales;  // E8M0 [tokens, hidden / 32]
};

// Step 7c. Throws Error unless 32 divides hidden.
ARFUSE_API Mxfp4Outputs mxfp4_quant(int hidden, DType dtype, int tokens, const Bits16& y);

// One block's shared exponent e (scale 2^e) for its amax, clamped to [-127, 127]; nullopt-like
// sentinel: returns false when amax is not finite (scale byte 0xFF, elements 0).
ARFUSE_API bool mx_shared_exponent(float amax, int& exponent);

}  // namespace arfuse::reference
