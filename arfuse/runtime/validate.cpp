#include "arfuse/runtime/validate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string_view>

#include "arfuse/base/names.hpp"
#include "arfuse/error.hpp"
#include "arfuse/jit/kernel_spec.hpp"
#include "arfuse/runtime/group_state.hpp"

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
  if (a.mode.quant != Quant::none && !is_static_fp8(a.mode.quant) && a.scales == nullptr) {
    throw Error(fmt::format("scales is null; it is required with quant {}", a.mode.quant));
  }
  if (writes_mirror(a.mode.quant) && a.mirror == nullptr) {
    throw Error(fmt::format("mirror is null; it is required with quant {}", a.mode.quant));
  }
}

// The call's scale pointer: static_scale for fp8_static, global_scale for nvfp4 (4-byte aligned
// fp32 device pointers); the other modes take neither.
template <typename Args>
void require_quant_scale(const Args& a) {
  const auto require = [&](const float* p, const char* name, bool needed) {
    if (needed && p == nullptr) {
      throw Error(fmt::format("{} is null; quant {} reads its fp32 {} from it", name, a.mode.quant,
                              is_nvfp4(a.mode.quant) ? "global scale" : "scale"));
    }
    if (!needed && p != nullptr) {
      throw Error(fmt::format(
          "{} is set, but quant {} reads no {}: it is for {}", name, a.mode.quant, name,
          std::string_view(name) == "global_scale" ? "nvfp4 and nvfp4_mirror" : "fp8_static and fp8_static_mirror"));
    }
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % alignof(float) != 0) {
      throw Error(fmt::format("{} ({}) is not 4-byte aligned", name, static_cast<const void*>(p)));
    }
  };
  require(a.static_scale, "static_scale", is_static_fp8(a.mode.quant));
  require(a.global_scale, "global_scale", is_nvfp4(a.mode.quant));
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
    if (a.mode.quant != Quant::none && !is_token_fp8(a.mode.quant) && !is_static_fp8(a.mode.quant)) {
      throw Error(
          fmt::format("out_width is {} with quant {}: only quant none, fp8, fp8_static and their mirrors write "
                      "padded rows (the block-scaled modes' scales cover the hidden columns only)",
                      a.out_width, a.mode.quant));
    }
  }
  const int t_bytes = element_bytes(a.dtype);
  require_row_stride("input_stride", a.input_stride, a.hidden, t_bytes);
  require_row_stride("residual_in_stride", a.residual_in_stride, a.hidden, t_bytes);
  require_row_stride("residual_out_stride", a.residual_out_stride, a.hidden, t_bytes);
  require_row_stride("mirror_stride", a.mirror_stride, a.hidden, t_bytes);
  if (packs_fp4(a.mode.quant)) {
    require_row_stride("out_stride", a.out_stride, a.hidden / 2, 1);
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
  if (!jit::takes_quant(jit::Module::group_quant, a.mode.quant)) {
    throw Error(
        fmt::format("group_quant takes quant fp8_group, mxfp4, fp8_static or nvfp4, not {} (the mirror modes "
                    "belong to the epilogue kernels)",
                    a.mode.quant));
  }
  detail::require_tokens(a.tokens);
  if (a.tokens > 0) {
    require_pointer(a.input, "input", "(the tensor to quantise)");
    require_pointer(a.out, "out", "(the quantised output)");
    if (!is_static_fp8(a.mode.quant)) require_pointer(a.scales, "scales", "(the group scales)");
  }
  a.mode.validate(a.hidden);
  if (a.tokens > 0) require_quant_scale(a);
  require_row_stride("input_stride", a.input_stride, a.hidden, element_bytes(a.dtype));
  require_row_stride("out_stride", a.out_stride, packs_fp4(a.mode.quant) ? a.hidden / 2 : a.hidden, 1);
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

namespace {

void require_open(const Group& group) {
  if (GroupAccess::closed(group)) throw Error("the group is closed");
}

void require_group_dtype(const Group& group, DType dtype) {
  const std::optional<DType>& own = GroupAccess::options(group).dtype;
  if (own && dtype != *own) throw Error(fmt::format("dtype {} was passed to a group created for {}", dtype, *own));
}

}  // namespace

void check_group_open(const Group& group, DType dtype) {
  require_open(group);
  require_group_dtype(group, dtype);
}

namespace {

bool strided(int stride, int width) { return stride != 0 && stride != width; }

// A call with one input and one output (its rows out_row units wide).
bool input_output_view(int input_stride, int out_stride, int hidden, int out_row) {
  return strided(input_stride, hidden) || strided(out_stride, out_row);
}

}  // namespace

bool is_view(const RmsnormQuantArgs& a) {
  const int out_row = packs_fp4(a.mode.quant) ? a.hidden / 2 : a.hidden;
  return strided(a.input_stride, a.hidden) || strided(a.residual_in_stride, a.hidden) ||
         strided(a.residual_out_stride, a.hidden) || strided(a.mirror_stride, a.hidden) ||
         strided(a.out_stride, out_row) || strided(a.out_width, a.hidden);
}

bool is_view(const AllreduceArgs& a) { return input_output_view(a.input_stride, a.out_stride, a.hidden, a.hidden); }

bool is_view(const TokenQuantArgs& a) { return input_output_view(a.input_stride, a.out_stride, a.hidden, a.hidden); }

bool is_view(const GroupQuantArgs& a) {
  return input_output_view(a.input_stride, a.out_stride, a.hidden, packs_fp4(a.mode.quant) ? a.hidden / 2 : a.hidden);
}

namespace {

// The dtype's check comes last: it names the dtype.
template <typename Args>
CallShape checked_shape(const Rank& rank, const Args& a, bool epilogue, const EpilogueMode& mode) {
  const Group& group = RankAccess::group(rank);
  require_open(group);
  const Topology& t = topology_of(group);
  validate_args(a, t.call_max_tokens(), t.call_max_hidden());
  const bool views = is_view(a);
  require_group_dtype(group, a.dtype);
  return CallShape{epilogue, a.tokens, a.hidden, a.dtype, mode, views};
}

}  // namespace

CallShape validate_call(const Rank& rank, const AllreduceRmsnormArgs& a) {
  return checked_shape(rank, a, true, a.mode);
}

CallShape validate_call(const Rank& rank, const AllreduceArgs& a) { return checked_shape(rank, a, false, {}); }

}  // namespace arfuse
