#include "arfuse/base/subprocess.hpp"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "arfuse/error.hpp"

extern char** environ;

namespace arfuse {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> environment_with(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (!extra.count(entry.substr(0, entry.find('=')))) env.push_back(entry);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The child: stdout and stderr to the pipe, then exec; 127 when exec fails. Only
// async-signal-safe calls here: the parent may have other threads (one may hold malloc's lock),
// so everything is prepared before fork().
[[noreturn]] void exec_child(char* const* argv, char* const* envp, int out) {
  ::dup2(out, STDOUT_FILENO);
  ::dup2(out, STDERR_FILENO);
  const int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, STDIN_FILENO);
  ::execvpe(argv[0], argv, envp);
  static const char kFailed[] = "cannot run the program (exec failed)\n";
  (void)!::write(STDERR_FILENO, kFailed, sizeof(kFailed) - 1);
  ::_exit(127);
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const std::map<std::string, std::string>& extra_environment) {
  if (argv.empty()) throw Error("run_process: no program given");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(fmt::format("pipe failed: {}", std::strerror(errno)));
  auto env = environment_with(extra_environment);
  auto program = argv;
  const auto args = pointers(program);
  const auto envp = pointers(env);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]), ::close(fds[1]);
    throw Error(fmt::format("cannot start {}: fork failed: {}", argv[0], std::strerror(errno)));
  }
  if (pid == 0) exec_child(args.data(), envp.data(), fds[1]);
  ::close(fds[1]);
  ProcessResult result;
  const auto deadline = Clock::now() + timeout;
  char buffer[8192];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, int(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buffer, size_t(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (result.exit_code == 127 && result.output == "cannot run the program (exec failed)\n") {
    throw Error(fmt::format("cannot run {}: not found or not executable", argv[0]));
  }
  return result;
}

}  // namespace arfuse
