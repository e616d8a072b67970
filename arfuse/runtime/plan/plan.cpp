#include "runtime/plan/plan.hpp"

#include <fmt/format.h>

#include "arfuse/error.hpp"

#include "base/names.hpp"

namespace arfuse {

const char* to_string(Path value) {
  static const Names<Path> names{
      {Path::one_stage, "custom one-stage"}, {Path::two_stage, "custom two-stage"}, {Path::nccl, "NCCL"}};
  return name_in(names, value);
}

StagePolicy StagePolicy::resolve(const jit::TuningTable& tuning, const Topology& topology) {
  StagePolicy p;
  p.two_stage_min_bytes = tuning.two_stage_min_bytes(topology.target.name(), topology.world, topology.virtual_ranks());
  return p;
}

int StagePolicy::stage_for(std::uint64_t message_bytes) const {
  if (forced_stage) return *forced_stage;
  return message_bytes >= two_stage_min_bytes ? 2 : 1;
}

namespace {

Path choose_path(const Topology& t, const StagePolicy& policy, const CallShape& c) {
  const bool fits = c.tokens <= t.max_tokens && c.hidden <= t.max_hidden;
  if (t.custom_available() && fits) {
    const std::uint64_t bytes = std::uint64_t(c.tokens) * std::uint64_t(c.hidden) * element_bytes(c.dtype);
    return policy.stage_for(bytes) == 1 ? Path::one_stage : Path::two_stage;
  }
  if (t.nccl) return Path::nccl;
  if (!t.custom_available()) {
    throw Error(
        fmt::format("no path serves this call: the custom kernels cannot run ({}) and the group has no NCCL "
                    "communicator",
                    t.custom_unavailable));
  }
  throw Error(
      fmt::format("a message of {} x {} does not fit the staging buffers ({} x {}) and the group has no NCCL "
                  "communicator to take it",
                  c.tokens, c.hidden, t.max_tokens, t.max_hidden));
}

}  // namespace

Plan plan_call(const Topology& t, const StagePolicy& policy, const CallShape& c) {
  Plan p;
  p.path = choose_path(t, policy, c);
  p.multiprocessors = t.multiprocessors;
  p.ranks_per_device = t.ranks_per_device;
  p.rows = c.tokens;
  jit::KernelSpec& s = p.spec;
  s.hidden = c.hidden, s.dtype = c.dtype, s.target = t.target, s.views = c.views;
  if (p.path == Path::nccl) {
    p.has_kernel = c.epilogue;
    s.module = jit::Module::rmsnorm_quant, s.mode = c.mode;
    return p;
  }
  const int stage = p.path == Path::one_stage ? 1 : 2;
  s.module = c.epilogue ? jit::Module::fused_ar : jit::Module::allreduce;
  if (c.epilogue) s.mode = c.mode;
  s.world = t.world, s.stage = stage, s.graph_inputs = c.graph_inputs;
  if (stage == 2) p.rows = (c.tokens + t.world - 1) / t.world;
  return p;
}

}  // namespace arfuse
