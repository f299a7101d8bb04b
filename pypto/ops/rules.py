"""Shape and dtype rule helpers shared by the op definitions."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import BoundsError, DTypeError, ShapeError
from pypto.ops.table import AVal, Cost, Shape


def show(avals: Sequence[AVal]) -> str:
    """``f32[2,3], f16[3]`` — how operands appear in error messages."""
    return ", ".join(str(a) for a in avals)


def broadcast_shapes(op: str, *avals: AVal) -> Shape:
    """numpy broadcasting of the operands' shapes, or a ShapeError naming them."""
    ndim = max(a.ndim for a in avals)
    out = [1] * ndim
    for a in avals:
        off = ndim - a.ndim
        for i, s in enumerate(a.shape):
            o = out[off + i]
            if o == 1:
                out[off + i] = s
            elif s not in (1, o):
                raise ShapeError(
                    f"shapes {show(avals)} cannot be broadcast together "
                    f"(dimension {i - a.ndim} is {s} in one and {o} in another)",
                    op=op,
                    hint="make the sizes equal or 1, e.g. with reshape or expand_dims",
                )
    return tuple(out)


def broadcasts_to(shape: Sequence[int], target: Sequence[int]) -> bool:
    """Whether ``shape`` broadcasts to ``target`` itself (a mask or a kept-axes mean to its
    operand's shape), not merely together with it."""
    target = tuple(target)
    try:
        return tuple(np.broadcast_shapes(tuple(shape), target)) == target
    except ValueError:
        return False


def normalize_axis(op: str, axis: int, ndim: int, aval: AVal | None = None) -> int:
    """``axis`` in ``[0, ndim)``; negative axes count from the end. Numpy ints are ints."""
    if type(axis) is not int:
        try:
            if isinstance(axis, bool):
                raise TypeError
            axis = operator.index(axis)
        except TypeError:
            what = f" of {aval}" if aval is not None else ""
            raise ShapeError(
                f"axis must be an int, got {axis!r} for a {ndim}-d tensor{what}", op=op
            ) from None
    if not -ndim <= axis < ndim:
        what = f" of {aval}" if aval is not None else ""
        raise ShapeError(
            f"axis {axis} is out of range for a {ndim}-d tensor{what}",
            op=op,
            hint=f"use an axis in [{-ndim}, {ndim})" if ndim else "a 0-d tensor has no axes",
        )
    return axis + ndim if axis < 0 else axis


def flag(op: str, name: str, value: Any) -> bool:
    """A bool parameter (``keepdims``), refusing what only looks like one (an array)."""
    if isinstance(value, bool | np.bool_) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise DTypeError(f"{name} must be a bool, got {value!r:.60}", op=op)


def integer(op: str, name: str, value: Any) -> int:
    """An int parameter (``ddof``), numpy ints included."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    raise DTypeError(f"{name} must be an int, got {value!r:.60}", op=op)


def normalize_axes(op: str, axis: int | Sequence[int] | None, aval: AVal) -> tuple[int, ...]:
    """A sorted tuple of distinct axes; ``None`` means all."""
    if axis is None:
        return tuple(range(aval.ndim))
    # An int stands alone, and so does a non-int that normalize_axis explains.
    single = isinstance(axis, int) or not isinstance(axis, Sequence)
    axes: tuple[Any, ...] = (axis,) if single else tuple(axis)  # type: ignore[arg-type]
    out = tuple(sorted(normalize_axis(op, a, aval.ndim, aval) for a in axes))
    if len(set(out)) != len(out):
        raise ShapeError(f"repeated axis in {axis!r} for {aval}", op=op)
    return out


def same_dtype(op: str, *avals: AVal) -> dt.DType:
    d = avals[0].dtype
    for a in avals[1:]:
        if a.dtype is not d:
            raise DTypeError(
                f"operands must have one dtype after promotion, got {show(avals)}", op=op
            )
    return d


def check_dtype(op: str, avals: Sequence[AVal], allowed: tuple[dt.DType, ...], why: str) -> None:
    for a in avals:
        if a.dtype not in allowed:
            to = "pto.int32" if all(d.is_integer for d in allowed) else "pto.float32"
            raise DTypeError(
                f"{why}; got {show(avals)}", op=op, hint=f"cast first, e.g. x.astype({to})"
            )


def check_index(op: str, i: int, n: int, aval: AVal, axis: int) -> int:
    if not -n <= i < n:
        raise BoundsError(
            f"index {i} is out of range for axis {axis} of size {n} (tensor {aval})",
            op=op,
            hint=f"use an index in [{-n}, {n})",
        )
    return i + n if i < 0 else i


def elementwise_cost(factor: int) -> object:
    def cost(*avals: AVal, out: AVal, **params: object) -> Cost:
        return Cost(
            flops=out.size * factor,
            unit="vector",
            bytes_in=sum(a.nbytes for a in avals),
            bytes_out=out.nbytes,
        )

    return cost


def movement_cost(*avals: AVal, out: AVal, **params: object) -> Cost:
    return Cost(flops=0, unit="none", bytes_in=sum(a.nbytes for a in avals), bytes_out=out.nbytes)
