"""A plain tensor-parallel PyTorch block, fused by torch.compile: no arfuse call in the model.

    torchrun --nproc-per-node 2 examples/torch_compile_fusion.py [--tokens 16] [--hidden 4096]

The block is what a TP transformer layer ends with: each rank's shard of a row-parallel
projection, ``dist.all_reduce`` of the partial sums, the residual add and RMSNorm, then the next
projection. Compiled with arfuse.torch_fusion's pass, Inductor's graph holds one arfuse op in
place of the all-reduce, the add and the norm. Every rank prints the same checksum, and how far
the unfused compile's output lies from it (max |difference| over max |value|; docs/python.md
says why they differ). Ranks on their own GPUs use NCCL for the unfused all-reduce; more ranks than
GPUs share them (time-sliced) over gloo.
"""

import argparse
import os

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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intermediate", type=int, default=8192, help="the MLP's inner size, split over ranks")
    args = parser.parse_args()

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

    comm = aft.Communicator(max_tokens=max(args.tokens, 256), max_hidden=args.hidden, dtype=torch.bfloat16)
    comm.prepare(args.hidden, torch.bfloat16)
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
