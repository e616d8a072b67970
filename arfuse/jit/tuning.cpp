#include "jit/tuning.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"
#include "arfuse/settings.hpp"

#include "base/bounded_json.hpp"
#include "base/trusted_folder.hpp"
#include "jit/kernel_spec.hpp"

namespace arfuse::jit {
namespace {

// The measurements behind these numbers: docs/performance.md, "Tuning decisions". Keys are
// targets ("sm_90"), optionally with ":virtual" for groups whose ranks share a GPU; a missing key
// falls back to "default[:virtual]".
constexpr const char* kEmbedded = R"({
  "version": 1,
  "measured": "default:virtual from arfuse-bench fused --tune on one H200 (2026-12-02, 2026-12-03): )"
                                  R"(W = 2 and 4 one stage at every size (16..2517 x 6144), W = 8 two stages from )"
                                  R"(512 x 6144 (6 MiB; 89.2 vs 96.2 us, 2048 x 6144 320.3 vs 349.5 us); default )"
                                  R"((real GPUs) is a guess, not yet measured on NVLink",
  "targets": {
    "default": {"2": {"two_stage_min_bytes": 4194304},
                "4": {"two_stage_min_bytes": 2097152},
                "8": {"two_stage_min_bytes": 1048576}},
    "default:virtual": {"2": {"two_stage_min_bytes": 1073741824},
                        "4": {"two_stage_min_bytes": 1073741824},
                        "8": {"two_stage_min_bytes": 6291456}}
  }
})";

[[noreturn]] void bad(const std::string& origin, const std::string& path, const std::string& what) {
  throw Error(fmt::format("tuning table {}: {}: {}", origin, path, what));
}

}  // namespace

TuningTable TuningTable::parse(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  std::string why;
  if (!parse_json(text, j, why)) throw Error(fmt::format("tuning table {} is not valid JSON: {}", origin, why));
  TuningTable t;
  t.origin_ = origin;
  if (!j.is_object()) bad(origin, "$", "must be an object");
  for (auto& [key, value] : j.items()) {
    if (key != "version" && key != "targets" && key != "measured") {
      bad(origin, "$." + key, "unknown key; allowed are version, targets, measured");
    }
  }
  if (!j.contains("version") || j["version"] != 1) bad(origin, "$.version", "must be 1");
  if (!j.contains("targets") || !j["targets"].is_object()) bad(origin, "$.targets", "must be an object");
  for (auto& [target, worlds] : j["targets"].items()) {
    const std::string tpath = "$.targets." + target;
    if (!worlds.is_object()) bad(origin, tpath, "must be an object keyed by world size");
    for (auto& [world_text, entry] : worlds.items()) {
      const std::string wpath = tpath + "." + world_text;
      int world = 0;
      const char* end = world_text.data() + world_text.size();
      const auto [ptr, ec] = std::from_chars(world_text.data(), end, world);
      if (world_text.empty() || world_text[0] == '-' || ec != std::errc() || ptr != end) {
        bad(origin, wpath, "a world size must be a number from 2 to 8");
      }
      if (world < kMinWorld || world > kMaxWorld) bad(origin, wpath, "a world size must be from 2 to 8");
      if (!entry.is_object() || entry.size() != 1 || !entry.contains("two_stage_min_bytes")) {
        bad(origin, wpath, "must be {\"two_stage_min_bytes\": N}");
      }
      const auto& n = entry["two_stage_min_bytes"];
      if (!n.is_number_unsigned())
        bad(origin, wpath + ".two_stage_min_bytes", fmt::format("{} is not a byte count >= 0", n.dump()));
      t.thresholds_[target][world] = n.get<std::uint64_t>();
    }
  }
  return t;
}

TuningTable TuningTable::embedded_default() { return parse(kEmbedded, "(embedded default)"); }

TuningTable TuningTable::from_environment() {
  const auto path = settings::text("ARFUSE_TUNING");
  if (!path) return embedded_default();
  FileDescriptor fd;
  std::string why, text;
  if (!open_trusted(*path, Trusted::file, fd, why) || !read_bounded(fd.get(), kMaxConfigBytes, text, why))
    throw ConfigError(fmt::format("ARFUSE_TUNING={} is not used: {}", *path, why));
  return parse(text, *path);
}

std::uint64_t TuningTable::two_stage_min_bytes(const std::string& target, int world, bool virtual_ranks) const {
  std::vector<std::string> keys;
  if (virtual_ranks) keys = {target + ":virtual", "default:virtual"};
  keys.push_back(target);
  keys.push_back("default");
  for (const std::string& key : keys) {
    auto t = thresholds_.find(key);
    if (t == thresholds_.end()) continue;
    auto w = t->second.find(world);
    if (w != t->second.end()) return w->second;
  }
  return UINT64_MAX;  // no entry: always one stage
}

int TuningTable::stage_for(const std::string& target, int world, std::uint64_t bytes, bool virtual_ranks) const {
  return bytes >= two_stage_min_bytes(target, world, virtual_ranks) ? 2 : 1;
}

}  // namespace arfuse::jit
