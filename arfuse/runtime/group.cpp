#include "arfuse/group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <exception>

#include "arfuse/base/log.hpp"
#include "arfuse/error.hpp"
#include "arfuse/runtime/call.hpp"
#include "arfuse/runtime/context.hpp"
#include "arfuse/runtime/group_state.hpp"
#include "arfuse/runtime/signal_error.hpp"
#include "arfuse/runtime/validate.hpp"

namespace arfuse {

namespace {

jit::TuningTable tuning_of(const GroupOptions& o) {
  return o.tuning ? jit::TuningTable::parse(*o.tuning, "GroupOptions::tuning") : jit::TuningTable::from_environment();
}

}  // namespace

Group::Group(GroupOptions options) : options_(std::move(options)) {
  jit::TuningTable tuning = tuning_of(options_);
  GroupResources resources =
      set_up_group(options_, tuning, [this](int ordinal) -> const Device& { return open_context(ordinal).device(); });
  const StagePolicy policy = StagePolicy::resolve(tuning, resources.topology);
  state_ = std::make_unique<GroupState>(GroupState{std::move(tuning), std::move(resources), policy});
  for (auto& buffers : state_->resources.ranks) {
    Context* context = nullptr;
    for (auto& c : contexts_) {
      if (&c->device() == buffers->device) context = c.get();
    }
    ranks_.push_back(std::unique_ptr<Rank>(new Rank(*this, *buffers, *context)));
  }
}

const Context& Group::open_context(int ordinal) {
  for (auto& c : contexts_) {
    if (c->device().ordinal() == ordinal) return *c;
  }
  ContextOptions co;
  co.device = ordinal;
  co.cache = options_.cache;
  contexts_.push_back(std::make_unique<Context>(co));
  return *contexts_.back();
}

Group::~Group() {
  try {
    close();
  } catch (const std::exception& e) {
    warn(fmt::format("closing the group: {}", e.what()));
  }
}

void Group::close() {
  if (closed_) return;
  closed_ = true;
  // Our views of the peers' buffers go first: a peer process that died cannot finish exiting
  // while we still map its memory, and it closes its bootstrap connection only then.
  state_->resources.mappings.clear();
  std::string lost;
  if (options_.bootstrap && world() > 1) {
    try {
      options_.bootstrap->barrier();  // no peer still reads our buffers
    } catch (const Error& e) {
      lost = e.what();
    }
  }
  if (state_->resources.nccl && !lost.empty()) state_->resources.nccl->abort();
  state_->resources.nccl.reset();
  ranks_.clear();
  state_->resources.ranks.clear();
  if (!lost.empty()) throw Error(fmt::format("a peer did not reach the group's close: {}", lost));
}

int Group::world() const { return state_->resources.topology.world; }
bool Group::has_virtual_ranks() const { return state_->resources.topology.virtual_ranks(); }
bool Group::custom_path_available() const { return state_->resources.topology.custom_available(); }
const std::string& Group::custom_path_failure() const { return state_->resources.topology.custom_unavailable; }
bool Group::has_nccl() const { return state_->resources.topology.nccl; }
std::optional<int> Group::forced_stage() const { return state_->policy.forced_stage; }

Rank& Group::rank(int r) {
  if (closed_) throw Error("the group is closed");
  if (r < 0 || r >= world())
    throw Error(fmt::format("rank {} does not exist: the group has ranks 0 to {}", r, world() - 1));
  for (auto& rank : ranks_) {
    if (rank->index_ == r) return *rank;
  }
  throw Error(fmt::format("rank {} lives in another process; this process drives rank {}", r, ranks_[0]->index_));
}

Rank& Group::local_rank() {
  if (closed_) throw Error("the group is closed");
  if (ranks_.size() != 1) throw Error(fmt::format("this process drives all {} ranks: use rank(r)", ranks_.size()));
  return *ranks_[0];
}

int Group::stage_for(int tokens, int hidden) const {
  return state_->policy.stage_for(std::uint64_t(tokens) * std::uint64_t(hidden) * 2);
}

Path Group::path_for(int tokens, int hidden) const {
  CallShape shape;
  shape.tokens = tokens, shape.hidden = hidden;
  return plan_call(state_->resources.topology, state_->policy, shape).path;
}

void Group::force_stage(std::optional<int> stage) {
  if (stage && *stage != 1 && *stage != 2)
    throw Error(fmt::format("stage {} does not exist: use 1, 2 or none", *stage));
  state_->policy.forced_stage = stage;
}

void Group::check() const {
  for (const auto& r : ranks_) {
    unsigned int code = 0;
    r->buffers_->signal.download(&code, sizeof(code), offsetof(Signal, error));
    if (code == 0) continue;
    unsigned long long calls[2] = {};
    if (signal_error_kind(code) == kCallMismatch) {
      r->buffers_->signal.download(calls, sizeof(calls), offsetof(Signal, mismatch_mine));
    }
    throw_signal_error(code, r->index_, calls, options_.timeout);
  }
}

void Group::reset() {
  if (options_.bootstrap && world() > 1) options_.bootstrap->barrier();  // every rank has stopped
  for (auto& r : ranks_) r->buffers_->signal.fill(0);
  if (options_.bootstrap && world() > 1) options_.bootstrap->barrier();  // every rank is clean
}

Rank::Rank(Group& group, RankBuffers& buffers, Context& context)
    : group_(&group), buffers_(&buffers), index_(buffers.rank), context_(&context) {}

void* Rank::input_buffer() const { return buffers_->staging.get(); }

void Rank::prepare(int hidden, DType dtype, const EpilogueMode& mode) {
  check_group_open(*group_, dtype);
  if (group_->custom_path_available()) {
    for (int stage : {1, 2}) {
      load_kernel(*context_, spec_for(*context_, jit::Module::fused_ar, hidden, dtype, mode, group_->world(), stage));
      load_kernel(*context_, spec_for(*context_, jit::Module::allreduce, hidden, dtype, {}, group_->world(), stage));
    }
  }
  if (group_->has_nccl()) load_kernel(*context_, spec_for(*context_, jit::Module::rmsnorm_quant, hidden, dtype, mode));
}

void Rank::allreduce_rmsnorm(const AllreduceRmsnormArgs& args, const Stream& stream) {
  run_allreduce_rmsnorm(*this, args, stream);
}

void Rank::allreduce(const AllreduceArgs& args, const Stream& stream) { run_allreduce(*this, args, stream); }

}  // namespace arfuse
