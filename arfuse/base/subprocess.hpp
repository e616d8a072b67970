// Runs another program and collects what it printed: the seam for compilers that are
// programs rather than libraries (clang for AMD targets). No shell is involved: arguments are
// passed as they are.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace arfuse {

struct ProcessResult {
  int exit_code = -1;  // the program's exit status; -1 when it did not exit normally
  std::string output;  // stdout and stderr together, in order
  bool timed_out = false;
};

// Runs argv[0] (looked up in PATH when it has no slash) with `argv`, the environment plus
// `extra_environment`, and waits at most `timeout` (then kills it). Throws Error when it
// cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const std::map<std::string, std::string>& extra_environment = {});

}  // namespace arfuse
