#include "bench_timing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "bench_kernels.hpp"
#include "helper_kernels.hpp"

namespace arfuse::tools {
namespace {

Timing summarize(std::vector<double> per_call_us) {
  std::sort(per_call_us.begin(), per_call_us.end());
  return Timing{per_call_us[per_call_us.size() / 2], per_call_us.front(), per_call_us.back()};
}

}  // namespace

Timing time_graphs(const Device& device, const std::vector<Stream*>& streams, const Recorder& record, int replays,
                   int runs) {
  return time_interleaved(device, streams, {record}, replays, runs)[0];
}

std::vector<Timing> time_interleaved(const Device& device, const std::vector<Stream*>& streams,
                                     const std::vector<Recorder>& variants, int replays, int runs) {
  // graphs[v][r]: variant v's 16 calls for rank r.
  std::vector<std::vector<std::unique_ptr<Graph>>> graphs(variants.size());
  for (size_t v = 0; v < variants.size(); ++v) {
    for (int r = 0; r < int(streams.size()); ++r) {
      graphs[v].push_back(std::make_unique<Graph>(*streams[size_t(r)], [&] {
        for (int c = 0; c < kCallsPerGraph; ++c) variants[v](r, c);
      }));
    }
  }
  Event start(device), stop(device);
  std::vector<std::unique_ptr<Event>> ends;
  for (size_t r = 0; r < streams.size(); ++r) ends.push_back(std::make_unique<Event>(device));
  auto launch_all = [&](size_t v) {
    for (int i = 0; i < replays; ++i) {
      for (size_t r = 0; r < streams.size(); ++r) graphs[v][r]->launch(*streams[r]);
    }
  };
  for (size_t v = 0; v < variants.size(); ++v) launch_all(v);  // warm-up
  for (auto* s : streams) s->synchronize();
  std::vector<std::vector<double>> samples(variants.size());
  for (int run = 0; run < runs; ++run) {
    for (size_t v = 0; v < variants.size(); ++v) {
      start.record(*streams[0]);
      for (size_t r = 1; r < streams.size(); ++r) streams[r]->wait(start);
      launch_all(v);
      for (size_t r = 1; r < streams.size(); ++r) {
        ends[r]->record(*streams[r]);
        streams[0]->wait(*ends[r]);
      }
      stop.record(*streams[0]);
      stop.synchronize();
      samples[v].push_back(double(stop.elapsed_ms_since(start)) * 1000.0 / double(replays * kCallsPerGraph));
    }
  }
  std::vector<Timing> out;
  for (auto& s : samples) out.push_back(summarize(s));
  return out;
}

namespace {

std::string describe(const testing::CopyVariant& v) {
  return fmt::format("kernel 16 B x{}{} {} {}t", v.unroll, v.streaming ? " streaming" : "",
                     v.persistent ? "persistent" : "one-shot", v.threads);
}

}  // namespace

std::vector<CopyMeasurement> copy_bandwidths(const Device& device, int runs) {
  const std::size_t bytes = std::size_t(1) << 30;
  DeviceBuffer a(device, bytes), b(device, bytes);
  a.fill(1);
  Stream stream(device);
  std::vector<Stream*> streams{&stream};
  const void* in = a.get();
  void* out = b.get();
  long long n = (long long)(bytes / 16);
  std::vector<CopyMeasurement> results;
  // On the H200 persistent grids reached 3.91-3.99 TB/s, one-shot grids 4.10-4.27 (best: 128
  // threads x 2 vectors; PyTorch's elementwise copy 4.28); the spread around the best is kept.
  for (const auto& v : testing::kCopyVariants) {
    Kernel kernel = testing::load_helper_kernel(device, "copy", testing::copy_kernel_source(v), v.threads);
    void* params[] = {&in, &out, &n};
    const long long span = (long long)v.threads * v.unroll;
    const unsigned grid =
        v.persistent ? unsigned(device.multiprocessors() * std::max(1, kernel.max_active_blocks_per_multiprocessor()))
                     : unsigned((n + span - 1) / span);
    const Timing t = time_graphs(
        device, streams, [&](int, int) { kernel.launch(grid, stream, params); }, 2, runs);
    results.push_back({describe(v), double(2 * bytes) / (t.median_us * 1e-6)});
  }
  const Timing driver = time_graphs(
      device, streams, [&](int, int) { stream.copy(out, in, bytes); }, 2, runs);
  results.push_back({"driver device-to-device copy", double(2 * bytes) / (driver.median_us * 1e-6)});
  return results;
}

namespace {

// Per call one launch over buffer pair c % rotation (`from_bytes` read from, `to_bytes`
// written), in the same graphs as every row: the floor rows' timing.
using RotatingLaunch = std::function<void(const void* from, void* to, const Stream& stream)>;
Timing time_over_rotating_buffers(const Device& device, std::size_t from_bytes, std::size_t to_bytes, int rotation,
                                  int replays, int runs, const RotatingLaunch& launch) {
  std::vector<DeviceBuffer> from, to;
  for (int i = 0; i < rotation; ++i) {
    from.emplace_back(device, from_bytes), to.emplace_back(device, to_bytes);
    from.back().fill(1);
  }
  Stream stream(device);
  std::vector<Stream*> streams{&stream};
  return time_graphs(
      device, streams,
      [&](int, int c) { launch(from[size_t(c % rotation)].get(), to[size_t(c % rotation)].get(), stream); }, replays,
      runs);
}

const testing::CopyVariant kFloorCopy = testing::kCopyVariants[3];  // the best of copy_bandwidths on the H200

}  // namespace

FloorKernels load_floor_kernels(const Device& device) {
  return {testing::load_helper_kernel(device, "copy", testing::copy_kernel_source(kFloorCopy), kFloorCopy.threads),
          testing::load_helper_kernel(device, "stream", testing::kStreamSource, testing::kStreamThreads)};
}

Timing time_copy(const Device& device, const FloorKernels& kernels, std::size_t bytes, int rotation, int replays,
                 int runs) {
  long long n = (long long)(bytes / 16);
  const long long span = (long long)kFloorCopy.threads * kFloorCopy.unroll;
  const unsigned grid = unsigned((n + span - 1) / span);
  return time_over_rotating_buffers(device, bytes, bytes, rotation, replays, runs,
                                    [&](const void* in, void* out, const Stream& stream) {
                                      void* params[] = {&in, &out, &n};
                                      kernels.copy.launch(grid, stream, params);
                                    });
}

Timing time_reads_and_writes(const Device& device, const FloorKernels& kernels, std::size_t read_bytes,
                             std::size_t write_bytes, int rotation, int replays, int runs) {
  long long n_read = (long long)(read_bytes / 16), n_write = (long long)(write_bytes / 16);
  const unsigned grid = testing::stream_blocks(std::max(n_read, n_write));
  return time_over_rotating_buffers(device, std::max<std::size_t>(read_bytes, 16),
                                    std::max<std::size_t>(write_bytes, 16), rotation, replays, runs,
                                    [&](const void* in, void* out, const Stream& stream) {
                                      void* params[] = {&in, &out, &n_read, &n_write};
                                      kernels.stream.launch(grid, stream, params);
                                    });
}

CopyMeasurement best_copy(const std::vector<CopyMeasurement>& measured) {
  return *std::max_element(measured.begin(), measured.end(),
                           [](const auto& x, const auto& y) { return x.bytes_per_s < y.bytes_per_s; });
}

double empty_launch_us(const Device& device, int runs) {
  Kernel empty = testing::load_helper_kernel(device, "empty", R"(extern "C" __global__ void empty() {})");
  Stream stream(device);
  std::vector<Stream*> streams{&stream};
  const unsigned grid = unsigned(device.multiprocessors());
  return time_graphs(
             device, streams, [&](int, int) { empty.launch(grid, stream, nullptr); }, 20, runs)
      .median_us;
}

}  // namespace arfuse::tools
