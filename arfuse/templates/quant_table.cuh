// The quant modes, one row each: what a mode writes, reads and takes. Host code (names,
// validation, output shapes, the default spec set) and device code (which quantiser a kernel
// instantiates) read this one table; plain C++, no vendor code. A new mode is a new row here,
// its quantiser under quant/, its reference step, and their tests (CONTRIBUTING.md).
#pragma once

#include "host_device.cuh"

namespace arfuse {

// A mode's row in kQuantRows (arfuse::Quant's values): per-token FP8 (contract step 7),
// per-token-group FP8 (7b), MXFP4 (7c), static per-tensor FP8 (7d) and NVFP4 (7e).
enum QuantFamily {
  kQuantNone = 0,
  kQuantFp8 = 1,
  kQuantFp8Group = 2,
  kQuantMxfp4 = 3,
  kQuantFp8Static = 4,
  kQuantNvfp4 = 5,
  kQuantFamilies = 6,
};

// The scales a mode writes per row: none, one per token, one per group of the call's group size
// (32, 64 or 128), or one per fixed block of `block` elements.
enum ScaleKind { kScalesNone = 0, kScalesPerToken = 1, kScalesPerGroup = 2, kScalesPerBlock = 3 };
// What one scale is: fp32, a byte (E8M0 or E4M3), or as the call's scale format says (fp32 or
// E8M0).
enum ScaleElement { kScaleElementNone = 0, kScaleElementF32 = 1, kScaleElementByte = 2, kScaleElementByFormat = 3 };
// The scale layouts (arfuse::ScaleLayout's values as bits) a mode accepts.
enum ScaleLayoutBit { kLayoutRowMajor = 1, kLayoutColumnMajor = 2, kLayoutSwizzled = 4 };

struct QuantRow {
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
};

// The rows, indexed by QuantFamily. Modes without groups ignore the scale layout, so they take
// row- and column-major alike.
inline constexpr QuantRow kQuantRows[kQuantFamilies] = {
    {"none", kScalesNone, 0, kScaleElementNone, kLayoutRowMajor | kLayoutColumnMajor, false, false, "", "", true,
     false},
    {"fp8", kScalesPerToken, 0, kScaleElementF32, kLayoutRowMajor | kLayoutColumnMajor, false, false, "", "", true,
     false},
    {"fp8_group", kScalesPerGroup, 0, kScaleElementByFormat, kLayoutRowMajor | kLayoutColumnMajor, false, false, "", "",
     false, true},
    {"mxfp4", kScalesPerBlock, 32, kScaleElementByte, kLayoutRowMajor, true, false, "", "", false, true},
    {"fp8_static", kScalesNone, 0, kScaleElementNone, kLayoutRowMajor | kLayoutColumnMajor, false, true, "scale",
     "static_scale", true, true},
    {"nvfp4", kScalesPerBlock, 16, kScaleElementByte, kLayoutRowMajor | kLayoutSwizzled, true, true, "global scale",
     "global_scale", false, true},
};

// A kernel's quant code: the row and whether it also writes y in T (the mirror), in one number
// (0 none; 2 * row - 1, plus 1 with the mirror). Kernels take it as a template argument; a call
// descriptor holds it in 4 bits (codes.cuh).
ARFUSE_HOST_DEVICE constexpr int quant_code(int family, bool mirror) {
  return family == kQuantNone ? 0 : 2 * family - 1 + (mirror ? 1 : 0);
}
ARFUSE_HOST_DEVICE constexpr int quant_family(int code) { return (code + 1) / 2; }
ARFUSE_HOST_DEVICE constexpr bool quant_mirror(int code) { return code != 0 && code % 2 == 0; }
inline constexpr int kMaxQuantCode = quant_code(kQuantFamilies - 1, true);
static_assert(kMaxQuantCode < 16, "a call descriptor holds the quant code in 4 bits");
static_assert(quant_family(quant_code(kQuantNvfp4, true)) == kQuantNvfp4 && quant_mirror(quant_code(kQuantFp8, true)) &&
                  !quant_mirror(quant_code(kQuantMxfp4, false)),
              "quant code round trip");

inline constexpr int kMxBlockSize = kQuantRows[kQuantMxfp4].block;     // MXFP4 elements per shared scale
inline constexpr int kNvfp4BlockSize = kQuantRows[kQuantNvfp4].block;  // NVFP4 elements per E4M3 block scale

// The device code's view of a quant code Q. Device code reads the table only through these
// constants: a row read in a run-time expression would be an access to host memory.
template <int Q>
inline constexpr bool kQuantIsTokenFp8 = quant_family(Q) == kQuantFp8;
template <int Q>
inline constexpr bool kQuantIsGroupFp8 = quant_family(Q) == kQuantFp8Group;
template <int Q>
inline constexpr bool kQuantIsMxfp4 = quant_family(Q) == kQuantMxfp4;
template <int Q>
inline constexpr bool kQuantIsStaticFp8 = quant_family(Q) == kQuantFp8Static;
template <int Q>
inline constexpr bool kQuantIsNvfp4 = quant_family(Q) == kQuantNvfp4;
template <int Q>
inline constexpr bool kQuantPacksFp4 = kQuantRows[quant_family(Q)].packs_fp4;
template <int Q>
inline constexpr bool kQuantReadsScale = kQuantRows[quant_family(Q)].reads_scale;
template <int Q>
inline constexpr bool kQuantPadsOut = kQuantRows[quant_family(Q)].pads_out;
template <int Q>
inline constexpr bool kQuantSwizzles = (kQuantRows[quant_family(Q)].layouts & kLayoutSwizzled) != 0;
template <int Q>
inline constexpr bool kQuantWritesMirror = quant_mirror(Q);

}  // namespace arfuse
