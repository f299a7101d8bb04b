"""Reverse-mode rules (VJPs) of the differentiable primitives, written in pypto's functional API.

Each rule is registered for level ``"vjp"`` of its op and has the signature::

    rule(ct, *primals, out, **params) -> tuple

``ct`` is the cotangent of the output (the output's shape and dtype), ``primals`` are the op's
operands, ``out`` is the primal output and ``params`` are the op's parameters as bound. The result
has one entry per primal: its cotangent, with exactly that primal's shape and dtype, or ``None``
for a zero cotangent. Integer and bool primals always get ``None``, as in JAX.

The rules only call :mod:`pypto.ops.api` functions, so the same rule runs on eager tensors and on
graph tracers, and float16/bfloat16 cotangents obey the numerics contract of those ops. Ties follow
JAX: ``maximum``/``minimum`` give each tied operand half, ``max``/``min`` reductions split the
cotangent equally among the tied elements, and ``abs`` has derivative 1 at ±0.

>>> import pypto as pto
>>> from pypto.ops.table import OPS
>>> x = pto.tensor([1.0, 2.0])
>>> OPS["mul"].rules["vjp"](pto.ones(2), x, pto.tensor(3.0), out=x * 3.0)[1].numpy()
array(3., dtype=float32)
"""

from __future__ import annotations

import builtins
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core import dispatch
from pypto.ops import api, layout
from pypto.ops.indexing import scatter_sum
from pypto.ops.scan import SCAN, SCAN_AFFINE
from pypto.ops.sorting import ARGSORT_LAST, GATHER_LAST
from pypto.ops.table import register_rule, require_rule

# Rules are named after their ops (so abs, max, ... are shadowed here: use builtins.abs).
V = Any  # an eager Tensor or a graph tracer
Cts = tuple[V | None, ...]
Rule = Callable[..., Cts]


def unbroadcast(ct: V, shape: Sequence[int]) -> V:
    """``ct`` summed over the dims that broadcasting added or stretched, reshaped to ``shape``.

    >>> import pypto as pto
    >>> unbroadcast(pto.ones((2, 3)), (1, 3)).numpy()
    array([[2., 2., 2.]], dtype=float32)
    """
    shape = tuple(shape)
    have = tuple(ct.shape)
    if have == shape:
        return ct
    lead = len(have) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and have[lead + i] != 1
    )
    if axes:
        ct = api.sum(ct, axes, True)
    return api.reshape(ct, shape)


def _floats_only(rule: Rule) -> Rule:
    """Zero cotangents for every primal when the output is not floating (integer or bool math)."""

    @functools.wraps(rule)
    def wrapped(ct: V, *primals: V, out: V, **params: Any) -> Cts:
        if not out.dtype.is_floating:
            return (None,) * len(primals)
        return rule(ct, *primals, out=out, **params)

    return wrapped


def _keepdims(v: V, shape: Sequence[int], axes: Sequence[int]) -> V:
    """``v``, the result of reducing ``shape`` over ``axes``, reshaped as with keepdims."""
    return api.reshape(v, tuple(1 if i in axes else s for i, s in enumerate(shape)))


def _swap_last(v: V) -> V:
    nd = len(v.shape)
    return api.transpose(v, (*range(nd - 2), nd - 1, nd - 2))


def _pad(v: V, config: layout.PadConfig) -> V:
    """``v`` padded with zeros (the internal ``lax_pad`` primitive; see :data:`layout.PAD`)."""
    if all(p == 0 for dim in config for p in dim):
        return v
    return dispatch.bind(layout.PAD, (v,), {"config": config})


# Unary math: the derivative reuses the output where it can.


@register_rule("vjp", "exp")
def exp(ct: V, x: V, *, out: V) -> Cts:
    """d exp(x) = exp(x)."""
    return (api.mul(ct, out),)


@register_rule("vjp", "log")
def log(ct: V, x: V, *, out: V) -> Cts:
    """d log(x) = 1 / x."""
    return (api.div(ct, x),)


@register_rule("vjp", "sqrt")
def sqrt(ct: V, x: V, *, out: V) -> Cts:
    """d √x = 1 / (2√x)."""
    return (api.div(api.mul(ct, 0.5), out),)


@register_rule("vjp", "rsqrt")
def rsqrt(ct: V, x: V, *, out: V) -> Cts:
    """d x^-½ = -½ · x^-½ / x."""
    return (api.mul(ct, api.mul(api.div(out, x), -0.5)),)


@register_rule("vjp", "reciprocal")
def reciprocal(ct: V, x: V, *, out: V) -> Cts:
    """d (1/x) = -(1/x)²."""
    return (api.neg(api.mul(ct, api.mul(out, out))),)


@register_rule("vjp", "tanh")
def tanh(ct: V, x: V, *, out: V) -> Cts:
    """d tanh(x) = 1 - tanh², as (1 + t)(1 - t): 1 - t is exact near t = 1 (as in JAX)."""
    return (api.mul(api.add(ct, api.mul(ct, out)), api.sub(1.0, out)),)


@register_rule("vjp", "sigmoid")
def sigmoid(ct: V, x: V, *, out: V) -> Cts:
    """d sigmoid(x) = s(1 - s) with s = sigmoid(x)."""
    return (api.mul(ct, api.mul(out, api.sub(1.0, out))),)


@register_rule("vjp", "sin")
def sin(ct: V, x: V, *, out: V) -> Cts:
    """d sin(x) = cos(x)."""
    return (api.mul(ct, api.cos(x)),)


@register_rule("vjp", "cos")
def cos(ct: V, x: V, *, out: V) -> Cts:
    """d cos(x) = -sin(x)."""
    return (api.neg(api.mul(ct, api.sin(x))),)


@register_rule("vjp", "stop_gradient")
def stop_gradient(ct: V, x: V, *, out: V) -> Cts:
    """A constant to autodiff: no cotangent flows back."""
    return (None,)


@register_rule("vjp", "optimization_barrier")
@register_rule("vjp", "checkpoint_name")
def identity(ct: V, x: V, *, out: V, **params: object) -> Cts:
    """The value itself: the cotangent passes through."""
    return (ct,)


@register_rule("vjp", "neg")
@_floats_only
def neg(ct: V, x: V, *, out: V) -> Cts:
    """d (-x) = -1."""
    return (api.neg(ct),)


@register_rule("vjp", "abs")
@_floats_only
def abs(ct: V, x: V, *, out: V) -> Cts:
    """d |x| = 1 where x >= 0 (so 1 at ±0, as JAX), else -1."""
    return (api.where(api.greater_equal(x, 0), ct, api.neg(ct)),)


# Binary arithmetic: operands broadcast, so each cotangent is summed back to its operand's shape.


@register_rule("vjp", "add")
@_floats_only
def add(ct: V, x: V, y: V, *, out: V) -> Cts:
    """d (x + y) = (1, 1)."""
    return (unbroadcast(ct, x.shape), unbroadcast(ct, y.shape))


@register_rule("vjp", "sub")
@_floats_only
def sub(ct: V, x: V, y: V, *, out: V) -> Cts:
    """d (x - y) = (1, -1)."""
    return (unbroadcast(ct, x.shape), unbroadcast(api.neg(ct), y.shape))


@register_rule("vjp", "mul")
@_floats_only
def mul(ct: V, x: V, y: V, *, out: V) -> Cts:
    """d (x · y) = (y, x)."""
    return (unbroadcast(api.mul(ct, y), x.shape), unbroadcast(api.mul(ct, x), y.shape))


@register_rule("vjp", "div")
def div(ct: V, x: V, y: V, *, out: V) -> Cts:
    """d (x / y) = (1/y, -(x/y)/y)."""
    gx = api.div(ct, y)
    gy = api.div(api.neg(api.mul(ct, out)), y)
    return (unbroadcast(gx, x.shape), unbroadcast(gy, y.shape))


def _choose(ct: V, x: V, y: V, out: V) -> Cts:
    """The cotangent goes to the operand equal to the result, half each on a tie (as JAX)."""
    x_won = api.equal(x, out)
    y_won = api.equal(y, out)
    half = api.mul(ct, 0.5)
    gx = api.where(x_won, api.where(y_won, half, ct), 0.0)
    gy = api.where(y_won, api.where(x_won, half, ct), 0.0)
    return (unbroadcast(gx, x.shape), unbroadcast(gy, y.shape))


@register_rule("vjp", "maximum")
@_floats_only
def maximum(ct: V, x: V, y: V, *, out: V) -> Cts:
    """To the larger operand; half each on a tie."""
    return _choose(ct, x, y, out)


@register_rule("vjp", "minimum")
@_floats_only
def minimum(ct: V, x: V, y: V, *, out: V) -> Cts:
    """To the smaller operand; half each on a tie."""
    return _choose(ct, x, y, out)


@register_rule("vjp", "pow")
@_floats_only
def pow(ct: V, x: V, y: V, *, out: V) -> Cts:
    """d x^y = (y · x^(y-1), log(x) · x^y), the second taken as 0 where x == 0 (as JAX)."""
    gx = api.mul(ct, api.mul(y, api.pow(x, api.sub(y, 1.0))))
    log_x = api.log(api.where(api.equal(x, 0.0), 1.0, x))
    gy = api.mul(ct, api.mul(log_x, out))
    return (unbroadcast(gx, x.shape), unbroadcast(gy, y.shape))


@register_rule("vjp", "fmod")
@_floats_only
def fmod(ct: V, x: V, y: V, *, out: V) -> Cts:
    """d fmod(x, y) = (1, -trunc(x / y)), as JAX's rem."""
    from pypto.ops import composite

    q = api.div(x, y)
    trunc = api.mul(composite.sign(q), composite.floor(api.abs(q)))
    gy = api.neg(api.mul(ct, trunc))
    return (unbroadcast(ct, x.shape), unbroadcast(gy, y.shape))


@register_rule("vjp", "where")
@_floats_only
def where(ct: V, cond: V, x: V, y: V, *, out: V) -> Cts:
    """The cotangent goes to the selected operand; the condition gets none."""
    gx = api.where(cond, ct, 0.0)
    gy = api.where(cond, 0.0, ct)
    return (None, unbroadcast(gx, x.shape), unbroadcast(gy, y.shape))


@register_rule("vjp", "cast")
def cast(ct: V, x: V, *, out: V, dtype: dt.DType) -> Cts:
    """The cotangent cast back to the input's float dtype; none through an integer or bool."""
    if not (x.dtype.is_floating and dtype.is_floating):
        return (None,)
    return (api.cast(ct, x.dtype),)


# Reductions.


@register_rule("vjp", "sum")
@_floats_only
def sum(ct: V, x: V, *, out: V, axes: tuple[int, ...], keepdims: bool) -> Cts:
    """Every summed element gets the cotangent of its sum."""
    return (api.broadcast_to(_keepdims(ct, x.shape, axes), x.shape),)


def _shift(v: V, later: bool) -> V:
    """``v`` moved one place along its last axis, a 0 entering: ``out[..., i] = v[..., i-1]``
    when ``later``, else ``v[..., i+1]``."""
    n = v.shape[-1]
    body = api.getitem(v, (Ellipsis, slice(0, n - 1) if later else slice(1, n)))
    return _pad(body, ((0, 0, 0),) * (len(v.shape) - 1) + ((1, 0, 0) if later else (0, 1, 0),))


def _back(a: V, b: V, reverse: bool) -> V:
    """The recurrence that carries a scan's cotangent back, run the other way:
    ``g[i] = b[i] + a[j]·g[j]`` with ``j`` the element after ``i`` in the scan's order."""
    return dispatch.bind(SCAN_AFFINE, (_shift(a, reverse), b), {"reverse": not reverse})


def _first(v: V, reverse: bool) -> V:
    """1 where a scan starts (the first position of the last axis, or the last when
    ``reverse``), 0 elsewhere, in ``v``'s dtype."""
    e = np.zeros(v.shape[-1], v.dtype.np)
    e[-1 if reverse else 0] = 1
    return api.asvalue(e)


@register_rule("vjp", "scan")
@_floats_only
def scan(ct: V, x: V, *, out: V, op: str, reverse: bool) -> Cts:
    """Running sums: element i reaches every sum after it, so its cotangent is the running sum
    of the cotangent taken the other way. Running products: ``G[i] = ct[i] + x[i+1]·G[i+1]`` the
    other way, times the product before ``i`` — no division, so exact where ``x`` has zeros.
    Running maxima (minima): each output's cotangent goes to the first element that reached it
    (JAX, through its scan tree, splits ties among equal elements instead)."""
    if op == "add":
        return (dispatch.bind(SCAN, (ct,), {"op": "add", "reverse": not reverse}),)
    before = _shift(out, not reverse)  # the scan's result one element earlier (0 at its start)
    if op == "mul":
        return (api.mul(api.add(before, _first(out, reverse)), _back(x, ct, reverse)),)
    # a record: where the scan starts, or an element past the previous running extreme
    past = (api.greater if op == "max" else api.less)(x, before)
    rec = api.maximum(api.cast(past, x.dtype), _first(x, reverse))
    # G[i] = ct[i] + (1 - rec[j])·G[j]: the cotangents up to the next record, summed
    return (api.mul(rec, _back(api.sub(1.0, rec), ct, reverse)),)


@register_rule("vjp", "scan_affine")
def scan_affine(ct: V, a: V, b: V, *, out: V, reverse: bool) -> Cts:
    """The transpose of the recurrence runs the other way: ``λ[i] = ct[i] + a[j]·λ[j]`` (``j``
    the element after ``i``) is ``b``'s cotangent, and ``a[i]``'s is ``λ[i]`` times the ``h``
    before ``i`` (the first ``a`` is never read)."""
    lam = _back(a, ct, reverse)
    return (api.mul(lam, _shift(out, not reverse)), lam)


def _extreme(ct: V, x: V, out: V, axes: tuple[int, ...]) -> Cts:
    """The elements equal to the result share its cotangent equally (as JAX)."""
    hit = api.cast(api.equal(x, _keepdims(out, x.shape, axes)), x.dtype)
    count = api.sum(hit, axes, True)
    return (api.mul(api.div(_keepdims(ct, x.shape, axes), count), hit),)


@register_rule("vjp", "max")
@_floats_only
def max(ct: V, x: V, *, out: V, axes: tuple[int, ...], keepdims: bool) -> Cts:
    """To the maximal elements, split equally among ties."""
    return _extreme(ct, x, out, axes)


@register_rule("vjp", "min")
@_floats_only
def min(ct: V, x: V, *, out: V, axes: tuple[int, ...], keepdims: bool) -> Cts:
    """To the minimal elements, split equally among ties."""
    return _extreme(ct, x, out, axes)


@register_rule("vjp", "matmul")
@_floats_only
def matmul(ct: V, a: V, b: V, *, out: V) -> Cts:
    """(ct @ bᵀ, aᵀ @ ct), with 1-d operands as a row / column and batch dims summed back."""
    a2 = a if len(a.shape) >= 2 else api.reshape(a, (1, a.shape[0]))
    b2 = b if len(b.shape) >= 2 else api.reshape(b, (b.shape[0], 1))
    batch = tuple(out.shape[: len(out.shape) - (len(a.shape) >= 2) - (len(b.shape) >= 2)])
    ct2 = api.reshape(ct, (*batch, a2.shape[-2], b2.shape[-1]))
    ga = unbroadcast(api.matmul(ct2, _swap_last(b2)), a2.shape)
    gb = unbroadcast(api.matmul(_swap_last(a2), ct2), b2.shape)
    return (api.reshape(ga, a.shape), api.reshape(gb, b.shape))


# Layout: the cotangent moves back to where each element came from.


@register_rule("vjp", "reshape")
@_floats_only
def reshape(ct: V, x: V, *, out: V, shape: tuple[int, ...]) -> Cts:
    """Back to the input's shape."""
    return (api.reshape(ct, x.shape),)


@register_rule("vjp", "transpose")
@_floats_only
def transpose(ct: V, x: V, *, out: V, perm: tuple[int, ...]) -> Cts:
    """The inverse permutation."""
    return (api.transpose(ct, tuple(int(i) for i in np.argsort(perm))),)


@register_rule("vjp", "broadcast_to")
@_floats_only
def broadcast_to(ct: V, x: V, *, out: V, shape: tuple[int, ...]) -> Cts:
    """Summed over the broadcast dims."""
    return (unbroadcast(ct, x.shape),)


@register_rule("vjp", "concat")
@_floats_only
def concat(ct: V, *xs: V, out: V, axis: int) -> Cts:
    """Each input gets its own window of the cotangent."""
    cts = []
    lo = 0
    for x in xs:
        hi = lo + x.shape[axis]
        cts.append(api.getitem(ct, (slice(None),) * axis + (slice(lo, hi),)))
        lo = hi
    return tuple(cts)


@register_rule("vjp", "slice")
@_floats_only
def slice_(ct: V, x: V, *, out: V, index: layout.SliceSpec) -> Cts:
    """The cotangent placed back at the strided window, zeros elsewhere (a ``pad``).

    Dims with a negative step are reversed first, so the pad only needs positive strides.
    """
    flip = []
    config = []
    for (start, _, step), n, m in zip(index, x.shape, ct.shape, strict=True):
        if m == 0:
            flip.append(slice(None))
            config.append((0, n, 0))
            continue
        first = start if step > 0 else start + (m - 1) * step  # the lowest index taken
        last = first + (m - 1) * builtins.abs(step)
        flip.append(slice(None, None, -1) if step < 0 and m > 1 else slice(None))
        config.append((first, n - 1 - last, builtins.abs(step) - 1))
    return (_pad(api.getitem(ct, tuple(flip)), tuple(config)),)


@register_rule("vjp", "lax_pad")
@_floats_only
def pad(ct: V, x: V, *, out: V, config: layout.PadConfig, value: float = 0) -> Cts:
    """The window of the cotangent where the input's elements were placed (a strided slice);
    the padding value is a constant."""
    key = tuple(
        slice(lo, lo + n + builtins.max(n - 1, 0) * mid, mid + 1)
        for (lo, _, mid), n in zip(config, x.shape, strict=True)
    )
    return (api.getitem(ct, key),)


@register_rule("vjp", "take")
@_floats_only
def take(ct: V, x: V, indices: V, *, out: V, axis: int) -> Cts:
    """A scatter-add: a one-hot matrix of the indices (against an iota) times the cotangent
    (:func:`pypto.ops.indexing.scatter_sum`, so an infinite cotangent reaches only its row).

    Repeated indices sum their cotangents; the indices get none.
    """
    n = x.shape[axis]
    k = math.prod(indices.shape)
    idx = api.reshape(api.cast(indices, dt.int32), (1, k))
    idx = api.where(api.less(idx, 0), api.add(idx, n), idx)
    iota = api.asvalue(np.arange(n, dtype=np.int32).reshape(n, 1))
    pre = math.prod(x.shape[:axis])
    post = math.prod(x.shape[axis + 1 :])
    g = scatter_sum(api.equal(iota, idx), api.reshape(ct, (pre, k, post)))  # [pre, n, post]
    return (api.reshape(g, x.shape), None)


@register_rule("vjp", "gather_last")
@_floats_only
def gather_last(ct: V, x: V, idx: V, *, out: V, perm: bool) -> Cts:
    """A scatter-add of the cotangent to the positions taken: a one-hot of the indices against
    the row's positions, times the cotangent, summed over the taken ones (repeated indices sum).
    For a permutation (``perm``), each element's cotangent is the one of the position it moved
    to: the cotangent reordered by the inverse permutation (its own ascending argsort)."""
    if perm:
        # positions below 2^24 are exact in float32, which sorts in one pass on the NPU (int32
        # keys take two)
        keys = api.cast(idx, dt.float32) if idx.shape[-1] <= 2**24 else idx
        inv = dispatch.bind(ARGSORT_LAST, (keys,), {"order": "ascending"})
        return (dispatch.bind(GATHER_LAST, (ct, inv), {"perm": True}), None)
    *lead, n = x.shape
    k = idx.shape[-1]
    iota = api.asvalue(np.arange(n, dtype=np.int32).reshape(n, 1))
    hit = api.equal(iota, api.reshape(idx, (*lead, 1, k)))  # [..., n, k]
    # (a select, not a product with the mask: 0·inf would be NaN)
    g = api.sum(api.where(hit, api.reshape(ct, (*lead, 1, k)), 0.0), -1)
    return (g, None)


# Normalisations, whole: the graph's autodiff applies these where it finds the idiom of a
# softmax or a log_softmax (see pypto.graph.autodiff), as JAX's own rules for them do. Through
# the primitives, the softmax's division and exponential would keep exp(x) and its sums for the
# backward and hand three full-size tensors to it; the whole rule needs only the output.


def softmax(ct: V, out: V, axes: tuple[int, ...]) -> V:
    """The cotangent of ``x`` in ``out = softmax(x)`` over ``axes``: out·(ct - Σ ct·out).

    >>> import pypto as pto
    >>> softmax(pto.tensor([1.0, 0.0]), pto.tensor([0.5, 0.5]), (0,)).numpy()
    array([ 0.25, -0.25], dtype=float32)
    """
    return api.mul(out, api.sub(ct, api.sum(api.mul(ct, out), axes, True)))


def softmax_matmul(ct: V, p: V, v: V, out: V) -> tuple[V, V]:
    """The cotangents of ``x`` and ``v`` in ``out = softmax(x) @ v`` (softmax over the last
    axis, ``p`` its result): ``p·(g vᵀ - Σ g·out)`` and ``pᵀ g``. The row sums of ``(g vᵀ)·p``
    that the softmax's rule needs equal those of ``g·out`` (Σⱼ pᵢⱼ Σₖ gᵢₖ vⱼₖ = Σₖ gᵢₖ outᵢₖ),
    so they come from ``[.., Lq, Dv]`` tensors rather than the ``[.., Lq, Lk]`` ones, and the
    rest is elementwise on ``g vᵀ`` (flash attention's backward does the same).

    >>> import pypto as pto
    >>> p = pto.tensor([[0.5, 0.5]]); v = pto.tensor([[1.0], [3.0]])
    >>> [a.numpy().tolist() for a in softmax_matmul(pto.ones((1, 1)), p, v, p @ v)]
    [[[-0.5, 0.5]], [[0.5], [0.5]]]
    """
    # the row sums first: then g vᵀ's matmul takes the rest as its epilogue
    rows = api.sum(api.mul(ct, out), (len(out.shape) - 1,), True)
    dp, dv = matmul(ct, p, v, out=out)
    return api.mul(p, api.sub(dp, rows)), dv


def log_softmax(ct: V, out: V, axes: tuple[int, ...]) -> V:
    """The cotangent of ``x`` in ``out = log_softmax(x)`` over ``axes``: ct - exp(out)·Σ ct.

    >>> import pypto as pto
    >>> log_softmax(pto.tensor([1.0, 0.0]), pto.log(pto.tensor([0.5, 0.5])), (0,)).numpy()
    array([ 0.5, -0.5], dtype=float32)
    """
    return api.sub(ct, api.mul(api.exp(out), api.sum(ct, axes, True)))


require_rule("vjp", lambda op: not op.is_composite and op.differentiable)
