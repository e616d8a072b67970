#include "arfuse/runtime/group.hpp"

#include <algorithm>
#include <cstddef>
#include <map>

#include <fmt/format.h>

#include "arfuse/base/error.hpp"
#include "arfuse/base/log.hpp"
#include "arfuse/runtime/validate.hpp"

namespace arfuse {

// The kernels read these structs as laid out by the device compiler; pin the host's view.
static_assert(sizeof(Signal) == (kMaxBlocks * kMaxWorld + kMaxBlocks + 32) * 4, "Signal layout");
static_assert(offsetof(Signal, epoch) == kMaxBlocks * kMaxWorld * 4, "Signal layout");
static_assert(offsetof(Signal, error) == (kMaxBlocks * kMaxWorld + kMaxBlocks) * 4, "Signal layout");
static_assert(sizeof(PeerBuffers) == 3 * kMaxWorld * 8, "PeerBuffers layout");
static_assert(offsetof(FusedArgs, rank) == sizeof(PeerBuffers), "FusedArgs layout");
static_assert(offsetof(FusedArgs, timeout_ns) == sizeof(PeerBuffers) + 64, "FusedArgs layout");

namespace {

void validate_options(const GroupOptions& o) {
  const int world = int(o.devices.size());
  if (world < jit::kMinWorld || world > jit::kMaxWorldSize) {
    throw Error(fmt::format("a group needs {} to {} ranks (one device ordinal each in GroupOptions::devices); got {}",
                            jit::kMinWorld, jit::kMaxWorldSize, world));
  }
  if (o.max_tokens <= 0) throw Error(fmt::format("max_tokens is {}; it must be positive", o.max_tokens));
  if (o.max_hidden <= 0 || o.max_hidden % 8 != 0 || o.max_hidden > jit::kMaxHidden) {
    throw Error(fmt::format("max_hidden is {}; it must be a positive multiple of 8, at most {}", o.max_hidden, jit::kMaxHidden));
  }
  if (o.timeout.count() <= 0) throw Error("timeout must be positive");
}

std::size_t capacity_bytes(const GroupOptions& o) { return std::size_t(o.max_tokens) * std::size_t(o.max_hidden) * 2; }

}  // namespace

Group::Group(GroupOptions options)
    : options_(std::move(options)), tuning_(options_.tuning ? *options_.tuning : TuningTable::from_environment()) {
  validate_options(options_);
  std::map<int, Context*> by_device;
  std::map<int, int> ranks_on_device;
  for (int ordinal : options_.devices) {
    if (!by_device.count(ordinal)) {
      ContextOptions co;
      co.device = ordinal;
      co.cache = options_.cache;
      contexts_.push_back(std::make_unique<Context>(co));
      by_device[ordinal] = contexts_.back().get();
    }
    max_ranks_per_device_ = std::max(max_ranks_per_device_, ++ranks_on_device[ordinal]);
  }
  virtual_ranks_ = max_ranks_per_device_ > 1;
  for (auto& a : contexts_) {
    for (auto& b : contexts_) a->device().enable_peer_access(b->device());
  }
  for (int r = 0; r < int(options_.devices.size()); ++r) {
    ranks_.push_back(std::unique_ptr<Rank>(new Rank(*this, r, *by_device[options_.devices[size_t(r)]])));
    peers_.staging[r] = ranks_.back()->staging_.get();
    peers_.gather[r] = ranks_.back()->gather_.get();
    peers_.signal[r] = static_cast<Signal*>(ranks_.back()->signal_.get());
  }
  if (virtual_ranks_) {
    debug(fmt::format("group of {} ranks with up to {} ranks per device: grids are capped so all ranks are resident",
                      world(), max_ranks_per_device_));
  }
}

Group::~Group() = default;

Rank& Group::rank(int r) {
  if (r < 0 || r >= world()) throw Error(fmt::format("rank {} does not exist: the group has ranks 0 to {}", r, world() - 1));
  return *ranks_[size_t(r)];
}

int Group::stage_for(int tokens, int hidden) const {
  if (forced_stage_) return *forced_stage_;
  const std::uint64_t bytes = std::uint64_t(tokens) * std::uint64_t(hidden) * 2;
  return tuning_.stage_for(ranks_[0]->device().target().name(), world(), bytes, virtual_ranks_);
}

void Group::force_stage(std::optional<int> stage) {
  if (stage && *stage != 1 && *stage != 2) throw Error(fmt::format("stage {} does not exist: use 1, 2 or none", *stage));
  forced_stage_ = stage;
}

unsigned Group::grid_for(const LaunchableKernel& k, int rows) const {
  int multiprocessors = ranks_[0]->device().multiprocessors();
  for (const auto& r : ranks_) multiprocessors = std::min(multiprocessors, r->device().multiprocessors());
  const int resident = std::max(1, k.max_blocks_per_multiprocessor) * multiprocessors;
  const int cap = std::max(1, resident / max_ranks_per_device_);
  return unsigned(std::max(1, std::min({rows, cap, kMaxBlocks})));
}

void Group::check() const {
  for (const auto& r : ranks_) {
    unsigned int code = 0;
    r->signal_.download(&code, sizeof(code), offsetof(Signal, error));
    if (code == 0) continue;
    const char* kinds[] = {"?", "entry", "middle", "exit"};
    const unsigned kind = signal_error_kind(code);
    throw PeerTimeout(fmt::format("rank {} did not arrive at the {} barrier of rank {} (block {}) within {} ms; "
                                  "synchronise all ranks and call reset() before the next call",
                                  signal_error_rank(code), kinds[kind < 4 ? kind : 0], r->index_,
                                  signal_error_block(code), options_.timeout.count()),
                      int(signal_error_rank(code)));
  }
}

void Group::reset() {
  for (auto& r : ranks_) r->signal_.fill(0);
}

Rank::Rank(Group& group, int index, Context& context)
    : group_(&group),
      index_(index),
      context_(&context),
      signal_(context.device(), sizeof(Signal)),
      staging_(context.device(), capacity_bytes(group.options_)),
      gather_(context.device(), capacity_bytes(group.options_)) {
  signal_.fill(0);
}

void Rank::launch(const jit::KernelSpec& spec, FusedArgs a, const void* input, std::size_t bytes, const Stream& stream) {
  const auto& k = context_->kernel(spec);
  const int rows = spec.stage == 1 ? a.tokens : (a.tokens + spec.world - 1) / spec.world;
  if (input != staging_.get()) {
    context_->device().make_current();
    cuda::check(cuda::driver().cuMemcpyDtoDAsync(reinterpret_cast<cuda::CUdeviceptr>(staging_.get()),
                                                 reinterpret_cast<cuda::CUdeviceptr>(input), bytes, stream.handle()),
                "cuMemcpyDtoDAsync (input to staging)");
  }
  void* params[] = {&a};
  k.kernel.launch(group_->grid_for(k, rows), stream, params);
}

namespace {

void check_shape(int tokens, int hidden, int max_tokens, int max_hidden) {
  detail::require_tokens(tokens, max_tokens);
  if (hidden <= 0 || hidden % 8 != 0) {
    throw Error(fmt::format("hidden is {}; it must be a positive multiple of 8", hidden));
  }
  if (hidden > max_hidden) {
    throw Error(fmt::format("hidden is {}, more than the max_hidden of {} the group was created with", hidden, max_hidden));
  }
}

}  // namespace

void validate_args(const AllreduceRmsnormArgs& a, int max_tokens, int max_hidden) {
  check_shape(a.tokens, a.hidden, max_tokens, max_hidden);
  detail::require_eps(a.eps);
  if (a.tokens == 0) return;
  detail::require_epilogue_pointers({a.input, a.residual_in, a.residual_out, a.weight, a.out, a.scales, a.mirror, a.quant},
                                    "(this rank's contribution)");
}

void validate_args(const AllreduceArgs& a, int max_tokens, int max_hidden) {
  check_shape(a.tokens, a.hidden, max_tokens, max_hidden);
  if (a.tokens == 0) return;
  detail::require_pointer(a.input, "input", "(this rank's contribution)");
  detail::require_pointer(a.out, "out", "(the sum)");
}

void Rank::allreduce_rmsnorm(const AllreduceRmsnormArgs& a, const Stream& stream) {
  validate_args(a, group_->max_tokens(), group_->max_hidden());
  if (a.tokens == 0) return;
  const int stage = group_->stage_for(a.tokens, a.hidden);
  const auto spec = context_->spec(jit::Module::fused_ar, a.hidden, a.dtype, a.quant, a.norm, group_->world(), stage);
  FusedArgs f{};
  f.peers = group_->peers_;
  f.rank = index_;
  f.tokens = a.tokens;
  f.residual_in = a.residual_in;
  f.residual_out = a.residual_out;
  f.weight = a.weight;
  f.eps = a.eps;
  f.out = a.out;
  f.scales = a.scales;
  f.mirror = a.mirror;
  f.timeout_ns = std::uint64_t(group_->options_.timeout.count()) * 1000000ull;
  launch(spec, f, a.input, std::size_t(a.tokens) * std::size_t(a.hidden) * 2, stream);
}

void Rank::allreduce(const AllreduceArgs& a, const Stream& stream) {
  validate_args(a, group_->max_tokens(), group_->max_hidden());
  if (a.tokens == 0) return;
  const int stage = group_->stage_for(a.tokens, a.hidden);
  const auto spec = context_->spec(jit::Module::allreduce, a.hidden, a.dtype, jit::Quant::none, jit::Norm::rms,
                                   group_->world(), stage);
  FusedArgs f{};
  f.peers = group_->peers_;
  f.rank = index_;
  f.tokens = a.tokens;
  f.out = a.out;
  f.timeout_ns = std::uint64_t(group_->options_.timeout.count()) * 1000000ull;
  launch(spec, f, a.input, std::size_t(a.tokens) * std::size_t(a.hidden) * 2, stream);
}

}  // namespace arfuse
