// What a rank's error word (Signal::error) says, as the exception Group::check() throws.
#pragma once

#include <chrono>
#include <string>

namespace arfuse {

// "64 x 2048 bf16, quant fp8, norm rms, stage 1" for a call descriptor (templates/signal.cuh).
std::string describe_call(unsigned long long descriptor);

// Throws CallMismatch (calls = {this rank's descriptor, the peer's}) or PeerTimeout for a
// nonzero error word found on rank `rank`.
[[noreturn]] void throw_signal_error(unsigned int code, int rank, const unsigned long long calls[2],
                                     std::chrono::milliseconds timeout);

}  // namespace arfuse
