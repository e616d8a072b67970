// [cpu] run_process, the seam the clang back end runs its compiler through: output collected,
// exit codes kept, a program that hangs is killed at its timeout, one that is missing is an Error.
#include "arfuse/base/subprocess.hpp"

#include "arfuse/error.hpp"

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
