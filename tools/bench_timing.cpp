#include "bench_timing.hpp"

#include <algorithm>
#include <memory>

#include "arfuse/jit/compiler.hpp"

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

// A helper kernel of the bench itself (not an arfuse module), compiled with NVRTC; the Kernel
// keeps its module loaded.
Kernel compile_bench_kernel(const Device& device, const std::string& name, const std::string& text) {
  jit::Source src;
  src.spec = jit::KernelSpec::parse("token_quant/h8/bf16/" + device.target().name());
  src.program_name = name + ".cu";
  src.text = text;
  src.name_expression = name;
  src.options = {"--gpu-architecture=" + device.target().name()};
  auto code = jit::nvrtc_compiler()->compile(src);
  return LoadedModule::load(device, code.payload)->kernel(code.lowered_name, 512);
}

}  // namespace

double copy_bandwidth(const Device& device, int runs) {
  Kernel kernel = compile_bench_kernel(device, "copy16", R"(
struct alignas(16) V { unsigned int w[4]; };
extern "C" __global__ void copy16(const V* __restrict__ in, V* __restrict__ out, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) out[i] = in[i];
})");
  const std::size_t bytes = std::size_t(1) << 30;
  DeviceBuffer a(device, bytes), b(device, bytes);
  a.fill(1);
  Stream stream(device);
  const void* in = a.get();
  void* out = b.get();
  long long n = (long long)(bytes / 16);
  void* params[] = {&in, &out, &n};
  const unsigned grid = unsigned(device.multiprocessors() * std::max(1, kernel.max_active_blocks_per_multiprocessor()));
  std::vector<Stream*> streams{&stream};
  Timing t = time_graphs(
      device, streams, [&](int, int) { kernel.launch(grid, stream, params); }, 2, runs);
  return double(2 * bytes) / (t.median_us * 1e-6);
}

double empty_launch_us(const Device& device, int runs) {
  Kernel empty = compile_bench_kernel(device, "empty", R"(extern "C" __global__ void empty() {})");
  Stream stream(device);
  std::vector<Stream*> streams{&stream};
  const unsigned grid = unsigned(device.multiprocessors());
  return time_graphs(
             device, streams, [&](int, int) { empty.launch(grid, stream, nullptr); }, 20, runs)
      .median_us;
}

}  // namespace arfuse::tools
