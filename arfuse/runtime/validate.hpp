// Argument checks shared by the launch entry points; each throws arfuse::Error whose message
// names the argument, what was wrong and what is allowed.
#pragma once

#include <string>

#include "arfuse/jit/kernel_spec.hpp"

namespace arfuse::detail {

void require_pointer(const void* p, const char* name, const std::string& why_needed);
void require_aligned(const void* p, const char* name);
void require_tokens(int tokens, int capacity = -1);
void require_eps(float eps);

// The tensors an epilogue call reads and writes; scales and mirror only where `quant` needs them.
struct EpiloguePointers {
  const void* input;
  const void* residual_in;
  const void* residual_out;
  const void* weight;
  const void* out;
  const void* scales;
  const void* mirror;
  jit::Quant quant;
};
void require_epilogue_pointers(const EpiloguePointers& p, const char* input_role);

// The block-scaled modes' settings: the group size (32, 64, 128, dividing hidden), MXFP4's
// hidden divisible by 32, and a scale layout the mode has.
void require_block_scaling(jit::Quant quant, int group, jit::ScaleLayout layout, int hidden);

// Where a row's scales start (row * row) and how far apart its groups' are, in scale elements.
struct ScaleStrides {
  int row = 0, group = 0;
};
// Throws Error for a layout the mode does not have (MXFP4 scales are row-major).
ScaleStrides scale_strides(jit::Quant quant, int group, jit::ScaleLayout layout, int tokens, int hidden);

}  // namespace arfuse::detail
