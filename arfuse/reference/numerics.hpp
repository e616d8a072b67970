// Bit-exact software conversions on the CPU, written independently of the device code:
// f32 <-> f16 / bf16 (round to nearest even, subnormals, overflow to Inf) and f32 -> e4m3fn /
// e4m3fnuz (round to nearest even, saturating, by search over the format's code table).
// NaN becomes the canonical NaN of each format (f16/bf16 0x7fff, e4m3fn 0x7f, e4m3fnuz 0x80),
// as the kernels produce it.
#pragma once

#include <cstdint>

#include "arfuse/error.hpp"
#include "arfuse/target.hpp"

namespace arfuse::reference {

float bits_to_float(std::uint32_t bits);
std::uint32_t float_to_bits(float value);
// max(a, b) where a NaN in either wins: the amax every quantiser reduces with.
float max_keep_nan(float a, float b);

float bf16_to_float(std::uint16_t bits);
std::uint16_t float_to_bf16(float value);
float f16_to_float(std::uint16_t bits);
std::uint16_t float_to_f16(float value);

float fp8_to_float(std::uint8_t code, Fp8Format format);
std::uint8_t float_to_fp8(float value, Fp8Format format);
float fp8_max(Fp8Format format);

}  // namespace arfuse::reference
