// torch.ops.arfuse.*: arfuse's calls as PyTorch operators registered in C++, so that an eager call
// runs no Python between the dispatcher and the kernel launch. arfuse.torch compiles this file
// against the torch it imports (arfuse/torch_ops/__init__.py) and hands it the call table of
// arfuse._arfuse (op_table.hpp), which owns the communicators; it links no arfuse library.
//
// Each op checks its tensors here (messages name the argument), validates the mode once through
// the table, allocates its outputs with torch's caching allocator on the current stream and
// calls the runtime, which makes the remaining checks. The Meta kernels share all of it but the
// call: torch.compile traces with them, symbolic token counts included.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <c10/core/DeviceGuard.h>
#include <c10/core/SymInt.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "op_table.hpp"

namespace {

using arfuse::DType;
using arfuse::Quant;
using arfuse::ScaleShape;
using arfuse::torch_ops::Failure;
using arfuse::torch_ops::Fp8Dtype;
using arfuse::torch_ops::ModeInfo;
using c10::SymInt;

const arfuse::torch_ops::OpTable* table = nullptr;

// A failure of the runtime: ValueError for a bad argument, RuntimeError for the rest (no device,
// a failed compile or launch), each with arfuse's message.
void raise_if(const Failure* failure) {
  if (failure == nullptr) return;
  TORCH_CHECK_VALUE(!failure->bad_argument, failure->message);
  TORCH_CHECK(false, failure->message);
}

const arfuse::torch_ops::OpTable& calls() {
  TORCH_CHECK(table != nullptr,
              "arfuse's torch ops were loaded without arfuse._arfuse's call table; import arfuse.torch");
  return *table;
}

template <typename... Parts>
[[noreturn]] void bad_argument(const Parts&... parts) {
  TORCH_CHECK_VALUE(false, parts...);
  std::abort();  // unreachable: the check above throws
}

std::string shape_text(c10::SymIntArrayRef values) {
  std::string text = "(";
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::ostringstream v;
    v << values[i];
    text += (i ? ", " : "") + v.str();
  }
  return text + (values.size() == 1 ? ",)" : ")");
}

// The dtype as Python spells it.
std::string dtype_text(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::BFloat16: return "torch.bfloat16";
    case c10::ScalarType::Half: return "torch.float16";
    case c10::ScalarType::Float: return "torch.float32";
    case c10::ScalarType::Double: return "torch.float64";
    case c10::ScalarType::Byte: return "torch.uint8";
    case c10::ScalarType::Int: return "torch.int32";
    case c10::ScalarType::Long: return "torch.int64";
    default: return std::string("torch.") + c10::toString(type);
  }
}

DType arfuse_dtype(const char* what, c10::ScalarType type) {
  if (type == c10::ScalarType::BFloat16) return DType::bf16;
  if (type == c10::ScalarType::Half) return DType::f16;
  bad_argument(what, " is ", dtype_text(type), "; arfuse takes torch.bfloat16 or torch.float16");
}

// A GPU tensor; with `like`, on its device and of its dtype.
void check_tensor(const char* name, const at::Tensor& t, const at::Tensor* like = nullptr) {
  if (!t.defined()) bad_argument(name, " is None; it must be a tensor");
  // A Meta kernel sees meta tensors (the fake tensors torch.compile traces with).
  if (!t.is_cuda() && !t.is_meta())
    bad_argument(name, " is on ", t.device(), "; it must be on a GPU (device type cuda)");
  if (like == nullptr) return;
  if (t.device() != like->device())
    bad_argument(name, " is on ", t.device(), ", the other tensors on ", like->device(), "; all must be on one GPU");
  if (t.scalar_type() != like->scalar_type())
    bad_argument(name, " is ", dtype_text(t.scalar_type()), "; it must be ", dtype_text(like->scalar_type()),
                 " like input");
}

// The elements between consecutive rows of `t` [..., hidden] seen as [rows, hidden] without a
// copy: its last dimension adjacent, its leading dimensions evenly spaced (a slice of a wider
// buffer, a [batch, seq, hidden] view). 0 where a single row makes it moot.
SymInt row_stride(const char* name, const at::Tensor& t) {
  const auto shape = t.sym_sizes();
  const auto strides = t.sym_strides();
  const SymInt& hidden = shape.back();
  if (hidden > 1 && strides.back() != 1)
    bad_argument(name, " has strides ", shape_text(strides),
                 ": its last dimension must be adjacent elements (stride 1); pass ", name, ".contiguous()");
  SymInt stride = 0;
  std::optional<SymInt> span;
  for (int64_t dim = int64_t(shape.size()) - 2; dim >= 0; --dim) {
    if (shape[dim] == 1) continue;
    if (!span) {
      stride = strides[dim];
    } else if (strides[dim] != *span) {
      bad_argument(name, " has shape ", shape_text(shape), " and strides ", shape_text(strides), ": dimension ", dim,
                   " cannot merge with the dimensions after it into one row index (its stride would be ", *span,
                   "); pass ", name, ".contiguous()");
    }
    span = strides[dim] * shape[dim];
  }
  if (span && stride < hidden)
    bad_argument(name, "'s rows are ", stride, " elements apart, fewer than its ", hidden,
                 " columns: rows overlap; pass ", name, ".contiguous()");
  return stride;
}

SymInt rows_of(const at::Tensor& t) {
  SymInt rows = 1;
  const auto shape = t.sym_sizes();
  for (std::size_t i = 0; i + 1 < shape.size(); ++i) rows = rows * shape[i];
  return rows;
}

// The row stride of input, a [..., hidden] tensor of T on a GPU.
SymInt check_input(const at::Tensor& input) {
  check_tensor("input", input);
  arfuse_dtype("input's dtype", input.scalar_type());
  if (input.dim() < 2)
    bad_argument("input has shape ", shape_text(input.sym_sizes()),
                 "; it must have 2 dimensions or more, [..., hidden]");
  return row_stride("input", input);
}

ModeInfo decode_mode(int64_t code, int hidden) {
  ModeInfo info;
  raise_if(calls().describe_mode(code, hidden, &info));
  return info;
}

// Hidden as the runtime counts it (int), checked before it is narrowed: 2^32 + 4096 must not read
// as 4096.
int concrete_hidden(const at::Tensor& input) {
  const int64_t hidden = input.sym_size(-1).guard_int(__FILE__, __LINE__);
  if (hidden < 1 || hidden > INT32_MAX)
    bad_argument("input's hidden size (its last dimension) is ", hidden, "; arfuse takes 1 to ", INT32_MAX,
                 " (and the mode's own limits)");
  return int(hidden);
}

// The columns of out: hidden, or hidden rounded up to a multiple of pad_to_multiple.
int64_t out_width(int64_t hidden, const ModeInfo& mode, int64_t pad_to_multiple) {
  if (pad_to_multiple < 0 || pad_to_multiple >= (int64_t(1) << 31))
    bad_argument("pad_to_multiple is ", pad_to_multiple, "; it must be an int >= 0 (0: no padding)");
  if (pad_to_multiple <= 1) return hidden;
  const int64_t width = (hidden + pad_to_multiple - 1) / pad_to_multiple * pad_to_multiple;
  if (width != hidden && !mode.pads_out)
    bad_argument("pad_to_multiple=", pad_to_multiple, " pads out, which quant ", mode.name, " does not take: only ",
                 mode.padded_modes, " write padded rows (the block-scaled modes' scales cover hidden only)");
  if (width % 8 != 0)
    bad_argument("pad_to_multiple=", pad_to_multiple, " makes rows of ", width,
                 " elements; a padded row must be a multiple of 8 elements");
  return width;
}

// A float as Python's repr writes it (-1.0, 1e-06, inf).
std::string float_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {  // the shortest text that reads back the same value
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  std::string out = text;
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

void check_eps(double eps) {
  if (!(eps >= 0.0) || std::isinf(eps)) bad_argument("eps is ", float_text(eps), "; it must be a finite float >= 0");
}

// The scale of a mode that reads one (ModeInfo::scale_name): a one-element float32 tensor on input's device,
// read when the kernel runs.
const float* check_scale(const std::optional<at::Tensor>& scale, const ModeInfo& mode, const at::Tensor& input) {
  if (!scale || !scale->defined()) {
    if (mode.scale_name != nullptr)
      bad_argument("scale is None; quant ", mode.name, " reads its ", mode.scale_name,
                   " from a one-element float32 tensor on the input's device");
    return nullptr;
  }
  if (mode.scale_name == nullptr)
    bad_argument("scale is given, but quant ", mode.name, " reads none: it is for ", mode.scale_modes);
  if (scale->scalar_type() != c10::ScalarType::Float || scale->sym_numel() != 1)
    bad_argument("scale is ", dtype_text(scale->scalar_type()), " with ", scale->sym_numel(),
                 " elements; it must be one float32 element");
  if (scale->device() != input.device())
    bad_argument("scale is on ", scale->device(), ", input on ", input.device(), "; they must be on the same device");
  return scale->is_meta() ? nullptr : static_cast<const float*>(scale->data_ptr());
}

struct Epilogue {
  SymInt input_stride, residual_stride;
  ModeInfo mode;
  int64_t width;
  const float* scale;
};

Epilogue check_epilogue(const at::Tensor& input, const at::Tensor& residual, const at::Tensor& weight, double eps,
                        int64_t mode_code, int64_t pad_to_multiple, const std::optional<at::Tensor>& scale) {
  Epilogue e;
  e.input_stride = check_input(input);
  check_tensor("residual", residual, &input);
  if (residual.sym_sizes() != input.sym_sizes())
    bad_argument("residual has shape ", shape_text(residual.sym_sizes()), "; it must be ",
                 shape_text(input.sym_sizes()));
  e.residual_stride = row_stride("residual", residual);
  check_tensor("weight", weight, &input);
  if (weight.dim() != 1 || weight.sym_size(0) != input.sym_size(-1))
    bad_argument("weight has shape ", shape_text(weight.sym_sizes()), "; it must be (", input.sym_size(-1), ",)");
  if (!weight.is_contiguous()) bad_argument("weight is not contiguous; pass weight.contiguous()");
  const int hidden = concrete_hidden(input);
  e.mode = decode_mode(mode_code, hidden);
  check_eps(eps);
  e.scale = check_scale(scale, e.mode, input);
  e.width = out_width(hidden, e.mode, pad_to_multiple);
  return e;
}

c10::ScalarType fp8_scalar_type(Fp8Dtype dtype) {
  return dtype == Fp8Dtype::e4m3fnuz ? c10::ScalarType::Float8_e4m3fnuz : c10::ScalarType::Float8_e4m3fn;
}

struct Outputs {
  at::Tensor out, scales, mirror;
};

at::Tensor empty(std::vector<SymInt> shape, const at::Tensor& like, c10::ScalarType type) {
  return at::empty_symint(shape, like.options().dtype(type));
}

std::vector<SymInt> with_last(const at::Tensor& input, SymInt last) {
  const auto shape = input.sym_sizes();
  std::vector<SymInt> lead(shape.begin(), shape.end() - 1);
  lead.push_back(std::move(last));
  return lead;
}

// out, scales, mirror for `mode` (outputs a mode does not write are empty, shape [0]), each with
// input's leading dimensions; out `width` columns.
Outputs epilogue_outputs(const at::Tensor& input, const ModeInfo& mode, c10::ScalarType fp8, int64_t width) {
  const int64_t hidden = concrete_hidden(input);
  const auto u8 = c10::ScalarType::Byte, f32 = c10::ScalarType::Float, t = input.scalar_type();
  const ScaleShape& s = mode.scales;
  Outputs o;
  if (mode.mode.quant == Quant::none) {
    o.out = empty(with_last(input, width), input, t);
  } else {
    o.out = empty(with_last(input, mode.packs_fp4  ? int64_t(mode.out_row)
                                   : mode.pads_out ? width
                                                   : hidden),
                  input, mode.packs_fp4 ? u8 : fp8);
  }
  const auto scale_type = s.element_bytes == 1 ? u8 : f32;
  if (s.columns == 0) {
    o.scales = empty({0}, input, f32);
  } else if (s.per_row) {  // [...]: one per row, input's leading dimensions
    const auto shape = input.sym_sizes();
    o.scales = empty(std::vector<SymInt>(shape.begin(), shape.end() - 1), input, scale_type);
  } else if (s.transposed) {
    o.scales = empty({int64_t(s.columns), rows_of(input)}, input, scale_type);
  } else if (s.row_multiple > 1 || s.column_multiple > 1) {  // tiles: rows and columns padded (zeros)
    o.scales = empty({(rows_of(input) + s.row_multiple - 1) / s.row_multiple * s.row_multiple,
                      int64_t((s.columns + s.column_multiple - 1) / s.column_multiple * s.column_multiple)},
                     input, scale_type);
  } else {
    o.scales = empty(with_last(input, int64_t(s.columns)), input, scale_type);
  }
  o.mirror = mode.mode.mirror ? empty(with_last(input, hidden), input, t) : empty({0}, input, t);
  return o;
}

void* address(const at::Tensor& t) { return t.numel() ? t.data_ptr() : nullptr; }

// The runtime counts rows and row strides in int.
int int_count(const char* what, const SymInt& value) {
  const int64_t v = value.expect_int();
  if (v > INT32_MAX) bad_argument(what, " is ", v, "; arfuse takes at most ", INT32_MAX);
  return int(v);
}

void* current_stream(const c10::Device& device) {
  return c10::impl::VirtualGuardImpl(device.type()).getStream(device).native_handle();
}

arfuse::torch_ops::CommunicatorInfo communicator(int64_t comm) {
  arfuse::torch_ops::CommunicatorInfo info;
  raise_if(calls().communicator(comm, &info));
  return info;
}

arfuse::AllreduceRmsnormArgs epilogue_args(const at::Tensor& input, const at::Tensor& residual,
                                           const at::Tensor& residual_out, const at::Tensor& weight, double eps,
                                           const Epilogue& e, const Outputs& o, int64_t residual_out_stride, bool pdl) {
  arfuse::AllreduceRmsnormArgs a;
  a.input = input.data_ptr();
  a.residual_in = residual.data_ptr();
  a.residual_out = residual_out.data_ptr();
  a.weight = weight.data_ptr();
  a.eps = float(eps);
  a.out = address(o.out);
  a.scales = static_cast<float*>(address(o.scales));
  a.mirror = address(o.mirror);
  a.tokens = int_count("input's row count", rows_of(input));
  a.hidden = concrete_hidden(input);
  a.dtype = arfuse_dtype("input's dtype", input.scalar_type());
  a.mode = e.mode.mode;
  (e.mode.global_scale ? a.global_scale : a.static_scale) = e.scale;
  a.pdl = pdl;
  a.input_stride = int_count("input's row stride", e.input_stride);
  a.residual_in_stride = int_count("residual's row stride", e.residual_stride);
  a.residual_out_stride = int_count("residual_out's row stride", residual_out_stride);
  a.out_width = int_count("out's row width", e.width);
  return a;
}

using Outputs4 = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
using Outputs3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

template <bool kRun>
Outputs4 allreduce_rmsnorm(int64_t comm, const at::Tensor& input, const at::Tensor& residual, const at::Tensor& weight,
                           double eps, int64_t mode, bool pdl, int64_t pad_to_multiple,
                           const std::optional<at::Tensor>& scale) {
  const Epilogue e = check_epilogue(input, residual, weight, eps, mode, pad_to_multiple, scale);
  const auto info = communicator(comm);
  c10::OptionalDeviceGuard guard;
  if constexpr (kRun) guard.reset_device(input.device());
  Outputs o = epilogue_outputs(input, e.mode, fp8_scalar_type(info.fp8), e.width);
  at::Tensor residual_out = at::empty_symint(residual.sym_sizes(), residual.options());
  if constexpr (kRun) {
    const auto args = epilogue_args(input, residual, residual_out, weight, eps, e, o, 0, pdl);
    raise_if(calls().allreduce_rmsnorm(&info, &args, current_stream(input.device())));
  }
  return {o.out, residual_out, o.scales, o.mirror};
}

template <bool kRun>
Outputs3 allreduce_rmsnorm_inplace(int64_t comm, const at::Tensor& input, at::Tensor& residual,
                                   const at::Tensor& weight, double eps, int64_t mode, bool pdl,
                                   int64_t pad_to_multiple, const std::optional<at::Tensor>& scale) {
  const Epilogue e = check_epilogue(input, residual, weight, eps, mode, pad_to_multiple, scale);
  const auto info = communicator(comm);
  c10::OptionalDeviceGuard guard;
  if constexpr (kRun) guard.reset_device(input.device());
  Outputs o = epilogue_outputs(input, e.mode, fp8_scalar_type(info.fp8), e.width);
  if constexpr (kRun) {
    const auto args = epilogue_args(input, residual, residual, weight, eps, e, o, e.residual_stride.expect_int(), pdl);
    raise_if(calls().allreduce_rmsnorm(&info, &args, current_stream(input.device())));
  }
  return {o.out, o.scales, o.mirror};
}

template <bool kRun>
at::Tensor allreduce(int64_t comm, const at::Tensor& input, bool pdl) {
  const SymInt stride = check_input(input);
  const auto info = communicator(comm);
  c10::OptionalDeviceGuard guard;
  if constexpr (kRun) guard.reset_device(input.device());
  at::Tensor out = at::empty_symint(input.sym_sizes(), input.options());
  if constexpr (kRun) {
    arfuse::AllreduceArgs a;
    a.input = input.data_ptr();
    a.input_stride = int_count("input's row stride", stride);
    a.out = out.data_ptr();
    a.tokens = int_count("input's row count", rows_of(input));
    a.hidden = concrete_hidden(input);
    a.dtype = arfuse_dtype("input's dtype", input.scalar_type());
    a.pdl = pdl;
    raise_if(calls().allreduce(&info, &a, current_stream(input.device())));
  }
  return out;
}

// The FP8 format of input's device (tracing: device 0's, or e4m3fn without a driver). A device's
// format never changes, so each is asked of the table once: the standalone ops then look up the
// device's Context once a call (in the call), not twice.
c10::ScalarType device_fp8(const at::Tensor& input) {
  const int device = input.is_meta() ? -1 : input.device().index();
  static std::array<std::atomic<int>, 65> known{};  // [device + 1]: 0 not yet asked, else 1 + Fp8Dtype
  std::atomic<int>* slot = device + 1 < int(known.size()) ? &known[std::size_t(device + 1)] : nullptr;
  if (slot != nullptr) {
    if (const int seen = slot->load(std::memory_order_relaxed); seen != 0) return fp8_scalar_type(Fp8Dtype(seen - 1));
  }
  Fp8Dtype dtype = Fp8Dtype::e4m3fn;
  raise_if(calls().fp8_dtype(device, &dtype));
  if (slot != nullptr) slot->store(1 + int(dtype), std::memory_order_relaxed);
  return fp8_scalar_type(dtype);
}

template <bool kRun>
Outputs4 rmsnorm_quant(const at::Tensor& input, const at::Tensor& residual, const at::Tensor& weight, double eps,
                       int64_t mode, bool pdl, int64_t pad_to_multiple, const std::optional<at::Tensor>& scale) {
  const Epilogue e = check_epilogue(input, residual, weight, eps, mode, pad_to_multiple, scale);
  c10::OptionalDeviceGuard guard;
  if constexpr (kRun) guard.reset_device(input.device());
  Outputs o = epilogue_outputs(input, e.mode, device_fp8(input), e.width);
  at::Tensor residual_out = at::empty_symint(residual.sym_sizes(), residual.options());
  if constexpr (kRun) {
    const arfuse::RmsnormQuantArgs args = epilogue_args(input, residual, residual_out, weight, eps, e, o, 0, pdl);
    raise_if(calls().rmsnorm_quant(input.device().index(), &args, current_stream(input.device())));
  }
  return {o.out, residual_out, o.scales, o.mirror};
}

template <bool kRun>
std::tuple<at::Tensor, at::Tensor> group_quant(const at::Tensor& input, int64_t mode_code, bool pdl,
                                               const std::optional<at::Tensor>& scale) {
  const SymInt stride = check_input(input);
  const ModeInfo mode = decode_mode(mode_code, concrete_hidden(input));
  if (!mode.group_quant || mode.mode.mirror)
    bad_argument("quant is ", mode.name, mode.mode.mirror ? " with the mirror" : "", "; group_quant takes ",
                 mode.group_quant_modes, " without the mirror");
  const float* scale_address = check_scale(scale, mode, input);
  c10::OptionalDeviceGuard guard;
  if constexpr (kRun) guard.reset_device(input.device());
  Outputs o = epilogue_outputs(input, mode, device_fp8(input), concrete_hidden(input));
  if constexpr (kRun) {
    arfuse::GroupQuantArgs a;
    a.input = input.data_ptr();
    a.input_stride = int_count("input's row stride", stride);
    a.out = address(o.out);
    a.scales = address(o.scales);
    a.tokens = int_count("input's row count", rows_of(input));
    a.hidden = concrete_hidden(input);
    a.dtype = arfuse_dtype("input's dtype", input.scalar_type());
    a.mode = mode.mode;
    (mode.global_scale ? a.global_scale : a.static_scale) = scale_address;
    a.pdl = pdl;
    raise_if(calls().group_quant(input.device().index(), &a, current_stream(input.device())));
  }
  return {o.out, o.scales};
}

// allreduce_rmsnorm_inplace's arguments, and nothing done with them: what the dispatcher itself
// costs a call (python -m arfuse.bench reports it beside the ops).
void dispatch_only(int64_t, const at::Tensor&, at::Tensor&, const at::Tensor&, double, int64_t, bool, int64_t,
                   const std::optional<at::Tensor>&) {}

}  // namespace

// Called once by arfuse.torch with arfuse._arfuse's table; false for a table of another build.
extern "C" __attribute__((visibility("default"))) bool arfuse_torch_ops_bind(const void* address) {
  const auto* candidate = static_cast<const arfuse::torch_ops::OpTable*>(address);
  if (candidate == nullptr || candidate->version != arfuse::torch_ops::kOpTableVersion ||
      candidate->size != sizeof(arfuse::torch_ops::OpTable))
    return false;
  table = candidate;
  return true;
}

TORCH_LIBRARY(arfuse, m) {
  m.def(
      "allreduce_rmsnorm(int comm, Tensor input, Tensor residual, Tensor weight, float eps, int epilogue_mode, "
      "bool pdl=False, int pad_to_multiple=0, Tensor? scale=None) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "allreduce_rmsnorm_inplace(int comm, Tensor input, Tensor(a!) residual, Tensor weight, float eps, int "
      "epilogue_mode, "
      "bool pdl=False, int pad_to_multiple=0, Tensor? scale=None) -> (Tensor, Tensor, Tensor)");
  m.def("allreduce(int comm, Tensor input, bool pdl=False) -> Tensor");
  m.def(
      "rmsnorm_quant(Tensor input, Tensor residual, Tensor weight, float eps, int epilogue_mode, bool pdl=False, "
      "int pad_to_multiple=0, Tensor? scale=None) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("group_quant(Tensor input, int epilogue_mode, bool pdl=False, Tensor? scale=None) -> (Tensor, Tensor)");
  m.def(
      "dispatch_only(int comm, Tensor input, Tensor(a!) residual, Tensor weight, float eps, int epilogue_mode, "
      "bool pdl=False, int pad_to_multiple=0, Tensor? scale=None) -> ()");
}

namespace {

// kRun: the kernels that launch (CUDA; on CPU they refuse the tensors with a message naming the
// argument); otherwise the Meta kernels, which only check and shape.
template <bool kRun>
void register_kernels(torch::Library& m) {
  m.impl("allreduce_rmsnorm", &allreduce_rmsnorm<kRun>);
  m.impl("allreduce_rmsnorm_inplace", &allreduce_rmsnorm_inplace<kRun>);
  m.impl("allreduce", &allreduce<kRun>);
  m.impl("rmsnorm_quant", &rmsnorm_quant<kRun>);
  m.impl("group_quant", &group_quant<kRun>);
  m.impl("dispatch_only", &dispatch_only);
}

}  // namespace

TORCH_LIBRARY_IMPL(arfuse, CUDA, m) { register_kernels<true>(m); }
TORCH_LIBRARY_IMPL(arfuse, CPU, m) { register_kernels<true>(m); }
TORCH_LIBRARY_IMPL(arfuse, Meta, m) { register_kernels<false>(m); }
