// arfuse-warmup: compiles a set of kernel specialisations into the persistent cache, on
// machines with or without a GPU. Work is spread over --jobs worker processes, which publish
// into the one cache folder concurrently (the cache is built for that).
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "arfuse/error.hpp"

#include "base/bounded_json.hpp"
#include "base/log.hpp"
#include "base/subprocess.hpp"
#include "cache/kernel_cache.hpp"
#include "jit/spec_set.hpp"
#include "runtime/device/device.hpp"

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
  --config FILE     JSON spec set (see docs/tools.md); default: the embedded default set
                    (every module x hidden {2048..8192} x dtype x quant x norm x world x stage)
  --cache-dir DIR   cache folder (default: $ARFUSE_CACHE_DIR, $XDG_CACHE_HOME/arfuse,
                    ~/.cache/arfuse)
  --jobs N          worker processes (default: the number of cores)
  --memory-only     compile without storing anything (checks that every spec compiles)
  --no-graph-kernels
                    leave out the kernels of calls captured into graphs (the specs' graph_inputs:
                    for groups with graph_calls 0, or templates older than those kernels)
  --json FILE       write a JSON report
  --dry-run         list the specs and stop
  --quiet           print only the summary and failures
  --help            this text

Temporaries older than an hour (left by writers that died) are removed first. A target the
compiler cannot build for is one error for the whole target.

exit status: 0 every spec is stored in the cache (verified on disk at the end; with
--memory-only: every spec compiled); 1 some are not (failed, or not stored: disk full, size
cap too small; the summary says how many and why); 2 usage or configuration error (bad
option, bad JSON or values in --config, bad ARFUSE_* variable, cache folder not usable)
)";

std::vector<Target> local_targets() {
  std::vector<Target> targets;
  std::set<std::string> seen;
  for (int i = 0; i < Device::count(); ++i) {
    Device d(i);
    if (seen.insert(d.target().name()).second) targets.push_back(d.target());
  }
  return targets;
}

std::vector<jit::KernelSpec> select_specs(const CommandLine& cl) {
  std::vector<Target> targets;
  for (const auto& t : cl.values("target")) {
    try {
      targets.push_back(Target::parse(t));
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
  std::vector<jit::KernelSpec> specs;
  if (cl.has("config")) {
    std::string text, why;
    if (!read_config_file(cl.value("config"), text, why))
      throw UsageError(fmt::format("--config {} is not used: {}", cl.value("config"), why));
    nlohmann::json config;
    if (!parse_json(text, config, why))
      throw UsageError(fmt::format("config {} is not valid JSON: {}", cl.value("config"), why));
    if (targets.empty() && !config.contains("targets")) targets = local_targets();
    if (targets.empty() && !config.contains("targets")) {
      throw UsageError(
          "no GPU found and no target given: pass --target (e.g. --target sm_90) or \"targets\" in the config");
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
    if (s.graph_inputs && cl.has("no-graph-kernels")) continue;
    if (seen.insert(s.text()).second) unique.push_back(s);
  }
  return unique;
}

// Which targets of the set the compilers refuse outright (not installed, or an ISA they do not
// know): target name -> why. Asked in a child process: a compiler library may start threads
// when it loads, and this process forks the workers afterwards.
constexpr int kProbeConfigError = 2;  // the probe's exit code for a bad setting, passed on as the tool's

std::map<std::string, std::string> refused_targets(const std::vector<jit::KernelSpec>& specs) {
  std::map<std::string, Target> targets;
  for (const auto& s : specs) targets.emplace(s.target.name(), s.target);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error("pipe failed");  // no compiler the probe runs may inherit it
  const pid_t pid = fork();
  if (pid < 0) throw Error("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    nlohmann::json out = nlohmann::json::object();
    CacheOptions options;
    options.use_disk = false;
    cache::KernelCache cache(options);
    int code = 0;
    for (const auto& [name, target] : targets) {
      if (!cache.compile_allowed()) break;  // served from disk only: nothing to refuse up front
      try {
        cache.compiler(target);         // UnsupportedTarget when it cannot build the target
      } catch (const ConfigError& e) {  // a setting, not the target: the parent exits 2 with it
        out = nlohmann::json{{"configuration error", e.what()}};
        code = kProbeConfigError;
        break;
      } catch (const Error& e) {
        out[name] = e.what();
      }
    }
    const std::string text = out.dump();
    if (write(fds[1], text.data(), text.size()) != ssize_t(text.size())) _exit(1);
    _exit(code);
  }
  ::close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buffer, size_t(n));
  }
  ::close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kProbeConfigError) {
    nlohmann::json said;
    std::string why;
    throw ConfigError(parse_json(text, said, why) && said.contains("configuration error")
                          ? said["configuration error"].get<std::string>()
                          : "the compiler probe process refused a setting");
  }
  std::map<std::string, std::string> refused;
  try {
    const auto parsed = nlohmann::json::parse(text);
    for (auto it = parsed.begin(); it != parsed.end(); ++it) refused[it.key()] = it.value().get<std::string>();
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("the compiler probe process failed (status {}): {}", status, text));
  }
  return refused;
}

FILE* worker_report = nullptr;

// Workers' warnings travel to the parent, which prints each once per run.
void forward_warning(const std::string& once_key, const std::string& message) {
  std::fprintf(worker_report, "%s\n", nlohmann::json{{"warning", message}, {"once", once_key}}.dump().c_str());
  std::fflush(worker_report);
}

// One worker: takes the next index of `todo` from the shared counter until none are left, and
// reports each result as one JSON line on `out`.
[[noreturn]] void worker(const std::vector<jit::KernelSpec>& specs, const std::vector<size_t>& todo,
                         std::atomic<int>* next, const CacheOptions& options, int out) {
  worker_report = fdopen(out, "w");
  set_warning_sink(forward_warning);
  cache::KernelCache cache(options);
  for (int t = next->fetch_add(1); t < int(todo.size()); t = next->fetch_add(1)) {
    const size_t i = todo[size_t(t)];
    nlohmann::json line{{"index", i}};
    const auto start = std::chrono::steady_clock::now();
    try {
      auto k = cache.get(specs[i]);
      line["status"] = k.origin == cache::CodeOrigin::compiled ? "compiled" : "hit";
      line["bytes"] = k.entry.payload.size();
      line["file"] = k.key.file;
      if (cache.disk() != nullptr && !cache.disk()->problem().empty()) line["store_problem"] = cache.disk()->problem();
    } catch (const CompileError& e) {
      line["status"] = "failed", line["error"] = e.what(), line["log"] = e.log();
    } catch (const std::exception& e) {
      line["status"] = "failed", line["error"] = e.what();
    }
    line["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(worker_report, "%s\n", line.dump().c_str());
    std::fflush(worker_report);
  }
  std::fclose(worker_report);
  _exit(0);
}

// The folder is checked (and emptied of dead writers' temporaries) before any worker starts.
void prepare_folder(const std::string& dir, std::uint64_t max_bytes) {
  std::string why;
  if (!cache::usable_cache_folder(dir, why) ||
      (::access(dir.c_str(), W_OK) != 0 && (why = std::strerror(errno), true))) {
    throw ConfigError(
        fmt::format("cache folder {} cannot be used: {}; pass --cache-dir with a folder of this user "
                    "that nobody else can write, or --memory-only",
                    dir, why));
  }
  cache::DiskCache disk(dir, max_bytes);
  if (const int removed = disk.remove_stale_temporaries(); removed > 0) {
    std::printf("removed %d temporaries older than %lld s (left by writers that died)\n", removed,
                (long long)cache::kStaleTemporaryAgeSeconds);
  }
}

// The specs to attempt; those of refused targets are recorded as failed, with one line per target.
std::vector<size_t> attempted_specs(const std::vector<jit::KernelSpec>& specs, Progress& progress) {
  const auto refused = refused_targets(specs);
  std::map<std::string, int> skipped;
  std::vector<size_t> todo;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto it = refused.find(specs[i].target.name());
    if (it == refused.end()) {
      todo.push_back(i);
      continue;
    }
    progress.refuse(i, it->second);
    ++skipped[it->first];
  }
  for (const auto& [name, n] : skipped) {
    std::fprintf(stderr, "FAILED target %s (%d specs not attempted): %s\n", name.c_str(), n, refused.at(name).c_str());
  }
  return todo;
}

void run_workers(const std::vector<jit::KernelSpec>& specs, const std::vector<size_t>& todo,
                 const CacheOptions& options, int jobs, Progress& progress) {
  auto* next = static_cast<std::atomic<int>*>(
      mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (next == MAP_FAILED) throw Error("mmap of the shared work counter failed");
  new (next) std::atomic<int>(0);
  std::fflush(stdout);
  std::vector<pid_t> children;
  std::vector<int> pipes;
  const int workers = std::min<int>(jobs, int(todo.size()));
  for (int w = 0; w < workers; ++w) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw Error("pipe failed");  // no compiler a worker runs may inherit it
    pid_t pid = fork();
    if (pid < 0) throw Error("fork failed");
    if (pid == 0) {
      ::close(fds[0]);
      worker(specs, todo, next, options, fds[1]);
    }
    ::close(fds[1]);
    children.push_back(pid);
    pipes.push_back(fds[0]);
  }
  collect_results(pipes, progress);
  for (pid_t pid : children) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    // What the dead worker was writing is nobody's now: removed at once, not an hour later.
    const int removed = options.use_disk ? cache::DiskCache(options.dir).remove_temporaries_of(pid) : 0;
    progress.worker_died(pid, describe_wait_status(status), removed);
  }
  munmap(next, sizeof(std::atomic<int>));
}

int warmup(int argc, char** argv) {
  // A write past `ulimit -f` then fails (EFBIG): the cache removes its temporary and says why,
  // instead of the signal ending a worker mid-write. The workers inherit this.
  std::signal(SIGXFSZ, SIG_IGN);
  CommandLine cl(argc, argv, {"dry-run", "quiet", "memory-only", "no-graph-kernels"},
                 {"target", "config", "cache-dir", "jobs", "json"});
  if (!cl.positional().empty()) throw UsageError(fmt::format("unexpected argument '{}'", cl.positional()[0]));
  const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const int jobs = int(cl.integer("jobs", cores, 1, 1024));
  const bool memory_only = cl.has("memory-only");
  CacheOptions options;  // reads ARFUSE_CACHE_MAX_BYTES: a bad value is a ConfigError (exit 2)
  options.dir = cl.value("cache-dir", default_cache_dir());
  options.use_disk = !memory_only;
  const auto specs = select_specs(cl);
  if (cl.has("json")) require_writable_file(cl.value("json"), "json");
  if (cl.has("dry-run")) {
    for (const auto& s : specs) std::printf("%s\n", s.text().c_str());
    std::printf("%zu specs\n", specs.size());
    return 0;
  }
  if (!memory_only) prepare_folder(options.dir, options.max_bytes);
  Progress progress(specs, cl.has("quiet"));
  const auto todo = attempted_specs(specs, progress);
  run_workers(specs, todo, options, jobs, progress);
  unsigned long long bytes = 0;
  if (!memory_only) {
    progress.check_stored(options.dir, options.max_bytes);
    bytes = cache::DiskCache(options.dir).total_bytes();
  }
  progress.finish(bytes, options.dir, jobs);
  if (cl.has("json")) progress.write_json(cl.value("json"), options.dir, jobs);
  const bool complete = progress.failed() == 0 && (memory_only || progress.stored() == int(specs.size()));
  return complete ? 0 : 1;
}

}  // namespace
}  // namespace arfuse::tools

int main(int argc, char** argv) {
  return arfuse::tools::run_tool("arfuse-warmup", arfuse::tools::kUsage, arfuse::tools::warmup, argc, argv);
}
