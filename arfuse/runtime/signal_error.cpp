#include "runtime/signal_error.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "arfuse/error.hpp"

#include "jit/kernel_spec.hpp"
#include "templates/quant_table.cuh"
#include "templates/signal.cuh"

namespace arfuse {

std::string describe_call(unsigned long long d) {
  const int code = std::min(int(call_quant(d)), kMaxQuantCode);
  const auto quant = Quant(quant_family(code));
  const auto norm = Norm(call_norm(d));
  std::string mode = " (plain all-reduce)";
  if (call_epilogue(d)) {
    mode = fmt::format(", quant {}", to_string(quant));
    if (takes_group_size(quant)) {
      const auto format = ScaleFormat(std::min(call_scale_format(d), unsigned(kScaleE8m0)));
      mode += fmt::format(" (group {}, {} scales)", call_group(d), to_string(format));
    }
    // The scale format's field carries the layout of the modes that may swizzle their scales.
    if (kQuantRows[int(quant)].layouts & kLayoutSwizzled)
      mode += call_scale_format(d) == 1 ? " (swizzled scales)" : " (linear scales)";
    if (quant_mirror(code)) mode += " with the mirror";
    mode += fmt::format(", norm {}", to_string(norm));
  }
  return fmt::format("{} x {} {}{}, stage {}", call_tokens(d), call_hidden(d), call_bf16(d) ? "bf16" : "f16", mode,
                     call_stage(d));
}

void throw_signal_error(unsigned int code, int rank, const unsigned long long calls[2],
                        std::chrono::milliseconds timeout) {
  const int peer = int(signal_error_rank(code));
  if (signal_error_kind(code) == kCallMismatch) {
    throw CallMismatch(fmt::format("the ranks made different calls: rank {} called {}, rank {} called {}; every rank "
                                   "must make the same call. Nothing was computed from the other rank's rows; "
                                   "synchronise all ranks and call reset() before the next call",
                                   rank, describe_call(calls[0]), peer, describe_call(calls[1])),
                       rank, peer);
  }
  const char* kinds[] = {"?", "entry", "middle", "exit"};
  const unsigned kind = signal_error_kind(code);
  throw PeerTimeout(fmt::format("rank {} did not arrive at the {} barrier of rank {} (block {}) within {} ms; "
                                "synchronise all ranks and call reset() before the next call",
                                peer, kinds[kind < 4 ? kind : 0], rank, signal_error_block(code), timeout.count()),
                    peer);
}

}  // namespace arfuse
