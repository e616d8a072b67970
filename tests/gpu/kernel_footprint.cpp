// [gpu] What arfuse-cache code-diff reads from a cubin without a GPU (registers, shared and local
// memory, and the blocks per SM they allow) against what the driver says of the loaded kernel.
#include "jit/kernel_footprint.hpp"

#include "runtime/context.hpp"

#include "support.hpp"

using namespace arfuse;
using namespace arfuse::jit;

TEST_CASE("a kernel's footprint and blocks per SM read from its cubin are the driver's", "[gpu][footprint]") {
  static Context ctx;
  std::vector<KernelSpec> specs;
  for (const int hidden : {2048, 2880, 6144, 8192}) {
    const int group = hidden % 128 == 0 ? 128 : 32;
    for (const test::QuantCase quant :
         {test::QuantCase(Quant::none), {Quant::fp8}, {Quant::fp8_group}, {Quant::mxfp4}, test::mirror(Quant::fp8)}) {
      specs.push_back(
          spec_for(ctx, Module::rmsnorm_quant, hidden, DType::bf16, test::mode_of(quant, Norm::rms, group)));
      for (const int world : {2, 4, 8}) {
        for (const int stage : {1, 2})
          specs.push_back(spec_for(ctx, Module::fused_ar, hidden, DType::bf16, test::mode_of(quant, Norm::rms, group),
                                   world, stage));
      }
    }
    specs.push_back(spec_for(ctx, Module::allreduce, hidden, DType::bf16, EpilogueMode{Quant::none, Norm::rms}, 2, 1));
  }
  for (const KernelSpec& spec : specs) {
    const auto& k = load_kernel(ctx, spec);
    const KernelFootprint f = cubin_footprint(kernel_cache(ctx).get(spec).entry.payload);
    const KernelResources r = k.kernel.resources();
    CAPTURE(spec.text(), f.registers, f.shared_bytes, f.local_bytes, r.registers, r.static_shared_bytes, r.local_bytes);
    CHECK(f.registers == r.registers);
    CHECK(f.shared_bytes == r.static_shared_bytes);
    CHECK(f.local_bytes == r.local_bytes);
    CHECK(nvidia_resident_blocks(ctx.device().target(), k.block.threads, f) ==
          k.kernel.max_active_blocks_per_multiprocessor());
  }
}
