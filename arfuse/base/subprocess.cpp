#include "base/subprocess.hpp"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

// The child: a process group of its own, stdout and stderr to the pipe, then exec; 127 when exec
// fails. Only async-signal-safe calls here: the parent may have other threads (one may hold
// malloc's lock), so everything is prepared before fork(). Every other descriptor the parent
// holds was opened close-on-exec (arfuse's own are); dup2 clears that flag on the three below.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, int out) {
  ::setpgid(0, 0);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(out, STDERR_FILENO);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0) ::dup2(null, STDIN_FILENO);
  ::execvpe(argv[0], argv, envp);
  static const char kFailed[] = "cannot run the program (exec failed)\n";
  (void)!::write(STDERR_FILENO, kFailed, sizeof(kFailed) - 1);
  ::_exit(127);
}

// Whether `pid` has ended, leaving it unreaped: while it is a zombie its process group id cannot
// be taken by another process, so killing the group afterwards reaches only its own.
bool ended(pid_t pid) {
  siginfo_t info{};
  if (::waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;  // reaped already
  return info.si_pid == pid;
}

// How long output left in the pipe is read once the group is killed: a descendant that left the
// group (setsid) may still hold it open.
constexpr std::chrono::milliseconds kDrainTime{1000};
// How often the program's end is checked while a descendant keeps its output open.
constexpr int kPollMilliseconds = 50;

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
  ::setpgid(pid, pid);  // also here: the group must exist before this process may kill it
  ::close(fds[1]);
  ProcessResult result;
  auto deadline = Clock::now() + timeout;
  bool killed = false;
  const auto kill_group = [&] {
    if (!killed) ::kill(-pid, SIGKILL), killed = true;
  };
  char buffer[8192];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      if (killed) break;  // draining after the kill: what a stray descendant still holds is dropped
      result.timed_out = true;
      kill_group();
      deadline = Clock::now() + kDrainTime;
      continue;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, int(std::min<long long>(left, kPollMilliseconds)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      // The program ended but something it started still holds the pipe: end that too.
      if (!killed && ended(pid)) {
        kill_group();
        deadline = Clock::now() + kDrainTime;
      }
      continue;
    }
    if (ready < 0) break;
    const ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buffer, size_t(n));
  }
  ::close(fds[0]);
  if (!killed && !ended(pid)) {
    // The output closed before the program ended: wait for it, within the time left.
    while (!ended(pid) && Clock::now() < deadline) ::usleep(kPollMilliseconds * 1000);
    if (!ended(pid)) result.timed_out = true;
  }
  kill_group();  // whatever of the group is left, before the leader is reaped
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (result.exit_code == 127 && result.output == "cannot run the program (exec failed)\n") {
    throw Error(fmt::format("cannot run {}: not found or not executable", argv[0]));
  }
  return result;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit {}", WEXITSTATUS(status));
  if (!WIFSIGNALED(status)) return fmt::format("status {}", status);
  const int number = WTERMSIG(status);
  const char* name = ::strsignal(number);
  const char* hint = number == SIGXFSZ   ? ": a file reached the size limit, ulimit -f"
                     : number == SIGKILL ? ": killed from outside, or by the kernel for memory"
                                         : "";
  return fmt::format("signal {} ({}{})", number, name != nullptr ? name : "unknown", hint);
}

}  // namespace arfuse
