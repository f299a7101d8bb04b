"""``jax.lax``'s array functions over pypto's ops, for code written against ``jax.lax``.

Most are pypto's own functions under ``jax.lax``'s names and argument orders
(``lax.clamp(lo, x, hi)``, ``lax.cumsum(x, axis=0)``, ``lax.rev(x, dims)``); the rest are
written here with ``jax.lax``'s semantics where they differ from numpy's: ``div`` of
integers rounds toward zero, ``rem`` takes the dividend's sign, ``round`` rounds halves away
from zero by default, ``dynamic_slice`` clamps its start into the operand, ``dot_general``
contracts and batches the named axes. One difference: pypto promotes mixed operand dtypes
where ``jax.lax`` requires them equal.

>>> import pypto as pto
>>> pto.lax.div(pto.tensor([-7, 7]), 2).numpy()
array([-3,  3], dtype=int32)
>>> pto.lax.dynamic_slice(pto.arange(6), (4,), (3,)).numpy()
array([3, 4, 5], dtype=int32)
"""

from __future__ import annotations

import builtins
import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import DTypeError, ShapeError
from pypto.ops import activations, api, composite, numeric, numpy_lib, rules, special, trig
from pypto.ops.conv import (
    _BY_NAME,
    _lax_computations,
    conv_dimension_numbers,
    conv_general_dilated,
    preferred,
)

__all__ = [
    "RaggedDotDimensionNumbers",
    "abs",
    "acos",
    "acosh",
    "add",
    "approx_max_k",
    "approx_min_k",
    "argmax",
    "argmin",
    "asin",
    "asinh",
    "associative_scan",
    "atan",
    "atan2",
    "atanh",
    "batch_matmul",
    "bessel_i0e",
    "bessel_i1e",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "broadcast",
    "broadcast_in_dim",
    "broadcast_like",
    "broadcast_shapes",
    "broadcast_to_rank",
    "broadcasted_iota",
    "cbrt",
    "ceil",
    "clamp",
    "clz",
    "collapse",
    "concatenate",
    "conv_general_dilated_patches",
    "convert_element_type",
    "cos",
    "cosh",
    "cumlogsumexp",
    "cummax",
    "cummin",
    "cumprod",
    "cumsum",
    "digamma",
    "div",
    "dot",
    "dot_general",
    "dynamic_index_in_dim",
    "dynamic_slice",
    "dynamic_slice_in_dim",
    "dynamic_update_index_in_dim",
    "dynamic_update_slice",
    "dynamic_update_slice_in_dim",
    "empty",
    "eq",
    "erf",
    "erf_inv",
    "erfc",
    "exp",
    "exp2",
    "expand_dims",
    "expm1",
    "floor",
    "full",
    "full_like",
    "ge",
    "gt",
    "index_in_dim",
    "index_take",
    "integer_pow",
    "iota",
    "is_finite",
    "le",
    "lgamma",
    "log",
    "log1p",
    "logistic",
    "lt",
    "max",
    "min",
    "mul",
    "mulhi",
    "ne",
    "neg",
    "nextafter",
    "optimization_barrier",
    "polygamma",
    "population_count",
    "pow",
    "ragged_dot",
    "ragged_dot_general",
    "reciprocal",
    "reduce",
    "reduce_and",
    "reduce_max",
    "reduce_min",
    "reduce_or",
    "reduce_precision",
    "reduce_prod",
    "reduce_sum",
    "reduce_xor",
    "rem",
    "reshape",
    "rev",
    "round",
    "rsqrt",
    "select",
    "select_n",
    "shift_left",
    "shift_right_arithmetic",
    "shift_right_logical",
    "sign",
    "sin",
    "sinh",
    "slice",
    "slice_in_dim",
    "sort",
    "sort_key_val",
    "split",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "stop_gradient",
    "sub",
    "tan",
    "tanh",
    "tile",
    "top_k",
    "transpose",
    "unstack",
    "zeta",
]

# the same functions under jax.lax's names
abs = api.abs
acos, acosh, asin, asinh = trig.arccos, trig.arccosh, trig.arcsin, trig.arcsinh
atan, atanh, atan2 = trig.arctan, trig.arctanh, trig.arctan2
add, sub, mul = api.add, api.sub, api.mul
max, min = api.maximum, api.minimum
eq, ne, lt, le, gt, ge = (
    api.equal,
    api.not_equal,
    api.less,
    api.less_equal,
    api.greater,
    api.greater_equal,
)
neg, exp, expm1, log, log1p = api.neg, api.exp, composite.expm1, api.log, composite.log1p
exp2 = numpy_lib.exp2
sin, cos, tan, tanh = api.sin, api.cos, numpy_lib.tan, api.tanh
sinh, cosh = numpy_lib.sinh, numpy_lib.cosh
sqrt, rsqrt, reciprocal, logistic = api.sqrt, api.rsqrt, api.reciprocal, api.sigmoid
cbrt, erf, erfc = numeric.cbrt, activations.erf, activations.erfc
lgamma, digamma, erf_inv = special.lgamma, special.digamma, special.erf_inv
bessel_i0e, bessel_i1e, zeta = special.i0e, special.i1e, special.zeta
ceil, floor, sign, square = composite.ceil, composite.floor, composite.sign, composite.square
nextafter, is_finite = numpy_lib.nextafter, composite.isfinite
pow = api.pow
bitwise_and, bitwise_or = api.bitwise_and, api.bitwise_or
bitwise_xor, bitwise_not = api.bitwise_xor, api.bitwise_not
shift_left, shift_right_arithmetic = api.left_shift, api.right_shift
stop_gradient = api.stop_gradient
batch_matmul = api.matmul
cumsum, cumprod, cummax, cummin = (
    composite.cumsum,
    composite.cumprod,
    composite.cummax,
    composite.cummin,
)
top_k = composite.top_k
broadcast_shapes = numpy_lib.broadcast_shapes


def expand_dims(array: Any, dimensions: Sequence[int]) -> Any:
    """``array`` with size-1 axes inserted at ``dimensions`` (of the result)."""
    return composite.expand_dims(array, tuple(dimensions))


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    """The operands joined along axis ``dimension`` (``jax.lax.concatenate``)."""
    return api.concat(list(operands), dimension)


def div(x: Any, y: Any) -> Any:
    """``x / y``; integers round toward zero (C's division, as ``jax.lax.div``), not down."""
    u, v = api.promote("div", (x, y))
    if u.dtype.is_floating:  # type: ignore[attr-defined]
        return api.div(u, v)
    q = composite.floor_divide(u, v)
    # floor and truncation differ when the division is inexact and the signs differ
    inexact = api.not_equal(api.mul(q, v), u)
    signs = api.not_equal(api.less(u, 0), api.less(v, 0))
    up = composite.logical_and(inexact, signs)
    return api.where(up, api.add(q, 1), q)


def rem(x: Any, y: Any) -> Any:
    """The remainder of :func:`div`: ``x - div(x, y) * y``, with the dividend's sign
    (``jax.lax.rem``, C's ``%``; numpy's ``fmod``)."""
    return api.fmod(x, y)


def round(x: Any, rounding_method: int = 0) -> Any:
    """``jax.lax.round``: halves away from zero (``rounding_method=0``, the default) or to
    even (``1``, numpy's ``round``)."""
    if int(rounding_method) == 1:
        return composite.round(x)
    if int(rounding_method) != 0:
        raise ShapeError(
            f"rounding_method {rounding_method!r} is not 0 (away from zero) or 1 (to even)",
            op="lax.round",
        )
    v = api.asvalue(x, "lax.round")
    return api.mul(composite.sign(v), composite.floor(api.add(api.abs(v), 0.5)))


def clamp(min: Any, x: Any, max: Any) -> Any:
    """``jax.lax.clamp(min, x, max)``: ``x`` clipped to ``[min, max]`` (note the order)."""
    return composite.clip(x, min, max)


def convert_element_type(operand: Any, new_dtype: Any) -> Any:
    """``operand`` converted to ``new_dtype``, as ``jax.lax.convert_element_type``."""
    return api.cast(api.asvalue(operand, "lax.convert_element_type"), dt.dtype(new_dtype))


def integer_pow(x: Any, y: int) -> Any:
    """``x ** y`` for a constant integer ``y`` (repeated products, as ``jax.lax``)."""
    n = rules.integer("lax.integer_pow", "y", y)
    v = api.asvalue(x, "lax.integer_pow")
    r: Any = None
    base, k = v, builtins.abs(n)
    while k:  # square and multiply
        if k & 1:
            r = base if r is None else api.mul(r, base)
        k >>= 1
        if k:
            base = api.mul(base, base)
    if r is None:
        r = api.add(api.mul(v, 0), 1)
    return api.reciprocal(r) if n < 0 else r


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``on_true`` where ``pred``, else ``on_false`` (``jax.lax.select``)."""
    return api.where(pred, on_true, on_false)


def select_n(which: Any, *cases: Any) -> Any:
    """``cases[which]`` elementwise (``which`` bool for two cases, else integers in range)."""
    if not cases:
        raise ShapeError("select_n needs at least one case", op="lax.select_n")
    w = api.asvalue(which, "lax.select_n")
    out = cases[0]
    for i, c in enumerate(cases[1:], 1):
        out = api.where(w if w.dtype is dt.bool_ else api.equal(w, i), c, out)  # type: ignore[attr-defined]
    return out


def _axes(op: str, axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(rules.integer(op, "axes", a) for a in axes)


def reduce_sum(operand: Any, axes: Sequence[int]) -> Any:
    """The sum over ``axes`` (``jax.lax.reduce_sum``: in the operand's dtype)."""
    v = api.asvalue(operand, "lax.reduce_sum")
    r = api.sum(v, _axes("lax.reduce_sum", axes))
    return api.cast(r, v.dtype) if r.dtype is not v.dtype else r  # type: ignore[attr-defined]


def reduce_prod(operand: Any, axes: Sequence[int]) -> Any:
    """The product over ``axes``, in the operand's dtype."""
    v = api.asvalue(operand, "lax.reduce_prod")
    r = composite.prod(v, _axes("lax.reduce_prod", axes))
    return api.cast(r, v.dtype) if r.dtype is not v.dtype else r  # type: ignore[attr-defined]


def reduce_max(operand: Any, axes: Sequence[int]) -> Any:
    """The maximum over ``axes``."""
    return api.max(operand, _axes("lax.reduce_max", axes))


def reduce_min(operand: Any, axes: Sequence[int]) -> Any:
    """The minimum over ``axes``."""
    return api.min(operand, _axes("lax.reduce_min", axes))


def reduce_and(operand: Any, axes: Sequence[int]) -> Any:
    """Whether every element over ``axes`` is true (bools)."""
    return composite.all(operand, _axes("lax.reduce_and", axes))


def reduce_or(operand: Any, axes: Sequence[int]) -> Any:
    """Whether any element over ``axes`` is true (bools)."""
    return composite.any(operand, _axes("lax.reduce_or", axes))


def argmax(operand: Any, axis: int, index_dtype: Any = dt.int32) -> Any:
    """The index of the first maximum along ``axis``, in ``index_dtype``."""
    return api.cast(api.argmax(operand, axis), dt.dtype(index_dtype))


def argmin(operand: Any, axis: int, index_dtype: Any = dt.int32) -> Any:
    """The index of the first minimum along ``axis``, in ``index_dtype``."""
    return api.cast(composite.argmin(operand, axis), dt.dtype(index_dtype))


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """``jax.lax.sort``: one operand sorted along ``dimension``, or a sequence of operands
    sorted together by the first (``num_keys=1``), each reordered as it."""
    if not isinstance(operand, tuple | list):
        return composite.sort(operand, dimension)
    if rules.integer("lax.sort", "num_keys", num_keys) != 1:
        raise ShapeError(
            f"num_keys={num_keys}: sorting by several keys is not supported",
            op="lax.sort",
            hint="sort by one combined key, or sort repeatedly from the last key (stable)",
        )
    order = composite.argsort(operand[0], dimension, stable=True)
    return [composite.take_along_axis(o, order, dimension) for o in operand]


def reshape(operand: Any, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None) -> Any:
    """``operand`` (transposed by ``dimensions`` first, when given) in shape ``new_sizes``."""
    v = api.asvalue(operand, "lax.reshape")
    if dimensions is not None:
        v = api.transpose(v, tuple(dimensions))
    return api.reshape(v, tuple(new_sizes))


def transpose(operand: Any, permutation: Sequence[int]) -> Any:
    """``operand`` with its axes in the order ``permutation``."""
    return api.transpose(operand, tuple(permutation))


def squeeze(array: Any, dimensions: Sequence[int]) -> Any:
    """``array`` without the size-1 ``dimensions``."""
    return composite.squeeze(array, tuple(dimensions))


def rev(operand: Any, dimensions: Sequence[int]) -> Any:
    """``operand`` reversed along ``dimensions``."""
    v = api.asvalue(operand, "lax.rev")
    return composite.flip(v, tuple(dimensions)) if len(dimensions) else v


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Any:
    """Axes ``start_dimension`` to ``stop_dimension`` (exclusive) merged into one."""
    v = api.asvalue(operand, "lax.collapse")
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    lo = start_dimension % len(shape) if shape else 0
    hi = len(shape) if stop_dimension is None else stop_dimension % (len(shape) + 1)
    return api.reshape(v, (*shape[:lo], math.prod(shape[lo:hi]), *shape[hi:]))


def slice(
    operand: Any,
    start_indices: Sequence[int],
    limit_indices: Sequence[int],
    strides: Sequence[int] | None = None,
) -> Any:
    """``operand[start:limit:stride]`` on every axis (``jax.lax.slice``)."""
    steps = strides if strides is not None else (1,) * len(start_indices)
    key = tuple(
        builtins.slice(int(a), int(b), int(s))
        for a, b, s in zip(start_indices, limit_indices, steps, strict=True)
    )
    return api.getitem(api.asvalue(operand, "lax.slice"), key)


def slice_in_dim(
    operand: Any, start_index: int | None, limit_index: int | None, stride: int = 1, axis: int = 0
) -> Any:
    """``operand[start:limit:stride]`` along ``axis`` only."""
    v = api.asvalue(operand, "lax.slice_in_dim")
    key = [builtins.slice(None)] * len(v.shape)  # type: ignore[attr-defined]
    key[axis] = builtins.slice(start_index, limit_index, stride)
    return api.getitem(v, tuple(key))


def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Any:
    """Element ``index`` along ``axis`` (kept as a size-1 axis when ``keepdims``)."""
    v = api.asvalue(operand, "lax.index_in_dim")
    n = v.shape[axis]  # type: ignore[attr-defined]
    i = index + n if index < 0 else index
    r = slice_in_dim(v, i, i + 1, 1, axis)
    return r if keepdims else composite.squeeze(r, axis)


def _starts(op: str, v: Any, starts: Sequence[Any], sizes: Sequence[int]) -> list[Any]:
    """Each start, negative ones counted from the end, clamped into ``[0, dim - size]`` (as
    JAX), a number or an int32 scalar."""
    shape = tuple(v.shape)
    if len(starts) != len(shape) or len(sizes) != len(shape):
        raise ShapeError(
            f"{len(starts)} start indices and {len(sizes)} sizes for {api._aval(v)}",
            op=op,
            hint="one start (and one size) per axis",
        )
    out = []
    for s, size, n in zip(starts, sizes, shape, strict=True):
        if not 0 <= size <= n:
            raise ShapeError(f"slice size {size} does not fit an axis of {n}", op=op)
        if isinstance(s, int | np.integer):
            out.append(int(np.clip(s + n if s < 0 else s, 0, n - size)))
        else:
            i = api.cast(api.asvalue(s, op), dt.int32)
            i = api.where(api.less(i, 0), api.add(i, n), i)
            out.append(composite.clip(i, 0, n - size))
    return out


def dynamic_slice(operand: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> Any:
    """The block of ``slice_sizes`` at ``start_indices``, which may be traced scalars; each
    start is clamped so that the block lies inside (``jax.lax.dynamic_slice``)."""
    op = "lax.dynamic_slice"
    v = api.asvalue(operand, op)
    sizes = [rules.integer(op, "slice_sizes", s) for s in slice_sizes]
    for axis, (s, size) in enumerate(zip(_starts(op, v, start_indices, sizes), sizes, strict=True)):
        if isinstance(s, int):
            v = slice_in_dim(v, s, s + size, 1, axis)
        else:  # a traced start: the block's positions gathered along the axis
            v = api.take(v, api.add(s, np.arange(size, dtype=np.int32)), axis)
    return v


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0) -> Any:
    """:func:`dynamic_slice` along ``axis`` only."""
    v = api.asvalue(operand, "lax.dynamic_slice_in_dim")
    starts: list[Any] = [0] * len(v.shape)  # type: ignore[attr-defined]
    sizes = list(v.shape)  # type: ignore[attr-defined]
    starts[axis], sizes[axis] = start_index, slice_size
    return dynamic_slice(v, starts, sizes)


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True) -> Any:
    """Element ``index`` (traced or not) along ``axis``."""
    r = dynamic_slice_in_dim(operand, index, 1, axis)
    return r if keepdims else composite.squeeze(r, axis)


def dynamic_update_slice(operand: Any, update: Any, start_indices: Sequence[Any]) -> Any:
    """``operand`` with the block at ``start_indices`` replaced by ``update``; each start is
    clamped so that the block lies inside (``jax.lax.dynamic_update_slice``)."""
    op = "lax.dynamic_update_slice"
    v = api.asvalue(operand, op)
    u = api.cast(api.asvalue(update, op), v.dtype)  # type: ignore[attr-defined]
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    if len(u.shape) != len(shape):
        raise ShapeError(f"update {api._aval(u)} for {api._aval(v)}", op=op)
    starts = _starts(op, v, start_indices, tuple(u.shape))
    if all(isinstance(s, int) for s in starts):
        pad = [(s, n - s - k, 0) for s, n, k in zip(starts, shape, u.shape, strict=True)]
        inside = np.zeros(shape, bool)
        inside[tuple(builtins.slice(s, s + k) for s, k in zip(starts, u.shape, strict=True))] = True
        return api.where(inside, numpy_lib.lax_pad(u, 0, pad), v)
    # traced starts: each axis' positions of the block, and the update gathered to them
    mask: Any = None
    g = u
    for axis, (s, n, k) in enumerate(zip(starts, shape, u.shape, strict=True)):
        pos = np.arange(n, dtype=np.int32).reshape(
            [-1 if a == axis else 1 for a in range(len(shape))]
        )
        rel = api.sub(pos, s)
        hit = composite.logical_and(api.greater_equal(rel, 0), api.less(rel, k))
        mask = hit if mask is None else composite.logical_and(mask, hit)
        g = api.take(g, composite.clip(api.reshape(rel, (n,)), 0, k - 1), axis)
    return api.where(mask, g, v)


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int) -> Any:
    """:func:`dynamic_update_slice` along ``axis`` only."""
    v = api.asvalue(operand, "lax.dynamic_update_slice_in_dim")
    starts: list[Any] = [0] * len(v.shape)  # type: ignore[attr-defined]
    starts[axis] = start_index
    return dynamic_update_slice(v, update, starts)


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int) -> Any:
    """``operand`` with element ``index`` along ``axis`` replaced by ``update`` (with or
    without that axis)."""
    v = api.asvalue(operand, "lax.dynamic_update_index_in_dim")
    u = api.asvalue(update, "lax.dynamic_update_index_in_dim")
    if len(u.shape) == len(v.shape) - 1:  # type: ignore[attr-defined]
        u = composite.expand_dims(u, axis)
    return dynamic_update_slice_in_dim(v, u, index, axis)


def broadcast(operand: Any, sizes: Sequence[int]) -> Any:
    """``operand`` broadcast with new leading axes of ``sizes``."""
    v = api.asvalue(operand, "lax.broadcast")
    return api.broadcast_to(v, (*tuple(sizes), *v.shape))  # type: ignore[attr-defined]


def broadcast_in_dim(
    operand: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]
) -> Any:
    """``operand`` broadcast to ``shape``, its axis ``i`` becoming axis
    ``broadcast_dimensions[i]`` (``jax.lax.broadcast_in_dim``)."""
    op = "lax.broadcast_in_dim"
    v = api.asvalue(operand, op)
    dims = tuple(broadcast_dimensions)
    if len(dims) != len(v.shape) or sorted(dims) != list(dims):  # type: ignore[attr-defined]
        raise ShapeError(
            f"broadcast_dimensions {dims} for {api._aval(v)}: one increasing target axis "
            "per operand axis",
            op=op,
        )
    placed = [1] * len(shape)
    for a, d in zip(dims, v.shape, strict=True):  # type: ignore[attr-defined]
        placed[a] = d
    return api.broadcast_to(api.reshape(v, tuple(placed)), tuple(shape))


def iota(dtype: Any, size: int) -> Any:
    """``0, 1, …, size - 1`` in ``dtype``."""
    return api.asvalue(np.arange(size).astype(dt.dtype(dtype).np))


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Any:
    """Each element's index along ``dimension``, in ``dtype``, of ``shape``."""
    shape = tuple(shape)
    pos = np.arange(shape[dimension]).reshape(
        [-1 if a == dimension else 1 for a in range(len(shape))]
    )
    return api.asvalue(np.broadcast_to(pos, shape).astype(dt.dtype(dtype).np))


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> Any:
    """A tensor of ``shape`` filled with ``fill_value`` (``jax.lax.full``)."""
    v = api.asvalue(fill_value, "lax.full")
    if dtype is not None:
        v = api.cast(v, dt.dtype(dtype))
    return api.broadcast_to(v, tuple(shape))


def full_like(
    x: Any, fill_value: Any, dtype: Any = None, shape: Sequence[int] | None = None
) -> Any:
    """A tensor like ``x`` (its shape and dtype, unless given) filled with ``fill_value``."""
    v = api.asvalue(x, "lax.full_like")
    d = v.dtype if dtype is None else dt.dtype(dtype)  # type: ignore[attr-defined]
    return full(tuple(v.shape) if shape is None else shape, api.cast(fill_value, d), d)  # type: ignore[attr-defined]


def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list[Any]:
    """``operand`` cut along ``axis`` into pieces of ``sizes`` (``jax.lax.split``)."""
    v = api.asvalue(operand, "lax.split")
    n = v.shape[axis]  # type: ignore[attr-defined]
    if sum(sizes) != n:
        raise ShapeError(f"sizes {tuple(sizes)} do not add up to the axis' {n}", op="lax.split")
    return composite.split(v, list(np.cumsum(sizes)[:-1]), axis)


def dot(lhs: Any, rhs: Any, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """``jax.lax.dot``: vector·vector, matrix·vector or matrix·matrix (``precision`` is
    accepted and ignored: float16 and bfloat16 products accumulate in float32)."""
    u, v = api.promote("lax.dot", (lhs, rhs))
    u, v, want = preferred("lax.dot", u, v, preferred_element_type)
    r = api.matmul(u, v)
    return r if want is None or r.dtype is want else api.cast(r, want)


def dot_general(
    lhs: Any,
    rhs: Any,
    dimension_numbers: Any,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Any:
    """``jax.lax.dot_general``: ``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``;
    the result is the batch axes, then ``lhs``'s free axes, then ``rhs``'s. One matmul of
    the operands transposed and merged to ``[batch, free, contract]`` and
    ``[batch, contract, free]``.

    >>> import pypto as pto
    >>> batched = (((2,), (1,)), ((0,), (0,)))  # contract 2 with 1, batch 0 with 0
    >>> pto.lax.dot_general(pto.ones((2, 3, 4)), pto.ones((2, 4, 5)), batched).shape
    (2, 3, 5)
    """
    op = "lax.dot_general"
    u, v = api.promote(op, (lhs, rhs))
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        lc, rc, lb, rb = (tuple(int(a) for a in t) for t in (lc, rc, lb, rb))
    except (TypeError, ValueError):
        raise ShapeError(
            f"dimension_numbers {dimension_numbers!r:.80} is not "
            "((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))",
            op=op,
        ) from None
    us, vs = tuple(u.shape), tuple(v.shape)  # type: ignore[attr-defined]
    if (
        len(lc) != len(rc)
        or len(lb) != len(rb)
        or any(us[a] != vs[b] for a, b in zip(lc + lb, rc + rb, strict=True))
    ):
        raise ShapeError(
            f"contracting {lc}/{rc} and batch {lb}/{rb} axes do not pair up between "
            f"{api._aval(u)} and {api._aval(v)}",
            op=op,
        )
    lf = tuple(a for a in range(len(us)) if a not in lc + lb)
    rf = tuple(a for a in range(len(vs)) if a not in rc + rb)
    batch = tuple(us[a] for a in lb)
    k = math.prod(us[a] for a in lc)
    m, n = math.prod(us[a] for a in lf), math.prod(vs[a] for a in rf)
    a = api.reshape(api.transpose(u, (*lb, *lf, *lc)), (*batch, m, k))
    b = api.reshape(api.transpose(v, (*rb, *rc, *rf)), (*batch, k, n))
    a, b, want = preferred(op, a, b, preferred_element_type)
    r = api.reshape(api.matmul(a, b), (*batch, *(us[i] for i in lf), *(vs[i] for i in rf)))
    return r if want is None or r.dtype is want else api.cast(r, want)


class RaggedDotDimensionNumbers:
    """``jax.lax.RaggedDotDimensionNumbers``: a ``dot_general``'s dimension numbers, the
    ``lhs`` ragged dimension (one) and the ``rhs`` group dimension (at most one)."""

    __slots__ = ("dot_dimension_numbers", "lhs_ragged_dimensions", "rhs_group_dimensions")

    def __init__(
        self,
        dot_dimension_numbers: Any,
        lhs_ragged_dimensions: Sequence[int],
        rhs_group_dimensions: Sequence[int],
    ) -> None:
        self.dot_dimension_numbers = tuple(tuple(map(tuple, t)) for t in dot_dimension_numbers)
        self.lhs_ragged_dimensions = tuple(lhs_ragged_dimensions)
        self.rhs_group_dimensions = tuple(rhs_group_dimensions)

    def __repr__(self) -> str:
        return (
            f"RaggedDotDimensionNumbers({self.dot_dimension_numbers}, "
            f"lhs_ragged_dimensions={self.lhs_ragged_dimensions}, "
            f"rhs_group_dimensions={self.rhs_group_dimensions})"
        )


_BASIC_RAGGED = RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])


def ragged_dot(
    lhs: Any,
    rhs: Any,
    group_sizes: Any,
    precision: Any = None,
    preferred_element_type: Any = None,
    group_offset: Any = None,
) -> Any:
    """``jax.lax.ragged_dot``: ``lhs [m, k]`` in consecutive row groups of ``group_sizes
    [g]``, group ``i``'s rows times ``rhs[i]`` (``rhs [g, k, n]``), as a mixture of
    experts routes its tokens; rows past the groups give zeros. See
    :func:`ragged_dot_general` for how it is computed.

    >>> import pypto as pto
    >>> x, w = pto.ones((5, 2)), pto.ones((3, 2, 4)) * pto.arange(1.0, 4.0)[:, None, None]
    >>> pto.lax.ragged_dot(x, w, pto.tensor([2, 0, 2]))[:, 0].numpy()
    array([2., 2., 6., 6., 0.], dtype=float32)
    """
    return ragged_dot_general(
        lhs, rhs, group_sizes, _BASIC_RAGGED, precision, preferred_element_type, group_offset
    )


def ragged_dot_general(
    lhs: Any,
    rhs: Any,
    group_sizes: Any,
    ragged_dot_dimension_numbers: Any,
    precision: Any = None,
    preferred_element_type: Any = None,
    group_offset: Any = None,
) -> Any:
    """``jax.lax.ragged_dot_general``'s three modes, by the kind of ``lhs``'s ragged
    dimension (``group_sizes`` one-dimensional, ``[g]``):

    * a free dimension, ``rhs`` with a group dimension: each position of the ragged
      dimension uses its group's slice of ``rhs`` (zeros past the groups);
    * a contracting dimension, no group dimension: one product per group, over its
      positions only, stacked first (``[g, ...]``);
    * a batch dimension: each batch entry is its own product, so the groups change
      nothing, as in JAX.

    Computed as JAX computes it off TPUs: ``lhs`` gets a group axis, zero outside each
    position's group (a one-hot mask from the cumulative sizes), and one ``dot_general``
    contracts it with ``rhs``'s group dimension (the first mode) or keeps it (the second).
    That is ``g`` times the products of the routed rows; gradients and ``vmap`` follow
    from the ops.
    """
    op = "lax.ragged_dot_general"
    if group_offset is not None:
        raise ShapeError(
            "group_offset is not supported", op=op, hint="slice group_sizes and rhs instead"
        )
    dn = ragged_dot_dimension_numbers
    try:
        (lc, rc), (lb, rb) = dn.dot_dimension_numbers
        ragged, groups = tuple(dn.lhs_ragged_dimensions), tuple(dn.rhs_group_dimensions)
    except (AttributeError, TypeError, ValueError):
        raise ShapeError(
            f"ragged_dot_dimension_numbers {dn!r:.80} is not a RaggedDotDimensionNumbers",
            op=op,
            hint="pto.lax.RaggedDotDimensionNumbers(((lc, rc), (lb, rb)), [ragged], [group])",
        ) from None
    u, v = api.promote(op, (lhs, rhs))
    gs = api.asvalue(group_sizes, op)
    us, vs = tuple(u.shape), tuple(v.shape)  # type: ignore[attr-defined]
    if not gs.dtype.is_integer or len(gs.shape) != 1:  # type: ignore[attr-defined]
        raise ShapeError(
            f"group_sizes is {api._aval(gs)}; pypto takes one integer group size per group, [g]",
            op=op,
        )
    g = gs.shape[0]  # type: ignore[attr-defined]
    if len(ragged) != 1 or len(groups) > 1:
        raise ShapeError(
            f"one lhs ragged dimension and at most one rhs group dimension, got {ragged} and "
            f"{groups}",
            op=op,
        )
    (r,) = ragged
    r = rules.normalize_axis(op, r, len(us), api._aval(u))
    lc, rc, lb, rb = (tuple(int(a) for a in t) for t in (lc, rc, lb, rb))
    if r in lb:  # each batch entry is its own product
        return dot_general(u, v, ((lc, rc), (lb, rb)), precision, preferred_element_type)
    if groups and (r in lc or vs[groups[0]] != g):
        raise ShapeError(
            f"rhs {api._aval(v)}'s group dimension {groups[0]} must have the {g} groups, and a "
            "contracting ragged dimension takes none",
            op=op,
        )
    if not groups and r not in lc:
        raise ShapeError(
            f"a free ragged dimension ({r} of {api._aval(u)}) needs an rhs group dimension",
            op=op,
        )
    # the one-hot [L, g] membership of each position along the ragged dimension
    ends = composite.cumsum(gs, 0)
    pos = api.asvalue(np.arange(us[r], dtype=np.int32)[:, None])
    hot = composite.logical_and(
        api.greater_equal(pos, api.sub(ends, gs)[None, :]), api.less(pos, ends[None, :])
    )
    hot = api.reshape(hot, (*tuple(us[r] if a == r else 1 for a in range(len(us))), g))
    zero = api.cast(api.asvalue(0), u.dtype)  # type: ignore[attr-defined]
    ue = api.where(hot, composite.expand_dims(u, -1), zero)  # lhs with a group axis, last
    gax = len(us)
    if groups:  # contract the group axis with rhs's
        return dot_general(
            ue, v, (((*lc, gax), rc + groups), (lb, rb)), precision, preferred_element_type
        )
    out = dot_general(ue, v, ((lc, rc), (lb, rb)), precision, preferred_element_type)
    # the group axis is the last of lhs's free axes: JAX puts it first
    at = len(lb) + sum(1 for a in range(len(us)) if a not in lc + lb)
    return composite.moveaxis(out, at, 0)


def _leaves(op: str, x: Any) -> tuple[list[Any], bool]:
    """A single operand or a tuple/list of them, as a list and whether it was a sequence."""
    if isinstance(x, tuple | list):
        if not x:
            raise ShapeError("no operands", op=op)
        return [api.asvalue(v, op) for v in x], True
    return [api.asvalue(x, op)], False


def _apply(fn: Any, a: list[Any], b: list[Any], many: bool) -> list[Any]:
    r = fn(tuple(a), tuple(b)) if many else fn(a[0], b[0])
    return list(r) if many else [r]


def _cut(vs: list[Any], axis: int, lo: int, hi: int) -> list[Any]:
    return [slice_in_dim(v, lo, hi, 1, axis) for v in vs]


def associative_scan(fn: Any, elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """``jax.lax.associative_scan``: the running combination of ``elems`` along ``axis`` with
    the associative ``fn`` (of two operands, or of two tuples when ``elems`` is a tuple or
    list of operands), in ⌈log₂ n⌉ steps: each combines every element with the one ``d``
    before it, ``d`` doubling (more combinations than a serial loop; as associative, the
    same result up to rounding).

    >>> import pypto as pto
    >>> pto.lax.associative_scan(pto.add, pto.arange(5)).numpy()
    array([ 0,  1,  3,  6, 10], dtype=int32)
    """
    op = "lax.associative_scan"
    vs, many = _leaves(op, elems)
    nd = len(vs[0].shape)
    a = rules.normalize_axis(op, axis, nd, api._aval(vs[0]))
    n = vs[0].shape[a]
    if any(v.shape[a] != n for v in vs):
        raise ShapeError(f"operands of different lengths along axis {axis}", op=op)
    if reverse:
        vs = [composite.flip(v, a) for v in vs]
    d = 1
    while d < n:
        # element i combines with element i - d: the first d keep their values
        later = _apply(fn, _cut(vs, a, 0, n - d), _cut(vs, a, d, n), many)
        vs = [api.concat([h, t], a) for h, t in zip(_cut(vs, a, 0, d), later, strict=True)]
        d *= 2
    if reverse:
        vs = [composite.flip(v, a) for v in vs]
    return type(elems)(vs) if many else vs[0]


def cumlogsumexp(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """The running ``log(sum(exp(x)))`` along ``axis`` (``jax.lax.cumlogsumexp``), by
    :func:`associative_scan` of ``logaddexp``."""
    return associative_scan(numpy_lib.logaddexp, operand, reverse, axis)


_MONOIDS = {"add": api.sum, "maximum": api.max, "minimum": api.min, "mul": composite.prod}


def reduce(operands: Any, init_values: Any, computation: Any, dimensions: Sequence[int]) -> Any:
    """``jax.lax.reduce``: ``operands`` (one, or a tuple of them reduced together)
    combined over ``dimensions`` with ``computation`` from ``init_values``. ``lax.add``,
    ``lax.max``, ``lax.min`` and ``lax.mul`` (or pypto's, numpy's) are pypto's reductions;
    any other function is folded as a tree of halves along each axis, then with the
    initial values.

    >>> import pypto as pto
    >>> import jax
    >>> pto.lax.reduce(pto.arange(6.0).reshape(2, 3), 0.0, jax.lax.add, (1,)).numpy()
    array([ 3., 12.], dtype=float32)
    """
    op = "lax.reduce"
    vs, many = _leaves(op, operands)
    inits, _ = _leaves(op, init_values)
    if len(inits) != len(vs):
        raise ShapeError(f"{len(inits)} initial values for {len(vs)} operands", op=op)
    inits = [api.cast(i, v.dtype) for i, v in zip(inits, vs, strict=True)]
    dims = sorted(
        (rules.normalize_axis(op, d, len(vs[0].shape), api._aval(vs[0])) for d in dimensions),
        reverse=True,
    )
    name = None if many else _lax_computations().get(computation)
    if name is not None:  # pypto's reduction, then the initial value (XLA starts from it)
        r = _MONOIDS[name](vs[0], tuple(dims))
        r = api.cast(r, vs[0].dtype) if r.dtype is not vs[0].dtype else r
        return _BY_NAME[name](r, inits[0])
    if any(vs[0].shape[a] == 0 for a in dims):  # nothing: the initial values
        shape = tuple(n for a, n in enumerate(vs[0].shape) if a not in dims)
        out0 = [api.broadcast_to(i, shape) for i in inits]
        return type(operands)(out0) if many else out0[0]
    for a in dims:  # highest axis first: the lower ones keep their numbers
        n = vs[0].shape[a]
        while n > 1:
            h = n // 2
            paired = _apply(computation, _cut(vs, a, 0, h), _cut(vs, a, h, 2 * h), many)
            vs = (
                [api.concat([p, o], a) for p, o in zip(paired, _cut(vs, a, 2 * h, n), strict=True)]
                if n % 2
                else paired
            )
            n = h + n % 2
        vs = [composite.squeeze(v, a) if v.shape[a] == 1 else v for v in vs]
    shape = tuple(vs[0].shape)
    out = _apply(computation, [api.broadcast_to(i, shape) for i in inits], vs, many)
    out = [api.cast(o, i.dtype) for o, i in zip(out, inits, strict=True)]
    return type(operands)(out) if many else out[0]


def polygamma(m: Any, x: Any) -> Any:
    """``jax.lax.polygamma``: ``m`` of ``x``'s float dtype (integer values; NaN elsewhere), or
    of an integer dtype as :func:`pto.polygamma` takes it.

    >>> import pypto as pto
    >>> pto.lax.polygamma(pto.tensor([1.0, 1.5]), pto.tensor([1.0, 1.0])).numpy()
    array([1.644934,      nan], dtype=float32)
    """
    mv = api.asvalue(m, "polygamma")
    if not mv.dtype.is_floating:  # type: ignore[attr-defined]
        return special.polygamma(mv, x)
    whole = api.equal(mv, composite.floor(mv))
    order = api.cast(api.where(whole, mv, 0.0), dt.int32)
    return api.where(whole, special.polygamma(order, x), math.nan)


# --- bits of integers and floats -------------------------------------------------------------


def population_count(x: Any) -> Any:
    """The number of 1 bits of each integer (its two's complement: ``-1`` has them all), in
    its dtype (``jax.lax.population_count``; :func:`pto.bitwise_count` counts ``|x|``).

    >>> import pypto as pto
    >>> pto.lax.population_count(pto.tensor([0, 7, -1])).numpy()
    array([ 0,  3, 32], dtype=int32)
    """
    return numpy_lib.popcount(numpy_lib.int_bits("lax.population_count", x))


def clz(x: Any) -> Any:
    """The number of leading 0 bits of each integer, in its dtype (``jax.lax.clz``): every bit
    below the highest 1 is set by shifts and ors, and the 1 bits then counted — the width
    minus that count.

    >>> import pypto as pto
    >>> pto.lax.clz(pto.tensor([0, 1, 255, -3])).numpy()
    array([32, 31, 24,  0], dtype=int32)
    """
    v = numpy_lib.int_bits("lax.clz", x)
    n = 8 * v.dtype.itemsize
    k = 1
    while k < n:  # a negative operand fills with 1s: a count of n, so 0 leading zeros
        v = api.bitwise_or(v, api.right_shift(v, k))
        k *= 2
    return api.sub(n, numpy_lib.popcount(v))


def shift_right_logical(x: Any, y: Any) -> Any:
    """``x >> y`` filling with zeros (``jax.lax.shift_right_logical``); an amount outside
    ``0 .. bits-1`` gives 0. The arithmetic shift with the sign's copies masked off: the low
    ``bits - y`` bits are kept.

    >>> import pypto as pto
    >>> pto.lax.shift_right_logical(pto.tensor([-8, -8, 8]), pto.tensor([1, 28, 1])).numpy()
    array([2147483644,         15,          4], dtype=int32)
    """
    op = "lax.shift_right_logical"
    u, s = api.promote(op, (x, y))
    numpy_lib.int_bits(op, u)
    n = 8 * u.dtype.itemsize  # type: ignore[attr-defined]
    keep = api.bitwise_not(api.left_shift(-1, api.sub(n, s)))  # ~(-1 << (n - s)); all for s = 0
    out = api.bitwise_and(api.right_shift(u, s), keep)
    outside = composite.logical_or(api.less(s, 0), api.greater_equal(s, n))
    return api.where(outside, 0, out)


def mulhi(x: Any, y: Any) -> Any:
    """The high half of each product at twice the width (``jax.lax.mulhi``): ``(x·y) >> 8``
    for int8 (the product in int32), and for int32 the unsigned high word of 16-bit halves'
    products, corrected for the signs (``hi(x·y) = hiᵤ(x·y) - (x < 0)·y - (y < 0)·x``,
    modulo 2³²).

    >>> import pypto as pto
    >>> pto.lax.mulhi(pto.tensor([-7, 2**30]), pto.tensor([3, 8])).numpy()
    array([-1,  2], dtype=int32)
    """
    op = "lax.mulhi"
    u, v = api.promote(op, (x, y))
    numpy_lib.int_bits(op, u)
    if u.dtype is dt.int8:  # type: ignore[attr-defined]
        p = api.mul(api.cast(u, dt.int32), api.cast(v, dt.int32))
        return api.cast(api.right_shift(p, 8), dt.int8)
    lo = 0xFFFF
    a0, a1 = api.bitwise_and(u, lo), api.bitwise_and(api.right_shift(u, 16), lo)
    b0, b1 = api.bitwise_and(v, lo), api.bitwise_and(api.right_shift(v, 16), lo)
    # the unsigned product's high word, from 16-bit limbs whose partial sums stay below 2^32;
    # logical shifts, since a limb product may use the sign bit
    srl = shift_right_logical
    t = api.add(api.mul(a1, b0), srl(api.mul(a0, b0), 16))
    w = api.add(api.mul(a0, b1), api.bitwise_and(t, lo))
    hi = api.add(api.add(api.mul(a1, b1), srl(t, 16)), srl(w, 16))
    hi = api.sub(hi, api.where(api.less(u, 0), v, 0))
    return api.sub(hi, api.where(api.less(v, 0), u, 0))


# source formats: exponent and mantissa bits
_FORMATS = {dt.float32: (8, 23), dt.float16: (5, 10), dt.bfloat16: (8, 7)}


def _round_to_format(x: Any, d: dt.DType, eb: int, mb: int) -> Any:
    """``x`` (float32, holding dtype ``d``'s values) rounded as XLA's ``ReducePrecision`` does
    on ``d``'s bits: the mantissa to ``mb`` bits, to nearest even, on the magnitude's bits
    (a carry moves into the exponent); then an exponent beyond ``eb`` bits' range becomes
    inf and one below its smallest normal a signed zero. NaN stays as it is."""
    e_src, m_src = _FORMATS[d]
    bits = api.bitcast_convert_type(x, dt.int32)
    mag = api.bitwise_and(bits, 0x7FFFFFFF)
    if mb < m_src:
        drop = 23 - mb
        odd = api.bitwise_and(api.right_shift(mag, drop), 1)  # ties go to the even one
        mag = api.add(mag, api.add(odd, (1 << (drop - 1)) - 1))
        mag = api.bitwise_and(mag, ~((1 << drop) - 1))
    if eb < e_src:
        bias = (1 << (eb - 1)) - 1
        e = api.right_shift(mag, 23)
        mag = api.where(api.greater(e, 127 + bias), 0x7F800000, mag)
        mag = api.where(api.less_equal(e, 127 - bias), 0, mag)
    out = api.bitcast_convert_type(
        api.bitwise_or(mag, api.bitwise_and(bits, -(1 << 31))), dt.float32
    )
    if d is dt.float16 and eb >= e_src and mb < m_src:
        # float16's subnormals keep their fixed spacing 2^-24: its mantissa bits are rounded
        # at that spacing, not at float32's normal one
        q = 2.0 ** (-14 - mb)
        rounded = api.mul(composite.round(api.div(x, q)), q)
        out = api.where(api.less(api.abs(x), 2.0**-14), rounded, out)
    return api.where(api.not_equal(x, x), x, out)


@functools.cache
def _reduce_precision_fn(d: dt.DType, eb: int, mb: int) -> Any:
    """The rounding of dtype ``d`` to (``eb``, ``mb``) as a function whose gradient is the
    cotangent rounded the same way, as JAX's linear rule for ``reduce_precision`` has it."""
    from pypto.graph.custom_vjp import custom_vjp  # the graph layer imports this module

    def rounded(v: Any) -> Any:
        w = v if d is dt.float32 else api.cast(v, dt.float32)
        r = _round_to_format(w, d, eb, mb)
        return r if d is dt.float32 else api.cast(r, d)

    rounded.__name__ = f"reduce_precision_e{eb}m{mb}_{d.short}"
    f = custom_vjp(rounded)
    f.defvjp(lambda v: (rounded(v), None), lambda _, g: (f(g),))
    return f


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Any:
    """``operand`` rounded to a float format of ``exponent_bits`` and ``mantissa_bits`` and
    kept in its dtype (``jax.lax.reduce_precision``): the mantissa to nearest even; past the
    format's largest finite value, inf; below its smallest normal, a signed zero (the format
    has no subnormals, as in XLA); NaN stays. Emulates a narrower format inside a wider one:
    ``(8, 7)`` is bfloat16, ``(5, 10)`` float16, ``(4, 3)`` an 8-bit float with IEEE's
    infinities. The gradient is the cotangent rounded the same way, as JAX's.

    >>> import pypto as pto
    >>> pto.lax.reduce_precision(pto.tensor([1.0004883, 65519.0, 1e-5]), 5, 10).numpy()
    array([1.0000e+00, 6.5504e+04, 0.0000e+00], dtype=float32)
    """
    op = "lax.reduce_precision"
    eb = rules.integer(op, "exponent_bits", exponent_bits)
    mb = rules.integer(op, "mantissa_bits", mantissa_bits)
    if eb < 1 or mb < 0:
        raise ShapeError(
            f"exponent_bits={eb}, mantissa_bits={mb}: a format needs at least one exponent "
            "bit and no negative number of mantissa bits",
            op=op,
        )
    v = api.asvalue(operand, op)
    d = v.dtype  # type: ignore[attr-defined]
    if not d.is_floating:
        raise DTypeError(
            f"rounds floats, got {api._aval(v)}", op=op, hint="cast with .astype(pto.float32)"
        )
    return _reduce_precision_fn(d, builtins.min(eb, 8), builtins.min(mb, 23))(v)


# --- rearrangements, selections and patches ---------------------------------------------------


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True) -> Any:
    """``(keys, values)`` both reordered as the sorted ``keys`` along ``dimension``
    (``jax.lax.sort_key_val``; always stable).

    >>> import pypto as pto
    >>> k, v = pto.lax.sort_key_val(pto.tensor([3, 1, 2]), pto.tensor([30.0, 10.0, 20.0]))
    >>> k.numpy(), v.numpy()
    (array([1, 2, 3], dtype=int32), array([10., 20., 30.], dtype=float32))
    """
    k, v = sort((keys, values), dimension, is_stable)
    return k, v


def _k_along(op: str, operand: Any, k: int, dimension: int, largest: bool) -> tuple[Any, Any]:
    v = api.asvalue(operand, op)
    axis = rules.normalize_axis(op, dimension, len(v.shape), api._aval(v))  # type: ignore[attr-defined]
    last = len(v.shape) - 1  # type: ignore[attr-defined]
    if not v.dtype.is_floating:  # type: ignore[attr-defined]
        raise DTypeError(
            f"takes floats, as JAX's does, got {api._aval(v)}",
            op=op,
            hint="pto.lax.top_k takes integers (along the last axis)",
        )
    moved = composite.moveaxis(v, axis, last) if axis != last else v
    # chosen by value, equal values lowest index first: adding 0.0 makes -0.0 and 0.0 one
    # key (JAX's order between the two zeros depends on the axis); NaN by the total order
    key = api.add(moved, 0.0)
    key = key if largest else api.neg(key)
    _, idx = composite.top_k(key, rules.integer(op, "k", k))
    vals = composite.take_along_axis(moved, idx, -1)
    if axis != last:
        vals, idx = composite.moveaxis(vals, last, axis), composite.moveaxis(idx, last, axis)
    return vals, idx


def approx_max_k(
    operand: Any,
    k: int,
    reduction_dimension: int = -1,
    recall_target: float = 0.95,
    reduction_input_size_override: int = -1,
    aggregate_to_topk: bool = True,
) -> tuple[Any, Any]:
    """``(values, indices)`` of the ``k`` largest along ``reduction_dimension``
    (``jax.lax.approx_max_k``). Exact — recall 1, what JAX gives on a CPU — so
    ``recall_target`` and the size override change nothing.

    >>> import pypto as pto
    >>> v, i = pto.lax.approx_max_k(pto.tensor([[1.0, 3.0], [4.0, 2.0]]), 1, 0)
    >>> v.numpy(), i.numpy()
    (array([[4., 3.]], dtype=float32), array([[1, 0]], dtype=int32))
    """
    return _k_along("lax.approx_max_k", operand, k, reduction_dimension, True)


def approx_min_k(
    operand: Any,
    k: int,
    reduction_dimension: int = -1,
    recall_target: float = 0.95,
    reduction_input_size_override: int = -1,
    aggregate_to_topk: bool = True,
) -> tuple[Any, Any]:
    """``(values, indices)`` of the ``k`` smallest along ``reduction_dimension``
    (``jax.lax.approx_min_k``), exactly, smallest first.

    >>> import pypto as pto
    >>> v, i = pto.lax.approx_min_k(pto.tensor([5.0, -2.0, 7.0, -2.0]), 2)
    >>> v.numpy(), i.numpy()
    (array([-2., -2.], dtype=float32), array([1, 3], dtype=int32))
    """
    return _k_along("lax.approx_min_k", operand, k, reduction_dimension, False)


def index_take(src: Any, idxs: Any, axes: Sequence[int]) -> Any:
    """``src`` at the index tuples ``(idxs[0][n], idxs[1][n], …)`` on ``axes``, one row of
    ``idxs`` per axis; the other axes follow in order (``jax.lax.index_take``). Indices wrap
    modulo the axis' size, as JAX's do.

    >>> import pypto as pto
    >>> rows = pto.tensor([[1, 0], [2, -1]])  # (1, 2) and (0, -1)
    >>> pto.lax.index_take(pto.arange(6).reshape(2, 3), rows, (0, 1)).numpy()
    array([5, 2], dtype=int32)
    """
    op = "lax.index_take"
    v = api.asvalue(src, op)
    rows = list(idxs) if isinstance(idxs, tuple | list) else None
    if rows is None:
        i = api.asvalue(idxs, op)
        rows = [api.getitem(i, r) for r in range(i.shape[0])] if len(i.shape) == 2 else []  # type: ignore[attr-defined]
    nd = len(v.shape)  # type: ignore[attr-defined]
    ax = [rules.normalize_axis(op, a, nd, api._aval(v)) for a in axes]
    rows = [api.asvalue(r, op) for r in rows]
    if len(rows) != len(ax) or any(len(r.shape) != 1 for r in rows):
        raise ShapeError(
            f"indices for axes {tuple(axes)}: need one row of indices per axis",
            op=op,
            hint=f"give idxs the shape [{len(ax)}, N]",
        )
    rest = [a for a in range(nd) if a not in ax]
    moved = api.transpose(v, (*ax, *rest)) if ax + rest != list(range(nd)) else v
    key = tuple(composite.remainder(r, v.shape[a]) for r, a in zip(rows, ax, strict=True))  # type: ignore[attr-defined]
    return api.getitem(moved, key)


def reduce_xor(operand: Any, axes: Sequence[int]) -> Any:
    """The exclusive or over ``axes``: bit by bit for integers, the parity for bools
    (``jax.lax.reduce_xor``).

    >>> import pypto as pto
    >>> pto.lax.reduce_xor(pto.tensor([[5, 3, 1], [2, 2, 0]]), (1,)).numpy()
    array([7, 0], dtype=int32)
    """
    op = "lax.reduce_xor"
    v = api.asvalue(operand, op)
    ax = _axes(op, axes)
    if v.dtype is dt.bool_:  # type: ignore[attr-defined]
        count = api.sum(api.cast(v, dt.int32), ax)
        return api.not_equal(api.bitwise_and(count, 1), 0)
    numpy_lib.int_bits(op, v)
    return reduce(v, 0, api.bitwise_xor, ax)


def broadcast_to_rank(x: Any, rank: int) -> Any:
    """``x`` with leading size-1 axes up to ``rank`` axes (``jax.lax.broadcast_to_rank``)."""
    v = api.asvalue(x, "lax.broadcast_to_rank")
    extra = rules.integer("lax.broadcast_to_rank", "rank", rank) - len(v.shape)  # type: ignore[attr-defined]
    return api.reshape(v, (1,) * extra + tuple(v.shape)) if extra > 0 else v  # type: ignore[attr-defined]


def broadcast_like(arr: Any, like_arr: Any) -> Any:
    """``arr`` broadcast to ``like_arr``'s shape (``jax.lax.broadcast_like``)."""
    like = api.asvalue(like_arr, "lax.broadcast_like")
    return api.broadcast_to(api.asvalue(arr, "lax.broadcast_like"), tuple(like.shape))  # type: ignore[attr-defined]


def empty(shape: Sequence[int], dtype: Any) -> Any:
    """A tensor of ``shape`` and ``dtype`` (``jax.lax.empty``): zeros, as JAX's values are."""
    return full(shape, 0, dtype)


def optimization_barrier(operand: Any) -> Any:
    """``operand`` (any pytree of tensors) unchanged (``jax.lax.optimization_barrier``): each
    leaf goes through an ``optimization_barrier`` equation, opaque to the tensor passes, so
    CSE does not merge what is computed from it with what was computed from the operand
    itself (``pto.checkpoint`` recomputes this way). The barrier is dropped after CSE, before
    fusion, so it costs nothing on the NPU.

    >>> import pypto as pto
    >>> def f(x):
    ...     return pto.sin(x) + pto.sin(pto.lax.optimization_barrier(x))
    >>> [e.op for e in pto.make_graph(f)(pto.ones(2)).eqns]
    ['sin', 'optimization_barrier', 'sin', 'add']
    """
    from pypto.graph import pytree

    leaves, tree = pytree.flatten(operand)
    return pytree.unflatten(
        tree, [api.optimization_barrier(api.asvalue(x, "optimization_barrier")) for x in leaves]
    )


def tile(operand: Any, reps: Sequence[int]) -> Any:
    """``operand`` repeated ``reps[i]`` times along axis ``i`` (``jax.lax.tile``)."""
    return numpy_lib.tile(operand, tuple(reps))


def stack(operands: Sequence[Any], axis: int = 0) -> Any:
    """The operands stacked along a new axis ``axis`` (``jax.lax.stack``)."""
    return composite.stack(list(operands), axis)


def unstack(x: Any, axis: int = 0) -> tuple[Any, ...]:
    """The slices of ``x`` along ``axis`` (``jax.lax.unstack``)."""
    return numpy_lib.unstack(x, axis)


def conv_general_dilated_patches(
    lhs: Any,
    filter_shape: Sequence[int],
    window_strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: Any = None,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Any:
    """The patches a convolution with a ``filter_shape`` window reads, as features
    (``jax.lax.conv_general_dilated_patches``): ``C · prod(filter_shape)`` output features,
    channel-major, each window position one feature. Computed as a grouped convolution (one
    group per input channel) with a constant kernel of one-hot windows, so it compiles and
    differentiates as :func:`conv_general_dilated` does; each output is one input element
    times 1.

    >>> import pypto as pto
    >>> x = pto.arange(8.0).reshape(1, 2, 4)
    >>> pto.lax.conv_general_dilated_patches(x, (2,), (2,), "VALID")[0].numpy()
    array([[0., 2.],
           [1., 3.],
           [4., 6.],
           [5., 7.]], dtype=float32)
    """
    op = "lax.conv_general_dilated_patches"
    v = api.asvalue(lhs, op)
    window = tuple(rules.integer(op, "filter_shape", n) for n in filter_shape)
    nd = len(v.shape)  # type: ignore[attr-defined]
    if len(window) != nd - 2:
        raise ShapeError(
            f"filter_shape {window} for {api._aval(v)}: one size per spatial axis ({nd - 2})",
            op=op,
        )
    dn = conv_dimension_numbers(v.shape, (1, 1, *window), dimension_numbers)  # type: ignore[attr-defined]
    c = v.shape[dn.lhs_spec[1]]  # type: ignore[attr-defined]
    size = math.prod(window)
    # [C·size, 1, *window]: feature (ch, j) is 1 at window position j (ch's group reads ch)
    eye = np.eye(size, dtype=v.dtype.np).reshape(size, 1, *window)  # type: ignore[attr-defined]
    k = np.tile(eye, (c, 1) + (1,) * len(window))
    rhs = np.transpose(k, np.argsort(dn.rhs_spec))
    return conv_general_dilated(
        v,
        rhs,
        window_strides,
        padding,
        lhs_dilation,
        rhs_dilation,
        dn,
        feature_group_count=c,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )
