#include "jit/spec_set.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

namespace arfuse::jit {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(fmt::format("config {}: {}", path, what));
}

// The field as a list of values (a scalar is a list of one).
std::vector<json> as_list(const json& v, const std::string& path) {
  if (v.is_array()) {
    if (v.empty()) bad(path, "an empty list selects nothing; omit the field to take all values");
    return std::vector<json>(v.begin(), v.end());
  }
  return {v};
}

template <typename Enum, typename Parse>
std::vector<Enum> enum_field(const json& entry, const char* key, const std::string& path, const std::vector<Enum>& all,
                             Parse parse) {
  if (!entry.contains(key)) return all;
  std::vector<Enum> out;
  int i = 0;
  for (const auto& v : as_list(entry[key], path + "." + key)) {
    const std::string p = fmt::format("{}.{}[{}]", path, key, i++);
    if (!v.is_string()) bad(p, fmt::format("{} must be a string", v.dump()));
    try {
      out.push_back(parse(v.template get<std::string>()));
    } catch (const Error& e) {
      bad(p, e.what());
    }
  }
  return out;
}

std::vector<int> int_field(const json& entry, const char* key, const std::string& path, const std::vector<int>& all) {
  if (!entry.contains(key)) return all;
  std::vector<int> out;
  int i = 0;
  for (const auto& v : as_list(entry[key], path + "." + key)) {
    const std::string p = fmt::format("{}.{}[{}]", path, key, i++);
    if (!v.is_number_integer()) bad(p, fmt::format("{} must be a whole number", v.dump()));
    // Range-checked before the narrowing: 4294967304 must not wrap to 8.
    const bool fits = v.is_number_unsigned() ? v.get<std::uint64_t>() <= std::uint64_t(INT_MAX)
                                             : v.get<std::int64_t>() >= INT_MIN && v.get<std::int64_t>() <= INT_MAX;
    if (!fits) bad(p, fmt::format("{} is out of range for {}", v.dump(), key));
    out.push_back(v.get<int>());
  }
  return out;
}

std::vector<bool> bool_field(const json& entry, const char* key, const std::string& path,
                             const std::vector<bool>& all) {
  if (!entry.contains(key)) return all;
  std::vector<bool> out;
  int i = 0;
  for (const auto& v : as_list(entry[key], path + "." + key)) {
    const std::string p = fmt::format("{}.{}[{}]", path, key, i++);
    if (!v.is_boolean()) bad(p, fmt::format("{} must be true or false", v.dump()));
    out.push_back(v.get<bool>());
  }
  return out;
}

// The lists one entry selects. quants_defaulted: the entry named no quant mode, so a hidden
// size that a block-scaled mode's group does not divide is skipped for that mode, not refused.
struct Selection {
  std::vector<int> hidden;
  std::vector<DType> dtypes;
  std::vector<Quant> quants;
  bool quants_defaulted = false;
  bool modules_defaulted = false;  // group_quant then skips the modes it does not take
  std::vector<int> groups;
  std::vector<ScaleFormat> scales;
  std::vector<bool> mirrors;
  std::vector<Norm> norms;
  std::vector<int> worlds, stages;
  std::vector<bool> graph_inputs{false, true};  // fused_ar, allreduce: the eager and the graph kernel
};

bool divides(Quant q, int group, int hidden) {
  try {
    check_hidden(hidden);
  } catch (const Error&) {
    return true;  // not the mode's to skip: validate() names it
  }
  try {
    EpilogueMode{q, Norm::rms, group}.validate(hidden);
    return true;
  } catch (const Error&) {
    return false;
  }
}

void expand(Module m, const Selection& sel, const std::vector<Target>& targets, const std::string& path,
            std::vector<KernelSpec>& out) {
  const std::vector<Quant> q = uses_quant(m) ? sel.quants : std::vector<Quant>{Quant::none};
  const std::vector<Norm> n = uses_norm(m) ? sel.norms : std::vector<Norm>{Norm::rms};
  const std::vector<int> w = uses_world(m) ? sel.worlds : std::vector<int>{1};
  const std::vector<int> s = uses_world(m) ? sel.stages : std::vector<int>{1};
  const std::vector<bool> gi = uses_world(m) ? sel.graph_inputs : std::vector<bool>{false};
  for (const auto& target : targets)
    for (int h : sel.hidden)
      for (DType d : sel.dtypes)
        for (Quant qq : q)
          for (int g : takes_group_size(qq) ? sel.groups : std::vector<int>{0})
            for (ScaleFormat sf : takes_group_size(qq) ? sel.scales : std::vector<ScaleFormat>{ScaleFormat::f32})
              for (bool mirror : uses_quant(m) ? sel.mirrors : std::vector<bool>{false})
                for (Norm nn : n)
                  for (int ww : w)
                    for (int ss : s)
                      for (bool graph : gi) {
                        if (sel.quants_defaulted && !divides(qq, g, h)) continue;
                        const bool taken = takes_quant(m, qq) && !(mirror && (qq == Quant::none || !takes_mirror(m)));
                        if (!taken && (sel.quants_defaulted || sel.modules_defaulted)) continue;
                        KernelSpec spec;
                        spec.module = m, spec.hidden = h, spec.dtype = d, spec.mode.quant = qq, spec.mode.norm = nn;
                        spec.mode.group_size = g, spec.mode.scale_format = sf, spec.mode.mirror = mirror;
                        spec.world = ww, spec.stage = ss, spec.target = target, spec.graph_inputs = graph;
                        try {
                          spec.validate();
                        } catch (const Error& e) {
                          bad(path, e.what());
                        }
                        out.push_back(spec);
                      }
}

}  // namespace

const std::vector<int>& default_hidden_sizes() {
  static const std::vector<int> v{2048, 2880, 4096, 5120, 6144, 7168, 8192};
  return v;
}

const std::vector<int>& default_world_sizes() {
  static const std::vector<int> v{2, 4, 8};
  return v;
}

const std::vector<Quant>& default_quants() {
  // Every mode, group 128 with fp32 scales: what engines ask for most; the rest compile on first
  // use.
  static const std::vector<Quant> v = all_quants();
  return v;
}

std::vector<KernelSpec> default_specs(const std::vector<Target>& targets) {
  std::vector<KernelSpec> out;
  Selection sel;
  sel.hidden = default_hidden_sizes(), sel.dtypes = all_dtypes(), sel.quants = default_quants();
  sel.quants_defaulted = sel.modules_defaulted = true;
  sel.groups = {128}, sel.scales = {ScaleFormat::f32}, sel.mirrors = {false}, sel.norms = all_norms();
  sel.worlds = default_world_sizes(), sel.stages = {1, 2};
  for (Module m : all_modules()) expand(m, sel, targets, "(default set)", out);
  // The mirror only with per-token FP8 (the others' mirrors compile on first use).
  sel.quants = {Quant::fp8}, sel.mirrors = {true};
  for (Module m : all_modules())
    if (takes_mirror(m)) expand(m, sel, targets, "(default set)", out);
  return out;
}

SpecSet parse_spec_set(const json& config, const std::vector<Target>& targets) {
  if (!config.is_object()) bad("$", "must be an object with \"specs\" (and optionally \"targets\")");
  for (auto& [key, value] : config.items()) {
    if (key != "specs" && key != "targets") bad("$." + key, "unknown key; allowed are specs, targets");
  }
  SpecSet set;
  std::vector<Target> use = targets;
  if (config.contains("targets")) {
    int i = 0;
    for (const auto& t : as_list(config["targets"], "$.targets")) {
      const std::string p = fmt::format("$.targets[{}]", i++);
      if (!t.is_string()) bad(p, fmt::format("{} must be a string such as \"sm_90\"", t.dump()));
      try {
        Target::parse(t.get<std::string>());
      } catch (const Error& e) {
        bad(p, e.what());
      }
      set.targets.push_back(t.get<std::string>());
    }
    if (use.empty()) {
      for (const auto& t : set.targets) use.push_back(Target::parse(t));
    }
  }
  if (!config.contains("specs") || !config["specs"].is_array()) bad("$.specs", "must be a list of spec objects");
  static const std::vector<std::string> keys{"module", "hidden", "dtype", "quant", "group_size",  "scale_format",
                                             "mirror", "norm",   "world", "stage", "graph_inputs"};
  for (size_t i = 0; i < config["specs"].size(); ++i) {
    const json& entry = config["specs"][i];
    const std::string path = fmt::format("$.specs[{}]", i);
    if (!entry.is_object()) bad(path, "must be an object");
    for (auto& [key, value] : entry.items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        bad(path + "." + key,
            "unknown key; allowed are module, hidden, dtype, quant, group_size, scale_format, mirror, norm, world, "
            "stage, graph_inputs");
      }
    }
    const auto modules = enum_field(entry, "module", path, all_modules(), parse_module);
    Selection sel;
    sel.hidden = int_field(entry, "hidden", path, default_hidden_sizes());
    sel.dtypes = enum_field(entry, "dtype", path, all_dtypes(), parse_dtype);
    sel.quants = enum_field(entry, "quant", path, all_quants(), parse_quant);
    sel.quants_defaulted = !entry.contains("quant");
    sel.modules_defaulted = !entry.contains("module");
    sel.groups = int_field(entry, "group_size", path, {128});
    sel.scales =
        enum_field(entry, "scale_format", path, std::vector<ScaleFormat>{ScaleFormat::f32}, parse_scale_format);
    sel.mirrors = bool_field(entry, "mirror", path, {false});
    sel.norms = enum_field(entry, "norm", path, all_norms(), parse_norm);
    sel.worlds = int_field(entry, "world", path, default_world_sizes());
    sel.stages = int_field(entry, "stage", path, {1, 2});
    sel.graph_inputs = bool_field(entry, "graph_inputs", path, {false, true});
    for (Module m : modules) expand(m, sel, use, path, set.specs);
  }
  return set;
}

}  // namespace arfuse::jit
