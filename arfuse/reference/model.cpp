#include "reference/model.hpp"

#include <cmath>

#include "arfuse/error.hpp"

#include "jit/block_shape.hpp"
#include "reference/block_scaled.hpp"
#include "reference/numerics.hpp"

namespace arfuse::reference {
namespace {

// The element index of (thread, k, j) in the device layout: vector tid + k * THREADS.
struct Layout {
  jit::BlockShape block;
  int vectors;
  int warp;
  bool owns(int thread, int k) const { return thread + k * block.threads < vectors; }
  int element(int thread, int k, int j) const { return (thread + k * block.threads) * 8 + j; }
};

Layout layout_for(const EpilogueConfig& c) {
  return Layout{jit::block_shape(c.hidden, c.target.warp_size()), c.hidden / 8, c.target.warp_size()};
}

// One warp's butterfly, as the shuffles do it; every lane ends equal, lane 0 is returned.
template <typename Op>
float butterfly(std::vector<float> lanes, Op op) {
  const int n = int(lanes.size());
  for (int mask = n / 2; mask > 0; mask >>= 1) {
    std::vector<float> next(lanes.size());
    for (int i = 0; i < n; ++i) next[i] = op(lanes[i], lanes[i ^ mask]);
    lanes.swap(next);
  }
  return lanes[0];
}

// Per-thread partials -> per-warp butterflies -> the first warp's butterfly over the
// partials, missing lanes loading 0.
template <typename Op>
float block_reduce(const std::vector<float>& per_thread, int warp, Op op) {
  const int warps = int(per_thread.size()) / warp;
  std::vector<float> first(warp, 0.0f);
  for (int w = 0; w < warps; ++w) {
    first[w] = butterfly(std::vector<float>(per_thread.begin() + w * warp, per_thread.begin() + (w + 1) * warp), op);
  }
  return butterfly(first, op);
}

float row_sum_of_squares(const Layout& l, const float* res) {
  std::vector<float> partial(l.block.threads, 0.0f);
  for (int t = 0; t < l.block.threads; ++t) {
    for (int k = 0; k < l.block.vectors_per_thread; ++k) {
      if (!l.owns(t, k)) continue;
      for (int j = 0; j < 8; ++j) {
        const float v = res[l.element(t, k, j)];
        partial[t] = std::fmaf(v, v, partial[t]);
      }
    }
  }
  return block_reduce(partial, l.warp, [](float a, float b) { return a + b; });
}

float row_amax(const Layout& l, const float* y) {
  std::vector<float> partial(l.block.threads, 0.0f);
  for (int t = 0; t < l.block.threads; ++t) {
    for (int k = 0; k < l.block.vectors_per_thread; ++k) {
      if (!l.owns(t, k)) continue;
      for (int j = 0; j < 8; ++j) partial[t] = max_keep_nan(partial[t], std::fabs(y[l.element(t, k, j)]));
    }
  }
  return block_reduce(partial, l.warp, max_keep_nan);
}

void quantize_row(const EpilogueConfig& c, const Layout& l, const float* y, std::uint8_t* q, float* scale) {
  const float amax = row_amax(l, y);
  const Fp8Format format = c.target.fp8_format();
  const float s = amax > 0.0f ? amax / fp8_max(format) : 1.0f;
  for (int i = 0; i < c.hidden; ++i) q[i] = float_to_fp8(y[i] / s, format);
  *scale = s;
}

void check_size(const Bits16& v, size_t expected, const char* name) {
  if (v.size() != expected) {
    throw Error(std::string("reference model: ") + name + " has the wrong number of elements");
  }
}

}  // namespace

float widen(std::uint16_t bits, DType dtype) { return dtype == DType::bf16 ? bf16_to_float(bits) : f16_to_float(bits); }

std::uint16_t narrow(float value, DType dtype) {
  return dtype == DType::bf16 ? float_to_bf16(value) : float_to_f16(value);
}

Bits16 fold(const std::vector<Bits16>& inputs, DType dtype) {
  if (inputs.empty()) throw Error("reference model: fold of no inputs");
  Bits16 out(inputs[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    float acc = widen(inputs[0][i], dtype);
    for (size_t r = 1; r < inputs.size(); ++r) acc = acc + widen(inputs[r][i], dtype);
    out[i] = narrow(acc, dtype);
  }
  return out;
}

float inverse_norm(const EpilogueConfig& c, const float* res_row) {
  const float ss = row_sum_of_squares(layout_for(c), res_row);
  return 1.0f / std::sqrt(ss / float(c.hidden) + c.eps);
}

EpilogueOutputs epilogue(const EpilogueConfig& c, int tokens, const Bits16& ar, const Bits16& residual_in,
                         const Bits16& weight) {
  const size_t n = size_t(tokens) * size_t(c.hidden);
  check_size(ar, n, "ar");
  check_size(residual_in, n, "residual_in");
  check_size(weight, size_t(c.hidden), "weight");
  const Layout l = layout_for(c);
  const bool quant = c.mode.quant != Quant::none;
  const bool token_fp8 = c.mode.quant == Quant::fp8;
  const bool block_scaled = quant && !token_fp8;
  EpilogueOutputs o;
  o.residual_out.resize(n);
  if (token_fp8) o.q.resize(n), o.scales.resize(size_t(tokens));
  if (!quant) o.out.resize(n);
  if (c.mode.mirror) o.mirror.resize(n);
  Bits16 all_y(block_scaled ? n : 0);  // 7b-7e quantise y after every row is normalised
  std::vector<float> g(size_t(c.hidden)), res(size_t(c.hidden)), y(size_t(c.hidden));
  for (int i = 0; i < c.hidden; ++i) {
    g[i] = widen(weight[i], c.dtype);
    if (c.mode.norm == Norm::gemma) g[i] = g[i] + 1.0f;
  }
  for (int t = 0; t < tokens; ++t) {
    const size_t row = size_t(t) * size_t(c.hidden);
    for (int i = 0; i < c.hidden; ++i) {
      const std::uint16_t r = narrow(widen(ar[row + i], c.dtype) + widen(residual_in[row + i], c.dtype), c.dtype);
      o.residual_out[row + i] = r;
      res[i] = widen(r, c.dtype);
    }
    const float inv = inverse_norm(c, res.data());
    for (int i = 0; i < c.hidden; ++i) {
      const std::uint16_t yb = narrow((res[i] * inv) * g[i], c.dtype);
      y[i] = widen(yb, c.dtype);
      if (!quant) o.out[row + i] = yb;
      if (c.mode.mirror) o.mirror[row + i] = yb;
      if (block_scaled) all_y[row + i] = yb;
    }
    if (token_fp8) quantize_row(c, l, y.data(), o.q.data() + row, o.scales.data() + t);
  }
  if (block_scaled) quantize_block_scaled(c, tokens, all_y, o);  // steps 7b-7e over every row's y
  return o;
}

void token_quant(const EpilogueConfig& c, int tokens, const Bits16& y_bits, std::vector<std::uint8_t>& q,
                 std::vector<float>& scales) {
  const size_t n = size_t(tokens) * size_t(c.hidden);
  check_size(y_bits, n, "y");
  const Layout l = layout_for(c);
  q.resize(n);
  scales.resize(size_t(tokens));
  std::vector<float> y(size_t(c.hidden));
  for (int t = 0; t < tokens; ++t) {
    const size_t row = size_t(t) * size_t(c.hidden);
    for (int i = 0; i < c.hidden; ++i) y[i] = widen(y_bits[row + i], c.dtype);
    quantize_row(c, l, y.data(), q.data() + row, scales.data() + t);
  }
}

}  // namespace arfuse::reference
