// What a Group and its Ranks hold behind their public faces: the options and tuning the group
// was made with, the resources set-up made (runtime/setup/group_setup.hpp), its stage policy,
// and each local rank's buffers and context. The call path works on these, not on the public
// classes, so nothing below runtime/group.cpp includes arfuse/group.hpp.
#pragma once

#include <optional>

#include "arfuse/allreduce.hpp"
#include "arfuse/context.hpp"

#include "jit/tuning.hpp"
#include "runtime/graph_inputs.hpp"
#include "runtime/plan/plan.hpp"
#include "runtime/setup/group_setup.hpp"

namespace arfuse {

struct GroupState {
  GroupOptions options;
  jit::TuningTable tuning;
  GroupResources resources;
  StagePolicy policy;
  bool closed = false;

  const Topology& topology() const { return resources.topology; }
  int world() const { return resources.topology.world; }
};

struct RankState {
  GroupState* group;
  RankBuffers* buffers;
  int index;
  Context* context;
  DeviceBuffer oversize;  // NCCL's output for messages above the staging capacity
  std::optional<Path> last_path;
  int graph_slots_used = 0;             // input slots taken by captured calls (GroupOptions::graph_calls)
  std::vector<CapturedInput> captured;  // calls captured since the inputs were last registered

  // Whether a call on `stream` now is captured and can take an input slot.
  bool takes_input_slot(const Stream& stream) const {
    return graph_slots_used < group->options.graph_calls && stream.capturing();
  }

  const Device& device() const { return context->device(); }
  void* input_buffer() const { return buffers->staging.get(); }
};

}  // namespace arfuse
