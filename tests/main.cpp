// The test binary; re-executed with --rank-worker it is one rank of a multi-process group
// (tests/rank_worker.hpp), so the multi-process tests need no second executable.
#define CATCH_CONFIG_RUNNER
#include <cstring>

#include <catch2/catch.hpp>

#include "rank_worker.hpp"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--rank-worker") == 0) return arfuse::test::rank_worker_main(argc - 2, argv + 2);
  return Catch::Session().run(argc, argv);
}
