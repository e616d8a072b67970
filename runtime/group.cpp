#include "arfuse/runtime/group.hpp"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <map>
#include <random>

#include <fmt/format.h>

#include "arfuse/base/error.hpp"
#include "arfuse/base/log.hpp"
#include "arfuse/base/version.hpp"
#include "arfuse/runtime/ipc.hpp"
#include "arfuse/runtime/nccl.hpp"
#include "arfuse/runtime/peer_setup.hpp"
#include "arfuse/runtime/validate.hpp"

namespace arfuse {

// The kernels read these structs as laid out by the device compiler; pin the host's view.
static_assert(offsetof(Signal, epoch) == kMaxBlocks * kMaxWorld * 8, "Signal layout");
static_assert(offsetof(Signal, error) == kMaxBlocks * kMaxWorld * 8 + kMaxBlocks * 4, "Signal layout");
static_assert(offsetof(Signal, mismatch_mine) == offsetof(Signal, error) + 32 * 4, "Signal layout");
static_assert(sizeof(Signal) == offsetof(Signal, mismatch_mine) + 16, "Signal layout");
static_assert(sizeof(Signal::reserved) / 4 >= kMaxWorld, "the write test needs a reserved word per rank");
static_assert(sizeof(PeerBuffers) == 3 * kMaxWorld * 8, "PeerBuffers layout");
static_assert(offsetof(FusedArgs, rank) == sizeof(PeerBuffers), "FusedArgs layout");
static_assert(offsetof(FusedArgs, timeout_ns) == sizeof(PeerBuffers) + 64, "FusedArgs layout");
static_assert(offsetof(FusedArgs, input) == sizeof(PeerBuffers) + 72, "FusedArgs layout");
static_assert(offsetof(FusedArgs, check_call) == sizeof(PeerBuffers) + 80, "FusedArgs layout");

const char* to_string(Transport value) {
  switch (value) {
    case Transport::automatic: return "automatic";
    case Transport::custom: return "custom";
    case Transport::nccl: return "nccl";
  }
  return "?";
}

const char* to_string(Path value) {
  switch (value) {
    case Path::one_stage: return "custom one-stage";
    case Path::two_stage: return "custom two-stage";
    case Path::nccl: return "NCCL";
  }
  return "?";
}

namespace {

int world_of(const GroupOptions& o) { return o.bootstrap ? o.bootstrap->world() : int(o.devices.size()); }

void validate_options(const GroupOptions& o) {
  if (o.bootstrap && o.devices.size() != 1) {
    throw Error(fmt::format("with a bootstrap, GroupOptions::devices lists this rank's one device ordinal; got {} entries",
                            o.devices.size()));
  }
  const int world = world_of(o);
  if (world < 1 || world > jit::kMaxWorldSize) {
    throw Error(fmt::format("a group needs 1 to {} ranks (one device ordinal each in GroupOptions::devices, or a "
                            "bootstrap); got {}",
                            jit::kMaxWorldSize, world));
  }
  if (world == 1 && o.transport == Transport::custom) {
    throw Error("the custom kernels need 2 or more ranks; a group of one rank needs Transport::automatic or nccl");
  }
  if (!o.bootstrap && world > 1 && o.transport == Transport::nccl) {
    throw Error("Transport::nccl needs one rank per process or thread (GroupOptions::bootstrap): one thread cannot "
                "drive several NCCL ranks call by call");
  }
  if (o.max_tokens <= 0) throw Error(fmt::format("max_tokens is {}; it must be positive", o.max_tokens));
  if (o.max_hidden <= 0 || o.max_hidden % 8 != 0 || o.max_hidden > jit::kMaxHidden) {
    throw Error(fmt::format("max_hidden is {}; it must be a positive multiple of 8, at most {}", o.max_hidden, jit::kMaxHidden));
  }
  if (o.timeout.count() <= 0) throw Error("timeout must be positive");
}

std::size_t capacity_bytes(const GroupOptions& o) { return std::size_t(o.max_tokens) * std::size_t(o.max_hidden) * 2; }

std::uint64_t address(const DeviceBuffer& b) { return reinterpret_cast<std::uintptr_t>(b.get()); }

// The handle, or "" when the driver will not export (the peers then report why they cannot open it).
std::string try_export(const DeviceBuffer& b) {
  try {
    return export_ipc_handle(b);
  } catch (const Error& e) {
    debug(fmt::format("IPC export failed: {}", e.what()));
    return {};
  }
}

}  // namespace

Group::Group(GroupOptions options)
    : options_(std::move(options)), tuning_(options_.tuning ? *options_.tuning : TuningTable::from_environment()) {
  validate_options(options_);
  world_ = world_of(options_);
  if (!options_.bootstrap && world_ == 1) {
    // One rank meets itself: the same set-up as a rank of a multi-process group.
    options_.bootstrap = callback_bootstrap(0, 1, [](const std::string& mine) { return std::vector<std::string>{mine}; });
  }
  if (options_.bootstrap) {
    build_with_bootstrap();
  } else {
    build_in_process();
  }
}

void Group::build_in_process() {
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
  for (int r = 0; r < world_; ++r) {
    ranks_.push_back(std::unique_ptr<Rank>(new Rank(*this, r, *by_device[options_.devices[size_t(r)]])));
    peers_.staging[r] = ranks_.back()->staging_.get();
    peers_.gather[r] = ranks_.back()->gather_.get();
    peers_.signal[r] = static_cast<Signal*>(ranks_.back()->signal_.get());
  }
  const std::uint32_t nonce = std::random_device{}();
  for (auto& r : ranks_) {
    r->device().make_current();
    detail::write_probes(peers_, world_, r->index_, nonce);
  }
  for (auto& r : ranks_) {
    const std::string missing = detail::verify_probes(r->signal_, world_, nonce, r->index_);
    if (!missing.empty()) throw Error(fmt::format("rank {}: {}: the devices do not reach each other", r->index_, missing));
  }
  if (virtual_ranks_) {
    debug(fmt::format("group of {} ranks with up to {} ranks per device: grids are capped so all ranks are resident",
                      world_, max_ranks_per_device_));
  }
}

void Group::build_with_bootstrap() {
  Bootstrap& b = *options_.bootstrap;
  const int me = b.rank();
  // A rank that disagrees on any of these would launch other kernels, or other grids, and hang
  // at the first barrier: refuse at creation instead, on every rank, before any GPU work.
  require_agreement(b, "the world size", std::to_string(world_));
  require_agreement(b, "the arfuse version", version());
  require_agreement(b, "the signal layout version", std::to_string(kSignalLayoutVersion));
  require_agreement(b, "max_tokens", std::to_string(options_.max_tokens));
  require_agreement(b, "max_hidden", std::to_string(options_.max_hidden));
  require_agreement(b, "the dtype", options_.dtype ? jit::to_string(*options_.dtype) : "any");
  require_agreement(b, "the transport", to_string(options_.transport));
  require_agreement(b, "the timeout (ms)", std::to_string(options_.timeout.count()));
  require_agreement(b, "check_calls", options_.check_calls ? "on" : "off");
  std::string opened;
  std::exception_ptr open_error;
  try {
    ContextOptions co;
    co.device = options_.devices[0];
    co.cache = options_.cache;
    contexts_.push_back(std::make_unique<Context>(co));
  } catch (const Error& e) {
    opened = e.what(), open_error = std::current_exception();
  }
  // Every rank learns that one could not open its device, instead of waiting for it.
  if (const auto failed = detail::gather_failures(b, opened); !failed.empty()) {
    if (open_error) std::rethrow_exception(open_error);
    throw Error(fmt::format("a peer could not open its device: {}", failed));
  }
  const Device& device = contexts_[0]->device();
  require_agreement(b, "the device target", device.target().name());
  require_agreement(b, "the multiprocessor count", std::to_string(device.multiprocessors()));

  ranks_.push_back(std::unique_ptr<Rank>(new Rank(*this, me, *contexts_[0])));
  const Rank& mine = *ranks_[0];
  detail::RankIdentity identity = detail::local_identity(device);
  identity.signal = address(mine.signal_), identity.staging = address(mine.staging_), identity.gather = address(mine.gather_);
  if (world_ > 1 && options_.transport != Transport::nccl) {
    identity.signal_handle = try_export(mine.signal_);
    identity.staging_handle = try_export(mine.staging_);
    identity.gather_handle = try_export(mine.gather_);
  }
  const auto ids = detail::exchange_identities(b, identity);
  max_ranks_per_device_ = detail::max_ranks_per_device(ids);
  virtual_ranks_ = max_ranks_per_device_ > 1;
  require_agreement(b, "the two-stage threshold (tuning table)",
                    std::to_string(tuning_.two_stage_min_bytes(device.target().name(), world_, virtual_ranks_)));

  if (options_.transport == Transport::nccl) {
    custom_failure_ = "the group was created with Transport::nccl";
  } else if (world_ == 1) {
    custom_failure_ = "a group of one rank has no peers for the custom kernels";
  } else {
    custom_failure_ = detail::nodes_differ(ids);
    if (custom_failure_.empty()) custom_failure_ = detail::gather_failures(b, open_peer_buffers(ids));
    if (custom_failure_.empty()) {
      std::string wrote;
      try {
        detail::write_probes(peers_, world_, me, ids[0].nonce);
      } catch (const Error& e) {
        wrote = e.what();
      }
      custom_failure_ = detail::gather_failures(b, wrote);
      b.barrier();  // every rank's probes have landed before any reads its own
      if (custom_failure_.empty()) {
        custom_failure_ = detail::gather_failures(b, detail::verify_probes(mine.signal_, world_, ids[0].nonce, me));
      }
    }
    if (!custom_failure_.empty() && options_.transport == Transport::custom) {
      throw Error(fmt::format("the custom all-reduce cannot run in this group: {}", custom_failure_));
    }
  }
  set_up_nccl(max_ranks_per_device_ == 1);
  debug(fmt::format("rank {} of {} on {} ({}): custom kernels {}, NCCL {}", me, world_, device.pci_bus_id(),
                    device.target().name(), custom_failure_.empty() ? "available" : "unavailable: " + custom_failure_,
                    nccl_ ? "available" : "not set up"));
}

std::string Group::open_peer_buffers(const std::vector<detail::RankIdentity>& ids) {
  const int me = ranks_[0]->index_;
  const Device& device = contexts_[0]->device();
  try {
    for (int r = 0; r < world_; ++r) {
      const auto& peer = ids[size_t(r)];
      if (detail::same_process(peer, ids[size_t(me)])) {
        if (peer.ordinal != device.ordinal()) device.enable_peer_access(Device(peer.ordinal));
        peers_.signal[r] = reinterpret_cast<Signal*>(std::uintptr_t(peer.signal));
        peers_.staging[r] = reinterpret_cast<void*>(std::uintptr_t(peer.staging));
        peers_.gather[r] = reinterpret_cast<void*>(std::uintptr_t(peer.gather));
        continue;
      }
      if (peer.signal_handle.empty() || peer.staging_handle.empty() || peer.gather_handle.empty()) {
        return fmt::format("rank {} could not export its buffers for IPC", r);
      }
      auto open = [&](const std::string& handle) {
        mappings_.push_back(std::make_unique<IpcMapping>(device, handle));
        return mappings_.back()->get();
      };
      peers_.signal[r] = static_cast<Signal*>(open(peer.signal_handle));
      peers_.staging[r] = open(peer.staging_handle);
      peers_.gather[r] = open(peer.gather_handle);
    }
  } catch (const Error& e) {
    return fmt::format("opening a peer's buffers failed: {}", e.what());
  }
  return {};
}

void Group::set_up_nccl(bool every_rank_owns_a_gpu) {
  Bootstrap& b = *options_.bootstrap;
  const bool required = !custom_failure_.empty();
  const bool wanted = options_.transport != Transport::custom && (required || every_rank_owns_a_gpu);
  if (!wanted) {
    debug("no NCCL communicator: ranks share a GPU, which NCCL does not allow");
    return;
  }
  const std::string missing = detail::gather_failures(b, nccl_unavailable_reason());
  if (!missing.empty()) {
    if (required) {
      throw Error(fmt::format("this group can use neither path: the custom kernels cannot run ({}), and NCCL is "
                              "unavailable ({}); set ARFUSE_NCCL_LIBRARY to libnccl.so.2",
                              custom_failure_, missing));
    }
    debug(fmt::format("no NCCL communicator ({}): messages above the staging capacity will be refused", missing));
    return;
  }
  nccl_ = std::make_unique<NcclCommunicator>(b, contexts_[0]->device());
  debug(fmt::format("rank {}: {} communicator ready", b.rank(), nccl_description()));
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
  mappings_.clear();
  std::string lost;
  if (options_.bootstrap && world_ > 1) {
    try {
      options_.bootstrap->barrier();  // no peer still reads our buffers
    } catch (const Error& e) {
      lost = e.what();
    }
  }
  if (nccl_ && !lost.empty()) nccl_->abort();
  nccl_.reset();
  ranks_.clear();
  if (!lost.empty()) throw Error(fmt::format("a peer did not reach the group's close: {}", lost));
}

Rank& Group::rank(int r) {
  if (closed_) throw Error("the group is closed");
  if (r < 0 || r >= world_) throw Error(fmt::format("rank {} does not exist: the group has ranks 0 to {}", r, world_ - 1));
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
  if (forced_stage_) return *forced_stage_;
  const std::uint64_t bytes = std::uint64_t(tokens) * std::uint64_t(hidden) * 2;
  return tuning_.stage_for(contexts_[0]->device().target().name(), world_, bytes, virtual_ranks_);
}

Path Group::path_for(int tokens, int hidden) const {
  const bool fits = tokens <= options_.max_tokens && hidden <= options_.max_hidden;
  if (custom_failure_.empty() && fits) return stage_for(tokens, hidden) == 1 ? Path::one_stage : Path::two_stage;
  if (nccl_) return Path::nccl;
  if (!custom_failure_.empty()) {
    throw Error(fmt::format("no path serves this call: the custom kernels cannot run ({}) and the group has no NCCL "
                            "communicator",
                            custom_failure_));
  }
  throw Error(fmt::format("a message of {} x {} does not fit the staging buffers ({} x {}) and the group has no NCCL "
                          "communicator to take it",
                          tokens, hidden, options_.max_tokens, options_.max_hidden));
}

void Group::force_stage(std::optional<int> stage) {
  if (stage && *stage != 1 && *stage != 2) throw Error(fmt::format("stage {} does not exist: use 1, 2 or none", *stage));
  forced_stage_ = stage;
}

unsigned Group::grid_for(const LaunchableKernel& k, int rows) const {
  int multiprocessors = contexts_[0]->device().multiprocessors();
  for (const auto& c : contexts_) multiprocessors = std::min(multiprocessors, c->device().multiprocessors());
  const int resident = std::max(1, k.max_blocks_per_multiprocessor) * multiprocessors;
  const int cap = std::max(1, resident / max_ranks_per_device_);
  return unsigned(std::max(1, std::min({rows, cap, kMaxBlocks})));
}

namespace {

std::string describe_call(unsigned long long d) {
  static const char* quants[] = {"none", "fp8", "fp8_mirror"};
  return fmt::format("{} x {} {}{}, stage {}", call_tokens(d), call_hidden(d), call_bf16(d) ? "bf16" : "f16",
                     call_epilogue(d) ? fmt::format(", quant {}, norm {}", quants[std::min(call_quant(d), 2u)],
                                                    call_norm(d) ? "gemma" : "rms")
                                      : " (plain all-reduce)",
                     call_stage(d));
}

}  // namespace

void Group::check() const {
  for (const auto& r : ranks_) {
    unsigned int code = 0;
    r->signal_.download(&code, sizeof(code), offsetof(Signal, error));
    if (code == 0) continue;
    if (signal_error_kind(code) == kCallMismatch) {
      unsigned long long calls[2] = {};
      r->signal_.download(calls, sizeof(calls), offsetof(Signal, mismatch_mine));
      const int peer = int(signal_error_rank(code));
      throw CallMismatch(fmt::format("the ranks made different calls: rank {} called {}, rank {} called {}; every rank "
                                     "must make the same call. Nothing was computed from the other rank's rows; "
                                     "synchronise all ranks and call reset() before the next call",
                                     r->index_, describe_call(calls[0]), peer, describe_call(calls[1])),
                         r->index_, peer);
    }
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
  if (options_.bootstrap && world_ > 1) options_.bootstrap->barrier();  // every rank has stopped
  for (auto& r : ranks_) r->signal_.fill(0);
  if (options_.bootstrap && world_ > 1) options_.bootstrap->barrier();  // every rank is clean
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

void Rank::launch(const jit::KernelSpec& spec, FusedArgs a, const void* input, const Stream& stream) {
  const auto& k = context_->kernel(spec);
  const int rows = spec.stage == 1 ? a.tokens : (a.tokens + spec.world - 1) / spec.world;
  a.input = input == staging_.get() ? nullptr : input;  // the kernel copies it in
  context_->device().make_current();
  void* params[] = {&a};
  k.kernel.launch(group_->grid_for(k, rows), stream, params);
}

void* Rank::nccl_scratch(std::size_t bytes, const Stream& stream) {
  if (bytes <= gather_.size()) return gather_.get();
  if (oversize_.size() < bytes) {
    stream.synchronize();  // an earlier call may still use the smaller buffer
    oversize_ = DeviceBuffer(context_->device(), bytes);
  }
  return oversize_.get();
}

void Rank::prepare(int hidden, jit::DType dtype, jit::Quant quant, jit::Norm norm) {
  group_->check_call(dtype);
  if (group_->custom_path_available()) {
    for (int stage : {1, 2}) {
      context_->kernel(context_->spec(jit::Module::fused_ar, hidden, dtype, quant, norm, group_->world(), stage));
      context_->kernel(context_->spec(jit::Module::allreduce, hidden, dtype, jit::Quant::none, jit::Norm::rms, group_->world(), stage));
    }
  }
  if (group_->has_nccl()) context_->kernel(context_->spec(jit::Module::rmsnorm_quant, hidden, dtype, quant, norm));
}

void Rank::note_path(Path path, int tokens, int hidden) {
  if (last_path_ == path) return;
  last_path_ = path;
  debug(fmt::format("rank {}: a {} x {} call takes the {} path", index_, tokens, hidden, to_string(path)));
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

void Group::check_call(jit::DType dtype) const {
  if (closed_) throw Error("the group is closed");
  if (options_.dtype && dtype != *options_.dtype) {
    throw Error(fmt::format("dtype {} was passed to a group created for {}", jit::to_string(dtype),
                            jit::to_string(*options_.dtype)));
  }
}

// With NCCL the staging capacity does not bound a call; the epilogue kernel's limits still do.
int Group::call_max_tokens() const { return nccl_ ? -1 : options_.max_tokens; }
int Group::call_max_hidden() const { return nccl_ ? jit::kMaxHidden : options_.max_hidden; }

FusedArgs Rank::fused_args(int tokens) const {
  FusedArgs f{};
  f.peers = group_->peers_;
  f.rank = index_;
  f.tokens = tokens;
  f.timeout_ns = std::uint64_t(group_->options_.timeout.count()) * 1000000ull;
  f.check_call = group_->options_.check_calls ? 1 : 0;
  return f;
}

// The checks and the path decision every call makes; none for a call of 0 tokens.
template <typename Args>
std::optional<Path> Rank::begin_call(const Args& a) {
  group_->check_call(a.dtype);
  validate_args(a, group_->call_max_tokens(), group_->call_max_hidden());
  if (a.tokens == 0) return std::nullopt;
  const Path path = group_->path_for(a.tokens, a.hidden);
  note_path(path, a.tokens, a.hidden);
  return path;
}

void Rank::allreduce_rmsnorm(const AllreduceRmsnormArgs& a, const Stream& stream) {
  const auto chosen = begin_call(a);
  if (!chosen) return;
  const Path path = *chosen;
  const std::size_t count = std::size_t(a.tokens) * std::size_t(a.hidden);
  if (path == Path::nccl) {
    RmsnormQuantArgs epilogue = a;
    void* sum = nccl_scratch(count * 2, stream);
    group_->nccl_->allreduce(a.input, sum, count, a.dtype, stream);
    epilogue.input = sum;
    rmsnorm_quant(*context_, epilogue, stream);
    return;
  }
  const int stage = path == Path::one_stage ? 1 : 2;
  const auto spec = context_->spec(jit::Module::fused_ar, a.hidden, a.dtype, a.quant, a.norm, group_->world(), stage);
  FusedArgs f = fused_args(a.tokens);
  f.residual_in = a.residual_in;
  f.residual_out = a.residual_out;
  f.weight = a.weight;
  f.eps = a.eps;
  f.out = a.out;
  f.scales = a.scales;
  f.mirror = a.mirror;
  launch(spec, f, a.input, stream);
}

void Rank::allreduce(const AllreduceArgs& a, const Stream& stream) {
  const auto chosen = begin_call(a);
  if (!chosen) return;
  const Path path = *chosen;
  const std::size_t count = std::size_t(a.tokens) * std::size_t(a.hidden);
  if (path == Path::nccl) {
    group_->nccl_->allreduce(a.input, a.out, count, a.dtype, stream);
    return;
  }
  const auto spec = context_->spec(jit::Module::allreduce, a.hidden, a.dtype, jit::Quant::none, jit::Norm::rms,
                                   group_->world(), path == Path::one_stage ? 1 : 2);
  FusedArgs f = fused_args(a.tokens);
  f.out = a.out;
  launch(spec, f, a.input, stream);
}

}  // namespace arfuse
