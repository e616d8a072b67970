// [cpu] KernelSpec validation, canonical forms and round trips; targets; block shapes.
#include "jit/kernel_spec.hpp"

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

#include "jit/block_shape.hpp"
#include "jit/spec_set.hpp"
#include "templates/codes.cuh"
#include "templates/signal.cuh"

#include "support.hpp"

using namespace arfuse;
using namespace arfuse::jit;
using Catch::Contains;

namespace {

// The mode table's modes for which `has` holds, as the messages list them: "a, b, c or d".
std::string modes_or(bool (*has)(Quant)) {
  std::vector<std::string> names;
  for (Quant q : all_quants()) {
    if (has(q)) names.emplace_back(to_string(q));
  }
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

// The default hidden sizes a mode takes with the default group size (128).
int hidden_sizes_taking(Quant q) {
  int n = 0;
  for (int h : default_hidden_sizes()) {
    EpilogueMode m{q};
    try {
      m.validate(h);
      ++n;
    } catch (const Error&) {}
  }
  return n;
}

}  // namespace

TEST_CASE("spec text and JSON forms round-trip for every module", "[cpu][spec]") {
  const std::string text = GENERATE(
      as<std::string>{}, "rmsnorm_quant/h6144/bf16/fp8/rms/sm_90", "rmsnorm_quant/h2880/f16/fp8/mirror/gemma/gfx942",
      "token_quant/h8192/bf16/sm_90a", "fused_ar/h5120/f16/none/gemma/w8/s2/gfx1250",
      "allreduce/h6144/bf16/w2/s1/sm_100", "rmsnorm_quant/h2880/bf16/none/rms/views/sm_90",
      "group_quant/h7168/bf16/mxfp4/views/gfx942", "fused_ar/h6144/bf16/fp8/rms/w4/s1/views/sm_90",
      "fused_ar/h6144/bf16/nvfp4/gemma/w8/s2/graph/sm_90", "allreduce/h4096/f16/w2/s1/views/graph/gfx942");
  const KernelSpec s = KernelSpec::parse(text);
  CHECK(s.text() == text);
  CHECK(KernelSpec::from_json(s.json()) == s);
  CHECK(KernelSpec::parse(s.json().dump().size() ? s.text() : "") == s);
}

// A views kernel is another kernel: another text, JSON and packed key than the contiguous one.
TEST_CASE("the views field makes its own spec in every form", "[cpu][spec]") {
  const KernelSpec contiguous = KernelSpec::parse("fused_ar/h6144/bf16/fp8/rms/w4/s1/sm_90");
  KernelSpec views = contiguous;
  views.views = true;
  CHECK_FALSE(contiguous.views);
  CHECK(views.text() == "fused_ar/h6144/bf16/fp8/rms/w4/s1/views/sm_90");
  CHECK(views != contiguous);
  CHECK(views.packed() != contiguous.packed());
  CHECK(views.json().at("views") == true);
  CHECK_FALSE(contiguous.json().contains("views"));
  nlohmann::json bad = views.json();
  bad["views"] = 1;
  CHECK_THROWS_WITH(KernelSpec::from_json(bad), Contains("\"views\" must be true or false"));
  CHECK_THROWS_WITH(KernelSpec::parse("fused_ar/h6144/bf16/fp8/rms/views/w4/s1/sm_90"), Contains("fields"));
}

// So is the kernel of a captured call, which reads its rows where its input slot says.
TEST_CASE("the graph_inputs field makes its own spec in every form, for the modules that reduce", "[cpu][spec]") {
  const KernelSpec eager = KernelSpec::parse("fused_ar/h6144/bf16/fp8/rms/w4/s1/sm_90");
  KernelSpec graph = eager;
  graph.graph_inputs = true;
  CHECK(graph.text() == "fused_ar/h6144/bf16/fp8/rms/w4/s1/graph/sm_90");
  CHECK(graph != eager);
  CHECK(graph.packed() != eager.packed());
  CHECK(KernelSpec::unpacked(graph.packed(), graph.target) == graph);
  CHECK(graph.json().at("graph_inputs") == true);
  CHECK_FALSE(eager.json().contains("graph_inputs"));
  nlohmann::json bad = graph.json();
  bad["graph_inputs"] = "yes";
  CHECK_THROWS_WITH(KernelSpec::from_json(bad), Contains("\"graph_inputs\" must be true or false"));
  CHECK_THROWS_WITH(KernelSpec::parse("fused_ar/h6144/bf16/fp8/rms/w4/s1/graph/views/sm_90"), Contains("fields"));
  KernelSpec single = KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8/rms/sm_90");
  single.graph_inputs = true;
  CHECK_THROWS_WITH(single.validate(),
                    Contains("rmsnorm_quant reads no peer's input") && Contains("fused_ar and allreduce"));
}

TEST_CASE("unused fields do not make specs differ", "[cpu][spec]") {
  KernelSpec a = KernelSpec::parse("token_quant/h6144/bf16/sm_90"), b = a;
  b.mode.norm = Norm::gemma, b.mode.quant = Quant::fp8, b.world = 4;
  CHECK(a == b);
  CHECK(b.canonical().world == 1);
}

TEST_CASE("spec validation names the bad value and what is allowed", "[cpu][spec]") {
  REQUIRE_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h6145/bf16/fp8/rms/sm_90"),
                      Contains("6145") && Contains("multiple of 8"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h0/bf16/fp8/rms/sm_90"), Contains("positive multiple of 8"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h40000/bf16/fp8/rms/sm_90"), Contains("at most 32768"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h6144/f32/fp8/rms/sm_90"),
                      Contains("unknown dtype 'f32'") && Contains("f16, bf16"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h6144/bf16/int8/rms/sm_90"),
                      Contains("allowed are none, fp8, fp8_group, mxfp4, fp8_static, nvfp4"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8/layer/sm_90"), Contains("rms, gemma"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("fused_ar/h6144/bf16/fp8/rms/w9/s1/sm_90"),
                      Contains("world size 9") && Contains("2 to 8"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("fused_ar/h6144/bf16/fp8/rms/w4/s3/sm_90"),
                      Contains("stage 3") && Contains("1 and 2"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("fused_ar/h6144/bf16/fp8/rms/sm_90"),
                      Contains("has 6 fields") && Contains("w4/s1"));
  // The example has the fields the given mode needs: a group mode's size and scale format.
  REQUIRE_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h8192/f16/fp8_group/gemma/sm_90"),
                      Contains("has 6 fields") && Contains("has 8") &&
                          Contains("'rmsnorm_quant/h7168/bf16/fp8_group/g128/f32/rms/sm_90'"));
  // Without a mode both counts are named, so the count fits whichever example follows.
  REQUIRE_THROWS_WITH(KernelSpec::parse("group_quant/h6144"),
                      Contains("has 2 fields") && Contains("has 5, or 7 in a group FP8 mode") &&
                          Contains("'group_quant/h7168/bf16/fp8_group/g128/f32/sm_90'"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("fused_ar/h6144/bf16/mxfp4/rms/sm_90"),
                      Contains("has 8 in mxfp4") && Contains("'fused_ar/h7168/bf16/mxfp4/rms/w4/s1/sm_90'"));
  // A mode the module does not take is named first, whatever the count.
  REQUIRE_THROWS_WITH(KernelSpec::parse("group_quant/h6144/bf16/fp8/g128/f32/sm_90"),
                      Contains(modes_or(group_quant_takes) + ", not fp8"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("conv/h6144/bf16/sm_90"), Contains("unknown module 'conv'"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("token_quant/h6144/bf16/sm_52"), Contains("sm_70 or later"));
  REQUIRE_THROWS_WITH(KernelSpec::parse("token_quant/h6144/bf16/volta"), Contains("unknown target 'volta'"));
  REQUIRE_THROWS_WITH(KernelSpec::from_json(nlohmann::json{
                          {"module", "token_quant"}, {"hidden", "6144"}, {"dtype", "bf16"}, {"target", "sm_90"}}),
                      Contains("\"hidden\" must be an integer"));
}

TEST_CASE("targets know their vendor, warp size and FP8 format", "[cpu][spec]") {
  CHECK(Target::parse("sm_90").warp_size() == 32);
  CHECK(Target::parse("sm_90").hardware_fp8());
  CHECK_FALSE(Target::parse("sm_80").hardware_fp8());
  CHECK(Target::parse("sm_80").hardware_paired_f16());
  CHECK_FALSE(Target::parse("sm_75").hardware_paired_f16());
  CHECK_FALSE(Target::parse("gfx942").hardware_paired_f16());
  CHECK(Target::parse("gfx90a").warp_size() == 64);
  CHECK(Target::parse("gfx942").warp_size() == 64);
  CHECK(Target::parse("gfx942").fp8_format() == Fp8Format::e4m3fnuz);
  CHECK(Target::parse("gfx950").fp8_format() == Fp8Format::e4m3fn);
  CHECK(Target::parse("gfx1030").warp_size() == 32);
  CHECK(Target::parse("gfx1250").warp_size() == 32);
  CHECK(Target::parse("gfx1250").vendor() == Vendor::amd);
}

TEST_CASE("block shapes depend only on hidden and warp size and cover every vector", "[cpu][spec]") {
  for (int warp : {32, 64}) {
    for (int hidden = 8; hidden <= kMaxHidden; hidden += 8) {
      const BlockShape b = block_shape(hidden, warp);
      CAPTURE(hidden, warp);
      REQUIRE(b.threads % warp == 0);
      REQUIRE(b.threads <= kMaxThreadsPerBlock);
      REQUIRE(b.threads * b.vectors_per_thread >= hidden / 8);
      REQUIRE((b.threads - warp) * b.vectors_per_thread < hidden / 8);  // no whole idle warp
    }
  }
  CHECK(block_shape(6144, 32).threads == 384);
  CHECK(block_shape(6144, 32).vectors_per_thread == 2);
}

TEST_CASE("spec sets expand as cartesian products and reject bad configs with their JSON path", "[cpu][spec]") {
  const std::vector<Target> sm90{Target::parse("sm_90")};
  // rmsnorm_quant: every mode over the 7 hidden sizes it takes (fp8_group g128 6: 128 does not
  // divide 2880) and per-token FP8's mirror, x 2 dtypes x 2 norms; token_quant; fused_ar the same x
  // 3 worlds x 2 stages x eager and graph kernels; allreduce; group_quant: the modes it takes,
  // both dtypes.
  REQUIRE(default_hidden_sizes().size() == 7);
  int epilogue_modes = hidden_sizes_taking(Quant::fp8), group_quant = 0;
  for (Quant q : all_quants()) {
    epilogue_modes += hidden_sizes_taking(q);
    if (group_quant_takes(q)) group_quant += hidden_sizes_taking(q) * 2;
  }
  CHECK(default_specs(sm90).size() ==
        size_t(epilogue_modes * 2 * 2 + 7 * 2 + epilogue_modes * 2 * 2 * 3 * 2 * 2 + 7 * 2 * 3 * 2 * 2 + group_quant));
  // Without the graph kernels, what a group with graph_calls 0 loads.
  size_t eager = 0;
  for (const KernelSpec& s : default_specs(sm90)) eager += s.graph_inputs ? 0 : 1;
  CHECK(eager == size_t(epilogue_modes * 2 * 2 + 7 * 2 + epilogue_modes * 2 * 2 * 3 * 2 + 7 * 2 * 3 * 2 + group_quant));
  auto set = parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "rmsnorm_quant", "hidden": [6144, 8192],
      "dtype": ["bf16"], "quant": ["none", "fp8"], "norm": ["rms", "gemma"]}]})"),
                            sm90);
  CHECK(set.specs.size() == 8);
  auto with_targets =
      parse_spec_set(nlohmann::json::parse(
                         R"({"targets": ["sm_90", "gfx90a"], "specs": [{"module": "token_quant", "hidden": 2048}]})"),
                     {});
  CHECK(with_targets.specs.size() == 2 * 2);
  REQUIRE_THROWS_WITH(
      parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "rmsnorm_quant", "hiden": [1]}]})"), sm90),
      Contains("$.specs[0].hiden") && Contains("unknown key"));
  REQUIRE_THROWS_WITH(parse_spec_set(nlohmann::json::parse(R"({"specs": [{"dtype": ["bf16", "fp32"]}]})"), sm90),
                      Contains("$.specs[0].dtype[1]") && Contains("fp32"));
  REQUIRE_THROWS_WITH(
      parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "token_quant", "hidden": [6143]}]})"), sm90),
      Contains("$.specs[0]") && Contains("6143"));
  REQUIRE_THROWS_WITH(parse_spec_set(nlohmann::json::parse(R"({"spec": []})"), sm90),
                      Contains("$.spec") && Contains("unknown key"));
  REQUIRE_THROWS_WITH(parse_spec_set(nlohmann::json::parse(R"({"targets": ["sm_9x"], "specs": []})"), sm90),
                      Contains("$.targets[0]"));
}

TEST_CASE("block-scaled modes: text, JSON and packed forms carry the group size and scale format", "[cpu][spec]") {
  const auto g = KernelSpec::parse("fused_ar/h7168/bf16/fp8_group/g128/ue8m0_f32/rms/w8/s1/sm_90");
  CHECK(g.mode.quant == Quant::fp8_group);
  CHECK(g.mode.group_size == 128);
  CHECK(g.mode.scale_format == ScaleFormat::ue8m0_f32);
  CHECK(g.text() == "fused_ar/h7168/bf16/fp8_group/g128/ue8m0_f32/rms/w8/s1/sm_90");
  CHECK(KernelSpec::from_json(g.json()) == g);
  CHECK(g.json()["group_size"] == 128);
  CHECK(g.json()["scale_format"] == "ue8m0_f32");
  const auto mx = KernelSpec::parse("rmsnorm_quant/h2880/f16/mxfp4/mirror/gemma/sm_90");
  CHECK(mx.canonical().mode.group_size == 0);  // MXFP4's blocks are always 32: no field
  CHECK(mx.text() == "rmsnorm_quant/h2880/f16/mxfp4/mirror/gemma/sm_90");
  CHECK(KernelSpec::from_json(mx.json()) == mx);
  // A group size or format set on a mode without groups is not part of the spec.
  KernelSpec plain = KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8/rms/sm_90");
  KernelSpec with_group = plain;
  with_group.mode.group_size = 64, with_group.mode.scale_format = ScaleFormat::e8m0;
  CHECK(with_group == plain);
  CHECK(with_group.packed() == plain.packed());
  // Every group size and scale format packs apart.
  std::set<std::uint64_t> seen;
  for (int group : {32, 64, 128}) {
    for (ScaleFormat f : all_scale_formats()) {
      KernelSpec s = g;
      s.mode.group_size = group, s.mode.scale_format = f;
      CHECK(seen.insert(s.packed()).second);
    }
  }
}

TEST_CASE("block-scaled modes: bad group sizes and hidden sizes are named", "[cpu][spec]") {
  CHECK_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8_group/g48/f32/rms/sm_90"),
                    Contains("group size 48") && Contains("32, 64 and 128"));
  CHECK_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h2880/bf16/fp8_group/g128/f32/rms/sm_90"),
                    Contains("group size 128 does not divide hidden size 2880"));
  CHECK_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8_group/g128/f16/rms/sm_90"),
                    Contains("unknown scale format 'f16'"));
  CHECK_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h6144/bf16/fp8_group/rms/sm_90"), Contains("fields"));
  CHECK_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h6152/bf16/mxfp4/rms/sm_90"), Contains("divisible by 32"));
  // Spec sets: without "quant", a block-scaled mode skips hidden sizes it cannot take; named, it refuses.
  const std::vector<Target> sm90{Target::parse("sm_90")};
  auto set = parse_spec_set(
      nlohmann::json::parse(
          R"({"specs": [{"module": "rmsnorm_quant", "hidden": [2880], "dtype": "bf16", "norm": "rms"}]})"),
      sm90);
  // every mode but fp8_group (group 128 does not divide 2880), and "mirror" is false unless named
  size_t taking_2880 = 0;
  for (Quant q : all_quants()) taking_2880 += q == Quant::fp8_group ? 0 : 1;
  CHECK(set.specs.size() == taking_2880);
  set = parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "rmsnorm_quant", "hidden": [2880], "dtype":
      "bf16", "norm": "rms", "mirror": [false, true]}]})"),
                       sm90);
  CHECK(set.specs.size() == 2 * taking_2880 - 1);  // each mode with its mirror too, but none (it needs a quant mode)
  CHECK_THROWS_WITH(parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "rmsnorm_quant", "quant": "none",
      "mirror": true}]})"),
                                   sm90),
                    Contains("$.specs[0]") && Contains("mirror is set with quant none"));
  CHECK_THROWS_WITH(
      parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "rmsnorm_quant", "mirror": "yes"}]})"), sm90),
      Contains("$.specs[0].mirror[0]") && Contains("true or false"));
  CHECK_THROWS_WITH(parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "rmsnorm_quant", "hidden": 2880,
      "quant": "fp8_group"}]})"),
                                   sm90),
                    Contains("$.specs[0]") && Contains("does not divide"));
  set = parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "fused_ar", "hidden": 7168, "dtype": "bf16",
      "quant": "fp8_group", "group_size": [64, 128], "scale_format": ["f32", "e8m0"], "norm": "rms", "world": 4,
      "stage": 1}]})"),
                       sm90);
  CHECK(set.specs.size() == 4 * 2);  // each with its graph kernel
  set = parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "fused_ar", "hidden": 7168, "dtype": "bf16",
      "quant": "fp8", "norm": "rms", "world": 4, "stage": 1, "graph_inputs": true}]})"),
                       sm90);
  REQUIRE(set.specs.size() == 1);
  CHECK(set.specs[0].text() == "fused_ar/h7168/bf16/fp8/rms/w4/s1/graph/sm_90");
  CHECK_THROWS_WITH(
      parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "fused_ar", "graph_inputs": 1}]})"), sm90),
      Contains("$.specs[0].graph_inputs[0]") && Contains("true or false"));
  // group_quant takes fp8_group, mxfp4, fp8_static and nvfp4 only: named with another mode, a clear error.
  CHECK(KernelSpec::parse("group_quant/h7168/bf16/fp8_group/g128/e8m0/sm_90").text() ==
        "group_quant/h7168/bf16/fp8_group/g128/e8m0/sm_90");
  CHECK(KernelSpec::parse("group_quant/h2880/f16/mxfp4/sm_90").mode.quant == Quant::mxfp4);
  CHECK(KernelSpec::parse("group_quant/h5120/bf16/nvfp4/sm_90").mode.quant == Quant::nvfp4);
  CHECK(KernelSpec::parse("group_quant/h5120/bf16/fp8_static/sm_90").text() ==
        "group_quant/h5120/bf16/fp8_static/sm_90");
  CHECK(KernelSpec::parse("rmsnorm_quant/h2880/f16/nvfp4/mirror/gemma/sm_90").text() ==
        "rmsnorm_quant/h2880/f16/nvfp4/mirror/gemma/sm_90");
  CHECK_THROWS_WITH(KernelSpec::parse("rmsnorm_quant/h6152/bf16/nvfp4/rms/sm_90"), Contains("divisible by 16"));
  CHECK_THROWS_WITH(KernelSpec::parse("group_quant/h7168/bf16/fp8/sm_90"), Contains(modes_or(group_quant_takes)));
  CHECK_THROWS_WITH(KernelSpec::parse("group_quant/h7168/bf16/nvfp4/mirror/sm_90"),
                    Contains("group_quant writes no mirror"));
  CHECK_THROWS_WITH(
      parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "group_quant", "quant": "fp8"}]})"), sm90),
      Contains("$.specs[0]") && Contains(modes_or(group_quant_takes)));
  // Without "quant": the modes it takes, with the default group 128 and fp32 scales, both dtypes.
  set = parse_spec_set(nlohmann::json::parse(R"({"specs": [{"module": "group_quant", "hidden": 4096}]})"), sm90);
  int group_quant_4096 = 0;
  for (Quant q : all_quants()) group_quant_4096 += group_quant_takes(q) ? 2 : 0;
  CHECK(set.specs.size() == size_t(group_quant_4096));
}

// One codec (templates/codes.cuh): a spec's packed number, the mode argument of the PyTorch ops
// and a call descriptor put each field in one place, and each decodes back to what was encoded.
TEST_CASE("packed specs, mode codes and call descriptors round-trip over every default spec", "[cpu][spec]") {
  std::vector<Target> targets;
  for (const char* name : {"sm_80", "sm_90", "sm_100", "gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1200", "gfx1250"})
    targets.push_back(Target::parse(name));
  const auto specs = default_specs(targets);
  REQUIRE(specs.size() > 1000);
  std::map<std::pair<std::uint64_t, std::string>, std::string> seen;
  for (const KernelSpec& s : specs) {
    CAPTURE(s.text());
    CHECK(KernelSpec::unpacked(s.packed(), s.target) == s.canonical());
    const auto [it, inserted] = seen.emplace(std::make_pair(s.packed(), s.target.name()), s.text());
    CHECK(it->second == s.text());  // one number per kernel of a target
    if (!uses_quant(s.module)) continue;
    for (ScaleLayout layout : all_scale_layouts()) {
      EpilogueMode mode = s.mode;
      mode.scale_layout = layout;
      if (!takes_group_size(mode.quant)) mode.group_size = 128, mode.scale_format = ScaleFormat::f32;
      const auto back = mode_of_code(mode_code(mode));
      REQUIRE(back.has_value());
      CHECK(*back == mode);
    }
    const unsigned long long call = call_descriptor(
        2517, unsigned(s.hidden), s.dtype == DType::bf16, unsigned(s.quant_code()), unsigned(s.mode.norm),
        unsigned(s.stage), s.module == Module::fused_ar, unsigned(s.mode.group_size), unsigned(s.mode.scale_format));
    CHECK(call_tokens(call) == 2517);
    CHECK(call_hidden(call) == unsigned(s.hidden));
    CHECK(call_quant(call) == unsigned(s.quant_code()));
    CHECK(call_group(call) == unsigned(s.mode.group_size));
    CHECK(call_norm(call) == unsigned(s.mode.norm));
    CHECK(call_stage(call) == unsigned(s.stage));
    // The call's fields sit where the spec's do: a call descriptor without its tokens is the
    // spec's number without the spec's own fields.
    const std::uint64_t spec_fields = codes::ModuleBits::put(~0u) | codes::WorldBits::put(~0u) |
                                      codes::ViewsBits::put(~0u) | codes::GraphInputsBits::put(~0u);
    CHECK((call & ~std::uint64_t(codes::TokensBits::mask())) == (s.packed() & ~spec_fields));
  }
  // Numbers no encoder makes are refused, not read as some mode.
  CHECK_FALSE(mode_of_code(-1).has_value());
  CHECK_FALSE(mode_of_code(std::int64_t(codes::QuantBits::put(15))).has_value());
  CHECK_FALSE(mode_of_code(std::int64_t(codes::ScaleLayoutBits::put(3))).has_value());
  CHECK_FALSE(mode_of_code(std::int64_t(codes::TokensBits::put(1))).has_value());
}
