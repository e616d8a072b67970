// arfuse-warmup: compiles a set of kernel specialisations into the persistent cache, on
// machines with or without a GPU. Work is spread over --jobs worker processes, which publish
// into the one cache folder concurrently (the cache is built for that).
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "arfuse/base/error.hpp"
#include "arfuse/cache/kernel_cache.hpp"
#include "arfuse/jit/spec_set.hpp"
#include "arfuse/runtime/device.hpp"
#include "cli.hpp"
#include "warmup_progress.hpp"

namespace arfuse::tools {
namespace {

const char* kUsage = R"(usage: arfuse-warmup [options]

Compiles kernel specialisations into the arfuse kernel cache, so that later processes start
without compiling. Needs no GPU when --target is given.

options:
  --target T        compile for T (sm_90, gfx90a, ...); repeatable. Default: the targets of
                    the local GPUs, or the config's "targets".
  --config FILE     JSON spec set (see README); default: the embedded default set
                    (every module x hidden {2048..8192} x dtype x quant x norm x world x stage)
  --cache-dir DIR   cache folder (default: $ARFUSE_CACHE_DIR, $XDG_CACHE_HOME/arfuse,
                    ~/.cache/arfuse)
  --jobs N          worker processes (default: the number of cores)
  --json FILE       write a JSON report
  --dry-run         list the specs and stop
  --quiet           print only the summary and failures
  --help            this text

exit status: 0 all specs cached, 1 some failed (the rest are cached), 2 usage or config error
)";

std::vector<jit::Target> local_targets() {
  std::vector<jit::Target> targets;
  std::set<std::string> seen;
  for (int i = 0; i < Device::count(); ++i) {
    Device d(i);
    if (seen.insert(d.target().name()).second) targets.push_back(d.target());
  }
  return targets;
}

std::vector<jit::KernelSpec> select_specs(const CommandLine& cl) {
  std::vector<jit::Target> targets;
  for (const auto& t : cl.values("target")) {
    try {
      targets.push_back(jit::Target::parse(t));
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
  std::vector<jit::KernelSpec> specs;
  if (cl.has("config")) {
    std::ifstream in(cl.value("config"));
    if (!in) throw UsageError(fmt::format("cannot read config file {}", cl.value("config")));
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(fmt::format("config {} is not valid JSON: {}", cl.value("config"), e.what()));
    }
    if (targets.empty() && !config.contains("targets")) targets = local_targets();
    if (targets.empty() && !config.contains("targets")) {
      throw UsageError("no GPU found and no target given: pass --target (e.g. --target sm_90) or \"targets\" in the config");
    }
    try {
      specs = jit::parse_spec_set(config, targets).specs;
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  } else {
    if (targets.empty()) targets = local_targets();
    if (targets.empty()) throw UsageError("no GPU found and no target given: pass --target (e.g. --target sm_90)");
    specs = jit::default_specs(targets);
  }
  std::vector<jit::KernelSpec> unique;
  std::set<std::string> seen;
  for (const auto& s : specs) {
    if (seen.insert(s.text()).second) unique.push_back(s);
  }
  return unique;
}

// One worker: takes the next spec index from the shared counter until none are left, and
// reports each result as one JSON line on `out`.
[[noreturn]] void worker(const std::vector<jit::KernelSpec>& specs, std::atomic<int>* next, const std::string& dir, int out) {
  cache::CacheOptions options;
  options.dir = dir;
  cache::KernelCache cache(options);
  FILE* report = fdopen(out, "w");
  for (int i = next->fetch_add(1); i < int(specs.size()); i = next->fetch_add(1)) {
    nlohmann::json line{{"index", i}};
    const auto start = std::chrono::steady_clock::now();
    try {
      auto k = cache.get(specs[size_t(i)]);
      line["status"] = k.origin == cache::CodeOrigin::compiled ? "compiled" : "hit";
      line["bytes"] = k.entry.payload.size();
    } catch (const CompileError& e) {
      line["status"] = "failed", line["error"] = e.what(), line["log"] = e.log();
    } catch (const std::exception& e) {
      line["status"] = "failed", line["error"] = e.what();
    }
    line["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(report, "%s\n", line.dump().c_str());
    std::fflush(report);
  }
  std::fclose(report);
  _exit(0);
}

int warmup(int argc, char** argv) {
  CommandLine cl(argc, argv, {"dry-run", "quiet"}, {"target", "config", "cache-dir", "jobs", "json"});
  if (!cl.positional().empty()) throw UsageError(fmt::format("unexpected argument '{}'", cl.positional()[0]));
  const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const int jobs = int(cl.integer("jobs", cores, 1, 1024));
  const std::string dir = cl.value("cache-dir", cache::default_cache_dir());
  const auto specs = select_specs(cl);
  if (cl.has("dry-run")) {
    for (const auto& s : specs) std::printf("%s\n", s.text().c_str());
    std::printf("%zu specs\n", specs.size());
    return 0;
  }
  {
    cache::DiskCache probe(dir);  // says once why the folder cannot be used
    if (!probe.writable()) throw Error(fmt::format("cache folder {} cannot be used: {}", dir, probe.problem()));
  }
  auto* next = static_cast<std::atomic<int>*>(mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (next == MAP_FAILED) throw Error("mmap of the shared work counter failed");
  new (next) std::atomic<int>(0);
  std::fflush(stdout);
  std::vector<pid_t> children;
  std::vector<int> pipes;
  const int workers = std::min<int>(jobs, int(specs.size()));
  for (int w = 0; w < workers; ++w) {
    int fds[2];
    if (pipe(fds) != 0) throw Error("pipe failed");
    pid_t pid = fork();
    if (pid < 0) throw Error("fork failed");
    if (pid == 0) {
      ::close(fds[0]);
      worker(specs, next, dir, fds[1]);
    }
    ::close(fds[1]);
    children.push_back(pid);
    pipes.push_back(fds[0]);
  }
  Progress progress(specs, cl.has("quiet"));
  collect_results(pipes, progress);
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) progress.worker_died(pid, status);
  }
  cache::DiskCache disk(dir);
  progress.finish(disk.total_bytes(), dir, jobs);
  if (cl.has("json")) progress.write_json(cl.value("json"), dir, jobs);
  return progress.failed() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace arfuse::tools

int main(int argc, char** argv) {
  return arfuse::tools::run_tool("arfuse-warmup", arfuse::tools::kUsage, arfuse::tools::warmup, argc, argv);
}
