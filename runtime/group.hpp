// Group: the W ranks of one tensor-parallel group, driven from one process. Each rank is a
// (device, stream); ranks may share a device (virtual ranks), which is how one GPU runs the
// multi-rank protocol. The group owns every rank's buffers:
//
//   rank r, on its device                       peers reach it through PeerBuffers
//   +------------------------------------------+
//   | signal  Signal (templates/signal.cuh)    |  flags written by peers, epochs, error word
//   | staging T[max_tokens * max_hidden]       |  this rank's input, read by every rank
//   | gather  T[max_tokens * max_hidden]       |  two-stage: reduced rows pushed by all ranks
//   +------------------------------------------+
//
// Calls are asynchronous on the caller's stream. Every rank must make the same sequence of
// calls (same kind, tokens, hidden, dtype, modes); the kernels meet at barriers. A rank that
// does not arrive makes the others give up after `timeout` and record the error; check()
// turns it into PeerTimeout. After a timeout the signal state is inconsistent: synchronise
// every stream, then reset() before the next call (or make a new group).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "arfuse/runtime/context.hpp"
#include "arfuse/runtime/epilogue.hpp"
#include "arfuse/runtime/tuning.hpp"
#include "arfuse/templates/signal.cuh"

namespace arfuse {

struct GroupOptions {
  std::vector<int> devices;  // one device ordinal per rank; repeats make virtual ranks
  int max_tokens = 0;
  int max_hidden = 0;
  std::chrono::milliseconds timeout{5000};
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

 private:
  friend class Group;
  Rank(Group& group, int index, Context& context);
  void launch(const jit::KernelSpec& spec, FusedArgs args, const void* input, std::size_t bytes, const Stream& stream);

  Group* group_;
  int index_;
  Context* context_;
  DeviceBuffer signal_, staging_, gather_;
};

class Group {
 public:
  explicit Group(GroupOptions options);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int world() const { return int(ranks_.size()); }
  Rank& rank(int r);
  int max_tokens() const { return options_.max_tokens; }
  int max_hidden() const { return options_.max_hidden; }
  // Ranks that share a device with another rank.
  bool has_virtual_ranks() const { return virtual_ranks_; }

  // 1 or 2 for a message of tokens x hidden T elements; forced_stage() wins when set.
  int stage_for(int tokens, int hidden) const;
  void force_stage(std::optional<int> stage);
  std::optional<int> forced_stage() const { return forced_stage_; }
  const TuningTable& tuning() const { return tuning_; }

  // Reads every rank's error word; throws PeerTimeout naming the rank that did not arrive.
  // Call after the ranks' streams are synchronised.
  void check() const;
  // Clears signals, epochs and error words on every rank. No call may be in flight.
  void reset();

  // Blocks per kernel launch: all ranks use the same grid; with virtual ranks it is capped so
  // every rank's blocks are resident together.
  unsigned grid_for(const LaunchableKernel& kernel, int rows) const;

 private:
  friend class Rank;
  GroupOptions options_;
  TuningTable tuning_;
  std::vector<std::unique_ptr<Context>> contexts_;  // one per distinct device
  std::vector<std::unique_ptr<Rank>> ranks_;
  PeerBuffers peers_{};
  int max_ranks_per_device_ = 1;
  bool virtual_ranks_ = false;
  std::optional<int> forced_stage_;
};

}  // namespace arfuse
