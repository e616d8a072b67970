#include "rank_worker.hpp"

#include <fmt/format.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "arfuse/error.hpp"
#include "arfuse/group.hpp"

namespace arfuse::test {

const std::vector<ProcessCase>& process_cases() {
  static const std::vector<ProcessCase> cases = {
      {12, 6144, DType::bf16, Quant::fp8, true, Norm::rms, 1, false},
      {513, 6144, DType::bf16, Quant::fp8, false, Norm::gemma, 2, false},
      {7, 2880, DType::f16, Quant::none, false, Norm::rms, 1, false},
      {300, 5120, DType::f16, Quant::fp8, true, Norm::gemma, 2, false},
      {513, 6176, DType::bf16, Quant::none, false, Norm::rms, 1, true},
      {33, 8192, DType::f16, Quant::none, false, Norm::rms, 2, true},
  };
  return cases;
}

namespace {

reference::Bits16 random_bits(std::mt19937& rng, std::size_t n, DType dtype, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  reference::Bits16 out(n);
  for (auto& v : out) v = reference::narrow(normal(rng), dtype);
  return out;
}

template <typename T>
void append(std::string& blob, const std::vector<T>& v) {
  blob.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

}  // namespace

CaseInputs case_inputs(unsigned seed, int case_index, int rank) {
  const auto& c = process_cases()[size_t(case_index)];
  const std::size_t n = std::size_t(c.tokens) * std::size_t(c.hidden);
  std::mt19937 mine(seed * 7919u + unsigned(case_index) * 131u + unsigned(rank));
  std::mt19937 shared(seed * 7919u + unsigned(case_index) * 131u + 977u);
  CaseInputs in;
  in.input = random_bits(mine, n, c.dtype, 1.0f);
  in.residual = random_bits(shared, n, c.dtype, 1.0f);
  in.weight = random_bits(shared, std::size_t(c.hidden), c.dtype, 0.5f);
  return in;
}

std::string expected_blob(unsigned seed, int case_index, int world) {
  const auto& c = process_cases()[size_t(case_index)];
  std::vector<reference::Bits16> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(case_inputs(seed, case_index, r).input);
  const auto sum = reference::fold(inputs, c.dtype);
  std::string blob;
  if (c.plain) {
    append(blob, sum);
    return blob;
  }
  const auto shared = case_inputs(seed, case_index, 0);
  reference::EpilogueConfig config{c.hidden, c.dtype, mode_of(c), 1e-6f, Target::parse("sm_90")};
  const auto e = reference::epilogue(config, c.tokens, sum, shared.residual, shared.weight);
  append(blob, e.residual_out);
  if (c.quant == Quant::none)
    append(blob, e.out);
  else
    append(blob, e.q), append(blob, e.scales);
  if (c.mirror) append(blob, e.mirror);
  return blob;
}

std::string blob_path(const std::string& dir, int case_index, int rank) {
  return fmt::format("{}/case{}-rank{}.bin", dir, case_index, rank);
}

std::string timeout_path(const std::string& dir, int rank) { return fmt::format("{}/timeout-rank{}.txt", dir, rank); }
std::string info_path(const std::string& dir, int rank) { return fmt::format("{}/info-rank{}.txt", dir, rank); }

CaseBuffers::CaseBuffers(const Device& d)
    : input(d, bytes()),
      residual(d, bytes()),
      residual_out(d, bytes()),
      weight(d, kProcessMaxHidden * 2),
      out(d, bytes()),
      scales(d, kProcessMaxTokens * 4),
      mirror(d, bytes()) {}

void CaseBuffers::prepare(unsigned seed, int case_index, int rank) {
  const auto in = case_inputs(seed, case_index, rank);
  input.upload(in.input), residual.upload(in.residual), weight.upload(in.weight);
  for (auto* d : {&residual_out, &out, &scales, &mirror}) d->fill(0xff);
}

std::string download_blob(const ProcessCase& c, const CaseBuffers& b) {
  const std::size_t n = std::size_t(c.tokens) * std::size_t(c.hidden);
  std::string blob;
  if (c.plain) {
    append(blob, b.out.download<std::uint16_t>(n));
    return blob;
  }
  append(blob, b.residual_out.download<std::uint16_t>(n));
  if (c.quant == Quant::none)
    append(blob, b.out.download<std::uint16_t>(n));
  else
    append(blob, b.out.download<std::uint8_t>(n)), append(blob, b.scales.download<float>(std::size_t(c.tokens)));
  if (c.mirror) append(blob, b.mirror.download<std::uint16_t>(n));
  return blob;
}

void launch_case(Rank& me, const ProcessCase& c, const CaseBuffers& b, const Stream& stream) {
  if (c.plain) {
    AllreduceArgs a;
    a.input = b.input.get(), a.out = b.out.get(), a.tokens = c.tokens, a.hidden = c.hidden, a.dtype = c.dtype;
    me.allreduce(a, stream);
    return;
  }
  AllreduceRmsnormArgs a;
  a.input = b.input.get(), a.residual_in = b.residual.get(), a.residual_out = b.residual_out.get();
  a.weight = b.weight.get(), a.out = b.out.get(), a.scales = static_cast<float*>(b.scales.get());
  a.mirror = b.mirror.get(), a.tokens = c.tokens, a.hidden = c.hidden, a.dtype = c.dtype;
  a.mode = mode_of(c);
  me.allreduce_rmsnorm(a, stream);
}

int run_rank(std::shared_ptr<Bootstrap> bootstrap, const RankRun& run) {
  const auto started = std::chrono::steady_clock::now();
  try {
    GroupOptions o;
    o.devices = {0};
    o.bootstrap = bootstrap;
    o.max_tokens = kProcessMaxTokens, o.max_hidden = kProcessMaxHidden, o.timeout = run.timeout;
    Group group(o);
    Rank& me = group.local_rank();
    std::ofstream info(info_path(run.out_dir, run.rank));
    info << "custom " << group.custom_path_available() << " nccl " << group.has_nccl() << "\n";
    Stream stream(me.device());
    // Every case's inputs are uploaded and its outputs poisoned before the first launch: while a
    // peer's kernel spins at a barrier it may hold every SM, so an upload or memset issued in
    // between (the driver runs memsets as kernels) could wait for it and deadlock ranks that
    // share one GPU in one process. Between launches, a rank only waits and checks.
    const auto& cases = process_cases();
    std::vector<std::unique_ptr<CaseBuffers>> buffers;
    for (int ci = 0; ci < int(cases.size()); ++ci) {
      const auto& c = cases[size_t(ci)];
      me.prepare(c.hidden, c.dtype, mode_of(c));
      buffers.push_back(std::make_unique<CaseBuffers>(me.device()));
      buffers.back()->prepare(run.seed, ci, run.rank);
    }
    o.bootstrap->barrier();  // no rank launches before every rank has loaded its kernels
    try {
      for (int ci = 0; ci < int(cases.size()); ++ci) {
        const auto& c = cases[size_t(ci)];
        group.force_stage(c.stage);
        launch_case(me, c, *buffers[size_t(ci)], stream);
        if (ci == run.die_at) ::raise(SIGKILL);
        stream.synchronize();
        group.check();
        info << to_string(*me.last_path()) << "\n";
      }
    } catch (const PeerTimeout& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
      std::ofstream(timeout_path(run.out_dir, run.rank)) << e.rank() << " " << ms.count() << "\n";
      std::fprintf(stderr, "rank %d: %s\n", run.rank, e.what());
      return 4;
    }
    for (int ci = 0; ci < int(cases.size()); ++ci) {
      std::ofstream blob(blob_path(run.out_dir, ci, run.rank), std::ios::binary);
      blob << download_blob(cases[size_t(ci)], *buffers[size_t(ci)]);
    }
    group.close();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", run.rank, e.what());
    return 3;
  }
}

int rank_worker_main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: arfuse-tests --rank-worker SOCKET RANK WORLD SEED OUT_DIR DIE_AT TIMEOUT_MS\n");
    return 2;
  }
  RankRun run;
  const std::string socket = argv[0];
  run.rank = std::atoi(argv[1]), run.world = std::atoi(argv[2]);
  run.seed = unsigned(std::strtoul(argv[3], nullptr, 10));
  run.out_dir = argv[4], run.die_at = std::atoi(argv[5]);
  run.timeout = std::chrono::milliseconds(std::atoi(argv[6]));
  try {
    std::shared_ptr<Bootstrap> b =
        local_socket_bootstrap(socket, run.rank, run.world, std::chrono::milliseconds(60000));
    return run_rank(b, run);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", run.rank, e.what());
    return 3;
  }
}

}  // namespace arfuse::test
