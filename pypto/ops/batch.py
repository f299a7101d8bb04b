"""Batching rules of the primitives, for ``pto.vmap``, written in pypto's functional API.

Each rule is registered for level ``"batch"`` of its op and has the signature::

    rule(args, batched, size, out, **params) -> value

``args`` are the op's operands; where ``batched[i]`` holds, operand ``i`` carries the batch of
``size`` examples as a new leading axis 0 (the rest of its shape is one example's). ``out`` is
the abstract value of one example's result and ``params`` the op's parameters as traced for one
example. The result is the batched output: ``(size, *out.shape)``.

Most rules are one op on the whole batch: elementwise ops align each batched operand's example
axes to the result's, reductions and layout ops shift their axes by one, matmul moves the batch
in front of its own batch axes. Where no whole-batch form exists (``take`` with batched indices,
a hand-written kernel, a custom VJP) the rule runs the op once per example and stacks the
results, which is always correct and costs ``size`` ops.

>>> import pypto as pto
>>> from pypto.ops.table import OPS, AVal
>>> x = pto.ones((4, 3))  # a batch of 4 examples of shape (3,)
>>> rule = OPS["sum"].rules["batch"]
>>> rule([x], [True], 4, AVal((), pto.float32), axes=(0,), keepdims=False).shape
(4,)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pypto.core import dispatch
from pypto.ops import api
from pypto.ops.custom_vjp_call import find
from pypto.ops.table import OPS, AVal, register_rule, require_rule

V = Any  # an eager Tensor or a graph tracer


def _bind(name: str, args: Sequence[V], /, **params: Any) -> V:
    return dispatch.bind(OPS[name], tuple(args), params)


def _to_rank(x: V, rank: int) -> V:
    """Batched ``x`` (axis 0 the batch) with size-1 axes after the batch up to ``rank``
    example axes, so that it broadcasts as one example of that rank would."""
    have = len(x.shape) - 1
    if have >= rank:
        return x
    return api.reshape(x, (x.shape[0], *(1,) * (rank - have), *x.shape[1:]))


def broadcast_batch(x: V, size: int) -> V:
    """Unbatched ``x`` repeated for ``size`` examples (a new axis 0)."""
    return api.broadcast_to(api.reshape(x, (1, *x.shape)), (size, *x.shape))


def _elementwise(
    args: list[V], batched: list[bool], size: int, out: AVal, *, op: str, **params: Any
) -> V:
    rank = len(out.shape)
    aligned = [_to_rank(a, rank) if b else a for a, b in zip(args, batched, strict=True)]
    return _bind(op, aligned, **params)


for _name, _op in OPS.items():
    if _op.kind == "elementwise":
        register_rule("batch", _name)(
            lambda args, batched, size, out, _n=_name, **params: _elementwise(
                args, batched, size, out, op=_n, **params
            )
        )


def _reduce(name: str) -> Callable[..., V]:
    def rule(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
        (x,) = args
        nd = max(len(x.shape) - 1, 1)  # the example's axes, shifted past the batch
        if "axes" in params:
            params = {**params, "axes": tuple(a % nd + 1 for a in params["axes"])}
        else:
            params = {**params, "axis": params["axis"] % nd + 1}
        return _bind(name, [x], **params)

    return rule


for _name in ("sum", "max", "min", "argmax"):
    register_rule("batch", _name)(_reduce(_name))


@register_rule("batch", "scan")
def _scan(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    # along the last axis, which the batch axis in front leaves where it is
    return _bind("scan", args, **params)


@register_rule("batch", "scan_affine")
def _scan_affine(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    parts = [a if b else broadcast_batch(a, size) for a, b in zip(args, batched, strict=True)]
    return _bind("scan_affine", parts, **params)


@register_rule("batch", "matmul")
def matmul(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    # numpy's matmul broadcasts batch axes from the right: a batched vector becomes a one-row
    # (or one-column) matrix, and the batch goes in front of the other operand's batch axes
    a, b = args
    ba, bb = batched
    ra = len(a.shape) - ba
    rb = len(b.shape) - bb
    if ba and ra == 1:
        a = api.reshape(a, (size, 1, a.shape[1]))
        ra = 2
    if bb and rb == 1:
        b = api.reshape(b, (size, b.shape[1], 1))
        rb = 2
    lead = max(ra, rb, 2) - 2  # the examples' own batch axes
    if ba:
        a = _to_rank(a, lead + 2)
    if bb:
        b = _to_rank(b, lead + 2)
    r = api.matmul(a, b)
    return api.reshape(r, (size, *out.shape))


@register_rule("batch", "reshape")
def reshape(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    return api.reshape(args[0], (size, *out.shape))


@register_rule("batch", "broadcast_to")
def broadcast_to(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    return api.broadcast_to(_to_rank(args[0], len(out.shape)), (size, *out.shape))


@register_rule("batch", "transpose")
def transpose(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    nd = len(out.shape)
    return _bind("transpose", args, perm=(0, *(p % nd + 1 for p in params["perm"])))


@register_rule("batch", "slice")
def slice_(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    return _bind("slice", args, index=((0, size, 1), *params["index"]))


@register_rule("batch", "lax_pad")
def pad(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    return _bind("lax_pad", args, **{**params, "config": ((0, 0, 0), *params["config"])})


@register_rule("batch", "concat")
def concat(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    parts = [a if b else broadcast_batch(a, size) for a, b in zip(args, batched, strict=True)]
    return _bind("concat", parts, axis=params["axis"] % len(out.shape) + 1)


@register_rule("batch", "take")
def take(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    if batched[1]:  # each example gathers with its own indices
        return per_example("take", args, batched, size, out, **params)
    return _bind("take", args, axis=params["axis"] % (len(args[0].shape) - 1) + 1)


@register_rule("batch", "argsort_last")
def argsort_last(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    return _bind("argsort_last", args, **params)  # the last axis stays last


@register_rule("batch", "gather_last")
def gather_last(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    parts = [a if b else broadcast_batch(a, size) for a, b in zip(args, batched, strict=True)]
    return _bind("gather_last", parts, **params)


def per_example(
    name: str, args: Sequence[V], batched: Sequence[bool], size: int, out: AVal, **params: Any
) -> V:
    """The op once per example, the results stacked along a new axis 0."""
    rows = []
    for i in range(size):
        one = [api.getitem(a, i) if b else a for a, b in zip(args, batched, strict=True)]
        rows.append(api.reshape(_bind(name, one, **params), (1, *out.shape)))
    if not rows:
        return api.broadcast_to(api.asvalue(api.to_numpy(0, "vmap", out.dtype)), (0, *out.shape))
    return api.concat(rows, 0)


register_rule("batch", "kernel_call")(
    lambda args, batched, size, out, **params: per_example(
        "kernel_call", args, batched, size, out, **params
    )
)


@register_rule("batch", "custom_vjp_call")
def _call(args: list[V], batched: list[bool], size: int, out: AVal, **params: Any) -> V:
    """A call whose function batches itself (a traced ``cond``), else once per example."""
    rule = getattr(find(params["fn"]), "batch", None)
    if rule is None:
        return per_example("custom_vjp_call", args, batched, size, out, **params)
    return rule(args, batched, size, params.get("result", 0))


require_rule("batch", lambda op: not op.is_composite)
