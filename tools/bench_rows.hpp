// What arfuse-bench measures and reports: one Row per (kernel, world, shape, output mode), and
// the helpers every mode shares (shape lists, input rotation, exactness).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "arfuse/reference/model.hpp"
#include "arfuse/runtime/context.hpp"

#include "bench_timing.hpp"
#include "cli.hpp"

namespace arfuse::tools {

struct Shape {
  int tokens, hidden;
};

struct Row {
  Row() = default;
  Row(std::string kind_, int world_, Shape shape_, std::string out_, Timing t_, double bytes_)
      : kind(std::move(kind_)), world(world_), shape(shape_), out(std::move(out_)), t(t_), bytes(bytes_) {}
  std::string kind;  // "rmsnorm_quant", "fused s1", "unfused", "allreduce s2", "torch.compile"...
  int world = 1;
  Shape shape{};
  std::string out;  // "bf16", "fp8"
  Timing t;
  double bytes = 0;                // each input read once, each output written once, summed over ranks
  bool measured_exactness = true;  // false for peers measured elsewhere (PyTorch)
  bool exact = false;
  double max_error = 0;   // largest |got - reference| over the outputs, in real units
  std::string resources;  // registers, local (spill) bytes, shared bytes, resident blocks/SM
};

constexpr const char* kDefaultShapes = "12x6144,128x8192,512x6144,2517x6144,4097x6144,2048x8192";

std::vector<Shape> parse_shapes(const std::string& text);
std::vector<jit::Quant> parse_quants(const std::string& text);
std::vector<int> parse_ints(const std::string& text, const char* what, int min, int max);
// Enough copies of a tensor that one graph's calls do not all fit in the 60 MB L2.
int rotation(std::size_t bytes_per_call);
std::string describe_resources(const LaunchableKernel& kernel);
reference::Bits16 random_bits(std::mt19937& rng, std::size_t n, float scale = 1.0f);

// Exactness of one rank's outputs against the reference: sets `exact` (and-ed into the row) and
// raises `max_error`.
void compare_t(Row& row, const reference::Bits16& got, const reference::Bits16& expected);
void compare_fp8(Row& row, const std::vector<std::uint8_t>& q, const std::vector<float>& scales,
                 const std::vector<std::uint8_t>& q_expected, const std::vector<float>& scales_expected, int hidden,
                 jit::Fp8Format format);

}  // namespace arfuse::tools
