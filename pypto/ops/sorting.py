"""Sorting primitives along the last axis: ``argsort_last`` and ``gather_last``.

``pto.sort``, ``pto.argsort`` and ``pto.top_k`` are composites over these two: the axis is
moved last, ``argsort_last`` gives each row's permutation, and ``gather_last`` applies it (the
values of a sort; marked ``perm=True``, its VJP is the inverse permutation). ``gather_last``
is also ``pto.take_along_axis``'s core, whose VJP scatters the cotangent back.

Orders, as JAX's: ``order="ascending"`` and ``"descending"`` are stable (equal elements keep
their order), count ``-0.0`` equal to ``0.0`` and every NaN equal and above ``+inf``
(``jnp.argsort``); ``order="total"`` is descending in IEEE total order (``-NaN < -inf < … < -0.0
< 0.0 < … < +inf < +NaN``, equal elements lowest index first), as ``jax.lax.top_k``.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import BoundsError, DTypeError, ShapeError
from pypto.ops import rules
from pypto.ops.table import AVal, Cost, Op, Shape, register

__all__ = ["ARGSORT_LAST", "GATHER_LAST", "ORDERS", "total_order_key"]

ORDERS = ("ascending", "descending", "total")
_DTYPES = (dt.float32, dt.float16, dt.bfloat16, dt.int32)


def total_order_key(x: np.ndarray) -> np.ndarray:
    """int32 keys ordered as ``x`` in IEEE total order (``-NaN < -inf < … < -0.0 < 0.0 < … <
    +inf < +NaN``; integers are their own keys): the sign-magnitude bits with the magnitude of
    negatives flipped.

    >>> total_order_key(np.array([-0.0, 0.0, -np.inf], np.float32)).argsort().tolist()
    [2, 0, 1]
    """
    if x.dtype.kind in "iub":
        return x.astype(np.int32)
    if x.dtype.itemsize == 2:  # float16, bfloat16: their own bits (a cast could quiet a NaN)
        h = x.view(np.int16)
        return (h ^ ((h >> 15) & np.int16(0x7FFF))).astype(np.int32)
    b = x.astype(np.float32).view(np.int32)
    return b ^ ((b >> 31) & np.int32(0x7FFFFFFF))


def _rows(name: str, x: AVal) -> None:
    if x.ndim == 0:
        raise ShapeError(
            f"{name} of a 0-d tensor {x}: it runs along the last axis",
            op=name,
            hint="reshape to 1-d first",
        )


def _argsort_dtype(x: AVal, *, order: str) -> dt.DType:
    if order not in ORDERS:
        raise ShapeError(f"order must be one of {ORDERS}, got {order!r}", op="argsort_last")
    if x.dtype not in _DTYPES:
        raise DTypeError(
            f"argsort_last sorts f32, f16, bf16 and i32, got {x}",
            op="argsort_last",
            hint="pto.argsort converts bools and int8 to int32",
        )
    return dt.int32


def _argsort_shape(x: AVal, *, order: str) -> Shape:
    _rows("argsort_last", x)
    return x.shape


def _argsort_impl(x: np.ndarray, *, order: str) -> np.ndarray:
    if order != "total" and (x.dtype.kind == "f" or x.dtype == dt.bfloat16.np):
        # -0.0 as 0.0 and every NaN the same (positive) NaN
        f = x.astype(np.float32)
        x = np.where(np.isnan(f), np.float32(np.nan), np.where(f == 0, np.float32(0), f))
    key = total_order_key(x)
    # ~key reverses int32 order without overflow: a stable descending sort
    return np.argsort(key if order == "ascending" else ~key, axis=-1, kind="stable").astype(
        np.int32
    )


def _argsort_jax(x: Any, *, order: str) -> Any:
    if order == "total":
        return jax.lax.top_k(x, x.shape[-1])[1]
    return jnp.argsort(x, axis=-1, stable=True, descending=order == "descending")


def _sort_cost(x: AVal, *, out: AVal, **params: Any) -> Cost:
    n = x.shape[-1] if x.ndim else 1
    # a merge sort's comparisons: n·log2(n) per row
    return Cost(
        flops=x.size * max(1, math.ceil(math.log2(max(n, 2)))),
        unit="vector",
        bytes_in=x.nbytes,
        bytes_out=out.nbytes,
    )


ARGSORT_LAST = register(
    Op(
        name="argsort_last",
        kind="sort",
        doc="the permutation that sorts each row (last axis), int32: stable ascending or "
        "descending (±0 equal, NaN above inf), or descending in IEEE total order (top_k's)",
        shape_rule=_argsort_shape,
        dtype_rule=_argsort_dtype,
        impl=_argsort_impl,
        jax_impl=_argsort_jax,
        cost_rule=_sort_cost,
        dtypes=_DTYPES,
        differentiable=False,
    )
)


def _gather_shape(x: AVal, idx: AVal, *, perm: bool) -> Shape:
    _rows("gather_last", x)
    if idx.ndim != x.ndim or idx.shape[:-1] != x.shape[:-1]:
        raise ShapeError(
            f"the indices must have the tensor's leading axes: {rules.show((x, idx))}",
            op="gather_last",
        )
    if perm and idx.shape != x.shape:
        raise ShapeError(
            f"a permutation must have the shape of the tensor: {rules.show((x, idx))}",
            op="gather_last",
        )
    return idx.shape


def _gather_dtype(x: AVal, idx: AVal, *, perm: bool) -> dt.DType:
    if idx.dtype is not dt.int32:
        raise DTypeError(
            f"the indices must be int32: {rules.show((x, idx))}",
            op="gather_last",
            hint="cast them with .astype(pto.int32)",
        )
    return x.dtype


def _gather_impl(x: np.ndarray, idx: np.ndarray, *, perm: bool) -> np.ndarray:
    n = x.shape[-1]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = int(idx.max()) if idx.max() >= n else int(idx.min())
        raise BoundsError(
            f"index {bad} is out of range for the taken axis, of size {n}",
            op="take_along_axis",
            hint=f"indices must lie in [{-n}, {n})",
        )
    return np.take_along_axis(x, idx, -1)


def _gather_jax(x: Any, idx: Any, *, perm: bool) -> Any:
    return jnp.take_along_axis(x, idx, axis=-1, mode="clip")


GATHER_LAST = register(
    Op(
        name="gather_last",
        kind="sort",
        doc="out[..., j] = x[..., idx[..., j]] along the last axis (take_along_axis's core; "
        "with perm=True the indices are a permutation of each row, sort's values, and the VJP "
        "is the inverse permutation)",
        shape_rule=_gather_shape,
        dtype_rule=_gather_dtype,
        impl=_gather_impl,
        jax_impl=_gather_jax,
        cost_rule=rules.movement_cost,
    )
)
