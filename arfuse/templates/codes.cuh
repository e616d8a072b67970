// One number for a call, a kernel spec or an epilogue mode: the bit fields every encoding of
// them shares (plain C++, no vendor code). The call descriptor that ranks compare at the entry
// barrier (signal.cuh), KernelSpec::packed (the in-memory cache key) and the mode argument of
// the PyTorch ops all put a field at the same place; each sets the fields it has and leaves the
// others 0.
#pragma once

#include "host_device.cuh"

namespace arfuse::codes {

// A field's place in the number. A type, not an object, so that device code calls its
// functions without naming a host variable (which NVRTC would place in memory and load).
template <unsigned Shift, unsigned Bits>
struct Field {
  static constexpr unsigned shift = Shift, bits = Bits;
  ARFUSE_HOST_DEVICE static constexpr unsigned long long mask() { return (1ull << Bits) - 1; }
  // Masked in 32 bits (every field is narrower), then widened: the device code's instructions
  // for a runtime field stay those of the hand-written shifts this replaced.
  ARFUSE_HOST_DEVICE static constexpr unsigned long long put(unsigned value) {
    return (unsigned long long)(value & unsigned(mask())) << Shift;
  }
  ARFUSE_HOST_DEVICE static constexpr unsigned get(unsigned long long code) {
    return unsigned((code >> Shift) & mask());
  }
  // Whether `value` survives put then get.
  ARFUSE_HOST_DEVICE static constexpr bool holds(unsigned long long value) { return value <= mask(); }
};

// A call descriptor uses bits 0-50 (above them a barrier flag carries its epoch); the fields from
// module on are the spec's and the mode's only.
using TokensBits = Field<0, 27>;       // a call's rows (>= 1; 0: not checked)
using GroupBits = Field<27, 2>;        // group_code(group size): fp8_group's
using ScaleFormatBits = Field<29, 2>;  // fp8_group's ScaleFormatCode; a call's NVFP4 layout (1: swizzled)
using HiddenBits = Field<31, 12>;      // hidden / 8 - 1
using Bf16Bits = Field<43, 1>;         // the element type: 1 bf16, 0 f16
using QuantBits = Field<44, 4>;        // quant_code (quant_table.cuh)
using NormBits = Field<48, 1>;         // NormMode
using StageBits = Field<49, 1>;        // stage - 1
using EpilogueBits = Field<50, 1>;     // fused_ar (1) or the plain all-reduce (0)
using ModuleBits = Field<51, 3>;       // jit::Module
using WorldBits = Field<54, 4>;        // world size (1 for the single-GPU modules)
using ViewsBits = Field<58, 1>;        // the kernel reads row strides
using ScaleLayoutBits = Field<59, 2>;  // a mode's ScaleLayout (the spec's is always row-major)
using GraphInputsBits = Field<61, 1>;  // the kernel reads its rows where the call's input slot says
inline constexpr unsigned kCallDescriptorBits = 51;

// Group sizes 32, 64 and 128 as 1, 2 and 3; 0 for none (and for a size no kernel takes).
ARFUSE_HOST_DEVICE constexpr unsigned group_code(unsigned group) {
  return group == 32 ? 1u : group == 64 ? 2u : group == 128 ? 3u : 0u;
}
ARFUSE_HOST_DEVICE constexpr unsigned group_of_code(unsigned code) { return code == 0 ? 0u : 16u << code; }
ARFUSE_HOST_DEVICE constexpr unsigned hidden_code(unsigned hidden) { return hidden / 8 - 1; }
ARFUSE_HOST_DEVICE constexpr unsigned hidden_of_code(unsigned code) { return (code + 1) * 8; }

}  // namespace arfuse::codes
