"""arfuse's kernels as PyTorch operators, and a communicator made from a torch.distributed group.

One process per GPU, as tensor-parallel engines run::

    import torch, torch.distributed as dist
    import arfuse.torch as aft

    dist.init_process_group("nccl")              # or "gloo"; the group only carries set-up bytes
    comm = aft.Communicator(max_tokens=8192, max_hidden=8192, dtype=torch.bfloat16)
    out, scales = comm.allreduce_rmsnorm_(x, residual, weight, quant="fp8")  # residual updated
    comm.close()                                 # collective, like the constructor

The ops (``torch.ops.arfuse.*``) are registered in C++ (arfuse.torch_ops compiles them against
this torch on first import), run on torch's current stream, have Meta kernels for
``torch.compile(fullgraph=True)``, and can be captured into CUDA graphs once they ran eagerly::

    allreduce_rmsnorm(comm, input, residual, weight, eps, epilogue_mode, pdl=False, pad_to_multiple=0, scale=None)
        -> (out, residual_out, scales, mirror)
    allreduce_rmsnorm_inplace(comm, input, residual!, weight, eps, epilogue_mode, ...)
        -> (out, scales, mirror)                 # residual_out written over residual
    allreduce(comm, input, pdl=False) -> out
    rmsnorm_quant(input, residual, weight, eps, epilogue_mode, pdl=False, pad_to_multiple=0, scale=None)
        -> (out, residual_out, scales, mirror)   # the epilogue alone, for a sum made elsewhere
    group_quant(input, epilogue_mode, pdl=False, scale=None)
        -> (out, scales)                         # fp8_group, mxfp4, fp8_static, nvfp4 of y

``epilogue_mode`` is ``mode_code(quant, norm, group_size, scale_format, scale_layout, mirror)``, one int. The
Communicator methods and rmsnorm_quant/group_quant here take the names and raise arfuse's
exceptions; the ops themselves raise ValueError for a refused argument and RuntimeError for the
rest, with the same messages.

``comm`` is a communicator's ``handle``. quant is one of QUANT_MODES; norm "rms" or "gemma".
``out`` is T (quant none), FP8 (``float8_e4m3fn``; ``float8_e4m3fnuz`` on gfx942) for fp8,
fp8_group and fp8_static, or uint8 [tokens, hidden / 2] (two E2M1 codes per byte, element 2k in
the low nibble) for mxfp4 and nvfp4. ``scales``: fp32 [tokens] for fp8; for fp8_group one per
`group_size` elements, fp32 (scale_format "f32" or "ue8m0_f32") or uint8 E8M0 ("e8m0"), [tokens,
hidden / group_size] or, with scale_layout "column_major", [hidden / group_size, tokens]; for
mxfp4 uint8 E8M0 [tokens, hidden / 32]; for nvfp4 uint8 E4M3 [tokens, hidden / 16] (scale_layout
"row_major") or, with "swizzled_128x4", [tokens rounded up to 128, hidden / 16 rounded up to 4]
in cuBLASLt's 128x4 tile order, the padding zero; none for fp8_static. ``scale``: a one-element
float32 tensor on the input's device, fp8_static's scale or nvfp4's global scale, read when the
kernel runs (a CUDA graph replays with whatever it holds then). ``mirror``:
T [tokens, hidden] (the output before quantisation) with ``mirror=True``. Outputs a call does
not produce are empty tensors of shape [0]. ``pdl`` (default False): programmatic dependent
launch (NVIDIA sm_90+, elsewhere ignored): the kernel is launched before the kernel ahead of it
on the stream ends and waits for it itself, hiding the launch (run on the H200 by the GPU tests).

Every rank must make the same calls in the same order. A rank that does not arrive makes the
others' kernels give up after ``timeout`` seconds: synchronise, then ``check()`` raises
``arfuse.PeerTimeout`` naming it (``.rank``), and ``reset()`` (collective) makes the
communicator usable again.
"""

import torch
import torch.distributed as dist

from . import Error, Unavailable, _arfuse, modes
from . import torch_ops as _torch_ops

__all__ = ["Communicator", "local_communicators", "rmsnorm_quant", "group_quant", "mode_code", "QUANT_MODES", "NORM_MODES",
           "SCALE_FORMATS",
           "SCALE_LAYOUTS"]

_MODES = modes()
QUANT_MODES = tuple(_MODES["quant"])  # none, fp8, fp8_group, mxfp4, fp8_static, nvfp4
SCALE_FORMATS = tuple(_MODES["scale_format"])  # f32, ue8m0_f32, e8m0
SCALE_LAYOUTS = tuple(_MODES["scale_layout"])  # row_major, column_major, swizzled_128x4
NORM_MODES = tuple(_MODES["norm"])  # rms, gemma
_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "f16"}
_FP8_DTYPES = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}

_ops = torch.ops.arfuse
_torch_ops.load()  # compiles the C++ ops on the first import for this torch (arfuse.torch_ops)
_ALLREDUCE_RMSNORM = _ops.allreduce_rmsnorm.default
_ALLREDUCE_RMSNORM_INPLACE = _ops.allreduce_rmsnorm_inplace.default
_ALLREDUCE = _ops.allreduce.default
_RMSNORM_QUANT = _ops.rmsnorm_quant.default
_GROUP_QUANT = _ops.group_quant.default


def _dtype_name(dtype, what="dtype"):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        raise Error(f"{what} is {dtype}; arfuse takes torch.bfloat16 or torch.float16")
    return name


_mode_codes = {}


def mode_code(quant="none", norm="rms", group_size=128, scale_format="f32", scale_layout="row_major", mirror=False):
    """The int the ops take as ``epilogue_mode``: quant, norm, for fp8_group the group size and
    scale format, for fp8_group and nvfp4 the scale layout, and whether the op also writes y in T
    (``mirror``, any quant but none). Names and the group size are checked here (Error naming the
    value); the hidden-size rules when the op runs."""
    # Before the cache: True and 128.0 hash like 1 and 128.
    if type(group_size) is not int or not -2**31 <= group_size < 2**31:
        raise Error(f"group_size is {group_size!r}; it must be an int (32, 64 or 128 for fp8_group)")
    if type(mirror) is not bool:
        raise Error(f"mirror is {mirror!r}; it must be True or False")
    key = (quant, norm, group_size, scale_format, scale_layout, mirror)
    code = _mode_codes.get(key)
    if code is None:
        for name, value in (("quant", quant), ("norm", norm), ("scale_format", scale_format),
                            ("scale_layout", scale_layout)):
            if not isinstance(value, str):
                raise Error(f"{name} is {value!r}; it must be a str")
        code = _mode_codes[key] = _arfuse.mode_code(quant, norm, group_size, scale_format, scale_layout, mirror)
    return code


def _raise_arfuse_error(error):
    """Raises what an op's failure is in arfuse's terms: the runtime's own exception (its class,
    .rank, .peer), arfuse.Error for a refused argument (the op raised ValueError), else `error`."""
    _arfuse.rethrow_op_failure(str(error))
    if isinstance(error, ValueError):
        raise Error(str(error)) from None
    raise error


def _call(op, *args):
    """op(*args), its failure raised in arfuse's terms."""
    try:
        return op(*args)
    except (ValueError, RuntimeError) as e:
        _raise_arfuse_error(e)


def _fused(handle, input, residual, weight, eps, quant, norm, group_size, scale_format, scale_layout, mirror, pdl,
           pad_to_multiple, scale, in_place):
    mode = mode_code(quant, norm, group_size, scale_format, scale_layout, mirror)
    op = _ALLREDUCE_RMSNORM_INPLACE if in_place else _ALLREDUCE_RMSNORM
    return _call(op, handle, input, residual, weight, eps, mode, pdl, pad_to_multiple, scale)


def _allreduce(handle, input, pdl):
    return _call(_ALLREDUCE, handle, input, pdl)


def group_quant(input, quant="fp8_group", group_size=128, scale_format="f32", scale_layout="row_major", pdl=False,
                scale=None):
    """Per-token-group FP8, MXFP4, static FP8 or NVFP4 of a tensor that already is y:
    ``(out, scales)``, shaped as the epilogue ops shape them (scale: as allreduce_rmsnorm's). For
    the mirror output of an epilogue op it gives that op's bytes and scales."""
    return _call(_GROUP_QUANT, input, mode_code(quant, "rms", group_size, scale_format, scale_layout), pdl, scale)


def rmsnorm_quant(input, residual, weight, eps=1e-6, quant="none", norm="rms", group_size=128, scale_format="f32",
                  scale_layout="row_major", mirror=False, pdl=False, pad_to_multiple=0, scale=None):
    """The epilogue alone (residual add + RMSNorm/Gemma + optional FP8 per token, per group or
    static, MXFP4 or NVFP4) on a tensor that was all-reduced elsewhere:
    ``(out, residual_out, scales, mirror)``."""
    mode = mode_code(quant, norm, group_size, scale_format, scale_layout, mirror)
    return _call(_RMSNORM_QUANT, input, residual, weight, eps, mode, pdl, pad_to_multiple, scale)


class _DeviceMemory:
    """Device memory arfuse owns, seen by torch.as_tensor as 16-bit elements (the CUDA array
    interface has no bfloat16; the caller views the tensor as its dtype)."""

    def __init__(self, address, shape):
        self.__cuda_array_interface__ = {"data": (address, False), "shape": shape, "typestr": "<i2",
                                         "version": 3, "strides": None, "stream": None}


def _cuda_device(device):
    if not torch.cuda.is_available():
        raise Unavailable("torch sees no GPU (torch.cuda.is_available() is False); arfuse's calls need one")
    if device is None:
        return torch.device("cuda", torch.cuda.current_device())
    device = torch.device(device)
    if device.type != "cuda":
        raise Error(f"device is {device}; it must be a GPU (device type cuda)")
    return device if device.index is not None else torch.device("cuda", torch.cuda.current_device())


def _check_positive(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise Error(f"{name} is {value!r}; it must be a positive int")


def _options(max_tokens, max_hidden, dtype, timeout, transport, check_calls, graph_calls, cache_dir):
    _check_positive("max_tokens", max_tokens)
    _check_positive("max_hidden", max_hidden)
    if not isinstance(graph_calls, int) or isinstance(graph_calls, bool) or graph_calls < 0:
        raise Error(f"graph_calls is {graph_calls!r}; it must be an int >= 0 (0: captured calls copy their input)")
    dtype_name = None if dtype is None else _dtype_name(dtype)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
        raise Error(f"timeout is {timeout!r}; it must be a number of seconds")
    return dict(max_tokens=max_tokens, max_hidden=max_hidden, dtype=dtype_name, timeout_s=float(timeout),
                transport=transport, check_calls=bool(check_calls), graph_calls=graph_calls,
                cache_dir="" if cache_dir is None else str(cache_dir))


class Communicator:
    """One rank of a tensor-parallel group whose ranks are the processes of a torch.distributed
    group (one per GPU; ranks that share a GPU work too, time-sliced). Creating it is collective:
    every rank of `group` calls it with the same arguments; they exchange GPU buffer handles
    through the group (gloo or NCCL) and check that they agree.

    max_tokens, max_hidden: the largest call (they size the staging buffers).
    dtype: torch.bfloat16 or torch.float16 to fix the dtype (ranks must agree), None for both.
    timeout: seconds a kernel waits for a peer before giving up (check() then raises).
    transport: "auto" (arfuse's kernels where every rank reaches every other, NCCL otherwise),
    "custom" or "nccl". check_calls: compare every rank's call before any peer row is read.
    graph_calls: how many calls captured into CUDA graphs can read their inputs where they lie once
    register_graph_inputs() has run (64 bytes of GPU memory each); later ones, and all with 0,
    copy their input into the staging buffer as eager calls do.
    """

    def __init__(self, group=None, *, max_tokens, max_hidden, dtype=None, timeout=5.0, device=None,
                 transport="auto", check_calls=True, graph_calls=4096, cache_dir=None):
        if not dist.is_available() or not dist.is_initialized():
            raise Error("torch.distributed is not initialised: call torch.distributed.init_process_group first")
        group = group if group is not None else dist.group.WORLD
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        if rank < 0:
            raise Error("this process is not a member of the process group passed as `group`")
        device = _cuda_device(device)
        options = _options(max_tokens, max_hidden, dtype, timeout, transport, check_calls, graph_calls, cache_dir)

        def allgather(mine):
            everyone = [None] * world
            dist.all_gather_object(everyone, mine, group=group)
            return everyone

        with torch.cuda.device(device):
            impl = _arfuse.process_group(rank=rank, world=world, allgather=allgather, device=device.index, **options)
        self._init(impl, 0, device)
        self.group_name = group.group_name  # what traced collectives name the group by (arfuse.torch_fusion)

    @classmethod
    def _local(cls, impl, local, device):
        self = cls.__new__(cls)
        self._init(impl, local, device)
        return self

    def _init(self, impl, local, device):
        self.group_name = None  # a group this process drives alone: no torch.distributed group
        self._impl = impl
        self._local_rank = local
        self.device = device
        self.rank = impl.rank_index(local)
        self.world = impl.world
        self.fp8_dtype = _FP8_DTYPES[impl.fp8_format(local)]
        self.handle = impl.register_handle(local)

    # -- calls ------------------------------------------------------------------------------
    def allreduce_rmsnorm(self, input, residual, weight, eps=1e-6, quant="none", norm="rms", group_size=128,
                          scale_format="f32", scale_layout="row_major", mirror=False, pdl=False, pad_to_multiple=0,
                          scale=None):
        """Sum over ranks + residual add + RMSNorm/Gemma + optional FP8 (per token, per group or
        static), MXFP4 or NVFP4, as new tensors: ``(out, residual_out, scales, mirror)``. input and
        residual are [..., hidden], views welcome (a row stride wider than hidden, leading
        dimensions that merge into one row index); the outputs keep their leading dimensions.
        pad_to_multiple: out's rows rounded up to a multiple of it, the padding zero (quant none,
        fp8, fp8_static). mirror: also write y in T (the output before quantisation). scale: a
        one-element float32 tensor, fp8_static's scale (q = fp8(y * (1 / scale))) or nvfp4's global
        scale, read when the kernel runs."""
        return _fused(self.handle, input, residual, weight, eps, quant, norm, group_size, scale_format, scale_layout,
                      mirror, pdl, pad_to_multiple, scale, in_place=False)

    def allreduce_rmsnorm_(self, input, residual, weight, eps=1e-6, quant="none", norm="rms", group_size=128,
                           scale_format="f32", scale_layout="row_major", mirror=False, pdl=False, pad_to_multiple=0,
                           scale=None):
        """As allreduce_rmsnorm, with residual_out written over `residual` (as engines keep it, a
        view too): ``(out, scales, mirror)``."""
        return _fused(self.handle, input, residual, weight, eps, quant, norm, group_size, scale_format, scale_layout,
                      mirror, pdl, pad_to_multiple, scale, in_place=True)

    def allreduce(self, input, pdl=False):
        """The sum over ranks of `input` [..., hidden] (fp32 in rank order, rounded once), a new
        contiguous tensor of input's shape."""
        return _allreduce(self.handle, input, pdl)

    def input_buffer(self, tokens, hidden, dtype):
        """A [tokens, hidden] tensor over this rank's staging buffer. Write the layer's partial
        sum into it (``torch.matmul(a, b, out=buf)``) and pass it as ``input``: the call then reads
        it where the peers read it, instead of copying it there first. Its contents belong to the
        next call that takes it; it is valid until close() and must not be used after."""
        _check_positive("tokens", tokens)
        _check_positive("hidden", hidden)
        group = self._group()
        if tokens > group.max_tokens or hidden > group.max_hidden:
            raise Error(f"input_buffer({tokens}, {hidden}) is larger than the communicator's max_tokens "
                        f"{group.max_tokens} x max_hidden {group.max_hidden}")
        _dtype_name(dtype)
        raw = _DeviceMemory(group.input_buffer(self._local_rank), (tokens, hidden))
        return torch.as_tensor(raw, device=self.device).view(dtype)

    def prepare(self, hidden, dtype, quant="none", norm="rms", group_size=128, scale_format="f32", mirror=False):
        """Loads every kernel a call of this hidden size and mode can take (compiling on a cache
        miss). Call it on every rank before the first call of a shape, and before graph capture."""
        _arfuse.check_mode(quant, norm, group_size, scale_format, "row_major", mirror, hidden)
        self._group().prepare(self._local_rank, hidden, _dtype_name(dtype), quant, norm, group_size, scale_format,
                              mirror)

    def register_graph_inputs(self):
        """After capturing calls into CUDA graphs: tells the ranks where each captured call's input
        lies, so that replays read it there instead of copying it into the staging buffer first
        (the copy an eager call makes). Collective: every rank calls it, after capturing the same
        calls in the same order (arfuse.Error otherwise, on every rank). Not while capturing, and
        with no graph replaying. An input is read in place when its rows are contiguous and every
        rank can reach its memory (CUDA IPC between processes: memory of torch's default
        allocator, not of expandable segments); the others keep the copy. The graphs must keep
        their memory pools (they do while they live). Returns ``(calls, in_place)``: the captured
        calls registered, and of them those whose inputs every rank now reads where they lie.
        With local_communicators(), one call registers every rank's."""
        return self._group().register_graph_inputs()

    # -- state ------------------------------------------------------------------------------
    def check(self):
        """Raises arfuse.PeerTimeout (.rank) or arfuse.CallMismatch (.rank, .peer) for what the
        kernels recorded. Synchronise the GPU first."""
        self._group().check()

    def reset(self):
        """Clears the signal state after a timeout; collective, no call may be in flight."""
        self._group().reset()

    def close(self):
        """Releases the buffers; collective (the ranks meet so no peer still reads ours)."""
        self._impl.close()

    @property
    def closed(self):
        return not _arfuse.handle_open(self.handle)

    @property
    def max_tokens(self):
        return self._group().max_tokens

    @property
    def max_hidden(self):
        return self._group().max_hidden

    def path_for(self, tokens, hidden):
        """"one_stage", "two_stage" or "nccl": the path a call of this shape takes."""
        return self._group().path_for(tokens, hidden)

    def last_path(self):
        return self._group().last_path(self._local_rank)

    def force_stage(self, stage):
        """1 or 2 forces the custom kernels' stage for the calls that follow; None restores the
        tuning table's choice. Every rank must do the same."""
        self._group().force_stage(stage)

    def _group(self):
        if self.closed:
            raise Error(f"communicator {self.handle} is closed")
        return self._impl

    def __del__(self):
        # Without close() the handle must not outlive the object; the group's own destructor then
        # skips the collective (a finaliser must not wait for peers) and warns.
        handle = getattr(self, "handle", None)
        if handle is not None:
            _arfuse.release_handle(handle)

    def __repr__(self):
        state = "closed" if self.closed else f"device {self.device}"
        return f"arfuse.torch.Communicator(rank {self.rank} of {self.world}, {state})"


def local_communicators(devices, *, max_tokens, max_hidden, dtype=None, timeout=5.0, transport="custom",
                        check_calls=True, graph_calls=4096, cache_dir=None):
    """A group whose ranks this one process drives: one Communicator per entry of `devices`
    (GPU ordinals; repeating one makes virtual ranks that share it). Each rank's calls go on
    torch's current stream when they are made, so give each rank its own stream, and let torch's
    allocator hold memory on each stream first (python -m arfuse.bench shows how): a rank whose op
    must cudaMalloc while the ranks launched before it wait at their barrier stalled a W = 4 run.
    For tests and benchmarks; engines use Communicator. Closing one closes them all."""
    if not devices or not all(isinstance(d, int) and not isinstance(d, bool) for d in devices):
        raise Error(f"devices is {devices!r}; it must be a list of GPU ordinals, one per rank")
    options = _options(max_tokens, max_hidden, dtype, timeout, transport, check_calls, graph_calls, cache_dir)
    impl = _arfuse.local_group(devices=list(devices), **options)
    return [Communicator._local(impl, local, torch.device("cuda", d)) for local, d in enumerate(devices)]
