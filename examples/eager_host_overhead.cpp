// The host time of an eager call: how long Rank::allreduce_rmsnorm (and Rank::allreduce) takes
// to return, argument checks, plan, kernel lookup and launch included. W virtual ranks on one
// GPU; a batch issues --calls rounds of one call per rank, each rank on its own stream, and is
// timed on the host only (the GPU drains between batches, so no launch waits for a full queue).
// Uses only the public API, so the same file times any arfuse release.
//
//   arfuse-example-eager-overhead [--world 2] [--tokens 1] [--hidden 6144] [--calls 200] [--batches 15]
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "arfuse/error.hpp"
#include "arfuse/group.hpp"

namespace {

struct Options {
  int world = 2, tokens = 1, hidden = 6144, calls = 200, batches = 15;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help") {
      std::printf(
          "usage: arfuse-example-eager-overhead [--world W] [--tokens T] [--hidden H] [--calls N] [--batches B]\n");
      std::exit(0);
    }
    if (a != "--world" && a != "--tokens" && a != "--hidden" && a != "--calls" && a != "--batches") {
      throw arfuse::Error("unknown argument " + a + " (see --help)");
    }
    if (i + 1 >= argc) throw arfuse::Error(a + " needs a value (see --help)");
    const std::string text = argv[++i];
    int v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v <= 0) {
      throw arfuse::Error(a + " takes a positive whole number, not '" + text + "' (see --help)");
    }
    if (a == "--world")
      o.world = v;
    else if (a == "--tokens")
      o.tokens = v;
    else if (a == "--hidden")
      o.hidden = v;
    else if (a == "--calls")
      o.calls = v;
    else
      o.batches = v;
  }
  return o;
}

// Median and minimum microseconds per call over the batches.
template <typename Issue>
std::pair<double, double> time_batches(const Options& o, std::vector<std::unique_ptr<arfuse::Stream>>& streams,
                                       Issue issue) {
  std::vector<double> per_call;
  for (int b = 0; b < o.batches + 1; ++b) {  // the first batch warms up
    const auto start = std::chrono::steady_clock::now();
    for (int c = 0; c < o.calls; ++c) {
      for (int r = 0; r < o.world; ++r) issue(r, *streams[size_t(r)]);
    }
    const auto end = std::chrono::steady_clock::now();
    for (auto& s : streams) s->synchronize();
    if (b > 0) per_call.push_back(std::chrono::duration<double, std::micro>(end - start).count() / (o.calls * o.world));
  }
  std::sort(per_call.begin(), per_call.end());
  return {per_call[per_call.size() / 2], per_call.front()};
}

}  // namespace

int main(int argc, char** argv) try {
  using namespace arfuse;
  const Options o = parse(argc, argv);
  GroupOptions go;
  go.devices.assign(size_t(o.world), 0);
  go.max_tokens = o.tokens, go.max_hidden = o.hidden;
  Group group(go);
  const std::size_t n = std::size_t(o.tokens) * std::size_t(o.hidden);
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  auto buffer = [&](std::size_t bytes) {
    buffers.push_back(std::make_unique<DeviceBuffer>(group.rank(0).device(), bytes));
    buffers.back()->fill(0);
    return buffers.back()->get();
  };
  std::vector<AllreduceRmsnormArgs> fused(size_t(o.world));
  std::vector<AllreduceArgs> plain(size_t(o.world));
  for (int r = 0; r < o.world; ++r) {
    Rank& rank = group.rank(r);
    rank.prepare(o.hidden, DType::bf16, EpilogueMode{Quant::fp8});
    streams.push_back(std::make_unique<Stream>(rank.device()));
    AllreduceRmsnormArgs& a = fused[size_t(r)];
    a.input = rank.input_buffer(), a.residual_in = buffer(n * 2), a.residual_out = buffer(n * 2);
    a.weight = buffer(std::size_t(o.hidden) * 2), a.out = buffer(n),
    a.scales = static_cast<float*>(buffer(std::size_t(o.tokens) * 4));
    a.tokens = o.tokens, a.hidden = o.hidden, a.dtype = DType::bf16, a.mode.quant = Quant::fp8;
    AllreduceArgs& p = plain[size_t(r)];
    p.input = rank.input_buffer(), p.out = buffer(n * 2), p.tokens = o.tokens, p.hidden = o.hidden;
  }
  const auto f =
      time_batches(o, streams, [&](int r, Stream& s) { group.rank(r).allreduce_rmsnorm(fused[size_t(r)], s); });
  const auto p = time_batches(o, streams, [&](int r, Stream& s) { group.rank(r).allreduce(plain[size_t(r)], s); });
  group.check();
  std::printf("eager host time per call, W=%d virtual ranks, %d x %d bf16, %d calls x %d batches:\n", o.world, o.tokens,
              o.hidden, o.calls * o.world, o.batches);
  std::printf("  allreduce_rmsnorm (fp8)  median %.3f us  min %.3f us\n", f.first, f.second);
  std::printf("  allreduce                median %.3f us  min %.3f us\n", p.first, p.second);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "arfuse-example-eager-overhead: %s\n", e.what());
  return 1;
}
