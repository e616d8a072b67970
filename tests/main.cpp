// The test binary; re-executed with --rank-worker it is one rank of a multi-process group
// (tests/rank_worker.hpp), so the multi-process tests need no second executable; with
// --static-group-exit a program that keeps a Group in a static (tests/static_group_worker.hpp).
#define CATCH_CONFIG_RUNNER
#include <cstdlib>
#include <cstring>

#include <catch2/catch.hpp>

#include "hip_over_cuda.hpp"
#include "rank_worker.hpp"
#include "static_group_worker.hpp"

int main(int argc, char** argv) {
  // The [gpu] suites through the HIP backend on an NVIDIA GPU (testing/hip_over_cuda.hpp); rank
  // workers inherit the variable, so multi-process groups run through it too.
  if (const char* v = std::getenv("HIP_OVER_CUDA_FOR_TESTS"); v != nullptr && std::strcmp(v, "1") == 0) {
    arfuse::test::install_hip_over_cuda();
  }
  if (argc > 1 && std::strcmp(argv[1], "--rank-worker") == 0) return arfuse::test::rank_worker_main(argc - 2, argv + 2);
  if (argc > 1 && std::strcmp(argv[1], "--static-group-exit") == 0) return arfuse::test::static_group_worker_main();
  return Catch::Session().run(argc, argv);
}
