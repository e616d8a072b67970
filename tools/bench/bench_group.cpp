// arfuse-bench modes that drive a Group of W virtual ranks on GPU 0: fused, allreduce, tune.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "arfuse/epilogue.hpp"
#include "arfuse/error.hpp"
#include "arfuse/group.hpp"

#include "bench_modes.hpp"

namespace arfuse::tools {
namespace {

using reference::Bits16;

std::unique_ptr<Group> make_group(int world, const std::vector<Shape>& shapes) {
  int max_tokens = 0, max_hidden = 0;
  for (const auto& s : shapes) max_tokens = std::max(max_tokens, s.tokens), max_hidden = std::max(max_hidden, s.hidden);
  GroupOptions o;
  o.devices.assign(size_t(world), 0);
  o.max_tokens = max_tokens, o.max_hidden = max_hidden;
  return std::make_unique<Group>(o);
}

// Every rank's tensors for one shape: inputs staged, `k` rotating sets of the others.
struct Workload {
  Workload(Group& group, Shape shape, EpilogueMode mode, std::mt19937& rng) : g(group), s(shape), q(mode) {
    const int world = g.world();
    const Device& dev = g.rank(0).device();
    n = std::size_t(s.tokens) * std::size_t(s.hidden);
    const std::size_t out_bytes = output_bytes(q, std::size_t(s.tokens), std::size_t(s.hidden));
    rank_bytes = n * 2 * 3 + out_bytes;  // input, residual in/out, out (+ scales, mirror)
    k = rotation(rank_bytes * std::size_t(world));
    for (int r = 0; r < world; ++r) inputs.push_back(random_bits(rng, n));
    residual = random_bits(rng, n), weight = random_bits(rng, std::size_t(s.hidden), 0.5f);
    sets.resize(size_t(world));
    for (int r = 0; r < world; ++r) {
      quant_scales.push_back(std::make_unique<DeviceBuffer>(dev, 16));
      quant_scales.back()->upload(std::vector<float>{bench_quant_scale(q)});
      g.rank(r).device().copy_to_device(g.rank(r).input_buffer(), inputs[size_t(r)].data(), n * 2);
      weights.push_back(std::make_unique<DeviceBuffer>(dev, std::size_t(s.hidden) * 2));
      weights.back()->upload(weight);
      for (int i = 0; i < k; ++i) {
        sets[size_t(r)].push_back(
            Set{DeviceBuffer(dev, n * 2), DeviceBuffer(dev, n * 2), DeviceBuffer(dev, n * 2),
                DeviceBuffer(dev, scale_buffer_bytes(std::size_t(s.tokens), std::size_t(s.hidden))),
                DeviceBuffer(dev, n * 2), DeviceBuffer(dev, n * 2)});
        sets[size_t(r)].back().res.upload(residual);
      }
      streams_owned.push_back(std::make_unique<Stream>(dev));
      streams.push_back(streams_owned.back().get());
    }
  }

  struct Set {
    DeviceBuffer res, res_out, out, scales, sum, y;
  };
  Set& set(int r, int c) { return sets[size_t(r)][size_t(c % k)]; }

  void fused(int r, int c) {
    Set& x = set(r, c);
    AllreduceRmsnormArgs a;
    a.input = g.rank(r).input_buffer(), a.residual_in = x.res.get(), a.residual_out = x.res_out.get();
    a.weight = weights[size_t(r)]->get(), a.out = x.out.get(), a.scales = x.scales.get();
    a.tokens = s.tokens, a.hidden = s.hidden, a.mode = q;
    a.mirror = q.mirror ? x.y.get() : nullptr;
    set_quant_scale(a, q, quant_scales[size_t(r)]->get());
    g.rank(r).allreduce_rmsnorm(a, *streams[size_t(r)]);
  }
  void allreduce(int r, void* out) {
    AllreduceArgs ar;
    ar.input = g.rank(r).input_buffer(), ar.out = out, ar.tokens = s.tokens, ar.hidden = s.hidden;
    g.rank(r).allreduce(ar, *streams[size_t(r)]);
  }
  // The unfused path: all-reduce, then residual + RMSNorm, then the quantiser of the mode
  // (token_quant for per-token FP8, group_quant for the others): three kernels, as an
  // engine without the fusion runs them. With the mirror, y is the mirror.
  void unfused(int r, int c) {
    Set& x = set(r, c);
    allreduce(r, x.sum.get());
    RmsnormQuantArgs e;
    e.input = x.sum.get(), e.residual_in = x.res.get(), e.residual_out = x.res_out.get(),
    e.weight = weights[size_t(r)]->get();
    e.out = q.quant == Quant::none ? x.out.get() : x.y.get(), e.tokens = s.tokens, e.hidden = s.hidden;
    rmsnorm_quant(g.rank(r).context(), e, *streams[size_t(r)]);
    EpilogueMode quantiser = q;
    quantiser.mirror = false;
    if (quantiser.quant == Quant::fp8) {
      TokenQuantArgs t;
      t.input = x.y.get(), t.out = x.out.get(), t.scales = static_cast<float*>(x.scales.get()), t.tokens = s.tokens,
      t.hidden = s.hidden;
      token_quant(g.rank(r).context(), t, *streams[size_t(r)]);
    } else if (quantiser.quant != Quant::none) {
      GroupQuantArgs t;
      t.input = x.y.get(), t.out = x.out.get(), t.tokens = s.tokens, t.hidden = s.hidden;
      t.scales = writes_scales(quantiser.quant) ? x.scales.get() : nullptr;
      t.mode = quantiser;  // bench_mode's scales: fp32 row-major, or tiles
      set_quant_scale(t, quantiser, quant_scales[size_t(r)]->get());
      group_quant(g.rank(r).context(), t, *streams[size_t(r)]);
    }
  }

  void finish() {
    for (auto* st : streams) st->synchronize();
    g.check();
  }

  void poison_outputs() {
    for (int r = 0; r < g.world(); ++r) {
      Set& x = sets[size_t(r)][0];
      for (auto* b : {&x.res_out, &x.out, &x.scales, &x.y}) b->fill(0xff);
    }
  }

  // The rows' outputs (set 0 of every rank) against the reference epilogue.
  void compare_epilogue(Row& row) {
    reference::EpilogueConfig config{
        s.hidden, DType::bf16, q, 1e-6f, g.rank(0).device().target(), bench_quant_scale(q)};
    if (!expected)
      expected = std::make_unique<reference::EpilogueOutputs>(
          reference::epilogue(config, s.tokens, reference::fold(inputs, DType::bf16), residual, weight));
    row.exact = true;
    for (int r = 0; r < g.world(); ++r) {
      Set& x = sets[size_t(r)][0];
      compare_epilogue_outputs(row, q, s.hidden, config.target.fp8_format(), x.res_out, x.out, x.scales,
                               q.mirror ? &x.y : nullptr, *expected);
    }
  }

  Group& g;
  Shape s;
  EpilogueMode q;
  std::size_t n = 0, rank_bytes = 0;
  int k = 1;
  std::vector<Bits16> inputs;
  Bits16 residual, weight;
  std::vector<std::vector<Set>> sets;
  std::vector<std::unique_ptr<DeviceBuffer>> weights;
  std::vector<std::unique_ptr<DeviceBuffer>> quant_scales;  // each rank's fp32 bench_quant_scale
  std::vector<std::unique_ptr<Stream>> streams_owned;
  std::vector<Stream*> streams;
  std::unique_ptr<reference::EpilogueOutputs> expected;
};

int runs_of(const CommandLine& cl) { return int(cl.integer("runs", 7, 1, 1000)); }
int replays_of(const CommandLine& cl) { return int(cl.integer("replays", 20, 1, 10000)); }

std::string fused_resources(Group& g, const Shape& s, const EpilogueMode& q, int stage) {
  Context& c = g.rank(0).context();
  return describe_resources(
      load_kernel(c, spec_for(c, jit::Module::fused_ar, s.hidden, DType::bf16, q, g.world(), stage)));
}

}  // namespace

std::vector<Row> bench_fused(const CommandLine& cl) {
  const int world = int(cl.integer("world", 4, 2, 8));
  const auto shapes = parse_shapes(cl.value("shapes", kDefaultShapes));
  auto group = make_group(world, shapes);
  if (cl.has("stage")) group->force_stage(int(cl.integer("stage", 1, 1, 2)));
  std::vector<Row> rows;
  std::mt19937 rng(777);
  for (const Shape& s : shapes) {
    for (const EpilogueMode& q : parse_modes(cl.value("quant", "none,fp8"))) {
      Workload w(*group, s, q, rng);
      const int stage = group->stage_for(s.tokens, s.hidden);
      std::vector<std::function<void(int, int)>> variants{[&](int r, int c) { w.fused(r, c); },
                                                          [&](int r, int c) { w.unfused(r, c); }};
      if (cl.has("call-check-cost")) {
        variants.push_back([&](int r, int c) {
          group->set_check_calls(false);
          w.fused(r, c);
          group->set_check_calls(true);
        });
      }
      const auto times = time_interleaved(group->rank(0).device(), w.streams, variants, replays_of(cl), runs_of(cl));
      w.finish();
      // Exactness of one more call of each path, on poisoned outputs.
      Row unfused{"unfused", world, s, out_name(q), times[1], double(w.rank_bytes * size_t(world))};
      w.poison_outputs();
      for (int r = 0; r < world; ++r) w.unfused(r, 0);
      w.finish();
      w.compare_epilogue(unfused);
      Row fused{fmt::format("fused s{}", stage), world, s, out_name(q), times[0], double(w.rank_bytes * size_t(world))};
      w.poison_outputs();
      for (int r = 0; r < world; ++r) w.fused(r, 0);
      w.finish();
      w.compare_epilogue(fused);
      fused.resources = fused_resources(*group, s, q, stage);
      rows.push_back(fused), rows.push_back(unfused);
      if (cl.has("call-check-cost")) {
        Row unchecked{fmt::format("fused s{} no call check", stage), world, s, out_name(q), times[2],
                      double(w.rank_bytes * size_t(world))};
        w.poison_outputs();
        group->set_check_calls(false);
        for (int r = 0; r < world; ++r) w.fused(r, 0);
        group->set_check_calls(true);
        w.finish();
        w.compare_epilogue(unchecked);
        unchecked.resources = fused.resources;
        rows.push_back(unchecked);
      }
    }
  }
  return rows;
}

std::vector<Row> bench_allreduce(const CommandLine& cl) {
  const int world = int(cl.integer("world", 4, 2, 8));
  const auto shapes = parse_shapes(cl.value("shapes", kDefaultShapes));
  auto group = make_group(world, shapes);
  std::vector<Row> rows;
  std::mt19937 rng(778);
  for (const Shape& s : shapes) {
    Workload w(*group, s, bench_mode(Quant::none), rng);
    auto variant = [&](int stage) {
      return [&, stage](int r, int c) {
        group->force_stage(stage);
        w.allreduce(r, w.set(r, c).sum.get());
      };
    };
    const auto times =
        time_interleaved(group->rank(0).device(), w.streams, {variant(1), variant(2)}, replays_of(cl), runs_of(cl));
    group->force_stage(std::nullopt);
    const Bits16 expected = reference::fold(w.inputs, DType::bf16);
    for (int stage : {1, 2}) {
      group->force_stage(stage);
      for (int r = 0; r < world; ++r) w.sets[size_t(r)][0].sum.fill(0xff);
      for (int r = 0; r < world; ++r) w.allreduce(r, w.sets[size_t(r)][0].sum.get());
      w.finish();
      group->force_stage(std::nullopt);
      // Bytes: each rank reads its input and writes the sum once.
      Row row{fmt::format("allreduce s{}", stage), world, s, "bf16", times[size_t(stage - 1)],
              double(w.n * 4 * size_t(world))};
      row.exact = true;
      for (int r = 0; r < world; ++r) compare_t(row, w.sets[size_t(r)][0].sum.download<std::uint16_t>(w.n), expected);
      Context& c = group->rank(0).context();
      row.resources = describe_resources(
          load_kernel(c, spec_for(c, jit::Module::allreduce, s.hidden, DType::bf16, {}, world, stage)));
      rows.push_back(row);
    }
  }
  return rows;
}

void bench_tune(const CommandLine& cl) {
  const auto worlds = parse_ints(cl.value("world", "2,4,8"), "world sizes", 2, 8);
  const auto hiddens = parse_ints(cl.value("hidden", "6144"), "hidden size", 8, kMaxHidden);
  if (hiddens.size() != 1)
    throw UsageError(fmt::format("--hidden takes one hidden size, not '{}'", cl.value("hidden")));
  try {
    check_hidden(hiddens[0]);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--hidden: {}", e.what()));
  }
  const int hidden = hiddens[0];
  const auto tokens =
      parse_ints(cl.value("tokens", "1,4,16,64,128,256,512,1024,2048,4096"), "token counts", 1, int(kMaxBenchTokens));
  const int margin_pct = 2;  // stage 2 must win by more than this to count
  std::vector<Shape> shapes;
  for (int t : tokens) shapes.push_back({t, hidden});
  nlohmann::json targets = nlohmann::json::object();
  std::string target_key, device_name;
  std::printf("| W | tokens | MB message | stage 1 µs | stage 2 µs | winner |\n|---:|---:|---:|---:|---:|---|\n");
  for (int world : worlds) {
    auto group = make_group(world, shapes);
    device_name = group->rank(0).device().name();
    target_key = group->rank(0).device().target().name() + (group->has_virtual_ranks() ? ":virtual" : "");
    std::mt19937 rng(779);
    std::vector<std::pair<std::uint64_t, bool>> wins;  // message bytes, stage 2 faster
    for (const Shape& s : shapes) {
      Workload w(*group, s, bench_mode(Quant::none), rng);
      auto variant = [&](int stage) {
        return [&, stage](int r, int c) {
          group->force_stage(stage);
          w.fused(r, c);
        };
      };
      const auto t =
          time_interleaved(group->rank(0).device(), w.streams, {variant(1), variant(2)}, replays_of(cl), runs_of(cl));
      w.finish();
      group->force_stage(std::nullopt);
      const std::uint64_t bytes = std::uint64_t(s.tokens) * std::uint64_t(s.hidden) * 2;
      const bool two = t[1].median_us * (100 + margin_pct) / 100.0 < t[0].median_us;
      wins.push_back({bytes, two});
      std::printf("| %d | %d | %.3f | %.2f | %.2f | %s |\n", world, s.tokens, bytes / 1e6, t[0].median_us,
                  t[1].median_us, two ? "two-stage" : "one-stage");
      std::fflush(stdout);
    }
    // The threshold: the smallest size from which stage 2 wins at every larger size measured.
    std::uint64_t threshold = std::uint64_t(1) << 40;  // never: one stage throughout
    for (auto it = wins.rbegin(); it != wins.rend() && it->second; ++it) threshold = it->first;
    targets[target_key][std::to_string(world)] = {{"two_stage_min_bytes", threshold}};
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
  nlohmann::json table = {
      {"version", 1},
      {"measured",
       fmt::format(
           "arfuse-bench tune on {} ({}), {}: fused bf16 out, hidden {}, tokens {}, medians of {} interleaved runs; "
           "stage 2 counted only when > {}% faster",
           device_name, target_key, date, hidden, cl.value("tokens", "1..4096"), runs_of(cl), margin_pct)},
      {"targets", targets}};
  const std::string path = cl.value("tune");
  std::ofstream out(path);
  if (!(out << table.dump(2) << "\n")) throw Error(fmt::format("cannot write the tuning table to {}", path));
  jit::TuningTable::parse(table.dump(), path);  // what we wrote must load
  std::printf("\nwrote %s (load it with ARFUSE_TUNING=%s, or embed it in arfuse/jit/tuning.cpp)\n", path.c_str(),
              path.c_str());
}

}  // namespace arfuse::tools
