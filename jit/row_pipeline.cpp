#include "arfuse/jit/row_pipeline.hpp"

namespace arfuse::jit {
namespace {

constexpr int kRegistersPerMultiprocessor = 65536;
// The per-thread budget the pipelined kernels are compiled to (measured with ptxas for sm_90:
// the h8192 kernels need 64 with the pipeline and do not spill).
constexpr int kPipelineRegisters = 64;
// Vectors per thread where the pipeline pays and fits: with one (rows of up to 4096 elements)
// a row is a latency chain, not a stream of loads; with three or more (rows above 8192) the
// 64 registers spill (ptxas, sm_90: 12 bytes at h12288, 384 at h16384).
constexpr int kPipelineVectors = 2;
constexpr int kReservedSharedPerBlock = 1024;  // the driver's per-block reservation
constexpr int kStaticSharedBytes = 512;        // ReduceScratch and flags, rounded up

// Rows the kernel reads per output row: rmsnorm_quant its input and residual_in, the fused
// kernel every rank's staging row and residual_in. 0: no row pipeline for this module.
int sources(const KernelSpec& spec) {
  if (spec.module == Module::rmsnorm_quant) return 2;
  if (spec.module == Module::fused_ar && spec.stage == 1) return spec.world + 1;
  return 0;
}

}  // namespace

RowPipeline row_pipeline(const KernelSpec& spec, const BlockShape& block) {
  const Target& target = spec.target;
  if (!target.hardware_async_copy() || block.vectors_per_thread != kPipelineVectors || sources(spec) == 0) return {};
  const int blocks = kRegistersPerMultiprocessor / (block.threads * kPipelineRegisters);
  const int bytes = sources(spec) * block.vectors_per_thread * block.threads * kElementsPerVector * 2;
  const int per_block = bytes + kReservedSharedPerBlock + kStaticSharedBytes;
  if (blocks < 1 || blocks * per_block > target.shared_memory_per_multiprocessor()) return {};
  return RowPipeline{blocks, bytes};
}

}  // namespace arfuse::jit
