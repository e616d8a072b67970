// [cpu] The plan of a call on synthetic machines: no GPU, no Group, only a Topology literal.
// Covers the path, the kernel spec, the rows and the grid for one GPU with virtual ranks, W GPUs
// with and without peer access, messages above the staging capacity, and forced stages.
#include "runtime/plan/plan.hpp"

#include <map>
#include <set>

#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

#include "runtime/kernel_args.hpp"

#include "support.hpp"

using namespace arfuse;
using Catch::Contains;
using test::ScopedEnv;

namespace {

Topology gpus(int world, int ranks_per_device, bool peer_access, bool nccl) {
  Topology t;
  t.world = world;
  for (int r = 0; r < world; ++r) t.local_ranks.push_back(r);
  t.ranks_per_device = ranks_per_device;
  t.multiprocessors = 132;
  t.target = Target::parse("sm_90");
  if (!peer_access) t.custom_unavailable = "device 0 cannot access device 1 directly (no P2P path)";
  t.nccl = nccl;
  t.max_tokens = 2048, t.max_hidden = 8192;
  return t;
}

CallShape fused(int tokens, int hidden, Quant quant = Quant::fp8, bool mirror = false) {
  return CallShape{true, tokens, hidden, DType::bf16,
                   EpilogueMode{quant, Norm::gemma, 128, ScaleFormat::f32, ScaleLayout::row_major, mirror}};
}

}  // namespace

TEST_CASE("one GPU with virtual ranks: the custom path, grids shared by the ranks on the GPU", "[cpu][plan]") {
  const Topology t = gpus(4, 4, true, false);
  const auto policy = StagePolicy::resolve(jit::TuningTable::embedded_default(), t);
  CHECK(policy.two_stage_min_bytes == 1073741824);  // default:virtual W = 4: one stage at every size
  const Plan p = plan_call(t, policy, fused(2048, 6144));
  CHECK(p.path == Path::one_stage);
  CHECK(p.spec.text() == "fused_ar/h6144/bf16/fp8/gemma/w4/s1/sm_90");
  CHECK(p.rows == 2048);
  CHECK(p.grid(3) == 3 * 132 / 4);                           // all four ranks' blocks resident together
  CHECK(p.grid(0) == 132 / 4);                               // an occupancy of 0 counts as 1
  CHECK(plan_call(t, policy, fused(5, 6144)).grid(3) == 5);  // never more blocks than rows

  const Topology w8 = gpus(8, 8, true, false);
  const auto policy8 = StagePolicy::resolve(jit::TuningTable::embedded_default(), w8);
  CHECK(plan_call(w8, policy8, fused(511, 6144)).path == Path::one_stage);  // 6 MiB less one row
  const Plan two = plan_call(w8, policy8, fused(512, 6144));
  CHECK(two.path == Path::two_stage);
  CHECK(two.spec.text() == "fused_ar/h6144/bf16/fp8/gemma/w8/s2/sm_90");
  CHECK(two.rows == 64);
  const Plan odd = plan_call(w8, policy8, fused(517, 6144));
  CHECK(odd.rows == 65);  // a stage-2 rank's share, rounded up
}

// A call with a row stride or a padded out takes the views kernel, on every path; the tests of
// which arguments make a call one: is_view (runtime/kernel_args.hpp).
TEST_CASE("strided or padded calls plan the views kernel, contiguous ones the constant-width kernel", "[cpu][plan]") {
  const Topology t = gpus(4, 4, true, true);
  const auto policy = StagePolicy::resolve(jit::TuningTable::embedded_default(), t);
  CallShape shape = fused(12, 6144);
  shape.views = true;
  CHECK(plan_call(t, policy, shape).spec.text() == "fused_ar/h6144/bf16/fp8/gemma/w4/s1/views/sm_90");
  shape.tokens = 5000;  // above the staging capacity: NCCL, then the standalone views kernel
  CHECK(plan_call(t, policy, shape).spec.text() == "rmsnorm_quant/h6144/bf16/fp8/gemma/views/sm_90");
  CHECK(plan_call(t, policy, fused(12, 6144)).spec.text() == "fused_ar/h6144/bf16/fp8/gemma/w4/s1/sm_90");
  // A captured call with an input slot takes the graph kernel of its path; after NCCL there is
  // no peer input to read.
  shape.graph_inputs = true;
  CHECK(plan_call(t, policy, shape).spec.text() == "rmsnorm_quant/h6144/bf16/fp8/gemma/views/sm_90");
  shape.tokens = 12;
  CHECK(plan_call(t, policy, shape).spec.text() == "fused_ar/h6144/bf16/fp8/gemma/w4/s1/views/graph/sm_90");
  shape.views = false;
  StagePolicy two = policy;
  two.forced_stage = 2;
  CHECK(plan_call(t, two, shape).spec.text() == "fused_ar/h6144/bf16/fp8/gemma/w4/s2/graph/sm_90");

  RmsnormQuantArgs a;
  a.hidden = 6144, a.mode.quant = Quant::fp8;
  CHECK_FALSE(is_view(a));
  a.input_stride = 6144, a.out_width = 6144;  // the row's own width: contiguous
  CHECK_FALSE(is_view(a));
  for (int RmsnormQuantArgs::*field :
       {&RmsnormQuantArgs::input_stride, &RmsnormQuantArgs::residual_in_stride, &RmsnormQuantArgs::residual_out_stride,
        &RmsnormQuantArgs::out_stride, &RmsnormQuantArgs::mirror_stride, &RmsnormQuantArgs::out_width}) {
    RmsnormQuantArgs v = a;
    v.*field = 6400;
    CHECK(is_view(v));
  }
  a.mode.quant = Quant::mxfp4, a.out_stride = 3072;  // MXFP4 rows are hidden / 2 bytes
  CHECK_FALSE(is_view(a));
  AllreduceArgs p;
  p.hidden = 4096, p.out_stride = 4096;
  CHECK_FALSE(is_view(p));
  p.input_stride = 4104;
  CHECK(is_view(p));
  GroupQuantArgs g;
  g.hidden = 4096, g.mode.quant = Quant::mxfp4, g.out_stride = 2048;
  CHECK_FALSE(is_view(g));
  g.out_stride = 2064;
  CHECK(is_view(g));
  TokenQuantArgs q;
  q.hidden = 4096, q.out_stride = 4112;
  CHECK(is_view(q));
}

TEST_CASE("W GPUs with peer access: thresholds per world size, plain all-reduce specs", "[cpu][plan]") {
  const Topology t = gpus(2, 1, true, true);
  const auto policy = StagePolicy::resolve(jit::TuningTable::embedded_default(), t);
  CHECK(policy.two_stage_min_bytes == 4194304);  // default W = 2
  CHECK(plan_call(t, policy, fused(341, 6144)).path == Path::one_stage);
  CHECK(plan_call(t, policy, fused(342, 6144)).path == Path::two_stage);  // 4,202,496 bytes
  const Plan plain =
      plan_call(t, policy, CallShape{false, 16, 4096, DType::f16, EpilogueMode{Quant::fp8, Norm::gemma}});
  CHECK(plain.spec.text() == "allreduce/h4096/f16/w2/s1/sm_90");  // quant and norm do not apply
  CHECK(plain.grid(2) == 16);
}

TEST_CASE("GPUs without peer access take NCCL, or are refused without it", "[cpu][plan]") {
  const Topology with_nccl = gpus(4, 1, false, true);
  const auto policy = StagePolicy::resolve(jit::TuningTable::embedded_default(), with_nccl);
  const Plan p = plan_call(with_nccl, policy, fused(64, 6144, Quant::fp8, true));
  CHECK(p.path == Path::nccl);
  CHECK(p.has_kernel);
  CHECK(p.spec.text() == "rmsnorm_quant/h6144/bf16/fp8/mirror/gemma/sm_90");  // the epilogue after NCCL's sum
  CHECK_FALSE(plan_call(with_nccl, policy, CallShape{false, 64, 6144, DType::bf16, {}}).has_kernel);
  const Topology without = gpus(4, 1, false, false);
  REQUIRE_THROWS_WITH(plan_call(without, policy, fused(64, 6144)),
                      Contains("custom kernels cannot run (device 0 cannot access device 1") && Contains("no NCCL"));
}

TEST_CASE("messages above the staging capacity go to NCCL, or are refused naming both sizes", "[cpu][plan]") {
  const Topology t = gpus(2, 1, true, true);
  const auto policy = StagePolicy::resolve(jit::TuningTable::embedded_default(), t);
  CHECK(plan_call(t, policy, fused(2048, 8192)).path != Path::nccl);
  CHECK(plan_call(t, policy, fused(2049, 8192)).path == Path::nccl);
  CHECK(plan_call(t, policy, fused(16, 8200)).path == Path::nccl);
  CHECK(t.call_max_tokens() == -1);  // NCCL lifts the staging bound
  CHECK(t.call_max_hidden() == kMaxHidden);
  Topology no_nccl = t;
  no_nccl.nccl = false;
  CHECK(no_nccl.call_max_tokens() == 2048);
  REQUIRE_THROWS_WITH(plan_call(no_nccl, policy, fused(2049, 8192)),
                      Contains("2049 x 8192 does not fit the staging buffers (2048 x 8192)"));
}

TEST_CASE("a forced stage wins over the table, and the plan is the same on every rank", "[cpu][plan]") {
  const Topology t = gpus(4, 1, true, false);
  auto policy = StagePolicy::resolve(jit::TuningTable::embedded_default(), t);
  policy.forced_stage = 2;
  CHECK(plan_call(t, policy, fused(1, 6144)).path == Path::two_stage);
  policy.forced_stage = 1;
  CHECK(plan_call(t, policy, fused(2048, 8192)).path == Path::one_stage);
  // Every rank holds the same topology but its own local ranks; the plan must not depend on them.
  Topology other = t;
  other.local_ranks = {3};
  policy.forced_stage.reset();
  for (int tokens : {1, 7, 255, 256, 1024, 2048}) {
    const Plan a = plan_call(t, policy, fused(tokens, 6144)), b = plan_call(other, policy, fused(tokens, 6144));
    CHECK(a.spec.text() == b.spec.text());
    CHECK(a.grid(2) == b.grid(2));
  }
}

TEST_CASE("packed specs tell every kernel apart like the canonical text does", "[cpu][plan]") {
  std::map<std::uint64_t, std::string> seen;
  std::set<std::string> texts;
  for (auto module : jit::all_modules())
    for (int hidden : {8, 4096, 6144, kMaxHidden})
      for (auto dtype : all_dtypes())
        for (auto quant : all_quants())
          for (bool mirror : {false, true})
            for (auto norm : all_norms())
              for (int world : {2, 4, 8})
                for (int stage : {1, 2}) {
                  jit::KernelSpec s;
                  s.module = module, s.hidden = hidden, s.dtype = dtype, s.mode.quant = quant, s.mode.norm = norm;
                  s.mode.mirror = mirror && quant != Quant::none && jit::takes_mirror(module);
                  s.world = world, s.stage = stage;
                  auto [it, inserted] = seen.emplace(s.packed(), s.text());
                  CHECK(it->second == s.text());  // one number, one kernel
                  texts.insert(s.text());
                }
  CHECK(seen.size() == texts.size());
}

TEST_CASE("every ARFUSE_ variable is declared once, and read through one parser each", "[cpu][plan]") {
  std::set<std::string> names;
  for (const auto& v : settings::all()) {
    CHECK(std::string(v.name).rfind("ARFUSE_", 0) == 0);
    CHECK(names.insert(v.name).second);
  }
  CHECK(names.size() == 10);
  REQUIRE_THROWS_WITH(settings::text("ARFUSE_NOT_A_SETTING"), Contains("not a declared arfuse setting"));
  ScopedEnv compile("ARFUSE_COMPILE", "maybe");
  REQUIRE_THROWS_AS(settings::on_off("ARFUSE_COMPILE", true), ConfigError);
  ScopedEnv off("ARFUSE_COMPILE", "off");
  CHECK_FALSE(settings::on_off("ARFUSE_COMPILE", true));
  ScopedEnv bytes("ARFUSE_CACHE_MAX_BYTES", "12x");
  REQUIRE_THROWS_WITH(settings::byte_count("ARFUSE_CACHE_MAX_BYTES"), Contains("ARFUSE_CACHE_MAX_BYTES='12x'"));
}
