// Timing for arfuse-bench: per-rank CUDA graphs of 16 calls, replayed between events; the
// median over several runs; the copy-bandwidth ceiling (the best of several copies) measured
// in the same process.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/device/device.hpp"

namespace arfuse::tools {

struct Timing {
  double median_us = 0, min_us = 0, max_us = 0;  // per call
};

constexpr int kCallsPerGraph = 16;

using Recorder = std::function<void(int rank, int call)>;

// record(rank, call) enqueues one call of `rank` on streams[rank]. Every rank's graph is
// launched `replays` times per run, all ranks concurrently.
Timing time_graphs(const Device& device, const std::vector<Stream*>& streams, const Recorder& record, int replays,
                   int runs);

// Several variants of one measurement (fused and unfused, stage 1 and 2), their runs
// interleaved (run 1 of each, then run 2 of each...) so that clock and thermal drift hit all
// of them alike. One Timing per variant.
std::vector<Timing> time_interleaved(const Device& device, const std::vector<Stream*>& streams,
                                     const std::vector<Recorder>& variants, int replays, int runs);

struct CopyMeasurement {
  std::string how;  // "kernel 16 B x4 streaming", "driver device-to-device copy"
  double bytes_per_s = 0;
};

// Bytes per second (read + write counted) of 1 GiB copies: 16-byte vector copy kernels with
// 1 to 8 vectors in flight per thread, persistent or one block per contiguous span, plain and
// with streaming cache hints, and the driver's device-to-device copy, each in the same graphs
// of 16 calls.
std::vector<CopyMeasurement> copy_bandwidths(const Device& device, int runs);
// The fastest of them: the ceiling every "% of ceiling" is against.
CopyMeasurement best_copy(const std::vector<CopyMeasurement>& measured);

// The floor rows' kernels (tools/bench/bench_kernels.hpp), compiled and loaded once per bench run:
// the best copy kernel on the H200 and the streaming kernel of the same block shape.
struct FloorKernels {
  Kernel copy;
  Kernel stream;
};
FloorKernels load_floor_kernels(const Device& device);

// Microseconds per call of the best copy kernel moving `bytes` (read) + `bytes` (written), in
// the same graphs of 16 calls, through `rotation` buffer pairs: the floor a kernel that moves
// that many bytes can reach at that size (the launch and the ramp at each end included, which
// the 1 GiB ceiling spreads over 250 µs).
Timing time_copy(const Device& device, const FloorKernels& kernels, std::size_t bytes, int rotation, int replays,
                 int runs);
// A streaming kernel of the same block shape (tools/bench/bench_kernels.hpp) reading `read_bytes`
// and writing `write_bytes` (each a multiple of 16 is used): the floor of a kernel with that mix
// of reads and writes, which a half-and-half copy is not for an epilogue that reads 4 bytes an
// element and writes 2.5-4.
Timing time_reads_and_writes(const Device& device, const FloorKernels& kernels, std::size_t read_bytes,
                             std::size_t write_bytes, int rotation, int replays, int runs);

// Microseconds per call of an empty kernel (one block of 512 threads per SM) in the same
// graphs of 16 calls: what a call costs before it moves a byte.
double empty_launch_us(const Device& device, int runs);

}  // namespace arfuse::tools
