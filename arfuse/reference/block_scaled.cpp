#include "reference/block_scaled.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "arfuse/error.hpp"

#include "reference/microscaling.hpp"
#include "reference/numerics.hpp"
#include "templates/quant_table.cuh"

namespace arfuse::reference {
namespace {

float block_amax(const Bits16& y, std::size_t first, int count, DType dtype) {
  float amax = 0.0f;
  for (int i = 0; i < count; ++i) amax = max_keep_nan(amax, std::fabs(widen(y[first + std::size_t(i)], dtype)));
  return amax;
}

void check_shape(const Bits16& y, int tokens, int hidden, int block, const char* what) {
  if (tokens < 0 || hidden <= 0 || hidden % block != 0) {
    throw Error(std::string("reference ") + what + ": block " + std::to_string(block) + " must divide hidden " +
                std::to_string(hidden));
  }
  if (y.size() != std::size_t(tokens) * std::size_t(hidden)) {
    throw Error(std::string("reference ") + what + ": y has the wrong number of elements");
  }
}

}  // namespace

float group_scale(float amax, float fp8_max, ScaleFormat format) {
  const float scale = amax > 0.0f ? amax / fp8_max : 1.0f;
  return format == ScaleFormat::f32 ? scale : ue8m0_round_up(scale);
}

GroupQuantOutputs group_quant(const GroupQuantConfig& c, int tokens, const Bits16& y) {
  if (!valid_group_size(c.group_size)) {
    throw Error("reference group_quant: group size " + std::to_string(c.group_size) + " is not 32, 64 or 128");
  }
  check_shape(y, tokens, c.hidden, c.group_size, "group_quant");
  const int groups = c.hidden / c.group_size;
  const float max = fp8_max(c.format);
  GroupQuantOutputs o;
  o.q.resize(y.size());
  const std::size_t n_scales = std::size_t(tokens) * std::size_t(groups);
  if (c.scale_format == ScaleFormat::e8m0) {
    o.scale_bytes.resize(n_scales);
  } else {
    o.scales.resize(n_scales);
  }
  for (int t = 0; t < tokens; ++t) {
    for (int g = 0; g < groups; ++g) {
      const std::size_t first = std::size_t(t) * std::size_t(c.hidden) + std::size_t(g) * std::size_t(c.group_size);
      const float scale = group_scale(block_amax(y, first, c.group_size, c.dtype), max, c.scale_format);
      for (int i = 0; i < c.group_size; ++i) {
        o.q[first + std::size_t(i)] = float_to_fp8(widen(y[first + std::size_t(i)], c.dtype) / scale, c.format);
      }
      const std::size_t at = c.layout == ScaleLayout::row_major ? std::size_t(t) * std::size_t(groups) + std::size_t(g)
                                                                : std::size_t(g) * std::size_t(tokens) + std::size_t(t);
      if (c.scale_format == ScaleFormat::e8m0) {
        o.scale_bytes[at] = e8m0_of(scale);
      } else {
        o.scales[at] = scale;
      }
    }
  }
  return o;
}

bool mx_shared_exponent(float amax, int& exponent) {
  if (!std::isfinite(amax)) return false;
  exponent = amax > 0.0f ? floor_log2(amax) - 2 : -127;  // 2: E2M1's largest exponent (6 = 1.5 * 2^2)
  if (exponent < -127) exponent = -127;
  if (exponent > 127) exponent = 127;
  return true;
}

Mxfp4Outputs mxfp4_quant(int hidden, DType dtype, int tokens, const Bits16& y) {
  constexpr int kBlock = kMxBlockSize;
  check_shape(y, tokens, hidden, kBlock, "mxfp4_quant");
  Mxfp4Outputs o;
  o.packed.assign(y.size() / 2, 0);
  o.scales.resize(std::size_t(tokens) * std::size_t(hidden / kBlock));
  for (std::size_t b = 0; b < o.scales.size(); ++b) {
    const std::size_t first = b * kBlock;
    int e = 0;
    if (!mx_shared_exponent(block_amax(y, first, kBlock, dtype), e)) {
      o.scales[b] = kE8m0Nan;  // elements stay 0
      continue;
    }
    o.scales[b] = std::uint8_t(e + 127);
    for (int i = 0; i < kBlock; ++i) {
      // Exact in real arithmetic; in f32 it rounds only below 2^-126, where every E2M1 code is 0.
      const float v = std::ldexp(widen(y[first + std::size_t(i)], dtype), -e);
      const std::uint8_t code = float_to_e2m1(v);
      o.packed[(first + std::size_t(i)) / 2] |= std::uint8_t(i % 2 == 0 ? code : code << 4);
    }
  }
  return o;
}

std::vector<std::uint8_t> static_fp8_quant(int hidden, DType dtype, Fp8Format format, int tokens, const Bits16& y,
                                           float scale) {
  check_shape(y, tokens, hidden, 8, "static_fp8_quant");
  const float inverse = 1.0f / scale;
  std::vector<std::uint8_t> q(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) q[i] = float_to_fp8(widen(y[i], dtype) * inverse, format);
  return q;
}

std::size_t nvfp4_scale_index(int token, int column, int tokens, int hidden, ScaleLayout layout) {
  const int columns = hidden / kNvfp4Block;
  if (layout != ScaleLayout::swizzled_128x4) return std::size_t(token) * std::size_t(columns) + std::size_t(column);
  // Tiles of 128 rows x 4 columns, 512 bytes each, row-major over the tiles; inside a tile the
  // byte of (r, c) is at (r % 32) * 16 + (r / 32) * 4 + c.
  (void)tokens;
  const int tiles_per_row = (columns + 3) / 4;
  const std::size_t tile = std::size_t(token / 128) * std::size_t(tiles_per_row) + std::size_t(column / 4);
  const int r = token % 128, c = column % 4;
  return tile * 512 + std::size_t((r % 32) * 16 + (r / 32) * 4 + c);
}

std::size_t nvfp4_scale_count(int tokens, int hidden, ScaleLayout layout) {
  const int columns = hidden / kNvfp4Block;
  if (layout != ScaleLayout::swizzled_128x4) return std::size_t(tokens) * std::size_t(columns);
  const std::size_t rows = (std::size_t(tokens) + 127) / 128 * 128;
  return rows * std::size_t((columns + 3) / 4 * 4);
}

Nvfp4Block nvfp4_block_of(float amax, float global) {
  Nvfp4Block b;
  b.scale = float_to_fp8(global * (amax * (1.0f / 6.0f)), Fp8Format::e4m3fn);
  const float s = fp8_to_float(b.scale, Fp8Format::e4m3fn);
  b.encode = !std::isnan(s);
  b.multiplier = s != 0.0f ? 1.0f / (s * (1.0f / global)) : 0.0f;
  return b;
}

Nvfp4Outputs nvfp4_quant(int hidden, DType dtype, int tokens, const Bits16& y, float global, ScaleLayout layout) {
  check_shape(y, tokens, hidden, kNvfp4Block, "nvfp4_quant");
  Nvfp4Outputs o;
  o.packed.assign(y.size() / 2, 0);
  o.scales.assign(nvfp4_scale_count(tokens, hidden, layout), 0);  // the swizzled padding stays 0
  for (int t = 0; t < tokens; ++t) {
    for (int column = 0; column < hidden / kNvfp4Block; ++column) {
      const std::size_t first = std::size_t(t) * std::size_t(hidden) + std::size_t(column) * kNvfp4Block;
      const Nvfp4Block b = nvfp4_block_of(block_amax(y, first, kNvfp4Block, dtype), global);
      o.scales[nvfp4_scale_index(t, column, tokens, hidden, layout)] = b.scale;
      if (!b.encode) continue;  // elements stay 0
      for (int i = 0; i < kNvfp4Block; ++i) {
        const float v = widen(y[first + std::size_t(i)], dtype) * b.multiplier;
        const std::uint8_t code = std::isnan(v) ? 0 : float_to_e2m1(v);
        o.packed[(first + std::size_t(i)) / 2] |= std::uint8_t(i % 2 == 0 ? code : code << 4);
      }
    }
  }
  return o;
}

void quantize_block_scaled(const EpilogueConfig& c, int tokens, const Bits16& all_y, EpilogueOutputs& o) {
  switch (c.mode.quant) {
    case Quant::fp8_group: {
      GroupQuantConfig g{c.hidden,           c.mode.group_size, c.dtype, c.target.fp8_format(), c.mode.scale_format,
                         c.mode.scale_layout};
      auto grouped = group_quant(g, tokens, all_y);
      o.q = std::move(grouped.q), o.scales = std::move(grouped.scales), o.scale_bytes = std::move(grouped.scale_bytes);
      break;
    }
    case Quant::mxfp4: {
      auto mx = mxfp4_quant(c.hidden, c.dtype, tokens, all_y);
      o.q = std::move(mx.packed), o.scale_bytes = std::move(mx.scales);
      break;
    }
    case Quant::fp8_static:
      o.q = static_fp8_quant(c.hidden, c.dtype, c.target.fp8_format(), tokens, all_y, c.quant_scale);
      break;
    case Quant::nvfp4: {
      auto nv = nvfp4_quant(c.hidden, c.dtype, tokens, all_y, c.quant_scale, c.mode.scale_layout);
      o.q = std::move(nv.packed), o.scale_bytes = std::move(nv.scales);
      break;
    }
    case Quant::none:
    case Quant::fp8:
      throw Error(std::string("quantize_block_scaled: ") + to_string(c.mode.quant) + " is not a block-scaled mode");
  }
}

}  // namespace arfuse::reference
