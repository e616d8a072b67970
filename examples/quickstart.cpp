// Two ranks all-reduce a bf16 activation, add the residual, apply RMSNorm and quantise to
// per-token FP8, in one kernel. Both ranks share GPU 0 here; on a node give each its own GPU
// (options.devices = {0, 1}), or run one process per GPU (examples/one_process_per_gpu.cpp).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include <arfuse/arfuse.hpp>

int main() try {
  using namespace arfuse;
  const int world = 2, tokens = 4, hidden = 4096;
  GroupOptions options;
  options.devices = {0, 0};
  options.max_tokens = tokens, options.max_hidden = hidden;
  Group group(options);

  const std::size_t n = std::size_t(tokens) * hidden;
  std::vector<std::unique_ptr<DeviceBuffer>> memory;
  auto tensor = [&](std::size_t count, std::size_t bytes_each, std::uint16_t bf16_value) {
    memory.push_back(std::make_unique<DeviceBuffer>(group.rank(0).device(), count * bytes_each));
    if (bytes_each == 2) memory.back()->upload(std::vector<std::uint16_t>(count, bf16_value));
    return memory.back()->get();
  };
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<AllreduceRmsnormArgs> args(world);
  for (int r = 0; r < world; ++r) {
    AllreduceRmsnormArgs& a = args[r];
    a.input = tensor(n, 2, r == 0 ? 0x3f80 : 0x4000);       // rank 0 holds 1.0, rank 1 holds 2.0
    a.residual_in = a.residual_out = tensor(n, 2, 0x3f80);  // 1.0, updated in place
    a.weight = tensor(hidden, 2, 0x3f80);
    a.out = tensor(n, 1, 0);          // FP8 (e4m3) bytes
    a.scales = tensor(tokens, 4, 0);  // one fp32 scale per token
    a.tokens = tokens, a.hidden = hidden, a.dtype = DType::bf16, a.eps = 1e-6f;
    a.mode.quant = Quant::fp8;
    streams.push_back(std::make_unique<Stream>(group.rank(r).device()));
    group.rank(r).prepare(hidden, DType::bf16, a.mode);  // compile or load the kernels first
  }
  for (int r = 0; r < world; ++r) group.rank(r).allreduce_rmsnorm(args[r], *streams[r]);
  for (auto& s : streams) s->synchronize();
  group.check();  // throws PeerTimeout or CallMismatch naming the ranks

  // 1 + 2 + 1 = 4 in every element, RMSNorm makes it 1.0, FP8 scale 1/448, byte 0x7e (448).
  bool ok = true;
  for (int r = 0; r < world; ++r) {
    const auto residual = memory[5 * r + 1]->download<std::uint16_t>(n);
    const auto q = memory[5 * r + 3]->download<std::uint8_t>(n);
    const auto scales = memory[5 * r + 4]->download<float>(tokens);
    std::printf("rank %d: residual %#06x, q %#04x, scale %.9g\n", r, residual[0], q[0], scales[0]);
    ok = ok && residual[0] == 0x4080 && q[n - 1] == 0x7e && scales[tokens - 1] == 1.0f / 448.0f;
  }
  std::printf(ok ? "ok\n" : "unexpected values\n");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "arfuse-example-quickstart: %s\n", e.what());
  return 1;
}
