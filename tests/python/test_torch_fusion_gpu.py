"""arfuse.torch_fusion on a GPU: W = 2 and 4 processes (gloo) sharing one GPU run a two-layer
Llama-style block (linear -> all-reduce -> add -> RMSNorm -> linear, twice) compiled with and
without the pass. With the pass: the same bytes on every rank, the first layer's output bit for
bit what calling the op directly on the same tensors gives (and so are q and the scales of a layer
that quantises per token group, as DeepSeek's per_token_group_quant_fp8 writes it), and against the unfused block run
eagerly (gloo's sum, PyTorch's norm) at most the difference docs/python.md states (the block
compiled without the pass is measured against it too, and printed). Inputs are fresh random each
run (the seed is printed in a failure)."""

import datetime
import random
import traceback

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU"),
]

HIDDEN, TOKENS = 4096, (1, 8, 37)
# The largest difference docs/python.md states between the fused and the unfused compiled block,
# in ulps of bf16, per output of a layer (residual: the sum, rounded differently; out: after the
# norm). The measured values are printed by the test.
# What docs/python.md states: the largest difference to the same block run eagerly without the
# pass (gloo's sum, PyTorch's norm, cuBLAS's matmuls), as max |diff| over max |value| of each
# output. The matmuls Inductor compiles and the sum's rounding (gloo rounds each partial sum to
# bf16 at W = 4) move values near zero by many ulps, so ulps are printed, not bounded.
BOUND = 2.0 ** -6


def relative(a, b):
    """max |a - b| over max |b|."""
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30))


def ulps(a, b):
    """The largest distance of two bf16 tensors in units in the last place (order of the bits)."""
    def ordered(t):
        bits = t.contiguous().view(torch.int16).to(torch.int32)
        return torch.where(bits < 0, -(bits & 0x7FFF), bits)
    return int((ordered(a) - ordered(b)).abs().max().item()) if a.numel() else 0


class Layer(torch.nn.Module):
    """One TP layer: this rank's shard of a row-parallel projection, the sum over ranks, the
    residual add and a norm in the form `norm` names, then a replicated projection."""

    def __init__(self, rank, world, seed, norm):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        inner = 2 * HIDDEN
        down = torch.randn(inner, HIDDEN, generator=g) / inner ** 0.5
        shard = inner // world
        self.down = torch.nn.Parameter(down[rank * shard:(rank + 1) * shard].bfloat16().cuda(), requires_grad=False)
        self.up = torch.nn.Parameter((torch.randn(HIDDEN, inner, generator=g) / HIDDEN ** 0.5).bfloat16().cuda(),
                                     requires_grad=False)
        self.weight = torch.nn.Parameter((torch.rand(HIDDEN, generator=g) + 0.5).bfloat16().cuda(),
                                         requires_grad=False)
        self.rank, self.world, self.norm = rank, world, norm

    def forward(self, activation, residual):
        import torch.distributed as dist

        shard = activation.shape[-1] // self.world
        partial = activation[:, self.rank * shard:(self.rank + 1) * shard] @ self.down
        dist.all_reduce(partial)
        r = partial + residual
        if self.norm == "llama":
            h = r.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
            y = self.weight * h.to(r.dtype)
        else:
            y = torch.nn.functional.rms_norm(r, (HIDDEN,), self.weight, 1e-6)
        return y @ self.up, r, y


class GroupQuantLayer(Layer):
    """Layer one with DeepSeek's per_token_group_quant_fp8 (groups of 128, the eps clamp) after
    the norm: the pass makes it mode fp8_group."""

    def forward(self, activation, residual):
        import torch.distributed as dist

        shard = activation.shape[-1] // self.world
        partial = activation[:, self.rank * shard:(self.rank + 1) * shard] @ self.down
        dist.all_reduce(partial)
        r = partial + residual
        y = torch.nn.functional.rms_norm(r, (HIDDEN,), self.weight, 1e-6)
        t = y.float()
        grouped = t.view(t.shape[0], HIDDEN // 128, 128)
        scale = grouped.abs().amax(-1, keepdim=True).clamp(min=1e-10) / 448.0
        q = (grouped / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        return q.view(t.shape), scale.squeeze(-1), r


class Block(torch.nn.Module):
    def __init__(self, rank, world, seed):
        super().__init__()
        self.first = Layer(rank, world, seed, "rms_norm")
        self.second = Layer(rank, world, seed + 1, "llama")

    def forward(self, activation, residual):
        activation, residual, y1 = self.first(activation, residual)
        activation, residual, y2 = self.second(activation, residual)
        return activation, residual, y1, y2


def worker(rank, world, store, seed):
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    import arfuse.torch as aft
    import arfuse.torch_fusion as fusion

    comm = aft.Communicator(max_tokens=max(TOKENS), max_hidden=HIDDEN, dtype=torch.bfloat16, timeout=60.0)
    try:
        check(dist, aft, fusion, comm, rank, world, seed)
    except Exception:
        raise AssertionError(f"rank {rank} of {world}, seed {seed}:\n{traceback.format_exc()}")
    finally:
        torch.cuda.synchronize()
        comm.close()
        dist.destroy_process_group()


def same_on_every_rank(dist, tensor, what):
    mine = tensor.contiguous().view(torch.uint8).cpu()
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    for r, theirs in enumerate(everyone):
        assert torch.equal(mine, theirs), f"{what}: rank {r}'s bytes differ from rank {dist.get_rank()}'s"


def check(dist, aft, fusion, comm, rank, world, seed):
    comm.prepare(HIDDEN, torch.bfloat16)
    block = Block(rank, world, seed)
    torch._dynamo.reset()
    unfused = torch.compile(block, fullgraph=True, dynamic=True)
    options = fusion.options(comm)
    installed = options["post_grad_custom_post_pass"]
    # The pass goes with this compiled module to every graph it compiles (token counts 0/1 recompile).
    fused = torch.compile(Block(rank, world, seed), fullgraph=True, dynamic=True, options=options)
    # The reference is the unfused block run eagerly; the block compiled without the pass is
    # measured against it too (printed).
    eager = {name: {"residual": 0, "out": 0, "relative": 0.0} for name in ("fused", "unfused")}
    for tokens in TOKENS:
        g = torch.Generator().manual_seed(seed + tokens)
        activation = torch.randn(tokens, 2 * HIDDEN, generator=g).bfloat16().cuda()
        residual = (torch.randn(tokens, HIDDEN, generator=g) * 4).bfloat16().cuda()
        with torch.no_grad():
            got = fused(activation, residual)
            torch.cuda.synchronize()
            want = unfused(activation, residual)
            torch.cuda.synchronize()
            plain = block(activation, residual)
        torch.cuda.synchronize()
        if tokens == TOKENS[-1] and rank == 0:
            print(f"residual row 0: fused {got[1][0, :4].tolist()} unfused {want[1][0, :4].tolist()} eager "
                  f"{plain[1][0, :4].tolist()}; y1: fused {got[2][0, :4].tolist()} eager {plain[2][0, :4].tolist()}",
                  flush=True)
        for name, outputs in (("fused", got), ("unfused", want)):
            eager[name]["relative"] = max(eager[name]["relative"], *(relative(outputs[i], plain[i]) for i in (1, 2, 3)))
            eager[name]["residual"] = max(eager[name]["residual"], ulps(outputs[1], plain[1]))
            eager[name]["out"] = max(eager[name]["out"], ulps(outputs[2], plain[2]), ulps(outputs[3], plain[3]))
        comm.check()
        for name, t in zip(("activation", "residual", "y1", "y2"), got):
            same_on_every_rank(dist, t, f"{tokens} tokens: fused {name}")
        # Layer one by hand with arfuse's op: the pass's output is the op's, byte for byte.
        layer = block.first
        shard = activation.shape[-1] // world
        partial = activation[:, rank * shard:(rank + 1) * shard] @ layer.down
        direct = comm.allreduce_rmsnorm(partial, residual, layer.weight, 1e-6, "none", "rms")
        torch.cuda.synchronize()
        assert torch.equal(direct[0].view(torch.int16), got[2].view(torch.int16)), f"{tokens} tokens: y1 != the op's"
    check_group_quant(dist, fusion, comm, rank, world, seed)
    # (installed.fused counts rewrites this process made: 0 where Inductor's FX graph cache served the graph;
    # y1 equal to the op's output above proves the rewrite.)
    print(f"rank {rank} of {world}: largest difference to the unfused block run eagerly: fused {eager['fused']}, "
          f"compiled without the pass {eager['unfused']} (bf16 ulps; relative: max |diff| / max |value|)", flush=True)
    assert eager["fused"]["relative"] <= BOUND, f"{eager['fused']['relative']}: more than the {BOUND} docs/python.md states"


def check_group_quant(dist, fusion, comm, rank, world, seed):
    """The per-token-group FP8 layer compiled with the pass: q, scales and the residual are the
    op's bytes (mode fp8_group) on the same tensors, the same on every rank."""
    layer = GroupQuantLayer(rank, world, seed + 7, "rms_norm")
    torch._dynamo.reset()
    fused = torch.compile(layer, fullgraph=True, dynamic=True, options=fusion.options(comm))
    comm.prepare(HIDDEN, torch.bfloat16, "fp8_group", "rms")
    for tokens in TOKENS:
        g = torch.Generator().manual_seed(seed + 1000 + tokens)
        activation = torch.randn(tokens, 2 * HIDDEN, generator=g).bfloat16().cuda()
        residual = (torch.randn(tokens, HIDDEN, generator=g) * 4).bfloat16().cuda()
        with torch.no_grad():
            q, scales, r = fused(activation, residual)
            shard = activation.shape[-1] // world
            partial = activation[:, rank * shard:(rank + 1) * shard] @ layer.down
            direct = comm.allreduce_rmsnorm(partial, residual, layer.weight, 1e-6, "fp8_group", "rms", 128)
        torch.cuda.synchronize()
        comm.check()
        assert torch.equal(direct[0].view(torch.uint8), q.view(torch.uint8)), f"{tokens} tokens: q != the op's"
        assert torch.equal(direct[2], scales), f"{tokens} tokens: scales != the op's"
        assert torch.equal(direct[1].view(torch.int16), r.view(torch.int16)), f"{tokens} tokens: residual"
        for name, t in (("q", q), ("scales", scales)):
            same_on_every_rank(dist, t, f"{tokens} tokens: grouped {name}")


@pytest.mark.parametrize("world", [2, 4])
def test_the_compiled_block_with_the_pass(tmp_path, world):
    import torch.multiprocessing as mp

    seed = random.SystemRandom().randrange(1 << 30)
    mp.spawn(worker, args=(world, str(tmp_path / "store"), seed), nprocs=world, join=True)
