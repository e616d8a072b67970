// [cpu][bench] The bench's option checks, which run before any device is opened: a timing
// regime the mode does not have, and peers timed in another regime than the run, are usage
// errors (exit 2) that say why.
#include <fstream>
#include <string>

#include "support.hpp"

using Catch::Matchers::Contains;
using namespace arfuse;

TEST_CASE("the bench refuses fixed inputs outside the epilogue and peers timed another way", "[cpu][bench]") {
  const std::string bench = std::string(ARFUSE_BINARY_DIR) + "/tools/arfuse-bench";
  const auto fused = test::run(bench + " fused --fixed-inputs");
  CHECK(fused.status == 2);
  CHECK_THAT(fused.output, Contains("--fixed-inputs does not go with the fused mode"));

  const std::string dir = test::fresh_dir("arfuse-bench-peers");
  const std::string fixed = dir + "/fixed.json", rotating = dir + "/rotating.json", old = dir + "/old.json";
  std::ofstream(fixed) << R"({"tool": "torch_bench.py", "buffers": "fixed inputs", "rows": []})";
  std::ofstream(rotating) << R"({"tool": "torch_bench.py", "buffers": "rotating", "rows": []})";
  std::ofstream(old) << R"({"tool": "torch_bench.py", "rows": []})";  // files without the field were rotating
  const auto mixed = test::run(bench + " epilogue --peers " + fixed);
  CHECK(mixed.status == 2);
  CHECK_THAT(mixed.output, Contains("was timed with fixed inputs and this run with rotating buffers"));
  const auto other_way = test::run(bench + " epilogue --fixed-inputs --peers " + rotating);
  CHECK(other_way.status == 2);
  CHECK_THAT(other_way.output, Contains("was timed with rotating buffers and this run with fixed inputs"));
  const auto also_other = test::run(bench + " epilogue --fixed-inputs --peers " + old);
  CHECK(also_other.status == 2);
  // Matching regimes pass the checks and reach the device (one tiny row where there is a GPU).
  for (const std::string& args : {" epilogue --fixed-inputs --peers " + fixed, " epilogue --peers " + rotating}) {
    const auto ok = test::run(bench + args + " --shapes 1x2048 --quant none --runs 1 --replays 1");
    CHECK(ok.status != 2);
    CHECK_THAT(ok.output, !Contains("would not compare"));
  }
}
