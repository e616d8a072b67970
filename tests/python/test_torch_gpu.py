"""arfuse.torch on a GPU: W = 2 and 4 processes (torch.multiprocessing, gloo) sharing one GPU
(time-sliced: correctness only), each with an arfuse.torch.Communicator.

Every call is checked against (a) a reference written in torch from the numeric contract
(docs/numeric-contract.md): the fp32 rank-order sum rounded to T, the residual exact, FP8 bytes and
scales exact given the mirror output, the normalised output within rounding of a float64 norm
(its reduction tree is the kernel's); (b) the other ranks' outputs, byte for byte; (c) the same
inputs through a C++ Group of W virtual ranks in one process (local_communicators), byte for
byte; (d) the standalone epilogue op on the reference sum, byte for byte. Then torch.compile
(fullgraph), CUDA graph capture + replay, torch.library.opcheck, PeerTimeout and CallMismatch.
Inputs are fresh random each run (the seed is printed in a failure)."""

import datetime
import os
import random
import traceback

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU"),
]

MAX_TOKENS, MAX_HIDDEN = 256, 8192
# (tokens, hidden, dtype, norm): odd token counts, a hidden size that is not a power of two.
SHAPES = [(1, 4096, torch.bfloat16, "rms"), (7, 2880, torch.float16, "gemma"), (129, 8192, torch.bfloat16, "gemma")]
QUANTS = ("none", "fp8", "fp8+mirror")  # "+mirror": the mode with the mirror output


def named(quant):
    """(quant, mirror) of a QUANTS label."""
    name, _, extra = quant.partition("+")
    return name, extra == "mirror"


# -- the reference, in torch ------------------------------------------------------------------
def rank_inputs(seed, world, tokens, hidden, dtype):
    g = torch.Generator().manual_seed(seed)
    xs = [(torch.randn(tokens, hidden, generator=g) * 2).to(dtype) for _ in range(world)]
    residual = torch.randn(tokens, hidden, generator=g).to(dtype)
    weight = (torch.rand(hidden, generator=g) + 0.5).to(dtype)
    return xs, residual, weight


def reference_sum(xs):
    total = xs[0].float()
    for x in xs[1:]:
        total = total + x.float()  # fp32, strictly in rank order
    return total.to(xs[0].dtype)


def reference_norm(res, weight, eps, norm):
    r = res.double()
    inv = 1.0 / torch.sqrt((r * r).mean(dim=1, keepdim=True) + eps)
    g = weight.double() + (1.0 if norm == "gemma" else 0.0)
    return (r * inv * g).float()


def reference_fp8(y, fp8_dtype):
    amax = y.float().abs().amax(dim=1)
    # A tensor divisor: torch divides by a Python scalar as a multiply by its reciprocal.
    fp8_max = torch.full_like(amax, torch.finfo(fp8_dtype).max)
    scales = torch.where(amax > 0, amax / fp8_max, torch.ones_like(amax))
    q = (y.float() / scales[:, None]).to(fp8_dtype)
    return q, scales


def as_bytes(t):
    return t.contiguous().view(torch.uint8).cpu() if t.numel() else torch.empty(0, dtype=torch.uint8)


def assert_same_bytes(a, b, what):
    a, b = as_bytes(a), as_bytes(b)
    if a.numel() != b.numel():
        raise AssertionError(f"{what}: {a.numel()} bytes against {b.numel()}")
    if not torch.equal(a, b):
        differ = (a != b).nonzero()
        raise AssertionError(f"{what}: {differ.numel()} bytes differ, first at byte {differ[0].item()}")


# -- the workers ------------------------------------------------------------------------------
def init(rank, world, store):
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    return dist


def worker(rank, world, store, scenario, seed):
    dist = init(rank, world, store)
    import arfuse.torch as aft

    # peer_timeout waits for this timeout once; the others never should.
    timeout = 3.0 if scenario == "peer_timeout" else 20.0
    comm = aft.Communicator(max_tokens=MAX_TOKENS, max_hidden=MAX_HIDDEN, timeout=timeout)
    try:
        SCENARIOS[scenario](dist, aft, comm, rank, world, seed)
    except Exception:
        raise AssertionError(f"rank {rank} of {world}, seed {seed}:\n{traceback.format_exc()}")
    finally:
        torch.cuda.synchronize()
        comm.close()
        dist.destroy_process_group()


def gathered(dist, tensor):
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, as_bytes(tensor))
    return everyone


def same_on_every_rank(dist, tensor, what):
    mine = as_bytes(tensor)
    for r, theirs in enumerate(gathered(dist, tensor)):
        if not torch.equal(mine, theirs):
            raise AssertionError(f"{what}: rank {r}'s bytes differ from rank {dist.get_rank()}'s")


def virtual_group_outputs(aft, world, xs, residual, weight, eps, quant, norm, stage):
    """The same call through a C++ Group of `world` virtual ranks driven by this process."""
    comms = aft.local_communicators([0] * world, max_tokens=MAX_TOKENS, max_hidden=MAX_HIDDEN, timeout=20.0)
    try:
        comms[0].force_stage(stage)
        name, mirror = named(quant)
        for c in comms:
            c.prepare(xs[0].shape[1], xs[0].dtype, name, norm, mirror=mirror)
        streams = [torch.cuda.Stream() for _ in comms]
        outs = []
        for c, s, x in zip(comms, streams, xs):
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                outs.append(c.allreduce_rmsnorm(x, residual, weight, eps, name, norm, mirror=mirror))
        torch.cuda.synchronize()
        comms[0].check()
        return outs
    finally:
        comms[0].close()


def numerics(dist, aft, comm, rank, world, seed):
    eps = 1e-6
    for case, (tokens, hidden, dtype, norm) in enumerate(SHAPES):
        for quant in QUANTS:
            name, mirror = named(quant)
            comm.prepare(hidden, dtype, name, norm, mirror=mirror)
        comm.prepare(hidden, dtype, "none", "rms")
        comm.prepare(hidden, dtype, "fp8_group", norm, group_size=64, scale_format="e8m0", mirror=True)
        comm.prepare(hidden, dtype, "fp8_group", norm, group_size=32, scale_format="ue8m0_f32")
        comm.prepare(hidden, dtype, "mxfp4", norm, mirror=True)
        for quant, mirror in (("fp8_static", True), ("nvfp4", True), ("nvfp4", False)):
            comm.prepare(hidden, dtype, quant, norm, mirror=mirror)
        for stage in (1, 2):
            comm.force_stage(stage)
            xs, residual_cpu, weight_cpu = rank_inputs(seed + 100 * case + stage, world, tokens, hidden, dtype)
            x = xs[rank].cuda()
            residual, weight = residual_cpu.cuda(), weight_cpu.cuda()
            total = reference_sum(xs).cuda()
            res = (total.float() + residual.float()).to(dtype)
            where = f"{tokens}x{hidden} {dtype} {norm} stage {stage}"

            summed = comm.allreduce(x)
            assert_same_bytes(summed, total, f"allreduce {where} vs the rank-order fp32 sum")
            assert comm.last_path() == ("one_stage" if stage == 1 else "two_stage"), comm.last_path()

            outputs = {}
            for quant in QUANTS:
                name, with_mirror = named(quant)
                out, residual_out, scales, mirror = comm.allreduce_rmsnorm(x, residual, weight, eps, name, norm,
                                                                           mirror=with_mirror)
                outputs[quant] = (out, residual_out, scales, mirror)
                what = f"{quant} {where}"
                assert_same_bytes(residual_out, res, f"residual_out {what}")
                if quant == "none":
                    torch.testing.assert_close(out.float(), reference_norm(res, weight, eps, norm).to(dtype).float(),
                                               rtol=2 ** -7, atol=1e-3)
                if quant == "fp8+mirror":
                    assert_same_bytes(mirror, outputs["none"][0], f"mirror vs the unquantised output, {what}")
                    q, ref_scales = reference_fp8(mirror, comm.fp8_dtype)
                    assert_same_bytes(scales, ref_scales, f"scales given the mirror, {what}")
                    assert_same_bytes(out, q, f"FP8 bytes given the mirror, {what}")
                    assert_same_bytes(out, outputs["fp8"][0], f"fp8 vs fp8 with the mirror, output, {what}")
                    assert_same_bytes(scales, outputs["fp8"][2], f"fp8 vs fp8 with the mirror, scales, {what}")
                standalone = aft.rmsnorm_quant(total, residual, weight, eps, name, norm, mirror=with_mirror)
                for name, a, b in zip(("out", "residual_out", "scales", "mirror"), standalone, outputs[quant]):
                    assert_same_bytes(b, a, f"{name}: fused vs rmsnorm_quant of the reference sum, {what}")
                for name, t in zip(("out", "residual_out", "scales", "mirror"), outputs[quant]):
                    same_on_every_rank(dist, t, f"{name} {what}")

            # Block-scaled and static modes (contract 7b-7e): fused == standalone epilogue of the
            # reference sum, the mirror == the unquantised output, and the same bytes on every rank.
            static_scale = torch.tensor([0.0123], dtype=torch.float32, device=x.device)
            global_scale = torch.tensor([448.0 * 6.0 / 8.0], dtype=torch.float32, device=x.device)
            for extra in (dict(quant="fp8_group", group_size=64, scale_format="e8m0", scale_layout="column_major",
                               mirror=True),
                          dict(quant="fp8_group", group_size=32, scale_format="ue8m0_f32", scale_layout="row_major"),
                          dict(quant="mxfp4", mirror=True),
                          dict(quant="fp8_static", scale=static_scale, mirror=True),
                          dict(quant="nvfp4", scale_layout="swizzled_128x4", scale=global_scale, mirror=True),
                          dict(quant="nvfp4", scale=global_scale)):
                what = f"{extra} {where}"
                fused = comm.allreduce_rmsnorm(x, residual, weight, eps, norm=norm, **extra)
                alone = aft.rmsnorm_quant(total, residual, weight, eps, norm=norm, **extra)
                for name, a, b in zip(("out", "residual_out", "scales", "mirror"), fused, alone):
                    assert_same_bytes(a, b, f"{name}: fused vs rmsnorm_quant of the reference sum, {what}")
                    same_on_every_rank(dist, a, f"{name} {what}")
                if extra.get("mirror"):  # group_quant of the mirror: the op's bytes
                    assert_same_bytes(fused[3], outputs["none"][0], f"mirror vs the unquantised output, {what}")
                    settings = {k: v for k, v in extra.items() if k not in ("quant", "mirror")}
                    again = aft.group_quant(fused[3], extra["quant"], **settings)
                    assert_same_bytes(again[0], fused[0], f"group_quant(mirror) out, {what}")
                    assert_same_bytes(again[1], fused[2], f"group_quant(mirror) scales, {what}")

            # The input written into the staging buffer: read in place, the same bytes.
            staged = comm.input_buffer(tokens, hidden, dtype)
            staged.copy_(x)
            out, residual_out, scales, _ = comm.allreduce_rmsnorm(staged, residual, weight, eps, "fp8", norm)
            assert_same_bytes(out, outputs["fp8"][0], f"staged input, fp8 output {where}")
            assert_same_bytes(scales, outputs["fp8"][2], f"staged input, scales {where}")
            assert_same_bytes(residual_out, res, f"staged input, residual_out {where}")

            # Programmatic dependent launch: the same bytes (here after ordinary launches; the C++
            # [pdl] tests put a producer before the kernel).
            out, residual_out, scales, _ = comm.allreduce_rmsnorm(x, residual, weight, eps, "fp8", norm, pdl=True)
            assert_same_bytes(out, outputs["fp8"][0], f"pdl fp8 output {where}")
            assert_same_bytes(scales, outputs["fp8"][2], f"pdl scales {where}")
            assert_same_bytes(comm.allreduce(x, pdl=True), total, f"pdl allreduce {where}")

            # In place, as engines call it: residual becomes residual_out.
            inplace_residual = residual.clone()
            out, scales, _ = comm.allreduce_rmsnorm_(x, inplace_residual, weight, eps, "fp8", norm)
            assert_same_bytes(inplace_residual, res, f"in-place residual {where}")
            assert_same_bytes(out, outputs["fp8"][0], f"in-place fp8 output {where}")

            # The C++ Group with W virtual ranks in one process gives the same bytes.
            dist.barrier()
            if rank == 0:
                for quant in QUANTS:
                    virtual = virtual_group_outputs(aft, world, [t.cuda() for t in xs], residual, weight, eps, quant,
                                                    norm, stage)
                    for r, outs in enumerate(virtual):
                        for name, a, b in zip(("out", "residual_out", "scales", "mirror"), outs, outputs[quant]):
                            assert_same_bytes(a, b, f"{name}: virtual rank {r} vs process rank 0, {quant} {where}")
            dist.barrier()
    comm.force_stage(None)
    torch.cuda.synchronize()
    comm.check()


def compile_and_graph(dist, aft, comm, rank, world, seed):
    tokens, hidden, dtype = 33, 4096, torch.bfloat16
    comm.prepare(hidden, dtype, "fp8", "rms")

    def layer(x, residual, weight):
        h = x * 0.5
        out, scales, _ = comm.allreduce_rmsnorm_(h, residual, weight, 1e-5, "fp8", "rms")
        return out, scales, comm.allreduce(h)

    def data(step):
        xs, residual, weight = rank_inputs(seed + step, world, tokens, hidden, dtype)
        return xs[rank].cuda(), residual.cuda(), weight.cuda()

    x, residual, weight = data(1)
    eager_residual = residual.clone()
    eager = layer(x, eager_residual, weight)
    compiled = torch.compile(layer, fullgraph=True)
    compiled_residual = residual.clone()
    got = compiled(x, compiled_residual, weight)
    for name, a, b in zip(("out", "scales", "sum"), got, eager):
        assert_same_bytes(a, b, f"torch.compile(fullgraph) {name}")
    assert_same_bytes(compiled_residual, eager_residual, "torch.compile(fullgraph) residual")

    # CUDA graph: warm up on a side stream, capture, then replay with new data copied in.
    static_x, static_residual, static_weight = x.clone(), residual.clone(), weight.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        layer(static_x, static_residual.clone(), static_weight)
    torch.cuda.current_stream().wait_stream(side)
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = layer(static_x, static_residual, static_weight)
    dist.barrier()
    # The graph's inputs (h, in the graph's pool) are read where they lie after this; the replays
    # below then check the bytes of the registered graph (the IPC path between processes).
    assert comm.register_graph_inputs() == (2, 2)
    for step in range(2, 6):
        x, residual, weight = data(step)
        static_x.copy_(x), static_residual.copy_(residual), static_weight.copy_(weight)
        graph.replay()
        expect_residual = residual.clone()
        expect = layer(x, expect_residual, weight)
        torch.cuda.synchronize()
        for name, a, b in zip(("out", "scales", "sum"), static_out, expect):
            assert_same_bytes(a, b, f"graph replay {step} {name}")
        assert_same_bytes(static_residual, expect_residual, f"graph replay {step} residual")
        same_on_every_rank(dist, static_out[0], f"graph replay {step} out")
    comm.check()


def opcheck(dist, aft, comm, rank, world, seed):
    tokens, hidden, dtype = 5, 2048, torch.float16
    for quant in QUANTS:
        name, mirror = named(quant)
        comm.prepare(hidden, dtype, name, "rms", mirror=mirror)
    xs, residual, weight = rank_inputs(seed, world, tokens, hidden, dtype)
    x, residual, weight = xs[rank].cuda(), residual.cuda(), weight.cuda()
    ops = torch.ops.arfuse
    for quant in QUANTS:
        name, mirror = named(quant)
        mode = aft.mode_code(name, "rms", mirror=mirror)
        torch.library.opcheck(ops.allreduce_rmsnorm.default, (comm.handle, x, residual, weight, 1e-6, mode))
        torch.library.opcheck(ops.allreduce_rmsnorm_inplace.default,
                              (comm.handle, x, residual.clone(), weight, 1e-6, mode))
        torch.library.opcheck(ops.rmsnorm_quant.default, (x, residual, weight, 1e-6, mode))
    scale = torch.full((1,), 2.5, dtype=torch.float32, device="cuda")
    torch.library.opcheck(ops.group_quant.default, (x, aft.mode_code("nvfp4"), False, scale))
    torch.library.opcheck(ops.allreduce.default, (comm.handle, x))
    torch.cuda.synchronize()
    comm.check()


def peer_timeout(dist, aft, comm, rank, world, seed):
    import arfuse

    tokens, hidden, dtype = 4, 1024, torch.bfloat16
    late = world - 1
    comm.prepare(hidden, dtype)
    xs, _, _ = rank_inputs(seed, world, tokens, hidden, dtype)
    x = xs[rank].cuda()
    comm.allreduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    if rank != late:
        comm.allreduce(x)  # the late rank skips this call
    torch.cuda.synchronize()
    if rank != late:
        with pytest.raises(arfuse.PeerTimeout) as raised:
            comm.check()
        assert raised.value.rank == late, (raised.value.rank, str(raised.value))
    dist.barrier()
    comm.reset()
    assert_same_bytes(comm.allreduce(x), reference_sum(xs).cuda(), "the first call after reset()")

    # A rank that calls with another shape: CallMismatch naming both ranks, outputs untouched.
    y = torch.zeros(tokens, hidden // 2 if rank == late else hidden, dtype=dtype, device="cuda")
    comm.allreduce(y)
    torch.cuda.synchronize()
    with pytest.raises(arfuse.CallMismatch) as mismatch:
        comm.check()
    assert late in (mismatch.value.rank, mismatch.value.peer), str(mismatch.value)
    dist.barrier()
    comm.reset()
    assert_same_bytes(comm.allreduce(x), reference_sum(xs).cuda(), "the first call after the mismatch")


def views(dist, aft, comm, rank, world, seed):
    """The tensors engines pass, as aiter's fused all-reduce test passes them: a strided N-d
    input, a strided residual, a padded output; and views from narrow, as_strided and view. Each
    call's bytes equal the contiguous call's (padding aside, which is zero); nothing outside a
    view's rows changes."""
    batch, seq, hidden, dtype, eps = 3, 11, 2560, torch.bfloat16, 1e-6
    tokens, pad = batch * seq, 64
    for quant in ("none", "fp8", "fp8+mirror", "fp8_group"):
        name, mirror = named(quant)
        comm.prepare(hidden, dtype, name, "rms", mirror=mirror)
    xs, residual_cpu, weight_cpu = rank_inputs(seed, world, tokens, hidden, dtype)
    x, residual, weight = xs[rank].cuda(), residual_cpu.cuda(), weight_cpu.cuda()
    wide_x = torch.randn(batch, seq, hidden + pad, device="cuda").to(dtype)
    wide_x[..., :hidden] = x.view(batch, seq, hidden)
    x_view = wide_x.narrow(-1, 0, hidden)  # [batch, seq, hidden], rows hidden + pad apart
    wide_residual = torch.randn(tokens, hidden + 2 * pad, device="cuda").to(dtype)
    wide_residual[:, pad:pad + hidden] = residual
    residual_view = wide_residual[:, pad:pad + hidden]  # a slice of a wider buffer
    residual_nd = residual_view.view(batch, seq, hidden)  # the same rows, input's shape
    assert not x_view.is_contiguous() and not residual_nd.is_contiguous()

    for quant in ("none", "fp8", "fp8+mirror", "fp8_group"):
        where = f"{quant}"
        name, mirror = named(quant)
        want = comm.allreduce_rmsnorm(x, residual, weight, eps, name, "rms", mirror=mirror)
        got = comm.allreduce_rmsnorm(x_view, residual_nd, weight, eps, name, "rms", mirror=mirror)
        assert got[0].shape[:2] == (batch, seq) and got[1].shape == (batch, seq, hidden), [t.shape for t in got]
        for part, a, b in zip(("out", "residual_out", "scales", "mirror"), got, want):
            assert_same_bytes(a.reshape(-1), b.reshape(-1), f"{part}: strided N-d views vs contiguous, {where}")
        alone = aft.rmsnorm_quant(x_view, residual_nd, weight, eps, name, "rms", mirror=mirror)
        alone_want = aft.rmsnorm_quant(x, residual, weight, eps, name, "rms", mirror=mirror)
        for part, a, b in zip(("out", "residual_out", "scales", "mirror"), alone, alone_want):
            assert_same_bytes(a.reshape(-1), b.reshape(-1), f"rmsnorm_quant {part}: views vs contiguous, {where}")
        if quant in ("none", "fp8"):
            padded = comm.allreduce_rmsnorm(x_view, residual_nd, weight, eps, quant, "rms", pad_to_multiple=384)
            width = -(-hidden // 384) * 384
            assert padded[0].shape == (batch, seq, width), padded[0].shape
            flat = padded[0].reshape(tokens, width)
            assert_same_bytes(flat[:, :hidden], want[0], f"padded out vs contiguous, {where}")
            assert_same_bytes(flat[:, hidden:], torch.zeros_like(flat[:, hidden:]), f"the padding, {where}")
            assert_same_bytes(padded[2].reshape(-1), want[2].reshape(-1), f"padded call's scales, {where}")

    # In place on a strided residual: its rows updated, its gaps untouched.
    want_out, want_scales, _ = comm.allreduce_rmsnorm_(x, residual.clone(), weight, eps, "fp8", "rms")
    before = wide_residual.clone()
    out, scales, _ = comm.allreduce_rmsnorm_(x_view, residual_nd, weight, eps, "fp8", "rms")
    total = reference_sum(xs).cuda()
    res = (total.float() + residual.float()).to(dtype)
    assert_same_bytes(residual_view, res, "in-place strided residual")
    assert_same_bytes(wide_residual[:, :pad], before[:, :pad], "in-place: the columns before the view")
    assert_same_bytes(wide_residual[:, pad + hidden:], before[:, pad + hidden:], "in-place: the columns after it")
    assert_same_bytes(out.reshape(-1), want_out.reshape(-1), "in-place strided out")

    # as_strided rows and the plain all-reduce of an N-d view; group_quant of a strided mirror.
    spaced = torch.empty(tokens * (hidden + 8), dtype=dtype, device="cuda")
    rows = spaced.as_strided((tokens, hidden), (hidden + 8, 1))
    rows.copy_(x)
    assert_same_bytes(comm.allreduce(rows), total, "allreduce of as_strided rows")
    summed = comm.allreduce(x_view)
    assert summed.shape == (batch, seq, hidden)
    assert_same_bytes(summed.reshape(tokens, hidden), total, "allreduce of a strided N-d view")
    mirror = comm.allreduce_rmsnorm(x, residual, weight, eps, "fp8_group", "rms", mirror=True)
    wide_mirror = torch.zeros(tokens, hidden + pad, dtype=dtype, device="cuda")
    wide_mirror[:, :hidden] = mirror[3]
    again = aft.group_quant(wide_mirror[:, :hidden], "fp8_group")
    assert_same_bytes(again[0], mirror[0], "group_quant of a strided mirror: out")
    assert_same_bytes(again[1], mirror[2], "group_quant of a strided mirror: scales")

    # A CUDA graph of the strided, padded call replays to the same bytes.
    static = comm.allreduce_rmsnorm(x_view, residual_nd, weight, eps, "fp8", "rms", pad_to_multiple=384)
    torch.cuda.synchronize()
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        replayed = comm.allreduce_rmsnorm(x_view, residual_nd, weight, eps, "fp8", "rms", pad_to_multiple=384)
    dist.barrier()
    assert comm.register_graph_inputs() == (1, 0)  # a strided input keeps the copy
    graph.replay()
    torch.cuda.synchronize()
    for name, a, b in zip(("out", "residual_out", "scales"), replayed, static):
        assert_same_bytes(a, b, f"graph replay of the strided padded call: {name}")
    comm.check()


SCENARIOS = {f.__name__: f for f in (numerics, compile_and_graph, opcheck, peer_timeout, views)}


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_processes_sharing_one_gpu(tmp_path, scenario, world):
    import torch.multiprocessing as mp

    if scenario != "numerics" and world != 2 and os.environ.get("ARFUSE_PYTEST_ALL_WORLDS") != "1":
        pytest.skip("W = 4 runs the numerics; the other scenarios at W = 4 with ARFUSE_PYTEST_ALL_WORLDS=1")
    seed = random.SystemRandom().randrange(1 << 30)
    mp.spawn(worker, args=(world, str(tmp_path / "store"), scenario, seed), nprocs=world, join=True)


@pytest.mark.parametrize("stage", [1, 2])
def test_virtual_ranks_graphs_read_registered_inputs_in_place(stage):
    """W = 4 virtual ranks: graphs of the ops replay to the eager bytes, copying their inputs
    before register_graph_inputs() and reading them where they lie after it (the staging buffers
    left as poisoned); a strided input keeps the copy."""
    import arfuse.torch as aft

    world, tokens, hidden, dtype = 4, 33, 4096, torch.bfloat16
    comms = aft.local_communicators([0] * world, max_tokens=MAX_TOKENS, max_hidden=MAX_HIDDEN, timeout=20.0)
    try:
        comms[0].force_stage(stage)
        for c in comms:
            c.prepare(hidden, dtype, "fp8", "rms")
        seed = random.SystemRandom().randrange(1 << 30)
        xs, residual, weight = rank_inputs(seed, world, tokens, hidden, dtype)
        xs = [x.cuda() for x in xs]
        wide = [torch.zeros(tokens, hidden + 64, dtype=dtype, device="cuda") for _ in range(world)]
        for w, x in zip(wide, xs):
            w[:, :hidden] = x
        strided = [w[:, :hidden] for w in wide]
        residual, weight = residual.cuda(), weight.cuda()
        streams = [torch.cuda.Stream() for _ in comms]
        staging = [c.input_buffer(tokens, hidden, dtype) for c in comms]

        def layer(r, inputs):
            res = residual.clone()
            out, scales, _ = comms[r].allreduce_rmsnorm_(inputs[r], res, weight, 1e-6, "fp8", "rms")
            return out, scales, res, comms[r].allreduce(inputs[r])

        def each_rank(call):
            results = []
            for r, s in enumerate(streams):
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    results.append(call(r))
            for s in streams:
                torch.cuda.current_stream().wait_stream(s)
            return results

        for inputs, read_in_place in ((xs, True), (strided, False)):
            eager = each_rank(lambda r: layer(r, inputs))
            torch.cuda.synchronize()
            graphs, captured = [], []
            for r, s in enumerate(streams):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=s):
                    captured.append(layer(r, inputs))
                graphs.append(g)
            for registered in (False, True):
                if registered:
                    assert comms[0].register_graph_inputs() == (2, 2 if read_in_place else 0)
                for t in staging:
                    t.view(torch.int16).fill_(-1)
                each_rank(lambda r: graphs[r].replay())
                torch.cuda.synchronize()
                comms[0].check()
                where = f"stage {stage}, {'registered' if registered else 'copied'}, {'contiguous' if read_in_place else 'strided'}"
                for r in range(world):
                    for name, a, b in zip(("out", "scales", "residual", "sum"), captured[r], eager[r]):
                        assert_same_bytes(a, b, f"rank {r} {name}: graph against eager, {where}")
                    untouched = bool((staging[r].view(torch.int16) == -1).all())
                    assert untouched == (registered and read_in_place), f"rank {r} staging buffer, {where}"
    finally:
        torch.cuda.synchronize()
        comms[0].close()
