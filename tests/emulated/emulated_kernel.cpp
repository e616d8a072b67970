#include "emulated_kernel.hpp"

#include <fmt/format.h>

#include <fstream>
#include <thread>

#include "arfuse/error.hpp"

#include "base/subprocess.hpp"

#include "support.hpp"

namespace arfuse::test {
namespace {

constexpr const char* kEntry = "arfuse_emulated_run";

// The JIT's options that say what the program computes (the -D vendor and format switches, the
// language, no contraction, no fast math); the AMD code generation options mean nothing here.
std::vector<std::string> host_options(const jit::Source& source) {
  std::vector<std::string> kept;
  for (const auto& o : source.options) {
    if (o.rfind("-D", 0) == 0 || o.rfind("-std=", 0) == 0 || o == "-ffp-contract=off" || o == "-fno-fast-math")
      kept.push_back(o);
  }
  return kept;
}

std::string program_text(const jit::Source& source) {
  return source.text + fmt::format(R"(
extern "C" int {}(unsigned grid, unsigned threads, unsigned warp_size, unsigned at_once, void** params, char* error,
                  unsigned long error_size) {{
  return ::arfuse_emulated::run_grid(&{}, grid, threads, warp_size, at_once, params, error, error_size);
}}
)",
                                   kEntry, source.name_expression);
}

}  // namespace

EmulatedKernel::EmulatedKernel(const jit::KernelSpec& spec) : source_(jit::render(spec)) {
  if (source_.spec.target.vendor() != Vendor::amd)
    throw Error(
        fmt::format("the emulation runs the AMD code path; {} is not an AMD target", source_.spec.target.name()));
  folder_ = fresh_dir("arfuse-emulated");
  const std::string program = folder_ + "/kernel.cpp", library = folder_ + "/kernel.so";
  std::ofstream(program) << program_text(source_);
  std::vector<std::string> argv = {ARFUSE_HOST_CXX,
                                   "-O1",
                                   "-fPIC",
                                   "-shared",
                                   "-w",
                                   "-pthread",
                                   "-include",
                                   ARFUSE_SOURCE_DIR "/tests/emulated/emulated_prelude.hpp"};
  for (const auto& o : host_options(source_)) argv.push_back(o);
  argv.insert(argv.end(), {program, "-o", library});
  const ProcessResult r = run_process(argv, std::chrono::minutes(5));
  if (r.exit_code != 0) throw Error(fmt::format("the host compile of {} failed:\n{}", source_.spec.text(), r.output));
  library_ = std::make_unique<DynamicLibrary>("the emulated kernel", std::vector<std::string>{library});
  library_->bind(entry_, kEntry);
}

void EmulatedKernel::launch(unsigned grid, void** params, bool blocks_wait_for_each_other) const {
  const unsigned at_once = blocks_wait_for_each_other ? 0u : std::max(1u, std::thread::hardware_concurrency());
  char error[512] = {};
  if (entry_(grid, unsigned(source_.block.threads), unsigned(source_.spec.target.warp_size()), at_once, params, error,
             sizeof error) != 0)
    throw Error(fmt::format("emulated {}: {}", source_.spec.text(), error));
}

}  // namespace arfuse::test
