// [gpu] Groups with one rank per process (or per thread), on the one GPU: W processes share
// the device through IPC (the GPU time-slices them, so these check correctness, not speed).
// Every rank's outputs must equal, bit for bit, the in-process Group's on the same inputs and
// the CPU reference. A process killed mid-run leaves the others with PeerTimeout naming it.
// The NCCL path, with a group of one rank, runs its epilogue to the contract.
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "arfuse/epilogue.hpp"
#include "arfuse/error.hpp"
#include "arfuse/group.hpp"

#include "runtime/setup/nccl.hpp"

#include "device_outputs.hpp"
#include "rank_worker.hpp"
#include "row_layout.hpp"
#include "support.hpp"

extern char** environ;

using namespace arfuse;
using namespace arfuse::jit;
using Catch::Contains;

namespace {

unsigned fresh_seed() {
  const unsigned seed = std::random_device{}();
  UNSCOPED_INFO("seed " << seed);
  return seed;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "<missing " + path + ">";
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Workers {
  std::vector<pid_t> pids;
  std::vector<int> status;  // waitpid status per rank
};

// The test binary itself, re-executed with `args` (argv[0] first).
pid_t spawn_self(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) == 0);
  return pid;
}

Workers spawn_workers(int world, const std::string& dir, unsigned seed, int die_rank, int die_at, int timeout_ms) {
  Workers w;
  const std::string socket = dir + "/bootstrap.sock";
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> args = {"arfuse-tests",
                                     "--rank-worker",
                                     socket,
                                     std::to_string(r),
                                     std::to_string(world),
                                     std::to_string(seed),
                                     dir,
                                     std::to_string(r == die_rank ? die_at : -1),
                                     std::to_string(timeout_ms)};
    w.pids.push_back(spawn_self(args));
  }
  return w;
}

// Waits for every worker; kills them all and fails if any is still running after `limit`.
void wait_workers(Workers& w, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  w.status.assign(w.pids.size(), -1);
  std::size_t done = 0;
  while (done < w.pids.size()) {
    for (std::size_t r = 0; r < w.pids.size(); ++r) {
      if (w.status[r] != -1) continue;
      int st = 0;
      if (waitpid(w.pids[r], &st, WNOHANG) == w.pids[r]) w.status[r] = st, ++done;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (std::size_t r = 0; r < w.pids.size(); ++r) {
        if (w.status[r] == -1) kill(w.pids[r], SIGKILL), waitpid(w.pids[r], nullptr, 0);
      }
      FAIL("rank processes still running after " << limit.count() << " s: a hang");
    }
    usleep(20000);
  }
}

// The in-process Group (W virtual ranks on device 0) on the same cases: blobs[case][rank].
std::vector<std::vector<std::string>> run_in_process(int world, unsigned seed) {
  GroupOptions o;
  o.devices.assign(size_t(world), 0);
  o.max_tokens = test::kProcessMaxTokens, o.max_hidden = test::kProcessMaxHidden;
  Group group(o);
  std::vector<std::unique_ptr<test::CaseBuffers>> buffers;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int r = 0; r < world; ++r) {
    buffers.push_back(std::make_unique<test::CaseBuffers>(group.rank(r).device()));
    streams.push_back(std::make_unique<Stream>(group.rank(r).device()));
  }
  std::vector<std::vector<std::string>> blobs;
  const auto& cases = test::process_cases();
  for (int ci = 0; ci < int(cases.size()); ++ci) {
    group.force_stage(cases[size_t(ci)].stage);
    for (int r = 0; r < world; ++r) buffers[size_t(r)]->prepare(seed, ci, r);
    for (int r = 0; r < world; ++r)
      test::launch_case(group.rank(r), cases[size_t(ci)], *buffers[size_t(r)], *streams[size_t(r)]);
    for (auto& s : streams) s->synchronize();
    group.check();
    blobs.emplace_back();
    for (int r = 0; r < world; ++r) blobs.back().push_back(test::download_blob(cases[size_t(ci)], *buffers[size_t(r)]));
  }
  return blobs;
}

void require_same_as_in_process(int world, unsigned seed, const std::string& dir, const std::string& label) {
  const auto in_process = run_in_process(world, seed);
  const auto& cases = test::process_cases();
  for (int ci = 0; ci < int(cases.size()); ++ci) {
    const auto& c = cases[size_t(ci)];
    CAPTURE(ci, c.tokens, c.hidden, to_string(c.dtype), to_string(c.quant), c.mirror, to_string(c.norm), c.stage,
            c.plain);
    const std::string expected = test::expected_blob(seed, ci, world);
    for (int r = 0; r < world; ++r) {
      INFO(label << " rank " << r);
      const std::string got = read_file(test::blob_path(dir, ci, r));
      REQUIRE(got.size() == expected.size());
      CHECK(got == in_process[size_t(ci)][size_t(r)]);
      CHECK(got == expected);
    }
  }
  for (int r = 0; r < world; ++r) {
    std::istringstream info(read_file(test::info_path(dir, r)));
    std::string line;
    std::getline(info, line);
    CHECK(line == "custom 1 nccl 0");  // ranks sharing a GPU: custom kernels, and no NCCL (it refuses)
    for (const auto& c : cases) {
      std::getline(info, line);
      CHECK(line == (c.stage == 1 ? "custom one-stage" : "custom two-stage"));
    }
  }
}

}  // namespace

TEST_CASE("one process per rank: W processes sharing the GPU equal the in-process group bit for bit",
          "[gpu][multiprocess]") {
  const int world = GENERATE(2, 4);
  const unsigned seed = fresh_seed();
  const std::string dir = test::fresh_dir("arfuse-ranks");
  auto workers = spawn_workers(world, dir, seed, -1, -1, 20000);
  wait_workers(workers, std::chrono::seconds(240));
  for (int r = 0; r < world; ++r) {
    INFO("rank " << r << " wait status " << workers.status[size_t(r)]);
    REQUIRE(WIFEXITED(workers.status[size_t(r)]));
    REQUIRE(WEXITSTATUS(workers.status[size_t(r)]) == 0);
  }
  require_same_as_in_process(world, seed, dir, fmt::format("{} processes", world));
}

TEST_CASE("one thread per rank, a Group each: equal to the in-process group bit for bit", "[gpu][multiprocess]") {
  const int world = GENERATE(2, 4);
  const unsigned seed = fresh_seed();
  const std::string dir = test::fresh_dir("arfuse-ranks");
  InProcessRendezvous rendezvous(world, std::chrono::milliseconds(60000));
  std::vector<int> codes(static_cast<size_t>(world), -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      test::RankRun run;
      run.rank = r, run.world = world, run.seed = seed, run.out_dir = dir;
      codes[size_t(r)] = test::run_rank(rendezvous.join(r), run);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) REQUIRE(codes[size_t(r)] == 0);
  require_same_as_in_process(world, seed, dir, fmt::format("{} threads", world));
}

TEST_CASE("a rank process killed mid-run leaves the others with PeerTimeout naming it, not a hang",
          "[gpu][multiprocess]") {
  const int world = GENERATE(2, 4);
  const std::string dir = test::fresh_dir("arfuse-ranks");
  const int timeout_ms = 2000, victim = world - 1;
  auto workers = spawn_workers(world, dir, fresh_seed(), victim, 1, timeout_ms);
  wait_workers(workers, std::chrono::seconds(120));
  REQUIRE(WIFSIGNALED(workers.status[size_t(victim)]));
  CHECK(WTERMSIG(workers.status[size_t(victim)]) == SIGKILL);
  for (int r = 0; r < victim; ++r) {
    INFO("survivor rank " << r << " wait status " << workers.status[size_t(r)]);
    REQUIRE(WIFEXITED(workers.status[size_t(r)]));
    REQUIRE(WEXITSTATUS(workers.status[size_t(r)]) == 4);  // PeerTimeout
    std::istringstream record(read_file(test::timeout_path(dir, r)));
    int missing = -1;
    long ms = -1;
    record >> missing >> ms;
    CHECK(missing == victim);
    CHECK(ms > 0);
    CHECK(ms < 60000);
  }
}

// A program that keeps its Group in a static: the Group is destroyed at exit, after whatever
// the library built lazily (the driver), and must still find it loaded.
TEST_CASE("a Group kept in a static is destroyed at exit without a crash", "[gpu][multiprocess]") {
  Workers w;
  w.pids.push_back(spawn_self({"arfuse-tests", "--static-group-exit"}));
  wait_workers(w, std::chrono::seconds(60));
  INFO("wait status " << w.status[0]);
  REQUIRE(WIFEXITED(w.status[0]));
  REQUIRE(WEXITSTATUS(w.status[0]) == 0);
}

TEST_CASE("NCCL path: a group of one rank runs NCCL's all-reduce and the epilogue to the contract", "[gpu][nccl]") {
  const std::string why = nccl_unavailable_reason();
  INFO(why);
  REQUIRE(why.empty());
  const auto transport = GENERATE(Transport::nccl, Transport::automatic);
  GroupOptions o;
  o.devices = {0};
  o.max_tokens = 64, o.max_hidden = 8192, o.transport = transport;
  Group group(o);
  REQUIRE(group.has_nccl());
  REQUIRE_FALSE(group.custom_path_available());
  Rank& me = group.local_rank();
  Stream stream(me.device());
  auto rng = test::fresh_rng();
  struct Shape {
    int tokens, hidden;
    DType dtype;
    test::QuantCase quant;
    Norm norm;
    bool strided = false;  // every tensor a view with its own row stride: NCCL reads a gathered copy
    int out_width = 0;
  };
  // 300 x 6144 is above the staging capacity (64 tokens): NCCL takes it into its own buffer.
  for (const Shape s :
       {Shape{12, 6144, DType::bf16, test::mirror(Quant::fp8), Norm::rms},
        Shape{300, 6144, DType::f16, Quant::none, Norm::gemma}, Shape{7, 2880, DType::bf16, Quant::fp8, Norm::gemma},
        Shape{12, 6144, DType::bf16, test::mirror(Quant::fp8), Norm::rms, true, 6400},
        Shape{300, 2880, DType::f16, Quant::none, Norm::gemma, true}}) {
    CAPTURE(s.tokens, s.hidden, to_string(s.dtype), test::text(s.quant), to_string(s.norm), to_string(transport),
            s.strided, s.out_width);
    REQUIRE(group.path_for(s.tokens, s.hidden) == Path::nccl);
    const std::size_t n = std::size_t(s.tokens) * std::size_t(s.hidden);
    const auto input = test::random_tensor(rng, n, s.dtype), residual = test::random_tensor(rng, n, s.dtype);
    const auto weight = test::random_tensor(rng, std::size_t(s.hidden), s.dtype, 0.5f);
    AllreduceRmsnormArgs a;
    static_cast<RmsnormQuantArgs&>(a) =
        test::epilogue_layout(s.tokens, s.hidden, s.dtype, test::mode_of(s.quant, s.norm), s.strided, s.out_width);
    AllreduceArgs p = test::allreduce_layout(s.tokens, s.hidden, s.dtype, s.strided);
    const RowStrides rows = detail::row_strides(a), plain = detail::row_strides(p);
    const Device& d = me.device();
    const std::size_t bytes = std::size_t(s.tokens) * std::size_t(s.out_width + s.hidden + 64) * 2;
    DeviceBuffer in(d, bytes), res(d, bytes), res_out(d, bytes), w(d, std::size_t(s.hidden) * 2), out(d, bytes),
        scales(d, std::size_t(s.tokens) * 4), mirror(d, bytes), sum(d, bytes);
    in.upload(test::spread_rows(input, s.tokens, s.hidden, rows.input));
    res.upload(test::spread_rows(residual, s.tokens, s.hidden, rows.residual_in)), w.upload(weight);
    for (auto* b : {&res_out, &out, &scales, &mirror, &sum}) b->fill(0xff);
    a.input = in.get(), a.residual_in = res.get(), a.residual_out = res_out.get(), a.weight = w.get();
    a.out = out.get(), a.scales = static_cast<float*>(scales.get()), a.mirror = mirror.get();
    me.allreduce_rmsnorm(a, stream);
    DeviceBuffer plain_in(d, bytes);
    plain_in.upload(test::spread_rows(input, s.tokens, s.hidden, plain.input));
    p.input = plain_in.get(), p.out = sum.get();
    me.allreduce(p, stream);
    stream.synchronize();
    REQUIRE(me.last_path() == Path::nccl);
    // A sum over one rank is that rank's input; the epilogue on it follows the contract exactly.
    reference::EpilogueConfig config{s.hidden, s.dtype, test::mode_of(s.quant, s.norm), 1e-6f, d.target()};
    const auto e = reference::epilogue(config, s.tokens, input, residual, weight);
    const auto sum_rows = test::packed_rows(sum.download<std::uint16_t>(std::size_t(s.tokens) * plain.out), s.tokens,
                                            s.hidden, plain.out, s.hidden, "sum");
    test::require_bits_equal(sum_rows, input, "NCCL all-reduce of one rank", s.hidden);
    test::require_device_epilogue({res_out, out, scales, mirror}, e, config, s.tokens, rows);
  }
}

TEST_CASE("ranks sharing the GPU get no NCCL, so a message above the capacity is refused by name",
          "[gpu][multiprocess]") {
  GroupOptions o;
  o.devices = {0, 0};
  o.max_tokens = 16, o.max_hidden = 4096, o.dtype = DType::bf16;
  Group group(o);
  CHECK_FALSE(group.has_nccl());
  CHECK(group.custom_path_available());
  REQUIRE_THROWS_WITH(group.path_for(17, 4096), Contains("does not fit the staging buffers") && Contains("no NCCL"));
  AllreduceArgs a;
  alignas(16) static unsigned char host[64];
  a.input = host, a.out = host, a.tokens = 4, a.hidden = 4096, a.dtype = DType::f16;
  Stream stream(group.rank(0).device());
  REQUIRE_THROWS_WITH(group.rank(0).allreduce(a, stream), Contains("dtype f16") && Contains("created for bf16"));
  REQUIRE_THROWS_WITH(group.rank(2), Contains("rank 2 does not exist"));
}
