"""Composite ops: each defined once in terms of primitives, with its own JAX reference.

Eager mode runs the decomposition op by op, so every intermediate is rounded to its dtype just
as in a fused kernel. A graph tracer may keep a composite whole (to fuse it as one group).
"""

from __future__ import annotations

import builtins
import functools
import itertools
import math
import numbers
import operator
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core import dispatch
from pypto.core.errors import DTypeError, ShapeError
from pypto.ops import api, rules
from pypto.ops.table import OPS, Op, Value, register


def _composite(name: str, doc: str, jax_impl: Callable[..., Any], **kw: Any) -> Any:
    """Register ``decompose`` as composite ``name``; returns the public function."""

    def deco(decompose: Callable[..., Any]) -> Any:
        op = register(
            Op(name=name, kind="composite", doc=doc, jax_impl=jax_impl, decompose=decompose, **kw)
        )

        def fn(*args: Any, **params: Any) -> Any:
            return dispatch.current_trace().composite(op, args, params)  # type: ignore[attr-defined]

        fn.__name__ = fn.__qualname__ = name
        fn.__module__ = decompose.__module__  # where it is written (and its doctests run)
        fn.__doc__ = decompose.__doc__
        fn.__wrapped__ = decompose  # type: ignore[attr-defined]
        fn.op = op  # type: ignore[attr-defined]
        return fn

    return deco


def _axis(op: str, x: Any, axis: int) -> int:
    return rules.normalize_axis(op, axis, len(x.shape), api._aval(x))


@_composite("relu", "max(x, 0)", jax.nn.relu)
def relu(x: Any) -> Any:
    """max(x, 0), elementwise; its gradient at 0 is 0, as ``jax.nn.relu``'s.

    >>> import pypto as pto
    >>> pto.relu(pto.tensor([-1.0, 2.0])).numpy()
    array([0., 2.], dtype=float32)
    >>> pto.grad(lambda x: pto.relu(x).sum())(pto.tensor([-1.0, 0.0, 2.0])).numpy()
    array([0., 0., 1.], dtype=float32)
    """
    # not maximum(x, 0), whose tie at 0 would pass half the cotangent; a NaN stays NaN
    v = api.asvalue(x, "relu")
    if v.dtype is dt.bool_:  # type: ignore[attr-defined]
        v = api.cast(v, dt.int32)  # as max(x, 0) promotes it
    return api.where(api.less_equal(v, 0), 0, v)


_GELU_C = math.sqrt(2.0 / math.pi)


def _gelu_jax(x: Any, approximate: bool = True) -> Any:
    return jax.nn.gelu(x, approximate=approximate)


@_composite(
    "gelu", "GELU: the tanh approximation (jax.nn.gelu's default) or exact (erf)", _gelu_jax
)
def gelu(x: Any, approximate: bool = True) -> Any:
    """GELU with the tanh approximation, x · ½(1 + tanh(√(2/π)(x + 0.044715 x³))), as
    ``jax.nn.gelu``; with ``approximate=False`` the exact x · Φ(x) (PyTorch's default), as
    ``x · erfc(-x/√2) / 2`` (see :func:`pto.erf`).

    >>> import pypto as pto
    >>> f"{float(pto.gelu(pto.tensor(1.0))):.4f}", f"{float(pto.gelu(1.0, False)):.4f}"
    ('0.8412', '0.8413')
    """
    if not approximate:
        from pypto.ops.activations import _gelu_exact

        return _gelu_exact(x)
    x = api.promote("gelu", (x,), inexact=True)[0]
    inner = api.mul(api.add(x, api.mul(api.mul(api.mul(x, x), x), 0.044715)), _GELU_C)
    return api.mul(x, api.mul(api.add(api.tanh(inner), 1.0), 0.5))


@_composite("silu", "x · sigmoid(x)", jax.nn.silu)
def silu(x: Any) -> Any:
    """SiLU (swish): x · sigmoid(x)."""
    x = api.promote("silu", (x,), inexact=True)[0]
    return api.mul(x, api.sigmoid(x))


def _clip_jax(x: Any, min: Any = None, max: Any = None) -> Any:
    return jnp.clip(x, min, max)


@_composite("clip", "min(max(x, lo), hi)", _clip_jax)
def clip(x: Any, min: Any = None, max: Any = None) -> Any:
    """Limit values to [min, max]; either bound may be None.

    >>> import pypto as pto
    >>> pto.clip(pto.tensor([-2.0, 0.5, 3.0]), -1.0, 1.0).numpy()
    array([-1. ,  0.5,  1. ], dtype=float32)
    """
    if min is not None:
        x = api.maximum(x, min)
    if max is not None:
        x = api.minimum(x, max)
    return api.asvalue(x, "clip")


def _integral(op: str, x: Any) -> tuple[Any, Any, Any] | Any:
    """For a float ``x``: (x, whether |x| is below the dtype's first integer-only binade, x
    with those others replaced by 0 for the arithmetic); an integer or bool ``x`` itself
    (floor, ceil and round keep them, as JAX does)."""
    v = api.asvalue(x, op)
    d = v.dtype  # type: ignore[attr-defined]
    if not d.is_floating:
        return v
    # from 2^mantissa on every float is an integer (and NaN and ±inf are their own floor);
    # the rest is computed on finite values only (no warning from inf * 0 eagerly)
    small = api.less(api.abs(v), float(2 ** dt.finfo(d).nmant))
    return v, small, api.where(small, v, 0.0)


def _floor(v: Any) -> Any:
    """floor of finite ``v`` with |v| < 2^mantissa (exact): truncation toward zero (int32
    holds it), one down where that rose; a zero result keeps ``v``'s sign (floor(-0.0))."""
    t = api.cast(api.cast(v, dt.int32), v.dtype)
    r = api.sub(t, api.cast(api.greater(t, v), v.dtype))
    return _signed_zero(r, v)


def _signed_zero(r: Any, v: Any) -> Any:
    return api.where(api.equal(r, 0.0), api.mul(v, 0.0), r)


@_composite("floor", "largest integer <= x, elementwise", jnp.floor, differentiable=False)
def floor(x: Any) -> Any:
    """The largest integer not above ``x``, in ``x``'s dtype (exact; -0.0, NaN and ±inf stay).

    >>> import pypto as pto
    >>> pto.floor(pto.tensor([-1.5, -0.5, 0.5, 2.0])).numpy()
    array([-2., -1.,  0.,  2.], dtype=float32)
    """
    got = _integral("floor", x)
    if not isinstance(got, tuple):
        return got
    v, small, vs = got
    return api.where(small, _floor(vs), v)


@_composite("ceil", "smallest integer >= x, elementwise", jnp.ceil, differentiable=False)
def ceil(x: Any) -> Any:
    """The smallest integer not below ``x``: ``-floor(-x)``.

    >>> import pypto as pto
    >>> pto.ceil(pto.tensor([-1.5, -0.5, 0.5, 2.0])).numpy()
    array([-1., -0.,  1.,  2.], dtype=float32)
    """
    got = _integral("ceil", x)
    if not isinstance(got, tuple):
        return got
    v, small, vs = got
    return api.where(small, api.neg(_floor(api.neg(vs))), v)


@_composite(
    "round", "nearest integer, halves to even, elementwise", jnp.round, differentiable=False
)
def round(x: Any) -> Any:
    """The nearest integer, halves to the even one (as numpy's and JAX's ``round``); quantize
    with ``pto.round(x / scale).astype(pto.int8)`` (a cast alone truncates toward zero).

    >>> import pypto as pto
    >>> pto.round(pto.tensor([-1.5, -0.5, 0.5, 1.5, 2.6])).numpy()
    array([-2., -0.,  0.,  2.,  3.], dtype=float32)
    """
    got = _integral("round", x)
    if not isinstance(got, tuple):
        if got.dtype is dt.bool_:
            raise DTypeError(
                f"round of {api._aval(got)}: bools have no rounding (jnp.round refuses them)",
                op="round",
                hint="cast first, e.g. x.astype(pto.int32)",
            )
        return got
    v, small, vs = got
    f = _floor(vs)
    frac = api.sub(vs, f)  # exact: f is a multiple of the ulp of x below 2^mantissa
    odd = api.not_equal(api.sub(f, api.mul(_floor(api.mul(f, 0.5)), 2.0)), 0.0)
    # up past the half, or at it from an odd floor (on bools add is or, mul is and)
    up = api.add(api.greater(frac, 0.5), api.mul(api.equal(frac, 0.5), odd))
    r = api.add(f, api.cast(up, v.dtype))
    return api.where(small, _signed_zero(r, vs), v)


def _truth(op: str, x: Any) -> Any:
    """``x`` as bool: itself, or ``x != 0`` (as numpy's and JAX's logical functions take it)."""
    v = api.asvalue(x, op)
    return v if v.dtype is dt.bool_ else api.not_equal(v, 0)  # type: ignore[attr-defined]


@_composite(
    "logical_and", "x and y, elementwise (nonzero is True)", jnp.logical_and, differentiable=False
)
def logical_and(x: Any, y: Any) -> Any:
    """Elementwise ``x and y`` as bool; the operator ``&`` on bool tensors.

    >>> import pypto as pto
    >>> a = pto.tensor([True, True, False])
    >>> (a & pto.tensor([True, False, False])).numpy()
    array([ True, False, False])
    """
    return api.mul(_truth("logical_and", x), _truth("logical_and", y))


@_composite(
    "logical_or", "x or y, elementwise (nonzero is True)", jnp.logical_or, differentiable=False
)
def logical_or(x: Any, y: Any) -> Any:
    """Elementwise ``x or y`` as bool; the operator ``|`` on bool tensors.

    >>> import pypto as pto
    >>> pto.logical_or(pto.tensor([0, 2, 0]), pto.tensor([0, 0, 1])).numpy()
    array([False,  True,  True])
    """
    return api.add(_truth("logical_or", x), _truth("logical_or", y))


@_composite(
    "logical_xor", "x xor y, elementwise (nonzero is True)", jnp.logical_xor, differentiable=False
)
def logical_xor(x: Any, y: Any) -> Any:
    """Elementwise ``x != y`` of the truth values; the operator ``^`` on bool tensors."""
    return api.not_equal(_truth("logical_xor", x), _truth("logical_xor", y))


@_composite(
    "logical_not", "not x, elementwise (nonzero is True)", jnp.logical_not, differentiable=False
)
def logical_not(x: Any) -> Any:
    """Elementwise ``not x`` as bool; the operator ``~`` on bool tensors.

    >>> import pypto as pto
    >>> (~pto.tensor([True, False])).numpy()
    array([False,  True])
    """
    return api.equal(_truth("logical_not", x), False)


def _ones_as(v: Any) -> Any:
    """float32 ones of ``v``'s shape (counted under a where mask)."""
    return api.broadcast_to(np.float32(1.0), tuple(v.shape))


def _mean_jax(x: Any, axis: Any = None, keepdims: bool = False, **kw: Any) -> Any:
    return jnp.mean(x, axis=axis, keepdims=keepdims, **kw)


@_composite("mean", "sum / count (integers averaged in float32)", _mean_jax)
def mean(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    *,
    dtype: Any = None,
    out: Any = None,
    where: Any = None,
) -> Any:
    """Arithmetic mean over ``axis`` (all axes when None); integer inputs give float32.
    numpy's keywords: ``dtype`` (of the result), ``where`` (a mask: the mean of the selected
    elements alone) and ``out=None``.

    >>> import pypto as pto
    >>> float(pto.mean(pto.tensor([1, 2, 3, 4])))
    2.5
    >>> float(pto.mean(pto.tensor([1, 2, 3, 4]), where=pto.tensor([True, True, False, True])))
    2.3333332538604736
    """
    v = api.asvalue(x, "mean")
    axes = rules.normalize_axes("mean", axis, api._aval(v))
    d = v.dtype  # type: ignore[attr-defined]
    res = (d if d.is_floating else dt.float32) if dtype is None else dt.dtype(dtype, op="mean")
    if res is dt.bool_:
        raise DTypeError(
            f"dtype=bool for the mean of {api._aval(v)}: a mean is a number, not a truth value",
            op="mean",
            hint="pass a numeric dtype, or use pto.any / pto.all",
        )
    if not res.is_floating:
        v = api.cast(v, res)  # as jnp.mean: an integer mean of integers (truncated)
    # Computed in float32 and rounded once, as jnp.mean does: a float16 sum rounded before the
    # division would be off by an ulp, which x - mean(x) (layer_norm) turns into percents.
    if v.dtype is not dt.float32:  # type: ignore[attr-defined]
        v = api.cast(v, dt.float32)
    if where is None and out is None:
        count: Any = float(math.prod(v.shape[a] for a in axes))  # type: ignore[attr-defined]
    else:
        v = api.reduction_keywords("mean", v, out=out, mask=where, fill=0.0)
        ones = api.reduction_keywords("mean", _ones_as(v), mask=where, fill=0.0)
        count = api.sum(ones, axes, keepdims)
    m = api.div(api.sum(v, axes, keepdims), count)
    return api.cast(m, res)


def _argmin_jax(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return jnp.argmin(x, axis=axis, keepdims=keepdims)


@_composite(
    "argmin",
    "index of the first minimum (NaN counts as minimal), int32",
    _argmin_jax,
    differentiable=False,
)
def argmin(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    """Index of the first minimum along ``axis`` (of the flattened tensor when None), int32;
    a NaN is returned first, as in numpy and JAX.

    >>> import pypto as pto
    >>> int(pto.argmin(pto.tensor([3, -9, 2, -9])))
    1
    """
    v = api.asvalue(x, "argmin")
    d = v.dtype  # type: ignore[attr-defined]
    # the argmax of an order-reversing map: -x for floats (NaN stays NaN, maximal); -1 - x for
    # integers, which cannot overflow where -x would (-(-2³¹)); not x for bools
    if d is dt.bool_:
        r = logical_not(v)
    elif d.is_floating:
        r = api.neg(v)
    else:
        r = api.sub(-1, v)
    return api.argmax(r, axis, keepdims)


def _any_jax(x: Any, axis: Any = None, keepdims: bool = False, **kw: Any) -> Any:
    return jnp.any(x, axis=axis, keepdims=keepdims, **kw)


def _all_jax(x: Any, axis: Any = None, keepdims: bool = False, **kw: Any) -> Any:
    return jnp.all(x, axis=axis, keepdims=keepdims, **kw)


@_composite("any", "whether any element is nonzero, over axes", _any_jax, differentiable=False)
def any(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    *,
    out: Any = None,
    where: Any = None,
) -> Any:
    """Whether any element over ``axis`` (all axes when None) is nonzero, as bool; False for
    none. numpy's keywords: ``where`` (a mask: only the selected elements count) and
    ``out=None``.

    >>> import pypto as pto
    >>> pto.any(pto.tensor([[0, 0], [0, 3]]), axis=1).numpy()
    array([False,  True])
    """
    t = api.reduction_keywords("any", _truth("any", x), out=out, mask=where, fill=False)
    return api.greater(api.sum(t, axis, keepdims), 0)


@_composite("all", "whether every element is nonzero, over axes", _all_jax, differentiable=False)
def all(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    *,
    out: Any = None,
    where: Any = None,
) -> Any:
    """Whether every element over ``axis`` (all axes when None) is nonzero, as bool; True for
    none. numpy's keywords: ``where`` (a mask: only the selected elements count) and
    ``out=None``.

    >>> import pypto as pto
    >>> bool(pto.all(pto.tensor([1.0, 2.0, 0.0])))
    False
    """
    t = api.reduction_keywords("all", _truth("all", x), out=out, mask=where, fill=True)
    t = logical_not(t)
    return api.equal(api.sum(t, axis, keepdims), 0)


def _var_jax(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0, **kw: Any) -> Any:
    return jnp.var(x, axis=axis, keepdims=keepdims, ddof=ddof, **kw)


def _std_jax(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0, **kw: Any) -> Any:
    return jnp.std(x, axis=axis, keepdims=keepdims, ddof=ddof, **kw)


def variance(
    name: str,
    x: Any,
    axis: Any,
    keepdims: bool,
    ddof: int,
    correction: Any,
    *,
    dtype: Any,
    out: Any,
    where: Any,
    given_mean: Any,
    skip_nan: bool = False,
) -> Any:
    """The variance of ``var``, ``std``, ``nanvar`` and ``nanstd`` with numpy's keywords:
    ``ddof`` or ``correction`` (the same, a float allowed), ``dtype`` (a float), ``where``,
    ``mean`` (given instead of computed, with the kept axes) and ``out=None``; NaN where no
    degree of freedom is left, as JAX. ``skip_nan`` leaves the NaN elements out."""
    v = api.asvalue(x, name)
    axes = rules.normalize_axes(name, axis, api._aval(v))
    ddof = rules.integer(name, "ddof", ddof)
    if correction is None:
        corr: float = ddof
    elif ddof:
        raise ShapeError(
            f"ddof={ddof} and correction={correction!r:.40} were both given",
            op=name,
            hint="pass one of them: correction is numpy's newer name for ddof",
        )
    elif isinstance(correction, int | float | np.integer | np.floating) and not isinstance(
        correction, bool
    ):
        corr = correction.item() if isinstance(correction, np.generic) else correction
    else:
        raise DTypeError(f"correction must be a number, got {correction!r:.60}", op=name)
    d = v.dtype  # type: ignore[attr-defined]
    res = (d if d.is_floating else dt.float32) if dtype is None else dt.dtype(dtype, op=name)
    if not res.is_floating:
        raise DTypeError(
            f"dtype={res} for the variance of {api._aval(v)}: a variance is a float",
            op=name,
            hint="pass a float dtype, or cast the result",
        )
    # in float32 and rounded once, as jnp.var computes float16 and bfloat16
    f = v if d is dt.float32 else api.cast(v, dt.float32)
    kept = tuple(1 if i in axes else n for i, n in enumerate(f.shape))  # type: ignore[union-attr]
    nan = isnan(f) if skip_nan and d.is_floating else None
    if where is None and out is None and nan is None:
        m = mean(f, axes, True) if given_mean is None else _given_mean(name, given_mean, kept)
        c = api.sub(f, m)
        count = math.prod(v.shape[a] for a in axes)  # type: ignore[attr-defined]
        r = api.sum(api.mul(c, c), axes, keepdims)
        # NaN where no degree of freedom is left, as JAX gives (numpy warns and divides by 0)
        if count > corr:
            return api.cast(api.div(r, float(count - corr)), res)
        return api.cast(api.add(api.mul(r, 0.0), math.nan), res)
    ok = _ones_as(f) if nan is None else api.cast(logical_not(nan), dt.float32)
    n = api.sum(api.reduction_keywords(name, ok, mask=where, fill=0.0), axes, True)
    if given_mean is not None:
        m = _given_mean(name, given_mean, kept)
    else:
        kept_f = f if nan is None else api.where(nan, 0.0, f)
        m = api.div(api.sum(api.reduction_keywords(name, kept_f, mask=where), axes, True), n)
    c = api.sub(f, m)
    if nan is not None:
        c = api.where(nan, 0.0, c)
    sq = api.reduction_keywords(name, api.mul(c, c), out=out, mask=where, fill=0.0)
    if not keepdims:
        n = api.reshape(n, tuple(k for i, k in enumerate(n.shape) if i not in axes))
    dof = api.sub(n, float(corr))
    r = api.where(api.greater(dof, 0.0), api.div(api.sum(sq, axes, keepdims), dof), math.nan)
    return api.cast(r, res)


def _given_mean(name: str, m: Any, kept: tuple[int, ...]) -> Any:
    """A variance's ``mean=``: float32, with the shape of the mean computed with keepdims."""
    u = api.asvalue(m, name)
    if not rules.broadcasts_to(u.shape, kept):  # type: ignore[attr-defined]
        raise ShapeError(
            f"mean of shape {tuple(u.shape)} does not broadcast to {kept}, the shape of the "  # type: ignore[attr-defined]
            "mean over the reduced axes with keepdims",
            op=name,
            hint="compute it with keepdims=True: pto.mean(x, axis, keepdims=True)",
        )
    return api.cast(u, dt.float32)


@_composite("var", "mean of squared deviations from the mean, over axes", _var_jax)
def var(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    ddof: int = 0,
    *,
    dtype: Any = None,
    out: Any = None,
    where: Any = None,
    mean: Any = None,
    correction: Any = None,
) -> Any:
    """Variance over ``axis`` (all axes when None), divided by ``count - ddof`` (NaN where
    that is not positive); integer inputs give float32. numpy's keywords: ``dtype`` (of the
    result, a float dtype), ``where`` (a mask: the variance of the selected elements alone),
    ``mean`` (the mean, given with the kept axes, instead of computed), ``correction`` (numpy
    2's name for ``ddof``; a float allowed) and ``out=None``.

    >>> import pypto as pto
    >>> float(pto.var(pto.tensor([1.0, 2.0, 3.0, 4.0])))
    1.25
    >>> float(pto.var(pto.tensor([1.0, 2.0, 3.0, 4.0]), correction=0.5))
    1.4285714626312256
    """
    return variance(
        "var",
        x,
        axis,
        keepdims,
        ddof,
        correction,
        dtype=dtype,
        out=out,
        where=where,
        given_mean=mean,
    )


@_composite("std", "square root of var, over axes", _std_jax)
def std(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    ddof: int = 0,
    *,
    dtype: Any = None,
    out: Any = None,
    where: Any = None,
    mean: Any = None,
    correction: Any = None,
) -> Any:
    """Standard deviation over ``axis``: ``sqrt(var(x, axis, keepdims, ddof))``, with
    :func:`var`'s keywords.

    >>> import pypto as pto
    >>> float(pto.std(pto.tensor([1.0, 3.0])))
    1.0
    """
    return api.sqrt(
        variance(
            "std",
            x,
            axis,
            keepdims,
            ddof,
            correction,
            dtype=dtype,
            out=out,
            where=where,
            given_mean=mean,
        )
    )


def _expand_dims_jax(x: Any, axis: Any) -> Any:
    return jnp.expand_dims(x, axis)


@_composite("expand_dims", "insert size-1 axes", _expand_dims_jax, differentiable=True)
def expand_dims(x: Any, axis: int | Sequence[int]) -> Any:
    """Insert size-1 dims at ``axis`` (positions in the result)."""
    v = api.asvalue(x, "expand_dims")
    # (a non-int single axis goes to normalize_axis below, which says what it is)
    axes = tuple(axis) if isinstance(axis, Sequence) else (axis,)
    nd = len(v.shape) + len(axes)  # type: ignore[attr-defined]
    for a in axes:  # the axes index the result, so they are checked against its rank
        if isinstance(a, int) and not -nd <= a < nd:
            raise ShapeError(
                f"axis {a} is out of range for the {nd}-d result of expanding {api._aval(v)}",
                op="expand_dims",
                hint=f"use an axis in [{-nd}, {nd})",
            )
    norm = sorted(rules.normalize_axis("expand_dims", a, nd) for a in axes)
    if len(set(norm)) != len(norm):
        raise ShapeError(f"repeated axis in {axis!r}", op="expand_dims")
    shape = list(v.shape)  # type: ignore[attr-defined]
    for a in norm:
        shape.insert(a, 1)
    return api.reshape(v, tuple(shape))


def _squeeze_jax(x: Any, axis: Any = None) -> Any:
    return jnp.squeeze(x, axis)


@_composite("squeeze", "drop size-1 axes", _squeeze_jax)
def squeeze(x: Any, axis: int | Sequence[int] | None = None) -> Any:
    """Drop size-1 dims (all of them when ``axis`` is None)."""
    v = api.asvalue(x, "squeeze")
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    if axis is None:
        axes = tuple(i for i, s in enumerate(shape) if s == 1)
    else:
        axes = rules.normalize_axes("squeeze", axis, api._aval(v))
        for a in axes:
            if shape[a] != 1:
                raise ShapeError(
                    f"cannot squeeze axis {a} of size {shape[a]} in {api._aval(v)}",
                    op="squeeze",
                    hint="only size-1 axes can be squeezed",
                )
    return api.reshape(v, tuple(s for i, s in enumerate(shape) if i not in axes))


def _split_jax(x: Any, indices_or_sections: Any, axis: int = 0) -> Any:
    return jnp.split(x, indices_or_sections, axis)


@_composite("split", "slices along one axis", _split_jax)
def split(x: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Any]:
    """Split into equal sections (an int) or at the given indices, along ``axis``.

    Indices behave as the bounds of Python slices (as in numpy): negative ones count from the
    end, and the pieces between unsorted or out-of-range indices may be empty.

    >>> import pypto as pto
    >>> [t.shape for t in pto.split(pto.arange(6), 3)]
    [(2,), (2,), (2,)]
    """
    v = api.asvalue(x, "split")
    a = _axis("split", v, axis)
    n = v.shape[a]  # type: ignore[attr-defined]
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if k <= 0 or n % k:
            raise ShapeError(
                f"axis {axis} of size {n} in {api._aval(v)} cannot split into {k} equal sections",
                op="split",
                hint="pass split points as a list instead",
            )
        cuts = [n // k * i for i in range(1, k)]
    else:
        try:
            cuts = [operator.index(i) for i in indices_or_sections]
        except TypeError:
            raise ShapeError(
                f"split points must be ints, got {indices_or_sections!r:.60} "
                f"(splitting {api._aval(v)})",
                op="split",
                hint="pass a number of equal sections or a list of split points",
            ) from None
    bounds = [0, *(min(max(c + n if c < 0 else c, 0), n) for c in cuts), n]
    out = []
    for lo, hi in itertools.pairwise(bounds):
        key = (slice(None),) * a + (slice(lo, max(lo, hi)),)
        out.append(api.getitem(v, key))
    return out


def _softmax_jax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    return jax.nn.softmax(x, axis=axis, where=where)


def _normalized(name: str, x: Any, axis: Any, where: Any) -> tuple[Any, tuple[int, ...], Any]:
    """softmax's and log_softmax's operand (float), its axes, and the mask ``where``: masked
    elements become -inf, so a row's max, exponentials and sums see only the selected ones."""
    v = api.promote(name, (x,), inexact=True)[0]
    axes = rules.normalize_axes(name, axis, api._aval(v))
    w = None
    if where is not None:
        w = api.cast(api.asvalue(where, name), dt.bool_)
        v = api.reduction_keywords(name, v, mask=w, fill=-math.inf)
    return v, axes, w


@_composite("softmax", "exp(x - max) / sum(exp(x - max))", _softmax_jax)
def softmax(x: Any, axis: int | Sequence[int] | None = -1, where: Any = None) -> Any:
    """Softmax along ``axis`` (an int, a tuple of ints, or None: all), shifted by the max for
    stability; with ``where``, of the selected elements alone (the others give 0), as
    ``jax.nn.softmax``.

    >>> import pypto as pto
    >>> pto.softmax(pto.tensor([0.0, 0.0])).numpy()
    array([0.5, 0.5], dtype=float32)
    >>> pto.softmax(pto.tensor([0.0, 5.0, 0.0]), where=pto.tensor([True, False, True])).numpy()
    array([0.5, 0. , 0.5], dtype=float32)
    """
    v, axes, w = _normalized("softmax", x, axis, where)
    if builtins.any(v.shape[a] == 0 for a in axes):  # (as JAX)
        return v
    # the shift cancels: autodiff treats it as a constant (as JAX does), so the gradient
    # has no term through the max
    e = api.exp(api.sub(v, api.stop_gradient(api.max(v, axes, True))))
    r = api.div(e, api.sum(e, axes, True))
    # a row with nothing selected is NaN (-inf - -inf) until here
    return r if w is None else api.where(w, r, 0.0)


def _log_softmax_jax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    return jax.nn.log_softmax(x, axis=axis, where=where)


@_composite("log_softmax", "x - max - log(sum(exp(x - max)))", _log_softmax_jax)
def log_softmax(x: Any, axis: int | Sequence[int] | None = -1, where: Any = None) -> Any:
    """Log of softmax along ``axis``, computed stably; with ``where``, of the selected
    elements alone (the others give -inf), as ``jax.nn.log_softmax``."""
    v, axes, w = _normalized("log_softmax", x, axis, where)
    if builtins.any(v.shape[a] == 0 for a in axes):  # (as JAX)
        return v
    shifted = api.sub(v, api.stop_gradient(api.max(v, axes, True)))  # (as in softmax)
    r = api.sub(shifted, api.log(api.sum(api.exp(shifted), axes, True)))
    return r if w is None else api.where(w, r, -math.inf)


def _inexact_jax(*xs: Any) -> list[Any]:
    """The reference's operands promoted together, integers to float32 (as ``api.promote``)."""
    d = jnp.result_type(*xs)
    d = d if jnp.issubdtype(d, jnp.inexact) else jnp.float32
    return [jnp.asarray(x, d) for x in xs]


def _layer_norm_jax(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    (x,) = _inexact_jax(x)
    mu = jnp.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = jnp.mean(xc * xc, axis=-1, keepdims=True)
    y = xc * jax.lax.rsqrt(var + jnp.asarray(eps, x.dtype))
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


@_composite(
    "layer_norm", "(x - mean) / sqrt(var + eps) · weight + bias, last axis", _layer_norm_jax
)
def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    """Layer normalization over the last axis, with optional elementwise weight and bias."""
    v = api.promote("layer_norm", (x,), inexact=True)[0]
    if not v.shape:  # type: ignore[attr-defined]
        raise ShapeError(f"needs at least 1-d input, got {api._aval(v)}", op="layer_norm")
    xc = api.sub(v, mean(v, -1, True))
    var = mean(api.mul(xc, xc), -1, True)
    y = api.mul(xc, api.rsqrt(api.add(var, eps)))
    if weight is not None:
        y = api.mul(y, weight)
    if bias is not None:
        y = api.add(y, bias)
    return y


def _rms_norm_jax(x: Any, weight: Any = None, eps: float = 1e-6) -> Any:
    (x,) = _inexact_jax(x)
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    y = x * jax.lax.rsqrt(ms + jnp.asarray(eps, x.dtype))
    return y if weight is None else y * weight


@_composite("rms_norm", "x / sqrt(mean(x²) + eps) · weight, last axis", _rms_norm_jax)
def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6) -> Any:
    """Root-mean-square normalization over the last axis, with an optional weight."""
    v = api.promote("rms_norm", (x,), inexact=True)[0]
    if not v.shape:  # type: ignore[attr-defined]
        raise ShapeError(f"needs at least 1-d input, got {api._aval(v)}", op="rms_norm")
    y = api.mul(v, api.rsqrt(api.add(mean(api.mul(v, v), -1, True), eps)))
    return y if weight is None else api.mul(y, weight)


@functools.lru_cache(maxsize=4)
def causal_mask(lq: int, lk: int) -> np.ndarray:
    """bool[lq, lk]: query i sees keys j ≤ i (aligned top-left, as PyTorch's ``is_causal``).
    One read-only array per size: at seq 4096 it has 16 M elements, and tracing and the
    attention lowering both ask for it."""
    m = np.tril(np.ones((lq, lk), dtype=bool))
    m.flags.writeable = False
    return m


def _sdpa_jax(
    q: Any, k: Any, v: Any, mask: Any = None, *, causal: bool = False, scale: float | None = None
) -> Any:
    q, k, v = _inexact_jax(q, k, v)
    d = q.shape[-1]
    s = scale if scale is not None else 1.0 / math.sqrt(d)
    acc = jnp.float32 if q.dtype in (jnp.float16, jnp.bfloat16) else None
    logits = jnp.matmul(q, jnp.swapaxes(k, -1, -2), preferred_element_type=acc).astype(q.dtype)
    logits = logits * jnp.asarray(s, q.dtype)
    if causal:
        logits = jnp.where(causal_mask(q.shape[-2], k.shape[-2]), logits, -jnp.inf)
    if mask is not None:
        logits = jnp.where(mask, logits, -jnp.inf)
    p = jax.nn.softmax(logits, axis=-1)
    return jnp.matmul(p, v, preferred_element_type=acc).astype(q.dtype)


@_composite(
    "scaled_dot_product_attention",
    "softmax(q kᵀ · scale, masked) v",
    _sdpa_jax,
)
def scaled_dot_product_attention(
    q: Any, k: Any, v: Any, mask: Any = None, *, causal: bool = False, scale: float | None = None
) -> Any:
    """Attention ``softmax(q @ kᵀ · scale) @ v`` over the last two axes.

    ``q``: [..., Lq, D], ``k``: [..., Lk, D], ``v``: [..., Lk, Dv]. ``scale`` defaults to 1/√D;
    ``causal`` lets query i see keys j ≤ i; ``mask`` (bool, broadcast to [..., Lq, Lk]) keeps
    the logits where it is True.

    >>> import pypto as pto
    >>> q = pto.random.normal(0, (2, 8, 16))
    >>> pto.scaled_dot_product_attention(q, q, q, causal=True).shape
    (2, 8, 16)
    """
    qv, kv, vv = api.promote("scaled_dot_product_attention", (q, k, v), inexact=True)
    for name, t in (("q", qv), ("k", kv), ("v", vv)):
        if len(t.shape) < 2:  # type: ignore[attr-defined]
            raise ShapeError(
                f"{name} must be at least 2-d, got "
                f"{rules.show([api._aval(x) for x in (qv, kv, vv)])}",
                op="scaled_dot_product_attention",
            )
    d = qv.shape[-1]  # type: ignore[attr-defined]
    s = scale if scale is not None else 1.0 / math.sqrt(d)
    logits = api.mul(api.matmul(qv, api.transpose(kv, _swap_last(len(kv.shape)))), s)  # type: ignore[attr-defined]
    if causal:
        cm = causal_mask(qv.shape[-2], kv.shape[-2])  # type: ignore[attr-defined]
        logits = api.where(cm, logits, -math.inf)
    if mask is not None:
        logits = api.where(mask, logits, -math.inf)
    return api.matmul(softmax(logits, -1), vv)


def _swap_last(nd: int) -> tuple[int, ...]:
    return (*range(nd - 2), nd - 1, nd - 2)


# ------------------------------------------------------------------ numpy's everyday helpers


def _square_jax(x: Any) -> Any:
    return jnp.square(x)


@_composite("square", "x · x (bools give int32, as jnp.square)", _square_jax)
def square(x: Any) -> Any:
    """``x * x``, elementwise; a bool tensor counts as int32 (as in JAX).

    >>> import pypto as pto
    >>> pto.square(pto.tensor([-3, 2])).numpy()
    array([9, 4], dtype=int32)
    """
    v = api.asvalue(x, "square")
    if v.dtype is dt.bool_:  # type: ignore[attr-defined]
        v = api.cast(v, dt.int32)
    return api.mul(v, v)


def _sign_jax(x: Any) -> Any:
    return jnp.sign(x)


@_composite("sign", "-1, 0 or 1 by the sign of x (±0 and NaN stay)", _sign_jax)
def sign(x: Any) -> Any:
    """-1 where ``x < 0``, 1 where ``x > 0``, ``x`` itself elsewhere (0, -0.0 and NaN), in
    ``x``'s dtype; its derivative is zero, as in JAX.

    >>> import pypto as pto
    >>> pto.sign(pto.tensor([-2.5, 0.0, 3.0])).numpy()
    array([-1.,  0.,  1.], dtype=float32)
    """
    v = api.asvalue(x, "sign")
    if v.dtype is dt.bool_:  # type: ignore[attr-defined]
        raise DTypeError(
            f"bools have no sign, got {api._aval(v)} (jnp.sign refuses them too)",
            op="sign",
            hint="cast first, e.g. x.astype(pto.int32)",
        )
    s = api.where(api.greater(v, 0), 1, api.where(api.less(v, 0), -1, v))
    return api.stop_gradient(s)


def _logsumexp_jax(x: Any, axis: Any = None, keepdims: bool = False, **kw: Any) -> Any:
    return jax.nn.logsumexp(_inexact_jax(x)[0], axis=axis, keepdims=keepdims, **kw)


@_composite("logsumexp", "log(sum(exp(x))) over axes, shifted by the max", _logsumexp_jax)
def logsumexp(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    *,
    b: Any = None,
    return_sign: bool = False,
    where: Any = None,
) -> Any:
    """``log(sum(exp(x), axis))`` computed stably (as ``jax.nn.logsumexp``): shifted by the
    max over ``axis`` (all axes when None), or by 0 where that max is infinite or NaN, so
    that rows of -inf give -inf and a +inf gives +inf. Its gradient is the softmax.

    JAX's keywords: ``b`` scales each term (``log(sum(b · exp(x)))``; a negative sum is NaN
    unless ``return_sign``, which returns ``(log(|sum|), sign(sum))``), and ``where`` leaves
    out the elements where it is False.

    >>> import pypto as pto
    >>> f"{float(pto.logsumexp(pto.tensor([1000.0, 1000.0]))):.2f}"
    '1000.69'
    >>> r, s = pto.logsumexp(pto.tensor([0.0, 1.0]), b=pto.tensor([1.0, -1.0]), return_sign=True)
    >>> f"{float(r):.4f}", float(s)
    ('0.5413', -1.0)
    """
    if b is None:
        v = api.promote("logsumexp", (x,), inexact=True)[0]
    else:
        v, w = api.promote("logsumexp", (x, b), inexact=True)
        w = api.broadcast_to(w, tuple(v.shape))  # type: ignore[attr-defined]
        # a term scaled by 0 is left out, as in JAX: inf·0 or NaN·0 would make the sum NaN
        v = api.where(api.not_equal(w, 0.0), v, -math.inf)
    axes = rules.normalize_axes("logsumexp", axis, api._aval(v))
    m: Any = 0.0  # no shift over nothing: the sum of no terms is 0, its log -inf (as JAX)
    if 0 not in [v.shape[a] for a in axes]:  # type: ignore[attr-defined]
        m = api.max(v, axes, True, where=where, initial=-math.inf if where is not None else None)
        # the shift cancels: a constant for autodiff (as in softmax)
        m = api.stop_gradient(api.where(api.less(api.abs(m), math.inf), m, 0.0))
    e = api.exp(api.sub(v, m))
    if b is not None:
        e = api.mul(e, w)
    total = api.sum(e, axes, True, where=where)
    r = api.add(api.log(api.abs(total) if b is not None else total), m)
    if not keepdims:
        r = api.reshape(r, tuple(s for i, s in enumerate(v.shape) if i not in axes))  # type: ignore[attr-defined]
    if b is None and not return_sign:
        return r
    sgn = sign(total)
    if not keepdims:
        sgn = api.reshape(sgn, tuple(r.shape))
    if return_sign:
        return r, sgn
    return api.where(api.less(sgn, 0.0), math.nan, r)


def _stack_jax(xs: Any, axis: int = 0) -> Any:
    return jnp.stack(xs, axis)


@_composite("stack", "join tensors of one shape along a new axis", _stack_jax)
def stack(xs: Sequence[Any], axis: int = 0) -> Any:
    """Join tensors of one shape along a new axis ``axis`` of the result.

    >>> import pypto as pto
    >>> pto.stack([pto.zeros(3), pto.ones(3)], axis=1).shape
    (3, 2)
    """
    if isinstance(xs, str | bytes) or not isinstance(xs, Sequence) or not xs:
        raise ShapeError(
            f"needs a non-empty list of tensors, got {xs!r:.60}",
            op="stack",
            hint="pass a list, e.g. pto.stack([x, y])",
        )
    vs = [api.asvalue(x, "stack") for x in xs]
    shapes = {tuple(v.shape) for v in vs}  # type: ignore[attr-defined]
    if len(shapes) > 1:
        raise ShapeError(
            f"needs tensors of one shape, got {rules.show([api._aval(v) for v in vs])}",
            op="stack",
            hint="use pto.concat to join along an existing axis",
        )
    nd = len(vs[0].shape) + 1  # type: ignore[attr-defined]
    if isinstance(axis, int) and not -nd <= axis < nd:  # an axis of the result
        raise ShapeError(
            f"axis {axis} is out of range for the {nd}-d result of stacking "
            f"{rules.show([api._aval(v) for v in vs])}",
            op="stack",
            hint=f"use an axis in [{-nd}, {nd})",
        )
    a = rules.normalize_axis("stack", axis, nd, api._aval(vs[0]))
    return api.concat([expand_dims(v, a) for v in vs], a)


def _swapaxes_jax(x: Any, axis1: int, axis2: int) -> Any:
    return jnp.swapaxes(x, axis1, axis2)


@_composite("swapaxes", "exchange two axes", _swapaxes_jax)
def swapaxes(x: Any, axis1: int, axis2: int) -> Any:
    """``x`` with axes ``axis1`` and ``axis2`` exchanged (a ``transpose``).

    >>> import pypto as pto
    >>> pto.swapaxes(pto.zeros((2, 3, 4)), 0, -1).shape
    (4, 3, 2)
    """
    v = api.asvalue(x, "swapaxes")
    a, b = _axis("swapaxes", v, axis1), _axis("swapaxes", v, axis2)
    perm = list(range(len(v.shape)))  # type: ignore[attr-defined]
    perm[a], perm[b] = b, a
    return api.transpose(v, tuple(perm))


def _moveaxis_jax(x: Any, source: Any, destination: Any) -> Any:
    return jnp.moveaxis(x, source, destination)


@_composite("moveaxis", "move axes to new positions, the others keeping their order", _moveaxis_jax)
def moveaxis(x: Any, source: int | Sequence[int], destination: int | Sequence[int]) -> Any:
    """``x`` with axes ``source`` moved to positions ``destination`` (ints or equally long
    sequences), the other axes keeping their order (a ``transpose``).

    >>> import pypto as pto
    >>> pto.moveaxis(pto.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    v = api.asvalue(x, "moveaxis")
    nd = len(v.shape)  # type: ignore[attr-defined]
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise ShapeError(
            f"source {source!r} and destination {destination!r} have different lengths",
            op="moveaxis",
        )
    s = [_axis("moveaxis", v, a) for a in src]
    d = [rules.normalize_axis("moveaxis", a, nd, api._aval(v)) for a in dst]
    if len(set(s)) != len(s) or len(set(d)) != len(d):
        raise ShapeError(f"repeated axis in {source!r} or {destination!r}", op="moveaxis")
    rest = [a for a in range(nd) if a not in s]
    perm: list[int] = []
    moved = dict(zip(d, s, strict=True))
    for i in range(nd):
        perm.append(moved[i] if i in moved else rest.pop(0))
    return api.transpose(v, tuple(perm))


def _flip_jax(x: Any, axis: Any = None) -> Any:
    return jnp.flip(x, axis)


@_composite("flip", "reverse the order of elements along axes", _flip_jax)
def flip(x: Any, axis: int | Sequence[int] | None = None) -> Any:
    """``x`` reversed along ``axis`` (every axis when None): a slice with step -1.

    >>> import pypto as pto
    >>> pto.flip(pto.arange(4)).numpy()
    array([3, 2, 1, 0], dtype=int32)
    """
    v = api.asvalue(x, "flip")
    axes = rules.normalize_axes("flip", axis, api._aval(v))
    key = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(len(v.shape)))  # type: ignore[attr-defined]
    return api.getitem(v, key)


def _tri_mask(op: str, v: Any, k: Any) -> np.ndarray:
    if len(v.shape) < 2:
        raise ShapeError(
            f"needs at least 2-d input, got {api._aval(v)}",
            op=op,
            hint="it keeps a triangle of the last two axes",
        )
    return np.tri(v.shape[-2], v.shape[-1], k, dtype=bool)


def _tril_jax(x: Any, k: int = 0) -> Any:
    return jnp.tril(x, k)


def _triu_jax(x: Any, k: int = 0) -> Any:
    return jnp.triu(x, k)


@_composite("tril", "zeros above the k-th diagonal of the last two axes", _tril_jax)
def tril(x: Any, k: int = 0) -> Any:
    """The lower triangle of the last two axes: elements above diagonal ``k`` (0 the main
    one, positive above it) become zero.

    >>> import pypto as pto
    >>> pto.tril(pto.ones((3, 3), pto.int32)).numpy()
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]], dtype=int32)
    """
    v = api.asvalue(x, "tril")
    zero = False if v.dtype is dt.bool_ else 0  # type: ignore[attr-defined]
    return api.where(_tri_mask("tril", v, rules.integer("tril", "k", k)), v, zero)


@_composite("triu", "zeros below the k-th diagonal of the last two axes", _triu_jax)
def triu(x: Any, k: int = 0) -> Any:
    """The upper triangle of the last two axes: elements below diagonal ``k`` become zero.

    >>> import pypto as pto
    >>> pto.triu(pto.ones((2, 3), pto.int32), 1).numpy()
    array([[0, 1, 1],
           [0, 0, 1]], dtype=int32)
    """
    v = api.asvalue(x, "triu")
    zero = False if v.dtype is dt.bool_ else 0  # type: ignore[attr-defined]
    return api.where(_tri_mask("triu", v, rules.integer("triu", "k", k) - 1), zero, v)


def _running(op: str, x: Any, axis: int | None, reverse: bool, dtype: Any = None) -> Any:
    """``x``'s running ``op`` (``scan``'s add, mul, max or min) along ``axis`` (of the flattened
    tensor when None; from the end when ``reverse``), computed in float32 or int32; with
    numpy's ``dtype`` (sums and products), ``x`` in that dtype first, except that a bool
    ``dtype`` runs over whether each element is nonzero and gives the truth of the result."""
    name = {"add": "cumsum", "mul": "cumprod", "max": "cummax", "min": "cummin"}[op]
    v = api.asvalue(x, name)
    if dtype is not None:
        want = dt.dtype(dtype, op=name)
        if want is dt.bool_:
            r = _running(op, api.not_equal(v, 0) if v.dtype is not dt.bool_ else v, axis, reverse)  # type: ignore[attr-defined]
            return api.cast(r, dt.bool_)
        v = api.cast(v, want)
    if axis is None:
        v, a = api.reshape(v, (-1,)), 0
    else:
        a = _axis(name, v, axis)
    d = v.dtype  # type: ignore[attr-defined]
    work = dt.float32 if d.is_floating else dt.int32
    # sums and products of bools count in int32 (as JAX); their maxima and minima stay bools
    out_d = dt.int32 if d is dt.bool_ and op in ("add", "mul") else d
    if work is not d:
        v = api.cast(v, work)

    def run(u: Any) -> Any:
        return dispatch.bind(OPS["scan"], (u,), {"op": op, "reverse": bool(reverse)})

    v = _last_axis(v, a, run)
    return api.cast(v, out_d) if out_d is not work else v


def _lax_running(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The JAX reference of a running reduction: ``jax.lax``'s, with pypto's axis=None."""

    def ref(x: Any, axis: int | None = None, reverse: bool = False, dtype: Any = None) -> Any:
        if dtype is not None:  # jnp.cumsum's: bools count the nonzero elements
            d = jnp.dtype(dtype)
            if d == jnp.bool_:
                return ref(x != 0, axis, reverse).astype(d)
            return ref(x.astype(d), axis, reverse)
        if axis is None:
            x, axis = x.reshape(-1), 0
        if x.dtype == jnp.bool_ and fn in (jax.lax.cummax, jax.lax.cummin):
            return fn(x.astype(jnp.int32), axis % x.ndim, reverse=reverse).astype(jnp.bool_)
        if x.dtype == jnp.bool_:
            x = x.astype(jnp.int32)
        return fn(x, axis % x.ndim, reverse=reverse)

    return ref


@_composite(
    "cumsum", "running sums along an axis (bools count in int32)", _lax_running(jax.lax.cumsum)
)
def cumsum(x: Any, axis: int | None = None, reverse: bool = False, *, dtype: Any = None) -> Any:
    """Running sums along ``axis`` (of the flattened tensor when None; from the last element
    back when ``reverse``, as ``jax.lax.cumsum``), in ``x``'s dtype (bools in int32; integers
    wrap, as in JAX; float16 and bfloat16 are summed in float32 and rounded once), or in
    numpy's ``dtype``: ``x`` converted to it first (a bool ``dtype`` gives whether the running
    count of nonzero elements is, as ``jnp.cumsum``).

    The axis is moved last and summed by ``scan`` (float32 or int32; int8 wraps the same way
    when summed in int32 and converted back). Compiled, a kernel scans rows in UB in
    ⌈log₂ w⌉ shifted adds per chunk of ``w`` columns, carrying each chunk's last sums into the
    next: float sums are added in a different order than a serial loop.

    >>> import pypto as pto
    >>> pto.cumsum(pto.tensor([1, 2, 3, 4])).numpy()
    array([ 1,  3,  6, 10], dtype=int32)
    >>> pto.cumsum(pto.tensor([1, 2, 3, 4]), reverse=True).numpy()
    array([10,  9,  7,  4], dtype=int32)
    >>> pto.cumsum(pto.tensor([0.5, 0.75]), dtype=pto.float16).numpy()
    array([0.5 , 1.25], dtype=float16)
    """
    return _running("add", x, axis, reverse, dtype)


@_composite(
    "cumprod",
    "running products along an axis (bools count in int32)",
    _lax_running(jax.lax.cumprod),
)
def cumprod(x: Any, axis: int | None = None, reverse: bool = False, *, dtype: Any = None) -> Any:
    """Running products along ``axis`` (of the flattened tensor when None; from the end when
    ``reverse``), in ``x``'s dtype (bools in int32; integers wrap; float16 and bfloat16 are
    multiplied in float32 and rounded once), or in numpy's ``dtype`` (as :func:`cumsum`).

    Compiled, it is ``cumsum``'s kernel with multiplies. Its gradient is exact where ``x`` has
    zeros (a linear recurrence from the end, ``scan_affine``; no division by ``x``), as JAX's.

    >>> import pypto as pto
    >>> pto.cumprod(pto.tensor([1.0, 2.0, 3.0, 4.0])).numpy()
    array([ 1.,  2.,  6., 24.], dtype=float32)
    >>> pto.grad(lambda x: pto.cumprod(x).sum())(pto.tensor([2.0, 0.0, 3.0])).numpy()
    array([1., 8., 0.], dtype=float32)
    """
    return _running("mul", x, axis, reverse, dtype)


@_composite(
    "cummax",
    "running maxima along an axis (NaN propagates), as jax.lax.cummax",
    _lax_running(jax.lax.cummax),
)
def cummax(x: Any, axis: int | None = None, reverse: bool = False) -> Any:
    """Running maxima along ``axis`` (of the flattened tensor when None; from the end when
    ``reverse``), as ``jax.lax.cummax`` and ``np.maximum.accumulate``: a NaN propagates to every
    later position. Any dtype, bools included (their running ``any``).

    The gradient of each output goes to the first element that reached it. JAX's splits ties
    among equal elements in shares that depend on its scan tree; with distinct values the two
    agree.

    >>> import pypto as pto
    >>> pto.cummax(pto.tensor([1, 3, 2, 5])).numpy()
    array([1, 3, 3, 5], dtype=int32)
    >>> pto.cummax(pto.tensor([[1, 3], [2, 0]]), axis=0).numpy()
    array([[1, 3],
           [2, 3]], dtype=int32)
    """
    return _running("max", x, axis, reverse)


@_composite(
    "cummin",
    "running minima along an axis (NaN propagates), as jax.lax.cummin",
    _lax_running(jax.lax.cummin),
)
def cummin(x: Any, axis: int | None = None, reverse: bool = False) -> Any:
    """Running minima along ``axis``: :func:`cummax` with the order reversed.

    >>> import pypto as pto
    >>> pto.cummin(pto.tensor([3.0, 1.0, 2.0]), reverse=True).numpy()
    array([1., 1., 2.], dtype=float32)
    """
    return _running("min", x, axis, reverse)


def _last_axis(v: Any, a: int, fn: Callable[..., Any], *more: Any) -> Any:
    """``fn`` applied to ``v`` (and ``more`` tensors of its shape) with axis ``a`` moved last,
    the result's last axis moved back."""
    nd = len(v.shape)
    perm = (*(i for i in range(nd) if i != a), a)
    vs = [v, *more]
    if a != nd - 1:
        vs = [api.transpose(t, perm) for t in vs]
    r = fn(*vs)
    if a != nd - 1:
        r = api.transpose(r, tuple(perm.index(i) for i in range(nd)))
    return r


def _sort_keys(op: str, x: Any, axis: int | None) -> tuple[Any, int]:
    """``x`` (flattened when ``axis`` is None) with bools and int8 as float32 keys, and its
    axis. float32 holds them exactly, and sorts in one pass on the NPU (int32 takes two)."""
    v = api.asvalue(x, op)
    if axis is None:
        v, a = api.reshape(v, (-1,)), 0
    else:
        a = _axis(op, v, axis)
    if v.dtype in (dt.bool_, dt.int8):  # type: ignore[attr-defined]
        v = api.cast(v, dt.float32)
    return v, a


def _sort_flags(op: str, kind: Any, order: Any, stable: Any) -> None:
    """numpy's ``kind`` and ``order`` are refused (as JAX does); ``stable`` is a bool."""
    if kind is not None:
        raise DTypeError(
            f"kind={kind!r} is not supported",
            op=op,
            hint="pypto's sorts are always stable: drop kind (stable=True is the default)",
        )
    if order is not None:
        raise DTypeError(
            f"order={order!r} is not supported (there are no structured dtypes)",
            op=op,
            hint="sort by several keys with pto.lexsort",
        )
    rules.flag(op, "stable", stable)


def _argsort(v: Any, order: str) -> Any:
    return dispatch.bind(OPS["argsort_last"], (v,), {"order": order})


def _permute(v: Any, idx: Any) -> Any:
    return dispatch.bind(OPS["gather_last"], (v, idx), {"perm": True})


def _argsort_jax(
    x: Any, axis: int | None = -1, *, stable: bool = True, descending: bool = False, **_: Any
) -> Any:
    return jnp.argsort(x, axis=axis, stable=True, descending=descending)


@_composite("argsort", "indices that sort along an axis (stable), int32", _argsort_jax)
def argsort(
    x: Any,
    axis: int | None = -1,
    *,
    kind: None = None,
    order: None = None,
    stable: bool = True,
    descending: bool = False,
) -> Any:
    """The int32 indices that sort ``x`` along ``axis`` (of the flattened tensor when None),
    as ``jnp.argsort(x, axis, stable=True, descending=...)``: equal elements keep their order,
    ``-0.0`` equals ``0.0``, NaN sorts above ``+inf`` (first when descending). The sort is
    always stable (``stable=False`` is accepted and gives the same order).

    Compiled, a row is sorted in UB (blocks of 32 by ``TSORT32``, then 4-way merges of ever
    longer runs by ``TMRGSORT``) or, when it is too long for UB, in blocks merged pairwise
    through GM; int32 keys take two passes (their low 12 bits, then the rest), since the
    sorting unit compares floats.

    >>> import pypto as pto
    >>> pto.argsort(pto.tensor([3.0, 1.0, 2.0, 1.0])).numpy()
    array([1, 3, 2, 0], dtype=int32)
    >>> pto.argsort(pto.tensor([3, 1, 2, 1]), descending=True).numpy()
    array([0, 2, 1, 3], dtype=int32)
    """
    _sort_flags("argsort", kind, order, stable)
    v, a = _sort_keys("argsort", x, axis)
    way = "descending" if rules.flag("argsort", "descending", descending) else "ascending"
    return _last_axis(v, a, lambda r: _argsort(r, way))


def _sort_jax(
    x: Any, axis: int | None = -1, *, stable: bool = True, descending: bool = False, **_: Any
) -> Any:
    return jnp.sort(x, axis=axis, stable=True, descending=descending)


@_composite("sort", "sorted along an axis", _sort_jax)
def sort(
    x: Any,
    axis: int | None = -1,
    *,
    kind: None = None,
    order: None = None,
    stable: bool = True,
    descending: bool = False,
) -> Any:
    """``x`` sorted along ``axis`` (of the flattened tensor when None), as ``jnp.sort``: NaN
    last (first when descending, which is the ascending result reversed).

    The values are ``x`` reordered by :func:`argsort`'s permutation, so the gradient routes
    each output's cotangent back to the element it came from.

    >>> import pypto as pto
    >>> pto.sort(pto.tensor([[3.0, 1.0, 2.0]]), descending=True).numpy()
    array([[3., 2., 1.]], dtype=float32)
    """
    v = api.asvalue(x, "sort")
    if axis is None:
        v, axis = api.reshape(v, (-1,)), 0
    a = _axis("sort", v, axis)
    _sort_flags("sort", kind, order, stable)
    desc = rules.flag("sort", "descending", descending)

    def rows(r: Any) -> Any:
        keys = api.cast(r, dt.float32) if r.dtype in (dt.bool_, dt.int8) else r
        out = _permute(r, _argsort(keys, "ascending"))  # bools and int8 keep their dtype
        return api.getitem(out, (Ellipsis, slice(None, None, -1))) if desc else out

    return _last_axis(v, a, rows)


def _lexsort_jax(keys: Any, axis: int = -1) -> Any:
    return jnp.lexsort(keys, axis=axis)


@_composite("lexsort", "the permutation that sorts by several keys, the last primary", _lexsort_jax)
def lexsort(keys: Any, axis: int = -1) -> Any:
    """The int32 indices that sort by several keys along ``axis``, as ``jnp.lexsort``: the
    last key first, ties broken by the one before it, and so on (a 2-d tensor is a sequence
    of its rows). Stable sorts from the first key to the last: each sorts the permutation so
    far by its key in that order.

    >>> import pypto as pto
    >>> pto.lexsort([pto.tensor([1, 0, 1, 0]), pto.tensor([2, 2, 1, 1])]).numpy()
    array([3, 2, 1, 0], dtype=int32)
    """
    if isinstance(keys, list | tuple):
        ks = [api.asvalue(k, "lexsort") for k in keys]
    else:
        whole = api.asvalue(keys, "lexsort")
        n = whole.shape[0] if whole.shape else 0  # type: ignore[attr-defined]
        ks = [api.getitem(whole, i) for i in range(n)]
    if not ks:
        raise ShapeError("lexsort needs at least one key", op="lexsort")
    shape = tuple(ks[0].shape)  # type: ignore[attr-defined]
    for k in ks[1:]:
        if tuple(k.shape) != shape:  # type: ignore[attr-defined]
            raise ShapeError(
                f"keys of different shapes: {api._aval(ks[0])} and {api._aval(k)}",
                op="lexsort",
                hint="every key has the same shape",
            )
    if not shape:
        raise ShapeError("lexsort of 0-d keys", op="lexsort", hint="keys are at least 1-d")
    a = _axis("lexsort", ks[0], axis)

    def rows(first: Any, *rest: Any) -> Any:
        perm = _argsort(first, "ascending")
        for k in rest:
            perm = _permute(perm, _argsort(_permute(k, perm), "ascending"))
        return perm

    first, *rest = (_sort_keys("lexsort", k, a)[0] for k in ks)
    return _last_axis(first, a, rows, *rest)


def _take_along_axis_jax(arr: Any, indices: Any, axis: int | None) -> Any:
    n = arr.size if axis is None else arr.shape[axis]
    idx = jnp.where(indices < 0, indices + n, indices)
    return jnp.take_along_axis(arr, idx, axis=axis, mode="clip")


@_composite(
    "take_along_axis",
    "elements along an axis at integer indices, per position of the other axes",
    _take_along_axis_jax,
)
def take_along_axis(arr: Any, indices: Any, axis: int | None) -> Any:
    """``out[..., j, ...] = arr[..., indices[..., j, ...], ...]`` along ``axis``, as
    ``np.take_along_axis``: ``indices`` has ``arr``'s number of axes, and the other axes
    broadcast (``axis=None``: 1-d indices into the flattened ``arr``). Negative indices
    count from the end; an index out of range is an error eagerly and clamped in compiled
    code (JAX's ``mode="clip"``). Its gradient adds each output's cotangent to the element it
    was taken from.

    Compiled, each row is gathered in UB with one ``TGATHER``: the gathered axis must fit a
    vector core's buffer.

    >>> import pypto as pto
    >>> logp = pto.tensor([[-0.1, -2.5, -3.0], [-1.2, -0.4, -2.2]])
    >>> pto.take_along_axis(logp, pto.tensor([[0], [1]]), axis=1).numpy()
    array([[-0.1],
           [-0.4]], dtype=float32)
    """
    v = api.asvalue(arr, "take_along_axis")
    i = api.asvalue(indices, "take_along_axis")
    if not i.dtype.is_integer:  # type: ignore[attr-defined]
        raise DTypeError(
            f"indices must be integers, got {rules.show((api._aval(v), api._aval(i)))}",
            op="take_along_axis",
            hint="cast the indices with .astype(pto.int32)",
        )
    if axis is None:
        if len(i.shape) != 1:  # type: ignore[attr-defined]
            raise ShapeError(
                f"with axis=None the indices must be 1-d, got {api._aval(i)}",
                op="take_along_axis",
                hint="flatten them, or give an axis",
            )
        v, a = api.reshape(v, (-1,)), 0
    else:
        if len(i.shape) != len(v.shape):  # type: ignore[attr-defined]
            raise ShapeError(
                f"indices {api._aval(i)} and tensor {api._aval(v)} have different numbers of axes",
                op="take_along_axis",
                hint="add size-1 axes to the indices (i[..., None]) so that they broadcast",
            )
        a = _axis("take_along_axis", v, axis)
    vs, is_ = list(v.shape), list(i.shape)  # type: ignore[attr-defined]
    for d, (p, q) in enumerate(zip(vs, is_, strict=True)):
        if d != a and p != q:
            if 1 not in (p, q):
                raise ShapeError(
                    f"axis {d} of indices {api._aval(i)} does not broadcast against tensor "
                    f"{api._aval(v)}",
                    op="take_along_axis",
                    hint="every axis but the taken one must match or be 1",
                )
            vs[d] = is_[d] = q if p == 1 else p
    v, i = api.broadcast_to(v, tuple(vs)), api.broadcast_to(i, tuple(is_))
    if i.dtype is not dt.int32:
        i = api.cast(i, dt.int32)
    n = vs[a]
    i = api.where(api.less(i, 0), api.add(i, n), i)
    nd = len(vs)
    perm = (*(d for d in range(nd) if d != a), a)
    if a != nd - 1:
        v, i = api.transpose(v, perm), api.transpose(i, perm)
    out = dispatch.bind(OPS["gather_last"], (v, i), {"perm": False})
    if a != nd - 1:
        out = api.transpose(out, tuple(perm.index(d) for d in range(nd)))
    return out


_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_jax(
    x: Any, q: Any, axis: Any = None, method: str = "linear", keepdims: bool = False
) -> Any:
    return jnp.quantile(x, q, axis=axis, method=method, keepdims=keepdims)


def _static_q(op: str, q: Any) -> Any:
    """``q`` as a float32 numpy array of rank 0 or 1 (JAX's float32 for a Python number), or
    as a float32 value when it is traced (its values unknown until it runs)."""
    if isinstance(q, bool | np.bool_):
        raise DTypeError(f"q must be numbers, got {q!r}", op=op)
    if isinstance(q, Value) and not isinstance(q, api._ET):  # traced: no values yet
        if q.dtype is dt.bool_ or not (q.dtype.is_floating or q.dtype.is_integer):  # type: ignore[attr-defined]
            raise DTypeError(f"q must be numbers, got {api._aval(q)}", op=op)
        if len(q.shape) > 1:  # type: ignore[attr-defined]
            raise ShapeError(f"q must have rank 0 or 1, got {api._aval(q)}", op=op)
        return api.cast(q, dt.float32)
    if not isinstance(q, numbers.Number | list | tuple | np.ndarray | np.generic):
        try:  # an eager tensor holds its values
            values = np.asarray(q)
            if values.dtype == object:
                raise TypeError
        except Exception:
            raise DTypeError(f"q must be numbers, got {q!r:.60}", op=op) from None
        q = values
    try:
        arr = np.asarray(q, dtype=np.float32)
    except (TypeError, ValueError):
        raise DTypeError(f"q must be numbers, got {q!r:.60}", op=op) from None
    if arr.ndim > 1:
        raise ShapeError(f"q must have rank 0 or 1, got shape {arr.shape}", op=op)
    return arr


@_composite("quantile", "the q-th quantiles over axes (after sorting)", _quantile_jax)
def quantile(
    x: Any,
    q: Any,
    axis: int | Sequence[int] | None = None,
    method: str = "linear",
    keepdims: bool = False,
) -> Any:
    """The ``q``-th quantiles (``q`` in [0, 1], a number or a 1-d sequence: its axis comes
    first) of ``x`` over ``axis`` (all axes when None; several are merged), as
    ``jnp.quantile``: ``method`` is ``"linear"``, ``"lower"``, ``"higher"``, ``"midpoint"`` or
    ``"nearest"``; a NaN along the axis makes its quantiles NaN; integers and bools give
    float32, floats keep their dtype.

    ``x`` is sorted along the axis; the positions ``q·(n - 1)``, their floors and ceilings and
    the weights between them are known when the function is traced (computed in float32, as
    JAX does), so the quantiles are slices of the sorted values, interpolated in float32. A
    traced ``q`` (an argument of a jitted function) gathers its positions, clamped into the
    row as JAX clamps them.

    >>> import pypto as pto
    >>> pto.quantile(pto.tensor([1.0, 2.0, 3.0, 4.0]), 0.5).numpy()
    array(2.5, dtype=float32)
    >>> pto.quantile(pto.tensor([[1.0, 9.0, 5.0]]), [0.0, 1.0], axis=1).numpy()
    array([[1.],
           [9.]], dtype=float32)
    """
    return quantiles("quantile", x, q, axis, method, keepdims, skip_nan=False)


def quantiles(
    op: str,
    x: Any,
    q: Any,
    axis: int | Sequence[int] | None,
    method: str,
    keepdims: bool,
    skip_nan: bool,
) -> Any:
    """The quantiles of :func:`quantile` (``skip_nan=False``: a NaN makes its row's quantiles
    NaN) or of ``nanquantile`` (``skip_nan=True``: each row's quantiles are those of its
    elements that are not NaN, NaN where all are)."""
    if method not in _QUANTILE_METHODS:
        raise ShapeError(
            f"method {method!r} is not one of {_QUANTILE_METHODS}",
            op=op,
            hint="the weighted 'inverted_cdf' is not supported",
        )
    qs = _static_q(op, q)
    traced = not isinstance(qs, np.ndarray)
    if not traced and ((qs < 0) | (qs > 1) | np.isnan(qs)).any():
        raise ShapeError(f"q must lie in [0, 1], got {q!r:.60}", op=op)
    keep = rules.flag(op, "keepdims", keepdims)
    v = api.asvalue(x, op)
    if not v.dtype.is_floating:  # type: ignore[attr-defined]
        v = api.cast(v, dt.float32)
    nd = len(v.shape)  # type: ignore[attr-defined]
    axes = rules.normalize_axes(op, axis, api._aval(v))
    kept = [d for d in range(nd) if d not in axes]
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    n = math.prod(shape[d] for d in axes)
    if n == 0:
        raise ShapeError(
            f"{op} over a zero-size axis {axis!r} of {api._aval(v)}",
            op=op,
            hint="quantiles need at least one element",
        )
    rows = api.reshape(api.transpose(v, (*kept, *axes)), (*(shape[d] for d in kept), n))
    nan = isnan(rows)
    if skip_nan:  # every NaN positive, so they all sort to the end of the row
        rows = api.where(nan, math.nan, rows)
    else:  # a NaN anywhere along the axis makes every element NaN, so the quantiles are NaN
        rows = api.where(any(nan, -1, True), math.nan, rows)
    srt = sort(rows, -1)
    q_rank = len(qs.shape)
    if not traced:
        flat: Any = qs.reshape(-1)
    else:  # one traced scalar per quantile
        flat = [api.getitem(qs, i) for i in range(qs.shape[0])] if q_rank else [qs]
    outs = []
    if skip_nan or traced:
        # positions q·(count - 1) per row (or q·(n - 1) for a traced q), read with a gather
        # and clamped into the row, as JAX computes them
        if skip_nan:
            count = api.sum(api.cast(logical_not(nan), dt.float32), (nd - len(axes),), True)
        else:
            count = api.broadcast_to(np.float32(n), (*(shape[d] for d in kept), 1))
        last = api.sub(count, 1)
        for w in flat:
            pos = api.mul(last, w)
            low, high = floor(pos), ceil(pos)
            hw = api.sub(pos, low)
            at = [api.cast(api.maximum(api.minimum(i, last), 0.0), dt.int32) for i in (low, high)]
            lo_v, hi_v = (squeeze(take_along_axis(srt, i, -1), -1) for i in at)
            hw = squeeze(hw, -1)
            outs.append(_interpolate(method, lo_v, hi_v, hw, api.less_equal(hw, 0.5)))
    else:  # the positions are known when the function is traced: slices of the sorted rows
        pos = flat * np.float32(n - 1)
        lo = np.clip(np.floor(pos), 0, n - 1).astype(int)
        hi = np.clip(np.ceil(pos), 0, n - 1).astype(int)
        for a, b, w in zip(lo, hi, (pos - np.floor(pos)).astype(np.float32), strict=True):
            lo_v, hi_v = api.getitem(srt, (Ellipsis, int(a))), api.getitem(srt, (Ellipsis, int(b)))
            outs.append(_interpolate(method, lo_v, hi_v, w, bool(w <= 0.5)))
    if keep:
        outs = [
            api.reshape(r, tuple(1 if d in axes else shape[d] for d in range(nd))) for r in outs
        ]
    return outs[0] if q_rank == 0 else stack(outs, 0)


def _interpolate(method: str, low: Any, high: Any, w: Any, nearest_low: Any) -> Any:
    """The quantile between the sorted values ``low`` and ``high`` at fraction ``w`` of the way
    (a float32 number or tensor) by ``method``; ``nearest_low`` is ``w <= 0.5``."""
    if method == "linear":  # in float32, as JAX: the weights are float32
        d = low.dtype
        wide = [api.cast(t, dt.float32) for t in (low, high)]
        r = api.add(api.mul(wide[0], api.sub(np.float32(1), w)), api.mul(wide[1], w))
        return api.cast(r, d)
    if method == "lower":
        return low
    if method == "higher":
        return high
    if method == "nearest":
        if isinstance(nearest_low, bool):
            return low if nearest_low else high
        return api.where(nearest_low, low, high)
    return api.mul(api.add(low, high), 0.5)


def _median_jax(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return jnp.median(x, axis=axis, keepdims=keepdims)


@_composite("median", "the median over axes", _median_jax)
def median(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """The median of ``x`` over ``axis`` (all axes when None), as ``jnp.median``: the midpoint
    of the two middle elements of the sorted values (NaN if any is NaN; float32 for integers).

    >>> import pypto as pto
    >>> pto.median(pto.tensor([[3.0, 1.0, 2.0], [4.0, 8.0, 6.0]]), axis=1).numpy()
    array([2., 6.], dtype=float32)
    """
    return quantile(x, 0.5, axis, "midpoint", keepdims)


def _percentile_jax(
    x: Any, q: Any, axis: Any = None, method: str = "linear", keepdims: bool = False
) -> Any:
    return jnp.percentile(x, q, axis=axis, method=method, keepdims=keepdims)


@_composite("percentile", "the q-th percentiles over axes", _percentile_jax)
def percentile(
    x: Any,
    q: Any,
    axis: int | Sequence[int] | None = None,
    method: str = "linear",
    keepdims: bool = False,
) -> Any:
    """:func:`quantile` with ``q`` in percent (``q / 100``, in float32, as ``jnp.percentile``).

    >>> import pypto as pto
    >>> pto.percentile(pto.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), 25).numpy()
    array(2., dtype=float32)
    """
    qs = _static_q("percentile", q)
    fraction = qs / np.float32(100) if isinstance(qs, np.ndarray) else api.div(qs, 100.0)
    return quantile(x, fraction, axis, method, keepdims)


def _searchsorted_jax(
    a: Any, v: Any, side: str = "left", sorter: Any = None, *, method: str = "scan"
) -> Any:
    return jnp.searchsorted(a, v, side=side, sorter=sorter, method=method)


@_composite(
    "searchsorted",
    "insertion indices of values into a sorted 1-d tensor",
    _searchsorted_jax,
    differentiable=False,
)
def searchsorted(
    a: Any, v: Any, side: str = "left", sorter: Any = None, *, method: str = "scan"
) -> Any:
    """Where each element of ``v`` would be inserted into the sorted 1-d ``a`` to keep it
    sorted (int32, ``v``'s shape), as ``jnp.searchsorted``: ``side="left"`` counts the
    elements of ``a`` that sort before the value, ``"right"`` those that sort before or equal
    to it, in ``sort``'s order (``-0.0`` equals ``0.0``, NaN above ``+inf``). ``sorter``
    gives ``a``'s sorting permutation when ``a`` is not sorted itself.

    Every value is compared with every element (JAX's ``method="compare_all"``; the other
    methods give the same indices): elementwise kernels and a row sum when compiled.

    >>> import pypto as pto
    >>> pto.searchsorted(pto.tensor([1.0, 2.0, 2.0, 5.0]), pto.tensor([2.0, 3.0])).numpy()
    array([1, 3], dtype=int32)
    """
    if side not in ("left", "right"):
        raise ShapeError(f"side must be 'left' or 'right', got {side!r}", op="searchsorted")
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise ShapeError(f"unknown method {method!r}", op="searchsorted")
    av, vv = api.promote("searchsorted", (a, v))
    if len(av.shape) != 1:  # type: ignore[attr-defined]
        raise ShapeError(
            f"a must be 1-d, got {api._aval(av)}",
            op="searchsorted",
            hint="search each row separately, or flatten a",
        )
    if sorter is not None:
        av = api.take(av, sorter, axis=0)
    if av.dtype is dt.bool_:  # type: ignore[attr-defined]
        av, vv = api.cast(av, dt.int32), api.cast(vv, dt.int32)
    x = api.reshape(vv, (*vv.shape, 1))  # type: ignore[attr-defined]
    if av.dtype.is_floating:  # type: ignore[attr-defined]
        an, xn = isnan(av), isnan(x)
        if side == "left":  # a before v: a < v, every number before a NaN v
            before = logical_or(logical_and(xn, logical_not(an)), api.less(av, x))
        else:  # a before or equal to v: a <= v, everything before a NaN v
            before = logical_or(xn, api.less_equal(av, x))
    else:
        before = (api.less if side == "left" else api.less_equal)(av, x)
    return api.sum(api.cast(before, dt.int32), -1)


def _top_k_jax(x: Any, k: int) -> Any:
    return tuple(jax.lax.top_k(x, k))


@_composite("top_k", "the k largest along the last axis and their indices", _top_k_jax)
def top_k(x: Any, k: int) -> tuple[Any, Any]:
    """``(values, indices)`` of the ``k`` largest elements of each row (last axis), largest
    first, as ``jax.lax.top_k``: IEEE total order (``+NaN`` above ``+inf``, ``0.0`` above
    ``-0.0``, ``-NaN`` below ``-inf``), equal elements lowest index first.

    >>> import pypto as pto
    >>> v, i = pto.top_k(pto.tensor([1.0, 4.0, 2.0, 4.0]), 2)
    >>> v.numpy(), i.numpy()
    (array([4., 4.], dtype=float32), array([1, 3], dtype=int32))
    """
    v0 = api.asvalue(x, "top_k")
    if not v0.shape:  # type: ignore[attr-defined]
        raise ShapeError(
            f"top_k of a 0-d tensor {api._aval(v0)}: it runs along the last axis",
            op="top_k",
            hint="reshape to 1-d first",
        )
    v, _ = _sort_keys("top_k", v0, -1)
    n = v.shape[-1]
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 0 <= k <= n:
        raise ShapeError(
            f"k = {k!r} for a last axis of {n} ({api._aval(v0)})",
            op="top_k",
            hint=f"k is an int in [0, {n}]",
        )
    k = int(k)
    ids = None  # each value's index in the row (None: its position)
    while v.shape[-1] > TOP_K_BLOCK and k <= TOP_K_BLOCK // 4:
        v, ids = _top_k_candidates(v, ids, k)
    perm = _argsort(v, "total")
    head = (Ellipsis, slice(0, k))
    vals = api.getitem(_permute(v, perm), head)
    ids = perm if ids is None else _permute(ids, perm)
    if vals.dtype is not v0.dtype:  # the float32 keys of int8 and bool
        vals = api.cast(vals, v0.dtype)
    return vals, api.getitem(ids, head)


TOP_K_BLOCK = 2048
"""Rows longer than this take their top k in stages (when k is at most a quarter of it): the
top k of each block (of this length, or down to half of it when that divides the row), then
the top k of those candidates. The result is exact; compiled, every
sort is then of rows that fit a vector core's buffer."""


def _smallest(d: dt.DType) -> np.ndarray:
    """The value below every other of ``d`` in IEEE total order: a NaN with the sign and every
    payload bit set (the least int for integers)."""
    if d is dt.int32:
        return np.array(np.iinfo(np.int32).min, np.int32)
    return np.array(2 ** (8 * d.itemsize) - 1, f"u{d.itemsize}").view(d.np)


def _top_k_candidates(v: Any, ids: Any, k: int) -> tuple[Any, Any]:
    """The top ``k`` of each block of ``TOP_K_BLOCK`` along the last axis, with their indices,
    in block order (so equal values stay in index order). The last block is padded with the
    smallest value, which sorts after every element of the row, equal ones included."""
    *lead, n = v.shape
    # blocks that divide the row need no padding (a 32,000-wide row: 16 of 2,000)
    b: int = next((b for b in range(TOP_K_BLOCK, TOP_K_BLOCK // 2, -1) if n % b == 0), TOP_K_BLOCK)
    nb = -(-n // b)
    pad = nb * b - n
    if pad:
        fill = api.broadcast_to(api.asvalue(_smallest(v.dtype)), (*lead, pad))
        v = api.concat([v, fill], -1)
        if ids is not None:
            ids = api.concat([ids, api.broadcast_to(api.asvalue(np.int32(0)), (*lead, pad))], -1)
    vb = api.reshape(v, (*lead, nb, b))
    perm = _argsort(vb, "total")
    head = (Ellipsis, slice(0, k))
    cand = api.getitem(_permute(vb, perm), head)
    if ids is None:
        where = api.add(api.getitem(perm, head), (np.arange(nb, dtype=np.int32) * b)[:, None])
    else:
        where = api.getitem(_permute(api.reshape(ids, (*lead, nb, b)), perm), head)
    return api.reshape(cand, (*lead, nb * k)), api.reshape(where, (*lead, nb * k))


def _numbers(op: str, x: Any, y: Any) -> list[Any]:
    """``x`` and ``y`` promoted to their common dtype, which must not be bool (JAX's
    division functions refuse bools too)."""
    a, b = api.promote(op, (x, y))
    if a.dtype is dt.bool_:  # type: ignore[attr-defined]
        raise DTypeError(
            f"{op} of bool tensors {rules.show((api._aval(a), api._aval(b)))}",
            op=op,
            hint="cast to an integer dtype first",
        )
    return [a, b]


def _int_div(x: Any, y: Any) -> Any:
    """``x / y`` truncated toward zero, exactly, for int32 ``x`` and ``y`` — as XLA divides
    (``x / 0`` is -1, ``-2³¹ / -1`` wraps to -2³¹) — with no integer division: ``x - fmod(x,
    y)`` is a multiple of ``y`` no larger than ``x``; its quotient in float32 is off by at most
    a few hundred, and the error times ``y`` fits int32 (float32 is off only when the quotient
    is large, so ``y`` is small), so a second float32 quotient of that error corrects it."""
    f32 = dt.float32
    zero = api.equal(y, 0)
    y1 = api.where(zero, 1, y)
    n = api.sub(x, api.fmod(x, y1))
    yf = api.cast(y1, f32)
    q = api.cast(round(api.div(api.cast(n, f32), yf)), dt.int32)  # saturates past int32
    e = api.sub(n, api.mul(q, y1))  # wraps; the true value fits
    q = api.add(q, api.cast(round(api.div(api.cast(e, f32), yf)), dt.int32))
    return api.where(zero, -1, q)


def _floor_divide_jax(x: Any, y: Any) -> Any:
    return jnp.floor_divide(x, y)


@_composite("floor_divide", "x // y, rounded toward -inf (numpy's and JAX's)", _floor_divide_jax)
def floor_divide(x: Any, y: Any) -> Any:
    """``x // y``, elementwise: the quotient rounded toward minus infinity, as numpy's and
    JAX's (integers as JAX divides: ``x // 0`` is -1 or -2, ``-2³¹ // -1`` wraps); the
    operator ``//``. Floats are divided as CPython does, ``(x - fmod(x, y)) / y`` corrected
    and rounded, so ``floor_divide(x, y) * y + remainder(x, y)`` gives ``x`` back.

    >>> import pypto as pto
    >>> (pto.tensor([7, -7, 7, -7]) // pto.tensor([2, 2, -2, -2])).numpy()
    array([ 3, -4, -4,  3], dtype=int32)
    >>> pto.floor_divide(pto.tensor([7.5, -7.5]), 2.0).numpy()
    array([ 3., -4.], dtype=float32)
    """
    a, b = _numbers("floor_divide", x, y)
    d = a.dtype
    if d.is_floating:  # in the dtype itself, step by step as JAX does
        mod = api.fmod(a, b)
        div = api.div(api.where(api.equal(b, 0), a, api.sub(a, mod)), b)
        fix = logical_and(api.not_equal(mod, 0), api.not_equal(sign(b), sign(mod)))
        return round(api.where(fix, api.sub(div, 1.0), div))
    a32, b32 = api.cast(a, dt.int32), api.cast(b, dt.int32)
    q = _int_div(a32, b32)
    rem = api.where(api.equal(b32, 0), a32, api.fmod(a32, b32))  # XLA's x % 0 is x
    fix = logical_and(api.not_equal(sign(a32), sign(b32)), api.not_equal(rem, 0))
    return api.cast(api.where(fix, api.sub(q, 1), q), d)


def _remainder_jax(x: Any, y: Any) -> Any:
    return jnp.remainder(x, y)


@_composite("remainder", "x % y, the sign of y (numpy's and JAX's)", _remainder_jax)
def remainder(x: Any, y: Any) -> Any:
    """``x % y``, elementwise, with the sign of ``y`` (Python's, numpy's and JAX's; an
    integer ``x % 0`` is 0, as in JAX); the operator ``%``. ``fmod`` keeps the sign of ``x``.

    >>> import pypto as pto
    >>> (pto.tensor([7, -7, 7, -7]) % pto.tensor([3, 3, -3, -3])).numpy()
    array([ 1,  2, -2, -1], dtype=int32)
    >>> pto.remainder(pto.tensor([-7.5, 7.5]), 2.0).numpy()
    array([0.5, 1.5], dtype=float32)
    """
    a, b = _numbers("remainder", x, y)
    d = a.dtype
    if not d.is_floating:
        b = api.where(api.equal(b, 0), 1, b)
    mod = api.fmod(a, b)
    plus = logical_and(api.not_equal(api.less(mod, 0), api.less(b, 0)), api.not_equal(mod, 0))
    return api.where(plus, api.add(mod, b), mod)


def _prod_jax(x: Any, axis: Any = None, keepdims: bool = False, **kw: Any) -> Any:
    return jnp.prod(x, axis=axis, keepdims=keepdims, **kw)


@_composite(
    "prod", "product over axes (bools and int8 in int32; float16/bfloat16 in float32)", _prod_jax
)
def prod(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    *,
    dtype: Any = None,
    out: Any = None,
    initial: Any = None,
    where: Any = None,
) -> Any:
    """Product over ``axis`` (all axes when None); bools and int8 give int32 (integers wrap,
    as in JAX); float16 and bfloat16 are multiplied in float32 and rounded once; the product
    of no elements is 1. numpy's keywords: ``dtype`` (of the result; a float one is
    multiplied in float32), ``initial`` (a factor), ``where`` (a mask: False elements count
    as 1) and ``out=None``.

    Computed as a tree of ⌈log₂ n⌉ steps, each multiplying the first half of the running
    products by the second (an odd one out joins the first): elementwise work, exact for
    integers; float products are formed in a different order than a serial loop.

    >>> import pypto as pto
    >>> int(pto.prod(pto.tensor([1, 2, 3, 4])))
    24
    >>> pto.prod(pto.tensor([[1.0, 2.0], [3.0, 4.0]]), axis=0).numpy()
    array([3., 8.], dtype=float32)
    """
    v = api.asvalue(x, "prod")
    v, want = api.reduction_dtype("prod", v, dtype)
    v = api.reduction_keywords("prod", v, out=out, mask=where, fill=1)
    r = _product(v, rules.normalize_axes("prod", axis, api._aval(v)), keepdims)
    if initial is not None:
        first = api.reduction_initial("prod", initial, want or r.dtype)  # (as in sum)
        r = api.mul(api.cast(first, r.dtype), r)
    return r if want is None else api.cast(r, want)


def _product(v: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    """The tree product of :func:`prod`."""
    d = v.dtype
    out_d = dt.int32 if d in (dt.bool_, dt.int8) else d
    work = dt.float32 if d in (dt.float16, dt.bfloat16) else out_d
    if work is not d:
        v = api.cast(v, work)
    shape = tuple(v.shape)
    keep = [a for a in range(len(shape)) if a not in axes]
    # the reduced axes last, as one
    if list(axes) != list(range(len(keep), len(shape))):
        v = api.transpose(v, (*keep, *axes))
    n = math.prod(shape[a] for a in axes)
    v = api.reshape(v, (*(shape[a] for a in keep), n))
    if n == 0:  # the product of no elements: 1 (a sum of none, plus one)
        v = api.reshape(api.add(api.sum(v, len(keep)), 1), (*(shape[a] for a in keep), 1))
        n = 1
    lead = (slice(None),) * len(keep)
    while n > 1:
        h = n // 2
        first = api.getitem(v, (*lead, slice(0, h)))
        y = api.mul(first, api.getitem(v, (*lead, slice(h, 2 * h))))
        if n % 2:  # the odd one out joins the first product
            head = api.mul(
                api.getitem(y, (*lead, slice(0, 1))), api.getitem(v, (*lead, slice(2 * h, n)))
            )
            y = api.concat([head, api.getitem(y, (*lead, slice(1, h)))], len(keep))
        v, n = y, h
    out = api.reshape(v, tuple(shape[a] for a in keep))
    if keepdims:
        out = api.reshape(out, tuple(1 if a in axes else shape[a] for a in range(len(shape))))
    return api.cast(out, out_d) if work is not out_d else out


def _one_hot_jax(x: Any, num_classes: int, *, dtype: Any = None, axis: int = -1) -> Any:
    return jax.nn.one_hot(x, num_classes, dtype=jnp.float32 if dtype is None else dtype, axis=axis)


@_composite(
    "one_hot",
    "1 where x equals the class index along a new axis, else 0",
    _one_hot_jax,
    differentiable=False,
)
def one_hot(x: Any, num_classes: int, *, dtype: Any = None, axis: int = -1) -> Any:
    """A new axis ``axis`` of ``num_classes`` entries, 1 at index ``x`` (integers) and 0
    elsewhere (all 0 for an index outside ``[0, num_classes)``), in ``dtype`` (float32 by
    default), as ``jax.nn.one_hot``.

    >>> import pypto as pto
    >>> pto.one_hot(pto.tensor([2, 0]), 3).numpy()
    array([[0., 0., 1.],
           [1., 0., 0.]], dtype=float32)
    """
    v = api.asvalue(x, "one_hot")
    if v.dtype.is_floating or v.dtype is dt.bool_:  # type: ignore[attr-defined]
        raise DTypeError(
            f"class indices must be integers, got {api._aval(v)} (as jax.nn.one_hot asks)",
            op="one_hot",
            hint="cast first, e.g. x.astype(pto.int32) (pto.round before it for floats)",
        )
    n = rules.integer("one_hot", "num_classes", num_classes)
    if n < 0:
        raise ShapeError(f"num_classes must be >= 0, got {n}", op="one_hot")
    try:
        d = dt.float32 if dtype is None else dt.dtype(dtype)
    except DTypeError as e:
        raise DTypeError(
            f"{e.detail} (the dtype of the result)", op="one_hot", hint=e.hint
        ) from None
    nd = len(v.shape) + 1  # type: ignore[attr-defined]
    a = rules.normalize_axis("one_hot", axis, nd)
    hit = api.equal(expand_dims(v, -1), np.arange(n, dtype=np.int32))
    return api.cast(moveaxis(hit, -1, a), d)


def _einsum_jax(subscripts: str, *operands: Any) -> Any:
    return jnp.einsum(subscripts, *operands)


_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _einsum_terms(subscripts: Any, vals: list[Any]) -> tuple[list[list[Any]], list[Any]]:
    """Each operand's labels and the output's, with an ellipsis spelled out as labels
    ``0, 1, …`` (aligned from the right, as numpy broadcasts) and the implicit output (labels
    that appear once, sorted, after the ellipsis) made explicit."""
    if not isinstance(subscripts, str):
        raise ShapeError(
            f"the first argument must be the subscripts string, got {type(subscripts).__name__}",
            op="einsum",
            hint="e.g. pto.einsum('ij,jk->ik', a, b)",
        )
    spec = subscripts.replace(" ", "")
    if spec.count("->") > 1:
        raise ShapeError(f"{subscripts!r} has more than one '->'", op="einsum")
    lhs, arrow, rhs = spec.partition("->")
    words = lhs.split(",")
    shapes = [tuple(v.shape) for v in vals]
    if len(words) != len(vals):
        got = ", ".join(str(api._aval(v)) for v in vals)
        raise ShapeError(
            f"{subscripts!r} names {len(words)} operand(s) but {len(vals)} were given ({got})",
            op="einsum",
        )

    def letters(word: str, where: str) -> list[str]:
        parts = word.split("...")
        if len(parts) > 2:
            raise ShapeError(f"{where} {word!r} has more than one '...'", op="einsum")
        bad = sorted({c for c in "".join(parts) if c not in _LETTERS})
        if bad:
            raise ShapeError(
                f"{where} {word!r} has {bad[0]!r}: subscripts are letters, ',', '->' and '...'",
                op="einsum",
            )
        return parts

    n_ell = 0
    split = []
    for i, (w, shape) in enumerate(zip(words, shapes, strict=True)):
        parts = letters(w, f"operand {i}'s subscripts")
        named = sum(len(p) for p in parts)
        if (len(parts) == 1 and named != len(shape)) or named > len(shape):
            raise ShapeError(
                f"operand {i}'s subscripts {w!r} name {named} axes but it is {api._aval(vals[i])}",
                op="einsum",
                hint="use '...' for axes the subscripts do not name",
            )
        split.append(parts)
        if len(parts) == 2:
            n_ell = max(n_ell, len(shape) - named)
    ell = list(range(n_ell))
    terms: list[list[Any]] = []
    for parts, shape in zip(split, shapes, strict=True):
        if len(parts) == 1:
            terms.append(list(parts[0]))
        else:
            k = len(shape) - len(parts[0]) - len(parts[1])
            terms.append([*parts[0], *ell[n_ell - k :], *parts[1]])
    seen = [c for t in terms for c in t if isinstance(c, str)]
    if not arrow:
        return terms, [*ell, *sorted(c for c in set(seen) if seen.count(c) == 1)]
    parts = letters(rhs, "the output")
    out = [*parts[0], *(ell if len(parts) == 2 else ()), *(parts[1] if len(parts) == 2 else ())]
    for c in out:
        if isinstance(c, str) and c not in seen:
            raise ShapeError(f"output label {c!r} of {subscripts!r} is in no operand", op="einsum")
    twice = [c for c in out if out.count(c) > 1]
    if twice:
        raise ShapeError(
            f"the output of {subscripts!r} repeats label {twice[0]!r}",
            op="einsum",
            hint="for a diagonal, repeat the label in an operand: pto.einsum('ii->i', x)",
        )
    return terms, out


@_composite(
    "einsum",
    "Einstein summation: products and sums of operands named by subscripts",
    _einsum_jax,
)
def einsum(subscripts: str, /, *operands: Any) -> Any:
    """Einstein summation, as ``jnp.einsum``: ``'ij,jk->ik'`` is a matmul, ``'bhqd,bhkd->bhqk'``
    attention scores, ``'ii->i'`` a diagonal; without ``->`` the output is the labels that
    appear once, sorted, and ``...`` stands for the axes the labels do not name (broadcast).

    Each contraction is one ``matmul`` (its shared kept labels the batch axes, the cube's work
    on the NPU) or, with nothing to contract, a broadcast multiply; a label of one operand alone
    is summed first; operands are contracted two at a time, the pair with the fewest
    multiply-adds first. Bools give bools (any of the products), as in JAX.

    >>> import pypto as pto
    >>> a, b = pto.ones((2, 3)), pto.ones((3, 4))
    >>> pto.einsum("ij,jk->ik", a, b).shape
    (2, 4)
    >>> pto.einsum("ii->i", pto.tensor([[1.0, 2.0], [3.0, 4.0]])).numpy()
    array([1., 4.], dtype=float32)
    """
    if not operands:
        raise ShapeError("needs at least one operand", op="einsum", hint="pto.einsum('ij->ji', x)")
    vals = api.promote("einsum", operands)
    d = vals[0].dtype  # type: ignore[attr-defined]
    terms, out = _einsum_terms(subscripts, vals)
    size: dict[Any, int] = {}
    for i, (t, v) in enumerate(zip(terms, vals, strict=True)):
        for c, n in zip(t, v.shape, strict=True):  # type: ignore[attr-defined]
            if size.get(c, 1) == 1:
                size[c] = n
            elif n not in (1, size[c]):
                name = f"label {c!r}" if isinstance(c, str) else "an axis of '...'"
                raise ShapeError(
                    f"{name} has size {n} in operand {i} ({api._aval(vals[i])}) but "
                    f"{size[c]} before",
                    op="einsum",
                    hint="a label has one size in every operand (or 1, which broadcasts)",
                )
    if d is dt.bool_:  # counted in int32: nonzero where any product is true
        vals = [api.cast(v, dt.int32) for v in vals]
    ops = [_einsum_prepare(v, t, size) for v, t in zip(vals, terms, strict=True)]
    while True:  # each operand's own labels summed, then pairs contracted
        ops = [_einsum_sum(v, t, _einsum_wanted(ops, i, out)) for i, (v, t) in enumerate(ops)]
        if len(ops) == 1:
            break
        i, j = min(
            itertools.combinations(range(len(ops)), 2),
            key=lambda p: math.prod(size[c] for c in {*ops[p[0]][1], *ops[p[1]][1]}),
        )
        keep = {c for k, (_, t) in enumerate(ops) if k not in (i, j) for c in t} | set(out)
        pair = _einsum_pair(ops[i], ops[j], keep, size)
        ops = [pair] + [o for k, o in enumerate(ops) if k not in (i, j)]
    v, t = ops[0]
    r = api.transpose(v, tuple(t.index(c) for c in out))
    if d is dt.bool_:
        return api.not_equal(r, 0)
    return r if r.dtype is d else api.cast(r, d)


def _einsum_wanted(ops: list[tuple[Any, list[Any]]], i: int, out: list[Any]) -> set[Any]:
    """The labels operand ``i`` must keep: the output's and the other operands'."""
    return {c for k, (_, t) in enumerate(ops) if k != i for c in t} | set(out)


def _einsum_prepare(v: Any, t: list[Any], size: dict[Any, int]) -> tuple[Any, list[Any]]:
    """``v`` with its size-1 axes that broadcast against a longer one dropped, and each
    label it repeats (a diagonal) taken once."""
    drop = [a for a, c in enumerate(t) if v.shape[a] == 1 and size[c] != 1]
    if drop:
        v = api.reshape(v, tuple(n for a, n in enumerate(v.shape) if a not in drop))
        t = [c for a, c in enumerate(t) if a not in drop]
    for c in dict.fromkeys(t):
        while t.count(c) > 1:  # the diagonal of its first two axes: off-diagonal zeroed, summed
            p = t.index(c)
            q = t.index(c, p + 1)
            n = v.shape[p]
            eye = np.eye(n, dtype=bool).reshape(
                tuple(n if a in (p, q) else 1 for a in range(len(t)))
            )
            s = api.sum(api.where(eye, v, 0), q)
            v = s if s.dtype is v.dtype else api.cast(s, v.dtype)
            t = t[:q] + t[q + 1 :]
    return v, t


def _einsum_sum(v: Any, t: list[Any], wanted: set[Any]) -> tuple[Any, list[Any]]:
    axes = tuple(a for a, c in enumerate(t) if c not in wanted)
    if not axes:
        return v, t
    r = api.sum(v, axes)
    if r.dtype is not v.dtype:  # a sum of small integers widens; einsum's wraps as JAX's does
        r = api.cast(r, v.dtype)
    return r, [c for c in t if c in wanted]


def _einsum_pair(
    a: tuple[Any, list[Any]], b: tuple[Any, list[Any]], keep: set[Any], size: dict[Any, int]
) -> tuple[Any, list[Any]]:
    """Two operands contracted: labels in both that stay are batch axes, labels in both that
    go are summed by a matmul (a broadcast multiply when there are none)."""
    (x, tx), (y, ty) = a, b
    batch = [c for c in tx if c in ty and c in keep]
    inner = [c for c in tx if c in ty and c not in keep]
    fx = [c for c in tx if c not in ty]
    fy = [c for c in ty if c not in tx]
    bs = tuple(size[c] for c in batch)
    x = api.transpose(x, tuple(tx.index(c) for c in (*batch, *fx, *inner)))
    y = api.transpose(y, tuple(ty.index(c) for c in (*batch, *inner, *fy)))
    mx = tuple(size[c] for c in fx)
    ny = tuple(size[c] for c in fy)
    if not inner:  # an outer product over the free labels, per batch element
        x = _reshaped(x, (*bs, *mx, *(1,) * len(fy)))
        y = _reshaped(y, (*bs, *(1,) * len(fx), *ny))
        return api.mul(x, y), [*batch, *fx, *fy]
    k = math.prod(size[c] for c in inner)
    x = _reshaped(x, (*bs, math.prod(mx), k))
    y = _reshaped(y, (*bs, k, math.prod(ny)))
    return _reshaped(api.matmul(x, y), (*bs, *mx, *ny)), [*batch, *fx, *fy]


def _reshaped(v: Any, shape: tuple[int, ...]) -> Any:
    return v if tuple(v.shape) == shape else api.reshape(v, shape)


# ---------------------------------------------------------------------------------------------
# Accurate near zero, and the tests for special values


def _in_f32(op: str, x: Any) -> tuple[Any, dt.DType]:
    """``x`` promoted to a float (integers to float32), then widened to float32 for the
    arithmetic (float16 and bfloat16 are rounded once, at the end); and the result's dtype."""
    v = api.promote(op, (x,), inexact=True)[0]
    d = v.dtype  # type: ignore[attr-defined]
    return (v if d is dt.float32 else api.cast(v, dt.float32)), d


def _exact_value(grad_path: Any, value: Any, d: dt.DType) -> Any:
    """``value``, differentiated as ``grad_path``: ``stop_gradient(value) -
    (stop_gradient(grad_path) - grad_path)``. The bracket is +0 with derivative -1, so the
    result is ``value`` bit for bit, a -0 included (``expm1(-0.0)``, as JAX's), which
    ``grad_path + stop_gradient(value - grad_path)`` would make +0. Where ``grad_path`` is
    infinite or NaN (and ``value`` is the same) it is ``grad_path`` itself."""
    zero = api.sub(api.stop_gradient(grad_path), grad_path)  # value 0, derivative -1
    exact = api.sub(api.stop_gradient(value), zero)
    r = api.where(api.less(api.abs(grad_path), math.inf), exact, grad_path)
    return r if d is dt.float32 else api.cast(r, d)


def _log1p(v: Any) -> tuple[Any, Any]:
    """log(1 + v) in float32, accurate for tiny ``v`` (Goldberg: ``log(u) · v / (u - 1)``
    with ``u = 1 + v`` corrects the rounding of ``u``); differentiated as ``log(u)``."""
    u = api.add(v, 1.0)
    um1 = api.sub(u, 1.0)
    same = logical_or(api.equal(um1, 0.0), api.equal(u, math.inf))
    ratio = api.div(v, api.where(same, 1.0, um1))
    value = api.where(same, api.where(api.equal(u, math.inf), u, v), api.mul(api.log(u), ratio))
    return value, api.log(u)


def _log1p_jax(x: Any) -> Any:
    return jnp.log1p(_inexact_jax(x)[0])


@_composite("log1p", "log(1 + x), accurate for small x", _log1p_jax)
def log1p(x: Any) -> Any:
    """``log(1 + x)``, accurate where ``x`` is tiny (``log`` of the rounded ``1 + x`` is not),
    as ``jnp.log1p``; float16 and bfloat16 are computed in float32 and rounded once.

    >>> import pypto as pto
    >>> f"{float(pto.log1p(pto.tensor(1e-7))):.4e}"  # log(1 + 1e-7) gives 1.1921e-07
    '1.0000e-07'
    """
    v, d = _in_f32("log1p", x)
    value, path = _log1p(v)
    return _exact_value(path, value, d)


def _expm1_jax(x: Any) -> Any:
    return jnp.expm1(_inexact_jax(x)[0])


@_composite("expm1", "exp(x) - 1, accurate for small x", _expm1_jax)
def expm1(x: Any) -> Any:
    """``exp(x) - 1``, accurate where ``x`` is tiny, as ``jnp.expm1`` (Kahan: with
    ``u = exp(x)``, ``(u - 1) · (x / log(u))`` corrects the rounding of ``u``); float16 and
    bfloat16 are computed in float32 and rounded once.

    >>> import pypto as pto
    >>> f"{float(pto.expm1(pto.tensor(1e-7))):.4e}"  # exp(1e-7) - 1 gives 1.1921e-07
    '1.0000e-07'
    """
    v, d = _in_f32("expm1", x)
    u = api.exp(v)
    um1 = api.sub(u, 1.0)
    lu = api.log(u)
    # u == 1: x itself; u - 1 == -1 (x below -17, where u may be subnormal and its log
    # inexact): -1; u == inf: inf
    plain = api.equal(um1, 0.0)
    edge = logical_or(plain, logical_or(api.equal(um1, -1.0), api.equal(u, math.inf)))
    kahan = api.mul(um1, api.div(v, api.where(edge, 1.0, lu)))  # x / log(u) ~ 1: no overflow
    value = api.where(plain, v, api.where(edge, um1, kahan))
    return _exact_value(um1, value, d)


def _softplus_jax(x: Any) -> Any:
    return jax.nn.softplus(_inexact_jax(x)[0])


@_composite("softplus", "log(1 + exp(x)), without overflow", _softplus_jax)
def softplus(x: Any) -> Any:
    """``log(1 + exp(x))`` as ``jax.nn.softplus``: ``max(x, 0) + log1p(exp(-|x|))``, which
    neither overflows for large ``x`` nor loses small values for very negative ``x``; its
    gradient is ``sigmoid(x)``.

    >>> import pypto as pto
    >>> pto.softplus(pto.tensor([-20.0, 0.0, 100.0])).numpy()
    array([2.0611537e-09, 6.9314718e-01, 1.0000000e+02], dtype=float32)
    """
    v, d = _in_f32("softplus", x)
    value, _ = _log1p(api.exp(api.neg(api.abs(v))))
    value = api.add(api.maximum(v, 0.0), value)
    # differentiated with slope sigmoid(x), so x = 0 gets 1/2 as in JAX (max and |x| give 0);
    # ±inf and NaN take max(x, 0): the value, and a slope of 1 at +inf and 0 at -inf
    slope = api.mul(api.sub(v, api.stop_gradient(v)), api.stop_gradient(api.sigmoid(v)))
    finite = api.less(api.abs(v), math.inf)
    r = api.where(finite, api.add(api.stop_gradient(value), slope), api.maximum(v, 0.0))
    return r if d is dt.float32 else api.cast(r, d)


def _elu_jax(x: Any, alpha: float = 1.0) -> Any:
    return jax.nn.elu(_inexact_jax(x)[0], alpha)


@_composite("elu", "x where x > 0, else alpha · (exp(x) - 1)", _elu_jax)
def elu(x: Any, alpha: float = 1.0) -> Any:
    """Exponential linear unit, as ``jax.nn.elu``: ``x`` where ``x > 0``, else
    ``alpha · expm1(x)``.

    >>> import pypto as pto
    >>> pto.elu(pto.tensor([-1.0, 2.0])).numpy()
    array([-0.6321206,  2.       ], dtype=float32)
    """
    v = api.promote("elu", (x,), inexact=True)[0]
    pos = api.greater(v, 0.0)
    return api.where(pos, v, api.mul(expm1(api.where(pos, 0.0, v)), alpha))


def _leaky_relu_jax(x: Any, negative_slope: float = 0.01) -> Any:
    return jax.nn.leaky_relu(_inexact_jax(x)[0], negative_slope)


@_composite("leaky_relu", "x where x >= 0, else negative_slope · x", _leaky_relu_jax)
def leaky_relu(x: Any, negative_slope: float = 0.01) -> Any:
    """``x`` where ``x >= 0``, else ``negative_slope · x``, as ``jax.nn.leaky_relu``.

    >>> import pypto as pto
    >>> pto.leaky_relu(pto.tensor([-2.0, 3.0]), 0.1).numpy()
    array([-0.2,  3. ], dtype=float32)
    """
    v = api.promote("leaky_relu", (x,), inexact=True)[0]
    return api.where(api.greater_equal(v, 0.0), v, api.mul(v, negative_slope))


def _is_float(op: str, x: Any) -> tuple[Any, bool]:
    v = api.asvalue(x, op)
    return v, v.dtype.is_floating  # type: ignore[attr-defined]


@_composite("isnan", "x is NaN, elementwise", jnp.isnan, differentiable=False)
def isnan(x: Any) -> Any:
    """Where ``x`` is NaN (never, for integers and bools).

    >>> import pypto as pto
    >>> pto.isnan(pto.tensor([1.0, float("nan")])).numpy()
    array([False,  True])
    """
    v, _ = _is_float("isnan", x)
    return api.not_equal(v, v)


@_composite("isinf", "x is +inf or -inf, elementwise", jnp.isinf, differentiable=False)
def isinf(x: Any) -> Any:
    """Where ``x`` is +inf or -inf (never, for integers and bools).

    >>> import pypto as pto
    >>> pto.isinf(pto.tensor([1.0, -float("inf"), float("nan")])).numpy()
    array([False,  True, False])
    """
    v, floating = _is_float("isinf", x)
    return api.equal(api.abs(v), math.inf) if floating else api.not_equal(v, v)


def _is_inf_of_sign(op: str, x: Any, inf: float) -> Any:
    v, floating = _is_float(op, x)
    return api.equal(v, inf) if floating else api.not_equal(v, v)  # (never, for integers)


@_composite("isposinf", "x is +inf, elementwise", jnp.isposinf, differentiable=False)
def isposinf(x: Any) -> Any:
    """Where ``x`` is ``+inf`` (never, for integers and bools), as ``jnp.isposinf``.

    >>> import pypto as pto
    >>> pto.isposinf(pto.tensor([1.0, float("inf"), -float("inf")])).numpy()
    array([False,  True, False])
    """
    return _is_inf_of_sign("isposinf", x, math.inf)


@_composite("isneginf", "x is -inf, elementwise", jnp.isneginf, differentiable=False)
def isneginf(x: Any) -> Any:
    """Where ``x`` is ``-inf`` (never, for integers and bools), as ``jnp.isneginf``.

    >>> import pypto as pto
    >>> pto.isneginf(pto.tensor([1.0, float("inf"), -float("inf")])).numpy()
    array([False, False,  True])
    """
    return _is_inf_of_sign("isneginf", x, -math.inf)


@_composite("isfinite", "x is neither infinite nor NaN", jnp.isfinite, differentiable=False)
def isfinite(x: Any) -> Any:
    """Where ``x`` is neither ±inf nor NaN (always, for integers and bools).

    >>> import pypto as pto
    >>> pto.isfinite(pto.tensor([1.0, float("inf"), float("nan")])).numpy()
    array([ True, False, False])
    """
    v, floating = _is_float("isfinite", x)
    return api.less(api.abs(v), math.inf) if floating else api.equal(v, v)


def _nan_to_num_jax(x: Any, nan: float = 0.0, posinf: Any = None, neginf: Any = None) -> Any:
    return jnp.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


@_composite("nan_to_num", "NaN and ±inf replaced by finite numbers", _nan_to_num_jax)
def nan_to_num(x: Any, *, nan: float = 0.0, posinf: Any = None, neginf: Any = None) -> Any:
    """``x`` with NaN replaced by ``nan``, +inf by ``posinf`` and -inf by ``neginf`` (by
    default the dtype's largest and smallest finite values), as ``jnp.nan_to_num``; integers
    and bools are returned as they are. The gradient flows where ``x`` is kept.

    >>> import pypto as pto
    >>> pto.nan_to_num(pto.tensor([float("nan"), float("inf"), 1.0])).numpy()
    array([0.0000000e+00, 3.4028235e+38, 1.0000000e+00], dtype=float32)
    """
    v, floating = _is_float("nan_to_num", x)
    if not floating:
        return v
    big = float(dt.finfo(v.dtype).max)
    fill = {"nan": nan, "posinf": big if posinf is None else posinf}
    fill["neginf"] = -big if neginf is None else neginf
    for name, value in fill.items():
        if not isinstance(value, numbers.Real) or isinstance(value, bool | np.bool_):
            raise DTypeError(
                f"{name} must be a number, got {value!r}", op="nan_to_num", hint="e.g. nan=0.0"
            )
    hi, lo = float(fill["posinf"]), float(fill["neginf"])
    r = api.where(api.equal(v, math.inf), hi, api.where(api.equal(v, -math.inf), lo, v))
    return api.where(api.not_equal(v, v), float(fill["nan"]), r)


# ---------------------------------------------------------------------------------------------
# numpy's products and diagonals, as einsums and strided slices


def _labels(n: int, start: int = 0) -> str:
    return "".join(sorted(_LETTERS)[start : start + n])


def _tensordot_jax(a: Any, b: Any, axes: Any = 2) -> Any:
    return jnp.tensordot(a, b, axes)


@_composite("tensordot", "sums of products over the given axes of two tensors", _tensordot_jax)
def tensordot(a: Any, b: Any, axes: int | Sequence[Any] = 2) -> Any:
    """Sums of products over ``axes``: an int ``n`` pairs the last ``n`` axes of ``a`` with the
    first ``n`` of ``b``; a pair of sequences names them, as ``jnp.tensordot``. The result has
    ``a``'s remaining axes, then ``b``'s.

    >>> import pypto as pto
    >>> pto.tensordot(pto.ones((2, 3, 4)), pto.ones((3, 4, 5))).shape
    (2, 5)
    """
    x, y = api.promote("tensordot", (a, b))
    na, nb = len(x.shape), len(y.shape)  # type: ignore[attr-defined]
    if isinstance(axes, int | np.integer) and not isinstance(axes, bool):
        n = int(axes)
        if not 0 <= n <= min(na, nb):
            raise ShapeError(
                f"axes={n} for {api._aval(x)} and {api._aval(y)}: at most {min(na, nb)}",
                op="tensordot",
            )
        ax, bx = list(range(na - n, na)), list(range(n))
    else:
        try:
            if isinstance(axes, str):
                raise TypeError
            pa, pb = axes  # type: ignore[misc]
        except (TypeError, ValueError):
            raise ShapeError(
                f"axes must be an int or a pair of axis lists, got {axes!r}",
                op="tensordot",
                hint="e.g. axes=([1], [0])",
            ) from None
        pa = [pa] if isinstance(pa, int | np.integer) else list(pa)
        pb = [pb] if isinstance(pb, int | np.integer) else list(pb)
        if len(pa) != len(pb):
            raise ShapeError(
                f"axes {axes!r} pair {len(pa)} axes of a with {len(pb)} of b", op="tensordot"
            )
        ax = [rules.normalize_axis("tensordot", i, na, api._aval(x)) for i in pa]
        bx = [rules.normalize_axis("tensordot", i, nb, api._aval(y)) for i in pb]
    for i, j in zip(ax, bx, strict=True):
        if x.shape[i] != y.shape[j]:  # type: ignore[attr-defined]
            raise ShapeError(
                f"axis {i} of {api._aval(x)} and axis {j} of {api._aval(y)} differ in size",
                op="tensordot",
            )
    la = list(_labels(na))
    lb = list(_labels(nb, na))
    for i, j in zip(ax, bx, strict=True):
        lb[j] = la[i]
    out = [c for i, c in enumerate(la) if i not in ax] + [
        c for j, c in enumerate(lb) if j not in bx
    ]
    return einsum(f"{''.join(la)},{''.join(lb)}->{''.join(out)}", x, y)


@_composite("dot", "numpy's dot: matmul over the last axis of a and the second-last of b", jnp.dot)
def dot(a: Any, b: Any) -> Any:
    """numpy's ``dot``: a product with a 0-d operand, the inner product of vectors, else sums
    over the last axis of ``a`` and the second-to-last of ``b`` (the last, for a vector) — for
    N-d operands every pair of their leading axes, unlike ``matmul``.

    >>> import pypto as pto
    >>> pto.dot(pto.ones((2, 3, 4)), pto.ones((5, 4, 6))).shape
    (2, 3, 5, 6)
    """
    x, y = api.promote("dot", (a, b))
    na, nb = len(x.shape), len(y.shape)  # type: ignore[attr-defined]
    if na == 0 or nb == 0:
        return api.mul(x, y)
    return tensordot(x, y, ([na - 1], [max(nb - 2, 0)]))


@_composite("inner", "sums of products over the last axes of two tensors", jnp.inner)
def inner(a: Any, b: Any) -> Any:
    """Sums of products over the last axis of each, for every pair of their other elements
    (``jnp.inner``); a 0-d operand multiplies.

    >>> import pypto as pto
    >>> pto.inner(pto.ones((2, 3)), pto.ones((4, 3))).shape
    (2, 4)
    """
    x, y = api.promote("inner", (a, b))
    na, nb = len(x.shape), len(y.shape)  # type: ignore[attr-defined]
    if na == 0 or nb == 0:
        return api.mul(x, y)
    return tensordot(x, y, ([na - 1], [nb - 1]))


@_composite("outer", "every product of an element of a with one of b", jnp.outer)
def outer(a: Any, b: Any) -> Any:
    """``a[i] * b[j]`` for the flattened operands, as ``jnp.outer``.

    >>> import pypto as pto
    >>> pto.outer(pto.tensor([1, 2]), pto.tensor([1, 10, 100])).numpy()
    array([[  1,  10, 100],
           [  2,  20, 200]], dtype=int32)
    """
    x, y = api.promote("outer", (a, b))
    return api.mul(api.reshape(x, (-1, 1)), api.reshape(y, (1, -1)))


def _diagonal_jax(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    return jnp.diagonal(x, offset, axis1, axis2)


@_composite("diagonal", "the elements x[..., i, i + offset] of two axes", _diagonal_jax)
def diagonal(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """The diagonal ``offset`` (positive above the main one) of axes ``axis1`` and ``axis2``,
    as the last axis of the result, as ``jnp.diagonal``: a square window of the two axes read
    with a stride of one row plus one element — a copy, no arithmetic.

    >>> import pypto as pto
    >>> pto.diagonal(pto.arange(9).reshape(3, 3), 1).numpy()
    array([1, 5], dtype=int32)
    """
    return _diagonal("diagonal", x, offset, axis1, axis2)


def _diagonal(op: str, x: Any, offset: Any, axis1: Any, axis2: Any) -> Any:
    v = api.asvalue(x, op)
    nd = len(v.shape)  # type: ignore[attr-defined]
    if nd < 2:
        raise ShapeError(
            f"needs at least 2-d input, got {api._aval(v)}",
            op=op,
            hint="for a diagonal matrix from a vector x: pto.eye(n) * x",
        )
    k = rules.integer(op, "offset", offset)
    a1 = rules.normalize_axis(op, axis1, nd, api._aval(v))
    a2 = rules.normalize_axis(op, axis2, nd, api._aval(v))
    if a1 == a2:
        raise ShapeError(f"axis1 and axis2 are both axis {a1}", op=op)
    v = moveaxis(v, (a1, a2), (-2, -1))
    lead = tuple(v.shape[:-2])
    n, m = v.shape[-2:]
    r0, c0 = (0, k) if k >= 0 else (-k, 0)
    size = max(0, min(n - r0, m - c0))
    if size == 0:
        return api.reshape(api.getitem(v, (..., slice(0, 0), slice(0, 0))), (*lead, 0))
    square = api.getitem(v, (..., slice(r0, r0 + size), slice(c0, c0 + size)))
    flat = api.reshape(square, (*lead, size * size))
    return api.getitem(flat, (..., slice(None, None, size + 1)))


def _trace_jax(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    return jnp.trace(x, offset, axis1, axis2)


@_composite("trace", "the sum of a diagonal", _trace_jax)
def trace(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """The sum of ``diagonal(x, offset, axis1, axis2)``, as ``jnp.trace`` (small integers and
    bools sum in int32).

    >>> import pypto as pto
    >>> int(pto.trace(pto.arange(9).reshape(3, 3)))
    12
    """
    d = _diagonal("trace", x, offset, axis1, axis2)
    if d.dtype is dt.bool_ or d.dtype is dt.int8:
        d = api.cast(d, dt.int32)
    return api.sum(d, -1)
