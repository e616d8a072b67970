// Group: the W ranks of one tensor-parallel group. Each rank is a (device, stream). Two ways
// to build one:
//   - one process drives every rank (GroupOptions::devices lists W ordinals; repeats make
//     virtual ranks, which is how one GPU runs the multi-rank protocol);
//   - one rank per process or thread, as inference engines run (GroupOptions::bootstrap, and
//     devices lists this rank's one ordinal): the ranks exchange IPC handles through the
//     bootstrap, check they agree on the configuration, and test that they reach each other.
// Every rank owns its buffers; peers reach them through PeerBuffers:
//
//   rank r, on its device
//   +------------------------------------------+
//   | signal  Signal (templates/signal.cuh)    |  flags written by peers, epochs, error word
//   | staging T[max_tokens * max_hidden]       |  this rank's input, read by every rank
//   | gather  T[max_tokens * max_hidden]       |  two-stage: reduced rows pushed by all ranks
//   +------------------------------------------+
//
// Calls are asynchronous on the caller's stream. Every rank must make the same sequence of
// calls (same kind, tokens, hidden, dtype, modes); the kernels meet at barriers, where each
// rank's call descriptor travels with its arrival and is compared before any peer row is read
// (check_calls): a differing call is recorded, and check() turns it into CallMismatch naming
// both ranks and both calls. A rank that does not arrive makes the others give up after
// `timeout` and record the error; check() turns it into PeerTimeout. After a timeout the signal state is inconsistent: synchronise
// every stream, then reset() before the next call (or make a new group).
//
// Which path a call takes (path_for): the custom one- or two-stage kernel when every rank
// reaches every other directly and the message fits the staging buffers; NCCL otherwise,
// when the group has a communicator (Transport). The NCCL path sums in NCCL's order: it is
// not bit-identical to the custom kernels.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "arfuse/runtime/bootstrap.hpp"
#include "arfuse/runtime/context.hpp"
#include "arfuse/runtime/epilogue.hpp"
#include "arfuse/runtime/tuning.hpp"
#include "arfuse/templates/signal.cuh"

namespace arfuse {

enum class Transport {
  automatic,  // custom kernels where they can run; NCCL for the rest, when it loads
  custom,     // custom kernels only: refuse groups and messages they cannot serve
  nccl,       // NCCL for every call (needs one rank per process or thread)
};
enum class Path { one_stage, two_stage, nccl };
const char* to_string(Transport value);
const char* to_string(Path value);

struct GroupOptions {
  // Without a bootstrap: one device ordinal per rank, all driven by this process. With one:
  // exactly one, this rank's device.
  std::vector<int> devices;
  // One rank per process or thread: world and rank come from it. It must stay usable for the
  // group's lifetime (reset() and destruction meet through it).
  std::shared_ptr<Bootstrap> bootstrap;
  int max_tokens = 0;
  int max_hidden = 0;
  // When set, calls with another dtype are refused, and ranks with a bootstrap must agree.
  std::optional<jit::DType> dtype;
  std::chrono::milliseconds timeout{5000};
  Transport transport = Transport::automatic;
  // Compare every rank's call (tokens, hidden, dtype, quant, norm, stage) at the entry barrier
  // of the custom kernels; every rank must agree. Off saves one 8-byte store per peer and
  // block (measured: docs/performance-notes.md).
  bool check_calls = true;
  cache::CacheOptions cache;
  std::optional<TuningTable> tuning;  // default: TuningTable::from_environment()
};

// The epilogue's arguments (runtime/epilogue.hpp), with `input` this rank's contribution
// [tokens, hidden]; no copy is made when it is input_buffer().
struct AllreduceRmsnormArgs : RmsnormQuantArgs {};

struct AllreduceArgs {
  const void* input = nullptr;
  void* out = nullptr;  // T [tokens, hidden]
  int tokens = 0;
  int hidden = 0;
  jit::DType dtype = jit::DType::bf16;
};

// The checks every call makes before it launches; arfuse::Error names the argument. Public so
// that an engine can validate once at set-up (and the tests without a GPU).
void validate_args(const AllreduceRmsnormArgs& args, int max_tokens, int max_hidden);
void validate_args(const AllreduceArgs& args, int max_tokens, int max_hidden);

class Group;

class Rank {
 public:
  int index() const { return index_; }
  Context& context() const { return *context_; }
  const Device& device() const { return context_->device(); }
  // This rank's staging buffer: write the input here to skip the copy.
  void* input_buffer() const { return staging_.get(); }
  void allreduce_rmsnorm(const AllreduceRmsnormArgs& args, const Stream& stream);
  void allreduce(const AllreduceArgs& args, const Stream& stream);
  // Loads (compiling on a cache miss) every kernel a call with these parameters can take, on
  // either stage. Call it on every rank before the first call of a shape: with several ranks
  // on one GPU, loading a kernel while a peer's kernel waits at a barrier can stall the load
  // until that peer times out.
  void prepare(int hidden, jit::DType dtype, jit::Quant quant = jit::Quant::none, jit::Norm norm = jit::Norm::rms);
  // The path this rank's last call took (none before the first call).
  std::optional<Path> last_path() const { return last_path_; }

 private:
  friend class Group;
  Rank(Group& group, int index, Context& context);
  void launch(const jit::KernelSpec& spec, FusedArgs args, const void* input, const Stream& stream);
  void* nccl_scratch(std::size_t bytes, const Stream& stream);
  FusedArgs fused_args(int tokens) const;
  void note_path(Path path, int tokens, int hidden);
  template <typename Args>
  std::optional<Path> begin_call(const Args& args);

  Group* group_;
  int index_;
  Context* context_;
  DeviceBuffer signal_, staging_, gather_;
  DeviceBuffer oversize_;  // NCCL's output for messages above the staging capacity
  std::optional<Path> last_path_;
};

class IpcMapping;
class NcclCommunicator;
namespace detail {
struct RankIdentity;
}

class Group {
 public:
  explicit Group(GroupOptions options);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int world() const { return world_; }
  // A rank this process drives; throws Error for a rank that lives in another process.
  Rank& rank(int r);
  // The one rank of a group built with a bootstrap (or of any group of one local rank).
  Rank& local_rank();
  int local_ranks() const { return int(ranks_.size()); }
  int max_tokens() const { return options_.max_tokens; }
  int max_hidden() const { return options_.max_hidden; }
  // Ranks that share a device with another rank.
  bool has_virtual_ranks() const { return virtual_ranks_; }

  // 1 or 2 for a message of tokens x hidden T elements; forced_stage() wins when set.
  int stage_for(int tokens, int hidden) const;
  // The path a call of this shape takes; throws Error when none can serve it.
  Path path_for(int tokens, int hidden) const;
  // Whether the custom kernels can run (every rank reaches every other), and why not.
  bool custom_path_available() const { return custom_failure_.empty(); }
  const std::string& custom_path_failure() const { return custom_failure_; }
  bool has_nccl() const { return nccl_ != nullptr; }
  void force_stage(std::optional<int> stage);
  std::optional<int> forced_stage() const { return forced_stage_; }
  const TuningTable& tuning() const { return tuning_; }

  // Reads every rank's error word; throws PeerTimeout naming the rank that did not arrive, or
  // CallMismatch naming two ranks whose calls differ. Call after the ranks' streams are
  // synchronised.
  void check() const;
  // Turns the call check on or off for the calls that follow (benchmarks: its cost). With a
  // bootstrap every rank must do the same, between the same calls.
  void set_check_calls(bool on) { options_.check_calls = on; }
  // Clears signals, epochs and error words on every rank. No call may be in flight. With a
  // bootstrap, every rank calls it (it meets the others before and after).
  void reset();
  // Meets the other ranks (with a bootstrap), then releases NCCL, peer mappings and buffers.
  // The destructor calls it; call it yourself to see errors (a lost peer) as exceptions.
  void close();

  // Blocks per kernel launch: all ranks use the same grid; with virtual ranks it is capped so
  // every rank's blocks are resident together.
  unsigned grid_for(const LaunchableKernel& kernel, int rows) const;

 private:
  friend class Rank;
  void build_in_process();
  void build_with_bootstrap();
  std::string open_peer_buffers(const std::vector<detail::RankIdentity>& ranks);
  void set_up_nccl(bool every_rank_owns_a_gpu);
  void check_call(jit::DType dtype) const;
  int call_max_tokens() const;
  int call_max_hidden() const;

  GroupOptions options_;
  TuningTable tuning_;
  int world_ = 0;
  std::vector<std::unique_ptr<Context>> contexts_;  // one per distinct device
  std::vector<std::unique_ptr<Rank>> ranks_;        // the ranks this process drives
  std::vector<std::unique_ptr<IpcMapping>> mappings_;  // peers' buffers in other processes
  std::unique_ptr<NcclCommunicator> nccl_;
  PeerBuffers peers_{};
  int max_ranks_per_device_ = 1;
  bool virtual_ranks_ = false;
  std::string custom_failure_;  // empty: the custom kernels can run
  std::optional<int> forced_stage_;
  bool closed_ = false;
};

}  // namespace arfuse
