#include "jit/kernel_spec.hpp"

#include <fmt/format.h>

#include <charconv>
#include <optional>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

#include "base/names.hpp"
#include "templates/codes.cuh"
#include "templates/limits.cuh"
#include "templates/quant_table.cuh"

namespace arfuse::jit {
namespace {

// A spec of `module` as parse reads it, in `quant` where known (a group mode's example then shows
// its group fields).
std::string example_text(Module module, std::optional<Quant> quant) {
  KernelSpec e;
  e.module = module, e.hidden = 7168, e.dtype = DType::bf16, e.world = 4, e.stage = 1;
  e.mode.quant = quant ? *quant : module == Module::group_quant ? Quant::fp8_group : Quant::fp8;
  return e.text();
}

// The modes group_quant takes, as a message names them ("a, b or c").
std::string group_quant_modes() {
  std::vector<std::string> names;
  for (Quant q : all_quants())
    if (group_quant_takes(q)) names.push_back(to_string(q));
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

void check_module_takes(Module module, const EpilogueMode& mode) {
  if (!takes_quant(module, mode.quant)) {
    throw Error(fmt::format("group_quant quantises y with {}, not {}", group_quant_modes(), to_string(mode.quant)));
  }
  if (uses_quant(module) && !takes_mirror(module) && mode.mirror) {
    throw Error(fmt::format("{} writes no mirror: y is its input (the mirror belongs to the epilogue kernels)",
                            to_string(module)));
  }
}

// How many fields a spec of `module` has: `plain` without a group FP8 mode's two; in `quant` where
// known, else both counts (the example may be in either).
std::string field_count_text(Module module, std::optional<Quant> quant, size_t plain) {
  if (!uses_quant(module)) return fmt::format("{}", plain);
  if (quant) return fmt::format("{} in {}", plain + (takes_group_size(*quant) ? 2 : 0), to_string(*quant));
  return fmt::format("{}, or {} in a group FP8 mode (its group size and scale format)", plain, plain + 2);
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t begin = 0;
  while (true) {
    size_t end = text.find(sep, begin);
    parts.push_back(text.substr(begin, end - begin));
    if (end == std::string_view::npos) return parts;
    begin = end + 1;
  }
}

int parse_prefixed_int(std::string_view part, char prefix, std::string_view what, std::string_view whole) {
  int value = 0;
  if (part.size() < 2 || part[0] != prefix ||
      std::from_chars(part.data() + 1, part.data() + part.size(), value).ptr != part.data() + part.size()) {
    throw Error(fmt::format("bad {} field '{}' in spec '{}': expected {}<number>", what, part, whole, prefix));
  }
  return value;
}

}  // namespace

bool uses_quant(Module m) { return m == Module::rmsnorm_quant || m == Module::fused_ar || m == Module::group_quant; }
bool uses_norm(Module m) { return m == Module::rmsnorm_quant || m == Module::fused_ar; }
bool uses_world(Module m) { return m == Module::fused_ar || m == Module::allreduce; }
bool takes_mirror(Module m) { return m == Module::rmsnorm_quant || m == Module::fused_ar; }
bool takes_quant(Module m, Quant q) { return m != Module::group_quant || group_quant_takes(q); }

void KernelSpec::validate() const {
  const KernelSpec c = canonical();
  check_module_takes(module, mode);
  c.mode.validate(hidden);
  if (graph_inputs && !uses_world(module))
    throw Error(fmt::format("{} reads no peer's input: graph_inputs is for fused_ar and allreduce", to_string(module)));
  if (uses_world(module)) {
    if (world < kMinWorld || world > kMaxWorld) {
      throw Error(fmt::format("world size {} is not supported by {}: allowed are {} to {}", world, to_string(module),
                              kMinWorld, kMaxWorld));
    }
    if (stage != 1 && stage != 2) {
      throw Error(fmt::format("stage {} is not supported by {}: allowed are 1 and 2", stage, to_string(module)));
    }
  }
}

KernelSpec KernelSpec::canonical() const {
  KernelSpec c = *this;
  if (!uses_quant(module)) c.mode.quant = Quant::none, c.mode.mirror = false;
  // 0: no group size (the kernels' template argument for every mode without groups)
  if (!takes_group_size(c.mode.quant)) c.mode.group_size = 0, c.mode.scale_format = ScaleFormat::f32;
  c.mode.scale_layout = ScaleLayout::row_major;  // the launch's strides, not the kernel
  if (!uses_norm(module)) c.mode.norm = Norm::rms;
  if (!uses_world(module)) c.world = 1, c.stage = 1, c.graph_inputs = false;
  return c;
}

std::uint64_t KernelSpec::packed() const {
  using namespace codes;
  const KernelSpec c = canonical();
  return ModuleBits::put(unsigned(c.module)) | HiddenBits::put(hidden_code(unsigned(c.hidden))) |
         Bf16Bits::put(c.dtype == DType::bf16) | QuantBits::put(unsigned(c.quant_code())) |
         NormBits::put(unsigned(c.mode.norm)) | GroupBits::put(group_code(unsigned(c.mode.group_size))) |
         ScaleFormatBits::put(unsigned(c.mode.scale_format)) | WorldBits::put(unsigned(c.world)) |
         StageBits::put(unsigned(c.stage - 1)) | EpilogueBits::put(c.module == Module::fused_ar) |
         ViewsBits::put(c.views) | GraphInputsBits::put(c.graph_inputs);
}

int KernelSpec::quant_code() const { return arfuse::quant_code(int(mode.quant), mode.mirror); }

KernelSpec KernelSpec::unpacked(std::uint64_t code, const Target& target) {
  using namespace codes;
  KernelSpec s;
  s.module = Module(ModuleBits::get(code));
  s.hidden = int(hidden_of_code(HiddenBits::get(code)));
  s.dtype = Bf16Bits::get(code) ? DType::bf16 : DType::f16;
  const int quant = int(QuantBits::get(code));
  s.mode.quant = Quant(quant_family(quant));
  s.mode.mirror = quant_mirror(quant);
  s.mode.norm = Norm(NormBits::get(code));
  s.mode.group_size = int(group_of_code(GroupBits::get(code)));
  s.mode.scale_format = ScaleFormat(ScaleFormatBits::get(code));
  s.world = int(WorldBits::get(code));
  s.stage = int(StageBits::get(code)) + 1;
  s.views = ViewsBits::get(code);
  s.graph_inputs = GraphInputsBits::get(code);
  s.target = target;
  return s;
}

std::int64_t mode_code(const EpilogueMode& mode) {
  using namespace codes;
  return std::int64_t(QuantBits::put(unsigned(quant_code(int(mode.quant), mode.mirror))) |
                      NormBits::put(unsigned(mode.norm)) | GroupBits::put(group_code(unsigned(mode.group_size))) |
                      ScaleFormatBits::put(unsigned(mode.scale_format)) |
                      ScaleLayoutBits::put(unsigned(mode.scale_layout)));
}

std::optional<EpilogueMode> mode_of_code(std::int64_t code) {
  using namespace codes;
  const auto c = std::uint64_t(code);
  const std::uint64_t fields = QuantBits::put(~0u) | NormBits::put(~0u) | GroupBits::put(~0u) |
                               ScaleFormatBits::put(~0u) | ScaleLayoutBits::put(~0u);
  const unsigned quant = QuantBits::get(c), format = ScaleFormatBits::get(c), layout = ScaleLayoutBits::get(c);
  if ((c & ~fields) != 0 || quant > unsigned(kMaxQuantCode) || format > unsigned(ScaleFormat::e8m0) ||
      layout > unsigned(ScaleLayout::swizzled_128x4))
    return std::nullopt;
  EpilogueMode mode;
  mode.quant = Quant(quant_family(int(quant)));
  mode.mirror = quant_mirror(int(quant));
  mode.norm = Norm(NormBits::get(c));
  mode.group_size = int(group_of_code(GroupBits::get(c)));
  mode.scale_format = ScaleFormat(format);
  mode.scale_layout = ScaleLayout(layout);
  return mode;
}

std::string KernelSpec::text() const {
  const KernelSpec c = canonical();
  std::string s = fmt::format("{}/h{}/{}", to_string(c.module), c.hidden, to_string(c.dtype));
  if (uses_quant(c.module)) s += fmt::format("/{}", to_string(c.mode.quant));
  if (takes_group_size(c.mode.quant)) s += fmt::format("/g{}/{}", c.mode.group_size, to_string(c.mode.scale_format));
  if (c.mode.mirror) s += "/mirror";
  if (uses_norm(c.module)) s += fmt::format("/{}", to_string(c.mode.norm));
  if (uses_world(c.module)) s += fmt::format("/w{}/s{}", c.world, c.stage);
  if (c.views) s += "/views";
  if (c.graph_inputs) s += "/graph";
  return s + "/" + c.target.name();
}

KernelSpec KernelSpec::parse(std::string_view text) {
  auto parts = split(text, '/');
  KernelSpec s;
  if (parts.size() >= 2 && parts[parts.size() - 2] == "graph") {
    s.graph_inputs = true;
    parts.erase(parts.end() - 2);
  }
  if (parts.size() >= 2 && parts[parts.size() - 2] == "views") {
    s.views = true;
    parts.erase(parts.end() - 2);
  }
  s.module = parse_module(parts[0]);
  const size_t plain =
      4 + (uses_quant(s.module) ? 1 : 0) + (uses_norm(s.module) ? 1 : 0) + (uses_world(s.module) ? 2 : 0);
  // A group FP8 mode carries its group size and scale format after it.
  const std::optional<Quant> quant =
      uses_quant(s.module) && parts.size() > 3 ? std::optional<Quant>(parse_quant(parts[3])) : std::nullopt;
  // The mirror, where present, follows the quant mode's fields.
  const size_t mirror_at = quant ? (takes_group_size(*quant) ? 6 : 4) : 0;
  if (quant && parts.size() > mirror_at && parts[mirror_at] == "mirror") {
    s.mode.mirror = true;
    parts.erase(parts.begin() + long(mirror_at));
  }
  if (quant) {
    EpilogueMode asked = s.mode;
    asked.quant = *quant;
    check_module_takes(s.module, asked);
  }
  const size_t expected = plain + (quant && takes_group_size(*quant) ? 2 : 0);
  if (parts.size() != expected) {
    throw Error(fmt::format("spec '{}' has {} fields; a {} spec has {}, e.g. '{}'", text, parts.size(),
                            to_string(s.module), field_count_text(s.module, quant, plain),
                            example_text(s.module, quant)));
  }
  size_t i = 1;
  s.hidden = parse_prefixed_int(parts[i++], 'h', "hidden", text);
  s.dtype = parse_dtype(parts[i++]);
  if (uses_quant(s.module)) s.mode.quant = parse_quant(parts[i++]);
  if (takes_group_size(s.mode.quant)) {
    s.mode.group_size = parse_prefixed_int(parts[i++], 'g', "group size", text);
    s.mode.scale_format = parse_scale_format(parts[i++]);
  }
  if (uses_norm(s.module)) s.mode.norm = parse_norm(parts[i++]);
  if (uses_world(s.module)) {
    s.world = parse_prefixed_int(parts[i++], 'w', "world", text);
    s.stage = parse_prefixed_int(parts[i++], 's', "stage", text);
  }
  s.target = Target::parse(parts[i]);
  s.validate();
  return s;
}

nlohmann::json KernelSpec::json() const {
  const KernelSpec c = canonical();
  nlohmann::json j = {{"module", to_string(c.module)},
                      {"hidden", c.hidden},
                      {"dtype", to_string(c.dtype)},
                      {"target", c.target.name()}};
  if (uses_quant(c.module)) j["quant"] = to_string(c.mode.quant);
  if (takes_group_size(c.mode.quant))
    j["group_size"] = c.mode.group_size, j["scale_format"] = to_string(c.mode.scale_format);
  if (c.mode.mirror) j["mirror"] = true;
  if (uses_norm(c.module)) j["norm"] = to_string(c.mode.norm);
  if (uses_world(c.module)) j["world"] = c.world, j["stage"] = c.stage;
  if (c.views) j["views"] = true;
  if (c.graph_inputs) j["graph_inputs"] = true;
  return j;
}

KernelSpec KernelSpec::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error(fmt::format("a spec must be a JSON object, not {}", j.dump()));
  auto string_field = [&](const char* key) -> std::string {
    if (!j.contains(key)) throw Error(fmt::format("spec {} has no \"{}\"", j.dump(), key));
    if (!j[key].is_string()) throw Error(fmt::format("spec field \"{}\" must be a string, not {}", key, j[key].dump()));
    return j[key].get<std::string>();
  };
  auto int_field = [&](const char* key) -> int {
    if (!j.contains(key)) throw Error(fmt::format("spec {} has no \"{}\"", j.dump(), key));
    if (!j[key].is_number_integer())
      throw Error(fmt::format("spec field \"{}\" must be an integer, not {}", key, j[key].dump()));
    return j[key].get<int>();
  };
  KernelSpec s;
  s.module = parse_module(string_field("module"));
  s.hidden = int_field("hidden");
  s.dtype = parse_dtype(string_field("dtype"));
  s.target = Target::parse(string_field("target"));
  if (uses_quant(s.module)) s.mode.quant = parse_quant(string_field("quant"));
  if (takes_group_size(s.mode.quant)) {
    s.mode.group_size = int_field("group_size");
    s.mode.scale_format = parse_scale_format(string_field("scale_format"));
  }
  if (uses_norm(s.module)) s.mode.norm = parse_norm(string_field("norm"));
  if (uses_world(s.module)) s.world = int_field("world"), s.stage = int_field("stage");
  if (j.contains("mirror")) {
    if (!j["mirror"].is_boolean())
      throw Error(fmt::format("spec field \"mirror\" must be true or false, not {}", j["mirror"].dump()));
    s.mode.mirror = j["mirror"].get<bool>();
  }
  if (j.contains("views")) {
    if (!j["views"].is_boolean())
      throw Error(fmt::format("spec field \"views\" must be true or false, not {}", j["views"].dump()));
    s.views = j["views"].get<bool>();
  }
  if (j.contains("graph_inputs")) {
    if (!j["graph_inputs"].is_boolean())
      throw Error(fmt::format("spec field \"graph_inputs\" must be true or false, not {}", j["graph_inputs"].dump()));
    s.graph_inputs = j["graph_inputs"].get<bool>();
  }
  s.validate();
  return s;
}

namespace {

const Names<Module> kModules{{Module::rmsnorm_quant, "rmsnorm_quant"},
                             {Module::token_quant, "token_quant"},
                             {Module::fused_ar, "fused_ar"},
                             {Module::allreduce, "allreduce"},
                             {Module::group_quant, "group_quant"}};

}  // namespace

const char* to_string(Module v) { return name_in(kModules, v); }
const std::vector<Module>& all_modules() {
  static const auto v = values_in(kModules);
  return v;
}
Module parse_module(std::string_view t) { return parse_in(kModules, "module", t); }

}  // namespace arfuse::jit
