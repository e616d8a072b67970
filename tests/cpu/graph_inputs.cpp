// [cpu] What the ranks agree on when a graph's captured inputs are registered
// (runtime/graph_inputs.hpp): calls compared in capture order, an input read in place only where
// its rank offered it, and the text one process sends the others.
#include "runtime/graph_inputs.hpp"

#include <catch2/catch.hpp>

#include "arfuse/error.hpp"

using namespace arfuse;
using Catch::Matchers::Contains;

namespace {

std::uint64_t call(const char* spec, int tokens) { return captured_call(jit::KernelSpec::parse(spec), tokens); }

}  // namespace

TEST_CASE("registered inputs: every rank's offer per call, calls compared in order", "[cpu][graph]") {
  const std::uint64_t a = call("fused_ar/h6144/bf16/fp8/rms/w4/s1/graph/sm_90", 12);
  const std::uint64_t b = call("allreduce/h4096/bf16/w4/s2/graph/sm_90", 512);
  std::vector<RecordedCalls> ranks(4, RecordedCalls{{a, b, a}, {true, true, true}});
  ranks[2].offered[1] = false;  // a strided input, say
  const auto readable = readable_inputs(ranks);
  REQUIRE(readable.size() == 3);
  CHECK(readable[0] == std::vector<bool>{true, true, true, true});
  CHECK(readable[1] == std::vector<bool>{true, true, false, true});
  CHECK(readable[2] == std::vector<bool>{true, true, true, true});
  CHECK(readable_inputs(std::vector<RecordedCalls>(2)).empty());

  std::vector<RecordedCalls> fewer = ranks;
  fewer[3].calls.pop_back(), fewer[3].offered.pop_back();
  CHECK_THROWS_WITH(readable_inputs(fewer), Contains("rank 0 captured 3 calls") && Contains("rank 3 2"));
  std::vector<RecordedCalls> other = ranks;
  other[1].calls[1] = call("allreduce/h4096/bf16/w4/s2/graph/sm_90", 511);
  CHECK_THROWS_WITH(readable_inputs(other), Contains("captured call 1 differs") &&
                                                Contains("512 rows of allreduce/h4096/bf16/w4/s2/graph") &&
                                                Contains("rank 1 (511 rows"));
  CHECK(call("fused_ar/h6144/bf16/fp8/rms/w4/s1/graph/sm_90", 12) !=
        call("fused_ar/h6144/bf16/fp8/rms/w4/s2/graph/sm_90", 12));
}

TEST_CASE("a rank's recorded calls round-trip through the bootstrap's text; garbage names the rank", "[cpu][graph]") {
  const std::vector<std::uint64_t> calls{call("fused_ar/h6144/bf16/fp8/rms/w2/s1/graph/sm_90", 7), 1ull << 60};
  const std::vector<OfferedInput> inputs{{std::string("\x01\x00\xff", 3), 4096}, {}};
  std::vector<std::uint64_t> got_calls;
  std::vector<OfferedInput> got;
  decode_recorded(encode_recorded(calls, inputs), 1, got_calls, got);
  CHECK(got_calls == calls);
  REQUIRE(got.size() == 2);
  CHECK(got[0].handle == inputs[0].handle);
  CHECK(got[0].offset == 4096);
  CHECK(got[1].handle.empty());
  for (const char* text :
       {"", "[]", "{\"calls\": [1], \"inputs\": []}",
        "{\"calls\": [1], \"inputs\": [{\"handle\": \"zz\", \"offset\": 0}]}",
        "{\"calls\": [1], \"inputs\": [{\"handle\": \"\", \"offset\": 0}]}", "{\"calls\": [-1], \"inputs\": [null]}"}) {
    INFO(text);
    CHECK_THROWS_WITH(decode_recorded(text, 3, got_calls, got), Contains("rank 3 sent a list of captured calls"));
  }
}

TEST_CASE("inputs a rank could not open round-trip; a pair outside the calls names the rank", "[cpu][graph]") {
  const std::vector<UnopenedInput> sent{{0, 3}, {5, 1}};
  const auto got = decode_unopened(encode_unopened(sent), 2, 6, 4);
  REQUIRE(got.size() == 2);
  CHECK((got[1].call == 5 && got[1].rank == 1));
  CHECK(decode_unopened("[]", 0, 0, 2).empty());
  for (const char* text : {"", "{}", "[[6, 0]]", "[[0, 4]]", "[[-1, 0]]", "[[0]]", "[[\"0\", 1]]"}) {
    INFO(text);
    CHECK_THROWS_WITH(decode_unopened(text, 2, 6, 4), Contains("rank 2 sent a list of unopened inputs"));
  }
}
