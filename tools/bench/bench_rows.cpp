#include "bench_rows.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "arfuse/epilogue.hpp"
#include "arfuse/error.hpp"

#include "reference/numerics.hpp"

namespace arfuse::tools {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  size_t pos = 0;
  while (true) {
    const size_t end = text.find(',', pos);
    items.push_back(text.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (end == std::string::npos) return items;
    pos = end + 1;
  }
}

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> shapes;
  for (const std::string& item : split_commas(text)) {
    const std::size_t x = item.find('x');
    const auto tokens = parse_whole(item.substr(0, x), 1, kMaxBenchTokens);
    const auto hidden = parse_whole(x == std::string::npos ? "" : item.substr(x + 1), 8, 1 << 30);
    if (!tokens || !hidden) {
      throw UsageError(
          fmt::format("bad shape '{}': expected TOKENSxHIDDEN, tokens from 1 to {}", item, kMaxBenchTokens));
    }
    try {
      check_hidden(int(*hidden));
    } catch (const Error& e) {
      throw UsageError(fmt::format("bad shape '{}': {}", item, e.what()));
    }
    const Shape shape{int(*tokens), int(*hidden)};
    const long long elements = (long long)shape.tokens * shape.hidden;
    if (elements > kMaxBenchElements) {
      throw UsageError(fmt::format("shape '{}' has {} elements; the bench takes at most {} (e.g. 32768x8192)", item,
                                   elements, kMaxBenchElements));
    }
    shapes.push_back(shape);
  }
  return shapes;
}

std::vector<EpilogueMode> parse_modes(const std::string& text) {
  std::vector<EpilogueMode> out;
  for (const std::string& item : split_commas(text)) {
    const std::size_t plus = item.find('+');
    const std::string name = item.substr(0, plus), extra = plus == std::string::npos ? "" : item.substr(plus + 1);
    try {
      if (plus != std::string::npos && extra != "mirror")
        throw Error(fmt::format("'{}' follows '+' in '{}'; only 'mirror' may (e.g. fp8+mirror)", extra, item));
      out.push_back(bench_mode(parse_quant(name), plus != std::string::npos));
      out.back().validate(kBenchGroupSize * 16);
    } catch (const Error& e) {
      throw UsageError(fmt::format("--quant: {} (comma-separated)", e.what()));
    }
  }
  return out;
}

std::string out_name(const EpilogueMode& mode) {
  std::string name = mode.quant == Quant::none      ? std::string("bf16")
                     : takes_group_size(mode.quant) ? fmt::format("{}{}", to_string(mode.quant), mode.group_size)
                                                    : std::string(to_string(mode.quant));
  return mode.mirror ? name + "+mirror" : name;
}

std::size_t output_bytes(const EpilogueMode& mode, std::size_t tokens, std::size_t hidden) {
  // out in its own units (T is 2 bytes, the quantised ones 1), its scales with any padding (written
  // too), and the mirror in T.
  const std::size_t out = tokens * std::size_t(mode.out_row(int(hidden))) * (mode.quant == Quant::none ? 2 : 1);
  const std::size_t scales = std::size_t(mode.scale_shape(int(hidden)).bytes((long long)tokens));
  return out + scales + (mode.mirror ? tokens * hidden * 2 : 0);
}

std::size_t scale_buffer_bytes(std::size_t tokens, std::size_t hidden) {
  std::size_t most = 0;
  for (Quant q : all_quants())
    most = std::max(most, std::size_t(bench_mode(q).scale_shape(int(hidden)).bytes((long long)tokens)));
  return most;
}

void compare_bytes(Row& row, const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& expected) {
  const bool equal = got == expected;
  row.exact = row.exact && equal;
  if (!equal) row.max_error = INFINITY;
}

std::vector<int> parse_ints(const std::string& text, const char* what, int min, int max) {
  std::vector<int> out;
  for (const std::string& item : split_commas(text)) {
    const auto v = parse_whole(item, min, max);
    if (!v) {
      throw UsageError(
          fmt::format("bad {} '{}': expected numbers from {} to {}, comma-separated", what, item, min, max));
    }
    out.push_back(int(*v));
  }
  return out;
}

int rotation(std::size_t bytes_per_call) {
  return int(std::clamp<std::size_t>((256u << 20) / std::max<std::size_t>(bytes_per_call, 1) + 1, 1, 16));
}

std::string describe_resources(const LaunchableKernel& k) {
  const KernelResources r = k.kernel.resources();
  return fmt::format("{}r {}L {}S {}b/SM", r.registers, r.local_bytes, r.static_shared_bytes,
                     k.max_blocks_per_multiprocessor);
}

reference::Bits16 random_bits(std::mt19937& rng, std::size_t n, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  reference::Bits16 out(n);
  for (auto& v : out) v = reference::narrow(normal(rng), DType::bf16);
  return out;
}

void compare_t(Row& row, const reference::Bits16& got, const reference::Bits16& expected) {
  row.exact = row.exact && got == expected;
  for (std::size_t i = 0; i < std::min(got.size(), expected.size()); ++i) {
    const double d =
        std::fabs(double(reference::bf16_to_float(got[i])) - double(reference::bf16_to_float(expected[i])));
    row.max_error = std::max(row.max_error, std::isnan(d) ? INFINITY : d);
  }
}

void compare_block_scaled(Row& row, DeviceBuffer& out, DeviceBuffer& scales, const reference::EpilogueOutputs& e) {
  compare_bytes(row, out.download<std::uint8_t>(e.q.size()), e.q);
  if (!e.scale_bytes.empty()) {
    compare_bytes(row, scales.download<std::uint8_t>(e.scale_bytes.size()), e.scale_bytes);
    return;
  }
  if (e.scales.empty()) return;  // fp8_static writes none
  std::vector<std::uint8_t> expected(e.scales.size() * 4);
  std::memcpy(expected.data(), e.scales.data(), expected.size());
  compare_bytes(row, scales.download<std::uint8_t>(expected.size()), expected);
}

void compare_epilogue_outputs(Row& row, const EpilogueMode& mode, int hidden, Fp8Format format,
                              DeviceBuffer& residual_out, DeviceBuffer& out, DeviceBuffer& scales, DeviceBuffer* mirror,
                              const reference::EpilogueOutputs& e) {
  const std::size_t n = e.residual_out.size(), tokens = n / std::size_t(hidden);
  compare_t(row, residual_out.download<std::uint16_t>(n), e.residual_out);
  if (mode.mirror) {
    if (mirror == nullptr) throw Error("compare_epilogue_outputs: the mirror needs the mirror buffer");
    compare_t(row, mirror->download<std::uint16_t>(n), e.mirror);
  }
  const Quant quant = mode.quant;
  if (quant == Quant::none) {
    compare_t(row, out.download<std::uint16_t>(n), e.out);
  } else if (quant == Quant::fp8) {
    compare_fp8(row, out.download<std::uint8_t>(n), scales.download<float>(tokens), e.q, e.scales, hidden, format);
  } else {
    compare_block_scaled(row, out, scales, e);
  }
}

void compare_fp8(Row& row, const std::vector<std::uint8_t>& q, const std::vector<float>& scales,
                 const std::vector<std::uint8_t>& q_expected, const std::vector<float>& scales_expected, int hidden,
                 Fp8Format format) {
  row.exact = row.exact && q == q_expected && scales == scales_expected;
  for (std::size_t i = 0; i < std::min(q.size(), q_expected.size()); ++i) {
    const std::size_t t = i / std::size_t(hidden);
    const double got = double(reference::fp8_to_float(q[i], format)) * scales[t];
    const double want = double(reference::fp8_to_float(q_expected[i], format)) * scales_expected[t];
    const double d = std::fabs(got - want);
    row.max_error = std::max(row.max_error, std::isnan(d) ? INFINITY : d);
  }
}

}  // namespace arfuse::tools
