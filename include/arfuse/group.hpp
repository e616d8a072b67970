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

#include <memory>
#include <optional>
#include <string>

#include "arfuse/allreduce.hpp"
#include "arfuse/context.hpp"
#include "arfuse/device.hpp"
#include "arfuse/epilogue.hpp"

namespace arfuse {

class ARFUSE_API Rank {
 public:
  class Impl;  // the runtime's side of a rank, defined where the group is made
  explicit Rank(std::unique_ptr<Impl> impl);
  ~Rank();
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;

  int index() const;
  Context& context() const;
  const Device& device() const;
  // This rank's staging buffer: write the input here to skip the copy.
  void* input_buffer() const;
  void allreduce_rmsnorm(const AllreduceRmsnormArgs& args, const Stream& stream);
  void allreduce(const AllreduceArgs& args, const Stream& stream);
  // Loads (compiling on a cache miss) every kernel a call with these parameters can take, on
  // either stage, eager or captured in a graph (GroupOptions::graph_calls). Call it on every
  // rank before the first call of a shape: with several ranks on one GPU, loading a kernel while
  // a peer's kernel waits at a barrier can stall the load until that peer times out.
  // The kernels of contiguous calls; a call with row strides or a padded out takes its own
  // kernels (the spec's views field), loaded on its first call.
  void prepare(int hidden, DType dtype, const EpilogueMode& mode = {});
  // The path this rank's last call took (none before the first call).
  std::optional<Path> last_path() const;

 private:
  friend class Group;  // register_graph_inputs reads every local rank's captured calls
  std::unique_ptr<Impl> impl_;
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
  int local_ranks() const;
  int max_tokens() const;
  int max_hidden() const;
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
  void set_check_calls(bool on);
  // Clears signals, epochs and error words on every rank. No call may be in flight. With a
  // bootstrap, every rank calls it (it meets the others before and after).
  void reset();
  // After capturing calls into graphs (stream capture): tells the ranks where each captured
  // call's inputs lie, so that the graphs' kernels read them there instead of copying them into
  // the staging buffers first. Every rank must have captured the same calls in the same order
  // since the last registration (Error otherwise, on every rank, naming the first difference).
  // An input is read in place when its rows are contiguous and every rank can reach its memory
  // (one process: the same device, or memory peer access covers; processes: memory the driver
  // exports an IPC handle for); other inputs keep the copy. The captured inputs must stay where
  // they are while the graphs live (a graph's memory pool keeps them). Not while capturing, and
  // no captured call may be in flight. With a bootstrap every rank calls it. Returns the
  // captured calls whose inputs every rank now reads in place, of those registered.
  struct GraphInputs {
    int calls = 0;     // calls registered
    int in_place = 0;  // of them, with every rank's input read where it lies
  };
  GraphInputs register_graph_inputs();
  // Meets the other ranks (with a bootstrap), then releases NCCL, peer mappings and buffers.
  // The destructor calls it; call it yourself to see errors (a lost peer) as exceptions.
  void close();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace arfuse
