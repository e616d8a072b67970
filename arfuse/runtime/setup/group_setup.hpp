// Set-up of a group: finds the ranks, allocates each local rank's buffers, shares them with the
// peers (in one process directly, across processes through IPC), tests that every rank reaches
// every other, and brings up NCCL where it is wanted. The result is the group's Topology plus
// the resources behind it; runtime/group.cpp owns them and makes the calls.
//
//   rank r, on its device
//   +------------------------------------------+
//   | signal  Signal (templates/signal.cuh)    |  flags written by peers, epochs, error word,
//   |         InputSlot[graph_calls]           |  then where captured calls read each input
//   | staging T[max_tokens * max_hidden]       |  this rank's input, read by every rank
//   | gather  T[max_tokens * max_hidden]       |  two-stage: reduced rows pushed by all ranks
//   +------------------------------------------+
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "arfuse/allreduce.hpp"

#include "jit/tuning.hpp"
#include "runtime/device/device.hpp"
#include "runtime/device/ipc.hpp"
#include "runtime/plan/topology.hpp"
#include "runtime/setup/nccl.hpp"

namespace arfuse {

struct RankBuffers {
  RankBuffers(int rank, const Device& device, std::size_t capacity_bytes, int graph_calls);
  int rank;
  const Device* device;
  DeviceBuffer signal, staging, gather;
};

struct GroupResources {
  Topology topology;
  std::vector<std::unique_ptr<RankBuffers>> ranks;    // the ranks this process drives, in rank order
  std::vector<std::unique_ptr<IpcMapping>> mappings;  // peers' buffers in other processes
  // Allocations of peers' captured inputs (Group::register_graph_inputs), by rank and handle.
  std::map<std::pair<int, std::string>, std::unique_ptr<IpcMapping>> input_mappings;
  std::unique_ptr<NcclCommunicator> nccl;
};

// Opens the device of an ordinal for the group (the caller keeps it alive as long as the
// resources); may throw.
using DeviceOpener = std::function<const Device&(int ordinal)>;

// options must have passed validate_options; a group of one rank without a bootstrap is given
// one here. Throws Error (on every rank, with a bootstrap) when the group cannot be made.
GroupResources set_up_group(GroupOptions& options, const jit::TuningTable& tuning, const DeviceOpener& open_device);

}  // namespace arfuse
