// arfuse-bench: latency and bandwidth of arfuse kernels against the bytes-moved floor, with
// exactness against the CPU reference, and JIT compile/cache timings.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "arfuse/epilogue.hpp"
#include "arfuse/error.hpp"

#include "jit/compiler.hpp"
#include "reference/model.hpp"

#include "bench_compare.hpp"
#include "bench_modes.hpp"
#include "bench_report.hpp"
#include "cli.hpp"
#include "helper_kernels.hpp"
#include "hip_over_cuda.hpp"

namespace arfuse::tools {

using reference::Bits16;

namespace {

const char* kUsage = R"(usage: arfuse-bench MODE [options]

modes:
  epilogue   rmsnorm_quant alone (the kernel after an external all-reduce)
  fused      the Group's fused all-reduce + epilogue, W virtual ranks on GPU 0, against the
             unfused path (arfuse all-reduce + rmsnorm_quant + token_quant, or group_quant
             for the block-scaled and static modes), interleaved
  allreduce  the plain all-reduce, one-stage against two-stage, interleaved
  compile    JIT cold compile, disk hit and memory hit (needs no GPU)
  report     re-print a saved --json FILE as a table (and --svg); needs no GPU
  compare    LABEL=FILE[,FILE...] LABEL=FILE[,FILE...] ...: the rows of saved --json runs of
             several builds or template folders (ARFUSE_TEMPLATE_DIR) side by side, each
             label's medians run by run and the change of their mean against the first
             label's; exit status 1 when a checked row was not bit-exact; needs no GPU

options:
  --shapes LIST   tokens x hidden, e.g. 2517x6144,12x6144 (default: 12x6144,128x8192,512x6144,
                  2517x6144,4097x6144,2048x8192)
  --quant LIST    output modes: none (T out), fp8 (per token), fp8_group (group 128, fp32
                  scales), mxfp4, fp8_static (scale 0.0123), nvfp4 (global scale 336, swizzled scales),
                  each also as NAME+mirror, e.g. fp8+mirror (also y in T, checked and counted; the
                  unfused path's y is the mirror) (default: none,fp8)
  --world N       ranks for fused/allreduce (default 4)
  --stage N       force 1 or 2 for fused (default: the tuning table)
  --pdl           (epilogue) also time rmsnorm_quant's calls back to back, and a producer
                  kernel that writes the input followed by rmsnorm_quant, each launched plainly
                  and with programmatic dependent launch (NVIDIA sm_90+), interleaved: what
                  PDL saves per call
  --row-stride N  (epilogue) the input and residual rows N elements apart (views of wider buffers,
                  as engines pass them; N at least every shape's hidden, its rows 16-byte
                  aligned); the bytes counted are still the rows' own
  --fixed-inputs  (epilogue) every call reads and writes the same buffers (the copy rows too),
                  the regime kernel peers are often timed in: what fits stays in the L2
  --copy-rows     (epilogue) after each row, the bench's best copy kernel moving the same bytes
                  (half read, half written) in the same graphs, and the same kernel reading and
                  writing what the row reads and writes: the floor at that size
  --call-check-cost  (fused) also time the fused kernel with the cross-rank call check off,
                  interleaved with the checked one, to show what the check costs
  --runs N        interleaved timed runs per row (default 7); --replays N graph replays per run
                  (default 20)
  --json FILE     write the rows as JSON
  --svg FILE      write a chart: latency against tokens for each line, and the floor
  --peers FILE    add rows measured elsewhere (tools/bench/torch_bench.py --json FILE) to the table
  --tune FILE     (fused) sweep the one-/two-stage crossover for --world LIST (default 2,4,8),
                  --hidden N (6144), --tokens LIST; write the tuning JSON the Group loads
  --backend B     the device backend: cuda, hip (a real libamdhip64), or hip-over-cuda (the HIP
                  backend's code on an NVIDIA GPU through the tests' adapter; same kernels; in a
                  build with the tests)
  --help          this text

Each call is timed inside a CUDA graph of 16 calls; the median and the min-max over runs are
reported; inputs rotate through buffers larger than L2. Bytes: each input read once, each
output written once, summed over ranks; floor = bytes / copy ceiling (measured in the run);
the launch floor is an empty kernel's time per call in the same graphs.
An option the mode does not read is a usage error (exit 2), as is an output file whose folder is
missing; both are checked before anything runs. Exit status 1 when any arfuse row is not bit-exact
against the CPU reference.
)";

}  // namespace

std::vector<Row> bench_epilogue(Context& ctx, const CommandLine& cl) {
  const int runs = int(cl.integer("runs", 7, 1, 1000)), replays = int(cl.integer("replays", 20, 1, 10000));
  const int row_stride = cl.has("row-stride") ? int(cl.integer("row-stride", 0, 8, 1 << 24)) : 0;
  const std::vector<Shape> shapes = parse_shapes(cl.value("shapes", kDefaultShapes));
  std::vector<Row> rows;
  std::mt19937 rng(12345);
  // The helper kernels are compiled once for the run, not once per row.
  std::optional<FloorKernels> floor_kernels;
  if (cl.has("copy-rows")) floor_kernels = load_floor_kernels(ctx.device());
  std::optional<Kernel> producer;
  if (cl.has("pdl")) producer = testing::load_producer(ctx.device());
  for (const Shape& s : shapes) {
    for (const EpilogueMode& q : parse_modes(cl.value("quant", "none,fp8"))) {
      const std::size_t n = std::size_t(s.tokens) * s.hidden;
      const int stride = row_stride != 0 ? row_stride : s.hidden;
      const std::size_t strided = std::size_t(s.tokens) * std::size_t(stride);
      // Read: input, residual, weight; written: residual_out, out (+ scales).
      const std::size_t read_bytes = n * 2 * 2 + std::size_t(s.hidden) * 2,
                        write_bytes = n * 2 + output_bytes(q, std::size_t(s.tokens), std::size_t(s.hidden));
      const std::size_t call_bytes = read_bytes + write_bytes;
      // --fixed-inputs: one buffer set for every call (the arfuse row and its copy rows alike).
      const int k = cl.has("fixed-inputs") ? 1 : rotation(call_bytes);
      const Bits16 in = random_bits(rng, n), res = random_bits(rng, n),
                   w = random_bits(rng, std::size_t(s.hidden), 0.5f);
      struct Set {
        DeviceBuffer in, res, res_out, out, scales, mirror;
      };
      const bool mirror = q.mirror;
      std::vector<Set> sets;
      DeviceBuffer weight(ctx.device(), std::size_t(s.hidden) * 2), quant_scale(ctx.device(), 16);
      weight.upload(w);
      quant_scale.upload(std::vector<float>{bench_quant_scale(q)});
      for (int i = 0; i < k; ++i) {
        sets.push_back(Set{DeviceBuffer(ctx.device(), strided * 2), DeviceBuffer(ctx.device(), strided * 2),
                           DeviceBuffer(ctx.device(), n * 2), DeviceBuffer(ctx.device(), n * 2),
                           DeviceBuffer(ctx.device(), scale_buffer_bytes(std::size_t(s.tokens), std::size_t(s.hidden))),
                           DeviceBuffer(ctx.device(), mirror ? n * 2 : 16)});
        for (int r = 0; r < s.tokens; ++r) {
          const std::size_t row_bytes = std::size_t(s.hidden) * 2, at = std::size_t(r) * std::size_t(stride) * 2;
          sets.back().in.upload(&in[std::size_t(r) * s.hidden], row_bytes, at);
          sets.back().res.upload(&res[std::size_t(r) * s.hidden], row_bytes, at);
        }
      }
      auto args_for = [&](int i) {
        RmsnormQuantArgs a;
        Set& set = sets[size_t(i % k)];
        a.input = set.in.get(), a.residual_in = set.res.get(), a.residual_out = set.res_out.get(),
        a.weight = weight.get();
        a.out = set.out.get(), a.scales = set.scales.get(), a.tokens = s.tokens, a.hidden = s.hidden;
        a.mode = q, a.mirror = mirror ? set.mirror.get() : nullptr;
        a.input_stride = a.residual_in_stride = stride;
        set_quant_scale(a, q, quant_scale.get());
        return a;
      };
      Stream stream(ctx.device());
      std::vector<Stream*> streams{&stream};
      Row row{row_stride != 0 ? fmt::format("rmsnorm_quant, row stride {}", row_stride) : "rmsnorm_quant",
              1,
              s,
              out_name(q),
              {},
              double(call_bytes)};
      row.t = time_graphs(
          ctx.device(), streams, [&](int, int c) { rmsnorm_quant(ctx, args_for(c), stream); }, replays, runs);
      stream.synchronize();
      reference::EpilogueConfig config{s.hidden, DType::bf16, q, 1e-6f, ctx.device().target(), bench_quant_scale(q)};
      const auto e = reference::epilogue(config, s.tokens, in, res, w);
      // Set 0's outputs against the reference.
      auto check_outputs = [&](Row& checked) {
        checked.exact = true;
        compare_epilogue_outputs(checked, q, s.hidden, config.target.fp8_format(), sets[0].res_out, sets[0].out,
                                 sets[0].scales, mirror ? &sets[0].mirror : nullptr, e);
      };
      auto poison_outputs = [&] {
        for (auto* b : {&sets[0].res_out, &sets[0].out, &sets[0].scales, &sets[0].mirror}) b->fill(0xff);
      };
      // Exactness of one more call, on poisoned outputs.
      poison_outputs();
      rmsnorm_quant(ctx, args_for(0), stream);
      stream.synchronize();
      check_outputs(row);
      row.resources =
          describe_resources(load_kernel(ctx, spec_for(ctx, jit::Module::rmsnorm_quant, s.hidden, DType::bf16, q)));
      rows.push_back(row);
      if (floor_kernels) {
        auto vectors = [](std::size_t bytes) { return (bytes + 15) / 16 * 16; };  // what the kernels move
        const std::size_t half = vectors(call_bytes / 2), reads = vectors(read_bytes), writes = vectors(write_bytes);
        Row copy{"copy, same bytes", 1, s, out_name(q), time_copy(ctx.device(), *floor_kernels, half, k, replays, runs),
                 double(2 * half)};
        Row split{"stream, same reads and writes",
                  1,
                  s,
                  out_name(q),
                  time_reads_and_writes(ctx.device(), *floor_kernels, reads, writes, k, replays, runs),
                  double(reads + writes)};
        for (Row* r : {&copy, &split}) r->measured_exactness = false, rows.push_back(*r);
      }
      if (!producer) continue;
      // Times a variant launched plainly and with programmatic dependency, interleaved; a row for
      // each, its exactness from one more call after `poison` poisons what that call must write.
      auto plain_and_pdl = [&](const std::string& kind, double bytes, auto variant, auto poison) {
        const auto times = time_interleaved(ctx.device(), streams, {variant(false), variant(true)}, replays, runs);
        for (int pdl = 0; pdl < 2; ++pdl) {
          Row timed{pdl ? kind + ", PDL" : kind, 1, s, out_name(q), times[size_t(pdl)], bytes};
          poison();
          variant(pdl == 1)(0, 0);
          stream.synchronize();
          check_outputs(timed);
          rows.push_back(timed);
        }
      };
      // Back-to-back calls (as an engine that launches every kernel with PDL would run them). Every
      // call still waits for the previous one to end before its first load; what PDL can hide is
      // the launch and the block scheduling between calls.
      plain_and_pdl(
          "rmsnorm_quant, back to back", double(call_bytes),
          [&](bool pdl) {
            return [&, pdl](int, int c) {
              RmsnormQuantArgs a = args_for(c);
              a.pdl = pdl;
              rmsnorm_quant(ctx, a, stream);
            };
          },
          poison_outputs);
      // Each call: the producer writes the input, then rmsnorm_quant reads it. The inputs start
      // poisoned, so the first call on each set reads only what its producer wrote.
      DeviceBuffer source(ctx.device(), n * 2);
      source.upload(in);
      for (auto& set : sets) set.in.fill(0xff);
      plain_and_pdl(
          "producer + rmsnorm_quant", double(call_bytes + n * 2 * 2),
          [&](bool pdl) {
            return [&, pdl](int, int c) {
              RmsnormQuantArgs a = args_for(c);
              a.pdl = pdl;
              testing::launch_producer(*producer, source.get(), const_cast<void*>(a.input), n * 2, stream);
              rmsnorm_quant(ctx, a, stream);
            };
          },
          [&] {
            sets[0].in.fill(0xff);
            poison_outputs();
          });
    }
  }
  return rows;
}

namespace {

// The compile mode's own cache folder (under $TMPDIR, else /tmp), removed with its entries when
// the mode ends.
class ScratchCacheFolder {
 public:
  ScratchCacheFolder() {
    const char* tmp = std::getenv("TMPDIR");
    path_ = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/arfuse-bench-XXXXXX";
    if (mkdtemp(path_.data()) == nullptr)
      throw Error(fmt::format("cannot create a folder for the compile timings: {}", path_));
  }
  ~ScratchCacheFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

void bench_compile(const CommandLine&) {
  const ScratchCacheFolder dir;
  const std::vector<std::string> specs{
      "rmsnorm_quant/h6144/bf16/fp8/rms/sm_90",         "rmsnorm_quant/h2880/f16/none/gemma/sm_90",
      "rmsnorm_quant/h8192/bf16/fp8/mirror/rms/sm_90",  "rmsnorm_quant/h4096/f16/fp8/gemma/sm_90",
      "rmsnorm_quant/h5120/bf16/none/rms/sm_90",        "rmsnorm_quant/h7168/f16/fp8/rms/sm_90",
      "rmsnorm_quant/h2048/bf16/fp8/mirror/gemma/sm_90"};
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  CacheOptions o;
  o.dir = dir.path();
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
  // With a GPU: disk hit to a launchable kernel (module loaded) in a new Context, and the
  // Context's in-memory layer.
  std::vector<double> launchable, context_memory;
  if (Device::count() > 0) {
    for (const auto& s : specs) {
      ContextOptions co;
      co.cache = o;
      Context ctx(co);
      const auto spec = jit::KernelSpec::parse(s);
      auto t = std::chrono::steady_clock::now();
      load_kernel(ctx, spec);
      launchable.push_back(seconds_since(t));
      t = std::chrono::steady_clock::now();
      for (int i = 0; i < 10000; ++i) load_kernel(ctx, spec);
      context_memory.push_back(seconds_since(t) / 10000);
    }
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("| step | median µs | min µs | max µs |\n|---|---:|---:|---:|\n");
  for (auto [name, v] : {std::pair<const char*, std::vector<double>*>{"cold compile (NVRTC, sm_90)", &cold},
                         {"disk hit (new KernelCache, verified)", &disk},
                         {"KernelCache::get memory hit (renders + hashes)", &memory},
                         {"disk hit -> launchable kernel (new Context, module loaded)", &launchable},
                         {"Context::kernel memory hit", &context_memory}}) {
    if (v->empty()) continue;
    std::printf("| %s | %.3f | %.3f | %.3f |\n", name, med(*v) * 1e6, *std::min_element(v->begin(), v->end()) * 1e6,
                *std::max_element(v->begin(), v->end()) * 1e6);
  }
}

namespace {

// `peers`: the rows of the --peers files (read_peers_and_check_outputs).
void emit(Report report, const std::vector<Row>& peers, const CommandLine& cl) {
  report.rows.insert(report.rows.end(), peers.begin(), peers.end());
  print_markdown(report);
  if (cl.has("json")) {
    std::ofstream out(cl.value("json"));
    if (!(out << to_json(report).dump(2) << "\n")) throw Error(fmt::format("cannot write {}", cl.value("json")));
  }
  if (cl.has("svg")) write_svg(report, cl.value("svg"));
}

// How this run uses its buffers (Report::buffers; torch_bench.py's "buffers" says the same).
std::string buffers_of(const CommandLine& cl) { return cl.has("fixed-inputs") ? "fixed inputs" : "rotating"; }

// Before a run: the files it will write are checked and the --peers files read (their rows, for
// emit), so a missing folder or an unreadable peer file is a usage error at once, not the loss of
// a run's rows at its end.
std::vector<Row> read_peers_and_check_outputs(const CommandLine& cl) {
  for (const char* option : {"json", "svg", "tune"}) {
    if (cl.has(option)) require_writable_file(cl.value(option), option);
  }
  std::vector<Row> peers;
  const std::string buffers = buffers_of(cl);
  for (const auto& file : cl.values("peers")) {
    try {
      const nlohmann::json json = read_json(file, "--peers " + file);
      const std::string theirs = json.is_object() ? json.value("buffers", std::string("rotating")) : "rotating";
      if (theirs != buffers) {
        auto regime = [](const std::string& b) { return b == "rotating" ? std::string("rotating buffers") : b; };
        throw Error(
            fmt::format("--peers {} was timed with {} and this run with {}: the rows would not compare "
                        "(--fixed-inputs in both tools, or in neither)",
                        file, regime(theirs), regime(buffers)));
      }
      for (auto& row : peer_rows_from_json(json, file)) peers.push_back(row);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
  return peers;
}

// The options each timing mode reads (--tune, compile, report and compare have their own lists):
// any other is refused, since the mode would ignore it.
const std::map<std::string, std::set<std::string>> kModeOptions = {
    {"epilogue",
     {"shapes", "quant", "runs", "replays", "json", "svg", "peers", "backend", "pdl", "copy-rows", "row-stride",
      "fixed-inputs"}},
    {"fused",
     {"shapes", "quant", "world", "stage", "runs", "replays", "json", "svg", "peers", "backend", "call-check-cost"}},
    {"allreduce", {"shapes", "world", "runs", "replays", "json", "svg", "peers", "backend"}},
};

bool through_adapter = false;

// --backend: the device backend for this run (before any device is opened).
void select_backend(const std::string& backend) {
  if (backend.empty()) return;
  if (backend == "hip-over-cuda") {
    install_hip_over_cuda();
    through_adapter = true;
  } else if (backend == "cuda" || backend == "hip") {
    setenv("ARFUSE_DEVICE_BACKEND", backend.c_str(), 1);
  } else {
    throw UsageError(fmt::format("--backend {} does not exist: use cuda, hip or hip-over-cuda", backend));
  }
}

std::string backend_description() {
  return std::string("the ") + Device::runtime() + " backend" + (through_adapter ? " (HIP over the CUDA driver)" : "");
}

// Every option of the timing modes, checked before the device is opened: a bad row is a usage
// error at once, not the end of a long run after the rows before it were measured.
void check_timing_options(const CommandLine& cl) {
  const auto shapes = parse_shapes(cl.value("shapes", kDefaultShapes));
  const auto quants = parse_modes(cl.value("quant", "none,fp8"));
  cl.integer("runs", 7, 1, 1000), cl.integer("replays", 20, 1, 10000), cl.integer("world", 4, 2, 8);
  if (cl.has("stage")) cl.integer("stage", 1, 1, 2);
  const int row_stride = cl.has("row-stride") ? int(cl.integer("row-stride", 0, 8, 1 << 24)) : 0;
  if (row_stride != 0 && cl.has("pdl")) {
    throw UsageError("--row-stride and --pdl do not go together: the PDL rows' producer writes contiguous rows");
  }
  for (const Shape& s : shapes) {
    if (row_stride != 0 && (row_stride < s.hidden || row_stride % 8 != 0)) {
      throw UsageError(fmt::format("--row-stride {} is narrower than the rows of shape {}x{}, or not a multiple of 8",
                                   row_stride, s.tokens, s.hidden));
    }
    if (s.hidden > kMaxHidden) {
      throw UsageError(fmt::format("shape {}x{}: hidden is at most {}", s.tokens, s.hidden, kMaxHidden));
    }
    for (const EpilogueMode& q : quants) {
      try {
        q.validate(s.hidden);
      } catch (const Error& e) {
        throw UsageError(fmt::format("shape {}x{} with --quant {}: {}", s.tokens, s.hidden, out_name(q), e.what()));
      }
    }
  }
}

int bench_main(int argc, char** argv) {
  CommandLine cl(argc, argv, {"call-check-cost", "copy-rows", "pdl", "fixed-inputs"},
                 {"shapes", "quant", "world", "stage", "runs", "replays", "json", "svg", "peers", "tune", "hidden",
                  "tokens", "backend", "row-stride"});
  select_backend(cl.value("backend", ""));
  if (cl.positional().empty()) {
    throw UsageError("expected one mode: epilogue, fused, allreduce, compile, report FILE or compare LABEL=FILE...");
  }
  const std::vector<std::string>& args = cl.positional();
  const std::string mode = args[0];
  if (mode != "epilogue" && mode != "fused" && mode != "allreduce" && mode != "compile" && mode != "report" &&
      mode != "compare") {
    throw UsageError(
        fmt::format("unknown mode '{}': use epilogue, fused, allreduce, compile, report or compare", mode));
  }
  if (mode == "compare") {
    cl.allow_only({}, "the compare mode");
    if (args.size() < 3) throw UsageError("compare takes two or more LABEL=FILE[,FILE...]");
    std::vector<Variant> variants;
    for (std::size_t i = 1; i < args.size(); ++i) {
      variants.push_back(load_variant(args[i]));
      for (std::size_t j = 0; j + 1 < variants.size(); ++j) {
        if (variants[j].label == variants.back().label)
          throw UsageError(fmt::format("compare: the label '{}' is given twice", variants.back().label));
      }
    }
    return print_comparison(variants) ? 0 : 1;
  }
  if (mode == "report") {
    cl.allow_only({"json", "svg", "peers"}, "the report mode");
    if (args.size() != 2) throw UsageError("report takes the JSON file a run wrote with --json");
    const std::vector<Row> peers = read_peers_and_check_outputs(cl);
    emit(read_report(args[1]), peers, cl);
    return 0;
  }
  if (args.size() != 1)
    throw UsageError(fmt::format("{} takes no argument besides its options, not '{}'", mode, args[1]));
  if (mode == "compile") {
    cl.allow_only({"backend"}, "the compile mode");
    bench_compile(cl);
    return 0;
  }
  if (cl.has("tune")) {
    if (mode != "fused") throw UsageError("--tune goes with the fused mode");
    cl.allow_only({"tune", "world", "hidden", "tokens", "runs", "replays", "backend"}, "fused --tune");
    read_peers_and_check_outputs(cl);  // --tune FILE
    bench_tune(cl);
    return 0;
  }
  cl.allow_only(kModeOptions.at(mode), "the " + mode + " mode");
  check_timing_options(cl);
  const std::vector<Row> peers = read_peers_and_check_outputs(cl);
  Context ctx;
  std::printf("device: %s (%s, %d SMs) through %s\n", ctx.device().name().c_str(), ctx.device().target().name().c_str(),
              ctx.device().multiprocessors(), backend_description().c_str());
  Report report;
  report.mode = mode, report.device = ctx.device().name();
  report.buffers = buffers_of(cl);
  const auto copies = copy_bandwidths(ctx.device(), 5);
  const CopyMeasurement best = best_copy(copies);
  report.ceiling = best.bytes_per_s;
  report.ceiling_source = best.how + "; of";
  for (const auto& c : copies) report.ceiling_source += fmt::format(" {} {:.2f},", c.how, c.bytes_per_s / 1e12);
  report.ceiling_source.pop_back();
  report.launch_floor_us = empty_launch_us(ctx.device(), 5);
  report.rows = mode == "epilogue" ? bench_epilogue(ctx, cl) : mode == "fused" ? bench_fused(cl) : bench_allreduce(cl);
  emit(report, peers, cl);
  bool all_exact = true;
  for (const auto& r : report.rows) all_exact = all_exact && (!r.measured_exactness || r.exact);
  return all_exact ? 0 : 1;
}

}  // namespace
}  // namespace arfuse::tools

int main(int argc, char** argv) {
  return arfuse::tools::run_tool("arfuse-bench", arfuse::tools::kUsage, arfuse::tools::bench_main, argc, argv);
}
