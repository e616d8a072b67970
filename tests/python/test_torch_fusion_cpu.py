"""arfuse.torch_fusion without a GPU: a small tensor-parallel block is traced by torch.compile
(dynamic=True) on the CPU over a fake process group of two ranks, compiled by Inductor with the
pass, and the post-grad graph after the pass is read: each supported pattern becomes one
arfuse op with no all-reduce, residual add or norm left; each unsupported variant is left as it
was, with its reason logged. Running the fused graph needs a GPU (test_torch_gpu.py)."""

import logging

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
import torch.distributed._functional_collectives as funcol  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch._inductor.compile_fx import compile_fx  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

import arfuse  # noqa: E402
import arfuse.torch as aft  # noqa: E402
import arfuse.torch_fusion as fusion  # noqa: E402

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU half; the GPU tests run the fused graph")

H = 256
FUSED = torch.ops.arfuse.allreduce_rmsnorm.default


@pytest.fixture(scope="module", autouse=True)
def fake_group():
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    yield dist.group.WORLD
    dist.destroy_process_group()


class _Comm:
    """What the pass reads of a Communicator; the handle has the Meta kernels' FP8 format only."""

    def __init__(self, group_name, max_tokens=4096, max_hidden=8192):
        self.handle = arfuse._arfuse.register_tracing_handle("e4m3fn")
        self.group_name = group_name
        self.max_tokens, self.max_hidden = max_tokens, max_hidden
        self.fp8_dtype = torch.float8_e4m3fn


@pytest.fixture
def comm(fake_group):
    c = _Comm(fake_group.group_name)
    yield c
    arfuse._arfuse.release_handle(c.handle)


def llama_norm(x, weight, eps):
    dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(dtype)


def gemma_norm(x, weight, eps):
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (h * (1.0 + weight.float())).type_as(x)


NORMS = {
    "rms_norm": lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps),
    "llama": llama_norm,
    "gemma": gemma_norm,
}


class Block(torch.nn.Module):
    """linear -> all-reduce -> add -> RMSNorm (-> FP8) -> linear, as a TP layer runs it."""

    def __init__(self, norm="rms_norm", quant=None, eps=1e-6, hidden=H, residual_first=False, collective="dist",
                 keep_y=False, norm_dim=-1, dtype=torch.bfloat16):
        super().__init__()
        self.up = torch.nn.Linear(hidden, hidden, bias=False, dtype=dtype)
        self.down = torch.nn.Linear(hidden, hidden, bias=False, dtype=dtype)
        self.weight = torch.nn.Parameter(torch.randn(hidden, dtype=dtype))
        self.register_buffer("scale", torch.tensor([0.25]))
        self.norm, self.quant, self.eps = norm, quant, eps
        self.residual_first, self.collective, self.keep_y, self.norm_dim = residual_first, collective, keep_y, norm_dim

    def forward(self, x, residual):
        h = self.up(x)
        if self.collective == "dist":
            dist.all_reduce(h)
        elif self.collective == "funcol":
            h = funcol.all_reduce(h, "sum", dist.group.WORLD)
        elif self.collective == "max":
            dist.all_reduce(h, op=dist.ReduceOp.MAX)
        else:
            h = self.collective(h)
        r = residual + h if self.residual_first else h + residual
        if self.norm_dim == -1:
            y = NORMS[self.norm](r, self.weight, self.eps)
        else:  # over the first dimension: not a row norm
            h32 = r.float()
            y = (h32 * torch.rsqrt(h32.pow(2).mean(0, keepdim=True) + self.eps)).to(r.dtype) * self.weight
        outputs = [r]
        if self.quant == "static":
            outputs.append((y.float() / self.scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn))
        elif self.quant == "static_inverse":
            outputs.append((y.float() * (1.0 / self.scale)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn))
        elif self.quant == "dynamic":
            scale = y.float().abs().amax(-1, keepdim=True) / 448.0
            outputs += [(y.float() / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), scale]
        elif self.quant is not None and self.quant.startswith("group"):
            # DeepSeek's per_token_group_quant_fp8: "group<G>", with "+eps" its amax clamped below.
            size = int(self.quant[5:].split("+")[0])
            t = y.float()
            grouped = t.view(*t.shape[:-1], t.shape[-1] // size, size)
            amax = grouped.abs().amax(-1, keepdim=True)
            if self.quant.endswith("+eps"):
                amax = amax.clamp(min=1e-10)
            scale = amax / 448.0
            q = (grouped / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
            outputs += [q.view(t.shape), scale.squeeze(-1)]
        if self.quant is None or self.keep_y:
            outputs.append(self.down(y))
        return tuple(outputs)


def compiled_graph(model, fusion_pass, tokens=(5,), dynamic=True, specialize_float=True):
    """The post-grad graph Inductor compiles for `model` after `fusion_pass` ran on it; the model
    is traced with torch.compile(fullgraph=True) and runs eagerly (the fused op needs a GPU).
    specialize_float: float attributes (a norm's eps) as constants, as enabled() compiles."""
    seen = []

    def post(graph):
        fusion_pass(graph)
        graph.lint()
        seen.append(graph)

    def backend(gm, example_inputs):
        with torch._inductor.config.patch(post_grad_custom_post_pass=post, fx_graph_cache=False):
            compile_fx(gm, example_inputs)
        return gm.forward

    torch._dynamo.reset()
    shape = tokens + (H,)
    dtype = model.up.weight.dtype
    with torch.no_grad(), torch._dynamo.config.patch(specialize_float=specialize_float):
        torch.compile(model, backend=backend, fullgraph=True, dynamic=dynamic)(torch.randn(shape, dtype=dtype),
                                                                             torch.randn(shape, dtype=dtype))
    assert len(seen) == 1
    return seen[0]


def targets(graph):
    return [n.target for n in graph.nodes if n.op == "call_function"]


def assert_fused(graph, mode=None):
    found = targets(graph)
    assert found.count(FUSED) == 1, str(graph)
    for gone in (torch.ops._c10d_functional.all_reduce.default, torch.ops._c10d_functional.all_reduce_.default,
                 torch.ops._c10d_functional.wait_tensor.default,
                 torch.ops.aten.rsqrt.default, torch.ops.aten.pow.Tensor_Scalar, torch.ops.aten.mean.dim,
                 torch.ops.aten.add.Tensor):
        assert gone not in found, (gone, graph)
    node = next(n for n in graph.nodes if n.target == FUSED)
    if mode is not None:
        assert node.args[5] == aft.mode_code(*mode), (node.args[5], mode)
    return node


def assert_left(graph, caplog, why):
    found = targets(graph)
    assert FUSED not in found, str(graph)
    assert torch.ops._c10d_functional.all_reduce.default in found or \
        torch.ops._c10d_functional.all_reduce_.default in found
    assert why in caplog.text, caplog.text


@pytest.mark.parametrize("norm", ["rms_norm", "llama", "gemma"])
@pytest.mark.parametrize("residual_first", [False, True])
def test_each_norm_form_becomes_the_fused_op(comm, norm, residual_first):
    graph = compiled_graph(Block(norm, residual_first=residual_first), fusion.AllreduceRmsnormFusion(comm))
    node = assert_fused(graph, ("none", "gemma" if norm == "gemma" else "rms"))
    assert node.args[0] == comm.handle
    assert abs(node.args[4] - 1e-6) < 1e-12


def test_functional_collectives_and_leading_dimensions(comm):
    graph = compiled_graph(Block(collective="funcol"), fusion.AllreduceRmsnormFusion(comm), tokens=(2, 3))
    assert_fused(graph, ("none", "rms"))


@pytest.mark.parametrize("quant, mode", [("static", "fp8_static"), ("static_inverse", "fp8_static"),
                                         ("dynamic", "fp8")])
def test_fp8_quantisation_is_fused_and_y_kept_as_the_mirror(comm, quant, mode):
    graph = compiled_graph(Block(quant=quant), fusion.AllreduceRmsnormFusion(comm))
    node = assert_fused(graph, (mode, "rms"))
    assert (node.args[8] is not None) == (mode == "fp8_static")
    assert torch.ops.prims.convert_element_type.default not in targets(graph)  # no FP8 conversion left
    graph = compiled_graph(Block(quant=quant, keep_y=True), fusion.AllreduceRmsnormFusion(comm))
    node = assert_fused(graph)
    assert node.args[5] == aft.mode_code(mode, "rms", mirror=True), node.args[5]
    # Without the quantisation: the norm alone, where the graph reads y in T (Inductor drops the
    # round trip through T when y is only widened again, and then there is no y to replace).
    graph = compiled_graph(Block(quant=quant), fusion.AllreduceRmsnormFusion(comm, quant=False))
    if FUSED in targets(graph):
        assert_fused(graph, ("none", "rms"))
    else:
        assert quant == "static" or quant == "static_inverse"


@pytest.mark.parametrize("quant", ["group128", "group64+eps", "group32"])
def test_per_token_group_fp8_is_fused(comm, quant):
    size = int(quant[5:].split("+")[0])
    graph = compiled_graph(Block(quant=quant), fusion.AllreduceRmsnormFusion(comm), tokens=(2, 3))
    node = assert_fused(graph, ("fp8_group", "rms", size))
    assert node.args[8] is None
    found = targets(graph)
    for gone in (torch.ops.prims.convert_element_type.default, torch.ops.aten.amax.default,
                 torch.ops.aten.abs.default):
        assert gone not in found, (gone, graph)
    graph = compiled_graph(Block(quant=quant, keep_y=True), fusion.AllreduceRmsnormFusion(comm))
    node = assert_fused(graph)
    assert node.args[5] == aft.mode_code("fp8_group", "rms", size, mirror=True), node.args[5]


def test_a_group_size_fp8_group_does_not_take_is_not_fused_as_one(comm):
    graph = compiled_graph(Block(quant="group16"), fusion.AllreduceRmsnormFusion(comm))
    group_modes = {aft.mode_code("fp8_group", "rms", g, mirror=m) for g in (32, 64, 128) for m in (False, True)}
    assert not [n for n in graph.nodes if n.target == FUSED and n.args[5] in group_modes], str(graph)
    assert torch.ops.aten.amax.default in targets(graph)  # the group quantisation stays as it was


def test_an_engines_own_all_reduce_op(comm):
    @torch.library.custom_op("arfuse_test::all_reduce", mutates_args=())
    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @all_reduce.register_fake
    def _(x):
        return torch.empty_like(x)

    op = torch.ops.arfuse_test.all_reduce.default
    graph = compiled_graph(Block(collective=op), fusion.AllreduceRmsnormFusion(comm, all_reduce_op=op))
    assert_fused(graph, ("none", "rms"))
    assert op not in targets(graph)
    graph = compiled_graph(Block(collective=op), fusion.AllreduceRmsnormFusion(comm))
    assert FUSED not in targets(graph)


@pytest.mark.parametrize("variant, why", [
    (dict(eps=1e-5), "is not one of (1e-06,)"),
    (dict(norm_dim=0), "the norm is over dimension [0], not the last"),
    (dict(collective="max"), "the all-reduce is a max, not a sum"),
    (dict(dtype=torch.float32), "the dtype is torch.float32"),
])
def test_unsupported_variants_are_left_alone_with_the_reason(comm, caplog, variant, why):
    with caplog.at_level(logging.WARNING, logger="arfuse.torch_fusion"):
        graph = compiled_graph(Block(**variant), fusion.AllreduceRmsnormFusion(comm, eps=(1e-6,)))
    assert_left(graph, caplog, why)


def test_an_eps_the_graph_takes_as_input_is_left_alone(comm, caplog):
    with caplog.at_level(logging.WARNING, logger="arfuse.torch_fusion"):
        graph = compiled_graph(Block("llama"), fusion.AllreduceRmsnormFusion(comm), specialize_float=False)
    assert_left(graph, caplog, "eps is a run-time value")


def test_an_in_place_all_reduce_whose_input_is_read_again_is_left_alone(comm, caplog):
    class ReadsInputAgain(Block):
        def forward(self, x, residual):
            h = self.up(x)
            dist.all_reduce(h)
            r = h + residual
            return r, F.rms_norm(r, (H,), self.weight, 1e-6), h * 2  # h is the sum here too

    graph = compiled_graph(ReadsInputAgain(), fusion.AllreduceRmsnormFusion(comm))
    found = targets(graph)
    assert FUSED not in found, str(graph)  # the sum is read twice: the all-reduce stays
    assert torch.ops._c10d_functional.wait_tensor.default in found


def test_a_group_without_a_communicator_and_shapes_arfuse_does_not_take(fake_group, caplog):
    cases = [(_Comm("another group"), "not the communicator's 'another group'"),
             (_Comm(fake_group.group_name, max_hidden=128), "hidden size 256: arfuse takes multiples of 8 up to"),
             (_Comm(fake_group.group_name, max_tokens=4), "5 tokens: more than the communicator's max_tokens 4")]
    for c, why in cases:
        with caplog.at_level(logging.WARNING, logger="arfuse.torch_fusion"):
            # Token counts are checked where they are static; symbolic ones when the op runs.
            graph = compiled_graph(Block(), fusion.AllreduceRmsnormFusion(c), dynamic=not why.endswith("4"))
        assert_left(graph, caplog, why)
        arfuse._arfuse.release_handle(c.handle)


def test_the_ways_to_turn_it_on(comm):
    opts = fusion.options(comm, eps=(1e-6,))
    assert isinstance(opts["post_grad_custom_post_pass"], fusion.AllreduceRmsnormFusion)
    assert opts["post_grad_custom_post_pass"].uuid() == fusion.AllreduceRmsnormFusion(comm, eps=(1e-6,)).uuid()
    assert opts["post_grad_custom_post_pass"].uuid() != fusion.AllreduceRmsnormFusion(comm).uuid()
    before = torch._inductor.config.post_grad_custom_post_pass
    with fusion.enabled(comm) as installed:
        assert torch._inductor.config.post_grad_custom_post_pass is installed
    assert torch._inductor.config.post_grad_custom_post_pass is before
    try:
        installed = fusion.install(comm)
        assert torch._inductor.config.post_grad_custom_post_pass is installed
    finally:
        torch._inductor.config.post_grad_custom_post_pass = before
    local = _Comm(None)
    with pytest.raises(arfuse.Error, match="pass all_reduce_op"):
        fusion.AllreduceRmsnormFusion(local)
    arfuse._arfuse.release_handle(local.handle)
