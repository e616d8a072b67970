#include "runtime/setup/group_setup.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>
#include <random>

#include "arfuse/error.hpp"
#include "arfuse/version.hpp"

#include "base/log.hpp"
#include "base/names.hpp"
#include "runtime/setup/peer_setup.hpp"
#include "templates/signal.cuh"

namespace arfuse {

namespace {

const Names<Transport> kTransports{
    {Transport::automatic, "auto"}, {Transport::custom, "custom"}, {Transport::nccl, "nccl"}};

}  // namespace

const char* to_string(Transport value) { return name_in(kTransports, value); }
Transport parse_transport(std::string_view text) { return parse_in(kTransports, "transport", text); }

int world_of(const GroupOptions& o) { return o.bootstrap ? o.bootstrap->world() : int(o.devices.size()); }

void validate_options(const GroupOptions& o) {
  if (o.bootstrap && o.devices.size() != 1) {
    throw Error(
        fmt::format("with a bootstrap, GroupOptions::devices lists this rank's one device ordinal; got {} entries",
                    o.devices.size()));
  }
  const int world = world_of(o);
  if (world < 1 || world > kMaxWorld) {
    throw Error(
        fmt::format("a group needs 1 to {} ranks (one device ordinal each in GroupOptions::devices, or a "
                    "bootstrap); got {}",
                    kMaxWorld, world));
  }
  if (world == 1 && o.transport == Transport::custom) {
    throw Error("the custom kernels need 2 or more ranks; a group of one rank needs transport auto or nccl");
  }
  if (!o.bootstrap && world > 1 && o.transport == Transport::nccl) {
    throw Error(
        "Transport::nccl needs one rank per process or thread (GroupOptions::bootstrap): one thread cannot "
        "drive several NCCL ranks call by call");
  }
  if (o.max_tokens <= 0 || unsigned(o.max_tokens) > kMaxCallTokens) {
    throw Error(fmt::format("max_tokens is {}; it must be from 1 to {}", o.max_tokens, kMaxCallTokens));
  }
  try {
    check_hidden(o.max_hidden);
  } catch (const Error& e) {
    throw Error(fmt::format("max_hidden: {}", e.what()));
  }
  if (o.timeout.count() <= 0) throw Error("timeout must be positive");
  if (o.graph_calls < 0 || o.graph_calls > kMaxGraphCalls)
    throw Error(fmt::format("graph_calls is {}; it must be from 0 to {}", o.graph_calls, kMaxGraphCalls));
}

RankBuffers::RankBuffers(int r, const Device& d, std::size_t capacity_bytes, int graph_calls)
    : rank(r),
      device(&d),
      signal(d, sizeof(Signal) + std::size_t(graph_calls) * sizeof(InputSlot), MemoryKind::signal),
      staging(d, capacity_bytes),
      gather(d, capacity_bytes) {
  signal.fill(0);
}

namespace {

// The staging capacity: the largest message, in the widest element type.
std::size_t capacity_bytes(const GroupOptions& o) {
  return std::size_t(o.max_tokens) * std::size_t(o.max_hidden) * std::size_t(element_bytes(DType::bf16));
}

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

void add_peer(Topology& t, const RankBuffers& r) {
  t.peers.staging[r.rank] = r.staging.get();
  t.peers.gather[r.rank] = r.gather.get();
  t.peers.signal[r.rank] = static_cast<Signal*>(r.signal.get());
}

Topology base_topology(const GroupOptions& o, int world) {
  Topology t;
  t.world = world;
  t.max_tokens = o.max_tokens;
  t.max_hidden = o.max_hidden;
  return t;
}

GroupResources set_up_in_process(const GroupOptions& o, const DeviceOpener& open_device) {
  GroupResources g;
  Topology& t = g.topology = base_topology(o, int(o.devices.size()));
  std::map<int, const Device*> by_device;
  std::map<int, int> ranks_on_device;
  for (int ordinal : o.devices) {
    if (!by_device.count(ordinal)) by_device[ordinal] = &open_device(ordinal);
    t.ranks_per_device = std::max(t.ranks_per_device, ++ranks_on_device[ordinal]);
  }
  for (auto& [ordinal_a, a] : by_device) {
    for (auto& [ordinal_b, b] : by_device) a->enable_peer_access(*b);
  }
  const Device& first = *by_device.begin()->second;
  t.target = first.target();
  t.multiprocessors = first.multiprocessors();
  for (auto& [ordinal, d] : by_device) t.multiprocessors = std::min(t.multiprocessors, d->multiprocessors());
  for (int r = 0; r < t.world; ++r) {
    g.ranks.push_back(
        std::make_unique<RankBuffers>(r, *by_device[o.devices[size_t(r)]], capacity_bytes(o), o.graph_calls));
    add_peer(t, *g.ranks.back());
    t.local_ranks.push_back(r);
  }
  const std::uint32_t nonce = std::random_device{}();
  for (auto& r : g.ranks) detail::write_probes(*r->device, t.peers, t.world, r->rank, nonce);
  for (auto& r : g.ranks) {
    const std::string missing = detail::verify_probes(r->signal, t.world, nonce, r->rank);
    if (!missing.empty())
      throw Error(fmt::format("rank {}: {}: the devices do not reach each other", r->rank, missing));
  }
  if (t.virtual_ranks()) {
    debug(fmt::format("group of {} ranks with up to {} ranks per device: grids are capped so all ranks are resident",
                      t.world, t.ranks_per_device));
  }
  return g;
}

// Maps every peer's buffers into this process: directly for ranks of this process, through
// IPC for the others. "" when all opened, else why not.
std::string open_peer_buffers(GroupResources& g, const std::vector<detail::RankIdentity>& ids) {
  Topology& t = g.topology;
  const RankBuffers& mine = *g.ranks[0];
  const Device& device = *mine.device;
  try {
    for (int r = 0; r < t.world; ++r) {
      const auto& peer = ids[size_t(r)];
      if (detail::same_process(peer, ids[size_t(mine.rank)])) {
        if (peer.ordinal != device.ordinal()) device.enable_peer_access(Device(peer.ordinal));
        t.peers.signal[r] = reinterpret_cast<Signal*>(std::uintptr_t(peer.signal));
        t.peers.staging[r] = reinterpret_cast<void*>(std::uintptr_t(peer.staging));
        t.peers.gather[r] = reinterpret_cast<void*>(std::uintptr_t(peer.gather));
        continue;
      }
      if (peer.signal_handle.empty() || peer.staging_handle.empty() || peer.gather_handle.empty()) {
        return fmt::format("rank {} could not export its buffers for IPC", r);
      }
      auto open = [&](const std::string& handle) {
        g.mappings.push_back(std::make_unique<IpcMapping>(device, handle));
        return g.mappings.back()->get();
      };
      t.peers.signal[r] = static_cast<Signal*>(open(peer.signal_handle));
      t.peers.staging[r] = open(peer.staging_handle);
      t.peers.gather[r] = open(peer.gather_handle);
    }
  } catch (const Error& e) {
    return fmt::format("opening a peer's buffers failed: {}", e.what());
  }
  return {};
}

// "" when every rank reaches every other through the mapped pointers, else why not (on every rank).
std::string test_custom_path(Bootstrap& b, GroupResources& g, const std::vector<detail::RankIdentity>& ids) {
  const Topology& t = g.topology;
  const RankBuffers& mine = *g.ranks[0];
  std::string failure = detail::nodes_differ(ids);
  if (failure.empty()) failure = detail::gather_failures(b, open_peer_buffers(g, ids));
  if (!failure.empty()) return failure;
  std::string wrote;
  try {
    detail::write_probes(*mine.device, t.peers, t.world, mine.rank, ids[0].nonce);
  } catch (const Error& e) {
    wrote = e.what();
  }
  failure = detail::gather_failures(b, wrote);
  b.barrier();  // every rank's probes have landed before any reads its own
  if (!failure.empty()) return failure;
  return detail::gather_failures(b, detail::verify_probes(mine.signal, t.world, ids[0].nonce, mine.rank));
}

void set_up_nccl(Bootstrap& b, const GroupOptions& o, GroupResources& g) {
  Topology& t = g.topology;
  const bool required = !t.custom_available();
  const bool wanted = o.transport != Transport::custom && (required || !t.virtual_ranks());
  if (!wanted) {
    debug("no NCCL communicator: ranks share a GPU, which NCCL does not allow");
    return;
  }
  const std::string missing = detail::gather_failures(b, nccl_unavailable_reason());
  if (!missing.empty()) {
    if (required) {
      throw Error(
          fmt::format("this group can use neither path: the custom kernels cannot run ({}), and NCCL is "
                      "unavailable ({}); set ARFUSE_NCCL_LIBRARY to libnccl.so.2",
                      t.custom_unavailable, missing));
    }
    debug(fmt::format("no NCCL communicator ({}): messages above the staging capacity will be refused", missing));
    return;
  }
  g.nccl = std::make_unique<NcclCommunicator>(b, *g.ranks[0]->device);
  t.nccl = true;
  debug(fmt::format("rank {}: {} communicator ready", b.rank(), nccl_description()));
}

// A rank that disagrees on any of these would launch other kernels, or other grids, and hang
// at the first barrier: refuse at creation instead, on every rank, before any GPU work.
void require_same_configuration(Bootstrap& b, const GroupOptions& o, int world) {
  require_agreement(b, "the world size", std::to_string(world));
  require_agreement(b, "the arfuse version", version());
  require_agreement(b, "the signal layout version", std::to_string(kSignalLayoutVersion));
  require_agreement(b, "max_tokens", std::to_string(o.max_tokens));
  require_agreement(b, "max_hidden", std::to_string(o.max_hidden));
  require_agreement(b, "the dtype", o.dtype ? to_string(*o.dtype) : "any");
  require_agreement(b, "the transport", to_string(o.transport));
  require_agreement(b, "the timeout (ms)", std::to_string(o.timeout.count()));
  require_agreement(b, "check_calls", o.check_calls ? "on" : "off");
  require_agreement(b, "graph_calls", std::to_string(o.graph_calls));
}

// Every rank learns that one could not open its device, instead of waiting for it.
const Device& open_on_every_rank(Bootstrap& b, const DeviceOpener& open_device, int ordinal) {
  const Device* device = nullptr;
  std::string failed;
  std::exception_ptr error;
  try {
    device = &open_device(ordinal);
  } catch (const Error& e) {
    failed = e.what(), error = std::current_exception();
  }
  if (const auto failures = detail::gather_failures(b, failed); !failures.empty()) {
    if (error) std::rethrow_exception(error);
    throw Error(fmt::format("a peer could not open its device: {}", failures));
  }
  return *device;
}

GroupResources set_up_with_bootstrap(const GroupOptions& o, const jit::TuningTable& tuning,
                                     const DeviceOpener& open_device) {
  Bootstrap& b = *o.bootstrap;
  const int me = b.rank();
  GroupResources g;
  Topology& t = g.topology = base_topology(o, b.world());
  require_same_configuration(b, o, t.world);
  const Device& device = open_on_every_rank(b, open_device, o.devices[0]);
  require_agreement(b, "the device target", device.target().name());
  require_agreement(b, "the multiprocessor count", std::to_string(device.multiprocessors()));
  t.target = device.target();
  t.multiprocessors = device.multiprocessors();
  t.local_ranks = {me};

  g.ranks.push_back(std::make_unique<RankBuffers>(me, device, capacity_bytes(o), o.graph_calls));
  const RankBuffers& mine = *g.ranks[0];
  add_peer(t, mine);
  detail::RankIdentity identity = detail::local_identity(device);
  identity.signal = address(mine.signal), identity.staging = address(mine.staging),
  identity.gather = address(mine.gather);
  if (t.world > 1 && o.transport != Transport::nccl) {
    identity.signal_handle = try_export(mine.signal);
    identity.staging_handle = try_export(mine.staging);
    identity.gather_handle = try_export(mine.gather);
  }
  const auto ids = detail::exchange_identities(b, identity);
  t.ranks_per_device = detail::max_ranks_per_device(ids);
  require_agreement(b, "the two-stage threshold (tuning table)",
                    std::to_string(tuning.two_stage_min_bytes(t.target.name(), t.world, t.virtual_ranks())));

  if (o.transport == Transport::nccl) {
    t.custom_unavailable = "the group was created with Transport::nccl";
  } else if (t.world == 1) {
    t.custom_unavailable = "a group of one rank has no peers for the custom kernels";
  } else {
    t.custom_unavailable = test_custom_path(b, g, ids);
    if (!t.custom_available() && o.transport == Transport::custom) {
      throw Error(fmt::format("the custom all-reduce cannot run in this group: {}", t.custom_unavailable));
    }
  }
  set_up_nccl(b, o, g);
  debug(fmt::format("rank {} of {} on {} ({}): custom kernels {}, NCCL {}", me, t.world, device.pci_bus_id(),
                    device.target().name(), t.custom_available() ? "available" : "unavailable: " + t.custom_unavailable,
                    t.nccl ? "available" : "not set up"));
  return g;
}

}  // namespace

GroupResources set_up_group(GroupOptions& o, const jit::TuningTable& tuning, const DeviceOpener& open_device) {
  validate_options(o);
  if (!o.bootstrap && o.devices.size() == 1) {
    // One rank meets itself: the same set-up as a rank of a multi-process group.
    o.bootstrap = callback_bootstrap(0, 1, [](const std::string& mine) { return std::vector<std::string>{mine}; });
  }
  return o.bootstrap ? set_up_with_bootstrap(o, tuning, open_device) : set_up_in_process(o, open_device);
}

}  // namespace arfuse
