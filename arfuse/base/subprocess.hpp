// Runs another program and collects what it printed: the seam for compilers that are
// programs rather than libraries (clang for AMD targets). No shell is involved: arguments are
// passed as they are.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "arfuse/error.hpp"

namespace arfuse {

struct ProcessResult {
  int exit_code = -1;  // the program's exit status; -1 when it did not exit normally
  int signal = 0;      // the signal that ended it, when one did
  std::string output;  // stdout and stderr together, in order
  bool timed_out = false;
};

// Runs argv[0] (looked up in PATH when it has no slash) with `argv`, the environment plus
// `extra_environment`, and waits at most `timeout`. The program runs in a process group of its
// own and inherits no descriptor but its stdin (/dev/null), stdout and stderr; at the timeout, or
// when the program itself has ended, the whole group is killed, so a child it left behind can
// neither outlive the call nor hold its output open. Throws Error when it cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const std::map<std::string, std::string>& extra_environment = {});

// How a wait status reads: "exit 3", "signal 9 (Killed)", "signal 25 (File size limit exceeded:
// a file reached the size limit, ulimit -f)".
std::string describe_wait_status(int status);

}  // namespace arfuse
