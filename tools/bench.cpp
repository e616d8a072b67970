// arfuse-bench: latency and bandwidth of arfuse kernels against the bytes-moved floor, with
// exactness against the CPU reference, and JIT compile/cache timings.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "arfuse/base/error.hpp"
#include "arfuse/reference/model.hpp"
#include "arfuse/runtime/epilogue.hpp"
#include "arfuse/runtime/group.hpp"
#include "bench_timing.hpp"
#include "cli.hpp"

namespace arfuse::tools {
namespace {

using jit::DType;
using jit::Quant;
using reference::Bits16;

const char* kUsage = R"(usage: arfuse-bench MODE [options]

modes:
  epilogue   rmsnorm_quant alone (the kernel after an external all-reduce)
  fused      the Group's fused all-reduce + epilogue, W virtual ranks on GPU 0, against the
             unfused path (arfuse all-reduce + rmsnorm_quant + token_quant) in the same run
  compile    JIT cold compile, disk hit and memory hit (needs no GPU)

options:
  --shapes LIST   tokens x hidden, e.g. 2517x6144,12x6144 (default: 12x6144,128x8192,512x6144,
                  2517x6144,4097x6144,2048x8192)
  --quant LIST    output modes: none (T out), fp8 (default: none,fp8)
  --world N       ranks for fused (default 4)
  --stage N       force 1 or 2 for fused (default: the tuning table)
  --runs N        timed runs per row (default 7); --replays N graph replays per run (default 20)
  --json FILE     write the rows as JSON
  --help          this text

Each call is timed inside a CUDA graph of 16 calls; inputs rotate through buffers larger than
L2. Bytes: each input read once, each output written once, summed over ranks.
)";

struct Shape {
  int tokens, hidden;
};

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> shapes;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    std::string item = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    int t = 0, h = 0;
    char x = 0;
    if (std::sscanf(item.c_str(), "%d%c%d", &t, &x, &h) != 3 || x != 'x' || t <= 0 || h <= 0 || h % 8) {
      throw UsageError(fmt::format("bad shape '{}': expected TOKENSxHIDDEN with hidden a multiple of 8", item));
    }
    shapes.push_back({t, h});
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return shapes;
}

std::vector<Quant> parse_quants(const std::string& text) {
  std::vector<Quant> out;
  for (const std::string q : {"none", "fp8"}) {
    if (("," + text + ",").find("," + q + ",") != std::string::npos) out.push_back(jit::parse_quant(q));
  }
  if (out.empty()) throw UsageError("--quant takes none and/or fp8");
  return out;
}

// Enough copies of a tensor that one graph's calls do not all fit in the 60 MB L2.
int rotation(std::size_t bytes_per_call) { return int(std::clamp<std::size_t>((256u << 20) / std::max<std::size_t>(bytes_per_call, 1) + 1, 1, 16)); }

struct Row {
  std::string kind, shape, out;
  int world = 1;
  Timing t;
  double bytes = 0;
  bool exact = false;
  std::string resources;  // registers, local (spill) bytes, shared bytes, resident blocks/SM
};

std::string describe_resources(const LaunchableKernel& k) {
  const KernelResources r = k.kernel.resources();
  return fmt::format("{}r {}L {}S {}b/SM", r.registers, r.local_bytes, r.static_shared_bytes, k.max_blocks_per_multiprocessor);
}

void print_rows(const std::vector<Row>& rows, double ceiling) {
  std::printf("\ncopy ceiling: %.2f TB/s (16-byte copy kernel, 1 GiB, same run)\n\n", ceiling / 1e12);
  std::printf("| kernel | W | shape | out | median µs | min-max µs | MB moved | TB/s | %% ceiling | floor µs | exact | regs/spill/smem/occupancy |\n");
  std::printf("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|\n");
  for (const auto& r : rows) {
    const double tbps = r.bytes / (r.t.median_us * 1e-6) / 1e12;
    std::printf("| %s | %d | %s | %s | %.2f | %.2f-%.2f | %.2f | %.2f | %.1f | %.2f | %s | %s |\n", r.kind.c_str(), r.world, r.shape.c_str(),
                r.out.c_str(), r.t.median_us, r.t.min_us, r.t.max_us, r.bytes / 1e6, tbps, 100.0 * tbps * 1e12 / ceiling,
                r.bytes / ceiling * 1e6, r.exact ? "bit-exact" : "MISMATCH", r.resources.c_str());
  }
}

std::vector<Row> bench_epilogue(Context& ctx, const CommandLine& cl) {
  const int runs = int(cl.integer("runs", 7, 1, 1000)), replays = int(cl.integer("replays", 20, 1, 10000));
  std::vector<Row> rows;
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal;
  for (const Shape& s : parse_shapes(cl.value("shapes", "12x6144,128x8192,512x6144,2517x6144,4097x6144,2048x8192"))) {
    for (Quant q : parse_quants(cl.value("quant", "none,fp8"))) {
      const std::size_t n = std::size_t(s.tokens) * s.hidden;
      const std::size_t out_bytes = q == Quant::none ? n * 2 : n + std::size_t(s.tokens) * 4;
      const std::size_t call_bytes = n * 2 * 3 + out_bytes + std::size_t(s.hidden) * 2;
      const int k = rotation(call_bytes);
      Bits16 in(n), res(n), w(std::size_t(s.hidden));
      for (auto& v : in) v = reference::narrow(normal(rng), DType::bf16);
      for (auto& v : res) v = reference::narrow(normal(rng), DType::bf16);
      for (auto& v : w) v = reference::narrow(normal(rng) * 0.5f, DType::bf16);
      struct Set { DeviceBuffer in, res, res_out, out, scales; };
      std::vector<Set> sets;
      DeviceBuffer weight(ctx.device(), std::size_t(s.hidden) * 2);
      weight.upload(w);
      for (int i = 0; i < k; ++i) {
        sets.push_back(Set{DeviceBuffer(ctx.device(), n * 2), DeviceBuffer(ctx.device(), n * 2), DeviceBuffer(ctx.device(), n * 2),
                           DeviceBuffer(ctx.device(), n * 2), DeviceBuffer(ctx.device(), std::size_t(s.tokens) * 4)});
        sets.back().in.upload(in), sets.back().res.upload(res);
      }
      auto args_for = [&](int i) {
        RmsnormQuantArgs a;
        Set& set = sets[size_t(i % k)];
        a.input = set.in.get(), a.residual_in = set.res.get(), a.residual_out = set.res_out.get(), a.weight = weight.get();
        a.out = set.out.get(), a.scales = static_cast<float*>(set.scales.get()), a.tokens = s.tokens, a.hidden = s.hidden;
        a.quant = q;
        return a;
      };
      Stream stream(ctx.device());
      std::vector<Stream*> streams{&stream};
      Row row{"rmsnorm_quant", fmt::format("{}x{}", s.tokens, s.hidden), q == Quant::none ? "bf16" : "fp8", 1, {}, double(call_bytes), false, {}};
      row.t = time_graphs(ctx.device(), streams, [&](int, int c) { rmsnorm_quant(ctx, args_for(c), stream); }, replays, runs);
      stream.synchronize();
      reference::EpilogueConfig config{s.hidden, DType::bf16, q, jit::Norm::rms, 1e-6f, ctx.device().target()};
      const auto e = reference::epilogue(config, s.tokens, in, res, w);
      row.exact = q == Quant::none ? sets[0].out.download<std::uint16_t>(n) == e.out
                                   : sets[0].out.download<std::uint8_t>(n) == e.q && sets[0].scales.download<float>(size_t(s.tokens)) == e.scales;
      row.exact = row.exact && sets[0].res_out.download<std::uint16_t>(n) == e.residual_out;
      row.resources = describe_resources(ctx.kernel(ctx.spec(jit::Module::rmsnorm_quant, s.hidden, DType::bf16, q)));
      rows.push_back(row);
    }
  }
  return rows;
}

std::vector<Row> bench_fused(const CommandLine& cl) {
  const int world = int(cl.integer("world", 4, 2, 8));
  const int runs = int(cl.integer("runs", 7, 1, 1000)), replays = int(cl.integer("replays", 20, 1, 10000));
  const auto shapes = parse_shapes(cl.value("shapes", "12x6144,128x8192,512x6144,2517x6144,4097x6144,2048x8192"));
  int max_tokens = 0, max_hidden = 0;
  for (const auto& s : shapes) max_tokens = std::max(max_tokens, s.tokens), max_hidden = std::max(max_hidden, s.hidden);
  GroupOptions o;
  o.devices.assign(size_t(world), 0);
  o.max_tokens = max_tokens, o.max_hidden = max_hidden;
  Group group(o);
  if (cl.has("stage")) group.force_stage(int(cl.integer("stage", 1, 1, 2)));
  const Device& dev = group.rank(0).device();
  std::vector<Row> rows;
  std::mt19937 rng(777);
  std::normal_distribution<float> normal;
  for (const Shape& s : shapes) {
    for (Quant q : parse_quants(cl.value("quant", "none,fp8"))) {
      const std::size_t n = std::size_t(s.tokens) * s.hidden;
      const std::size_t out_bytes = q == Quant::none ? n * 2 : n + std::size_t(s.tokens) * 4;
      const std::size_t rank_bytes = n * 2 * 3 + out_bytes;  // input, residual in/out, out
      const int k = rotation(rank_bytes * world);
      std::vector<Bits16> inputs(static_cast<size_t>(world), Bits16(n));
      Bits16 res(n), w(std::size_t(s.hidden));
      for (auto& in : inputs) for (auto& v : in) v = reference::narrow(normal(rng), DType::bf16);
      for (auto& v : res) v = reference::narrow(normal(rng), DType::bf16);
      for (auto& v : w) v = reference::narrow(normal(rng) * 0.5f, DType::bf16);
      struct Set { DeviceBuffer res, res_out, out, scales, sum, y; };
      std::vector<std::vector<Set>> sets(static_cast<size_t>(world));
      std::vector<std::unique_ptr<DeviceBuffer>> weights;
      std::vector<std::unique_ptr<Stream>> owned;
      std::vector<Stream*> streams;
      for (int r = 0; r < world; ++r) {
        cuda::check(cuda::driver().cuMemcpyHtoD(reinterpret_cast<cuda::CUdeviceptr>(group.rank(r).input_buffer()), inputs[size_t(r)].data(), n * 2), "cuMemcpyHtoD");
        weights.push_back(std::make_unique<DeviceBuffer>(dev, std::size_t(s.hidden) * 2));
        weights.back()->upload(w);
        for (int i = 0; i < k; ++i) {
          sets[size_t(r)].push_back(Set{DeviceBuffer(dev, n * 2), DeviceBuffer(dev, n * 2), DeviceBuffer(dev, n * 2),
                                        DeviceBuffer(dev, std::size_t(s.tokens) * 4), DeviceBuffer(dev, n * 2), DeviceBuffer(dev, n * 2)});
          sets[size_t(r)].back().res.upload(res);
        }
        owned.push_back(std::make_unique<Stream>(dev));
        streams.push_back(owned.back().get());
      }
      // The copies into the staging buffers ran on the legacy stream (see DeviceBuffer::upload).
      cuda::check(cuda::driver().cuCtxSynchronize(), "cuCtxSynchronize");
      auto fused = [&](int r, int c) {
        Set& set = sets[size_t(r)][size_t(c % k)];
        AllreduceRmsnormArgs a;
        a.input = group.rank(r).input_buffer(), a.residual_in = set.res.get(), a.residual_out = set.res_out.get();
        a.weight = weights[size_t(r)]->get(), a.out = set.out.get(), a.scales = static_cast<float*>(set.scales.get());
        a.tokens = s.tokens, a.hidden = s.hidden, a.quant = q;
        group.rank(r).allreduce_rmsnorm(a, *streams[size_t(r)]);
      };
      // The unfused path: all-reduce, then residual + RMSNorm, then (fp8) per-token quant.
      auto unfused = [&](int r, int c) {
        Set& set = sets[size_t(r)][size_t(c % k)];
        AllreduceArgs ar;
        ar.input = group.rank(r).input_buffer(), ar.out = set.sum.get(), ar.tokens = s.tokens, ar.hidden = s.hidden;
        group.rank(r).allreduce(ar, *streams[size_t(r)]);
        RmsnormQuantArgs e;
        e.input = set.sum.get(), e.residual_in = set.res.get(), e.residual_out = set.res_out.get(), e.weight = weights[size_t(r)]->get();
        e.out = q == Quant::none ? set.out.get() : set.y.get(), e.tokens = s.tokens, e.hidden = s.hidden;
        rmsnorm_quant(group.rank(r).context(), e, *streams[size_t(r)]);
        if (q == Quant::none) return;
        TokenQuantArgs t;
        t.input = set.y.get(), t.out = set.out.get(), t.scales = static_cast<float*>(set.scales.get()), t.tokens = s.tokens, t.hidden = s.hidden;
        token_quant(group.rank(r).context(), t, *streams[size_t(r)]);
      };
      reference::EpilogueConfig config{s.hidden, DType::bf16, q, jit::Norm::rms, 1e-6f, dev.target()};
      const auto e = reference::epilogue(config, s.tokens, reference::fold(inputs, DType::bf16), res, w);
      for (int variant = 0; variant < 2; ++variant) {
        Row row{variant == 0 ? fmt::format("fused s{}", group.stage_for(s.tokens, s.hidden)) : "unfused", fmt::format("{}x{}", s.tokens, s.hidden),
                q == Quant::none ? "bf16" : "fp8", world, {}, double(rank_bytes * world), true, {}};
        row.t = time_graphs(dev, streams, variant == 0 ? std::function<void(int, int)>(fused) : std::function<void(int, int)>(unfused), replays, runs);
        for (auto* st : streams) st->synchronize();
        group.check();
        for (int r = 0; r < world; ++r) {
          Set& set = sets[size_t(r)][0];
          row.exact = row.exact && set.res_out.download<std::uint16_t>(n) == e.residual_out &&
                      (q == Quant::none ? set.out.download<std::uint16_t>(n) == e.out
                                        : set.out.download<std::uint8_t>(n) == e.q && set.scales.download<float>(size_t(s.tokens)) == e.scales);
        }
        if (variant == 0) {
          Context& c = group.rank(0).context();
          row.resources = describe_resources(c.kernel(c.spec(jit::Module::fused_ar, s.hidden, DType::bf16, q, jit::Norm::rms, world,
                                                               group.stage_for(s.tokens, s.hidden))));
        }
        rows.push_back(row);
      }
    }
  }
  return rows;
}

void bench_compile(const CommandLine&) {
  char dir[] = "/tmp/arfuse-bench-XXXXXX";
  if (!mkdtemp(dir)) throw Error("mkdtemp failed");
  const std::vector<std::string> specs{"rmsnorm_quant/h6144/bf16/fp8/rms/sm_90", "rmsnorm_quant/h2880/f16/none/gemma/sm_90",
                                       "rmsnorm_quant/h8192/bf16/fp8_mirror/rms/sm_90", "rmsnorm_quant/h4096/f16/fp8/gemma/sm_90",
                                       "rmsnorm_quant/h5120/bf16/none/rms/sm_90", "rmsnorm_quant/h7168/f16/fp8/rms/sm_90",
                                       "rmsnorm_quant/h2048/bf16/fp8_mirror/gemma/sm_90"};
  auto seconds_since = [](std::chrono::steady_clock::time_point t) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); };
  cache::CacheOptions o;
  o.dir = dir;
  jit::nvrtc_compiler();  // load NVRTC outside the timings
  std::vector<double> cold, disk, memory;
  {
    cache::KernelCache c(o);
    for (const auto& s : specs) {
      auto t = std::chrono::steady_clock::now();
      c.get(jit::KernelSpec::parse(s));
      cold.push_back(seconds_since(t));
    }
  }
  for (const auto& s : specs) {
    cache::KernelCache c(o);
    auto t = std::chrono::steady_clock::now();
    c.get(jit::KernelSpec::parse(s));
    disk.push_back(seconds_since(t));
    const auto spec = jit::KernelSpec::parse(s);
    t = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) c.get(spec);
    memory.push_back(seconds_since(t) / 1000);
  }
  // On a GPU machine: disk hit to a launchable kernel (module loaded) in a new Context, and the
  // Context's in-memory layer.
  std::vector<double> launchable, context_memory;
  if (Device::count() > 0) {
    for (const auto& s : specs) {
      ContextOptions co;
      co.cache = o;
      Context ctx(co);
      const auto spec = jit::KernelSpec::parse(s);
      auto t = std::chrono::steady_clock::now();
      ctx.kernel(spec);
      launchable.push_back(seconds_since(t));
      t = std::chrono::steady_clock::now();
      for (int i = 0; i < 10000; ++i) ctx.kernel(spec);
      context_memory.push_back(seconds_since(t) / 10000);
    }
  }
  auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  std::printf("| step | median µs | min µs | max µs |\n|---|---:|---:|---:|\n");
  for (auto [name, v] : {std::pair<const char*, std::vector<double>*>{"cold compile (NVRTC, sm_90)", &cold}, {"disk hit (new KernelCache, verified)", &disk},
                         {"KernelCache::get memory hit (renders + hashes)", &memory}, {"disk hit -> launchable kernel (new Context, module loaded)", &launchable},
                         {"Context::kernel memory hit", &context_memory}}) {
    if (v->empty()) continue;
    std::printf("| %s | %.3f | %.3f | %.3f |\n", name, med(*v) * 1e6, *std::min_element(v->begin(), v->end()) * 1e6, *std::max_element(v->begin(), v->end()) * 1e6);
  }
}

int bench_main(int argc, char** argv) {
  CommandLine cl(argc, argv, {}, {"shapes", "quant", "world", "stage", "runs", "replays", "json"});
  if (cl.positional().size() != 1) throw UsageError("expected one mode: epilogue, fused or compile");
  const std::string mode = cl.positional()[0];
  if (mode == "compile") {
    bench_compile(cl);
    return 0;
  }
  if (mode != "epilogue" && mode != "fused") throw UsageError(fmt::format("unknown mode '{}': use epilogue, fused or compile", mode));
  Context ctx;
  std::printf("device: %s (%s, %d SMs)\n", ctx.device().name().c_str(), ctx.device().target().name().c_str(), ctx.device().multiprocessors());
  const double ceiling = copy_bandwidth(ctx.device(), 5);
  const auto rows = mode == "epilogue" ? bench_epilogue(ctx, cl) : bench_fused(cl);
  print_rows(rows, ceiling);
  if (cl.has("json")) {
    nlohmann::json j = {{"mode", mode}, {"device", ctx.device().name()}, {"copy_ceiling_bytes_per_s", ceiling}, {"rows", nlohmann::json::array()}};
    for (const auto& r : rows) {
      j["rows"].push_back({{"kernel", r.kind}, {"world", r.world}, {"shape", r.shape}, {"out", r.out}, {"median_us", r.t.median_us},
                           {"min_us", r.t.min_us}, {"max_us", r.t.max_us}, {"bytes", r.bytes}, {"exact", r.exact}, {"resources", r.resources}});
    }
    std::ofstream(cl.value("json")) << j.dump(2) << "\n";
  }
  bool all_exact = true;
  for (const auto& r : rows) all_exact = all_exact && r.exact;
  return all_exact ? 0 : 1;
}

}  // namespace
}  // namespace arfuse::tools

int main(int argc, char** argv) {
  return arfuse::tools::run_tool("arfuse-bench", arfuse::tools::kUsage, arfuse::tools::bench_main, argc, argv);
}
