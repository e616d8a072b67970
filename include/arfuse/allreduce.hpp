// The values a Group is made from and called with: its options and transport, the paths a call
// can take, and the arguments of the fused and the plain all-reduce (arfuse/group.hpp makes the
// calls). They carry no state, so engines can validate at set-up and the tests without a GPU.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arfuse/bootstrap.hpp"
#include "arfuse/cache.hpp"
#include "arfuse/device.hpp"
#include "arfuse/epilogue_args.hpp"
#include "arfuse/error.hpp"
#include "arfuse/modes.hpp"

namespace arfuse {

// Spelled "auto", "custom", "nccl" (to_string, parse_transport, the Python communicator).
enum class Transport {
  automatic,  // "auto": custom kernels where they can run; NCCL for the rest, when it loads
  custom,     // custom kernels only: refuse groups and messages they cannot serve
  nccl,       // NCCL for every call (needs one rank per process or thread)
};
ARFUSE_API const char* to_string(Transport value);
// Throws Error naming the text and the accepted names.
ARFUSE_API Transport parse_transport(std::string_view text);

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
  // Compare every rank's call (tokens, hidden, dtype, mode, stage) at the entry barrier of the
  // custom kernels; every rank must agree. Off saves one 8-byte store per peer and block.
  bool check_calls = true;
  // Calls captured into graphs whose kernels can read the ranks' inputs where they lie, once
  // Group::register_graph_inputs has told the ranks where that is (64 bytes of device memory a
  // rank each). Captured calls beyond it, and every call with 0, copy their input into the
  // staging buffer as eager calls do. Ranks with a bootstrap must agree.
  int graph_calls = 4096;
  CacheOptions cache;
  // The one-/two-stage thresholds as a JSON tuning table (what arfuse-bench tune writes);
  // default: the file ARFUSE_TUNING names, else the embedded table.
  std::optional<std::string> tuning;
};

// Throws Error naming the option, its value and what is allowed.
ARFUSE_API void validate_options(const GroupOptions& options);
// The world size the options describe (the bootstrap's, or one rank per listed device).
ARFUSE_API int world_of(const GroupOptions& options);

enum class Path { one_stage, two_stage, nccl };
ARFUSE_API const char* to_string(Path value);

// The epilogue's arguments (arfuse/epilogue.hpp), with `input` this rank's contribution
// [tokens, hidden]; no copy is made when it is input_buffer().
struct ARFUSE_API AllreduceRmsnormArgs : RmsnormQuantArgs {};

// Each tensor's row stride (as RmsnormQuantArgs' strides) follows it.
struct ARFUSE_API AllreduceArgs {
  const void* input = nullptr;
  int input_stride = 0;
  void* out = nullptr;  // T [tokens, hidden]
  int out_stride = 0;
  int tokens = 0;
  int hidden = 0;
  DType dtype = DType::bf16;
  bool pdl = false;  // as RmsnormQuantArgs::pdl
};

// The checks every call makes before it launches; arfuse::Error names the argument. Public so
// that an engine can validate once at set-up (and the tests without a GPU).
ARFUSE_API void validate_args(const AllreduceRmsnormArgs& args, int max_tokens, int max_hidden);
ARFUSE_API void validate_args(const AllreduceArgs& args, int max_tokens, int max_hidden);

}  // namespace arfuse
