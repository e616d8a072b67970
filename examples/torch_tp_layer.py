"""A tensor-parallel MLP output projection with arfuse's fused epilogue, one process per rank.

    torchrun --nproc-per-node 2 examples/torch_tp_layer.py [--tokens 16] [--hidden 4096]

Each rank holds a row shard of the projection, so its matmul gives a partial sum; arfuse sums
the partials over the ranks (fp32, in rank order), adds the residual in place, applies RMSNorm
and quantises to FP8 per token - one kernel. Ranks on their own GPUs use NCCL for set-up; more
ranks than GPUs share them (time-sliced) over gloo. Every rank prints the same checksum.
"""

import argparse
import os

import torch
import torch.distributed as dist

import arfuse.torch as aft


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

    # The same weights on every rank (seeded), each rank keeping its shard.
    g = torch.Generator().manual_seed(0)
    shard = args.intermediate // world
    w_down = (torch.randn(args.intermediate, args.hidden, generator=g) / args.intermediate**0.5).bfloat16()
    w_down = w_down[rank * shard:(rank + 1) * shard].cuda()
    norm_weight = torch.ones(args.hidden, dtype=torch.bfloat16, device="cuda")
    activations = torch.randn(args.tokens, args.intermediate, generator=g).bfloat16()
    activations = activations[:, rank * shard:(rank + 1) * shard].cuda()
    residual = torch.randn(args.tokens, args.hidden, generator=g).bfloat16().cuda()

    comm = aft.Communicator(max_tokens=args.tokens, max_hidden=args.hidden, dtype=torch.bfloat16)
    comm.prepare(args.hidden, torch.bfloat16, quant="fp8")
    partial = activations @ w_down  # [tokens, hidden], this rank's share of the sum
    out, scales, _ = comm.allreduce_rmsnorm_(partial, residual, norm_weight, eps=1e-6, quant="fp8")
    torch.cuda.synchronize()
    comm.check()
    checksum = out.view(torch.uint8).sum().item()
    print(f"rank {rank}/{world}: path {comm.last_path()}, out {tuple(out.shape)} {out.dtype}, "
          f"byte checksum {checksum}, sum of scales {scales.sum().item():.6f}")
    comm.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
