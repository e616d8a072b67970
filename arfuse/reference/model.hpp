// The CPU reference model of the numeric contract (docs/numeric-contract.md), bit for bit: the rank
// order fold, residual add, RMSNorm with the device's exact reduction tree (it follows
// jit::block_shape and the target's warp size), per-token FP8. Tensors are raw bits: T is
// f16/bf16 as uint16_t, fp8 as uint8_t.
#pragma once

#include <cstdint>
#include <vector>

#include "arfuse/error.hpp"

#include "jit/kernel_spec.hpp"

namespace arfuse::reference {

using Bits16 = std::vector<std::uint16_t>;

float widen(std::uint16_t bits, DType dtype);
std::uint16_t narrow(float value, DType dtype);

// Step 1: T( ((f(x0) + f(x1)) + f(x2)) + ... ), rank order 0..W-1.
Bits16 fold(const std::vector<Bits16>& inputs, DType dtype);

struct EpilogueConfig {
  int hidden = 0;
  DType dtype = DType::bf16;
  EpilogueMode mode;
  float eps = 1e-6f;
  Target target = Target::parse("sm_90");
  float quant_scale = 1.0f;  // fp8_static: the scale; nvfp4: the global scale
};

struct EpilogueOutputs {
  Bits16 residual_out;
  Bits16 out;                             // quant none
  std::vector<std::uint8_t> q;            // fp8 bytes, or packed E2M1 (mxfp4, nvfp4) [tokens, hidden / 2]
  std::vector<float> scales;              // fp8 [tokens]; fp8_group with fp32 / UE8M0-as-fp32 scales
  std::vector<std::uint8_t> scale_bytes;  // fp8_group with E8M0 scales; mxfp4; nvfp4 (its layout)
  Bits16 mirror;                          // with mode.mirror
};

// Steps 3-4 for one row of res (widened to f32, hidden elements): the sum of squares over the
// device's reduction tree, then 1 / sqrt(ss / H + eps). epilogue() uses it; the tests use it to
// place elements next to a rounding tie on purpose.
float inverse_norm(const EpilogueConfig& config, const float* res_row);

// Steps 2-7 (7b-7e for the block-scaled and static modes) for `tokens` rows of the already reduced tensor `ar`.
EpilogueOutputs epilogue(const EpilogueConfig& config, int tokens, const Bits16& ar, const Bits16& residual_in,
                         const Bits16& weight);

// Step 7 alone, on y (what token_quant computes).
void token_quant(const EpilogueConfig& config, int tokens, const Bits16& y, std::vector<std::uint8_t>& q,
                 std::vector<float>& scales);

}  // namespace arfuse::reference
