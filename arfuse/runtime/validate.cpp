#include "runtime/validate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string_view>

#include "arfuse/error.hpp"

#include "base/names.hpp"
#include "jit/kernel_spec.hpp"

namespace arfuse {
namespace detail {

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

}  // namespace detail

using detail::require_pointer;

namespace {

// After the hidden size's own check, so that a size no kernel takes is reported as such.
void require_max_hidden(int hidden, int max_hidden) {
  if (hidden > max_hidden) {
    throw Error(
        fmt::format("hidden is {}, more than the max_hidden of {} the group was created with", hidden, max_hidden));
  }
}

// The tensors of an epilogue; scales and mirror only where the mode writes them (the checks that
// name the mode come last).
template <typename Args>
void require_epilogue_tensors(const Args& a, const char* input_role) {
  require_pointer(a.input, "input", input_role);
  require_pointer(a.residual_in, "residual_in", "(the residual add)");
  require_pointer(a.residual_out, "residual_out", "(the updated residual)");
  require_pointer(a.weight, "weight", "(the norm weight)");
  require_pointer(a.out, "out", "(the normalised output)");
  detail::require_aligned(a.scales, "scales");
  detail::require_aligned(a.mirror, "mirror");
  if (writes_scales(a.mode.quant) && a.scales == nullptr) {
    throw Error(fmt::format("scales is null; it is required with quant {}", a.mode.quant));
  }
  if (a.mode.mirror && a.mirror == nullptr) {
    throw Error(fmt::format("mirror is null; it is required with the mirror (quant {} mirror)", a.mode.quant));
  }
}

// The modes that read their scale from argument `name`, for messages.
std::string modes_reading(const char* name) {
  std::string text;
  for (Quant q : all_quants()) {
    const char* argument = quant_scale_argument(q);
    if (argument != nullptr && std::string_view(argument) == name)
      text += (text.empty() ? "" : ", ") + std::string(to_string(q));
  }
  return text;
}

// The call's scale pointer: the one argument its mode reads, the other null.
template <typename Args>
void require_quant_scale(const Args& a) {
  const char* needed = quant_scale_argument(a.mode.quant);
  const auto require = [&](const float* p, const char* name) {
    const bool wanted = needed != nullptr && std::string_view(needed) == name;
    if (wanted && p == nullptr) {
      throw Error(fmt::format("{} is null; quant {} reads its fp32 {} from it", name, a.mode.quant,
                              quant_scale_name(a.mode.quant)));
    }
    if (!wanted && p != nullptr) {
      throw Error(fmt::format("{} is set, but quant {} reads no {}: it is for {}", name, a.mode.quant, name,
                              modes_reading(name)));
    }
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % alignof(float) != 0) {
      throw Error(fmt::format("{} ({}) is not 4-byte aligned", name, static_cast<const void*>(p)));
    }
  };
  require(a.static_scale, "static_scale");
  require(a.global_scale, "global_scale");
}

// A row stride: 0 (contiguous), the row's width, or wider and a multiple of 16 bytes (every row
// then starts 16-byte aligned). `width` in the tensor's units of `unit_bytes`.
void require_row_stride(const char* name, int stride, int width, int unit_bytes) {
  if (stride == 0 || stride == width) return;
  if (stride < width) {
    throw Error(
        fmt::format("{} is {}; it must be 0 (contiguous) or at least the row's {} elements", name, stride, width));
  }
  if (std::int64_t(stride) * unit_bytes % 16 != 0) {
    throw Error(
        fmt::format("{} is {} ({} bytes); a row stride other than the row's width must be a multiple of 16 bytes", name,
                    stride, std::int64_t(stride) * unit_bytes));
  }
}

// out_width and the strides of an epilogue's tensors (after the hidden size's check).
void require_epilogue_layout(const RmsnormQuantArgs& a) {
  const int width = a.out_width == 0 ? a.hidden : a.out_width;
  if (width != a.hidden) {
    if (width < a.hidden || width % 8 != 0) {
      throw Error(fmt::format("out_width is {}; it must be 0 (hidden) or a multiple of 8 of at least hidden ({})",
                              a.out_width, a.hidden));
    }
    if (!pads_out(a.mode.quant)) {
      std::string padded;
      for (Quant q : all_quants())
        if (pads_out(q)) padded += (padded.empty() ? "" : ", ") + std::string(to_string(q));
      throw Error(
          fmt::format("out_width is {} with quant {}: only quant {} write padded rows (the block-scaled "
                      "modes' scales cover the hidden columns only)",
                      a.out_width, a.mode.quant, padded));
    }
  }
  const int t_bytes = element_bytes(a.dtype);
  require_row_stride("input_stride", a.input_stride, a.hidden, t_bytes);
  require_row_stride("residual_in_stride", a.residual_in_stride, a.hidden, t_bytes);
  require_row_stride("residual_out_stride", a.residual_out_stride, a.hidden, t_bytes);
  require_row_stride("mirror_stride", a.mirror_stride, a.hidden, t_bytes);
  if (packs_fp4(a.mode.quant)) {
    require_row_stride("out_stride", a.out_stride, a.mode.out_row(a.hidden), 1);
  } else {
    require_row_stride("out_stride", a.out_stride, width, a.mode.quant == Quant::none ? t_bytes : 1);
  }
}

}  // namespace

// The mode's checks come last in each call's checks: they are the only ones outside this file.
void validate_args(const AllreduceRmsnormArgs& a, int max_tokens, int max_hidden) {
  detail::require_tokens(a.tokens, max_tokens);
  detail::require_eps(a.eps);
  if (a.tokens > 0) require_epilogue_tensors(a, "(this rank's contribution)");
  a.mode.validate(a.hidden);
  if (a.tokens > 0) require_quant_scale(a);
  require_max_hidden(a.hidden, max_hidden);
  require_epilogue_layout(a);
}

void validate_args(const AllreduceArgs& a, int max_tokens, int max_hidden) {
  detail::require_tokens(a.tokens, max_tokens);
  if (a.tokens > 0) {
    require_pointer(a.input, "input", "(this rank's contribution)");
    require_pointer(a.out, "out", "(the sum)");
  }
  check_hidden(a.hidden);
  require_max_hidden(a.hidden, max_hidden);
  const int t_bytes = element_bytes(a.dtype);
  require_row_stride("input_stride", a.input_stride, a.hidden, t_bytes);
  require_row_stride("out_stride", a.out_stride, a.hidden, t_bytes);
}

void validate_args(const RmsnormQuantArgs& a) {
  detail::require_tokens(a.tokens);
  detail::require_eps(a.eps);
  if (a.tokens > 0) require_epilogue_tensors(a, "(the reduced tensor)");
  a.mode.validate(a.hidden);
  if (a.tokens > 0) require_quant_scale(a);
  require_epilogue_layout(a);
}

void validate_args(const GroupQuantArgs& a) {
  if (!group_quant_takes(a.mode.quant) || a.mode.mirror) {
    std::string taken;
    for (Quant q : all_quants())
      if (group_quant_takes(q)) taken += (taken.empty() ? "" : ", ") + std::string(to_string(q));
    throw Error(
        fmt::format("group_quant takes quant {} without the mirror, not {}{} (the mirror belongs to the "
                    "epilogue kernels)",
                    taken, a.mode.quant, a.mode.mirror ? " mirror" : ""));
  }
  detail::require_tokens(a.tokens);
  if (a.tokens > 0) {
    require_pointer(a.input, "input", "(the tensor to quantise)");
    require_pointer(a.out, "out", "(the quantised output)");
    if (writes_scales(a.mode.quant)) require_pointer(a.scales, "scales", "(the group scales)");
  }
  a.mode.validate(a.hidden);
  if (a.tokens > 0) require_quant_scale(a);
  require_row_stride("input_stride", a.input_stride, a.hidden, element_bytes(a.dtype));
  require_row_stride("out_stride", a.out_stride, a.mode.out_row(a.hidden), 1);
}

void validate_args(const TokenQuantArgs& a) {
  detail::require_tokens(a.tokens);
  if (a.tokens > 0) {
    require_pointer(a.input, "input", "(the tensor to quantise)");
    require_pointer(a.out, "out", "(the fp8 output)");
    require_pointer(a.scales, "scales", "(the per-token scales)");
  }
  check_hidden(a.hidden);
  require_row_stride("input_stride", a.input_stride, a.hidden, element_bytes(a.dtype));
  require_row_stride("out_stride", a.out_stride, a.hidden, 1);
}

}  // namespace arfuse
