// Uses the public API from outside the project: renders a kernel, plans a call on a synthetic
// topology, and reads a setting. No GPU needed.
#include <cstdio>

#include <arfuse/base/settings.hpp>
#include <arfuse/error.hpp>
#include <arfuse/jit/render.hpp>
#include <arfuse/runtime/group.hpp>

int main() {
  const auto source = arfuse::jit::render(arfuse::jit::KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8/rms/sm_90"));
  if (source.name_expression.find("rmsnorm_quant_kernel") == std::string::npos) return 1;
  arfuse::Topology topology;
  topology.world = 4, topology.ranks_per_device = 1, topology.multiprocessors = 132;
  topology.max_tokens = 128, topology.max_hidden = 8192;
  const auto policy = arfuse::StagePolicy::resolve(arfuse::jit::TuningTable::embedded_default(), topology);
  const auto plan = arfuse::plan_call(topology, policy, arfuse::CallShape{true, 64, 4096});
  if (plan.spec.text() != "fused_ar/h4096/bf16/none/rms/w4/s1/sm_90") return 1;
  try {
    arfuse::validate_args(arfuse::AllreduceRmsnormArgs{}, 128, 8192);  // hidden 0: refused
    return 1;
  } catch (const arfuse::Error&) {  // thrown inside libarfuse, caught here: the type crosses the boundary
  }
  std::printf("downstream: %s, %s, %zu settings\n", source.name_expression.c_str(), plan.spec.text().c_str(),
              arfuse::settings::all().size());
  return 0;
}
