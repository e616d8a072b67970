// How an inference engine with one process per GPU sets up an arfuse Group and makes the
// fused call of a tensor-parallel layer. Start one process per rank on one node:
//
//   for r in 0 1 2 3; do arfuse-example-tp --rank $r --world 4 --socket /tmp/job-42/arfuse.sock & done
//
// (--device picks the GPU; by default rank r uses GPU r, or GPU 0 when there is only one, which
// then time-slices the ranks: correct, but slow). Engines that already have torch.distributed
// or MPI pass their own allgather instead of the socket: see callback_bootstrap in include/arfuse/bootstrap.hpp.
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "arfuse/error.hpp"
#include "arfuse/group.hpp"

namespace {

struct Options {
  int rank = -1, world = -1, device = -1, tokens = 128, hidden = 6144;
  std::string socket;
};

constexpr const char* kUsage =
    "usage: arfuse-example-tp --rank R --world W --socket PATH [--device D] [--tokens N] [--hidden H]\n"
    "  --rank R       this process's rank, 0 to W - 1\n"
    "  --world W      the number of ranks (processes), 2 to 8\n"
    "  --socket PATH  where rank 0 listens and the others connect (its folder must be private)\n"
    "  --device D     the GPU (default: GPU R, or GPU 0 when there is only one)\n"
    "  --tokens N     tokens of the call (default 128)\n"
    "  --hidden H     hidden size, a multiple of 8 (default 6144)\n";

// Bad command lines exit 2, other errors 1.
struct UsageError : arfuse::Error {
  using arfuse::Error::Error;
};

int whole_number(const std::string& option, const std::string& text) {
  int v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < 0) {
    throw UsageError(option + " takes a whole number, not '" + text + "' (see --help)");
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value (see --help)");
      return argv[++i];
    };
    if (a == "--rank")
      o.rank = whole_number(a, next());
    else if (a == "--world")
      o.world = whole_number(a, next());
    else if (a == "--device")
      o.device = whole_number(a, next());
    else if (a == "--socket")
      o.socket = next();
    else if (a == "--tokens")
      o.tokens = whole_number(a, next());
    else if (a == "--hidden")
      o.hidden = whole_number(a, next());
    else if (a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      throw UsageError("unknown argument " + a + " (see --help)");
    }
  }
  if (o.rank < 0 || o.world < 1 || o.socket.empty())
    throw UsageError("--rank, --world and --socket are required (see --help)");
  if (o.rank >= o.world) throw UsageError("--rank must be below --world (see --help)");
  if (o.device < 0) o.device = arfuse::Device::count() > o.rank ? o.rank : 0;
  return o;
}

// bf16 is the top half of an fp32; round to nearest, ties to even (the values here are finite).
std::uint16_t to_bf16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return std::uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

std::vector<std::uint16_t> random_bf16(std::mt19937& rng, std::size_t n) {
  std::normal_distribution<float> normal;
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = to_bf16(normal(rng));
  return v;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  using namespace arfuse;

  // 1. Meet the other ranks (rank 0 listens at the socket path; the others connect).
  GroupOptions o;
  o.bootstrap = local_socket_bootstrap(opt.socket, opt.rank, opt.world, std::chrono::seconds(60));
  o.devices = {opt.device};
  o.max_tokens = opt.tokens, o.max_hidden = opt.hidden;  // the staging capacity: the largest call
  o.dtype = DType::bf16;
  // 2. Create the group: every rank checks the others agree, maps their buffers, tests them.
  Group group(o);
  Rank& me = group.local_rank();
  me.prepare(opt.hidden, DType::bf16, EpilogueMode{Quant::fp8});  // load kernels before the first call

  // 3. The layer's tensors (an engine has these already).
  const std::size_t n = std::size_t(opt.tokens) * opt.hidden;
  std::mt19937 rng(1234 + unsigned(opt.rank));
  DeviceBuffer residual(me.device(), n * 2), weight(me.device(), std::size_t(opt.hidden) * 2), out(me.device(), n),
      scales(me.device(), std::size_t(opt.tokens) * 4);
  std::mt19937 shared(99);  // residual and weight are replicated across tensor-parallel ranks
  residual.upload(random_bf16(shared, n)), weight.upload(random_bf16(shared, std::size_t(opt.hidden)));
  const auto partial = random_bf16(rng, n);
  // Writing the partial sum straight into the staging buffer saves a copy.
  me.device().copy_to_device(me.input_buffer(), partial.data(), n * 2);

  // 4. The fused call: all-reduce + residual add (in place) + RMSNorm + per-token FP8.
  Stream stream(me.device());
  AllreduceRmsnormArgs a;
  a.input = me.input_buffer(), a.residual_in = residual.get(), a.residual_out = residual.get(), a.weight = weight.get();
  a.out = out.get(), a.scales = static_cast<float*>(scales.get());
  a.tokens = opt.tokens, a.hidden = opt.hidden, a.dtype = DType::bf16, a.mode.quant = Quant::fp8;
  me.allreduce_rmsnorm(a, stream);
  stream.synchronize();
  group.check();  // PeerTimeout if a rank did not arrive

  const auto s = scales.download<float>(std::size_t(opt.tokens));
  double sum = 0;
  for (float v : s) sum += v;
  std::printf("rank %d/%d on %s: %s path, sum of the %d token scales %.6f\n", opt.rank, opt.world,
              me.device().pci_bus_id().c_str(), to_string(*me.last_path()), opt.tokens, sum);
  group.close();
  return 0;
} catch (const UsageError& e) {
  std::fprintf(stderr, "arfuse-example-tp: %s\n", e.what());
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "arfuse-example-tp: %s\n", e.what());
  return 1;
}
