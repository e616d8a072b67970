// arfuse-cache: inspect and maintain a kernel cache folder.
#include <fmt/format.h>

#include <climits>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <new>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

#include "base/bounded_json.hpp"
#include "cache/disk_cache.hpp"
#include "jit/kernel_spec.hpp"

#include "cache_code_diff.hpp"
#include "cache_footprint.hpp"
#include "cli.hpp"

namespace arfuse::tools {
namespace {

const char* kUsage = R"(usage: arfuse-cache [--cache-dir DIR] COMMAND [options]

commands:
  stat                  entries and bytes, in all and per target and module
  ls [--footprint]      one line per entry: spec, target, size, last use; --footprint adds
                        each kernel's registers, shared and local memory, and for a cubin the
                        blocks per SM they allow (NVIDIA's occupancy rules; no GPU needed)
  verify [--fix]        check every entry (header, checksums, key); exit 1 if any is bad;
                        --fix removes the bad ones (of any kind: file, link, FIFO, folder)
                        and temporaries older than an hour; exit 1 if any stays
  prune --max-bytes N   remove stale temporaries, then least recently used entries until
                        at most N bytes (entries and temporaries) remain
  clear                 remove every entry and every temporary
  code-diff OTHER_DIR   per spec, whether this cache and the one in OTHER_DIR hold the same
                        machine code: code, constant and shared-memory sections of the cubin or
                        code object, and the code's relocations by symbol name (symbol tables
                        and an AMD kernel descriptor's offset to its code are not compared);
                        lists the specs that differ (with their code's size on each side, in
                        instructions for a cubin, bytes for AMD, and any change of registers,
                        shared or local memory, and a cubin's blocks per SM) or that one side
                        lacks; exit 1 if any

--cache-dir defaults to $ARFUSE_CACHE_DIR, $XDG_CACHE_HOME/arfuse, ~/.cache/arfuse. On a
folder that does not exist every command says so and creates nothing (code-diff: exit 2).
exit status: 0 done, 1 bad entries found (verify), code that differs (code-diff) or an error,
2 usage error or a cache folder that cannot be used
)";

struct Described {
  std::string spec = "?", target = "?", module = "?", compiler = "?";
};

Described describe(const cache::CacheEntry& e) {
  Described d;
  try {
    nlohmann::json meta;
    std::string why;
    if (!parse_json(e.metadata, meta, why)) return d;
    d.spec = meta.value("spec", "?");
    d.compiler = meta.value("compiler", "?");
    auto spec = jit::KernelSpec::parse(d.spec);
    d.target = spec.target.name();
    d.module = to_string(spec.module);
  } catch (const std::exception&) {}
  return d;
}

std::string when(std::int64_t ns) {
  std::time_t t = std::time_t(ns / 1000000000);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return text;
}

std::unique_ptr<cache::DiskCache> open_cache(const std::string& dir) {
  std::string why;
  if (!cache::usable_cache_folder(dir, why)) throw ConfigError(fmt::format("cannot use cache folder {}: {}", dir, why));
  return std::make_unique<cache::DiskCache>(dir, UINT64_MAX);
}

int cmd_stat(cache::DiskCache& disk) {
  std::map<std::string, std::pair<int, unsigned long long>> per_target, per_module;
  int entries = 0, bad = 0;
  unsigned long long bytes = 0;
  for (const auto& info : disk.list()) {
    ++entries, bytes += info.bytes;
    const auto checked = disk.check(info.file_name);
    if (!checked.ok()) {
      ++bad;
      continue;
    }
    auto d = describe(checked.entry);
    per_target[d.target].first++, per_target[d.target].second += info.bytes;
    per_module[d.module].first++, per_module[d.module].second += info.bytes;
  }
  const auto temporaries = disk.temporaries();
  unsigned long long temporary_bytes = 0;
  int stale = 0;
  for (const auto& t : temporaries) temporary_bytes += t.bytes, stale += cache::DiskCache::is_stale(t);
  std::printf("cache: %s\nentries: %d (%d bad: `verify` names them)\nbytes: %llu (%s)\n", disk.dir().c_str(), entries,
              bad, bytes, human_bytes(bytes).c_str());
  std::printf("temporaries: %zu (%s; %d older than %lld s, left by writers that died)\n", temporaries.size(),
              human_bytes(temporary_bytes).c_str(), stale, (long long)cache::kStaleTemporaryAgeSeconds);
  for (auto* group : {&per_target, &per_module}) {
    std::printf("\n| %s | entries | bytes |\n|---|---:|---:|\n", group == &per_target ? "target" : "module");
    for (const auto& [name, v] : *group)
      std::printf("| %s | %d | %s |\n", name.c_str(), v.first, human_bytes(v.second).c_str());
  }
  return 0;
}

// With `footprint`, each kernel's registers, shared and local memory (and a cubin's blocks per SM) follow.
int cmd_ls(cache::DiskCache& disk, bool footprint) {
  for (const auto& info : disk.list()) {
    const auto checked = disk.check(info.file_name);
    if (!checked.ok()) {
      std::printf("%-56s %-8s %10llu  %s  BAD: %s\n", info.file_name.c_str(), "?", (unsigned long long)info.bytes,
                  when(info.last_use_ns).c_str(), checked.problem.c_str());
      continue;
    }
    auto d = describe(checked.entry);
    std::string occupancy;
    if (footprint) {
      try {
        occupancy =
            "  " + describe_footprint(jit::KernelSpec::parse(d.spec), jit::kernel_footprint(checked.entry.payload));
      } catch (const std::bad_alloc&) {
        occupancy = "  footprint unreadable: reading it would take more memory than this process has";
      } catch (const std::exception& e) {  // one entry's report, never the end of the listing
        occupancy = std::string("  footprint unreadable: ") + e.what();
      }
    }
    std::printf("%-56s %-8s %10llu  %s  %s%s\n", d.spec.c_str(), d.target.c_str(), (unsigned long long)info.bytes,
                when(info.last_use_ns).c_str(), d.compiler.c_str(), occupancy.c_str());
  }
  return 0;
}

// Exit 0 when every entry is good (or every bad one was removed with --fix), else 1.
int cmd_verify(cache::DiskCache& disk, bool fix) {
  int good = 0, bad = 0, left = 0;
  for (const auto& info : disk.list()) {
    const auto checked = disk.check(info.file_name);
    if (checked.ok()) {
      ++good;
      continue;
    }
    ++bad;
    std::string outcome, why;
    if (fix) {
      const bool removed = disk.remove(info.file_name, why);
      left += removed ? 0 : 1;
      outcome = removed ? " (removed)" : " (LEFT: " + why + ")";
    }
    std::printf("BAD %s: %s%s\n", info.file_name.c_str(), checked.problem.c_str(), outcome.c_str());
  }
  int stale = 0;
  if (fix) stale = disk.remove_stale_temporaries();
  std::printf("%d good, %d bad", good, bad);
  if (fix) std::printf(", %d removed, %d left; %d stale temporaries removed", bad - left, left, stale);
  std::printf("\n");
  return (fix ? left : bad) == 0 ? 0 : 1;
}

int cache_main(int argc, char** argv) {
  CommandLine cl(argc, argv, {"fix", "footprint"}, {"cache-dir", "max-bytes"});
  const auto& words = cl.positional();
  if (words.empty()) throw UsageError("expected a command: stat, ls, verify, prune, clear or code-diff");
  const std::string command = words[0];
  if (command != "stat" && command != "ls" && command != "verify" && command != "prune" && command != "clear" &&
      command != "code-diff") {
    throw UsageError(fmt::format("unknown command '{}': use stat, ls, verify, prune, clear or code-diff", command));
  }
  if (command == "code-diff" && words.size() != 2) throw UsageError("code-diff takes one folder: the other cache");
  if (command != "code-diff" && words.size() != 1) {
    throw UsageError(fmt::format("{} takes no further arguments, not '{}'", command, words[1]));
  }
  if (cl.has("fix") && command != "verify") throw UsageError("--fix goes with verify");
  if (cl.has("footprint") && command != "ls") throw UsageError("--footprint goes with ls");
  if (cl.has("max-bytes") && command != "prune") throw UsageError("--max-bytes goes with prune");
  if (command == "prune" && !cl.has("max-bytes")) throw UsageError("prune needs --max-bytes N");
  const long max_bytes = cl.integer("max-bytes", 0, 0, LONG_MAX);
  // Opening a cache creates its folder; a command that only reads or removes does not, and says
  // so (a mistyped --cache-dir would otherwise read as an empty cache, and be created).
  const std::string dir = cl.value("cache-dir", default_cache_dir());
  if (command == "code-diff") {
    // Comparing with a folder that is not there would list every spec as missing on one side.
    for (const std::string& folder : {dir, words[1]}) {
      if (cache::cache_folder_missing(folder))
        throw ConfigError(fmt::format("code-diff: cache folder {} does not exist", folder));
    }
    return cmd_code_diff(*open_cache(dir), *open_cache(words[1]));
  }
  if (cache::cache_folder_missing(dir)) {
    std::printf("cache folder %s does not exist: nothing is cached there\n", dir.c_str());
    return 0;
  }
  auto owned = open_cache(dir);
  cache::DiskCache& disk = *owned;
  if (command == "stat") return cmd_stat(disk);
  if (command == "ls") return cmd_ls(disk, cl.has("footprint"));
  if (command == "verify") return cmd_verify(disk, cl.has("fix"));
  if (command == "prune") {
    int removed = disk.prune(std::uint64_t(max_bytes));
    std::printf("removed %d entries; %s remain\n", removed, human_bytes(disk.total_bytes()).c_str());
    return 0;
  }
  const size_t temporaries = disk.temporaries().size();
  std::printf("removed %d entries and %zu temporaries\n", disk.clear(), temporaries);
  return 0;
}

}  // namespace
}  // namespace arfuse::tools

int main(int argc, char** argv) {
  return arfuse::tools::run_tool("arfuse-cache", arfuse::tools::kUsage, arfuse::tools::cache_main, argc, argv);
}
