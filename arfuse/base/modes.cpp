#include "arfuse/modes.hpp"

#include <fmt/format.h>

#include "arfuse/error.hpp"

#include "base/names.hpp"
#include "templates/limits.cuh"
#include "templates/quant_table.cuh"

namespace arfuse {
namespace {

static_assert(int(Norm::rms) == kNormRms && int(Norm::gemma) == kNormGemma, "Norm codes");
static_assert(int(ScaleFormat::f32) == kScaleF32 && int(ScaleFormat::ue8m0_f32) == kScaleUe8m0F32 &&
                  int(ScaleFormat::e8m0) == kScaleE8m0,
              "ScaleFormat codes");
static_assert(kLayoutRowMajor == 1 << int(ScaleLayout::row_major) &&
                  kLayoutColumnMajor == 1 << int(ScaleLayout::column_major) &&
                  kLayoutSwizzled == 1 << int(ScaleLayout::swizzled_128x4),
              "ScaleLayout bits");

const QuantRow& row_of(Quant quant) { return kQuantRows[int(quant)]; }

Names<Quant> quant_names() {
  Names<Quant> names;
  for (const QuantRow& row : kQuantRows) names.emplace_back(row.quant, row.name);
  return names;
}

// Every enum's names, in the order all_*() lists them.
const Names<DType> kDTypes{{DType::f16, "f16"}, {DType::bf16, "bf16"}};
const Names<Quant> kQuants = quant_names();
const Names<Norm> kNorms{{Norm::rms, "rms"}, {Norm::gemma, "gemma"}};
const Names<ScaleFormat> kScaleFormats{
    {ScaleFormat::f32, "f32"}, {ScaleFormat::ue8m0_f32, "ue8m0_f32"}, {ScaleFormat::e8m0, "e8m0"}};
const Names<ScaleLayout> kScaleLayouts{{ScaleLayout::row_major, "row_major"},
                                       {ScaleLayout::column_major, "column_major"},
                                       {ScaleLayout::swizzled_128x4, "swizzled_128x4"}};

}  // namespace

void check_hidden(int hidden) {
  if (hidden <= 0 || hidden % 8 != 0 || hidden > kMaxHidden) {
    throw Error(fmt::format("hidden size {} is not supported: it must be a positive multiple of 8 and at most {}",
                            hidden, kMaxHidden));
  }
}

bool valid_group_size(int g) { return g == 32 || g == 64 || g == 128; }

int element_bytes(DType) { return 2; }

namespace {

// "row_major or column_major": the layouts in a row's mask.
std::string layouts_text(unsigned layouts) {
  std::string text;
  for (ScaleLayout l : all_scale_layouts()) {
    if ((layouts & (1u << int(l))) == 0) continue;
    text += fmt::format("{}{}", text.empty() ? "" : " or ", to_string(l));
  }
  return text;
}

}  // namespace

void EpilogueMode::validate(int hidden) const {
  check_hidden(hidden);
  const QuantRow& row = row_of(quant);
  if (row.scales == kScalesPerGroup) {
    if (!valid_group_size(group_size)) {
      throw Error(fmt::format("group size {} is not supported by {}: allowed are 32, 64 and 128", group_size,
                              to_string(quant)));
    }
    if (hidden % group_size != 0) {
      throw Error(fmt::format("group size {} does not divide hidden size {}", group_size, hidden));
    }
  }
  if (row.scales == kScalesPerBlock && hidden % row.block != 0) {
    throw Error(fmt::format("{} needs a hidden size divisible by {}, not {}", to_string(quant), row.block, hidden));
  }
  if ((row.layouts & (1u << int(scale_layout))) == 0) {
    throw Error(fmt::format("scale_layout {} is not a layout quant {} takes: allowed {} {}", to_string(scale_layout),
                            to_string(quant), (row.layouts & (row.layouts - 1)) ? "are" : "is",
                            layouts_text(row.layouts)));
  }
  if (mirror && quant == Quant::none) {
    throw Error(
        "mirror is set with quant none: the mirror is y in T beside a quantised output, and without "
        "quant the output already is y in T");
  }
}

std::string EpilogueMode::text() const {
  const QuantRow& row = row_of(quant);
  std::string s = to_string(quant);
  if (row.scales == kScalesPerGroup) s += fmt::format(" g{} {}", group_size, to_string(scale_format));
  if ((row.scales == kScalesPerGroup || row.scales == kScalesPerBlock) && (row.layouts & (row.layouts - 1)))
    s += fmt::format(" {}", to_string(scale_layout));
  if (mirror) s += " mirror";
  return s + " " + to_string(norm);
}

int EpilogueMode::out_row(int hidden) const { return row_of(quant).packs_fp4 ? hidden / 2 : hidden; }

ScaleShape EpilogueMode::scale_shape(int hidden) const {
  const QuantRow& row = row_of(quant);
  ScaleShape s;
  switch (row.scales) {
    case kScalesPerToken: s.columns = 1, s.per_row = true; break;
    case kScalesPerGroup: s.columns = valid_group_size(group_size) ? hidden / group_size : 0; break;
    case kScalesPerBlock: s.columns = hidden / row.block; break;
    default: return s;
  }
  s.element_bytes = row.scale_element == kScaleElementByte ||
                            (row.scale_element == kScaleElementByFormat && scale_format == ScaleFormat::e8m0)
                        ? 1
                        : 4;
  s.transposed = !s.per_row && scale_layout == ScaleLayout::column_major;
  if (scale_layout == ScaleLayout::swizzled_128x4) s.row_multiple = kSwizzleRows, s.column_multiple = kSwizzleColumns;
  return s;
}

bool packs_fp4(Quant q) { return row_of(q).packs_fp4; }
bool writes_scales(Quant q) { return row_of(q).scales != kScalesNone; }
bool reads_quant_scale(Quant q) { return row_of(q).reads_scale; }
const char* quant_scale_name(Quant q) { return row_of(q).scale_name; }
const char* quant_scale_argument(Quant q) { return row_of(q).reads_scale ? row_of(q).scale_argument : nullptr; }
bool pads_out(Quant q) { return row_of(q).pads_out; }
bool group_quant_takes(Quant q) { return row_of(q).group_quant; }
bool takes_group_size(Quant q) { return row_of(q).scales == kScalesPerGroup; }

const char* to_string(DType v) { return name_in(kDTypes, v); }
const char* to_string(Quant v) { return name_in(kQuants, v); }
const char* to_string(Norm v) { return name_in(kNorms, v); }
const char* to_string(ScaleFormat v) { return name_in(kScaleFormats, v); }
const char* to_string(ScaleLayout v) { return name_in(kScaleLayouts, v); }
DType parse_dtype(std::string_view t) { return parse_in(kDTypes, "dtype", t); }
Quant parse_quant(std::string_view t) { return parse_in(kQuants, "quant mode", t); }
Norm parse_norm(std::string_view t) { return parse_in(kNorms, "norm mode", t); }
ScaleFormat parse_scale_format(std::string_view t) { return parse_in(kScaleFormats, "scale format", t); }
ScaleLayout parse_scale_layout(std::string_view t) { return parse_in(kScaleLayouts, "scale layout", t); }

const std::vector<DType>& all_dtypes() {
  static const auto v = values_in(kDTypes);
  return v;
}
const std::vector<Quant>& all_quants() {
  static const auto v = values_in(kQuants);
  return v;
}
const std::vector<Norm>& all_norms() {
  static const auto v = values_in(kNorms);
  return v;
}
const std::vector<ScaleFormat>& all_scale_formats() {
  static const auto v = values_in(kScaleFormats);
  return v;
}
const std::vector<ScaleLayout>& all_scale_layouts() {
  static const auto v = values_in(kScaleLayouts);
  return v;
}

}  // namespace arfuse
