#include "arfuse/group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <exception>

#include "arfuse/error.hpp"

#include "base/log.hpp"
#include "runtime/call.hpp"
#include "runtime/context.hpp"
#include "runtime/device/ipc.hpp"
#include "runtime/graph_inputs.hpp"
#include "runtime/group_state.hpp"
#include "runtime/signal_error.hpp"
#include "runtime/validate.hpp"

namespace arfuse {

namespace {

jit::TuningTable tuning_of(const GroupOptions& o) {
  return o.tuning ? jit::TuningTable::parse(*o.tuning, "GroupOptions::tuning") : jit::TuningTable::from_environment();
}

}  // namespace

// The contexts outlive the buffers made on their devices, and the buffers the ranks.
class Group::Impl {
 public:
  std::vector<std::unique_ptr<Context>> contexts;  // one per distinct device
  GroupState state;
  std::vector<std::unique_ptr<Rank>> ranks;  // the ranks this process drives

  const Context& open_context(int ordinal) {
    for (auto& c : contexts) {
      if (c->device().ordinal() == ordinal) return *c;
    }
    ContextOptions co;
    co.device = ordinal;
    co.cache = state.options.cache;
    contexts.push_back(std::make_unique<Context>(co));
    return *contexts.back();
  }
};

class Rank::Impl : public RankState {
 public:
  explicit Impl(RankState state) : RankState(std::move(state)) {}
};

Group::Group(GroupOptions options) : impl_(std::make_unique<Impl>()) {
  GroupState& state = impl_->state;
  state.options = std::move(options);
  state.tuning = tuning_of(state.options);
  state.resources = set_up_group(state.options, state.tuning, [this](int ordinal) -> const Device& {
    return impl_->open_context(ordinal).device();
  });
  state.policy = StagePolicy::resolve(state.tuning, state.resources.topology);
  for (auto& buffers : state.resources.ranks) {
    Context* context = nullptr;
    for (auto& c : impl_->contexts) {
      if (&c->device() == buffers->device) context = c.get();
    }
    impl_->ranks.push_back(std::make_unique<Rank>(std::make_unique<Rank::Impl>(
        RankState{&state, buffers.get(), buffers->rank, context, {}, std::nullopt, 0, {}})));
  }
}

Group::~Group() {
  try {
    close();
  } catch (const std::exception& e) {
    warn(fmt::format("closing the group: {}", e.what()));
  }
}

void Group::close() {
  GroupState& state = impl_->state;
  if (state.closed) return;
  state.closed = true;
  // Our views of the peers' buffers go first: a peer process that died cannot finish exiting
  // while we still map its memory, and it closes its bootstrap connection only then.
  state.resources.input_mappings.clear();
  state.resources.mappings.clear();
  std::string lost;
  if (state.options.bootstrap && world() > 1) {
    try {
      state.options.bootstrap->barrier();  // no peer still reads our buffers
    } catch (const Error& e) {
      lost = e.what();
    }
  }
  if (state.resources.nccl && !lost.empty()) state.resources.nccl->abort();
  state.resources.nccl.reset();
  impl_->ranks.clear();
  state.resources.ranks.clear();
  if (!lost.empty()) throw Error(fmt::format("a peer did not reach the group's close: {}", lost));
}

int Group::world() const { return impl_->state.world(); }
int Group::local_ranks() const { return int(impl_->ranks.size()); }
int Group::max_tokens() const { return impl_->state.options.max_tokens; }
int Group::max_hidden() const { return impl_->state.options.max_hidden; }
bool Group::has_virtual_ranks() const { return impl_->state.topology().virtual_ranks(); }
bool Group::custom_path_available() const { return impl_->state.topology().custom_available(); }
const std::string& Group::custom_path_failure() const { return impl_->state.topology().custom_unavailable; }
bool Group::has_nccl() const { return impl_->state.topology().nccl; }
std::optional<int> Group::forced_stage() const { return impl_->state.policy.forced_stage; }
void Group::set_check_calls(bool on) { impl_->state.options.check_calls = on; }

Rank& Group::rank(int r) {
  if (impl_->state.closed) throw Error("the group is closed");
  if (r < 0 || r >= world())
    throw Error(fmt::format("rank {} does not exist: the group has ranks 0 to {}", r, world() - 1));
  for (auto& rank : impl_->ranks) {
    if (rank->index() == r) return *rank;
  }
  throw Error(
      fmt::format("rank {} lives in another process; this process drives rank {}", r, impl_->ranks[0]->index()));
}

Rank& Group::local_rank() {
  if (impl_->state.closed) throw Error("the group is closed");
  if (impl_->ranks.size() != 1)
    throw Error(fmt::format("this process drives all {} ranks: use rank(r)", impl_->ranks.size()));
  return *impl_->ranks[0];
}

int Group::stage_for(int tokens, int hidden) const {
  return impl_->state.policy.stage_for(std::uint64_t(tokens) * std::uint64_t(hidden) * 2);
}

Path Group::path_for(int tokens, int hidden) const {
  CallShape shape;
  shape.tokens = tokens, shape.hidden = hidden;
  return plan_call(impl_->state.topology(), impl_->state.policy, shape).path;
}

void Group::force_stage(std::optional<int> stage) {
  if (stage && *stage != 1 && *stage != 2)
    throw Error(fmt::format("stage {} does not exist: use 1, 2 or none", *stage));
  impl_->state.policy.forced_stage = stage;
}

void Group::check() const {
  for (const auto& buffers : impl_->state.resources.ranks) {
    unsigned int code = 0;
    buffers->signal.download(&code, sizeof(code), offsetof(Signal, error));
    if (code == 0) continue;
    unsigned long long calls[2] = {};
    if (signal_error_kind(code) == kCallMismatch) {
      buffers->signal.download(calls, sizeof(calls), offsetof(Signal, mismatch_mine));
    }
    throw_signal_error(code, buffers->rank, calls, impl_->state.options.timeout);
  }
}

void Group::reset() {
  const GroupState& state = impl_->state;
  if (state.options.bootstrap && world() > 1) state.options.bootstrap->barrier();  // every rank has stopped
  // The Signal only: the input slots after it stay as registered (the graphs still use them).
  static const Signal clean{};
  for (auto& buffers : state.resources.ranks) buffers->signal.upload(&clean, sizeof clean);
  if (state.options.bootstrap && world() > 1) state.options.bootstrap->barrier();  // every rank is clean
}

namespace {

// Writes the rows of a rank's recorded calls into their slots: rows[k][r], rank r's input of
// call k in this rank's address space, or null for its staging buffer. A registration's slots
// are consecutive (each captured call takes the next), so one copy writes them all.
void fill_slots(RankBuffers& buffers, const std::vector<CapturedInput>& calls,
                const std::vector<std::vector<const void*>>& rows) {
  if (calls.empty()) return;
  std::vector<InputSlot> slots(calls.size(), InputSlot{});
  for (std::size_t k = 0; k < calls.size(); ++k) {
    if (calls[k].slot != calls[0].slot + k) throw Error("captured calls' input slots are not consecutive");
    for (std::size_t r = 0; r < rows[k].size(); ++r) slots[k].rows[r] = rows[k][r];
  }
  buffers.signal.upload(slots.data(), slots.size() * sizeof(InputSlot),
                        sizeof(Signal) + std::size_t(calls[0].slot) * sizeof(InputSlot));
}

Group::GraphInputs count_in_place(const std::vector<std::vector<bool>>& readable) {
  Group::GraphInputs counts;
  counts.calls = int(readable.size());
  for (const auto& ranks : readable)
    counts.in_place += std::all_of(ranks.begin(), ranks.end(), [](bool b) { return b; }) ? 1 : 0;
  return counts;
}

// Whether every rank of this process can read `input` of `device`: the ranks share the device,
// or the memory is an ordinary allocation (peer access covers it; the driver exports those).
bool reachable_in_process(const Device& device, const void* input, bool one_device) {
  if (one_device) return true;
  try {
    export_ipc_address(device, input);
    return true;
  } catch (const Error& e) {
    debug(fmt::format("a captured input is copied: its memory is not reachable from the other GPUs ({})", e.what()));
    return false;
  }
}

// A peer's captured input in this process: its allocation opened once (kept until close), plus
// the offset.
const void* open_peer_input(GroupState& state, const Device& device, int peer, const OfferedInput& input) {
  auto& mapping = state.resources.input_mappings[{peer, input.handle}];
  if (!mapping) mapping = std::make_unique<IpcMapping>(device, input.handle);
  return static_cast<const char*>(mapping->get()) + input.offset;
}

// One rank per process: each offers its captured inputs' IPC handles, every rank opens the
// others', and a second exchange drops the inputs some rank could not open, so that every rank
// decides alike which inputs are read in place.
Group::GraphInputs register_inputs_between_processes(GroupState& state, RankState& me) {
  Bootstrap& bootstrap = *state.options.bootstrap;
  const int world = state.world();
  std::vector<std::uint64_t> calls;
  std::vector<OfferedInput> offers;
  for (const CapturedInput& c : me.captured) {
    calls.push_back(c.call);
    OfferedInput offer;
    if (c.input != nullptr) {
      try {
        const IpcAddress at = export_ipc_address(me.device(), c.input);
        offer = OfferedInput{at.handle, at.offset};
      } catch (const Error& e) {
        debug(fmt::format("rank {}: a captured input is copied: the driver does not export its memory ({})", me.index,
                          e.what()));
      }
    }
    offers.push_back(offer);
  }
  const std::vector<std::string> texts = bootstrap.allgather(encode_recorded(calls, offers));
  const auto ranks = std::size_t(world);
  std::vector<std::vector<OfferedInput>> inputs(ranks);
  std::vector<RecordedCalls> recorded(ranks);
  for (int r = 0; r < world; ++r) {
    decode_recorded(texts[std::size_t(r)], r, recorded[std::size_t(r)].calls, inputs[std::size_t(r)]);
    for (const OfferedInput& in : inputs[std::size_t(r)])
      recorded[std::size_t(r)].offered.push_back(!in.handle.empty());
  }
  std::vector<std::vector<bool>> readable = readable_inputs(recorded);
  std::vector<std::vector<const void*>> rows(readable.size(), std::vector<const void*>(std::size_t(world)));
  std::vector<UnopenedInput> unopened;  // offered inputs this rank could not open
  for (std::size_t k = 0; k < readable.size(); ++k) {
    for (int r = 0; r < world; ++r) {
      if (!readable[k][std::size_t(r)]) continue;
      if (r == me.index) {
        rows[k][std::size_t(r)] = me.captured[k].input;
        continue;
      }
      try {
        rows[k][std::size_t(r)] = open_peer_input(state, me.device(), r, inputs[std::size_t(r)][k]);
      } catch (const Error& e) {
        debug(fmt::format("rank {}: rank {}'s captured input {} is copied: it cannot be opened here ({})", me.index, r,
                          k, e.what()));
        unopened.push_back(UnopenedInput{k, r});
      }
    }
  }
  const std::vector<std::string> failures = bootstrap.allgather(encode_unopened(unopened));
  for (int from = 0; from < world; ++from) {
    for (const UnopenedInput& u : decode_unopened(failures[std::size_t(from)], from, readable.size(), world)) {
      readable[u.call][std::size_t(u.rank)] = false;
      rows[u.call][std::size_t(u.rank)] = nullptr;
    }
  }
  fill_slots(*me.buffers, me.captured, rows);
  return count_in_place(readable);
}

}  // namespace

Group::GraphInputs Group::register_graph_inputs() {
  GroupState& state = impl_->state;
  if (state.closed) throw Error("the group is closed");
  std::vector<RankState*> ranks;
  for (auto& r : impl_->ranks) ranks.push_back(r->impl_.get());
  struct ClearRecords {  // whatever happens, the next registration starts from the next capture
    std::vector<RankState*>& ranks;
    ~ClearRecords() {
      for (RankState* r : ranks) r->captured.clear();
    }
  } clear{ranks};
  if (state.options.bootstrap && world() > 1) return register_inputs_between_processes(state, *ranks[0]);
  bool one_device = true;
  for (RankState* r : ranks) one_device = one_device && &r->device() == &ranks[0]->device();
  std::vector<RecordedCalls> recorded(ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    for (const CapturedInput& c : ranks[r]->captured) {
      recorded[r].calls.push_back(c.call);
      recorded[r].offered.push_back(c.input != nullptr &&
                                    reachable_in_process(ranks[r]->device(), c.input, one_device));
    }
  }
  const std::vector<std::vector<bool>> readable = readable_inputs(recorded);
  std::vector<std::vector<const void*>> rows(readable.size(), std::vector<const void*>(ranks.size()));
  for (std::size_t k = 0; k < readable.size(); ++k) {
    for (std::size_t r = 0; r < ranks.size(); ++r) rows[k][r] = readable[k][r] ? ranks[r]->captured[k].input : nullptr;
  }
  for (RankState* r : ranks) fill_slots(*r->buffers, r->captured, rows);
  return count_in_place(readable);
}

Rank::Rank(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Rank::~Rank() = default;

int Rank::index() const { return impl_->index; }
Context& Rank::context() const { return *impl_->context; }
const Device& Rank::device() const { return impl_->device(); }
void* Rank::input_buffer() const { return impl_->input_buffer(); }
std::optional<Path> Rank::last_path() const { return impl_->last_path; }

void Rank::prepare(int hidden, DType dtype, const EpilogueMode& mode) {
  const GroupState& group = *impl_->group;
  Context& context = *impl_->context;
  check_group_open(group, dtype);
  if (group.topology().custom_available()) {
    for (int stage : {1, 2}) {
      for (bool graph : {false, true}) {
        if (graph && group.options.graph_calls == 0) continue;
        jit::KernelSpec fused = spec_for(context, jit::Module::fused_ar, hidden, dtype, mode, group.world(), stage);
        jit::KernelSpec plain = spec_for(context, jit::Module::allreduce, hidden, dtype, {}, group.world(), stage);
        fused.graph_inputs = plain.graph_inputs = graph;
        load_kernel(context, fused);
        load_kernel(context, plain);
      }
    }
  }
  if (group.topology().nccl) load_kernel(context, spec_for(context, jit::Module::rmsnorm_quant, hidden, dtype, mode));
}

void Rank::allreduce_rmsnorm(const AllreduceRmsnormArgs& args, const Stream& stream) {
  run_allreduce_rmsnorm(*impl_, args, stream);
}

void Rank::allreduce(const AllreduceArgs& args, const Stream& stream) { run_allreduce(*impl_, args, stream); }

}  // namespace arfuse
