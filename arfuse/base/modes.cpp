#include "arfuse/modes.hpp"

#include <fmt/format.h>

#include "arfuse/base/names.hpp"
#include "arfuse/error.hpp"
#include "arfuse/templates/limits.cuh"

namespace arfuse {
namespace {

// The device code's codes (templates/limits.cuh) are the enums' values.
static_assert(int(Quant::none) == kQuantNone && int(Quant::fp8) == kQuantFp8 &&
                  int(Quant::fp8_mirror) == kQuantFp8Mirror && int(Quant::fp8_group) == kQuantFp8Group &&
                  int(Quant::fp8_group_mirror) == kQuantFp8GroupMirror && int(Quant::mxfp4) == kQuantMxfp4 &&
                  int(Quant::mxfp4_mirror) == kQuantMxfp4Mirror && int(Quant::fp8_static) == kQuantFp8Static &&
                  int(Quant::fp8_static_mirror) == kQuantFp8StaticMirror && int(Quant::nvfp4) == kQuantNvfp4 &&
                  int(Quant::nvfp4_mirror) == kQuantNvfp4Mirror,
              "Quant codes");
static_assert(int(Norm::rms) == kNormRms && int(Norm::gemma) == kNormGemma, "Norm codes");
static_assert(int(ScaleFormat::f32) == kScaleF32 && int(ScaleFormat::ue8m0_f32) == kScaleUe8m0F32 &&
                  int(ScaleFormat::e8m0) == kScaleE8m0,
              "ScaleFormat codes");

// Every enum's names, in the order all_*() lists them.
const Names<DType> kDTypes{{DType::f16, "f16"}, {DType::bf16, "bf16"}};
const Names<Quant> kQuants{{Quant::none, "none"},
                           {Quant::fp8, "fp8"},
                           {Quant::fp8_mirror, "fp8_mirror"},
                           {Quant::fp8_group, "fp8_group"},
                           {Quant::fp8_group_mirror, "fp8_group_mirror"},
                           {Quant::mxfp4, "mxfp4"},
                           {Quant::mxfp4_mirror, "mxfp4_mirror"},
                           {Quant::fp8_static, "fp8_static"},
                           {Quant::fp8_static_mirror, "fp8_static_mirror"},
                           {Quant::nvfp4, "nvfp4"},
                           {Quant::nvfp4_mirror, "nvfp4_mirror"}};
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

void EpilogueMode::validate(int hidden) const {
  check_hidden(hidden);
  if (is_group_fp8(quant)) {
    if (!valid_group_size(group_size)) {
      throw Error(fmt::format("group size {} is not supported by {}: allowed are 32, 64 and 128", group_size,
                              to_string(quant)));
    }
    if (hidden % group_size != 0) {
      throw Error(fmt::format("group size {} does not divide hidden size {}", group_size, hidden));
    }
  }
  if (is_mxfp4(quant)) {
    if (hidden % kMxBlockSize != 0) {
      throw Error(
          fmt::format("{} needs a hidden size divisible by {}, not {}", to_string(quant), kMxBlockSize, hidden));
    }
    if (scale_layout != ScaleLayout::row_major) {
      throw Error(fmt::format("{} scales are row-major [tokens, hidden / 32]; scale_layout must be row_major",
                              to_string(quant)));
    }
  }
  if (is_nvfp4(quant)) {
    if (hidden % kNvfp4BlockSize != 0) {
      throw Error(
          fmt::format("{} needs a hidden size divisible by {}, not {}", to_string(quant), kNvfp4BlockSize, hidden));
    }
    if (scale_layout == ScaleLayout::column_major) {
      throw Error(
          fmt::format("scale_layout column_major is not an {} layout: use row_major (linear [tokens, hidden / "
                      "16]) or swizzled_128x4",
                      to_string(quant)));
    }
  } else if (scale_layout == ScaleLayout::swizzled_128x4) {
    throw Error(fmt::format("scale_layout swizzled_128x4 is NVFP4's; quant {} takes {}", to_string(quant),
                            is_group_fp8(quant) ? "row_major or column_major" : "row_major"));
  }
}

std::string EpilogueMode::text() const {
  std::string s = to_string(quant);
  if (is_group_fp8(quant)) s += fmt::format(" g{} {} {}", group_size, to_string(scale_format), to_string(scale_layout));
  if (is_nvfp4(quant)) s += fmt::format(" {}", to_string(scale_layout));
  return s + " " + to_string(norm);
}

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
