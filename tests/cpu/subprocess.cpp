// [cpu] run_process, the seam the clang back end runs its compiler through: output collected,
// exit codes kept, a program that hangs is killed at its timeout with everything it started, one
// that is missing is an Error.
#include "base/subprocess.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "arfuse/error.hpp"

#include "cache/disk_cache.hpp"

#include "support.hpp"

using namespace arfuse;
using Catch::Contains;
using std::chrono::milliseconds;

TEST_CASE("run_process collects output and exit codes, kills at the timeout, names a missing program",
          "[cpu][subprocess]") {
  const auto r = run_process({"sh", "-c", "echo out; echo err >&2; exit 3"}, milliseconds(10000));
  CHECK(r.exit_code == 3);
  CHECK_FALSE(r.timed_out);
  CHECK_THAT(r.output, Contains("out") && Contains("err"));
  const auto env = run_process({"sh", "-c", "echo $ARFUSE_PROBE"}, milliseconds(10000), {{"ARFUSE_PROBE", "seen"}});
  CHECK(env.output == "seen\n");
  const auto slow = run_process({"sleep", "10"}, milliseconds(200));
  CHECK(slow.timed_out);
  CHECK(slow.exit_code == -1);
  REQUIRE_THROWS_WITH(run_process({"/nonexistent/program"}, milliseconds(10000)),
                      Contains("cannot run /nonexistent/program"));
  REQUIRE_THROWS_AS(run_process({}, milliseconds(1000)), Error);
}

namespace {

// Whether process `pid` still runs (a zombie waiting for its parent to reap it does not).
bool running(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

long read_pid(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  in >> pid;
  return pid;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("a program that leaves a child behind: the call ends when the program does, and the child with it",
          "[cpu][subprocess][hostile]") {
  const std::string dir = test::fresh_dir();
  const std::string pid_file = dir + "/sleeper";
  const auto start = std::chrono::steady_clock::now();
  // The child inherits the program's output and would hold it open for 30 s.
  const auto r =
      run_process({"sh", "-c", "sleep 30 & echo $! > " + pid_file + "; echo started; exit 4"}, milliseconds(20000));
  CHECK(seconds_since(start) < 10);
  CHECK(r.exit_code == 4);
  CHECK_FALSE(r.timed_out);
  CHECK_THAT(r.output, Contains("started"));
  const long sleeper = read_pid(pid_file);
  REQUIRE(sleeper > 0);
  for (int i = 0; i < 100 && running(sleeper); ++i) ::usleep(20000);
  CHECK_FALSE(running(sleeper));
}

TEST_CASE("a program that hangs with a child holding its output: the timeout ends both", "[cpu][subprocess][hostile]") {
  const std::string dir = test::fresh_dir();
  const std::string pid_file = dir + "/sleeper";
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_process({"sh", "-c", "sleep 30 & echo $! > " + pid_file + "; sleep 30"}, milliseconds(300));
  CHECK(seconds_since(start) < 10);
  CHECK(r.timed_out);
  CHECK(r.exit_code == -1);
  CHECK(r.signal == SIGKILL);
  const long sleeper = read_pid(pid_file);
  REQUIRE(sleeper > 0);
  for (int i = 0; i < 100 && running(sleeper); ++i) ::usleep(20000);
  CHECK_FALSE(running(sleeper));
}

TEST_CASE("a program inherits no descriptor of arfuse's but its output", "[cpu][subprocess][hostile]") {
  // arfuse holds descriptors of its own meanwhile: a cache folder and its entries' folder.
  const std::string dir = test::fresh_dir();
  cache::DiskCache disk(dir);
  REQUIRE(disk.readable());
  // What this process would pass on anyway: descriptors its own parent left without close-on-exec.
  std::set<int> inheritable{0, 1, 2};
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(e.path().filename().string());
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) == 0) inheritable.insert(fd);
  }
  // ls lists the descriptors of the shell, the program run, from a process of its own.
  const auto r = run_process({"sh", "-c", "ls /proc/$$/fd"}, milliseconds(10000));
  REQUIRE(r.exit_code == 0);
  std::istringstream listed(r.output);
  for (int fd; listed >> fd;) {
    CAPTURE(fd);
    CHECK(inheritable.count(fd) == 1);
  }
}

TEST_CASE("a wait status reads as its exit code or its signal, with what the signal means", "[cpu][subprocess]") {
  CHECK(describe_wait_status(3 << 8) == "exit 3");
  CHECK_THAT(describe_wait_status(SIGXFSZ), Contains("signal 25") && Contains("ulimit -f"));
  CHECK_THAT(describe_wait_status(SIGKILL), Contains("signal 9 (Killed"));
}
