"""A torch.compile pass that turns all-reduce + residual add + RMSNorm (+ FP8 quantisation) into
arfuse's fused op, so a tensor-parallel PyTorch model gets the fused kernel without changes::

    import arfuse.torch as aft, arfuse.torch_fusion as fusion

    comm = aft.Communicator(max_tokens=8192, max_hidden=8192, dtype=torch.bfloat16)
    compiled = torch.compile(model, options=fusion.options(comm))   # or: with fusion.enabled(comm): ...

It runs on Inductor's post-grad graph (``post_grad_custom_post_pass``) and, built on
``torch._inductor.pattern_matcher``, finds

- the all-reduce: ``_c10d_functional.all_reduce`` + ``wait_tensor`` (what ``dist.all_reduce``
  and ``torch.distributed._functional_collectives.all_reduce`` trace to) of a sum over the
  communicator's process group, or an engine's own all-reduce op (``all_reduce_op=``, an
  OpOverload whose first argument is the tensor);
- followed by the residual add (either order), the pre-norm value used after it or not;
- followed by RMSNorm over the last dimension in the forms models use: ``F.rms_norm``, the
  Llama/HF form (``x.float()``, ``pow(2).mean(-1, keepdim=True)``, ``rsqrt(var + eps)``, cast
  back, times the weight) and Gemma's ``(1 + w.float())``;
- optionally followed by FP8 quantisation to the communicator's FP8 format: static per-tensor
  (``(y / scale).clamp(-max, max).to(fp8)``, or ``y * (1 / scale)``) and dynamic per token
  (``scale = y.abs().amax(-1, keepdim=True) / max``) and per token group (DeepSeek's
  ``per_token_group_quant_fp8``: y viewed as ``[..., hidden / G, G]`` for G = 32, 64 or 128, the
  amax over each group, optionally clamped below by a small eps, / max; fp32 scales
  ``[..., hidden / G]``); when y is also used, the mirror mode keeps it;

and replaces the match with ``torch.ops.arfuse.allreduce_rmsnorm``. Where arfuse does not serve
the match (a dtype other than bf16/f16, a weight of another dtype, a hidden size it does not take
or above the communicator's ``max_hidden``, a token count known to be above ``max_tokens``, an
eps outside ``eps=`` when it is given, a norm over another dimension) the graph stays as it was
and the reason is logged once (logger ``arfuse.torch_fusion``). Symbolic token counts
(``dynamic=True``) are replaced; the op raises if a call exceeds ``max_tokens``.

Numerics: the replacement computes arfuse's contract (docs/numeric-contract.md), the same on
every rank: the sum in fp32 in rank order rounded once, then the residual add; the sum of squares
as the contract orders it, ``1 / sqrtf``, y rounded once. The unfused forms differ in their
last bits: Llama's rounds y twice (after the normalisation and after the weight), every form
uses ``rsqrt``, and static FP8 divides where arfuse multiplies by the reciprocal. The differences
measured are in docs/python.md. The pass's output is bit for bit what calling the op directly
on the same tensors gives.
"""

import contextlib
import hashlib
import logging
import math
import operator

import torch
from torch._dynamo import config as _dynamo_config
from torch._inductor import config as _inductor_config
from torch._inductor import pattern_matcher as pm
from torch._inductor.custom_graph_pass import CustomGraphPass
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch._guards import detect_fake_mode
from torch.fx.experimental.symbolic_shapes import is_concrete_int

from . import Error
from . import torch as aft

__all__ = ["AllreduceRmsnormFusion", "options", "enabled", "install"]

logger = logging.getLogger(__name__)

_aten = torch.ops.aten
_prims = torch.ops.prims
_c10d = torch.ops._c10d_functional
_FUSED = torch.ops.arfuse.allreduce_rmsnorm.default
_ADDS = (_aten.add.Tensor, _aten.add.Scalar)
_CONVERT = _prims.convert_element_type.default
_MAX_HIDDEN = 32768  # the largest hidden size any arfuse kernel takes (a multiple of 8)


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _is(node, targets):
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def _converted(node, dtype):
    """node converted to `dtype` (prims.convert_element_type), or None."""
    return node.args[0] if _is(node, (_CONVERT,)) and node.args[1] == dtype else None


def _other(node, target, this):
    """For a binary op `node` of `target` with `this` as one operand, the other operand."""
    if not _is(node, target if isinstance(target, tuple) else (target,)) or len(node.args) != 2:
        return None
    a, b = node.args
    return b if a is this else a if b is this else None


def _scalar(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _concrete(size):
    """A size as an int, or None when it is symbolic (checked without adding a guard)."""
    if isinstance(size, int):
        return size
    return int(size) if is_concrete_int(size) else None


def _one_element(node):
    """Whether `node` is a float32 tensor of one element, by its static shape."""
    val = _val(node)
    if val is None or val.dtype != torch.float32:
        return False
    sizes = [_concrete(d) for d in val.shape]
    return all(d == 1 for d in sizes)


class _Skip(Exception):
    """A match arfuse does not serve; the message says why."""


class _Norm:
    """What the norm after the residual add is made of: y, the normalised row in T (None when
    nothing reads it rounded), p32, its fp32 value before that rounding (F.rms_norm's and
    Gemma's forms; Inductor reads it directly where y was only widened again)."""

    def __init__(self, kind, eps, weight, y, p32, nodes):
        self.kind, self.eps, self.weight, self.y, self.p32, self.nodes = kind, eps, weight, y, p32, nodes


class _Quant:
    """The quantisation after the norm: its mode, q (the FP8 result; for fp8_group grouped as
    [..., hidden / G, G]), the one-element scale tensor it reads (fp8_static) or the scales it
    computes (fp8, fp8_group, keepdim), its nodes, the group size G and the size list of its
    grouping view (fp8_group), and y's readers outside it (the mirror)."""

    def __init__(self, mode, q, scale, scales, nodes, group=None, grouping=None):
        self.mode, self.q, self.scale, self.scales, self.nodes = mode, q, scale, scales, nodes
        self.group, self.grouping = group, grouping
        self.mirror_users = []


_GROUP_SIZES = (32, 64, 128)  # fp8_group's
_VIEWS = (_aten.view.default, _aten.reshape.default, _aten._unsafe_view.default)


class AllreduceRmsnormFusion(CustomGraphPass):
    """The pass (an Inductor ``CustomGraphPass``): call it on a post-grad graph, or hand it to
    ``torch.compile`` with ``options`` / ``enabled``.

    comm: the arfuse.torch.Communicator the fused op runs on (its handle, process group, FP8
    format and limits). eps: the epsilons to fuse (None: any). all_reduce_op: an engine's own
    all-reduce OpOverload to match instead of torch's functional all-reduce. quant: also fuse the
    FP8 quantisation that follows (default True)."""

    def __init__(self, comm, *, eps=None, all_reduce_op=None, quant=True):
        self.handle = comm.handle
        self.group_name = comm.group_name
        self.max_tokens = comm.max_tokens
        self.max_hidden = min(comm.max_hidden, _MAX_HIDDEN)
        self.fp8_dtype = comm.fp8_dtype
        self.fp8_max = float(torch.finfo(comm.fp8_dtype).max)
        self.eps = None if eps is None else tuple(float(e) for e in eps)
        self.all_reduce_op = all_reduce_op
        self.quant = bool(quant)
        if self.group_name is None and all_reduce_op is None:
            raise Error("this communicator has no torch.distributed group (it is one of local_communicators): pass "
                        "all_reduce_op, the op its all-reduce traces to")
        self.fused = 0
        self._said = set()
        self._patterns = pm.PatternMatcherPass(pass_name="arfuse_allreduce_rmsnorm")
        if all_reduce_op is None:
            # dist.all_reduce on a value the graph made traces to the in-place all_reduce_.
            reduced = pm.CallFunction(_c10d.wait_tensor.default,
                                      pm.CallFunction([_c10d.all_reduce.default, _c10d.all_reduce_.default],
                                                      pm.KeywordArg("input"), pm.KeywordArg("reduce_op"),
                                                      pm.KeywordArg("group_name")))
        else:
            reduced = pm.CallFunctionVarArgs(all_reduce_op)
        for first, second in ((reduced, pm.KeywordArg("residual")), (pm.KeywordArg("residual"), reduced)):
            pattern = pm.CallFunction(_aten.add.Tensor, first, second, _users=pm.MULTIPLE)
            pm.register_graph_pattern(pattern, pass_dict=self._patterns)(self._rewrite)

    # -- CustomGraphPass ------------------------------------------------------------------------
    def __call__(self, graph):
        self._patterns.apply(graph)

    def uuid(self):
        """What Inductor's FX graph cache keys this pass by: its settings and this file."""
        with open(__file__, "rb") as f:
            source = f.read()
        settings = repr((self.handle, self.group_name, self.max_tokens, self.max_hidden, str(self.fp8_dtype),
                         self.eps, str(self.all_reduce_op), self.quant))
        return hashlib.sha256(source + settings.encode()).hexdigest()

    # -- matching -------------------------------------------------------------------------------
    def _say_once(self, why):
        if why not in self._said:
            self._said.add(why)
            logger.warning("arfuse.torch_fusion: an all-reduce + add is left unfused: %s", why)

    def _rewrite(self, match, *args, **kwargs):
        add = match.output_node()
        try:
            self._replace(add, kwargs)
        except _Skip as skip:
            self._say_once(str(skip))

    def _collective(self, add, kwargs):
        """(the tensor reduced, the collective's nodes) of the all-reduce the add reads."""
        if self.all_reduce_op is not None:
            reduced = add.args[0] if _is(add.args[0], (self.all_reduce_op,)) else add.args[1]
            return reduced.args[0], [reduced]
        if kwargs["reduce_op"] != "sum":
            raise _Skip(f"the all-reduce is a {kwargs['reduce_op']}, not a sum")
        if kwargs["group_name"] != self.group_name:
            raise _Skip(f"the all-reduce is over group {kwargs['group_name']!r}, not the communicator's "
                        f"{self.group_name!r}")
        reduced = add.args[0] if _is(add.args[0], (_c10d.wait_tensor.default,)) else add.args[1]
        collective = reduced.args[0]
        if collective.target == _c10d.all_reduce_.default and len(kwargs["input"].users) > 1:
            # In place: the other readers of the input read the sum, which the fused op does not write back.
            raise _Skip("the all-reduce works in place on a tensor that is also read elsewhere")
        return kwargs["input"], [reduced, collective]

    def _norm(self, add, ndim, dtype):
        """The RMSNorm of `add` over its last dimension: Llama's, F.rms_norm's or Gemma's form."""
        why = "no RMSNorm over the last dimension follows the add"
        for x32 in [u for u in add.users if _converted(u, torch.float32) is add]:
            for square in x32.users:
                if not (_is(square, (_aten.pow.Tensor_Scalar,)) and square.args == (x32, 2)):
                    continue
                for mean in square.users:
                    if not _is(mean, (_aten.mean.dim,)) or len(mean.args) < 3 or mean.args[2] is not True:
                        continue
                    if list(mean.args[1]) not in ([-1], [ndim - 1]):
                        raise _Skip(f"the norm is over dimension {list(mean.args[1])}, not the last")
                    for plus in mean.users:
                        eps = _other(plus, _ADDS, mean)
                        if isinstance(eps, torch.fx.Node):
                            why = ("eps is a run-time value (torch.compile made a float attribute a graph input: "
                                   "set torch._dynamo.config.specialize_float = True, as enabled() does)")
                            continue
                        if not _scalar(eps) or len(plus.users) != 1:
                            continue
                        rsqrt = next(iter(plus.users))
                        if not _is(rsqrt, (_aten.rsqrt.default,)) or len(rsqrt.users) != 1:
                            continue
                        normed = next(iter(rsqrt.users))
                        if _other(normed, _aten.mul.Tensor, rsqrt) is not x32:
                            continue
                        found = self._weighted(normed, dtype)
                        if found is not None:
                            kind, weight, y, p32, nodes = found
                            return _Norm(kind, float(eps), weight, y, p32,
                                         [x32, square, mean, plus, rsqrt, normed] + nodes)
        raise _Skip(why)

    def _weighted(self, normed, dtype):
        """(norm, weight, y, p32, nodes) of the weight step after the normalisation, or None."""
        if len(normed.users) != 1:
            return None
        user = next(iter(normed.users))
        if _converted(user, dtype) is normed and len(user.users) == 1:  # Llama: w * T(normed)
            times = next(iter(user.users))
            weight = _other(times, _aten.mul.Tensor, user)
            if weight is not None:
                return "rms", weight, times, None, [user]
        weight = _other(user, _aten.mul.Tensor, normed)  # F.rms_norm and Gemma: T(normed * g) in fp32
        if weight is None:
            return None
        rounded = [u for u in user.users if _converted(u, dtype) is user]
        y = rounded[0] if len(rounded) == 1 else None
        nodes = [user]
        if _is(weight, _ADDS) and _other(weight, _ADDS, weight.args[0]) == 1.0 \
                and _converted(weight.args[0], torch.float32) is not None and len(weight.users) == 1:
            return "gemma", weight.args[0].args[0], y, user, nodes + [weight, weight.args[0]]
        return "rms", weight, y, user, nodes

    def _quant(self, norm):
        """The _Quant of the FP8 chain that follows the norm, or None. It reads y widened to fp32,
        or the fp32 value y was rounded from where Inductor dropped the round trip."""
        sources = [u for u in (norm.y.users if norm.y is not None else []) if _converted(u, torch.float32) is norm.y]
        if norm.p32 is not None:
            sources.append(norm.p32)
        static = dynamic = None
        for y32 in sources:
            own = [y32] if y32 is not norm.p32 else []
            for op in y32.users:
                grouped = self._grouped(op, y32)
                if grouped is not None:
                    dynamic = dynamic or grouped
                    grouped.nodes = own + grouped.nodes
                    continue
                end = self._clamped_fp8(op)
                if end is None:
                    continue
                q, clamp_nodes = end
                if _is(op, (_aten.div.Tensor,)) and op.args[0] is y32:
                    divisor = op.args[1]
                    amax_scale = self._amax_scale(divisor, sources)
                    if amax_scale is not None:
                        dynamic = _Quant("fp8", q, None, divisor, own + [op] + clamp_nodes + amax_scale)
                    elif _one_element(divisor):
                        static = _Quant("fp8_static", q, divisor, None, own + [op] + clamp_nodes)
                elif _is(op, (_aten.mul.Tensor,)):
                    inverse = _other(op, _aten.mul.Tensor, y32)
                    inverse_nodes = [inverse]
                    if _is(inverse, (_aten.mul.Tensor,)) and inverse.args[1] == 1.0 and len(inverse.users) == 1:
                        inverse = inverse.args[0]  # 1.0 / scale traces as reciprocal(scale) * 1.0
                        inverse_nodes.append(inverse)
                    if _is(inverse, (_aten.reciprocal.default,)) and len(inverse.users) == 1 \
                            and _one_element(inverse.args[0]):
                        static = _Quant("fp8_static", q, inverse.args[0], None,
                                        own + [op] + inverse_nodes + clamp_nodes)
        found = dynamic or static
        if found is None:
            return None
        nodes = set(found.nodes) | {found.q}
        found.mirror_users = [u for u in (norm.y.users if norm.y is not None else []) if u not in nodes]
        if norm.p32 is not None and any(u not in nodes and u is not norm.y for u in norm.p32.users):
            raise _Skip("the norm's fp32 value before rounding is read by something other than the quantisation")
        return found

    def _grouped(self, view, y32):
        """The per-token-group FP8 of y32 (DeepSeek's per_token_group_quant_fp8 form) starting at
        `view`: y32 viewed as [..., hidden / G, G], amax over the last dimension (optionally
        clamped below by a small eps) / max as the scale, the group divided by it, clamped and
        converted; None when `view` does not start one."""
        if not _is(view, _VIEWS) or view.args[0] is not y32 or _val(view) is None or _val(y32) is None:
            return None
        shape, row = _val(view).shape, _val(y32).shape
        group, groups, hidden = _concrete(shape[-1]), _concrete(shape[-2]), _concrete(row[-1])
        if not isinstance(view.args[1], (list, tuple)) or len(shape) != len(row) + 1 or group not in _GROUP_SIZES \
                or groups is None or hidden is None or group * groups != hidden:
            return None
        for op in view.users:
            if not (_is(op, (_aten.div.Tensor,)) and op.args[0] is view):
                continue
            end = self._clamped_fp8(op)
            amax_scale = self._amax_scale(op.args[1], [view], eps_allowed=True)
            if end is None or amax_scale is None:
                continue
            q, clamp_nodes = end
            return _Quant("fp8_group", q, None, op.args[1], [view, op] + clamp_nodes + amax_scale, group=group,
                          grouping=view.args[1])
        return None

    def _clamped_fp8(self, node):
        """(q, nodes) when `node` goes through clamp(-max, max) to the communicator's FP8."""
        if len(node.users) != 1:
            return None
        low = next(iter(node.users))
        if _is(low, (_aten.clamp.default,)) and tuple(low.args[1:3]) == (-self.fp8_max, self.fp8_max):
            clamp_nodes = [low]
            high = low
        elif _is(low, (_aten.clamp_min.default,)) and low.args[1] == -self.fp8_max and len(low.users) == 1:
            high = next(iter(low.users))
            if not (_is(high, (_aten.clamp_max.default,)) and high.args[1] == self.fp8_max):
                return None
            clamp_nodes = [low, high]
        else:
            return None
        if len(high.users) != 1:
            return None
        q = next(iter(high.users))
        if _converted(q, self.fp8_dtype) is not high:
            return None
        return q, clamp_nodes

    def _amax_scale(self, divisor, sources, eps_allowed=False):
        """The nodes of `divisor = x.abs().amax(-1, keepdim=True) / max` with x one of `sources`
        (y widened, or its groups), or None. eps_allowed: the amax may be clamped below by an eps
        of at most 1e-4 first (per_token_group_quant_fp8's guard against a zero group; arfuse
        writes scale 1 for such a group, q is 0 either way)."""
        if not (_is(divisor, (_aten.div.Tensor,)) and divisor.args[1] == self.fp8_max):
            return None
        amax, nodes = divisor.args[0], []
        if eps_allowed and _is(amax, (_aten.clamp_min.default,)) and _scalar(amax.args[1]) \
                and 0 < amax.args[1] <= 1e-4 and len(amax.users) == 1:
            nodes.append(amax)
            amax = amax.args[0]
        ndim = _val(amax).dim() if _val(amax) is not None else -1
        if not (_is(amax, (_aten.amax.default,)) and list(amax.args[1]) in ([-1], [ndim - 1])
                and len(amax.args) > 2 and amax.args[2] is True and len(amax.users) == 1):
            return None
        absolute = amax.args[0]
        if not (_is(absolute, (_aten.abs.default,)) and len(absolute.users) == 1 and absolute.args[0] in sources):
            return None
        return nodes + [amax, absolute, absolute.args[0]]  # x too: y may be widened once per use

    def _check_shape(self, val, input_node, residual, weight):
        """Skips what arfuse does not take; `val` is the sum's (a checked dtype)."""
        dtype = val.dtype
        if _val(input_node) is None or _val(residual) is None or _val(weight) is None:
            raise _Skip("the graph carries no shapes (meta['val'])")
        for name, node in (("input", input_node), ("residual", residual), ("weight", weight)):
            if _val(node).dtype != dtype:
                raise _Skip(f"the {name} is {_val(node).dtype} where the sum is {dtype}")
        hidden = _concrete(val.shape[-1])
        if hidden is None:
            raise _Skip("the hidden size is symbolic (mark it static); arfuse compiles a kernel per hidden size")
        if hidden % 8 != 0 or not 0 < hidden <= self.max_hidden:
            raise _Skip(f"hidden size {hidden}: arfuse takes multiples of 8 up to the communicator's max_hidden "
                        f"{self.max_hidden}")
        if tuple(_val(weight).shape) != (hidden,):
            raise _Skip(f"the weight has shape {tuple(_val(weight).shape)}, not ({hidden},)")
        sizes = [_concrete(d) for d in val.shape[:-1]]
        if None not in sizes and math.prod(sizes) > self.max_tokens:
            raise _Skip(f"{math.prod(sizes)} tokens: more than the communicator's max_tokens {self.max_tokens}")

    def _replace(self, add, kwargs):
        input_node, collective = self._collective(add, kwargs)
        residual = kwargs["residual"]
        val = _val(add)
        if val is None:
            raise _Skip("the graph carries no shapes (meta['val'])")
        if val.dtype not in (torch.bfloat16, torch.float16):
            raise _Skip(f"the dtype is {val.dtype}; arfuse takes bfloat16 and float16")
        norm = self._norm(add, val.dim(), val.dtype)
        self._check_shape(val, input_node, residual, norm.weight)
        if self.eps is not None and not any(abs(norm.eps - e) <= 1e-6 * abs(e) for e in self.eps):
            raise _Skip(f"eps {norm.eps} is not one of {self.eps}")
        quant = self._quant(norm) if self.quant else None
        if quant is None:
            if norm.y is None:
                raise _Skip("the norm's output is read in fp32 only, as no quantisation arfuse has")
            if norm.p32 is not None and len(norm.p32.users) > 1:
                raise _Skip("the norm's fp32 value before rounding is read by something other than its rounding")
            mode, scale, result, per_token, with_mirror = "none", None, norm.y, None, False
        else:
            mode, result, scale, per_token, with_mirror = quant.mode, quant.q, quant.scale, quant.scales, \
                bool(quant.mirror_users)
        group = quant.group if quant is not None and quant.group is not None else 128
        code = aft.mode_code(mode, norm.kind, group_size=group, mirror=with_mirror)
        graph = add.graph
        order = {n: i for i, n in enumerate(graph.nodes)}
        inputs = [input_node, residual, norm.weight] + ([scale] if scale is not None else [])
        grouping = quant.grouping if quant is not None and quant.grouping is not None else []
        inputs += [size for size in grouping if isinstance(size, torch.fx.Node)]
        outputs = [add, result] + ([per_token] if per_token is not None else [])
        if quant is not None and quant.mirror_users:
            outputs.append(norm.y)
        matched = set(norm.nodes) | {add} | ({norm.y} if norm.y is not None else set())
        if quant is not None:
            matched |= set(quant.nodes) | {quant.q} | ({per_token} if per_token is not None else set())
        external = [u for o in outputs for u in o.users if u not in matched]
        # The op goes where all its inputs exist and before anything outside the match reads what
        # it replaces; what the match computed dies with the rewrite.
        last_matched = max(matched, key=order.get)
        before = min(external + [last_matched], key=order.get)
        if any(order[i] >= order[before] for i in inputs if isinstance(i, torch.fx.Node)):
            raise _Skip("an input of the fused op is computed after a value the fused op replaces is read")
        with graph.inserting_before(before):
            fused = graph.call_function(_FUSED, (self.handle, input_node, residual, norm.weight, norm.eps, code, False,
                                                 0, scale))
            fused.meta["val"] = self._fake_outputs(input_node, residual, norm.weight, norm.eps, code, scale)
            parts = []
            for i in range(4):
                part = graph.call_function(operator.getitem, (fused, i))
                part.meta["val"] = fused.meta["val"][i]
                parts.append(part)
            out, residual_out, scales, mirror = parts
            if per_token is not None:
                scales_view = graph.call_function(_aten.unsqueeze.default, (scales, -1))
                scales_view.meta["val"] = scales.meta["val"].unsqueeze(-1)
            if grouping:  # q was computed grouped, [..., hidden / G, G]
                grouped_out = graph.call_function(_aten.view.default, (out, grouping))
                grouped_out.meta["val"] = _val(result)
                out = grouped_out
        # Only readers outside the match move to the fused op's outputs; the match itself is erased.
        outside = lambda user: user not in matched  # noqa: E731
        add.replace_all_uses_with(residual_out, delete_user_cb=outside)
        result.replace_all_uses_with(out, delete_user_cb=outside)
        if quant is not None:
            if norm.y is not None:
                norm.y.replace_all_uses_with(mirror, delete_user_cb=outside)
            if per_token is not None:
                per_token.replace_all_uses_with(scales_view, delete_user_cb=outside)
        # The collective is not removed as dead code by itself (wait_tensor counts as a side effect).
        self._erase_dead(graph, matched | set(collective) | set(parts))
        self.fused += 1

    @staticmethod
    def _erase_dead(graph, nodes):
        """Erases the nodes of `nodes` nothing reads any more, users first."""
        pending = set(nodes)
        while True:
            dead = [n for n in pending if not n.users]
            if not dead:
                return
            for n in dead:
                pending.discard(n)
                graph.erase_node(n)

    def _fake_outputs(self, input_node, residual, weight, eps, code, scale):
        vals = [_val(input_node), _val(residual), _val(weight)]
        fake_mode = detect_fake_mode(vals)
        scale_val = _val(scale) if scale is not None else None
        with contextlib.ExitStack() as stack:
            if fake_mode is not None:
                stack.enter_context(fake_mode)
            else:
                stack.enter_context(unset_fake_temporarily())
            return _FUSED(self.handle, *vals, eps, code, False, 0, scale_val)


def options(comm, **kwargs):
    """``torch.compile(model, options=options(comm))``: Inductor's options with the pass
    installed (keyword arguments go to AllreduceRmsnormFusion)."""
    return {"post_grad_custom_post_pass": AllreduceRmsnormFusion(comm, **kwargs)}


@contextlib.contextmanager
def enabled(comm, **kwargs):
    """``with enabled(comm): torch.compile(model)(x)``: the pass is installed while the block
    compiles (keyword arguments go to AllreduceRmsnormFusion); yields the pass."""
    fusion = AllreduceRmsnormFusion(comm, **kwargs)
    # A norm's eps must be a constant of the graph, not an input.
    with _inductor_config.patch(post_grad_custom_post_pass=fusion), _dynamo_config.patch(specialize_float=True):
        yield fusion


def install(comm, **kwargs):
    """Installs the pass for every later torch.compile of this process (Inductor's
    ``post_grad_custom_post_pass``); returns it."""
    fusion = AllreduceRmsnormFusion(comm, **kwargs)
    _inductor_config.post_grad_custom_post_pass = fusion
    return fusion
