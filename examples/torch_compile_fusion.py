"""A plain tensor-parallel PyTorch block, fused by torch.compile: no arfuse call in the model.

    torchrun --nproc-per-node 2 examples/torch_compile_fusion.py [--tokens 16] [--hidden 4096]
    torchrun --nproc-per-node 4 examples/torch_compile_fusion.py --time [--tokens 1,8,32,128]

The block is what a TP transformer layer ends with: each rank's shard of a row-parallel
projection, ``dist.all_reduce`` of the partial sums, the residual add and RMSNorm, then the next
projection. Compiled with arfuse.torch_fusion's pass, Inductor's graph holds one arfuse op in
place of the all-reduce, the add and the norm. Every rank prints the same checksum, and how far
the unfused compile's output lies from it (max |difference| over max |value|; docs/python.md
says why they differ). Ranks on their own GPUs use NCCL for the unfused all-reduce; more ranks than
GPUs share them (time-sliced) over gloo.

--time: the step time of the block compiled with and without the pass, per token count, each
replayed from a CUDA graph of --steps calls (median of --repeats replays; the unfused all-reduce
is NCCL's), and the time the pass saves per layer. Needs one GPU per rank: ranks that share a
GPU are time-sliced and gloo cannot be captured in a graph.
"""

import argparse
import os
import statistics

import torch
import torch.distributed as dist

import arfuse.torch as aft
import arfuse.torch_fusion as fusion


class TPBlock(torch.nn.Module):
    def __init__(self, rank, world, hidden, intermediate):
        super().__init__()
        g = torch.Generator().manual_seed(0)  # the same weights on every rank; each keeps its shard
        shard = intermediate // world
        down = torch.randn(intermediate, hidden, generator=g) / intermediate ** 0.5
        self.down = torch.nn.Parameter(down[rank * shard:(rank + 1) * shard].bfloat16(), requires_grad=False)
        self.norm_weight = torch.nn.Parameter(torch.ones(hidden, dtype=torch.bfloat16), requires_grad=False)
        up = torch.randn(hidden, intermediate, generator=g) / hidden ** 0.5
        self.up = torch.nn.Parameter(up[:, rank * shard:(rank + 1) * shard].bfloat16(), requires_grad=False)

    def forward(self, activation, residual):
        partial = activation @ self.down  # this rank's share of the sum
        dist.all_reduce(partial)
        residual = partial + residual
        normed = torch.nn.functional.rms_norm(residual, (residual.shape[-1],), self.norm_weight, 1e-6)
        return normed @ self.up, residual


def step_time(fn, activation, residual, steps, repeats, comm):
    """Median microseconds of one call of `fn`, replayed from a CUDA graph of `steps` calls (the
    arfuse ops in it reading their inputs where they lie: comm.register_graph_inputs())."""
    with torch.no_grad():
        for _ in range(3):  # compiles, and NCCL's and arfuse's first-call set-up, outside the graph
            fn(activation, residual)
        torch.cuda.synchronize()
        dist.barrier()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(steps):
                fn(activation, residual)
    comm.register_graph_inputs()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        dist.barrier()  # every rank replays together: the kernels meet at barriers
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / steps)
    return statistics.median(times)


def time_both(block, comm, rank, world, args):
    """Rank 0 prints one Markdown row per token count: the layer with and without the pass."""
    if world > torch.cuda.device_count():
        raise SystemExit(f"--time needs one GPU per rank: {world} ranks, {torch.cuda.device_count()} GPUs")
    if rank == 0:
        print("| tokens | hidden | W | without the pass, us | with it, us | saved per layer, us |")
        print("|---:|---:|---:|---:|---:|---:|")
    shard = args.intermediate // world
    for tokens in args.token_counts:
        g = torch.Generator().manual_seed(tokens)
        activation = torch.randn(tokens, args.intermediate, generator=g).bfloat16()[:, rank * shard:(rank + 1) * shard]
        activation = activation.contiguous().cuda()
        residual = torch.randn(tokens, args.hidden, generator=g).bfloat16().cuda()
        torch._dynamo.reset()
        unfused = step_time(torch.compile(block, dynamic=False), activation, residual, args.steps, args.repeats,
                            comm)
        torch._dynamo.reset()
        fused = step_time(torch.compile(block, dynamic=False, options=fusion.options(comm)), activation, residual,
                          args.steps, args.repeats, comm)
        comm.check()
        if rank == 0:
            print(f"| {tokens} | {args.hidden} | {world} | {unfused:.2f} | {fused:.2f} | {unfused - fused:.2f} |",
                  flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", default=None,
                        help="rows of the call (default 16); with --time a comma-separated list (default 1,8,32,128)")
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intermediate", type=int, default=8192, help="the MLP's inner size, split over ranks")
    parser.add_argument("--time", action="store_true", help="time the block with and without the pass (see above)")
    parser.add_argument("--steps", type=int, default=50, help="--time: calls in the CUDA graph")
    parser.add_argument("--repeats", type=int, default=20, help="--time: replays of the graph")
    args = parser.parse_args()
    try:
        counts = [int(t) for t in (args.tokens or ("1,8,32,128" if args.time else "16")).split(",")]
    except ValueError:
        parser.error(f"--tokens takes whole numbers separated by commas, not {args.tokens!r}")
    if any(t < 1 for t in counts) or (not args.time and len(counts) != 1) or args.steps < 1 or args.repeats < 1:
        parser.error("--tokens takes counts of 1 or more (one without --time); --steps and --repeats 1 or more")
    if args.hidden % 8 or args.hidden < 8 or args.intermediate < 1:
        parser.error("--hidden must be a positive multiple of 8 and --intermediate positive")
    args.token_counts, args.tokens = counts, counts[0]

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    gpus = torch.cuda.device_count()
    torch.cuda.set_device(rank % gpus)
    dist.init_process_group("nccl" if world <= gpus else "gloo")

    block = TPBlock(rank, world, args.hidden, args.intermediate).cuda()
    g = torch.Generator().manual_seed(1)
    shard = args.intermediate // world
    activation = torch.randn(args.tokens, args.intermediate, generator=g).bfloat16()
    activation = activation[:, rank * shard:(rank + 1) * shard].cuda()
    residual = torch.randn(args.tokens, args.hidden, generator=g).bfloat16().cuda()

    comm = aft.Communicator(max_tokens=max(args.token_counts + [256]), max_hidden=args.hidden, dtype=torch.bfloat16)
    comm.prepare(args.hidden, torch.bfloat16)
    if args.time:
        time_both(block, comm, rank, world, args)
        comm.close()
        dist.destroy_process_group()
        return
    options = fusion.options(comm)  # the one line: Inductor runs arfuse's pass on this model's graphs
    fused = torch.compile(block, options=options)
    unfused = torch.compile(block)
    with torch.no_grad():
        out, res = fused(activation, residual)
        reference, _ = unfused(activation, residual)
    torch.cuda.synchronize()
    comm.check()
    difference = ((out.float() - reference.float()).abs().max() / reference.float().abs().max()).item()
    print(f"rank {rank}/{world}: {options['post_grad_custom_post_pass'].fused} all-reduce + norm fused; "
          f"out {tuple(out.shape)} byte checksum {out.view(torch.uint8).sum().item()}, residual checksum "
          f"{res.view(torch.uint8).sum().item()}; the unfused compile differs by {difference:.4f} of the largest value")
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
