// Calls captured into graphs whose kernels read the ranks' inputs where they lie (the spec's
// graph_inputs kernels; templates/signal.cuh, InputSlot). A captured call takes its rank's next
// input slot and is recorded here; Group::register_graph_inputs then agrees with the peers on
// where each recorded call's inputs lie and fills the slots. Until then, and for a rank whose
// input cannot be read where it lies, a slot is empty and that rank's input is copied into its
// staging buffer, as in an eager call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "jit/kernel_spec.hpp"

namespace arfuse {

struct CapturedInput {
  unsigned slot = 0;
  // The rank's input, or null where it cannot be read in place: a strided input, or the rank's
  // own staging buffer (the caller wrote it there).
  const void* input = nullptr;
  std::uint64_t call = 0;  // captured_call(): ranks must record the same calls in the same order
};

// A captured call as the ranks compare it: the kernel's packed spec with the call's rows.
std::uint64_t captured_call(const jit::KernelSpec& spec, int tokens);

// One rank's recorded calls as the ranks exchange them.
struct RecordedCalls {
  std::vector<std::uint64_t> calls;  // captured_call(), in capture order
  std::vector<bool> offered;         // per call: its input can be read where it lies
};

// readable[k][r]: every rank reads rank r's input of recorded call k where it lies (it offered
// it). Throws Error naming two ranks and what differs when the ranks recorded different calls.
std::vector<std::vector<bool>> readable_inputs(const std::vector<RecordedCalls>& ranks);

// The exchange of a rank's recorded calls between processes: the calls, and for each offered
// input its allocation's IPC handle and offset. decode names `rank` when its text is not one.
struct OfferedInput {
  std::string handle;  // empty: not offered
  std::uint64_t offset = 0;
};
std::string encode_recorded(const std::vector<std::uint64_t>& calls, const std::vector<OfferedInput>& inputs);
void decode_recorded(const std::string& text, int rank, std::vector<std::uint64_t>& calls,
                     std::vector<OfferedInput>& inputs);

// The (call, rank) inputs a rank offered but another could not open, as that rank sends them;
// decode checks each against `calls` x `world` and names `from` when the text is not one.
struct UnopenedInput {
  std::size_t call = 0;
  int rank = 0;
};
std::string encode_unopened(const std::vector<UnopenedInput>& unopened);
std::vector<UnopenedInput> decode_unopened(const std::string& text, int from, std::size_t calls, int world);

}  // namespace arfuse
