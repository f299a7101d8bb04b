"""``sem``, ``rankdata`` and ``mode`` of ``jax.scipy.stats``: statistics of samples, over
sorts and running extrema (no per-row loop), so they trace and compile like the rest."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import ShapeError
from pypto.ops import any as any_
from pypto.ops import api, argsort, atleast_1d, composite, cumsum, nanstd, std, take_along_axis
from pypto.ops.api import promote

_METHODS = ("average", "min", "max", "dense", "ordinal")


def _policy(name: str, nan_policy: str, allowed: tuple[str, ...]) -> None:
    if nan_policy not in allowed:
        raise ShapeError(
            f"nan_policy {nan_policy!r} is not supported",
            op=name,
            hint=f"pass one of {', '.join(map(repr, allowed))}",
        )


def sem(
    a: Any,
    axis: int | None = 0,
    ddof: int = 1,
    nan_policy: str = "propagate",
    *,
    keepdims: bool = False,
) -> Any:
    """The standard error of the mean, ``std(a, ddof) / √n`` along ``axis`` (all of ``a``
    when None); with ``nan_policy="omit"``, over the elements that are not NaN. As
    ``jax.scipy.stats.sem``.

    >>> import pypto as pto
    >>> round(float(sem(pto.tensor([1.0, 2.0, 3.0, 4.0]))), 5)
    0.6455
    """
    _policy("sem", nan_policy, ("propagate", "omit"))
    b: Any = promote("sem", (a,), inexact=True)[0]
    if nan_policy == "propagate":
        size = math.prod(b.shape) if axis is None else b.shape[axis]
        return api.div(std(b, axis, keepdims, ddof), math.sqrt(size))
    count = api.sum(api.cast(composite.logical_not(composite.isnan(b)), b.dtype), axis, keepdims)
    return api.div(nanstd(b, axis, keepdims=keepdims, ddof=ddof), api.sqrt(count))


def _runs(s: Any) -> tuple[Any, Any]:
    """For each position of ``s`` (sorted along its last axis): where its run of equal
    values starts and where it ends (exclusive). NaNs make one run, as ``jnp.unique``'s."""
    n = s.shape[-1]
    idx = api.asvalue(np.arange(n, dtype=np.int32))
    both_nan = composite.logical_and(composite.isnan(s[..., 1:]), composite.isnan(s[..., :-1]))
    new = composite.logical_and(
        api.not_equal(s[..., 1:], s[..., :-1]), composite.logical_not(both_nan)
    )
    first = api.broadcast_to(api.asvalue(np.ones((1,), bool)), (*s.shape[:-1], 1))
    starts = api.concat([first, new], -1)  # a run starts here
    ends = api.concat([new, first], -1)  # a run ends here
    start = composite.cummax(api.where(starts, idx, 0), -1)
    end = composite.cummin(api.where(ends, api.add(idx, 1), n), -1, reverse=True)
    return start, end


def rankdata(
    a: Any, method: str = "average", *, axis: int | None = None, nan_policy: str = "propagate"
) -> Any:
    """The ranks (from 1) of ``a``'s elements, in float32, ties resolved by ``method``:
    ``"average"``, ``"min"``, ``"max"``, ``"dense"`` or ``"ordinal"``; of the flattened
    ``a`` or along ``axis``. A row with a NaN is all NaN. As ``jax.scipy.stats.rankdata``.

    >>> import pypto as pto
    >>> rankdata(pto.tensor([10.0, 20.0, 10.0, 5.0])).numpy()
    array([2.5, 4. , 2.5, 1. ], dtype=float32)
    """
    _policy("rankdata", nan_policy, ("propagate",))
    if method not in _METHODS:
        raise ShapeError(
            f"unknown method {method!r}",
            op="rankdata",
            hint=f"pass one of {', '.join(map(repr, _METHODS))}",
        )
    x = api.asvalue(a, "rankdata")
    if axis is None:
        x = api.reshape(x, (-1,))
        axis = 0
    x = composite.moveaxis(x, axis, -1)
    if x.shape[-1] == 0:
        return composite.moveaxis(api.cast(x, dt.float32), -1, axis)
    order = argsort(x, -1)
    inv = argsort(order, -1)  # the inverse permutation
    if method == "ordinal":
        r = api.cast(api.add(inv, 1), dt.float32)
    else:
        start, end = _runs(take_along_axis(x, order, -1))
        if method == "dense":
            n = x.shape[-1]
            idx = api.asvalue(np.arange(n, dtype=np.int32))
            dense = cumsum(api.cast(api.equal(start, idx), dt.int32), -1)
            ranked = api.cast(dense, dt.float32)
        elif method == "min":
            ranked = api.cast(api.add(start, 1), dt.float32)
        elif method == "max":
            ranked = api.cast(end, dt.float32)
        else:
            ranked = api.mul(api.cast(api.add(api.add(start, 1), end), dt.float32), 0.5)
        r = take_along_axis(ranked, inv, -1)
    if x.dtype.is_floating:
        r = api.where(any_(composite.isnan(x), -1, keepdims=True), math.nan, r)
    return composite.moveaxis(r, -1, axis)


class ModeResult(NamedTuple):
    """``mode``'s result: the most frequent values and how often they occur."""

    mode: Any
    count: Any


def mode(
    a: Any, axis: int | None = 0, nan_policy: str = "propagate", keepdims: bool = False
) -> ModeResult:
    """The most frequent value along ``axis`` (the smallest of equally frequent ones) and its
    count, as ``jax.scipy.stats.mode``; NaNs count as one value. Over nothing, NaN and 0.

    >>> import pypto as pto
    >>> m = mode(pto.tensor([[1, 2], [1, 3], [2, 3]]))
    >>> m.mode.numpy(), m.count.numpy()
    (array([1, 3], dtype=int32), array([2, 2], dtype=int32))
    """
    _policy("mode", nan_policy, ("propagate",))
    x = atleast_1d(api.asvalue(a, "mode"))
    nd = len(x.shape)
    if axis is None:
        shape_out = (1,) * nd if keepdims else ()
        x, axis = api.reshape(x, (-1,)), 0
    else:
        axis = axis % nd if -nd <= axis < nd else axis
        if not 0 <= axis < nd:
            raise ShapeError(f"axis {axis} is out of range for {nd} dims", op="mode")
        shape_out = (
            tuple(1 if i == axis else s for i, s in enumerate(x.shape))
            if keepdims
            else tuple(s for i, s in enumerate(x.shape) if i != axis)
        )
    x = composite.moveaxis(x, axis, -1)
    if x.shape[-1] == 0:
        nan = api.broadcast_to(api.asvalue(np.float32(np.nan)), shape_out)
        return ModeResult(nan, api.broadcast_to(api.asvalue(np.float32(0)), shape_out))
    s = composite.sort(x, -1)
    start, end = _runs(s)
    counts = api.sub(end, start)
    best = api.argmax(counts, -1, keepdims=True)  # the first: the smallest value
    vals = take_along_axis(s, best, -1)
    cnt = take_along_axis(counts, best, -1)
    return ModeResult(api.reshape(vals, shape_out), api.reshape(cnt, shape_out))
