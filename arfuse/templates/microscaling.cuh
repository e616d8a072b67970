// The bit-level steps of block-scaled quantisation (contract steps 7b, 7c and 7e) that the
// kernels run, shared with the host build so that tests/cpu/microscaling.cpp checks this very code
// against the reference model over every bf16 value and every exponent: UE8M0 rounding of a
// scale, floor(log2) of an amax, the E2M1 code of an element, and NVFP4's E4M3 block scale.
// Plain C++ on the host.
#pragma once

#include "host_device.cuh"
#include "limits.cuh"

namespace arfuse {

ARFUSE_HOST_DEVICE inline unsigned max_unsigned(unsigned a, unsigned b) { return a > b ? a : b; }
ARFUSE_HOST_DEVICE inline unsigned min_unsigned(unsigned a, unsigned b) { return a < b ? a : b; }

// x != 0.
ARFUSE_HOST_DEVICE inline int leading_zeros(unsigned x) {
#if defined(ARFUSE_VENDOR_NVIDIA) && (defined(__CUDA_ARCH__) || defined(__CUDACC_RTC__))
  return __clz(int(x));
#else
  return __builtin_clz(x);
#endif
}

// The smallest power of two >= a positive scale, at least 2^-127, read off the fp32 bits; the
// quiet NaN 0x7fc00000 for a non-finite scale and above 2^127.
ARFUSE_HOST_DEVICE inline float ue8m0_round_up(float scale) {
  const float nan = bits_to_float(0x7fc00000u);
  if (!(scale <= 0x1.fffffep127f)) return nan;
  const unsigned bits = float_to_bits(scale), exponent = bits >> 23, mantissa = bits & 0x7fffffu;
  if (exponent == 0) return bits_to_float(bits <= 0x00400000u ? 0x00400000u : 0x00800000u);  // 2^-127, 2^-126
  if (mantissa == 0) return scale;
  return exponent == 254 ? nan : bits_to_float((exponent + 1) << 23);
}

// The E8M0 byte of a power of two from ue8m0_round_up: 2^-127 (a subnormal) -> 0, NaN -> 0xff.
ARFUSE_HOST_DEVICE inline unsigned char e8m0_byte(float power_of_two) {
  return (unsigned char)(float_to_bits(power_of_two) >> 23);
}

// floor(log2(x)) of a finite x > 0, subnormals included.
ARFUSE_HOST_DEVICE inline int floor_log2(float x) {
  const unsigned bits = float_to_bits(x);
  const int exponent = int(bits >> 23);
  return exponent != 0 ? exponent - 127 : (31 - leading_zeros(bits)) - 149;
}

// MXFP4's shared exponent for a finite amax: floor(log2(amax)) - 2 (2 is E2M1's largest
// exponent), clamped to [-127, 127]; -127 for 0.
ARFUSE_HOST_DEVICE inline int mx_exponent(float amax) {
  if (!(amax > 0.0f)) return -127;
  const int e = floor_log2(amax) - 2;
  return e < -127 ? -127 : e > 127 ? 127 : e;
}

// E2M1 code of a finite v: round to nearest, ties to the even code, saturating at 6, sign kept
// (also for zero). Within each binade of |v| the codes are evenly spaced, so the code is
// rne(|v| * s + o) with (s, o) = (2, 0) below 2, (1, 2) in [2, 4), (1/2, 4) in [4, 8) and so on
// (codes from 8 up saturate to 7). One fused multiply-add with 2^23 + o rounds that to an
// integer (its one rounding is the FPU's ties-to-even, and |v| * s is exact inside it) and leaves
// the code in the low bits; s and o are read off |v|'s exponent. No branch, no comparison chain.
ARFUSE_HOST_DEVICE inline unsigned e2m1_code(float v) {
  const unsigned bits = float_to_bits(v), magnitude_bits = bits & 0x7fffffffu;
  const unsigned binade = max_unsigned(magnitude_bits >> 23, 127u);        // 127 for |v| < 2
  const float step = bits_to_float(0x7f800000u - (binade << 23));          // 2^(128 - binade)
  const float offset = bits_to_float(0x4b000000u + 2u * (binade - 127u));  // 2^23 + o
  const unsigned rounded = float_to_bits(fmaf(bits_to_float(magnitude_bits), step, offset));
  const unsigned magnitude = min_unsigned(rounded - 0x4b000000u, 7u);
  return ((bits >> 28) & 0x8u) | magnitude;
}

// Byte i of the result is byte (selector >> 4i) & 7 of the eight bytes b:a (a's are 0-3): PTX's
// prmt without its sign-replicating selectors, which no caller uses.
ARFUSE_HOST_DEVICE inline unsigned byte_perm(unsigned a, unsigned b, unsigned selector) {
#if defined(ARFUSE_VENDOR_NVIDIA) && (defined(__CUDA_ARCH__) || defined(__CUDACC_RTC__))
  return __byte_perm(a, b, selector);
#else
  const unsigned long long bytes = (unsigned long long)b << 32 | a;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= unsigned(bytes >> (8 * ((selector >> (4 * i)) & 7u)) & 0xffu) << (8 * i);
  return r;
#endif
}

// The E2M1 codes of the two elements of a bf16 pair y scaled by 2^-e: element 0's in the low
// byte, element 1's in byte 2 (bytes 1 and 3 hold 0x43, which the caller drops), in bf16 pair
// arithmetic. v = |y| * 2^-e is exact in bf16 (a power-of-two scaling; below 2^-126, where bf16
// rounds subnormals, the code is 0 either way) and below 8 (|y| <= amax < 2^(e + 3)). The code
// of v is rne(L(v)), saturated at 7, where L is e2m1_code's line of v's binade: 2v below 2,
// 2 + v in [2, 4), 4 + v / 2 in [4, 8). The three lines meet at 2 and 4 and their slopes fall,
// so L is the smallest of them at every v, and since rne is monotone the code is the smallest of
// the three lines rounded (and 7). In [2^7, 2^8) bf16 holds exactly the integers, so
// fma(v, s, 2^7 + o) is 2^7 + rne(o + v * s), rounded once, ties to even (o is even), and its
// low byte is the code: no binade is read off the bits. The halves never carry or borrow into
// each other: every intermediate half stays below 0x8000. multiplier_pair: the bf16 bits of 2^-e
// in both halves. PairOps: the bf16x2 multiply and fused multiply-add (round to nearest even) and
// the u16x2 minimum (the hardware's on NVIDIA sm_90; tests supply host ones).
template <typename PairOps>
ARFUSE_HOST_DEVICE inline unsigned e2m1_pair_codes(unsigned y_pair, unsigned multiplier_pair) {
  const unsigned magnitude = PairOps::mul(y_pair & 0x7fff7fffu, multiplier_pair);
  const unsigned below_2 = PairOps::fma(magnitude, 0x40004000u, 0x43004300u);  // 2^7 + rne(2 v)
  const unsigned below_4 = PairOps::fma(magnitude, 0x3f803f80u, 0x43024302u);  // 2^7 + 2 + rne(v)
  const unsigned below_8 = PairOps::fma(magnitude, 0x3f003f00u, 0x43044304u);  // 2^7 + 4 + rne(v / 2)
  const unsigned rounded =
      PairOps::min(PairOps::min(below_2, below_4), PairOps::min(below_8, 0x43074307u));  // 2^7 + 7: 6.0
  return rounded | ((y_pair >> 12) & 0x00080008u);  // the sign as each code's bit 3
}

// The E2M1 codes of a vector of 8 bf16 elements (4 pairs, element 2i in pair i's low half)
// scaled by 2^-e, as 4 bytes: element j in nibble j (element 2i in byte i's low nibble). The
// codes are gathered as bytes (0, 2, 1, 3 and 4, 6, 5, 7), and shifting the upper half down by
// 12 puts code 1 beside code 0 and code 3 beside code 2: no nibble is masked or placed singly.
template <typename PairOps>
ARFUSE_HOST_DEVICE inline unsigned e2m1_vector_bytes(const unsigned (&y)[4], unsigned multiplier_pair) {
  unsigned codes[4];
  for (int i = 0; i < 4; ++i) codes[i] = e2m1_pair_codes<PairOps>(y[i], multiplier_pair);
  unsigned low = byte_perm(codes[0], codes[1], 0x6240u), high = byte_perm(codes[2], codes[3], 0x6240u);
  low |= low >> 12;
  high |= high >> 12;
  return byte_perm(low, high, 0x5410u);
}

// ---- NVFP4 (contract step 7e) --------------------------------------------------------------

// E4M3 (e4m3fn: bias 7, largest finite 448, 0x7f NaN) code of x, round to nearest even,
// saturating to +-448 (Inf too), NaN -> 0x7f, and the code's value (exact; NaN for 0x7f): the
// NVFP4 block scale's format on every target (gfx942's own FP8 is e4m3fnuz). Both ranges are
// computed and one is selected, so the block's scale costs no branch: normal magnitudes keep 3
// mantissa bits, the 20 dropped ones rounded to nearest even in the integer bits (a carry moves
// into the exponent as it should; nothing below 448 rounds past 0x7e); subnormal codes are
// multiples of 2^-9, a * 2^9 rounded to an integer by one addition of 2^23 (exact product, one
// IEEE rounding, ties to even), its bits holding the integer.
struct E4m3Scale {
  unsigned code;
  float value;
};
ARFUSE_HOST_DEVICE inline E4m3Scale e4m3fn_scale(float x) {
  const unsigned bits = float_to_bits(x), sign = bits & 0x80000000u, magnitude_bits = bits & 0x7fffffffu;
  const float a = bits_to_float(magnitude_bits);
  const unsigned normal_bits = (magnitude_bits + 0x7ffffu + ((magnitude_bits >> 20) & 1u)) & 0xfff00000u;
  const float subnormal_units = a * 512.0f + 8388608.0f;  // 2^23 + the code
  const bool subnormal = a < 0x1p-6f, saturated = a >= 448.0f;
  unsigned code = subnormal ? float_to_bits(subnormal_units) - 0x4b000000u : (normal_bits >> 20) - (120u << 3);
  float value = subnormal ? (subnormal_units - 8388608.0f) * 0x1p-9f : bits_to_float(normal_bits);
  code = saturated ? 0x7eu : code;
  value = saturated ? 448.0f : value;
  const bool nan = !(x == x);
  return E4m3Scale{nan ? 0x7fu : code | sign >> 24, nan ? x : bits_to_float(float_to_bits(value) | sign)};
}
ARFUSE_HOST_DEVICE inline unsigned e4m3fn_code(float x) { return e4m3fn_scale(x).code; }

// 1/6 rounded to fp32 (0x3e2aaaab): amax * (1/6) is the engines' amax / 6 (they multiply by the
// reciprocal of E2M1's largest value).
inline constexpr float kOneSixth = 1.0f / 6.0f;

// One NVFP4 block's scale and the multiplier its elements are encoded with: the scale code
// e4m3fn(global * (amax * (1/6))); its value s; elements v = y * multiplier with
// multiplier = 1 / (s * (1 / global)), 0 when s is 0. encode is false when s is NaN (a NaN in
// the block, or a NaN global scale): its elements are then all code 0.
struct Nvfp4Block {
  unsigned scale_code;
  float multiplier;
  bool encode;
};

// What the block's scale code rounds: global * (amax * (1/6)).
ARFUSE_HOST_DEVICE inline float nvfp4_unrounded_scale(float amax, float global) { return global * (amax * kOneSixth); }

// The block, given its scale (e4m3fn_scale of nvfp4_unrounded_scale, or the hardware's equal).
ARFUSE_HOST_DEVICE inline Nvfp4Block nvfp4_block_with(E4m3Scale scale, float global_inverse) {
  Nvfp4Block b;
  const float s = scale.value;
  b.scale_code = scale.code;
  b.encode = s == s;
  b.multiplier = s != 0.0f ? 1.0f / (s * global_inverse) : 0.0f;
  return b;
}

ARFUSE_HOST_DEVICE inline Nvfp4Block nvfp4_block(float amax, float global, float global_inverse) {
  return nvfp4_block_with(e4m3fn_scale(nvfp4_unrounded_scale(amax, global)), global_inverse);
}

// E2M1 code of an NVFP4 element v (e2m1_code's rounding and saturation); a NaN v, which only an
// infinite multiplier times a zero y makes, is code 0.
ARFUSE_HOST_DEVICE inline unsigned nvfp4_code(float v) { return v == v ? e2m1_code(v) : 0u; }

// NVFP4's E2M1 code of a = |v| for a not NaN, as 2^23 + code (the code in the low byte of the
// bits): e2m1_code's lines 2a, 2 + a and 4 + a / 2 each rounded to an integer by one fused
// multiply-add with 2^23 + o (ties to even; o is even), and the smallest of them and 7. The lines
// meet at 2 and 4 and their slopes fall, so the smallest is the line of a's binade, and rounding
// is monotone (the argument of e2m1_pair_codes, in fp32). Seven float operations, no bit reads.
ARFUSE_HOST_DEVICE inline float e2m1_rounded_magnitude(float a) {
  const float below_2 = fmaf(a, 2.0f, 0x1p23f);
  const float below_4 = a + 0x1.000004p23f;                               // 2^23 + 2
  const float below_8 = fmaf(a, 0.5f, 0x1.000008p23f);                    // 2^23 + 4
  return fminf(fminf(below_2, below_4), fminf(below_8, 0x1.00000ep23f));  // 2^23 + 7: 6.0
}

// The E2M1 codes of 4 elements (r: 2^23 + code, from e2m1_rounded_magnitude; y0, y1: their
// 16-bit values as two pairs, for the signs) in the low 16 bits, element j in nibble j. The codes
// are gathered as bytes (0, 2, 1, 3) with their signs, and shifting down by 12 puts code 1 beside
// code 0 and code 3 beside code 2 (as e2m1_vector_bytes).
ARFUSE_HOST_DEVICE inline unsigned e2m1_quarter_codes(float r0, float r1, float r2, float r3, unsigned y0,
                                                      unsigned y1) {
  const unsigned even = byte_perm(float_to_bits(r0), float_to_bits(r2), 0x0040u);
  const unsigned odd = byte_perm(float_to_bits(r1), float_to_bits(r3), 0x0040u);
  const unsigned signs = (byte_perm(y0, y1, 0x7351u) >> 4) & 0x08080808u;
  const unsigned codes = byte_perm(even, odd, 0x5410u) | signs;
  return codes | codes >> 12;
}

// The E2M1 codes of 8 elements as 4 bytes, element j in nibble j: rounded[j] from
// e2m1_rounded_magnitude, the sign of element j the sign bit of the 16-bit y element j (y: 4 pairs,
// element 2i in pair i's low half) XOR sign_flip's bit 4j + 3.
ARFUSE_HOST_DEVICE inline unsigned e2m1_pack_codes(const float (&rounded)[8], const unsigned (&y)[4],
                                                   unsigned sign_flip) {
  const unsigned low = e2m1_quarter_codes(rounded[0], rounded[1], rounded[2], rounded[3], y[0], y[1]);
  const unsigned high = e2m1_quarter_codes(rounded[4], rounded[5], rounded[6], rounded[7], y[2], y[3]);
  return byte_perm(low, high, 0x5410u) ^ sign_flip;
}

// Swizzled NVFP4 scales: the byte of row m, scale column k is at
//   (m / 128) * tiles_per_row * 512 + (k / 4) * 512 + (m % 32) * 16 + ((m % 128) / 32) * 4 + k % 4,
// tiles_per_row = ceil(columns / 4). The row's part and the column's part add up.
ARFUSE_HOST_DEVICE inline long long swizzled_row_offset(int row, int tiles_per_row) {
  return (long long)(row / kSwizzleRows) * tiles_per_row * kSwizzleTileBytes + (row % 32) * 16 +
         ((row % kSwizzleRows) / 32) * 4;
}
ARFUSE_HOST_DEVICE inline int swizzled_column_offset(int column) {
  return (column / kSwizzleColumns) * kSwizzleTileBytes + column % kSwizzleColumns;
}

}  // namespace arfuse
