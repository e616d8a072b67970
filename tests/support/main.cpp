// The test binary; re-executed with --rank-worker it is one rank of a multi-process group
// (tests/gpu/rank_worker.hpp), so the multi-process tests need no second executable; with
// --static-group-exit a program that keeps a Group in a static (tests/gpu/static_group_worker.hpp).
//
// No case passes without asserting something (-w NoAssertions), and none returns early because
// this machine lacks what it needs: such a case carries a tag for the need, and a run on a
// machine without it leaves those cases out and says so, one SKIPPED line per tag:
//   [root]      another uid, a tmpfs mount, chown
//   [amdclang]  a clang with the AMDGPU back end (scripts/setup-deps.sh; CI must have it)
//   [libamdhip64]  the installed libamdhip64, not the HIP-over-CUDA adapter (CI must have it)
//   [nogpu]     what a machine without any GPU answers
#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "arfuse/device.hpp"
#include "arfuse/error.hpp"

#include "jit/compiler.hpp"
#include "runtime/device/hip_runtime.hpp"

#include "hip_over_cuda.hpp"
#include "rank_worker.hpp"
#include "static_group_worker.hpp"

namespace {

struct Requirement {
  const char* tag;
  bool (*ci_must_meet)();  // where true under CI, a missing one fails the run instead
  // Why this machine does not meet it, "" when it does; asked only when a selected case needs it.
  std::string (*missing)();
};

std::string root_missing() { return ::geteuid() == 0 ? "" : "not running as root"; }

std::string amd_clang_missing() {
  try {
    arfuse::jit::amd_clang_compiler();
    return "";
  } catch (const arfuse::Error& e) {
    return std::string("no clang with the AMDGPU back end: ") + e.what();
  }
}

std::string libamdhip64_missing() {
  if (arfuse::tools::hip_over_cuda_requested()) return "the HIP backend is the HIP-over-CUDA adapter in this run";
  try {
    arfuse::hip::bind_without_init();
    return "";
  } catch (const arfuse::Error& e) {
    return std::string("no libamdhip64: ") + e.what();
  }
}

std::string gpu_present() {
  return arfuse::Device::count() > 0 ? "this machine has a GPU (the [gpu] cases run the real thing)" : "";
}

bool never() { return false; }
bool always() { return true; }
bool unless_adapter() { return !arfuse::tools::hip_over_cuda_requested(); }

const Requirement kRequirements[] = {
    {"root", never, root_missing},
    {"amdclang", always, amd_clang_missing},
    {"libamdhip64", unless_adapter, libamdhip64_missing},
    {"nogpu", never, gpu_present},
};

// How many registered cases `filter` selects that carry `tag`.
std::size_t cases_with(const std::string& filter, const std::string& tag, const Catch::IConfig& config) {
  Catch::TestSpec spec = Catch::TestSpecParser(Catch::ITagAliasRegistry::get()).parse(filter).testSpec();
  std::size_t n = 0;
  for (const Catch::TestCase& t : Catch::getAllTestCasesSorted(config)) {
    bool tagged = false;
    for (const std::string& own : t.getTestCaseInfo().tags) tagged = tagged || own == tag;
    if (tagged && spec.matches(t)) ++n;
  }
  return n;
}

// Appends `exclusion` to every alternative of a filter ("[a],[b]" -> "[a]~[x],[b]~[x]").
std::string excluding(const std::string& filter, const std::string& exclusion) {
  std::string out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = filter.find(',', start);
    out += filter.substr(start, comma - start) + exclusion;
    if (comma == std::string::npos) return out;
    out += ",";
    start = comma + 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The [gpu] suites through the HIP backend on an NVIDIA GPU (tools/hip_over_cuda/hip_over_cuda.hpp); rank
  // workers inherit the variable, so multi-process groups run through it too.
  if (arfuse::tools::hip_over_cuda_requested()) arfuse::tools::install_hip_over_cuda();
  if (argc > 1 && std::strcmp(argv[1], "--rank-worker") == 0) return arfuse::test::rank_worker_main(argc - 2, argv + 2);
  if (argc > 1 && std::strcmp(argv[1], "--static-group-exit") == 0) return arfuse::test::static_group_worker_main();
  Catch::Session session;
  if (const int status = session.applyCommandLine(argc, argv); status != 0) return status;
  Catch::ConfigData& data = session.configData();
  data.warnings = Catch::WarnAbout::What(data.warnings | Catch::WarnAbout::NoAssertions);
  if (data.listTests || data.listTags || data.listTestNamesOnly || data.testsOrTags.empty()) return session.run();
  std::string filter;
  for (const std::string& part : data.testsOrTags) filter += (filter.empty() ? "" : " ") + part;
  const bool ci = std::getenv("CI") != nullptr;
  std::string excluded = filter;
  std::vector<std::string> said;
  for (const Requirement& r : kRequirements) {
    const std::size_t n = cases_with(filter, r.tag, session.config());
    if (n == 0) continue;
    const std::string missing = r.missing();
    if (missing.empty()) continue;
    if (ci && r.ci_must_meet()) {
      std::fprintf(stderr, "FAILED: %zu test cases tagged [%s] cannot run, and CI must run them: %s\n", n, r.tag,
                   missing.c_str());
      return 1;
    }
    excluded = excluding(excluded, std::string("~[") + r.tag + "]");
    said.push_back("SKIPPED: " + std::to_string(n) + " test cases tagged [" + r.tag + "]: " + missing);
  }
  for (const std::string& line : said) std::printf("%s\n", line.c_str());
  data.testsOrTags = {excluded};
  session.useConfigData(data);
  return session.run();
}
