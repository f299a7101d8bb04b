"""Scan primitives along the last axis, from its first element or (``reverse=True``) from its
last: ``scan`` (running sums, products, maxima or minima) and ``scan_affine`` (the linear
recurrence ``h[i] = a[i]·h[i-1] + b[i]``, or ``h[i] = a[i]·h[i+1] + b[i]`` reversed).

``pto.cumsum``, ``pto.cumprod``, ``pto.cummax`` and ``pto.cummin`` are composites that move their
axis last and call ``scan``. ``scan_affine`` is what their gradients are made of: a running
product's cotangent ``G[i] = ct[i] + x[i+1]·G[i+1]`` and a running maximum's (the cotangent of
each output summed back to the element it came from) are linear recurrences run the other way,
so the VJPs stay exact where a product has zeros — no division by the input.

Both are associative, so the compiled kernel scans in ``⌈log₂ n⌉`` shifted steps and the numpy
rule here does the same (``scan_affine``) or numpy's own running reduction (``scan``): float
results are rounded in a different order than a serial loop, as JAX's are.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import DTypeError, ShapeError
from pypto.ops import rules
from pypto.ops.table import AVal, Cost, Op, Shape, register

__all__ = ["MONOIDS", "SCAN", "SCAN_AFFINE", "identity"]

MONOIDS = ("add", "mul", "max", "min")
_DTYPES = (dt.float32, dt.int32)


def identity(op: str, dtype: dt.DType) -> float:
    """The element ``op`` leaves unchanged, as a float that converts exactly to ``dtype``.

    >>> identity("max", dt.int32), identity("min", dt.float32)
    (-2147483648.0, inf)
    """
    if op == "add":
        return 0.0
    if op == "mul":
        return 1.0
    if dtype.is_floating:
        return -math.inf if op == "max" else math.inf
    info = np.iinfo(dtype.np)
    return float(info.min if op == "max" else info.max)


def _rows(name: str, *xs: AVal) -> None:
    if any(x.ndim == 0 for x in xs):
        raise ShapeError(
            f"{name} of a 0-d tensor {rules.show(xs)}: it runs along the last axis",
            op=name,
            hint="reshape to 1-d first",
        )


def _scan_shape(x: AVal, *, op: str, reverse: bool) -> Shape:
    _rows("scan", x)
    return x.shape


def _scan_dtype(x: AVal, *, op: str, reverse: bool) -> dt.DType:
    if op not in MONOIDS:
        raise ShapeError(f"op must be one of {MONOIDS}, got {op!r}", op="scan")
    if x.dtype not in _DTYPES:
        raise DTypeError(
            f"scan runs on f32 and i32, got {x}",
            op="scan",
            hint="pto.cumsum, cumprod, cummax and cummin convert the other dtypes",
        )
    return x.dtype


_ACCUMULATE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scan_impl(x: np.ndarray, *, op: str, reverse: bool) -> np.ndarray:
    if reverse:
        r = _ACCUMULATE[op].accumulate(x[..., ::-1], axis=-1, dtype=x.dtype)
        return np.ascontiguousarray(r[..., ::-1])
    return _ACCUMULATE[op].accumulate(x, axis=-1, dtype=x.dtype)


def _scan_jax(x: Any, *, op: str, reverse: bool) -> Any:
    fn = {
        "add": jax.lax.cumsum,
        "mul": jax.lax.cumprod,
        "max": jax.lax.cummax,
        "min": jax.lax.cummin,
    }[op]
    return fn(x, axis=x.ndim - 1, reverse=reverse)


def _scan_cost(*xs: AVal, out: AVal, **params: Any) -> Cost:
    # the least work a scan needs, one operation per element and operand (the kernel does more:
    # a log-step scan)
    return Cost(
        flops=sum(x.size for x in xs),
        unit="vector",
        bytes_in=sum(x.nbytes for x in xs),
        bytes_out=out.nbytes,
    )


SCAN = register(
    Op(
        name="scan",
        kind="scan",
        doc="running sums, products, maxima or minima along the last axis (op=add|mul|max|min), "
        "from its end when reverse, f32 or i32 (integers wrap; max/min propagate NaN): the core "
        "of cumsum, cumprod, cummax and cummin",
        shape_rule=_scan_shape,
        dtype_rule=_scan_dtype,
        impl=_scan_impl,
        jax_impl=_scan_jax,
        cost_rule=_scan_cost,
        dtypes=_DTYPES,
    )
)


def _affine_shape(a: AVal, b: AVal, *, reverse: bool) -> Shape:
    _rows("scan_affine", a, b)
    if a.shape != b.shape:
        raise ShapeError(
            f"the coefficients and the terms must have one shape: {rules.show((a, b))}",
            op="scan_affine",
        )
    return a.shape


def _affine_dtype(a: AVal, b: AVal, *, reverse: bool) -> dt.DType:
    if a.dtype is not dt.float32 or b.dtype is not dt.float32:
        raise DTypeError(
            f"scan_affine runs on f32, got {rules.show((a, b))}",
            op="scan_affine",
            hint="cast both operands to float32",
        )
    return dt.float32


def affine_steps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``h`` with ``h[..., 0] = b[..., 0]`` and ``h[..., i] = a[..., i]·h[..., i-1] + b[..., i]``
    in ``⌈log₂ n⌉`` shifted steps over pairs ``(A, B)``: a pair then its right neighbour compose
    as ``(A₁·A₂, A₂·B₁ + B₂)``. ``a[..., 0]`` is never read.

    >>> affine_steps(np.array([9.0, 2, 3], np.float32), np.ones(3, np.float32)).tolist()
    [1.0, 3.0, 10.0]
    """
    A, B = a.copy(), b.copy()
    n, k = a.shape[-1], 1
    while k < n:
        # the right-hand sides read the old A and B before either is written
        B[..., k:] = B[..., k:] + A[..., k:] * B[..., :-k]
        A[..., k:] = A[..., k:] * A[..., :-k]
        k *= 2
    return B


def _affine_impl(a: np.ndarray, b: np.ndarray, *, reverse: bool) -> np.ndarray:
    if reverse:
        return np.ascontiguousarray(affine_steps(a[..., ::-1], b[..., ::-1])[..., ::-1])
    return affine_steps(a, b)


def _affine_jax(a: Any, b: Any, *, reverse: bool) -> Any:
    def combine(left: tuple[Any, Any], right: tuple[Any, Any]) -> tuple[Any, Any]:
        (a1, b1), (a2, b2) = left, right
        return a1 * a2, a2 * b1 + b2

    return jax.lax.associative_scan(combine, (a, b), reverse=reverse, axis=a.ndim - 1)[1]


SCAN_AFFINE = register(
    Op(
        name="scan_affine",
        kind="scan",
        doc="the linear recurrence h[..., i] = a[..., i]·h[..., i-1] + b[..., i] along the last "
        "axis (h[..., 0] = b[..., 0]; with reverse, h[..., i] = a[..., i]·h[..., i+1] + "
        "b[..., i] from the end), f32: the gradients of cumprod, cummax and cummin",
        shape_rule=_affine_shape,
        dtype_rule=_affine_dtype,
        impl=_affine_impl,
        jax_impl=_affine_jax,
        cost_rule=_scan_cost,
        dtypes=(dt.float32,),
    )
)
