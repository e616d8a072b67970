#include "arfuse/group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <exception>

#include "arfuse/error.hpp"

#include "base/log.hpp"
#include "runtime/call.hpp"
#include "runtime/context.hpp"
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
    impl_->ranks.push_back(std::make_unique<Rank>(
        std::make_unique<Rank::Impl>(RankState{&state, buffers.get(), buffers->rank, context, {}, std::nullopt})));
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
  for (auto& buffers : state.resources.ranks) buffers->signal.fill(0);
  if (state.options.bootstrap && world() > 1) state.options.bootstrap->barrier();  // every rank is clean
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
      load_kernel(context, spec_for(context, jit::Module::fused_ar, hidden, dtype, mode, group.world(), stage));
      load_kernel(context, spec_for(context, jit::Module::allreduce, hidden, dtype, {}, group.world(), stage));
    }
  }
  if (group.topology().nccl) load_kernel(context, spec_for(context, jit::Module::rmsnorm_quant, hidden, dtype, mode));
}

void Rank::allreduce_rmsnorm(const AllreduceRmsnormArgs& args, const Stream& stream) {
  run_allreduce_rmsnorm(*impl_, args, stream);
}

void Rank::allreduce(const AllreduceArgs& args, const Stream& stream) { run_allreduce(*impl_, args, stream); }

}  // namespace arfuse
