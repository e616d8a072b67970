// What a Group holds behind its public face (arfuse/group.hpp): the tuning it resolved, the
// resources set-up made (runtime/setup/group_setup.hpp) and its stage policy; and the runtime's
// access to the private parts of a Group and its Ranks.
#pragma once

#include <optional>

#include "arfuse/group.hpp"
#include "arfuse/jit/tuning.hpp"
#include "arfuse/runtime/plan/plan.hpp"
#include "arfuse/runtime/setup/group_setup.hpp"

namespace arfuse {

struct GroupState {
  jit::TuningTable tuning;
  GroupResources resources;
  StagePolicy policy;
};

struct GroupAccess {
  static GroupState& state(const Group& g) { return *g.state_; }
  static const GroupOptions& options(const Group& g) { return g.options_; }
  static bool closed(const Group& g) { return g.closed_; }
};

struct RankAccess {
  static Group& group(const Rank& r) { return *r.group_; }
  static RankBuffers& buffers(const Rank& r) { return *r.buffers_; }
  static DeviceBuffer& oversize(Rank& r) { return r.oversize_; }
  static std::optional<Path>& last_path(Rank& r) { return r.last_path_; }
};

inline const Topology& topology_of(const Group& g) { return GroupAccess::state(g).resources.topology; }

}  // namespace arfuse
