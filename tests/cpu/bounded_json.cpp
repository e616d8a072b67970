// [cpu][hostile] The one reader of outside JSON (arfuse/base/bounded_json.hpp): a document nested
// a million deep is refused with its reason by the reader and by every caller that reads a file
// from outside (the tuning table, the warm-up's spec-set configuration), not recursed into.
#include "base/bounded_json.hpp"

#include <string>
#include <vector>

#include "jit/tuning.hpp"

#include "support.hpp"

using namespace arfuse;
using Catch::Contains;
using Bytes = std::vector<std::uint8_t>;

TEST_CASE("JSON nested a million deep is refused by every reader of outside JSON", "[cpu][hostile]") {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  nlohmann::json out;
  std::string why;
  CHECK_FALSE(parse_json(deep, out, why));
  CHECK_THAT(why, Contains("nested deeper than 64 levels"));
  CHECK(parse_json(std::string(64, '[') + std::string(64, ']'), out, why));
  CHECK_FALSE(parse_json(std::string(65, '[') + std::string(65, ']'), out, why));
  CHECK_FALSE(parse_json("{\"a\": 1", out, why));
  CHECK_THAT(why, Contains("parse error"));
  REQUIRE_THROWS_WITH(jit::TuningTable::parse(deep, "bomb.json"),
                      Contains("bomb.json is not valid JSON") && Contains("nested deeper than 64 levels"));
  const std::string config = test::fresh_dir() + "/deep.json";
  test::write_file(config, Bytes(deep.begin(), deep.end()));
  const auto r = test::run(test::kWarmupTool + " --dry-run --target sm_90 --config " + config);
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("nested deeper than 64 levels"));
}
