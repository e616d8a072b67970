// What arfuse-bench measures and reports: one Row per (kernel, world, shape, output mode), and
// the helpers every mode shares (shape lists, input rotation, exactness).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "reference/model.hpp"
#include "runtime/context.hpp"

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

// The largest shapes the bench takes: a token count (also --tokens of --tune) and a row count
// times hidden size whose buffers (several per rank, and their host references) fit the machine.
constexpr long kMaxBenchTokens = 1 << 20;
constexpr long long kMaxBenchElements = 1ll << 28;

constexpr const char* kDefaultShapes = "12x6144,128x8192,512x6144,2517x6144,4097x6144,2048x8192";

// "a,b,,c" -> {"a", "b", "", "c"}: empty items are kept for the callers to refuse.
std::vector<std::string> split_commas(const std::string& text);
std::vector<Shape> parse_shapes(const std::string& text);
// The group size of the bench's fp8_group rows (fp32 scales, row-major: the calls' defaults).
constexpr int kBenchGroupSize = 128;
// The mode the bench runs `quant` in: RMSNorm, group size kBenchGroupSize, fp32 row-major scales;
// a layout of tiles where the mode has one (NVFP4's swizzled scales, which GEMMs read).
inline EpilogueMode bench_mode(Quant quant, bool mirror = false) {
  EpilogueMode mode;
  mode.quant = quant;
  mode.mirror = mirror;
  mode.group_size = kBenchGroupSize;
  mode.scale_layout = ScaleLayout::swizzled_128x4;
  try {
    mode.validate(kBenchGroupSize * 16);
  } catch (const Error&) {
    mode.scale_layout = ScaleLayout::row_major;
  }
  return mode;
}

// The scale the bench's calls read: fp8_static's (its rows, |y| up to about 3, well inside the
// FP8 range) and NVFP4's global scale (448 * 6 / 8); 1 for the other modes.
inline float bench_quant_scale(const EpilogueMode& mode) {
  const char* argument = quant_scale_argument(mode.quant);
  if (argument == nullptr) return 1.0f;
  return std::string_view(argument) == "global_scale" ? 448.0f * 6.0f / 8.0f : 0.0123f;
}

// Points a call's static_scale or global_scale, where its mode reads one, at `scale` (a device
// fp32 holding bench_quant_scale).
template <typename Args>
void set_quant_scale(Args& a, const EpilogueMode& mode, const void* scale) {
  const char* argument = quant_scale_argument(mode.quant);
  if (argument == nullptr) return;
  (std::string_view(argument) == "global_scale" ? a.global_scale : a.static_scale) = static_cast<const float*>(scale);
}

// Every quant mode by name (none, fp8, fp8_group (kBenchGroupSize), mxfp4, fp8_static, nvfp4),
// each also as name+mirror (the mirror output too), as bench_mode makes them.
std::vector<EpilogueMode> parse_modes(const std::string& text);
// What a row's output is called in the tables: bf16, fp8, fp8_group128, mxfp4, fp8+mirror, ...
std::string out_name(const EpilogueMode& mode);
// Bytes one call writes as output, scales and mirror for tokens x hidden (T = bf16).
std::size_t output_bytes(const EpilogueMode& mode, std::size_t tokens, std::size_t hidden);
// Bytes a scales buffer needs for any mode parse_modes takes.
std::size_t scale_buffer_bytes(std::size_t tokens, std::size_t hidden);
std::vector<int> parse_ints(const std::string& text, const char* what, int min, int max);
// Enough copies of a tensor that one graph's calls do not all fit in the 60 MB L2.
int rotation(std::size_t bytes_per_call);
std::string describe_resources(const LaunchableKernel& kernel);
reference::Bits16 random_bits(std::mt19937& rng, std::size_t n, float scale = 1.0f);

// Exactness of one rank's outputs against the reference: sets `exact` (and-ed into the row) and
// raises `max_error`.
void compare_t(Row& row, const reference::Bits16& got, const reference::Bits16& expected);
// Block-scaled outputs: exact means equal bytes (codes and scales); no error is decoded.
void compare_bytes(Row& row, const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& expected);
// A block-scaled row's codes and scales (fp32 or E8M0 bytes) against the reference, byte for byte.
void compare_block_scaled(Row& row, DeviceBuffer& out, DeviceBuffer& scales,
                          const reference::EpilogueOutputs& expected);
// One call's epilogue outputs (residual_out, the mirror with mode.mirror, then out and scales as
// the mode has them) against the reference, and-ed into `row`. mirror: null unless mode.mirror.
void compare_epilogue_outputs(Row& row, const EpilogueMode& mode, int hidden, Fp8Format format,
                              DeviceBuffer& residual_out, DeviceBuffer& out, DeviceBuffer& scales, DeviceBuffer* mirror,
                              const reference::EpilogueOutputs& expected);
void compare_fp8(Row& row, const std::vector<std::uint8_t>& q, const std::vector<float>& scales,
                 const std::vector<std::uint8_t>& q_expected, const std::vector<float>& scales_expected, int hidden,
                 Fp8Format format);

}  // namespace arfuse::tools
