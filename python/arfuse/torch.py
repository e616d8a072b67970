"""arfuse's kernels as PyTorch custom ops, and a communicator made from a torch.distributed group.

One process per GPU, as tensor-parallel engines run::

    import torch, torch.distributed as dist
    import arfuse.torch as aft

    dist.init_process_group("nccl")              # or "gloo"; the group only carries set-up bytes
    comm = aft.Communicator(max_tokens=8192, max_hidden=8192, dtype=torch.bfloat16)
    out, scales = comm.allreduce_rmsnorm_(x, residual, weight, quant="fp8")  # residual updated
    comm.close()                                 # collective, like the constructor

The ops (``torch.ops.arfuse.*``) run on torch's current stream, have fake implementations for
``torch.compile(fullgraph=True)``, and can be captured into CUDA graphs once they ran eagerly:

    allreduce_rmsnorm(comm, input, residual, weight, eps, quant, norm, group_size, scale_format, scale_layout, pdl,
                      pad_to_multiple, scale)
        -> (out, residual_out, scales, mirror)
    allreduce_rmsnorm_inplace(comm, input, residual!, weight, eps, quant, norm, ...)
        -> (out, scales, mirror)                 # residual_out written over residual
    allreduce(comm, input, pdl) -> out
    rmsnorm_quant(input, residual, weight, eps, quant, norm, ...)
        -> (out, residual_out, scales, mirror)   # the epilogue alone, for a sum made elsewhere
    group_quant(input, quant, group_size, scale_format, scale_layout, pdl, scale)
        -> (out, scales)                         # fp8_group, mxfp4, fp8_static, nvfp4 of y

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
T [tokens, hidden] (the output before quantisation) for the _mirror modes. Outputs a call does
not produce are empty tensors of shape [0]. ``pdl`` (default False): programmatic dependent
launch (NVIDIA sm_90+, elsewhere ignored): the kernel is launched before the kernel ahead of it
on the stream ends and waits for it itself, hiding the launch (run on the H200 by the GPU tests).

Every rank must make the same calls in the same order. A rank that does not arrive makes the
others' kernels give up after ``timeout`` seconds: synchronise, then ``check()`` raises
``arfuse.PeerTimeout`` naming it (``.rank``), and ``reset()`` (collective) makes the
communicator usable again.
"""

import itertools
import threading
from typing import Optional

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensor

from . import Error, Unavailable, _arfuse, modes

__all__ = ["Communicator", "local_communicators", "rmsnorm_quant", "group_quant", "QUANT_MODES", "NORM_MODES",
           "SCALE_FORMATS",
           "SCALE_LAYOUTS"]

_MODES = modes()
QUANT_MODES = tuple(_MODES["quant"])  # none, fp8(_mirror), fp8_group(_mirror), mxfp4(_mirror), fp8_static(_mirror),
#                                        nvfp4(_mirror)
SCALE_FORMATS = tuple(_MODES["scale_format"])  # f32, ue8m0_f32, e8m0
SCALE_LAYOUTS = tuple(_MODES["scale_layout"])  # row_major, column_major, swizzled_128x4
NORM_MODES = tuple(_MODES["norm"])  # rms, gemma
_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "f16"}
_FP8_DTYPES = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}

# handle -> (the _arfuse.Group, local rank index, Communicator's fp8 dtype). The ops take the
# handle (an int) because a custom op's arguments must be tensors and scalars.
_registry = {}
_registry_lock = threading.Lock()
_next_handle = itertools.count(1)


def _register(group, local, fp8_dtype):
    with _registry_lock:
        handle = next(_next_handle)
        _registry[handle] = (group, local, fp8_dtype)
    return handle


def _lookup(handle):
    entry = _registry.get(handle)
    if entry is None:
        raise Error(f"communicator {handle} is closed or was never created")
    return entry


def _dtype_name(dtype, what="dtype"):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        raise Error(f"{what} is {dtype}; arfuse takes torch.bfloat16 or torch.float16")
    return name


def _check_tensor(name, tensor, dtype=None, shape=None, device=None, contiguous=True):
    if not isinstance(tensor, torch.Tensor):
        raise Error(f"{name} must be a torch.Tensor, not {type(tensor).__name__}")
    if tensor.device.type != "cuda":
        raise Error(f"{name} is on {tensor.device}; it must be on a GPU (device type cuda)")
    if device is not None and tensor.device != device:
        raise Error(f"{name} is on {tensor.device}, the other tensors on {device}; all must be on one GPU")
    if dtype is not None and tensor.dtype != dtype:
        raise Error(f"{name} is {tensor.dtype}; it must be {dtype} like input")
    if shape is not None and tuple(tensor.shape) != tuple(shape):
        raise Error(f"{name} has shape {tuple(tensor.shape)}; it must be {tuple(shape)}")
    if contiguous and not tensor.is_contiguous():
        raise Error(f"{name} is not contiguous; pass {name}.contiguous()")


def _row_stride(name, tensor):
    """The elements between consecutive rows of `tensor` [..., hidden] seen as [rows, hidden]
    without a copy: its last dimension adjacent, its leading dimensions evenly spaced (a slice of
    a wider buffer, a [batch, seq, hidden] view). 0 where a single row makes it moot. Raises
    Error naming the dimension that cannot merge into the row index."""
    shape, strides = tuple(tensor.shape), tensor.stride()
    hidden = shape[-1]
    if hidden > 1 and strides[-1] != 1:
        raise Error(f"{name} has strides {strides}: its last dimension must be adjacent elements (stride 1); "
                    f"pass {name}.contiguous()")
    row_stride, span = 0, None
    for dim in range(len(shape) - 2, -1, -1):
        if shape[dim] == 1:
            continue
        if span is None:
            row_stride = strides[dim]
        elif strides[dim] != span:
            raise Error(f"{name} has shape {shape} and strides {strides}: dimension {dim} cannot merge with the "
                        f"dimensions after it into one row index (its stride would be {span}); pass "
                        f"{name}.contiguous()")
        span = strides[dim] * shape[dim]
    if span is not None and row_stride < hidden:
        raise Error(f"{name}'s rows are {row_stride} elements apart, fewer than its {hidden} columns: rows overlap; "
                    f"pass {name}.contiguous()")
    return row_stride


def _rows(tensor):
    """Rows of a [..., hidden] tensor."""
    rows = 1
    for size in tensor.shape[:-1]:
        rows *= size
    return rows


def _check_input(input):
    _check_tensor("input", input, contiguous=False)
    _dtype_name(input.dtype, "input's dtype")
    if input.dim() < 2:
        raise Error(f"input has shape {tuple(input.shape)}; it must have 2 dimensions or more, [..., hidden]")
    return _row_stride("input", input)


def _out_width(hidden, mode, pad_to_multiple):
    """The columns of `out`: hidden, or hidden rounded up to a multiple of pad_to_multiple."""
    if not isinstance(pad_to_multiple, int) or isinstance(pad_to_multiple, bool) or not 0 <= pad_to_multiple < 2**31:
        raise Error(f"pad_to_multiple is {pad_to_multiple!r}; it must be an int >= 0 (0: no padding)")
    if pad_to_multiple <= 1:
        return hidden
    width = -(-hidden // pad_to_multiple) * pad_to_multiple
    if width != hidden and mode.quant not in ("none", "fp8", "fp8_mirror", "fp8_static", "fp8_static_mirror"):
        raise Error(f"pad_to_multiple={pad_to_multiple} pads out, which quant {mode.quant} does not take: only none, "
                    f"fp8, fp8_static and their mirrors write padded rows (the block-scaled modes' scales cover "
                    f"hidden only)")
    if width % 8 != 0:
        raise Error(f"pad_to_multiple={pad_to_multiple} makes rows of {width} elements; a padded row must be a "
                    f"multiple of 8 elements")
    return width


class _Mode:
    """An epilogue's output mode: quant and norm, and for the fp8_group modes the group size,
    the scale format and the scale layout (which the other modes ignore)."""

    __slots__ = ("quant", "norm", "group_size", "scale_format", "scale_layout")

    def __init__(self, quant, norm, group_size=128, scale_format="f32", scale_layout="row_major"):
        self.quant, self.norm, self.group_size = quant, norm, group_size
        self.scale_format, self.scale_layout = scale_format, scale_layout

    @property
    def grouped(self):
        return self.quant in ("fp8_group", "fp8_group_mirror")

    @property
    def mx(self):
        return self.quant in ("mxfp4", "mxfp4_mirror")

    @property
    def nv(self):
        return self.quant in ("nvfp4", "nvfp4_mirror")

    @property
    def static(self):
        return self.quant in ("fp8_static", "fp8_static_mirror")

    def check(self, hidden):
        """The checks the C++ call makes on the mode, made before any output is allocated (the fake
        implementations must refuse what the real call would)."""
        if not isinstance(self.group_size, int) or isinstance(self.group_size, bool) or not -2**31 <= self.group_size < 2**31:
            raise Error(f"group_size is {self.group_size!r}; it must be an int (32, 64 or 128 for the fp8_group modes)")
        _arfuse.check_mode(str(self.quant), str(self.norm), self.group_size, str(self.scale_format),
                           str(self.scale_layout), int(hidden))

    def args(self):
        return self.quant, self.norm, self.group_size, self.scale_format, self.scale_layout


def _check_epilogue(input, residual, weight, eps, mode):
    """The row strides of input and residual, after the checks of every epilogue op."""
    input_stride = _check_input(input)
    _check_tensor("residual", residual, input.dtype, input.shape, input.device, contiguous=False)
    residual_stride = _row_stride("residual", residual)
    _check_tensor("weight", weight, input.dtype, (input.shape[-1],), input.device)
    mode.check(input.shape[-1])
    if not isinstance(eps, float) or not eps >= 0.0 or eps == float("inf"):
        raise Error(f"eps is {eps!r}; it must be a finite float >= 0")
    return input_stride, residual_stride


def _check_scale(scale, mode, input):
    """The address of `scale` (0 for None), the fp32 the kernel reads when it runs (fp8_static's
    scale, nvfp4's global scale): a one-element float32 tensor on input's device; None for the other
    modes. Fakes ignore the address (a fake tensor has none)."""
    needed = mode.static or mode.nv
    what = "global scale" if mode.nv else "scale"
    if scale is None:
        if needed:
            raise Error(f"scale is None; quant {mode.quant} reads its {what} from a one-element float32 tensor "
                        f"on the input's device")
        return 0
    if not needed:
        raise Error(f"scale is given, but quant {mode.quant} reads none: it is for fp8_static, nvfp4 and their "
                    f"mirrors")
    if not isinstance(scale, torch.Tensor):
        raise Error(f"scale is {type(scale).__name__}; it must be a one-element float32 tensor")
    if scale.dtype != torch.float32 or scale.numel() != 1:
        raise Error(f"scale is {scale.dtype} with {scale.numel()} elements; it must be one float32 element")
    if scale.device != input.device:
        raise Error(f"scale is on {scale.device}, input on {input.device}; they must be on the same device")
    return 0 if isinstance(scale, FakeTensor) else scale.data_ptr()


def _check_limits(group, input):
    tokens, hidden = _rows(input), input.shape[-1]
    if tokens > group.max_tokens:
        raise Error(f"input has {tokens} tokens, more than the communicator's max_tokens {group.max_tokens}")
    if hidden > group.max_hidden:
        raise Error(f"input has hidden size {hidden}, more than the communicator's max_hidden {group.max_hidden}")


def _epilogue_outputs(input, mode, fp8_dtype, width=None):
    """out, scales, mirror for `mode` (outputs a mode does not write are empty, shape [0]), each
    with input's leading dimensions; out `width` columns (default hidden)."""
    lead, hidden = tuple(input.shape[:-1]), input.shape[-1]
    width = hidden if width is None else width
    device = input.device
    empty_scales = input.new_empty((0,), dtype=torch.float32)
    if mode.quant == "none":
        out, scales = torch.empty(lead + (width,), dtype=input.dtype, device=device), empty_scales
    elif mode.mx:
        out = torch.empty(lead + (hidden // 2,), dtype=torch.uint8, device=device)
        scales = torch.empty(lead + (hidden // 32,), dtype=torch.uint8, device=device)
    elif mode.nv:
        out = torch.empty(lead + (hidden // 2,), dtype=torch.uint8, device=device)
        if mode.scale_layout == "swizzled_128x4":  # rows padded to 128, scale columns to 4 (zeros)
            shape = (-(-_rows(input) // 128) * 128, -(-(hidden // 16) // 4) * 4)
        else:
            shape = lead + (hidden // 16,)
        scales = torch.empty(shape, dtype=torch.uint8, device=device)
    elif mode.static:
        out, scales = torch.empty(lead + (width,), dtype=fp8_dtype, device=device), empty_scales
    elif mode.grouped:
        out = torch.empty(lead + (hidden,), dtype=fp8_dtype, device=device)
        groups = hidden // mode.group_size
        shape = lead + (groups,) if mode.scale_layout == "row_major" else (groups, _rows(input))
        scale_dtype = torch.uint8 if mode.scale_format == "e8m0" else torch.float32
        scales = torch.empty(shape, dtype=scale_dtype, device=device)
    else:
        out = torch.empty(lead + (width,), dtype=fp8_dtype, device=device)
        scales = torch.empty(lead, dtype=torch.float32, device=device)
    mirror = torch.empty(lead + (hidden,), dtype=input.dtype, device=device) if mode.quant.endswith("_mirror") \
        else input.new_empty((0,))
    return out, scales, mirror


def _address(tensor):
    return tensor.data_ptr() if tensor.numel() else 0


def _stream_of(device):
    return torch.cuda.current_stream(device).cuda_stream


_fp8_format_cache = {}


def _fp8_dtype_of(device):
    """The FP8 dtype the kernels write on `device` (asks the driver once per device)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _fp8_format_cache:
        _fp8_format_cache[index] = _FP8_DTYPES[_arfuse.fp8_format(index)]
    return _fp8_format_cache[index]


def _fake_fp8_dtype(device):
    # Tracing must not need a driver (CPU-only machines export graphs too): ask it only if present.
    if torch.cuda.is_available():
        return _fp8_dtype_of(device)
    return torch.float8_e4m3fn


def _layout(input_stride, residual_stride, residual_out_stride, width):
    """The row strides and out_width the runtime takes: out and mirror are new tensors, contiguous."""
    return (input_stride, residual_stride, residual_out_stride, 0, 0, width)


def _launch_fused(handle, input, residual, residual_out, weight, eps, mode, out, scales, mirror, pdl, layout,
                  scale_address):
    group, local, _ = _lookup(handle)
    _check_limits(group, input)
    with torch.cuda.device(input.device):
        group.allreduce_rmsnorm(local, _address(input), _address(residual), _address(residual_out),
                                _address(weight), eps, _address(out), _address(scales), _address(mirror),
                                _rows(input), input.shape[-1], _DTYPE_NAMES[input.dtype], *mode.args(), pdl,
                                _stream_of(input.device), *layout, scale_address)


Outputs4 = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
Outputs3 = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@torch.library.custom_op("arfuse::allreduce_rmsnorm", mutates_args=())
def _allreduce_rmsnorm(comm: int, input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                       quant: str, norm: str, group_size: int = 128, scale_format: str = "f32",
                       scale_layout: str = "row_major", pdl: bool = False, pad_to_multiple: int = 0,
                       scale: Optional[torch.Tensor] = None) -> Outputs4:
    mode = _Mode(quant, norm, group_size, scale_format, scale_layout)
    input_stride, residual_stride = _check_epilogue(input, residual, weight, eps, mode)
    scale_address = _check_scale(scale, mode, input)
    width = _out_width(input.shape[-1], mode, pad_to_multiple)
    out, scales, mirror = _epilogue_outputs(input, mode, _lookup(int(comm))[2], width)
    residual_out = torch.empty(residual.shape, dtype=residual.dtype, device=residual.device)
    _launch_fused(comm, input, residual, residual_out, weight, eps, mode, out, scales, mirror, pdl,
                  _layout(input_stride, residual_stride, 0, width), scale_address)
    return out, residual_out, scales, mirror


def _fused_fake(comm, input, residual, weight, eps, quant, norm, group_size, scale_format, scale_layout,
                pad_to_multiple, scale):
    """out, scales, mirror of a fused op's fake, after the real op's checks."""
    mode = _Mode(quant, norm, group_size, scale_format, scale_layout)
    _check_epilogue(input, residual, weight, eps, mode)
    _check_scale(scale, mode, input)
    width = _out_width(input.shape[-1], mode, pad_to_multiple)
    return _epilogue_outputs(input, mode, _lookup(int(comm))[2], width)


@_allreduce_rmsnorm.register_fake
def _(comm, input, residual, weight, eps, quant, norm, group_size=128, scale_format="f32", scale_layout="row_major",
      pdl=False, pad_to_multiple=0, scale=None):
    out, scales, mirror = _fused_fake(comm, input, residual, weight, eps, quant, norm, group_size, scale_format,
                                      scale_layout, pad_to_multiple, scale)
    return out, torch.empty(residual.shape, dtype=residual.dtype, device=residual.device), scales, mirror


@torch.library.custom_op("arfuse::allreduce_rmsnorm_inplace", mutates_args=("residual",))
def _allreduce_rmsnorm_inplace(comm: int, input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                               eps: float, quant: str, norm: str, group_size: int = 128, scale_format: str = "f32",
                               scale_layout: str = "row_major", pdl: bool = False,
                               pad_to_multiple: int = 0, scale: Optional[torch.Tensor] = None) -> Outputs3:
    mode = _Mode(quant, norm, group_size, scale_format, scale_layout)
    input_stride, residual_stride = _check_epilogue(input, residual, weight, eps, mode)
    scale_address = _check_scale(scale, mode, input)
    width = _out_width(input.shape[-1], mode, pad_to_multiple)
    out, scales, mirror = _epilogue_outputs(input, mode, _lookup(int(comm))[2], width)
    _launch_fused(comm, input, residual, residual, weight, eps, mode, out, scales, mirror, pdl,
                  _layout(input_stride, residual_stride, residual_stride, width), scale_address)
    return out, scales, mirror


@_allreduce_rmsnorm_inplace.register_fake
def _(comm, input, residual, weight, eps, quant, norm, group_size=128, scale_format="f32", scale_layout="row_major",
      pdl=False, pad_to_multiple=0, scale=None):
    return _fused_fake(comm, input, residual, weight, eps, quant, norm, group_size, scale_format, scale_layout,
                       pad_to_multiple, scale)


@torch.library.custom_op("arfuse::allreduce", mutates_args=())
def _allreduce(comm: int, input: torch.Tensor, pdl: bool = False) -> torch.Tensor:
    input_stride = _check_input(input)
    group, local, _ = _lookup(int(comm))
    _check_limits(group, input)
    out = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    with torch.cuda.device(input.device):
        group.allreduce(local, _address(input), _address(out), _rows(input), input.shape[-1],
                        _DTYPE_NAMES[input.dtype], pdl, _stream_of(input.device), input_stride, 0)
    return out


@_allreduce.register_fake
def _(comm, input, pdl=False):
    _check_input(input)
    _lookup(int(comm))
    return torch.empty(input.shape, dtype=input.dtype, device=input.device)


@torch.library.custom_op("arfuse::rmsnorm_quant", mutates_args=())
def _rmsnorm_quant(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, quant: str,
                   norm: str, group_size: int = 128, scale_format: str = "f32", scale_layout: str = "row_major",
                   pdl: bool = False, pad_to_multiple: int = 0, scale: Optional[torch.Tensor] = None) -> Outputs4:
    mode = _Mode(quant, norm, group_size, scale_format, scale_layout)
    input_stride, residual_stride = _check_epilogue(input, residual, weight, eps, mode)
    scale_address = _check_scale(scale, mode, input)
    width = _out_width(input.shape[-1], mode, pad_to_multiple)
    out, scales, mirror = _epilogue_outputs(input, mode, _fp8_dtype_of(input.device), width)
    residual_out = torch.empty(residual.shape, dtype=residual.dtype, device=residual.device)
    index = input.device.index
    with torch.cuda.device(input.device):
        _arfuse.rmsnorm_quant(index, _address(input), _address(residual), _address(residual_out), _address(weight),
                              eps, _address(out), _address(scales), _address(mirror), _rows(input), input.shape[-1],
                              _DTYPE_NAMES[input.dtype], *mode.args(), pdl, _stream_of(input.device),
                              *_layout(input_stride, residual_stride, 0, width), scale_address)
    return out, residual_out, scales, mirror


@_rmsnorm_quant.register_fake
def _(input, residual, weight, eps, quant, norm, group_size=128, scale_format="f32", scale_layout="row_major", pdl=False,
      pad_to_multiple=0, scale=None):
    mode = _Mode(quant, norm, group_size, scale_format, scale_layout)
    _check_epilogue(input, residual, weight, eps, mode)
    _check_scale(scale, mode, input)
    width = _out_width(input.shape[-1], mode, pad_to_multiple)
    out, scales, mirror = _epilogue_outputs(input, mode, _fake_fp8_dtype(input.device), width)
    return out, torch.empty(residual.shape, dtype=residual.dtype, device=residual.device), scales, mirror


def _check_group_quant(input, mode):
    input_stride = _check_input(input)
    if mode.quant not in ("fp8_group", "mxfp4", "fp8_static", "nvfp4"):
        raise Error(f"quant is {mode.quant!r}; group_quant takes fp8_group, mxfp4, fp8_static or nvfp4")
    mode.check(input.shape[-1])
    return input_stride


@torch.library.custom_op("arfuse::group_quant", mutates_args=())
def _group_quant(input: torch.Tensor, quant: str, group_size: int = 128, scale_format: str = "f32",
                 scale_layout: str = "row_major", pdl: bool = False,
                 scale: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    mode = _Mode(quant, "rms", group_size, scale_format, scale_layout)
    input_stride = _check_group_quant(input, mode)
    scale_address = _check_scale(scale, mode, input)
    out, scales, _ = _epilogue_outputs(input, mode, _fp8_dtype_of(input.device))
    with torch.cuda.device(input.device):
        _arfuse.group_quant(input.device.index, _address(input), _address(out), _address(scales), _rows(input),
                            input.shape[-1], _DTYPE_NAMES[input.dtype], quant, group_size, scale_format, scale_layout,
                            pdl, _stream_of(input.device), input_stride, scale_address)
    return out, scales


@_group_quant.register_fake
def _(input, quant, group_size=128, scale_format="f32", scale_layout="row_major", pdl=False, scale=None):
    mode = _Mode(quant, "rms", group_size, scale_format, scale_layout)
    _check_group_quant(input, mode)
    _check_scale(scale, mode, input)
    out, scales, _ = _epilogue_outputs(input, mode, _fake_fp8_dtype(input.device))
    return out, scales


def group_quant(input, quant="fp8_group", group_size=128, scale_format="f32", scale_layout="row_major", pdl=False,
                scale=None):
    """Per-token-group FP8, MXFP4, static FP8 or NVFP4 of a tensor that already is y:
    ``(out, scales)``, shaped as the epilogue ops shape them (scale: as allreduce_rmsnorm's). For
    the _mirror output of an epilogue op it gives that op's bytes and scales."""
    return torch.ops.arfuse.group_quant(input, quant, group_size, scale_format, scale_layout, pdl, scale)


def rmsnorm_quant(input, residual, weight, eps=1e-6, quant="none", norm="rms", group_size=128, scale_format="f32",
                  scale_layout="row_major", pdl=False, pad_to_multiple=0, scale=None):
    """The epilogue alone (residual add + RMSNorm/Gemma + optional FP8 per token, per group or
    static, MXFP4 or NVFP4) on a tensor that was all-reduced elsewhere:
    ``(out, residual_out, scales, mirror)``."""
    return torch.ops.arfuse.rmsnorm_quant(input, residual, weight, float(eps), quant, norm, group_size, scale_format,
                                          scale_layout, pdl, pad_to_multiple, scale)


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


def _options(max_tokens, max_hidden, dtype, timeout, transport, check_calls, cache_dir):
    _check_positive("max_tokens", max_tokens)
    _check_positive("max_hidden", max_hidden)
    dtype_name = None if dtype is None else _dtype_name(dtype)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
        raise Error(f"timeout is {timeout!r}; it must be a number of seconds")
    return dict(max_tokens=max_tokens, max_hidden=max_hidden, dtype=dtype_name, timeout_s=float(timeout),
                transport=transport, check_calls=bool(check_calls),
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
    """

    def __init__(self, group=None, *, max_tokens, max_hidden, dtype=None, timeout=5.0, device=None,
                 transport="auto", check_calls=True, cache_dir=None):
        if not dist.is_available() or not dist.is_initialized():
            raise Error("torch.distributed is not initialised: call torch.distributed.init_process_group first")
        group = group if group is not None else dist.group.WORLD
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        if rank < 0:
            raise Error("this process is not a member of the process group passed as `group`")
        device = _cuda_device(device)
        options = _options(max_tokens, max_hidden, dtype, timeout, transport, check_calls, cache_dir)

        def allgather(mine):
            everyone = [None] * world
            dist.all_gather_object(everyone, mine, group=group)
            return everyone

        with torch.cuda.device(device):
            impl = _arfuse.process_group(rank=rank, world=world, allgather=allgather, device=device.index, **options)
        self._init(impl, 0, device)

    @classmethod
    def _local(cls, impl, local, device):
        self = cls.__new__(cls)
        self._init(impl, local, device)
        return self

    def _init(self, impl, local, device):
        self._impl = impl
        self._local_rank = local
        self.device = device
        self.rank = impl.rank_index(local)
        self.world = impl.world
        self.fp8_dtype = _FP8_DTYPES[impl.fp8_format(local)]
        self.handle = _register(impl, local, self.fp8_dtype)

    # -- calls ------------------------------------------------------------------------------
    def allreduce_rmsnorm(self, input, residual, weight, eps=1e-6, quant="none", norm="rms", group_size=128,
                          scale_format="f32", scale_layout="row_major", pdl=False, pad_to_multiple=0, scale=None):
        """Sum over ranks + residual add + RMSNorm/Gemma + optional FP8 (per token, per group or
        static), MXFP4 or NVFP4, as new tensors: ``(out, residual_out, scales, mirror)``. input and
        residual are [..., hidden], views welcome (a row stride wider than hidden, leading
        dimensions that merge into one row index); the outputs keep their leading dimensions.
        pad_to_multiple: out's rows rounded up to a multiple of it, the padding zero (quant none,
        fp8, fp8_static and their mirrors). scale: a one-element float32 tensor, fp8_static's scale
        (q = fp8(y * (1 / scale))) or nvfp4's global scale, read when the kernel runs."""
        return torch.ops.arfuse.allreduce_rmsnorm(self.handle, input, residual, weight, float(eps), quant, norm,
                                                  group_size, scale_format, scale_layout, pdl, pad_to_multiple, scale)

    def allreduce_rmsnorm_(self, input, residual, weight, eps=1e-6, quant="none", norm="rms", group_size=128,
                           scale_format="f32", scale_layout="row_major", pdl=False, pad_to_multiple=0, scale=None):
        """As allreduce_rmsnorm, with residual_out written over `residual` (as engines keep it, a
        view too): ``(out, scales, mirror)``."""
        return torch.ops.arfuse.allreduce_rmsnorm_inplace(self.handle, input, residual, weight, float(eps), quant,
                                                          norm, group_size, scale_format, scale_layout, pdl,
                                                          pad_to_multiple, scale)

    def allreduce(self, input, pdl=False):
        """The sum over ranks of `input` [..., hidden] (fp32 in rank order, rounded once), a new
        contiguous tensor of input's shape."""
        return torch.ops.arfuse.allreduce(self.handle, input, pdl)

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

    def prepare(self, hidden, dtype, quant="none", norm="rms", group_size=128, scale_format="f32"):
        """Loads every kernel a call of this hidden size and mode can take (compiling on a cache
        miss). Call it on every rank before the first call of a shape, and before graph capture."""
        _Mode(quant, norm, group_size, scale_format).check(hidden)
        self._group().prepare(self._local_rank, hidden, _dtype_name(dtype), quant, norm, group_size, scale_format)

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
        with _registry_lock:
            for handle in [h for h, entry in _registry.items() if entry[0] is self._impl]:
                del _registry[handle]
        self._impl.close()

    @property
    def closed(self):
        return self.handle not in _registry

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
        with _registry_lock:
            _registry.pop(getattr(self, "handle", None), None)

    def __repr__(self):
        state = "closed" if self.closed else f"device {self.device}"
        return f"arfuse.torch.Communicator(rank {self.rank} of {self.world}, {state})"


def local_communicators(devices, *, max_tokens, max_hidden, dtype=None, timeout=5.0, transport="custom",
                        check_calls=True, cache_dir=None):
    """A group whose ranks this one process drives: one Communicator per entry of `devices`
    (GPU ordinals; repeating one makes virtual ranks that share it). Each rank's calls go on
    torch's current stream when they are made, so give each rank its own stream, and let torch's
    allocator hold memory on each stream first (python -m arfuse.bench shows how): a rank whose op
    must cudaMalloc while the ranks launched before it wait at their barrier stalled a W = 4 run.
    For tests and benchmarks; engines use Communicator. Closing one closes them all."""
    if not devices or not all(isinstance(d, int) and not isinstance(d, bool) for d in devices):
        raise Error(f"devices is {devices!r}; it must be a list of GPU ordinals, one per rank")
    options = _options(max_tokens, max_hidden, dtype, timeout, transport, check_calls, cache_dir)
    impl = _arfuse.local_group(devices=list(devices), **options)
    return [Communicator._local(impl, local, torch.device("cuda", d)) for local, d in enumerate(devices)]
