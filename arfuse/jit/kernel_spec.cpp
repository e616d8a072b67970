#include "arfuse/jit/kernel_spec.hpp"

#include <fmt/format.h>

#include <charconv>
#include <optional>

#include <nlohmann/json.hpp>

#include "arfuse/base/names.hpp"
#include "arfuse/error.hpp"
#include "arfuse/templates/limits.cuh"

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

void check_module_takes(Module module, Quant quant) {
  if (!takes_quant(module, quant)) {
    throw Error(
        fmt::format("group_quant quantises y with fp8_group, mxfp4, fp8_static or nvfp4, not {}", to_string(quant)));
  }
}

// How many fields a spec of `module` has: `plain` without a group FP8 mode's two; in `quant` where
// known, else both counts (the example may be in either).
std::string field_count_text(Module module, std::optional<Quant> quant, size_t plain) {
  if (!uses_quant(module)) return fmt::format("{}", plain);
  if (quant) return fmt::format("{} in {}", plain + (is_group_fp8(*quant) ? 2 : 0), to_string(*quant));
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
bool takes_quant(Module m, Quant q) {
  return m != Module::group_quant || q == Quant::fp8_group || q == Quant::mxfp4 || q == Quant::fp8_static ||
         q == Quant::nvfp4;
}

void KernelSpec::validate() const {
  const KernelSpec c = canonical();
  check_module_takes(module, mode.quant);
  c.mode.validate(hidden);
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
  if (!uses_quant(module)) c.mode.quant = Quant::none;
  // 0: no group size (the kernels' template argument for every mode without groups)
  if (!is_group_fp8(c.mode.quant)) c.mode.group_size = 0, c.mode.scale_format = ScaleFormat::f32;
  c.mode.scale_layout = ScaleLayout::row_major;  // the launch's strides, not the kernel
  if (!uses_norm(module)) c.mode.norm = Norm::rms;
  if (!uses_world(module)) c.world = 1, c.stage = 1;
  return c;
}

std::uint64_t KernelSpec::packed() const {
  const KernelSpec c = canonical();
  // hidden <= kMaxHidden (32768) fits 16 bits once validated; group <= 128 fits 8.
  return std::uint64_t(c.module) | std::uint64_t(c.dtype) << 4 | std::uint64_t(c.mode.quant) << 8 |
         std::uint64_t(c.mode.norm) << 12 | std::uint64_t(c.world) << 16 | std::uint64_t(c.stage) << 24 |
         std::uint64_t(std::uint32_t(c.hidden) & 0xffffu) << 32 |
         std::uint64_t(std::uint32_t(c.mode.group_size) & 0xffu) << 48 | std::uint64_t(c.mode.scale_format) << 56 |
         std::uint64_t(c.views) << 62;
}

std::string KernelSpec::text() const {
  const KernelSpec c = canonical();
  std::string s = fmt::format("{}/h{}/{}", to_string(c.module), c.hidden, to_string(c.dtype));
  if (uses_quant(c.module)) s += fmt::format("/{}", to_string(c.mode.quant));
  if (is_group_fp8(c.mode.quant)) s += fmt::format("/g{}/{}", c.mode.group_size, to_string(c.mode.scale_format));
  if (uses_norm(c.module)) s += fmt::format("/{}", to_string(c.mode.norm));
  if (uses_world(c.module)) s += fmt::format("/w{}/s{}", c.world, c.stage);
  if (c.views) s += "/views";
  return s + "/" + c.target.name();
}

KernelSpec KernelSpec::parse(std::string_view text) {
  auto parts = split(text, '/');
  KernelSpec s;
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
  if (quant) check_module_takes(s.module, *quant);
  const size_t expected = plain + (quant && is_group_fp8(*quant) ? 2 : 0);
  if (parts.size() != expected) {
    throw Error(fmt::format("spec '{}' has {} fields; a {} spec has {}, e.g. '{}'", text, parts.size(),
                            to_string(s.module), field_count_text(s.module, quant, plain),
                            example_text(s.module, quant)));
  }
  size_t i = 1;
  s.hidden = parse_prefixed_int(parts[i++], 'h', "hidden", text);
  s.dtype = parse_dtype(parts[i++]);
  if (uses_quant(s.module)) s.mode.quant = parse_quant(parts[i++]);
  if (is_group_fp8(s.mode.quant)) {
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
  if (is_group_fp8(c.mode.quant))
    j["group_size"] = c.mode.group_size, j["scale_format"] = to_string(c.mode.scale_format);
  if (uses_norm(c.module)) j["norm"] = to_string(c.mode.norm);
  if (uses_world(c.module)) j["world"] = c.world, j["stage"] = c.stage;
  if (c.views) j["views"] = true;
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
  if (is_group_fp8(s.mode.quant)) {
    s.mode.group_size = int_field("group_size");
    s.mode.scale_format = parse_scale_format(string_field("scale_format"));
  }
  if (uses_norm(s.module)) s.mode.norm = parse_norm(string_field("norm"));
  if (uses_world(s.module)) s.world = int_field("world"), s.stage = int_field("stage");
  if (j.contains("views")) {
    if (!j["views"].is_boolean())
      throw Error(fmt::format("spec field \"views\" must be true or false, not {}", j["views"].dump()));
    s.views = j["views"].get<bool>();
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
