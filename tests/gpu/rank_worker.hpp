// One rank of a group that has a bootstrap, as the multi-process [gpu] tests run it: in a
// worker process (the test binary re-executed with --rank-worker) or on a thread. Each rank
// runs the same fixed list of cases on inputs drawn from a seed the parent picks fresh, and
// writes every output to a file, so the parent can compare all ranks, the in-process Group
// and the CPU reference bit for bit.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "arfuse/bootstrap.hpp"
#include "arfuse/group.hpp"

#include "jit/kernel_spec.hpp"
#include "reference/model.hpp"

namespace arfuse::test {

struct ProcessCase {
  int tokens, hidden;
  DType dtype;
  Quant quant;
  bool mirror;  // also write y in T
  Norm norm;
  int stage;
  bool plain;  // the plain all-reduce, no epilogue
};

const std::vector<ProcessCase>& process_cases();
inline EpilogueMode mode_of(const ProcessCase& c) {
  return EpilogueMode{c.quant, c.norm, 128, ScaleFormat::f32, ScaleLayout::row_major, c.mirror};
}
constexpr int kProcessMaxTokens = 513;
constexpr int kProcessMaxHidden = 8192;

struct CaseInputs {
  reference::Bits16 input, residual, weight;
};
// Rank `rank`'s contribution and the shared residual and weight, all from `seed`.
CaseInputs case_inputs(unsigned seed, int case_index, int rank);

// The bytes a rank's outputs are stored as (residual_out, out, scales, mirror as the mode has them).
std::string expected_blob(unsigned seed, int case_index, int world);

// One rank's tensors at the largest case's size.
struct CaseBuffers {
  explicit CaseBuffers(const Device& device);
  // Uploads the case's inputs for `rank` and poisons the outputs.
  void prepare(unsigned seed, int case_index, int rank);
  static std::size_t bytes() { return std::size_t(kProcessMaxTokens) * kProcessMaxHidden * 2; }
  DeviceBuffer input, residual, residual_out, weight, out, scales, mirror;
};
void launch_case(Rank& rank, const ProcessCase& c, const CaseBuffers& b, const Stream& stream);
std::string download_blob(const ProcessCase& c, const CaseBuffers& b);

struct RankRun {
  int rank = 0, world = 1;
  unsigned seed = 0;
  std::string out_dir;
  int die_at = -1;  // this rank kills itself (SIGKILL) with case die_at's kernel in flight
  std::chrono::milliseconds timeout{5000};
};

std::string blob_path(const std::string& dir, int case_index, int rank);
std::string timeout_path(const std::string& dir, int rank);
// "custom 1 nccl 0", then the path each case took, one per line.
std::string info_path(const std::string& dir, int rank);

// Builds this rank's Group on device 0 through `bootstrap` and runs every case. Returns 0 when
// all ran, 4 after a PeerTimeout (recorded in timeout_path: the missing rank and the ms it
// took), 3 on any other error (printed).
int run_rank(std::shared_ptr<Bootstrap> bootstrap, const RankRun& run);

// The worker process's main: --rank-worker SOCKET RANK WORLD SEED OUT_DIR DIE_AT TIMEOUT_MS
int rank_worker_main(int argc, char** argv);

}  // namespace arfuse::test
