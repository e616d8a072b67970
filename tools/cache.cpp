// arfuse-cache: inspect and maintain a kernel cache folder.
#include <cstdio>
#include <ctime>
#include <climits>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "arfuse/base/error.hpp"
#include "arfuse/cache/disk_cache.hpp"
#include "arfuse/jit/kernel_spec.hpp"
#include "cli.hpp"

namespace arfuse::tools {
namespace {

const char* kUsage = R"(usage: arfuse-cache [--cache-dir DIR] COMMAND [options]

commands:
  stat                  entries and bytes, in all and per target and module
  ls                    one line per entry: spec, target, size, last use
  verify [--fix]        check every entry (header, checksums); exit 1 if any is bad;
                        --fix removes the bad ones
  prune --max-bytes N   remove least recently used entries until at most N bytes remain
  clear                 remove every entry

--cache-dir defaults to $ARFUSE_CACHE_DIR, $XDG_CACHE_HOME/arfuse, ~/.cache/arfuse.
)";

struct Described {
  std::string spec = "?", target = "?", module = "?", compiler = "?";
};

Described describe(const cache::CacheEntry& e) {
  Described d;
  try {
    auto meta = nlohmann::json::parse(e.metadata);
    d.spec = meta.value("spec", "?");
    d.compiler = meta.value("compiler", "?");
    auto spec = jit::KernelSpec::parse(d.spec);
    d.target = spec.target.name();
    d.module = jit::to_string(spec.module);
  } catch (const std::exception&) {
  }
  return d;
}

std::string when(std::int64_t ns) {
  std::time_t t = std::time_t(ns / 1000000000);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return text;
}

std::unique_ptr<cache::DiskCache> open_cache(const CommandLine& cl) {
  auto disk = std::make_unique<cache::DiskCache>(cl.value("cache-dir", cache::default_cache_dir()), UINT64_MAX);
  if (!disk->readable()) throw Error(fmt::format("cannot use cache folder {}: {}", disk->dir(), disk->problem()));
  return disk;
}

int cmd_stat(cache::DiskCache& disk) {
  std::map<std::string, std::pair<int, unsigned long long>> per_target, per_module;
  int entries = 0, bad = 0;
  unsigned long long bytes = 0;
  for (const auto& info : disk.list()) {
    cache::CacheEntry e;
    std::string problem;
    ++entries, bytes += info.bytes;
    if (!cache::DiskCache::read_entry(info.path, e, problem)) {
      ++bad;
      continue;
    }
    auto d = describe(e);
    per_target[d.target].first++, per_target[d.target].second += info.bytes;
    per_module[d.module].first++, per_module[d.module].second += info.bytes;
  }
  std::printf("cache: %s\nentries: %d (%d unreadable)\nbytes: %llu (%s)\n", disk.dir().c_str(), entries, bad, bytes, human_bytes(bytes).c_str());
  for (auto* group : {&per_target, &per_module}) {
    std::printf("\n| %s | entries | bytes |\n|---|---:|---:|\n", group == &per_target ? "target" : "module");
    for (const auto& [name, v] : *group) std::printf("| %s | %d | %s |\n", name.c_str(), v.first, human_bytes(v.second).c_str());
  }
  return 0;
}

int cmd_ls(cache::DiskCache& disk) {
  for (const auto& info : disk.list()) {
    cache::CacheEntry e;
    std::string problem;
    if (!cache::DiskCache::read_entry(info.path, e, problem)) {
      std::printf("%-56s %-8s %10llu  %s  BAD: %s\n", info.file_name.c_str(), "?", (unsigned long long)info.bytes, when(info.last_use_ns).c_str(), problem.c_str());
      continue;
    }
    auto d = describe(e);
    std::printf("%-56s %-8s %10llu  %s  %s\n", d.spec.c_str(), d.target.c_str(), (unsigned long long)info.bytes, when(info.last_use_ns).c_str(), d.compiler.c_str());
  }
  return 0;
}

int cmd_verify(cache::DiskCache& disk, bool fix) {
  int good = 0, bad = 0;
  for (const auto& info : disk.list()) {
    cache::CacheEntry e;
    std::string problem;
    bool ok = cache::DiskCache::read_entry(info.path, e, problem);
    if (ok && !cache::DiskCache::name_matches_key(info.file_name, e.key)) {
      ok = false, problem = "key in the header does not match the file name";
    }
    if (ok) {
      ++good;
      continue;
    }
    ++bad;
    std::printf("BAD %s: %s%s\n", info.file_name.c_str(), problem.c_str(), fix ? " (removed)" : "");
    if (fix) std::remove(info.path.c_str());
  }
  std::printf("%d good, %d bad\n", good, bad);
  return bad == 0 || fix ? 0 : 1;
}

int cache_main(int argc, char** argv) {
  CommandLine cl(argc, argv, {"fix"}, {"cache-dir", "max-bytes"});
  if (cl.positional().size() != 1) throw UsageError("expected one command: stat, ls, verify, prune or clear");
  const std::string command = cl.positional()[0];
  if (command != "stat" && command != "ls" && command != "verify" && command != "prune" && command != "clear") {
    throw UsageError(fmt::format("unknown command '{}': use stat, ls, verify, prune or clear", command));
  }
  if (cl.has("fix") && command != "verify") throw UsageError("--fix goes with verify");
  if (cl.has("max-bytes") && command != "prune") throw UsageError("--max-bytes goes with prune");
  if (command == "prune" && !cl.has("max-bytes")) throw UsageError("prune needs --max-bytes N");
  auto owned = open_cache(cl);
  cache::DiskCache& disk = *owned;
  if (command == "stat") return cmd_stat(disk);
  if (command == "ls") return cmd_ls(disk);
  if (command == "verify") return cmd_verify(disk, cl.has("fix"));
  if (command == "prune") {
    const long max = cl.integer("max-bytes", 0, 0, LONG_MAX);
    int removed = disk.prune(std::uint64_t(max));
    std::printf("removed %d entries; %s remain\n", removed, human_bytes(disk.total_bytes()).c_str());
    return 0;
  }
  std::printf("removed %d entries\n", disk.clear());
  return 0;
}

}  // namespace
}  // namespace arfuse::tools

int main(int argc, char** argv) {
  return arfuse::tools::run_tool("arfuse-cache", arfuse::tools::kUsage, arfuse::tools::cache_main, argc, argv);
}
