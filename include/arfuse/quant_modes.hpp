// The quant modes, one row each: what a mode writes, reads and takes. The library's host code
// (names, validation, output shapes, the default spec set) and its kernels (which quantiser a
// kernel includes and instantiates, compiled at run time) read this one table, so it is plain
// C++ every device compiler takes: no include, no call. A new mode is a value of Quant and its
// row here, its quantiser, its reference step and their tests (CONTRIBUTING.md).
#pragma once

namespace arfuse {

// Per-token FP8 (contract step 7), per-token-group FP8 (7b), MXFP4 (7c), static per-tensor FP8
// with a calibrated scale passed per call (7d) and NVFP4 (7e); each may also write y in T beside
// it (EpilogueMode::mirror). The values index kQuantRows.
enum class Quant { none, fp8, fp8_group, mxfp4, fp8_static, nvfp4 };

// The scales a mode writes per row: none, one per token, one per group of the call's group size
// (32, 64 or 128), or one per fixed block of `block` elements.
enum ScaleKind { kScalesNone = 0, kScalesPerToken = 1, kScalesPerGroup = 2, kScalesPerBlock = 3 };
// What one scale is: fp32, a byte (E8M0 or E4M3), or as the call's scale format says (fp32 or
// E8M0).
enum ScaleElement { kScaleElementNone = 0, kScaleElementF32 = 1, kScaleElementByte = 2, kScaleElementByFormat = 3 };
// The scale layouts (arfuse::ScaleLayout's values as bits) a mode accepts.
enum ScaleLayoutBit { kLayoutRowMajor = 1, kLayoutColumnMajor = 2, kLayoutSwizzled = 4 };

struct QuantRow {
  Quant quant;  // the row's own value: row i is Quant(i)
  const char* name;
  int scales;                  // ScaleKind
  int block;                   // kScalesPerBlock: elements per scale
  int scale_element;           // ScaleElement
  unsigned layouts;            // ScaleLayoutBit mask: the scale layouts a call may pass
  bool packs_fp4;              // two E2M1 elements per output byte: out is [tokens, hidden / 2] bytes
  bool reads_scale;            // a scale per call, read through a device pointer
  const char* scale_name;      // that scale's name in messages
  const char* scale_argument;  // the argument of the C++ calls that passes it
  bool pads_out;               // out may be wider than hidden (zeros after it): the modes without groups
  bool group_quant;            // the standalone group_quant kernel takes it
  const char* quantiser;       // the kernels' quantiser: its file among the kernel templates ("" for none)
};

// Modes without groups ignore the scale layout, so they take row- and column-major alike.
inline constexpr QuantRow kQuantRows[] = {
    {Quant::none, "none", kScalesNone, 0, kScaleElementNone, kLayoutRowMajor | kLayoutColumnMajor, false, false, "", "",
     true, false, ""},
    {Quant::fp8, "fp8", kScalesPerToken, 0, kScaleElementF32, kLayoutRowMajor | kLayoutColumnMajor, false, false, "",
     "", true, false, "quant/token_fp8.cuh"},
    {Quant::fp8_group, "fp8_group", kScalesPerGroup, 0, kScaleElementByFormat, kLayoutRowMajor | kLayoutColumnMajor,
     false, false, "", "", false, true, "quant/group_fp8.cuh"},
    {Quant::mxfp4, "mxfp4", kScalesPerBlock, 32, kScaleElementByte, kLayoutRowMajor, true, false, "", "", false, true,
     "quant/mxfp4.cuh"},
    {Quant::fp8_static, "fp8_static", kScalesNone, 0, kScaleElementNone, kLayoutRowMajor | kLayoutColumnMajor, false,
     true, "scale", "static_scale", true, true, "quant/static_fp8.cuh"},
    {Quant::nvfp4, "nvfp4", kScalesPerBlock, 16, kScaleElementByte, kLayoutRowMajor | kLayoutSwizzled, true, true,
     "global scale", "global_scale", false, true, "quant/nvfp4.cuh"},
};
inline constexpr int kQuantModes = int(sizeof(kQuantRows) / sizeof(kQuantRows[0]));

// Checked by the host build (a device compiler of kernels takes no host function).
#if !defined(ARFUSE_VENDOR_NVIDIA) && !defined(ARFUSE_VENDOR_AMD)
namespace detail {
constexpr bool rows_in_order() {
  for (int i = 0; i < kQuantModes; ++i) {
    if (int(kQuantRows[i].quant) != i) return false;
  }
  return true;
}
}  // namespace detail
static_assert(detail::rows_in_order() && int(Quant::nvfp4) + 1 == kQuantModes,
              "one row per Quant value, in the enum's order (a new mode also names itself here)");
#endif

}  // namespace arfuse
