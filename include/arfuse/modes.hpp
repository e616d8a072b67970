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
#include "arfuse/quant_modes.hpp"

namespace arfuse {

enum class DType { f16, bf16 };

// Quant, the quant modes, and their table are arfuse/quant_modes.hpp's: the functions below and
// EpilogueMode's read it.
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

// Where a mode's scales go for rows of `hidden` (EpilogueMode::scale_shape): `columns` scales a
// row of `element_bytes` each, rows padded to a multiple of `row_multiple` and columns to one of
// `column_multiple` (zeros), stored [rows, columns] or, `transposed`, [columns, rows]. One scale
// per row has columns 1 and `per_row` set (a [tokens] vector); a mode without scales has
// columns 0.
struct ScaleShape {
  int columns = 0;
  int element_bytes = 0;
  bool per_row = false;
  bool transposed = false;
  int row_multiple = 1;
  int column_multiple = 1;
  // Scales for `rows` rows, padding included.
  long long count(long long rows) const {
    const long long r = (rows + row_multiple - 1) / row_multiple * row_multiple;
    return r * ((columns + column_multiple - 1) / column_multiple * column_multiple);
  }
  long long bytes(long long rows) const { return count(rows) * element_bytes; }
};

struct ARFUSE_API EpilogueMode {
  Quant quant = Quant::none;
  Norm norm = Norm::rms;
  int group_size = 128;                         // fp8_group: elements per scale, 32, 64 or 128, dividing hidden
  ScaleFormat scale_format = ScaleFormat::f32;  // fp8_group
  // fp8_group: row- or column-major; nvfp4: row-major (linear) or swizzled_128x4; MXFP4's scales
  // are row-major.
  ScaleLayout scale_layout = ScaleLayout::row_major;
  bool mirror = false;  // also write y in T (any quant but none)

  // Throws arfuse::Error naming the value and what is allowed: the hidden size (check_hidden),
  // the group size and its divisibility, the mode's block size, the scale layouts it takes, a
  // mirror without a quant mode.
  void validate(int hidden) const;

  // "fp8_group g128 ue8m0_f32 column_major mirror gemma": the fields that matter for the mode.
  std::string text() const;
  // The columns of one row of out in its own units (T, fp8 bytes, or bytes of two E2M1 each).
  int out_row(int hidden) const;
  // The scales of a mode that validate(hidden) accepts.
  ScaleShape scale_shape(int hidden) const;
  bool operator==(const EpilogueMode& o) const {
    return quant == o.quant && norm == o.norm && group_size == o.group_size && scale_format == o.scale_format &&
           scale_layout == o.scale_layout && mirror == o.mirror;
  }
  bool operator!=(const EpilogueMode& o) const { return !(*this == o); }
};

// From the mode table: two E2M1 elements per output byte (out is [tokens, hidden / 2] bytes); the
// mode writes scales;
// a scale read per call through a device pointer (fp8_static's scale, NVFP4's global scale) and
// that argument's name; out may be wider than hidden (the modes without groups or blocks); the
// standalone group_quant takes the mode; the mode reads group_size and scale_format (fp8_group).
ARFUSE_API bool packs_fp4(Quant quant);
ARFUSE_API bool writes_scales(Quant quant);
ARFUSE_API bool reads_quant_scale(Quant quant);
ARFUSE_API const char* quant_scale_name(Quant quant);
// "static_scale" or "global_scale": the argument that passes the mode's scale; null for none.
ARFUSE_API const char* quant_scale_argument(Quant quant);
ARFUSE_API bool pads_out(Quant quant);
ARFUSE_API bool group_quant_takes(Quant quant);
ARFUSE_API bool takes_group_size(Quant quant);

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
