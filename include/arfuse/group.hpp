// Group: the W ranks of one tensor-parallel group. Each rank is a (device, stream). Two ways
// to build one:
//   - one process drives every rank (GroupOptions::devices lists W ordinals; repeats make
//     virtual ranks, which is how one GPU runs the multi-rank protocol);
//   - one rank per process or thread, as inference engines run (GroupOptions::bootstrap, and
//     devices lists this rank's one ordinal): the ranks exchange IPC handles through the
//     bootstrap, check they agree on the configuration, and test that they reach each other.
// Every call is: validate once -> plan the path -> launch, on the caller's stream.
//
// Calls are asynchronous. Every rank must make the same sequence of calls (same kind, tokens,
// hidden, dtype, mode); the kernels meet at barriers, where each rank's call descriptor travels
// with its arrival and is compared before any peer row is read: a differing call is recorded,
// and check() turns it into CallMismatch naming both ranks and both calls. A rank that does not
// arrive makes the others give up after `timeout` and record the error; check() turns it into
// PeerTimeout. After a timeout the signal state is inconsistent: synchronise every stream, then
// reset() before the next call (or make a new group).
//
// Which path a call takes: the custom one- or two-stage kernel when every rank reaches every
// other directly and the message fits the staging buffers; NCCL otherwise, when the group has a
// communicator (Transport). The NCCL path sums in NCCL's order: it is not bit-identical to the
// custom kernels.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arfuse/bootstrap.hpp"
#include "arfuse/cache.hpp"
#include "arfuse/context.hpp"
#include "arfuse/device.hpp"
#include "arfuse/epilogue.hpp"
#include "arfuse/error.hpp"
#include "arfuse/modes.hpp"

namespace arfuse {

// Spelled "auto", "custom", "nccl" (to_string, parse_transport, the Python communicator).
enum class Transport {
  automatic,  // "auto": custom kernels where they can run; NCCL for the rest, when it loads
  custom,     // custom kernels only: refuse groups and messages they cannot serve
  nccl,       // NCCL for every call (needs one rank per process or thread)
};
ARFUSE_API const char* to_string(Transport value);
// Throws Error naming the text and the accepted names.
ARFUSE_API Transport parse_transport(std::string_view text);

struct ARFUSE_API GroupOptions {
  // Without a bootstrap: one device ordinal per rank, all driven by this process. With one:
  // exactly one, this rank's device.
  std::vector<int> devices;
  // One rank per process or thread: world and rank come from it. It must stay usable for the
  // group's lifetime (reset() and destruction meet through it).
  std::shared_ptr<Bootstrap> bootstrap;
  int max_tokens = 0;
  int max_hidden = 0;
  // When set, calls with another dtype are refused, and ranks with a bootstrap must agree.
  std::optional<DType> dtype;
  std::chrono::milliseconds timeout{5000};
  Transport transport = Transport::automatic;
  // Compare every rank's call (tokens, hidden, dtype, mode, stage) at the entry barrier of the
  // custom kernels; every rank must agree. Off saves one 8-byte store per peer and block.
  bool check_calls = true;
  CacheOptions cache;
  // The one-/two-stage thresholds as a JSON tuning table (what arfuse-bench tune writes);
  // default: the file ARFUSE_TUNING names, else the embedded table.
  std::optional<std::string> tuning;
};

// Throws Error naming the option, its value and what is allowed.
ARFUSE_API void validate_options(const GroupOptions& options);
// The world size the options describe (the bootstrap's, or one rank per listed device).
ARFUSE_API int world_of(const GroupOptions& options);

enum class Path { one_stage, two_stage, nccl };
ARFUSE_API const char* to_string(Path value);

// The epilogue's arguments (arfuse/epilogue.hpp), with `input` this rank's contribution
// [tokens, hidden]; no copy is made when it is input_buffer().
struct ARFUSE_API AllreduceRmsnormArgs : RmsnormQuantArgs {};

// Each tensor's row stride (as RmsnormQuantArgs' strides) follows it.
struct ARFUSE_API AllreduceArgs {
  const void* input = nullptr;
  int input_stride = 0;
  void* out = nullptr;  // T [tokens, hidden]
  int out_stride = 0;
  int tokens = 0;
  int hidden = 0;
  DType dtype = DType::bf16;
  bool pdl = false;  // as RmsnormQuantArgs::pdl
};

// The checks every call makes before it launches; arfuse::Error names the argument. Public so
// that an engine can validate once at set-up (and the tests without a GPU).
ARFUSE_API void validate_args(const AllreduceRmsnormArgs& args, int max_tokens, int max_hidden);
ARFUSE_API void validate_args(const AllreduceArgs& args, int max_tokens, int max_hidden);

class Group;
struct RankBuffers;
struct GroupState;

class ARFUSE_API Rank {
 public:
  int index() const { return index_; }
  Context& context() const { return *context_; }
  const Device& device() const { return context_->device(); }
  // This rank's staging buffer: write the input here to skip the copy.
  void* input_buffer() const;
  void allreduce_rmsnorm(const AllreduceRmsnormArgs& args, const Stream& stream);
  void allreduce(const AllreduceArgs& args, const Stream& stream);
  // Loads (compiling on a cache miss) every kernel a call with these parameters can take, on
  // either stage. Call it on every rank before the first call of a shape: with several ranks
  // on one GPU, loading a kernel while a peer's kernel waits at a barrier can stall the load
  // until that peer times out.
  // The kernels of contiguous calls; a call with row strides or a padded out takes its own
  // kernels (the spec's views field), loaded on its first call.
  void prepare(int hidden, DType dtype, const EpilogueMode& mode = {});
  // The path this rank's last call took (none before the first call).
  std::optional<Path> last_path() const { return last_path_; }

 private:
  friend class Group;
  friend struct RankAccess;  // the call path (runtime/call.cpp)
  Rank(Group& group, RankBuffers& buffers, Context& context);

  Group* group_;
  RankBuffers* buffers_;
  int index_;
  Context* context_;
  DeviceBuffer oversize_;  // NCCL's output for messages above the staging capacity
  std::optional<Path> last_path_;
};

class ARFUSE_API Group {
 public:
  explicit Group(GroupOptions options);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int world() const;
  // A rank this process drives; throws Error for a rank that lives in another process.
  Rank& rank(int r);
  // The one rank of a group built with a bootstrap (or of any group of one local rank).
  Rank& local_rank();
  int local_ranks() const { return int(ranks_.size()); }
  int max_tokens() const { return options_.max_tokens; }
  int max_hidden() const { return options_.max_hidden; }
  // Ranks that share a device with another rank.
  bool has_virtual_ranks() const;

  // 1 or 2 for a message of tokens x hidden T elements; forced_stage() wins when set.
  int stage_for(int tokens, int hidden) const;
  // The path a call of this shape takes; throws Error when none can serve it.
  Path path_for(int tokens, int hidden) const;
  // Whether the custom kernels can run (every rank reaches every other), and why not.
  bool custom_path_available() const;
  const std::string& custom_path_failure() const;
  bool has_nccl() const;
  void force_stage(std::optional<int> stage);
  std::optional<int> forced_stage() const;

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

 private:
  friend class Rank;
  friend struct GroupAccess;  // the call path and set-up (runtime/group_state.hpp)
  const Context& open_context(int ordinal);

  GroupOptions options_;
  std::vector<std::unique_ptr<Context>> contexts_;  // one per distinct device
  std::unique_ptr<GroupState> state_;
  std::vector<std::unique_ptr<Rank>> ranks_;  // the ranks this process drives
  bool closed_ = false;
};

}  // namespace arfuse
