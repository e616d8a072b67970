// What set-up (runtime/setup/) learns about a group, as one value: how many ranks, which this
// process drives, how they share GPUs, whether the custom kernels can reach every peer, whether
// NCCL is there, and the staging capacity. The plan (plan.hpp) reads nothing else, so a test can
// describe any machine with a Topology literal.
#pragma once

#include <string>
#include <vector>

#include "arfuse/target.hpp"

#include "templates/limits.cuh"
#include "templates/signal.cuh"

namespace arfuse {

struct Topology {
  int world = 0;
  std::vector<int> local_ranks;  // the ranks this process drives
  // The most ranks on one physical GPU; above 1 the group has virtual ranks, whose blocks must
  // share the GPU's multiprocessors.
  int ranks_per_device = 1;
  int multiprocessors = 0;  // the smallest of this process's devices
  Target target = Target::parse("sm_90");
  std::string custom_unavailable;  // why the custom kernels cannot run; empty when they can
  bool nccl = false;               // the group has an NCCL communicator
  int max_tokens = 0;              // the staging capacity
  int max_hidden = 0;
  PeerBuffers peers{};  // every rank's signal, staging and gather buffers, as this process sees them

  bool custom_available() const { return custom_unavailable.empty(); }
  bool virtual_ranks() const { return ranks_per_device > 1; }
  // The largest call the group accepts: with NCCL the staging capacity does not bound a call.
  int call_max_tokens() const { return nccl ? -1 : max_tokens; }
  int call_max_hidden() const { return nccl ? kMaxHidden : max_hidden; }
};

}  // namespace arfuse
