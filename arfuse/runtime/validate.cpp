#include "arfuse/runtime/validate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "arfuse/error.hpp"

namespace arfuse::detail {

void require_pointer(const void* p, const char* name, const std::string& why_needed) {
  if (p == nullptr) throw Error(fmt::format("{} is null; it is required {}", name, why_needed));
  require_aligned(p, name);
}

void require_aligned(const void* p, const char* name) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) {
    throw Error(fmt::format("{} ({}) is not 16-byte aligned; every tensor must be", name, p));
  }
}

void require_tokens(int tokens, int capacity) {
  if (tokens < 0) throw Error(fmt::format("tokens is {}; it must be 0 or more", tokens));
  if (capacity >= 0 && tokens > capacity) {
    throw Error(fmt::format("tokens is {}, more than the capacity of {} the group was created with", tokens, capacity));
  }
}

void require_eps(float eps) {
  if (!std::isfinite(eps) || eps < 0.0f) throw Error(fmt::format("eps is {}; it must be finite and >= 0", eps));
}

void require_epilogue_pointers(const EpiloguePointers& p, const char* input_role) {
  require_pointer(p.input, "input", input_role);
  require_pointer(p.residual_in, "residual_in", "(the residual add)");
  require_pointer(p.residual_out, "residual_out", "(the updated residual)");
  require_pointer(p.weight, "weight", "(the norm weight)");
  require_pointer(p.out, "out", "(the normalised output)");
  if (p.quant != Quant::none) {
    require_pointer(p.scales, "scales", fmt::format("with quant {}", to_string(p.quant)));
  }
  if (writes_mirror(p.quant)) {
    require_pointer(p.mirror, "mirror", fmt::format("with quant {}", to_string(p.quant)));
  }
}

ScaleStrides scale_strides(const EpilogueMode& mode, int tokens, int hidden) {
  if (is_mxfp4(mode.quant)) return {hidden / kMxBlockSize, 1};
  if (is_group_fp8(mode.quant)) {
    return mode.scale_layout == ScaleLayout::row_major ? ScaleStrides{hidden / mode.group_size, 1}
                                                       : ScaleStrides{1, tokens};
  }
  return mode.quant == Quant::none ? ScaleStrides{0, 0} : ScaleStrides{1, 0};
}

}  // namespace arfuse::detail
