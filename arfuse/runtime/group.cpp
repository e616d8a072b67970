#include "arfuse/runtime/group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <exception>

#include "arfuse/base/log.hpp"
#include "arfuse/error.hpp"
#include "arfuse/runtime/call_check.hpp"
#include "arfuse/runtime/setup/group_setup.hpp"
#include "arfuse/runtime/validate.hpp"

namespace arfuse {

Group::Group(GroupOptions options)
    : options_(std::move(options)), tuning_(options_.tuning ? *options_.tuning : jit::TuningTable::from_environment()) {
  resources_ = std::make_unique<GroupResources>(
      set_up_group(options_, tuning_, [this](int ordinal) -> const Device& { return open_context(ordinal).device(); }));
  for (auto& buffers : resources_->ranks) {
    Context* context = nullptr;
    for (auto& c : contexts_) {
      if (&c->device() == buffers->device) context = c.get();
    }
    ranks_.push_back(std::unique_ptr<Rank>(new Rank(*this, *buffers, *context)));
  }
  policy_ = StagePolicy::resolve(tuning_, resources_->topology);
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
  resources_->mappings.clear();
  std::string lost;
  if (options_.bootstrap && world() > 1) {
    try {
      options_.bootstrap->barrier();  // no peer still reads our buffers
    } catch (const Error& e) {
      lost = e.what();
    }
  }
  if (resources_->nccl && !lost.empty()) resources_->nccl->abort();
  resources_->nccl.reset();
  ranks_.clear();
  resources_->ranks.clear();
  if (!lost.empty()) throw Error(fmt::format("a peer did not reach the group's close: {}", lost));
}

int Group::world() const { return resources_->topology.world; }
const Topology& Group::topology() const { return resources_->topology; }

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
  return policy_.stage_for(std::uint64_t(tokens) * std::uint64_t(hidden) * 2);
}

Path Group::path_for(int tokens, int hidden) const {
  CallShape shape;
  shape.tokens = tokens, shape.hidden = hidden;
  return plan_call(topology(), policy_, shape).path;
}

void Group::force_stage(std::optional<int> stage) {
  if (stage && *stage != 1 && *stage != 2)
    throw Error(fmt::format("stage {} does not exist: use 1, 2 or none", *stage));
  policy_.forced_stage = stage;
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

void Group::check_call(DType dtype) const {
  if (closed_) throw Error("the group is closed");
  if (options_.dtype && dtype != *options_.dtype) {
    throw Error(
        fmt::format("dtype {} was passed to a group created for {}", to_string(dtype), to_string(*options_.dtype)));
  }
}

Rank::Rank(Group& group, RankBuffers& buffers, Context& context)
    : group_(&group), buffers_(&buffers), index_(buffers.rank), context_(&context) {}

void* Rank::input_buffer() const { return buffers_->staging.get(); }

void Rank::prepare(int hidden, DType dtype, const EpilogueMode& mode) {
  group_->check_call(dtype);
  if (group_->custom_path_available()) {
    for (int stage : {1, 2}) {
      context_->kernel(context_->spec(jit::Module::fused_ar, hidden, dtype, mode, group_->world(), stage));
      context_->kernel(context_->spec(jit::Module::allreduce, hidden, dtype, {}, group_->world(), stage));
    }
  }
  if (group_->has_nccl()) context_->kernel(context_->spec(jit::Module::rmsnorm_quant, hidden, dtype, mode));
}

void Rank::note_path(Path path, int tokens, int hidden) {
  if (last_path_ == path) return;
  last_path_ = path;
  debug(fmt::format("rank {}: a {} x {} call takes the {} path", index_, tokens, hidden, to_string(path)));
}

// The checks and the plan every call makes; no plan for a call of 0 tokens.
std::optional<Plan> Rank::begin_call(const CallShape& shape) {
  if (shape.tokens == 0) return std::nullopt;
  Plan plan = plan_call(group_->topology(), group_->policy_, shape);
  note_path(plan.path, shape.tokens, shape.hidden);
  return plan;
}

FusedArgs Rank::fused_args(int tokens) const {
  FusedArgs f{};
  f.peers = group_->topology().peers;
  f.rank = index_;
  f.tokens = tokens;
  f.timeout_ns = std::uint64_t(group_->options_.timeout.count()) * 1000000ull;
  f.check_call = group_->options_.check_calls ? 1 : 0;
  return f;
}

void Rank::launch(const Plan& plan, FusedArgs a, const void* input, bool pdl, const Stream& stream) {
  const auto& k = context_->kernel(plan.spec);
  a.input = input == buffers_->staging.get() ? nullptr : input;  // the kernel copies it in
  context_->device().make_current();
  void* params[] = {&a};
  k.kernel.launch(plan.grid(k.max_blocks_per_multiprocessor), stream, params, pdl);
}

void* Rank::nccl_scratch(std::size_t bytes, const Stream& stream) {
  if (bytes <= buffers_->gather.size()) return buffers_->gather.get();
  if (oversize_.size() < bytes) {
    stream.synchronize();  // an earlier call may still use the smaller buffer
    oversize_ = DeviceBuffer(context_->device(), bytes);
  }
  return oversize_.get();
}

namespace {

void check_shape(int tokens, int hidden, int max_tokens, int max_hidden) {
  detail::require_tokens(tokens, max_tokens);
  check_hidden(hidden);
  if (hidden > max_hidden) {
    throw Error(
        fmt::format("hidden is {}, more than the max_hidden of {} the group was created with", hidden, max_hidden));
  }
}

}  // namespace

void validate_args(const AllreduceRmsnormArgs& a, int max_tokens, int max_hidden) {
  check_shape(a.tokens, a.hidden, max_tokens, max_hidden);
  a.mode.validate(a.hidden);
  detail::require_eps(a.eps);
  if (a.tokens == 0) return;
  detail::require_epilogue_pointers(
      {a.input, a.residual_in, a.residual_out, a.weight, a.out, a.scales, a.mirror, a.mode.quant},
      "(this rank's contribution)");
}

void validate_args(const AllreduceArgs& a, int max_tokens, int max_hidden) {
  check_shape(a.tokens, a.hidden, max_tokens, max_hidden);
  if (a.tokens == 0) return;
  detail::require_pointer(a.input, "input", "(this rank's contribution)");
  detail::require_pointer(a.out, "out", "(the sum)");
}

void Rank::allreduce_rmsnorm(const AllreduceRmsnormArgs& a, const Stream& stream) {
  group_->check_call(a.dtype);
  const Topology& t = group_->topology();
  validate_args(a, t.call_max_tokens(), t.call_max_hidden());
  const auto plan = begin_call(CallShape{true, a.tokens, a.hidden, a.dtype, a.mode});
  if (!plan) return;
  if (plan->path == Path::nccl) {
    const std::size_t count = std::size_t(a.tokens) * std::size_t(a.hidden);
    RmsnormQuantArgs epilogue = a;
    void* sum = nccl_scratch(count * std::size_t(element_bytes(a.dtype)), stream);
    group_->resources_->nccl->allreduce(a.input, sum, count, a.dtype, stream);
    epilogue.input = sum;
    detail::launch_rmsnorm_quant(*context_, epilogue, stream);  // validated above
    return;
  }
  FusedArgs f = fused_args(a.tokens);
  f.residual_in = a.residual_in;
  f.residual_out = a.residual_out;
  f.weight = a.weight;
  f.eps = a.eps;
  f.out = a.out;
  f.scales = a.scales;
  f.mirror = a.mirror;
  const auto strides = detail::scale_strides(a.mode, a.tokens, a.hidden);
  f.scale_row_stride = strides.row, f.scale_group_stride = strides.group;
  launch(*plan, f, a.input, a.pdl, stream);
}

void Rank::allreduce(const AllreduceArgs& a, const Stream& stream) {
  group_->check_call(a.dtype);
  const Topology& t = group_->topology();
  validate_args(a, t.call_max_tokens(), t.call_max_hidden());
  const auto plan = begin_call(CallShape{false, a.tokens, a.hidden, a.dtype, {}});
  if (!plan) return;
  if (plan->path == Path::nccl) {
    group_->resources_->nccl->allreduce(a.input, a.out, std::size_t(a.tokens) * std::size_t(a.hidden), a.dtype, stream);
    return;
  }
  FusedArgs f = fused_args(a.tokens);
  f.out = a.out;
  launch(*plan, f, a.input, a.pdl, stream);
}

}  // namespace arfuse
