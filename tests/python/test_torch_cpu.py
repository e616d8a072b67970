"""arfuse.torch without a GPU: the ops' schemas, their fake implementations (the shapes and
dtypes torch.compile traces with), argument checks with messages naming the argument, and
tracing into a graph, torch.compile and opcheck on the Meta kernels, the ops' compile cache.
Skipped where torch is not installed (CI runs it after installing torch); the GPU half is
test_torch_gpu.py."""

import os
import shutil

import pytest

torch = pytest.importorskip("torch")

import arfuse  # noqa: E402
import arfuse.torch as aft  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU half; test_torch_gpu.py runs on GPUs")


@pytest.fixture
def handle():
    # The fused ops' Meta kernels read only the communicator's FP8 dtype, so a handle without a
    # group stands in for one (making a real group needs a GPU).
    h = arfuse._arfuse.register_tracing_handle("e4m3fn")
    yield h
    arfuse._arfuse.release_handle(h)


def named(quant):
    """A mode as these tests label it, "fp8" or "fp8+mirror": (quant, mirror)."""
    name, _, extra = quant.partition("+")
    return name, extra == "mirror"


class _Ops:
    """The fused ops with mode names ("fp8+mirror": fp8 with the mirror), raising arfuse's
    exceptions, as the Communicator calls them."""

    @staticmethod
    def allreduce_rmsnorm(h, x, r, w, eps, quant, norm, group_size=128, scale_format="f32", scale_layout="row_major",
                          pdl=False, pad_to_multiple=0, scale=None):
        name, mirror = named(quant)
        return aft._fused(h, x, r, w, eps, name, norm, group_size, scale_format, scale_layout, mirror, pdl,
                          pad_to_multiple, scale, in_place=False)

    @staticmethod
    def allreduce_rmsnorm_inplace(h, x, r, w, eps, quant, norm, group_size=128, scale_format="f32",
                                  scale_layout="row_major", pdl=False, pad_to_multiple=0, scale=None):
        name, mirror = named(quant)
        return aft._fused(h, x, r, w, eps, name, norm, group_size, scale_format, scale_layout, mirror, pdl,
                          pad_to_multiple, scale, in_place=True)

    @staticmethod
    def allreduce(h, x, pdl=False):
        return aft._allreduce(h, x, pdl)

    @staticmethod
    def rmsnorm_quant(x, r, w, eps, quant, norm, **kwargs):
        name, mirror = named(quant)
        return aft.rmsnorm_quant(x, r, w, eps, name, norm, mirror=mirror, **kwargs)


ops = _Ops()


def tensors(tokens=5, hidden=64, dtype=torch.bfloat16):
    x = torch.empty(tokens, hidden, dtype=dtype, device="cuda")
    return x, torch.empty_like(x), torch.empty(hidden, dtype=dtype, device="cuda")


def test_import_does_not_need_a_gpu_and_registers_the_ops():
    for name in ("allreduce_rmsnorm", "allreduce_rmsnorm_inplace", "allreduce", "rmsnorm_quant"):
        assert hasattr(torch.ops.arfuse, name)
    schema = str(torch.ops.arfuse.allreduce_rmsnorm_inplace.default._schema)
    assert "Tensor(a!) residual" in schema, schema  # the in-place variant declares its mutation
    assert "!" not in str(torch.ops.arfuse.allreduce_rmsnorm.default._schema)


@pytest.mark.parametrize("quant", ["none", "fp8", "fp8+mirror"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fake_outputs(handle, quant, dtype):
    with FakeTensorMode():
        x, r, w = tensors(7, 128, dtype)
        out, res, scales, mirror = ops.allreduce_rmsnorm(handle, x, r, w, 1e-6, quant, "rms")
        assert res.shape == (7, 128) and res.dtype == dtype
        if quant == "none":
            assert out.dtype == dtype and scales.shape == (0,)
        else:
            assert out.dtype == torch.float8_e4m3fn and scales.shape == (7,) and scales.dtype == torch.float32
        assert mirror.shape == ((7, 128) if quant == "fp8+mirror" else (0,))
        outs = ops.allreduce_rmsnorm_inplace(handle, x, r, w, 1e-6, quant, "gemma")
        assert [o.shape for o in outs] == [out.shape, scales.shape, mirror.shape]
        assert ops.allreduce(handle, x).shape == (7, 128)
        standalone = ops.rmsnorm_quant(x, r, w, 1e-6, quant, "rms")
        assert [o.shape for o in standalone] == [out.shape, res.shape, scales.shape, mirror.shape]


def test_every_op_takes_pdl(handle):
    for op in ("allreduce_rmsnorm", "allreduce_rmsnorm_inplace", "allreduce", "rmsnorm_quant", "group_quant"):
        schema = str(getattr(torch.ops.arfuse, op).default._schema)
        assert "bool pdl=False" in schema, schema
    with FakeTensorMode():
        x, r, w = tensors(3, 128)
        out, res, scales, _ = ops.allreduce_rmsnorm(handle, x, r, w, 1e-6, "fp8", "rms", 128, "f32",
                                                                 "row_major", True)
        assert out.shape == (3, 128) and scales.shape == (3,)
        assert ops.allreduce(handle, x, True).shape == (3, 128)
        q, s = aft.group_quant(x, "mxfp4", pdl=True)
        assert q.shape == (3, 64) and s.shape == (3, 4)


@pytest.mark.parametrize("layout", ["row_major", "column_major"])  # swizzled_128x4 is NVFP4's
@pytest.mark.parametrize("scale_format", aft.SCALE_FORMATS)
@pytest.mark.parametrize("group", [32, 64, 128])
def test_fake_outputs_of_group_fp8(handle, group, scale_format, layout):
    with FakeTensorMode():
        x, r, w = tensors(7, 256)
        out, res, scales, mirror = ops.allreduce_rmsnorm(handle, x, r, w, 1e-6, "fp8_group+mirror", "rms",
                                                                      group, scale_format, layout)
        assert out.shape == (7, 256) and out.dtype == torch.float8_e4m3fn
        assert scales.shape == ((7, 256 // group) if layout == "row_major" else (256 // group, 7))
        assert scales.dtype == (torch.uint8 if scale_format == "e8m0" else torch.float32)
        assert mirror.shape == (7, 256)


def test_fake_outputs_of_mxfp4(handle):
    with FakeTensorMode():
        x, r, w = tensors(5, 96)
        out, scales, mirror = ops.allreduce_rmsnorm_inplace(handle, x, r, w, 1e-6, "mxfp4", "gemma")
        assert out.shape == (5, 48) and out.dtype == torch.uint8  # two E2M1 codes per byte
        assert scales.shape == (5, 3) and scales.dtype == torch.uint8
        assert mirror.shape == (0,)
        standalone = aft.rmsnorm_quant(x, r, w, quant="mxfp4", mirror=True)
        assert [tuple(t.shape) for t in standalone] == [(5, 48), (5, 96), (5, 3), (5, 96)]


def test_fake_outputs_of_group_quant():
    with FakeTensorMode():
        y = torch.empty(6, 256, dtype=torch.float16, device="cuda")
        out, scales = aft.group_quant(y, "fp8_group", 64, "e8m0", "column_major")
        assert out.shape == (6, 256) and scales.shape == (4, 6) and scales.dtype == torch.uint8
        out, scales = aft.group_quant(y, "mxfp4")
        assert out.shape == (6, 128) and scales.shape == (6, 8)
        with pytest.raises(arfuse.Error, match="group_quant takes fp8_group, mxfp4, fp8_static, nvfp4 without the mirror"):
            aft.group_quant(y, "fp8")
        with pytest.raises(arfuse.Error, match="group size 128 does not divide hidden size 96"):
            aft.group_quant(torch.empty(2, 96, dtype=torch.float16, device="cuda"), "fp8_group")


def test_fake_outputs_of_static_fp8_and_nvfp4(handle):
    with FakeTensorMode():
        x, r, w = tensors(5, 2064)  # 129 NVFP4 scale columns: the swizzled layout pads them to 132
        scale = torch.empty(1, dtype=torch.float32, device="cuda")
        out, res, scales, mirror = ops.allreduce_rmsnorm(handle, x, r, w, 1e-6, "fp8_static+mirror",
                                                                      "rms", scale=scale, pad_to_multiple=128)
        assert out.shape == (5, 2176) and out.dtype == torch.float8_e4m3fn and scales.shape == (0,)
        assert mirror.shape == (5, 2064)
        out, scales, mirror = ops.allreduce_rmsnorm_inplace(handle, x, r, w, 1e-6, "nvfp4", "gemma",
                                                                         scale=scale)
        assert out.shape == (5, 1032) and out.dtype == torch.uint8
        assert scales.shape == (5, 129) and scales.dtype == torch.uint8 and mirror.shape == (0,)
        swizzled = aft.rmsnorm_quant(x, r, w, quant="nvfp4", mirror=True, scale_layout="swizzled_128x4", scale=scale)
        assert [tuple(t.shape) for t in swizzled] == [(5, 1032), (5, 2064), (128, 132), (5, 2064)]
        y = torch.empty(3, 4, 256, dtype=torch.bfloat16, device="cuda")
        q, s = aft.group_quant(y, "nvfp4", scale_layout="swizzled_128x4", scale=scale)
        assert q.shape == (3, 4, 128) and s.shape == (128, 16)
        q, s = aft.group_quant(y, "fp8_static", scale=scale)
        assert q.shape == (3, 4, 256) and s.shape == (0,)
        with pytest.raises(arfuse.Error, match="scale is None; quant nvfp4 reads its global scale"):
            aft.group_quant(y, "nvfp4")
        with pytest.raises(arfuse.Error, match="scale is given, but quant fp8 reads none"):
            aft.rmsnorm_quant(x, r, w, quant="fp8", scale=scale)
        with pytest.raises(arfuse.Error, match="one float32 element"):
            aft.rmsnorm_quant(x, r, w, quant="fp8_static", scale=torch.empty(2, dtype=torch.float32, device="cuda"))
        with pytest.raises(arfuse.Error, match="column_major is not a layout quant nvfp4 takes"):
            aft.rmsnorm_quant(x, r, w, quant="nvfp4", scale_layout="column_major", scale=scale)
        with pytest.raises(arfuse.Error, match="pads out, which quant nvfp4 does not take"):
            aft.rmsnorm_quant(x, r, w, quant="nvfp4", scale=scale, pad_to_multiple=128)


def bad_calls():
    """(what is wrong, a function of (handle, x, r, w) that makes the call, the words the message must hold)."""
    op = ops.allreduce_rmsnorm
    return [
        ("weight shape", lambda h, x, r, w: op(h, x, r, w[:32], 1e-6, "none", "rms"), "weight has shape (32,)"),
        ("residual dtype", lambda h, x, r, w: op(h, x, r.half(), w, 1e-6, "none", "rms"), "residual is torch.float16"),
        ("residual shape", lambda h, x, r, w: op(h, x, r[:2], w, 1e-6, "none", "rms"), "residual has shape (2, 64)"),
        ("transposed input", lambda h, x, r, w: op(h, x.t(), r.t(), w[:5], 1e-6, "none", "rms"),
         "its last dimension must be adjacent elements"),
        ("non-contiguous", lambda h, x, r, w: op(h, x, r, torch.empty(128, dtype=w.dtype, device="cuda")[::2], 1e-6,
                                                 "none", "rms"), "weight is not contiguous"),
        ("1-D input", lambda h, x, r, w: op(h, x[0], r[0], w, 1e-6, "none", "rms"), "2 dimensions or more"),
        ("unmergeable dims", lambda h, x, r, w: op(h, x.view(5, 1, 64).expand(5, 2, 64), r.view(5, 1, 64).expand(5, 2, 64),
                                                   w, 1e-6, "none", "rms"), "dimension 0 cannot merge"),
        ("overlapping rows", lambda h, x, r, w: op(h, x[:1].expand(5, 64), r, w, 1e-6, "none", "rms"), "rows overlap"),
        ("pad mxfp4", lambda h, x, r, w: op(h, x, r, w, 1e-6, "mxfp4", "rms", 128, "f32", "row_major", False, 96),
         "pad_to_multiple=96 pads out, which quant mxfp4 does not take"),
        ("pad width", lambda h, x, r, w: op(h, x, r, w, 1e-6, "none", "rms", 128, "f32", "row_major", False, 28),
         "rows of 84 elements"),
        ("pad type", lambda h, x, r, w: op(h, x, r, w, 1e-6, "none", "rms", 128, "f32", "row_major", False, -2),
         "pad_to_multiple is -2"),
        ("fp32 input", lambda h, x, r, w: op(h, x.float(), r, w, 1e-6, "none", "rms"), "torch.bfloat16 or torch.float16"),
        ("quant", lambda h, x, r, w: op(h, x, r, w, 1e-6, "int8", "rms"), "quant mode 'int8'"),
        ("norm", lambda h, x, r, w: op(h, x, r, w, 1e-6, "none", "layer"), "norm mode 'layer'"),
        ("eps", lambda h, x, r, w: op(h, x, r, w, -1.0, "none", "rms"), "eps is -1.0"),
        ("closed handle", lambda h, x, r, w: op(h + 1000, x, r, w, 1e-6, "none", "rms"), "is closed or was never"),
        ("group size", lambda h, x, r, w: op(h, x, r, w, 1e-6, "fp8_group", "rms", 48), "group size 48 is not supported"),
        ("group_size range", lambda h, x, r, w: op(h, x, r, w, 1e-6, "fp8_group", "rms", 2**40),
         "group_size is 1099511627776"),
        ("group divides", lambda h, x, r, w: op(h, x[:, :48].contiguous(), r[:, :48].contiguous(), w[:48], 1e-6, "fp8_group", "rms", 32),
         "group size 32 does not divide hidden size 48"),
        ("scale format", lambda h, x, r, w: op(h, x, r, w, 1e-6, "fp8_group", "rms", 64, "f16"), "scale format 'f16'"),
        ("scale layout", lambda h, x, r, w: op(h, x, r, w, 1e-6, "fp8_group", "rms", 64, "f32", "rows"),
         "scale layout 'rows'"),
        ("mxfp4 layout", lambda h, x, r, w: op(h, x, r, w, 1e-6, "mxfp4", "rms", 128, "f32", "column_major"),
         "column_major is not a layout quant mxfp4 takes: allowed is row_major"),
        ("mxfp4 hidden", lambda h, x, r, w: op(h, x[:, :48].contiguous(), r[:, :48].contiguous(), w[:48], 1e-6, "mxfp4", "rms"),
         "divisible by 32"),
        ("plain all-reduce", lambda h, x, r, w: ops.allreduce(h, x[0]), "2 dimensions or more"),
    ]


@pytest.mark.parametrize("case", bad_calls(), ids=lambda c: c[0])
def test_bad_arguments_name_the_argument(handle, case):
    _, call, words = case
    with FakeTensorMode():
        x, r, w = tensors()
        with pytest.raises(arfuse.Error, match=None) as raised:
            call(handle, x, r, w)
    assert words in str(raised.value), str(raised.value)


def test_fake_outputs_of_views_keep_the_leading_shape(handle):
    """N-d activations, slices of wider buffers and padded outputs: the shapes the ops return."""
    with FakeTensorMode():
        wide = torch.empty(2, 3, 160, dtype=torch.bfloat16, device="cuda")
        x, r = wide[..., :128], wide[..., 16:144]  # rows 160 elements apart
        w = torch.empty(128, dtype=torch.bfloat16, device="cuda")
        out, res, scales, mirror = ops.allreduce_rmsnorm(handle, x, r, w, 1e-6, "fp8+mirror", "rms")
        assert out.shape == (2, 3, 128) and res.shape == (2, 3, 128) and res.is_contiguous()
        assert scales.shape == (2, 3) and mirror.shape == (2, 3, 128)
        out, scales, _ = ops.allreduce_rmsnorm_inplace(handle, x, r, w, 1e-6, "fp8", "rms", 128, "f32",
                                                                    "row_major", False, 96)
        assert out.shape == (2, 3, 192) and scales.shape == (2, 3)  # 128 rounded up to a multiple of 96
        out, _, scales, _ = aft.rmsnorm_quant(x, r, w, quant="fp8_group", group_size=64, scale_layout="column_major")
        assert out.shape == (2, 3, 128) and scales.shape == (2, 6)  # column-major: [groups, rows]
        assert ops.allreduce(handle, x).shape == (2, 3, 128)
        q, s = aft.group_quant(x, "mxfp4")
        assert q.shape == (2, 3, 64) and s.shape == (2, 3, 4)
        single = wide[:, :1, :128]  # one row per batch entry: rows 480 apart
        assert ops.allreduce(handle, single).shape == (2, 1, 128)
        assert ops.allreduce(handle, wide[:1, :1, :128]).shape == (1, 1, 128)  # one row: no stride


def test_real_call_on_cpu_tensors_is_refused_before_any_launch():
    x = torch.zeros(2, 64, dtype=torch.bfloat16)
    with pytest.raises(arfuse.Error, match="input is on cpu"):
        aft.rmsnorm_quant(x, x.clone(), torch.zeros(64, dtype=torch.bfloat16))


def test_traced_graph_calls_the_ops(handle):
    def layer(x, r, w):
        y = x * 2
        out, scales, _ = ops.allreduce_rmsnorm_inplace(handle, y, r, w, 1e-5, "fp8", "rms")
        return out, scales, r

    with FakeTensorMode() as mode:
        args = tensors(3, 256)
    graph = make_fx(layer, tracing_mode="fake")(*args)
    called = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert "arfuse.allreduce_rmsnorm_inplace.default" in called, called
    del mode


def test_communicator_needs_torch_distributed():
    with pytest.raises(arfuse.Error, match="init_process_group"):
        aft.Communicator(max_tokens=16, max_hidden=64)


def test_communicator_without_a_gpu_is_unavailable(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        with pytest.raises(arfuse.Unavailable, match="no GPU"):
            aft.Communicator(max_tokens=16, max_hidden=64)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("kwargs, words", [
    (dict(devices=[], max_tokens=1, max_hidden=64), "list of GPU ordinals"),
    (dict(devices=[0, 0], max_tokens=0, max_hidden=64), "max_tokens is 0"),
    (dict(devices=[0, 0], max_tokens=8, max_hidden=True), "max_hidden is True"),
    (dict(devices=[0, 0], max_tokens=8, max_hidden=64, dtype=torch.float32), "torch.bfloat16 or torch.float16"),
    (dict(devices=[0, 0], max_tokens=8, max_hidden=64, timeout="5"), "timeout is '5'"),
    (dict(devices=[0, 0], max_tokens=8, max_hidden=64, graph_calls=-1), "graph_calls is -1"),
    (dict(devices=[0, 0], max_tokens=8, max_hidden=64, graph_calls=1.5), "graph_calls is 1.5"),
])
def test_local_group_arguments(kwargs, words):
    with pytest.raises(arfuse.Error) as raised:
        aft.local_communicators(**kwargs)
    assert words in str(raised.value)


def test_local_group_bad_transport_and_timeout_are_refused_by_the_runtime():
    with pytest.raises(arfuse.Error, match="transport 'fast'"):
        aft.local_communicators([0, 0], max_tokens=8, max_hidden=64, transport="fast")
    with pytest.raises(arfuse.Error, match="timeout must be between"):
        aft.local_communicators([0, 0], max_tokens=8, max_hidden=64, timeout=-1)


def test_local_group_without_a_gpu_is_unavailable():
    with pytest.raises(arfuse.Unavailable):
        aft.local_communicators([0, 0], max_tokens=8, max_hidden=64)


def test_bench_help_and_argument_errors():
    import subprocess
    import sys

    def bench(*args):
        return subprocess.run([sys.executable, "-m", "arfuse.bench", *args], capture_output=True, text=True,
                              timeout=120)

    shown = bench("--help")
    assert shown.returncode == 0, shown.stderr
    assert "binding staged" in shown.stdout and "--shapes" in shown.stdout
    for args, words in ((["--shapes", "12"], "--shapes must look like"), (["--runs", "0"], "--runs must be positive")):
        refused = bench(*args)
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr
    unavailable = bench("--shapes", "12x6144")  # no GPU here: a message, not a traceback
    assert unavailable.returncode == 1 and "Traceback" not in unavailable.stderr, unavailable.stderr


def meta_tensors(tokens=6, hidden=256, dtype=torch.bfloat16):
    x = torch.randn(tokens, hidden, dtype=dtype, device="meta")
    return x, torch.randn(tokens, hidden, dtype=dtype, device="meta"), torch.randn(hidden, dtype=dtype, device="meta")


@pytest.mark.parametrize("quant", ["fp8", "fp8_group+mirror", "nvfp4", "none"])
def test_opcheck_of_every_op_on_its_meta_kernels(handle, quant):
    """Schema (mutations, aliasing), fake tensors, and AOT dispatch with static and dynamic shapes;
    the CUDA kernels are opchecked by the GPU tests."""
    x, r, w = meta_tensors()
    scale = torch.ones(1, dtype=torch.float32, device="meta") if quant == "nvfp4" else None
    name, mirror = named(quant)
    mode = aft.mode_code(name, "rms", 64, mirror=mirror)
    ops_ = torch.ops.arfuse
    torch.library.opcheck(ops_.allreduce_rmsnorm.default, (handle, x, r, w, 1e-6, mode, False, 0, scale))
    torch.library.opcheck(ops_.allreduce_rmsnorm_inplace.default, (handle, x, r, w, 1e-6, mode, False, 0, scale))
    torch.library.opcheck(ops_.rmsnorm_quant.default, (x, r, w, 1e-6, mode, False, 0, scale))
    torch.library.opcheck(ops_.allreduce.default, (handle, x))
    if quant in ("nvfp4",):
        torch.library.opcheck(ops_.group_quant.default, (x, mode, False, scale))


def test_compiled_fullgraph_calls_the_op_with_symbolic_tokens(handle):
    calls = []

    def layer(x, r, w):
        out, scales, _ = ops.allreduce_rmsnorm_inplace(handle, x * 2, r, w, 1e-5, "fp8", "rms")
        return out, scales

    def backend(graph, example_inputs):
        calls.extend(str(n.target) for n in graph.graph.nodes if n.op == "call_function")
        return graph

    compiled = torch.compile(layer, fullgraph=True, dynamic=True, backend=backend)
    for tokens in (3, 9):
        x, r, w = meta_tensors(tokens, 128)
        out, scales = compiled(x, r, w)
        assert out.shape == (tokens, 128) and out.dtype == torch.float8_e4m3fn and scales.shape == (tokens,)
    assert any("allreduce_rmsnorm_inplace" in c for c in calls), calls
    # AOT autograd functionalizes the in-place op (auto_functionalized): its arguments must not
    # collide with that wrapper's own.
    functionalized = torch.compile(layer, fullgraph=True, dynamic=True, backend="aot_eager")
    x, r, w = meta_tensors(5, 128)
    out, scales = functionalized(x, r, w)
    assert out.shape == (5, 128) and scales.shape == (5,)


def test_the_ops_themselves_raise_value_error_with_the_message(handle):
    x, r, w = meta_tensors()
    with pytest.raises(ValueError, match="weight has shape"):
        torch.ops.arfuse.allreduce_rmsnorm(handle, x, r, w[:8], 1e-6, aft.mode_code("fp8"))
    with pytest.raises(ValueError, match="epilogue_mode is 16777216, which no mode makes"):
        torch.ops.arfuse.rmsnorm_quant(x, r, w, 1e-6, 1 << 24)
    with pytest.raises(ValueError, match="is closed or was never created"):
        torch.ops.arfuse.allreduce(handle + 1000, x)


def test_mode_codes_name_what_is_wrong():
    assert aft.mode_code("fp8") == aft.mode_code("fp8", "rms", 128, "f32", "row_major")
    assert len({aft.mode_code(q) for q in aft.QUANT_MODES}) == len(aft.QUANT_MODES)
    with pytest.raises(arfuse.Error, match="quant mode 'int4'"):
        aft.mode_code("int4")
    with pytest.raises(arfuse.Error, match="group_size is True"):
        aft.mode_code("fp8_group", group_size=True)
    aft.mode_code("fp8", group_size=1)  # cached; True and 1.0 hash alike and must still be refused
    with pytest.raises(arfuse.Error, match="group_size is True"):
        aft.mode_code("fp8", group_size=True)
    with pytest.raises(arfuse.Error, match="group_size is 1.0"):
        aft.mode_code("fp8", group_size=1.0)
    with pytest.raises(arfuse.Error, match="norm is 3"):
        aft.mode_code("fp8", 3)


def test_the_compiled_library_is_reused_and_never_loaded_from_a_folder_others_can_write(tmp_path, capsys):
    from arfuse import torch_ops

    first = torch_ops.build(tmp_path)
    assert first.startswith(str(tmp_path / "torch-ops")) and os.stat(first).st_mode & 0o077 == 0
    before = os.stat(first).st_mtime_ns
    assert torch_ops.build(tmp_path) == first and os.stat(first).st_mtime_ns == before  # no second compile
    os.chmod(os.path.dirname(first), 0o777)
    elsewhere = torch_ops.build(tmp_path, quiet=True)
    assert elsewhere != first and not elsewhere.startswith(str(tmp_path)), elsewhere
    assert f"{os.path.dirname(first)} is writable by group or others (mode 777)" in capsys.readouterr().err
    shutil.rmtree(os.path.dirname(elsewhere))


def test_a_missing_compiler_is_unavailable_with_what_to_do(tmp_path, monkeypatch):
    from arfuse import torch_ops

    monkeypatch.setenv("CXX", "no-such-compiler-here")
    with pytest.raises(arfuse.Unavailable, match="set CXX"):
        torch_ops.build(tmp_path)


def test_a_hidden_size_past_int32_is_refused_not_narrowed(handle):
    for hidden in (2**32 + 4096, 2**31, 2**40):
        x = torch.empty(1, hidden, dtype=torch.bfloat16, device="meta")
        w = torch.empty(hidden, dtype=torch.bfloat16, device="meta")
        with pytest.raises(ValueError, match=f"hidden size \\(its last dimension\\) is {hidden}"):
            torch.ops.arfuse.rmsnorm_quant(x, x, w, 1e-6, aft.mode_code("fp8"))
        with pytest.raises(ValueError, match=f"hidden size \\(its last dimension\\) is {hidden}"):
            torch.ops.arfuse.allreduce_rmsnorm(handle, x, x, w, 1e-6, aft.mode_code("fp8"))


# A stand-in for the C++ compiler: `--version` as the real one's (so the ops' folder is the real
# one's), and for a compile, by $FAKE_CXX_MODE: "ok" writes a file at -o; "hang" writes part of
# one, starts a child, records both pids and sleeps, as a compiler that hangs would.
_FAKE_CXX = r"""#!/bin/sh
if [ "$1" = --version ]; then exec c++ --version; fi
out=
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
if [ "$FAKE_CXX_MODE" = ok ]; then echo library > "$out"; exit 0; fi
echo partial > "$out"
sleep 600 &
echo $$ $! > "$FAKE_CXX_PIDS"
sleep 600
"""


def _fake_cxx(tmp_path, monkeypatch, mode):
    path = tmp_path / "fake-c++"
    path.write_text(_FAKE_CXX)
    path.chmod(0o755)
    monkeypatch.setenv("CXX", str(path))
    monkeypatch.setenv("FAKE_CXX_MODE", mode)
    monkeypatch.setenv("FAKE_CXX_PIDS", str(tmp_path / "pids"))
    return path


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _key_folder(cache):
    from arfuse import torch_ops

    return cache / "torch-ops" / torch_ops._key(torch, torch_ops._compiler())


def test_a_hanging_compiler_is_stopped_at_the_timeout_with_everything_it_started(tmp_path, monkeypatch):
    import time

    from arfuse import torch_ops

    _fake_cxx(tmp_path, monkeypatch, "hang")
    start = time.monotonic()
    with pytest.raises(arfuse.CompileError, match="did not finish in 2 s and was stopped"):
        torch_ops.build(tmp_path / "cache", quiet=True, timeout=2)
    assert time.monotonic() - start < 30
    for pid in (tmp_path / "pids").read_text().split():
        for _ in range(100):
            if not _running(pid):
                break
            time.sleep(0.05)
        assert not _running(pid), f"process {pid} the compiler started still runs"
    folder = _key_folder(tmp_path / "cache")
    assert sorted(os.listdir(folder)) == [".lock"]  # no partial library left, and the lock is free
    torch_ops._lock(str(folder), 1)


def test_a_process_waiting_for_another_compile_gives_up_at_the_timeout(tmp_path, monkeypatch):
    import subprocess
    import sys

    from arfuse import torch_ops

    _fake_cxx(tmp_path, monkeypatch, "ok")
    folder = _key_folder(tmp_path / "cache")
    folder.mkdir(parents=True, mode=0o700)
    (tmp_path / "cache").chmod(0o700)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)",
                               str(folder / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(arfuse.CompileError, match="another process has been compiling"):
            torch_ops.build(tmp_path / "cache", quiet=True, timeout=1)
    finally:
        holder.kill()
        holder.wait()


def test_leftovers_of_a_killed_first_import_are_removed_by_the_next(tmp_path, monkeypatch):
    import signal
    import subprocess
    import sys
    import time

    from arfuse import torch_ops

    _fake_cxx(tmp_path, monkeypatch, "hang")
    cache = tmp_path / "cache"
    importer = subprocess.Popen([sys.executable, "-c", "import sys; from arfuse import torch_ops; "
                                 "torch_ops.build(sys.argv[1], quiet=True)", str(cache)])
    folder = _key_folder(cache)
    partial = folder / f".arfuse_torch_ops.so.{importer.pid}"
    for _ in range(600):
        if (tmp_path / "pids").exists() and partial.exists():
            break
        time.sleep(0.1)
    importer.send_signal(signal.SIGKILL)  # the import dies mid-compile
    importer.wait()
    for pid in (tmp_path / "pids").read_text().split():
        os.kill(int(pid), signal.SIGKILL)  # the compiler it started outlives it; not the point here
    assert partial.exists()

    monkeypatch.setenv("FAKE_CXX_MODE", "ok")
    library = torch_ops.build(cache, quiet=True)
    assert library == str(folder / "arfuse_torch_ops.so")
    assert sorted(os.listdir(folder)) == [".lock", "arfuse_torch_ops.so"]


def test_a_folder_at_the_librarys_name_is_replaced_with_a_word(tmp_path, monkeypatch, capsys):
    from arfuse import torch_ops

    _fake_cxx(tmp_path, monkeypatch, "ok")
    folder = _key_folder(tmp_path / "cache")
    (folder / "arfuse_torch_ops.so" / "inside").mkdir(parents=True)
    library = torch_ops.build(tmp_path / "cache", quiet=True)
    assert os.path.isfile(library) and open(library).read() == "library\n"
    assert "removing a folder at" in capsys.readouterr().err


def test_a_library_planted_below_a_folder_others_can_write_is_never_loaded(tmp_path):
    """The whole first import, in a process of its own: the ops are compiled into a private
    temporary folder, loaded from there, and that folder is gone once the process exits."""
    import subprocess
    import sys

    from arfuse import torch_ops

    public = tmp_path / "public"
    public.mkdir()
    public.chmod(0o777)  # as a shared folder without the sticky bit: anyone may rename what is in it
    cache = public / "cache"
    folder = _key_folder(cache)
    folder.mkdir(parents=True, mode=0o700)
    marker = tmp_path / "planted-ran"
    source = tmp_path / "planted.c"
    source.write_text('#include <stdio.h>\n__attribute__((constructor)) static void planted(void) '
                      f'{{ FILE* f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(folder / "arfuse_torch_ops.so"), str(source)], check=True)
    os.chmod(folder / "arfuse_torch_ops.so", 0o700)

    done = subprocess.run([sys.executable, "-c", "import arfuse.torch, torch; "
                           "assert hasattr(torch.ops.arfuse, 'rmsnorm_quant'); "
                           "from arfuse import torch_ops; print(torch_ops._loaded)"],
                          env={**os.environ, "ARFUSE_CACHE_DIR": str(cache)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), "the planted library's constructor ran"
    assert f"{public} is writable by group or others and not sticky" in done.stderr
    loaded = done.stdout.strip()
    assert not loaded.startswith(str(public)) and "arfuse-torch-ops-" in loaded
    assert not os.path.exists(os.path.dirname(loaded)), "the private temporary folder outlived its process"
