// Rows that show a change of the inverse norm in the outputs. A kernel whose reduction tree
// differs from the contract's moves a row's sum of squares by a few ulps and its inverse norm by
// at most about one, and with random rows a bf16 output then changes for about 0.2 elements of
// 6144: most such kernels would pass. A probe row holds elements placed next to a rounding tie
// for the reference's own inverse norm, so that one ulp more or less changes their y.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "jit/block_shape.hpp"
#include "reference/model.hpp"

namespace arfuse::test {

namespace detail {

inline float weight_factor(const reference::EpilogueConfig& c, float w) {
  return c.mode.norm == Norm::gemma ? w + 1.0f : w;
}

// The T values in [lo, hi), positive, by bit pattern (their order).
inline std::vector<std::uint16_t> t_values(DType dtype, float lo, float hi) {
  std::vector<std::uint16_t> out;
  for (std::uint32_t b = reference::narrow(lo, dtype); b < 0x7c00u || dtype == DType::bf16; ++b) {
    const float v = reference::widen(std::uint16_t(b), dtype);
    if (!(v < hi)) break;
    if (v >= lo) out.push_back(std::uint16_t(b));
  }
  return out;
}

}  // namespace detail

// Makes `row` of (ar, residual) a probe row for `config` and sets the weights of its probes.
// Every element is +-[1, 4) with residual 0 (so res = ar), except one tiny element at the start
// of each vector first_vector .. first_vector + probes - 1: those vectors belong to different
// threads (k = 0), so each tiny square meets partial sums >= 1 and vanishes (it is below half their
// ulp) in any order, and the row's inverse norm does not depend on the probes. Then a value v and a
// weight w are searched for which T((v * inv) * g) changes when inv moves one ulp up, and another
// pair for one ulp down; the probes take them in turn. bf16 has only 128 x 128 mantissa pairs, and
// only about one row in 30 has both (measured: 14 of 400 random inverse norms): a row without is
// drawn again.
inline void plant_norm_probe(const reference::EpilogueConfig& c, int row, int first_vector, int probes,
                             std::mt19937& rng, reference::Bits16& ar, reference::Bits16& residual,
                             reference::Bits16& weight) {
  const int hidden = c.hidden;
  const jit::BlockShape shape = jit::block_shape(hidden, c.target.warp_size());
  REQUIRE(probes >= 2);
  REQUIRE(first_vector + probes <= std::min(shape.threads, hidden / 8));
  const size_t base = size_t(row) * size_t(hidden);
  const auto is_probe = [&](int i) { return i % 8 == 0 && i / 8 >= first_vector && i / 8 < first_vector + probes; };
  const auto row_values = [&] {
    std::vector<float> res(static_cast<size_t>(hidden));
    for (int i = 0; i < hidden; ++i) res[size_t(i)] = reference::widen(ar[base + size_t(i)], c.dtype);
    return res;
  };
  // bf16 keeps f32's exponent range: any scale works. f16 needs v^2 below 2^-25 and y normal.
  const bool bf16 = c.dtype == DType::bf16;
  const auto values = detail::t_values(c.dtype, bf16 ? 0x1p-40f : 0x1p-14f, bf16 ? 0x1p-39f : 0x1p-13f);
  // Weights of one binade (gemma's g = w + 1 then has as many distinct values as w).
  const float w_lo = bf16 ? (c.mode.norm == Norm::gemma ? 0.5f : 1.0f) : 8.0f;
  auto weights = detail::t_values(c.dtype, w_lo, 2.0f * w_lo);
  std::uniform_real_distribution<float> magnitude(1.0f, 4.0f);
  std::bernoulli_distribution negative(0.5);

  for (int attempt = 0; attempt < 1000; ++attempt) {
    for (int i = 0; i < hidden; ++i) {
      const float x = is_probe(i) ? 0.0f : (negative(rng) ? -1.0f : 1.0f) * magnitude(rng);
      ar[base + size_t(i)] = reference::narrow(x, c.dtype);
      residual[base + size_t(i)] = reference::narrow(0.0f, c.dtype);
    }
    const float inv = reference::inverse_norm(c, row_values().data());
    const float inv_up = std::nextafter(inv, 2.0f * inv), inv_down = std::nextafter(inv, 0.0f);
    std::shuffle(weights.begin(), weights.end(), rng);
    std::pair<std::uint16_t, std::uint16_t> up{}, down{};  // (v, w)
    bool have_up = false, have_down = false;
    for (size_t wi = 0; wi < weights.size() && wi < 256 && !(have_up && have_down); ++wi) {
      const float g = detail::weight_factor(c, reference::widen(weights[wi], c.dtype));
      for (std::uint16_t vb : values) {
        const float v = reference::widen(vb, c.dtype);
        const std::uint16_t y = reference::narrow((v * inv) * g, c.dtype);
        if (!have_up && reference::narrow((v * inv_up) * g, c.dtype) != y) up = {vb, weights[wi]}, have_up = true;
        if (!have_down && reference::narrow((v * inv_down) * g, c.dtype) != y)
          down = {vb, weights[wi]}, have_down = true;
      }
    }
    if (!(have_up && have_down)) continue;
    for (int p = 0; p < probes; ++p) {
      const size_t column = size_t(first_vector + p) * 8;
      const auto& chosen = p % 2 == 0 ? up : down;
      ar[base + column] = chosen.first;
      weight[column] = chosen.second;
    }
    REQUIRE(reference::inverse_norm(c, row_values().data()) == inv);  // the probes did not move it
    return;
  }
  FAIL("no probe row in 1000 draws: the search for values next to a tie is broken");
}

// Rows first_row .. first_row + rows - 1 made probe rows, with 64 probes each in columns of their
// own (so their weights do not collide); rows * 64 vectors must fit in the first k = 0 slots.
inline void plant_norm_probe_rows(const reference::EpilogueConfig& c, int first_row, int rows, std::mt19937& rng,
                                  reference::Bits16& ar, reference::Bits16& residual, reference::Bits16& weight) {
  constexpr int kProbesPerRow = 64;
  for (int r = 0; r < rows; ++r)
    plant_norm_probe(c, first_row + r, r * kProbesPerRow, kProbesPerRow, rng, ar, residual, weight);
}

}  // namespace arfuse::test
