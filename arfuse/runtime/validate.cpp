#include "arfuse/runtime/validate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "arfuse/epilogue.hpp"
#include "arfuse/error.hpp"
#include "arfuse/group.hpp"
#include "arfuse/jit/kernel_spec.hpp"

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

namespace arfuse {

using detail::require_pointer;

namespace {

void check_group_shape(int tokens, int hidden, int max_tokens, int max_hidden) {
  detail::require_tokens(tokens, max_tokens);
  check_hidden(hidden);
  if (hidden > max_hidden) {
    throw Error(
        fmt::format("hidden is {}, more than the max_hidden of {} the group was created with", hidden, max_hidden));
  }
}

}  // namespace

void validate_args(const AllreduceRmsnormArgs& a, int max_tokens, int max_hidden) {
  check_group_shape(a.tokens, a.hidden, max_tokens, max_hidden);
  a.mode.validate(a.hidden);
  detail::require_eps(a.eps);
  if (a.tokens == 0) return;
  detail::require_epilogue_pointers(
      {a.input, a.residual_in, a.residual_out, a.weight, a.out, a.scales, a.mirror, a.mode.quant},
      "(this rank's contribution)");
}

void validate_args(const AllreduceArgs& a, int max_tokens, int max_hidden) {
  check_group_shape(a.tokens, a.hidden, max_tokens, max_hidden);
  if (a.tokens == 0) return;
  require_pointer(a.input, "input", "(this rank's contribution)");
  require_pointer(a.out, "out", "(the sum)");
}

void validate_args(const RmsnormQuantArgs& a) {
  a.mode.validate(a.hidden);
  detail::require_tokens(a.tokens);
  detail::require_eps(a.eps);
  if (a.tokens == 0) return;
  detail::require_epilogue_pointers(
      {a.input, a.residual_in, a.residual_out, a.weight, a.out, a.scales, a.mirror, a.mode.quant},
      "(the reduced tensor)");
}

void validate_args(const GroupQuantArgs& a) {
  if (!jit::takes_quant(jit::Module::group_quant, a.mode.quant)) {
    throw Error(
        fmt::format("group_quant takes quant fp8_group or mxfp4, not {} (the mirror modes belong to the "
                    "epilogue kernels)",
                    to_string(a.mode.quant)));
  }
  a.mode.validate(a.hidden);
  detail::require_tokens(a.tokens);
  if (a.tokens == 0) return;
  require_pointer(a.input, "input", "(the tensor to quantise)");
  require_pointer(a.out, "out", "(the quantised output)");
  require_pointer(a.scales, "scales", "(the group scales)");
}

}  // namespace arfuse
