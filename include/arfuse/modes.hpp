// What a call computes after the sum, as one value: the element type, and the epilogue mode
// (quantisation, norm, and the block-scaled modes' group size and scale storage). Every entry
// point (the Group's calls, the standalone calls, the kernel specs, the Python ops, the bench)
// holds an EpilogueMode and checks it with one validate(hidden), so every shape rule is written
// once and every caller sees the same message.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "arfuse/error.hpp"

namespace arfuse {

enum class DType { f16, bf16 };

// Per-token FP8, per-token-group FP8, MXFP4, static per-tensor FP8 (a calibrated scale passed
// per call) and NVFP4, each with an optional mirror output (y in T). In this order: a mode
// reaches a kernel as int(mode), the device code's code for it (pinned by static_asserts where
// the library is built).
enum class Quant {
  none,
  fp8,
  fp8_mirror,
  fp8_group,
  fp8_group_mirror,
  mxfp4,
  mxfp4_mirror,
  fp8_static,
  fp8_static_mirror,
  nvfp4,
  nvfp4_mirror
};

enum class Norm { rms, gemma };  // RMSNorm: y * w; Gemma's: y * (w + 1)

// How a per-token-group FP8 scale is stored (contract step 7b).
enum class ScaleFormat {
  f32,        // amax / FP8_MAX (1 when amax is 0), as fp32
  ue8m0_f32,  // that scale rounded up to a power of two, as fp32
  e8m0,       // the same power of two as its E8M0 byte
};

enum class ScaleLayout {
  row_major,       // [tokens, groups]
  column_major,    // [groups, tokens]: for GEMMs that read the scales transposed (fp8_group)
  swizzled_128x4,  // NVFP4: tiles of 128 rows x 4 scale columns, rows padded to 128 and columns
                   // to 4 with zeros (the layout cuBLASLt and CUTLASS block-scaled GEMMs read)
};

struct ARFUSE_API EpilogueMode {
  Quant quant = Quant::none;
  Norm norm = Norm::rms;
  int group_size = 128;                         // fp8_group modes: elements per scale, 32, 64 or 128, dividing hidden
  ScaleFormat scale_format = ScaleFormat::f32;  // fp8_group modes
  // fp8_group modes: row- or column-major; nvfp4 modes: row-major (linear) or swizzled_128x4;
  // MXFP4's scales are row-major.
  ScaleLayout scale_layout = ScaleLayout::row_major;

  // Throws arfuse::Error naming the value and what is allowed: the hidden size (check_hidden),
  // the group size and its divisibility, MXFP4's blocks of 32 and NVFP4's of 16, the scale layout
  // the mode has.
  void validate(int hidden) const;

  // "fp8_group g128 ue8m0_f32 column_major gemma": the fields that matter for the quant mode.
  std::string text() const;
  bool operator==(const EpilogueMode& o) const {
    return quant == o.quant && norm == o.norm && group_size == o.group_size && scale_format == o.scale_format &&
           scale_layout == o.scale_layout;
  }
  bool operator!=(const EpilogueMode& o) const { return !(*this == o); }
};

// Per-token-group FP8 (a group size and a scale format), MXFP4 (OCP MX v1.0: blocks of 32
// elements share one E8M0 scale), and the modes that also write y in T (the mirror).
inline bool is_group_fp8(Quant q) { return q == Quant::fp8_group || q == Quant::fp8_group_mirror; }
inline bool is_mxfp4(Quant q) { return q == Quant::mxfp4 || q == Quant::mxfp4_mirror; }
// Static per-tensor FP8: q = fp8(y * (1 / scale)) with the scale read from a device pointer.
inline bool is_static_fp8(Quant q) { return q == Quant::fp8_static || q == Quant::fp8_static_mirror; }
// NVFP4: blocks of 16 E2M1 elements, an E4M3 scale each, and an fp32 global scale.
inline bool is_nvfp4(Quant q) { return q == Quant::nvfp4 || q == Quant::nvfp4_mirror; }
// Two E2M1 elements per output byte: out is [tokens, hidden / 2] bytes.
inline bool packs_fp4(Quant q) { return is_mxfp4(q) || is_nvfp4(q); }
// The modes that write one scale per token (fp8), and those that read one scale per call.
inline bool is_token_fp8(Quant q) { return q == Quant::fp8 || q == Quant::fp8_mirror; }
inline bool reads_quant_scale(Quant q) { return is_static_fp8(q) || is_nvfp4(q); }
inline bool writes_mirror(Quant q) {
  return q == Quant::fp8_mirror || q == Quant::fp8_group_mirror || q == Quant::mxfp4_mirror ||
         q == Quant::fp8_static_mirror || q == Quant::nvfp4_mirror;
}

// Throws arfuse::Error unless hidden is a positive multiple of 8 and at most 32768 (the hidden
// sizes every kernel takes).
ARFUSE_API void check_hidden(int hidden);
ARFUSE_API bool valid_group_size(int group_size);
ARFUSE_API int element_bytes(DType dtype);

ARFUSE_API const char* to_string(DType value);
ARFUSE_API const char* to_string(Quant value);
ARFUSE_API const char* to_string(Norm value);
ARFUSE_API const char* to_string(ScaleFormat value);
ARFUSE_API const char* to_string(ScaleLayout value);
// Each throws arfuse::Error naming the text and the accepted names.
ARFUSE_API DType parse_dtype(std::string_view text);
ARFUSE_API Quant parse_quant(std::string_view text);
ARFUSE_API Norm parse_norm(std::string_view text);
ARFUSE_API ScaleFormat parse_scale_format(std::string_view text);
ARFUSE_API ScaleLayout parse_scale_layout(std::string_view text);
ARFUSE_API const std::vector<DType>& all_dtypes();
ARFUSE_API const std::vector<Quant>& all_quants();
ARFUSE_API const std::vector<Norm>& all_norms();
ARFUSE_API const std::vector<ScaleFormat>& all_scale_formats();
ARFUSE_API const std::vector<ScaleLayout>& all_scale_layouts();

}  // namespace arfuse
