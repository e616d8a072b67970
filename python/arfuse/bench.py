"""python -m arfuse.bench: what the PyTorch ops cost over the C++ calls, on one GPU.

W virtual ranks (one process drives them, each on its own stream, as arfuse-bench and
examples/eager_host_overhead.cpp do), so the numbers compare with those tools' numbers:

  host: the eager host time of one call until it returns, timed call by call (each rank's
        stream already current), batches of --calls rounds, the GPU drained between batches;
        median of batch medians. Rows:
          method    Communicator.allreduce_rmsnorm_ (the Python API: names -> mode, the op)
          op        torch.ops.arfuse.allreduce_rmsnorm_inplace.default with the mode as an int
          noop      torch.ops.arfuse.dispatch_only: the same arguments, nothing done (the
                    dispatcher's own cost)
          meta      the op on meta tensors of the same shapes: the dispatcher, every argument
                    check, the mode and communicator lookups and the output shapes, without
                    the device guard, the GPU allocations and the runtime call; op - meta - C++
                    is then what those three cost over the C++ call
          binding   arfuse._arfuse.Group.allreduce_rmsnorm with preallocated outputs (nanobind
                    + the C++ call)
          C++       Rank::allreduce_rmsnorm called from C++ (Group.time_calls), no Python
        Before timing, the op's outputs are compared byte for byte with the binding's (the
        C++ Group's) on the same inputs.
  graph: the op captured into torch CUDA graphs of 16 calls per rank, replayed; device time per
        call (median over --runs), with the input in a torch tensor: "op graph" after
        register_graph_inputs() (each kernel reads every rank's input where it lies), "copied"
        without it (the kernel first copies its input into the staging buffer, as an eager call
        does); with the input in the staging buffer itself ("staged in",
        Communicator.input_buffer), which is how `arfuse-bench fused` times the same shape;
        "op graph" checks that every captured input was registered in place; and the binding in
        the graph with the staged input and outputs allocated once ("binding staged"): the same
        kernel launches without the op's per-call output allocations, to tell their cost from the
        kernel's; and that again with a separate residual_out ("+ residual_out"), as
        arfuse-bench fused calls it, to tell the in-place residual's cost.
"""

import argparse
import statistics
import sys
import time

import torch

from . import Error, modes
from . import torch as aft

CALLS_PER_GRAPH = 16


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m arfuse.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world", type=int, default=4, help="virtual ranks on GPU 0 (default 4)")
    p.add_argument("--shapes", default="1x6144,12x6144,512x6144,2048x8192",
                   help="tokens x hidden, comma separated (default %(default)s)")
    p.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    p.add_argument("--quant", choices=list(aft.QUANT_MODES), default="fp8")
    p.add_argument("--mirror", action="store_true", help="also write y in T (the mirror output)")
    p.add_argument("--calls", type=int, default=200, help="calls per host-time batch (default 200)")
    p.add_argument("--batches", type=int, default=15, help="host-time batches (default 15)")
    p.add_argument("--replays", type=int, default=20, help="graph replays per timed run (default 20)")
    p.add_argument("--runs", type=int, default=7, help="timed graph runs (default 7)")
    args = p.parse_args(argv)
    try:
        args.shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
        assert all(len(s) == 2 and s[0] > 0 and s[1] > 0 for s in args.shapes)
    except (ValueError, AssertionError):
        p.error(f"--shapes must look like 12x6144,512x6144; got {args.shapes!r}")
    for name in ("world", "calls", "batches", "replays", "runs"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be positive")
    return args


class Ranks:
    """W virtual ranks with their inputs and streams, for one shape."""

    def __init__(self, comms, tokens, hidden, dtype, quant, mirror=False):
        self.comms, self.quant, self.mirror = comms, quant, mirror
        self.streams = [torch.cuda.Stream() for _ in comms]
        g = torch.Generator(device="cuda").manual_seed(1)
        make = lambda *shape: torch.randn(*shape, generator=g, device="cuda").to(dtype)  # noqa: E731
        self.x = [make(tokens, hidden) for _ in comms]
        self.residual = [make(tokens, hidden) for _ in comms]
        self.weight = make(hidden)
        self.mode = aft.mode_code(quant, mirror=mirror)
        reads_scale = quant in modes()["reads_scale"]
        self.scale = torch.full((1,), 2.0, dtype=torch.float32, device="cuda") if reads_scale else None
        # The same inputs in each rank's staging buffer: the op then reads them in place, as
        # arfuse-bench does, instead of copying them there first.
        self.staged = [c.input_buffer(tokens, hidden, dtype) for c in comms]
        for staged, x in zip(self.staged, self.x):
            staged.copy_(x)
        for c in comms:
            c.prepare(hidden, dtype, quant, "rms", mirror=mirror)
        self.meta = [(x.to("meta"), residual.to("meta"), self.weight.to("meta"),
                      None if self.scale is None else self.scale.to("meta"))
                     for x, residual in zip(self.x, self.residual)]
        self._fill_stream_pools(tokens, hidden, dtype)
        # One round, checked: a rank that stalls raises PeerTimeout here instead of every timed call waiting.
        self.each_rank(self.method)
        torch.cuda.synchronize()
        comms[0].check()

    def _fill_stream_pools(self, tokens, hidden, dtype):
        # torch's allocator keeps memory per stream; without this, a rank's first op allocates
        # (cudaMalloc) while the ranks launched before it wait at their barrier, which stalled
        # a W = 4 run here until the group's timeout.
        for s in self.streams:
            with torch.cuda.stream(s):
                held = [torch.empty(tokens * hidden * 4 + 4 * tokens + 1024, dtype=torch.uint8, device="cuda")
                        for _ in range(4)]
                held += [torch.empty(64, dtype=torch.uint8, device="cuda") for _ in range(64)]
                del held

    def outputs(self):
        """out, scales, mirror, residual_out for the binding, shaped as the op makes them (its Meta
        kernel says how, without a launch)."""
        meta = [t.to("meta") for t in (self.x[0], self.residual[0], self.weight)]
        scale = None if self.scale is None else self.scale.to("meta")
        out, scales, mirror = torch.ops.arfuse.allreduce_rmsnorm_inplace.default(self.comms[0].handle, *meta, 1e-6,
                                                                                 self.mode, False, 0, scale)
        device = self.x[0].device
        return [torch.empty(t.shape, dtype=t.dtype, device=device) for t in (out, scales, mirror, self.x[0])]

    def method(self, r):
        return self.comms[r].allreduce_rmsnorm_(self.x[r], self.residual[r], self.weight, 1e-6, self.quant,
                                                mirror=self.mirror, scale=self.scale)

    def op(self, r):
        return torch.ops.arfuse.allreduce_rmsnorm_inplace.default(self.comms[r].handle, self.x[r], self.residual[r],
                                                                   self.weight, 1e-6, self.mode, False, 0, self.scale)

    def op_meta(self, r):
        x, residual, weight, scale = self.meta[r]
        return torch.ops.arfuse.allreduce_rmsnorm_inplace.default(self.comms[r].handle, x, residual, weight, 1e-6,
                                                                   self.mode, False, 0, scale)

    def noop(self, r):
        return torch.ops.arfuse.dispatch_only.default(self.comms[r].handle, self.x[r], self.residual[r], self.weight,
                                                      1e-6, self.mode, False, 0, self.scale)

    def op_staged(self, r):
        return self.comms[r].allreduce_rmsnorm_(self.staged[r], self.residual[r], self.weight, 1e-6, self.quant,
                                                mirror=self.mirror, scale=self.scale)

    def binding(self, r, outputs, staged=False, in_place=True, residual=None):
        out, scales, mirror, residual_out = outputs[r]
        c, x = self.comms[r], (self.staged if staged else self.x)[r]
        residual = self.residual[r] if residual is None else residual
        residual_out = residual if in_place else residual_out
        c._impl.allreduce_rmsnorm(c._local_rank, x.data_ptr(), residual.data_ptr(), residual_out.data_ptr(),
                                  self.weight.data_ptr(), 1e-6, out.data_ptr(),
                                  scales.data_ptr() if scales.numel() else 0,
                                  mirror.data_ptr() if mirror.numel() else 0, x.shape[0], x.shape[1],
                                  aft._DTYPE_NAMES[x.dtype], self.quant, "rms", 128, "f32", "row_major", self.mirror, False,
                                  self.streams[r].cuda_stream, 0, 0, 0, 0, 0, 0,
                                  0 if self.scale is None else self.scale.data_ptr())

    def cpp_calls(self, outputs, calls):
        """Host microseconds of each C++ call of `calls` rounds (residual updated in place)."""
        address = lambda t: t.data_ptr() if t.numel() else 0  # noqa: E731
        ranks = [(c._local_rank, self.x[r].data_ptr(), self.residual[r].data_ptr(), self.weight.data_ptr(),
                  address(outputs[r][0]), address(outputs[r][1]), address(outputs[r][2]),
                  0 if self.scale is None else self.scale.data_ptr(), self.streams[r].cuda_stream)
                 for r, c in enumerate(self.comms)]
        x = self.x[0]
        return self.comms[0]._impl.time_calls(calls, ranks, x.shape[0], x.shape[1], aft._DTYPE_NAMES[x.dtype],
                                              self.mode)

    def same_bytes_as_the_cpp_group(self, outputs):
        """The op's outputs and residual against the binding's on the same inputs, byte for byte."""
        start = [r.clone() for r in self.residual]
        by_op, by_binding = [], []
        for r, s in enumerate(self.streams):
            with torch.cuda.stream(s):
                residual = start[r].clone()
                by_op.append((*self.comms[r].allreduce_rmsnorm_(self.x[r], residual, self.weight, 1e-6, self.quant,
                                                                 mirror=self.mirror, scale=self.scale), residual))
        for r, s in enumerate(self.streams):
            with torch.cuda.stream(s):
                residual = start[r].clone()
                self.binding(r, outputs, residual=residual)
                by_binding.append((*outputs[r][:3], residual))
        torch.cuda.synchronize()
        self.comms[0].check()
        for r in range(len(self.comms)):
            for name, a, b in zip(("out", "scales", "mirror", "residual"), by_op[r], by_binding[r]):
                if a.shape != b.shape or not torch.equal(a.view(torch.uint8), b.view(torch.uint8)):
                    raise Error(f"rank {r}: the op's {name} differs from the C++ Group's")

    def each_rank(self, call):
        for r, s in enumerate(self.streams):
            with torch.cuda.stream(s):
                call(r)


def host_us(ranks, call, calls, batches):
    medians = []
    for _ in range(batches):
        torch.cuda.synchronize()
        times = []
        for _ in range(calls):
            for r, s in enumerate(ranks.streams):
                with torch.cuda.stream(s):
                    start = time.perf_counter()
                    call(r)
                    times.append((time.perf_counter() - start) * 1e6)
        medians.append(statistics.median(times))
    torch.cuda.synchronize()
    ranks.comms[0].check()
    return statistics.median(medians)


def cpp_host_us(ranks, outputs, calls, batches):
    medians = []
    for _ in range(batches):
        torch.cuda.synchronize()
        medians.append(statistics.median(ranks.cpp_calls(outputs, calls)))
    torch.cuda.synchronize()
    ranks.comms[0].check()
    return statistics.median(medians)


def _hold_gpu(stream, seconds):
    sleep = getattr(torch.cuda, "_sleep", None)  # a spin kernel of `cycles` clock cycles
    if sleep is not None:
        with torch.cuda.stream(stream):
            sleep(int(seconds * 2e9))


def graph_us(ranks, op, replays, runs, register=False):
    graphs = []
    for r, s in enumerate(ranks.streams):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for _ in range(CALLS_PER_GRAPH):
                op(r)
        graphs.append(g)
    if register:
        calls, in_place = ranks.comms[0].register_graph_inputs()
        if in_place != calls:
            raise Error(f"register_graph_inputs read {in_place} of {calls} captured inputs in place")
    samples = replay_us(ranks, graphs, replays, runs)
    if not register:
        ranks.comms[0].register_graph_inputs()  # the timed graphs copied; the next capture starts afresh
    return samples


def replay_us(ranks, graphs, replays, runs):
    main = torch.cuda.current_stream()
    samples = []
    for _ in range(runs + 1):  # the first run warms up
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # Hold the GPU until every replay is enqueued: otherwise rank 0's first graph starts
        # while Python still enqueues the other ranks' (tens of µs each), and its first call
        # waits at the barrier for them inside the timed interval. arfuse-bench enqueues in
        # C++, a few µs per graph, so this makes the two harnesses time the same thing.
        _hold_gpu(main, 10e-3)
        start.record(main)
        for s in ranks.streams:
            s.wait_stream(main)
        for _ in range(replays):
            for g, s in zip(graphs, ranks.streams):
                with torch.cuda.stream(s):
                    g.replay()
        for s in ranks.streams:
            main.wait_stream(s)
        stop.record(main)
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1000 / (replays * CALLS_PER_GRAPH))
    ranks.comms[0].check()
    return statistics.median(samples[1:]), min(samples[1:]), max(samples[1:])


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    max_tokens = max(t for t, _ in args.shapes)
    max_hidden = max(h for _, h in args.shapes)
    try:
        comms = aft.local_communicators([0] * args.world, max_tokens=max_tokens, max_hidden=max_hidden,
                                        dtype=dtype, timeout=5.0)
    except Error as e:
        print(f"arfuse.bench: {e}", file=sys.stderr)
        return 1
    print(f"device: {torch.cuda.get_device_name(0)}; W = {args.world} virtual ranks; {args.dtype}; quant {args.quant}{' mirror' if args.mirror else ''}")
    print("host: microseconds per eager call (median); graph: device microseconds per call (median, min-max)")
    print(f"{'tokens x hidden':>16} {'method':>7} {'op':>6} {'noop':>6} {'meta':>6} {'binding':>8} {'C++':>6} "
          f"{'op graph':>9} {'(min-max)':>15} {'copied':>7} {'(min-max)':>15} {'staged in':>9} {'(min-max)':>15} "
          f"{'binding staged':>14} "
          f"{'(min-max)':>15} {'+ residual_out':>14} {'(min-max)':>15}")
    try:
        for tokens, hidden in args.shapes:
            ranks = Ranks(comms, tokens, hidden, dtype, args.quant, args.mirror)
            outputs = [ranks.outputs() for _ in range(args.world)]  # preallocated for the binding
            ranks.same_bytes_as_the_cpp_group(outputs)
            host = [host_us(ranks, call, args.calls, args.batches)
                    for call in (ranks.method, ranks.op, ranks.noop, ranks.op_meta, lambda r: ranks.binding(r, outputs))]
            host.append(cpp_host_us(ranks, outputs, args.calls, args.batches))
            median, low, high = graph_us(ranks, ranks.method, args.replays, args.runs, register=True)
            copied, copied_low, copied_high = graph_us(ranks, ranks.method, args.replays, args.runs)
            staged, staged_low, staged_high = graph_us(ranks, ranks.op_staged, args.replays, args.runs)
            bound, bound_low, bound_high = graph_us(ranks, lambda r: ranks.binding(r, outputs, staged=True),
                                                    args.replays, args.runs)
            separate, separate_low, separate_high = graph_us(
                ranks, lambda r: ranks.binding(r, outputs, staged=True, in_place=False), args.replays, args.runs)
            print(f"{tokens:>7} x {hidden:<6} {host[0]:>7.2f} {host[1]:>6.2f} {host[2]:>6.2f} {host[3]:>6.2f} "
                  f"{host[4]:>8.2f} {host[5]:>6.2f} {median:>9.2f} {f'({low:.2f}-{high:.2f})':>15} {copied:>7.2f} "
                  f"{f'({copied_low:.2f}-{copied_high:.2f})':>15} {staged:>9.2f} "
                  f"{f'({staged_low:.2f}-{staged_high:.2f})':>15} {bound:>14.2f} "
                  f"{f'({bound_low:.2f}-{bound_high:.2f})':>15} {separate:>14.2f} "
                  f"{f'({separate_low:.2f}-{separate_high:.2f})':>15}", flush=True)
    finally:
        torch.cuda.synchronize()
        comms[0].close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
