// Argument checks shared by the launch entry points; each throws arfuse::Error whose message
// names the argument, what was wrong and what is allowed.
#pragma once

#include <string>

#include "arfuse/modes.hpp"

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
  Quant quant;
};
void require_epilogue_pointers(const EpiloguePointers& p, const char* input_role);

// Where a row's scales start (row * row) and how far apart its groups' are, in scale elements.
struct ScaleStrides {
  int row = 0, group = 0;
};
// `mode` has been validated for `hidden`.
ScaleStrides scale_strides(const EpilogueMode& mode, int tokens, int hidden);

}  // namespace arfuse::detail
