// How a group is to be made (runtime/group.hpp makes it; runtime/setup/ does the set-up).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "arfuse/cache/kernel_cache.hpp"
#include "arfuse/export.hpp"
#include "arfuse/jit/tuning.hpp"
#include "arfuse/runtime/setup/bootstrap.hpp"

namespace arfuse {

enum class Transport {
  automatic,  // custom kernels where they can run; NCCL for the rest, when it loads
  custom,     // custom kernels only: refuse groups and messages they cannot serve
  nccl,       // NCCL for every call (needs one rank per process or thread)
};
ARFUSE_API const char* to_string(Transport value);

struct ARFUSE_API GroupOptions {
  // Without a bootstrap: one device ordinal per rank, all driven by this process. With one:
  // exactly one, this rank's device.
  std::vector<int> devices;
  // One rank per process or thread: world and rank come from it. It must stay usable for the
  // group's lifetime (reset() and destruction meet through it).
  std::shared_ptr<Bootstrap> bootstrap;
  int max_tokens = 0;
  int max_hidden = 0;
  // When set, calls with another dtype are refused, and ranks with a bootstrap must agree.
  std::optional<DType> dtype;
  std::chrono::milliseconds timeout{5000};
  Transport transport = Transport::automatic;
  // Compare every rank's call (tokens, hidden, dtype, quant, norm, stage) at the entry barrier
  // of the custom kernels; every rank must agree. Off saves one 8-byte store per peer and
  // block (measured: docs/performance-notes.md).
  bool check_calls = true;
  cache::CacheOptions cache;
  std::optional<jit::TuningTable> tuning;  // default: TuningTable::from_environment()
};

// Throws Error naming the option, its value and what is allowed.
ARFUSE_API void validate_options(const GroupOptions& options);
// The world size the options describe (the bootstrap's, or one rank per listed device).
ARFUSE_API int world_of(const GroupOptions& options);

}  // namespace arfuse
