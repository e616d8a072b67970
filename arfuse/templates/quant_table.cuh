// The device code's view of the quant modes: a kernel's quant code (a mode's row and its mirror
// flag in one number) and the constants device code tests. The rows themselves are the public
// table, arfuse/quant_modes.hpp, which host code reads too.
#pragma once

#include "arfuse/quant_modes.hpp"

#include "host_device.cuh"

namespace arfuse {

// The rows as device code names them, for the tests below and a quantiser's own specialisation.
inline constexpr int kQuantNone = int(Quant::none);
inline constexpr int kQuantFp8 = int(Quant::fp8);
inline constexpr int kQuantFp8Group = int(Quant::fp8_group);
inline constexpr int kQuantMxfp4 = int(Quant::mxfp4);
inline constexpr int kQuantFp8Static = int(Quant::fp8_static);
inline constexpr int kQuantNvfp4 = int(Quant::nvfp4);

// A kernel's quant code: the row and whether it also writes y in T (the mirror), in one number
// (0 none; 2 * row - 1, plus 1 with the mirror). Kernels take it as a template argument; a call
// descriptor holds it in 4 bits (codes.cuh).
ARFUSE_HOST_DEVICE constexpr int quant_code(int family, bool mirror) {
  return family == kQuantNone ? 0 : 2 * family - 1 + (mirror ? 1 : 0);
}
ARFUSE_HOST_DEVICE constexpr int quant_family(int code) { return (code + 1) / 2; }
ARFUSE_HOST_DEVICE constexpr bool quant_mirror(int code) { return code != 0 && code % 2 == 0; }
inline constexpr int kMaxQuantCode = quant_code(kQuantModes - 1, true);
static_assert(kMaxQuantCode < 16, "a call descriptor holds the quant code in 4 bits");
static_assert(quant_family(quant_code(kQuantNvfp4, true)) == kQuantNvfp4 && quant_mirror(quant_code(kQuantFp8, true)) &&
                  !quant_mirror(quant_code(kQuantMxfp4, false)),
              "quant code round trip");

inline constexpr int kMxBlockSize = kQuantRows[kQuantMxfp4].block;     // MXFP4 elements per shared scale
inline constexpr int kNvfp4BlockSize = kQuantRows[kQuantNvfp4].block;  // NVFP4 elements per E4M3 block scale

// The device code's view of a quant code Q. Device code reads the table only through these
// constants: a row read in a run-time expression would be an access to host memory.
template <int Q>
inline constexpr bool kQuantIsGroupFp8 = quant_family(Q) == kQuantFp8Group;
template <int Q>
inline constexpr bool kQuantIsMxfp4 = quant_family(Q) == kQuantMxfp4;
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
template <int Q>
inline constexpr bool kQuantScaleBytes = kQuantRows[quant_family(Q)].scale_element == kScaleElementByte;

}  // namespace arfuse
