"""numpy's functions whose result's length depends on the data — ``nonzero``, ``flatnonzero``,
``argwhere``, ``unique``, ``compress``, ``extract`` — with JAX's ``size=`` and ``fill_value=``.

Shapes are static, so a compiled program needs ``size``: the first ``size`` results, the rest
``fill_value``. Eagerly (or with values known when tracing) ``size`` may be left out and is
counted from the values, as JAX does outside ``jit``.

Positions come from counts, without a scatter: the k-th nonzero element's flat index is the
number of elements whose running count of nonzeros is below k+1 (JAX's formula: a
``bincount`` of the running count, then its ``cumsum``). ``unique`` sorts, marks the first of
each run of equal values and gathers at those marks' positions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import ShapeError, TraceError
from pypto.ops import api, composite, numpy_lib, rules
from pypto.ops.composite import _composite
from pypto.ops.indexing import _concrete
from pypto.ops.numeric import bincount


def _count(op: str, mask: Any, size: Any) -> int:
    """``size`` checked, or the number of True elements of ``mask`` when it is concrete."""
    if size is not None:
        n = rules.integer(op, "size", size)
        if n < 0:
            raise ShapeError(f"size must be >= 0, got {n}", op=op)
        return n
    c = _concrete(mask)
    if c is None:
        raise TraceError(
            f"the length of {op}'s result depends on the values of {api._aval(mask)}, and "
            "shapes are static when tracing",
            op=op,
            hint=f"pass size=... (a static bound; the rest is fill_value), as jnp.{op} asks "
            "under jit",
        )
    return int(np.count_nonzero(c))


def _flat_positions(mask: Any, n: int) -> Any:
    """The flat indices of the first ``n`` True elements of the 1-d ``mask`` (the number of
    elements, past its True ones)."""
    running = composite.cumsum(api.cast(mask, dt.int32))
    return composite.cumsum(bincount(running, length=n))


def _nonzero_jax(a: Any, *, size: Any = None, fill_value: Any = None) -> Any:
    return jnp.nonzero(a, size=size, fill_value=fill_value)


@_composite(
    "nonzero",
    "indices of the nonzero elements, one int32 array per axis",
    _nonzero_jax,
    differentiable=False,
)
def nonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The indices of ``a``'s nonzero elements in row-major order, one int32 tensor per axis,
    as ``jnp.nonzero``: with ``size``, the first ``size`` of them, padded with ``fill_value``
    (a scalar or one per axis; the padding is 0 without it).

    >>> import pypto as pto
    >>> x = pto.tensor([[0, 3], [4, 0]])
    >>> [i.numpy() for i in pto.nonzero(x)]
    [array([0, 1], dtype=int32), array([1, 0], dtype=int32)]
    >>> pto.nonzero(pto.tensor([0.0, 2.0]), size=3, fill_value=-1)[0].numpy()
    array([ 1, -1, -1], dtype=int32)
    """
    v = api.asvalue(a, "nonzero")
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    if not shape:
        raise ShapeError(
            f"nonzero of a 0-d tensor {api._aval(v)}",
            op="nonzero",
            hint="make it 1-d first: pto.atleast_1d(x)",
        )
    mask = v if v.dtype is dt.bool_ else api.not_equal(v, 0)  # type: ignore[attr-defined]
    mask = api.reshape(mask, (-1,))
    n = _count("nonzero", mask, size)
    if not math.prod(shape) or not n:
        return tuple(api.asvalue(np.zeros(n, np.int32)) for _ in shape)
    flat = _flat_positions(mask, n)
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    out = [
        composite.remainder(composite.floor_divide(flat, s) if s > 1 else flat, m)
        for s, m in zip(strides, shape, strict=True)
    ]
    if fill_value is not None:
        fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * len(shape)
        if len(fills) != len(shape) or any(np.ndim(f) for f in fills):
            raise ShapeError(
                f"fill_value must be a scalar or a tuple of {len(shape)} scalars, "
                f"got {fill_value!r}",
                op="nonzero",
            )
        pad = api.greater_equal(np.arange(n, dtype=np.int32), api.sum(api.cast(mask, dt.int32)))
        out = [api.cast(api.where(pad, f, o), dt.int32) for f, o in zip(fills, out, strict=True)]
    return tuple(out)


def _flatnonzero_jax(a: Any, *, size: Any = None, fill_value: Any = None) -> Any:
    return jnp.flatnonzero(a, size=size, fill_value=fill_value)


@_composite(
    "flatnonzero",
    "flat indices of the nonzero elements (int32)",
    _flatnonzero_jax,
    differentiable=False,
)
def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The indices of the nonzero elements of ``a`` flattened, as ``jnp.flatnonzero``
    (``size`` and ``fill_value`` as :func:`nonzero`'s).

    >>> import pypto as pto
    >>> pto.flatnonzero(pto.tensor([[0, 3], [4, 0]])).numpy()
    array([1, 2], dtype=int32)
    """
    v = api.reshape(api.asvalue(a, "flatnonzero"), (-1,))
    return nonzero(v, size=size, fill_value=fill_value)[0]


def _argwhere_jax(a: Any, *, size: Any = None, fill_value: Any = None) -> Any:
    return jnp.argwhere(a, size=size, fill_value=fill_value)


@_composite(
    "argwhere",
    "indices of the nonzero elements as rows (int32)",
    _argwhere_jax,
    differentiable=False,
)
def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The indices of the nonzero elements, one row each (``[count, ndim]``, int32), as
    ``jnp.argwhere`` (``size`` and ``fill_value`` as :func:`nonzero`'s).

    >>> import pypto as pto
    >>> pto.argwhere(pto.tensor([[0, 3], [4, 0]])).numpy()
    array([[0, 1],
           [1, 0]], dtype=int32)
    """
    v = api.asvalue(a, "argwhere")
    nd = len(v.shape)  # type: ignore[attr-defined]
    parts = nonzero(v if nd else api.reshape(v, (1,)), size=size, fill_value=fill_value)
    rows = composite.stack(list(parts), 1)
    return rows if nd else api.reshape(api.getitem(rows, (slice(None), slice(0, 0))), (-1, 0))


def _compress_jax(
    condition: Any, a: Any, axis: Any = None, *, size: Any = None, fill_value: Any = 0
) -> Any:
    return jnp.compress(condition, a, axis, size=size, fill_value=fill_value)


@_composite("compress", "the slices of a along an axis where a 1-d condition holds", _compress_jax)
def compress(
    condition: Any, a: Any, axis: int | None = None, *, size: int | None = None, fill_value: Any = 0
) -> Any:
    """The slices of ``a`` along ``axis`` (of ``a`` flattened when None) where the 1-d
    ``condition`` is true, in order, as ``jnp.compress``: ``condition`` may be shorter than
    the axis (the rest is dropped) but not longer with a true entry past it; with ``size``,
    the first ``size`` slices, padded with ``fill_value``.

    >>> import pypto as pto
    >>> x = pto.tensor([[1, 2], [3, 4], [5, 6]])
    >>> pto.compress(pto.tensor([False, True, True]), x, axis=0).numpy()
    array([[3, 4],
           [5, 6]], dtype=int32)
    """
    c = api.asvalue(condition, "compress")
    v = api.asvalue(a, "compress")
    if len(c.shape) != 1:  # type: ignore[attr-defined]
        raise ShapeError(f"condition must be 1-d, got {api._aval(c)}", op="compress")
    c = c if c.dtype is dt.bool_ else api.not_equal(c, 0)  # type: ignore[attr-defined]
    if axis is None:
        v, a_ = api.reshape(v, (-1,)), 0
    else:
        a_ = rules.normalize_axis("compress", axis, len(v.shape), api._aval(v))  # type: ignore[attr-defined]
        v = composite.moveaxis(v, a_, 0)
    n, k = v.shape[0], c.shape[0]  # type: ignore[union-attr]
    if k > n:
        extra = _concrete(api.getitem(c, slice(n, None)))
        if extra is None or extra.any():
            raise ShapeError(
                f"condition {api._aval(c)} is longer than the axis of length {n}"
                + ("" if extra is None else " and true past it"),
                op="compress",
                hint=f"pass condition[:{n}]",
            )
        c, k = api.getitem(c, slice(0, n)), n
    m = _count("compress", c, size)
    if size is not None and not 0 < m <= k:
        raise ShapeError(
            f"size={m} for {k} slices (condition {api._aval(c)}, tensor {api._aval(v)})",
            op="compress",
            hint=f"size is between 1 and {k}, as jnp.compress asks",
        )
    v = api.getitem(v, slice(0, k))
    if size is not None:  # (JAX fills the slices left out before it orders them)
        keep = api.reshape(c, (k,) + (1,) * (len(v.shape) - 1))
        v = api.where(keep, v, api.cast(api.asvalue(fill_value, "compress"), v.dtype))
    # the true entries first, in order (a stable sort of the condition, descending)
    order = api.getitem(composite.argsort(api.cast(c, dt.int32), descending=True), slice(0, m))
    out = api.take(v, order, 0)
    return out if axis is None else composite.moveaxis(out, 0, a_)


def _extract_jax(condition: Any, arr: Any, *, size: Any = None, fill_value: Any = 0) -> Any:
    return jnp.extract(condition, arr, size=size, fill_value=fill_value)


@_composite("extract", "the elements where condition holds, flattened", _extract_jax)
def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Any:
    """The elements of ``arr`` where ``condition`` is true, flattened, as ``jnp.extract``
    (``size`` and ``fill_value`` as :func:`compress`'s).

    >>> import pypto as pto
    >>> x = pto.arange(6).reshape(2, 3)
    >>> pto.extract(x % 2 == 1, x).numpy()
    array([1, 3, 5], dtype=int32)
    """
    c = api.reshape(api.asvalue(condition, "extract"), (-1,))
    return compress(
        c, api.reshape(api.asvalue(arr, "extract"), (-1,)), size=size, fill_value=fill_value
    )


def _unique_jax(
    ar: Any,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    axis: Any = None,
    *,
    equal_nan: bool = True,
    size: Any = None,
    fill_value: Any = None,
    sorted: bool = True,
) -> Any:
    return jnp.unique(
        ar,
        return_index,
        return_inverse,
        return_counts,
        axis,
        equal_nan=equal_nan,
        size=size,
        fill_value=fill_value,
    )


@_composite("unique", "the sorted unique elements (with indices, inverse, counts)", _unique_jax)
def unique(
    ar: Any,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    axis: int | None = None,
    *,
    equal_nan: bool = True,
    size: int | None = None,
    fill_value: Any = None,
    sorted: bool = True,
) -> Any:
    """The sorted unique elements of ``ar`` flattened, as ``jnp.unique``; with
    ``return_index`` the flat index of each one's first occurrence, ``return_inverse`` each
    element's place among them (in ``ar``'s shape), ``return_counts`` how often each occurs
    (int32). NaNs count as one value (``equal_nan``). With ``size``, the first ``size``
    unique elements, padded with ``fill_value`` (the smallest unique element when not given;
    the counts with 0).

    >>> import pypto as pto
    >>> pto.unique(pto.tensor([3, 1, 3, 2])).numpy()
    array([1, 2, 3], dtype=int32)
    >>> vals, counts = pto.unique(pto.tensor([3, 1, 3]), return_counts=True, size=3, fill_value=0)
    >>> vals.numpy(), counts.numpy()
    (array([1, 3, 0], dtype=int32), array([1, 2, 0], dtype=int32))
    """
    if axis is not None:
        raise ShapeError(
            "unique along an axis (of whole slices) is not supported",
            op="unique",
            hint="unique of the flattened tensor is axis=None",
        )
    v = api.asvalue(ar, "unique")
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    v = api.reshape(v, (-1,))
    n = v.shape[0]
    if not n and size and fill_value is None:
        raise ShapeError(
            f"unique of an empty tensor with size={size} needs a fill_value", op="unique"
        )
    perm = composite.argsort(v)
    srt = api.take(v, perm, 0)
    if n:
        hi, lo = api.getitem(srt, slice(1, None)), api.getitem(srt, slice(0, -1))
        new = api.not_equal(hi, lo)
        if v.dtype.is_floating and equal_nan:
            new = composite.logical_and(
                new,
                composite.logical_not(
                    composite.logical_and(composite.isnan(hi), composite.isnan(lo))
                ),
            )
        first = api.concat([api.asvalue(np.ones(1, bool)), new], 0)
    else:
        first = api.asvalue(np.zeros(0, bool))
    m = _count("unique", first, size)
    ind = nonzero(first, size=m)[0] if n and m else api.asvalue(np.zeros(m, np.int32))
    result = api.take(srt, ind, 0) if n else srt
    total = api.sum(api.cast(first, dt.int32))
    if size is not None and fill_value is not None:
        fill = api.cast(api.asvalue(fill_value, "unique"), v.dtype)
        result = (
            api.where(api.less(np.arange(m, dtype=np.int32), total), result, fill)
            if n
            else api.broadcast_to(fill, (m,))
        )
    out: list[Any] = [result]
    if return_index:
        out.append(api.take(perm, ind, 0) if n else perm)
    if return_inverse:
        slot = api.sub(composite.cumsum(api.cast(first, dt.int32)), 1)
        # each element's slot: the sorted slots put back in the input's order (and shape)
        inv = api.take(slot, composite.argsort(perm), 0) if n else np.zeros(0, np.int32)
        out.append(api.reshape(inv, shape))
    if return_counts:
        if n:
            # each run's start, then n for the runs past the last (so their counts are 0)
            starts = nonzero(first, size=m + 1)[0]
            nxt = api.getitem(starts, slice(1, None))
            starts = api.concat(
                [api.getitem(starts, slice(0, 1)), api.where(api.not_equal(nxt, 0), nxt, n)], 0
            )
            out.append(
                api.sub(api.getitem(starts, slice(1, None)), api.getitem(starts, slice(0, -1)))
            )
        else:
            out.append(api.asvalue(np.zeros(0, np.int32)))
    return out[0] if len(out) == 1 else tuple(out)


# The array API's unique functions: NaNs count as distinct values (equal_nan=False), and the
# results are named tuples, as in JAX.


class UniqueAllResult(NamedTuple):
    """What :func:`unique_all` returns."""

    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class UniqueCountsResult(NamedTuple):
    """What :func:`unique_counts` returns."""

    values: Any
    counts: Any


class UniqueInverseResult(NamedTuple):
    """What :func:`unique_inverse` returns."""

    values: Any
    inverse_indices: Any


def _unique_api(name: str, index: bool, inverse: bool, counts: bool) -> Any:
    """The composite ``name``: :func:`unique` of ``x`` with NaNs distinct, and these parts."""

    def jax_impl(x: Any, *, size: Any = None, fill_value: Any = None) -> Any:
        return getattr(jnp, name)(x, size=size, fill_value=fill_value)

    def decompose(x: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
        return unique(x, index, inverse, counts, equal_nan=False, size=size, fill_value=fill_value)

    doc = "the sorted unique elements" + "".join(
        f", {w}" for w, on in (("indices", index), ("inverse", inverse), ("counts", counts)) if on
    )
    return _composite(name, doc + " (array API: NaNs distinct)", jax_impl)(decompose)


_unique_all = _unique_api("unique_all", True, True, True)
_unique_counts = _unique_api("unique_counts", False, False, True)
_unique_inverse = _unique_api("unique_inverse", False, True, False)
_unique_values = _unique_api("unique_values", False, False, False)


def unique_all(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> UniqueAllResult:
    """The sorted unique elements of ``x`` flattened, the flat index of each one's first
    occurrence, each element's place among them (in ``x``'s shape) and how often each
    occurs, as ``jnp.unique_all``: the array API's :func:`unique`, where every NaN is a value
    of its own. ``size`` and ``fill_value`` as :func:`unique`'s (``size`` is needed under
    ``jit``).

    >>> import pypto as pto
    >>> r = pto.unique_all(pto.tensor([3, 1, 3]))
    >>> [part.numpy().tolist() for part in r]  # values, indices, inverse_indices, counts
    [[1, 3], [1, 0], [1, 0, 1], [1, 2]]
    """
    return UniqueAllResult(*_unique_all(x, size=size, fill_value=fill_value))


def unique_counts(
    x: Any, /, *, size: int | None = None, fill_value: Any = None
) -> UniqueCountsResult:
    """The sorted unique elements of ``x`` and how often each occurs, as
    ``jnp.unique_counts`` (NaNs distinct; see :func:`unique_all`).

    >>> import pypto as pto
    >>> pto.unique_counts(pto.tensor([2.0, 2.0, float("nan")])).counts.numpy()
    array([2, 1], dtype=int32)
    """
    return UniqueCountsResult(*_unique_counts(x, size=size, fill_value=fill_value))


def unique_inverse(
    x: Any, /, *, size: int | None = None, fill_value: Any = None
) -> UniqueInverseResult:
    """The sorted unique elements of ``x`` and each element's place among them (in ``x``'s
    shape), as ``jnp.unique_inverse`` (NaNs distinct; see :func:`unique_all`).

    >>> import pypto as pto
    >>> pto.unique_inverse(pto.tensor([[5, 4], [5, 5]])).inverse_indices.numpy()
    array([[1, 0],
           [1, 1]], dtype=int32)
    """
    return UniqueInverseResult(*_unique_inverse(x, size=size, fill_value=fill_value))


def unique_values(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique elements of ``x`` flattened, as ``jnp.unique_values`` (NaNs
    distinct; see :func:`unique_all`).

    >>> import pypto as pto
    >>> pto.unique_values(pto.tensor([2.0, float("nan"), 2.0, float("nan")])).numpy()
    array([ 2., nan, nan], dtype=float32)
    """
    return _unique_values(x, size=size, fill_value=fill_value)


def _union1d_jax(ar1: Any, ar2: Any, *, size: Any = None, fill_value: Any = None) -> Any:
    return jnp.union1d(ar1, ar2, size=size, fill_value=fill_value)


@_composite("union1d", "the sorted unique elements of both arrays", _union1d_jax)
def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique elements found in either array, as ``jnp.union1d``: :func:`unique`
    of both flattened together (``size`` and ``fill_value`` as its).

    >>> import pypto as pto
    >>> pto.union1d(pto.tensor([3, 1]), pto.tensor([[2, 3]])).numpy()
    array([1, 2, 3], dtype=int32)
    """
    a, b = api.promote("union1d", (ar1, ar2))
    both = api.concat([api.reshape(a, (-1,)), api.reshape(b, (-1,))], 0)
    return unique(both, size=size, fill_value=fill_value)


def _setdiff1d_jax(
    ar1: Any, ar2: Any, assume_unique: bool = False, *, size: Any = None, fill_value: Any = None
) -> Any:
    return jnp.setdiff1d(ar1, ar2, assume_unique, size=size, fill_value=fill_value)


@_composite("setdiff1d", "the sorted unique elements of ar1 not in ar2", _setdiff1d_jax)
def setdiff1d(
    ar1: Any,
    ar2: Any,
    assume_unique: bool = False,
    *,
    size: int | None = None,
    fill_value: Any = None,
) -> Any:
    """The unique elements of ``ar1`` that are not in ``ar2``, sorted (in ``ar1``'s order
    with ``assume_unique``), as ``jnp.setdiff1d``: with ``size``, the first ``size`` of them,
    padded with ``fill_value`` (0 when not given).

    >>> import pypto as pto
    >>> pto.setdiff1d(pto.tensor([5, 1, 3, 1]), pto.tensor([3])).numpy()
    array([1, 5], dtype=int32)
    """
    a = api.reshape(api.asvalue(ar1, "setdiff1d"), (-1,))
    b = api.reshape(api.asvalue(ar2, "setdiff1d"), (-1,))
    d = a.dtype
    fill = api.cast(api.asvalue(0 if fill_value is None else fill_value, "setdiff1d"), d)
    if not a.shape[0]:
        return api.broadcast_to(fill, (size or 0,))
    if assume_unique:  # in ar1's order, as JAX's
        ua, valid = a, api.broadcast_to(api.asvalue(True), (a.shape[0],))
    else:
        ua, valid, _ = _unique_part(a)
    keep = composite.logical_and(valid, composite.logical_not(numpy_lib.isin(ua, b)))
    return _picked("setdiff1d", ua, keep, size, fill)


def _unique_part(a: Any, sort_only: bool = False) -> tuple[Any, Any, Any]:
    """The 1-d ``a``'s sorted unique values (padded to its length), which of those places
    hold one, and the index of each one's first occurrence in ``a``; ``sort_only``: ``a``'s
    values are unique already and are only sorted."""
    n = a.shape[0]
    if sort_only:
        perm = composite.argsort(a)
        return api.take(a, perm, 0), api.broadcast_to(api.asvalue(True), (n,)), perm
    ua, first, counts = unique(a, return_index=True, return_counts=True, size=n)
    return ua, api.greater(counts, 0), first


def _picked(op: str, vals: Any, keep: Any, size: int | None, fill: Any) -> Any:
    """The elements of the 1-d ``vals`` where ``keep`` holds, in order: all of them, or the
    first ``size`` with the rest ``fill`` (None: as JAX's, the smallest of them, NaN if one is
    NaN, or 0 when there is none; ``vals`` is sorted then)."""
    if size is None:
        m = _count(op, keep, None)
        return api.take(vals, nonzero(keep, size=m)[0], 0) if m else api.getitem(vals, slice(0, 0))
    size = _count(op, keep, size)
    picked = api.take(vals, nonzero(keep, size=size)[0], 0) if vals.shape[0] else None
    total = api.sum(api.cast(keep, dt.int32))
    if fill is None:
        zero = api.asvalue(np.zeros((), vals.dtype.np))
        fill = zero if picked is None else api.where(api.greater(total, 0), picked[0], zero)
        if picked is not None and vals.dtype.is_floating:
            # the smallest with NaN propagating, as JAX's min: NaN when one is kept
            nan = composite.any(composite.logical_and(keep, composite.isnan(vals)))
            fill = api.where(nan, api.asvalue(np.asarray(np.nan, vals.dtype.np)), fill)
    fill = api.cast(api.asvalue(fill, op), vals.dtype)  # the result keeps the values' dtype
    if picked is None:
        return api.broadcast_to(fill, (size,))
    return api.where(api.less(np.arange(size, dtype=np.int32), total), picked, fill)


def _pair(op: str, ar1: Any, ar2: Any) -> tuple[Any, Any]:
    a, b = api.promote(op, (ar1, ar2))
    return api.reshape(a, (-1,)), api.reshape(b, (-1,))


def _intersect1d_jax(
    ar1: Any,
    ar2: Any,
    assume_unique: bool = False,
    return_indices: bool = False,
    *,
    size: Any = None,
    fill_value: Any = None,
) -> Any:
    return jnp.intersect1d(
        ar1, ar2, assume_unique, return_indices, size=size, fill_value=fill_value
    )


@_composite("intersect1d", "the sorted unique elements found in both arrays", _intersect1d_jax)
def intersect1d(
    ar1: Any,
    ar2: Any,
    assume_unique: bool = False,
    return_indices: bool = False,
    *,
    size: int | None = None,
    fill_value: Any = None,
) -> Any:
    """The sorted unique elements found in both arrays (flattened), as ``jnp.intersect1d``;
    with ``return_indices`` also the flat index of each one's first occurrence in ``ar1``
    and in ``ar2`` (int32). With ``size``, the first ``size`` of them, padded with
    ``fill_value`` (the smallest of them when not given) and the indices with the arrays'
    lengths. NaN is in no intersection.

    >>> import pypto as pto
    >>> a, b = pto.tensor([5, 1, 3, 1]), pto.tensor([3, 9, 1])
    >>> v, i, j = pto.intersect1d(a, b, return_indices=True)
    >>> v.numpy(), i.numpy(), j.numpy()
    (array([1, 3], dtype=int32), array([1, 2], dtype=int32), array([2, 0], dtype=int32))
    """
    a, b = _pair("intersect1d", ar1, ar2)
    with_indices = rules.flag("intersect1d", "return_indices", return_indices)
    n1, n2 = a.shape[0], b.shape[0]
    if n1 and n2:
        ua, valid, first = _unique_part(
            a, rules.flag("intersect1d", "assume_unique", assume_unique)
        )
        keep = composite.logical_and(valid, numpy_lib.isin(ua, b))
    else:
        ua, keep, first = a, api.broadcast_to(api.asvalue(False), (n1,)), None
    vals = _picked("intersect1d", ua, keep, size, fill_value)
    if not with_indices:
        return vals
    k = vals.shape[0]
    if first is None or not k:
        return vals, *(api.asvalue(np.full(k, m, np.int32)) for m in (n1, n2))
    # the picked places of ua, then the first place of each value in b
    total = api.sum(api.cast(keep, dt.int32))
    pos = nonzero(keep, size=k)[0]
    real = api.less(np.arange(k, dtype=np.int32), total)
    i1 = api.where(real, api.take(first, pos, 0), n1)
    picked = api.take(ua, pos, 0)
    i2 = api.argmax(api.equal(composite.expand_dims(picked, -1), b), -1)
    return vals, i1, api.where(real, api.cast(i2, dt.int32), n2)


def _setxor1d_jax(
    ar1: Any, ar2: Any, assume_unique: bool = False, *, size: Any = None, fill_value: Any = None
) -> Any:
    return jnp.setxor1d(ar1, ar2, assume_unique, size=size, fill_value=fill_value)


@_composite(
    "setxor1d", "the sorted unique elements found in exactly one of the arrays", _setxor1d_jax
)
def setxor1d(
    ar1: Any,
    ar2: Any,
    assume_unique: bool = False,
    *,
    size: int | None = None,
    fill_value: Any = None,
) -> Any:
    """The sorted unique elements found in exactly one of the arrays (flattened), as
    ``jnp.setxor1d``: with ``size``, the first ``size`` of them, padded with ``fill_value``
    (the smallest of them when not given). A NaN in each array gives two NaNs, as in JAX.

    >>> import pypto as pto
    >>> pto.setxor1d(pto.tensor([5, 1, 3, 1]), pto.tensor([3, 9])).numpy()
    array([1, 5, 9], dtype=int32)
    """
    a, b = _pair("setxor1d", ar1, ar2)
    only = rules.flag("setxor1d", "assume_unique", assume_unique)
    parts, keeps = [], []
    for x, other in ((a, b), (b, a)):
        if not x.shape[0]:
            continue
        ux, valid, _ = _unique_part(x, only)
        parts.append(ux)
        keeps.append(composite.logical_and(valid, composite.logical_not(numpy_lib.isin(ux, other))))
    if not parts:
        return _picked("setxor1d", a, api.broadcast_to(api.asvalue(False), (0,)), size, fill_value)
    both = api.concat(parts, 0) if len(parts) > 1 else parts[0]
    keep = api.concat(keeps, 0) if len(keeps) > 1 else keeps[0]
    # the kept values first, in order: the others become a value no kept one sorts after
    # (equal ones are the same value, so the first `total` sorted are the kept ones)
    d = both.dtype
    last = np.nan if d.is_floating else True if d is dt.bool_ else np.iinfo(d.np).max
    ordered = composite.sort(api.where(keep, both, api.asvalue(np.asarray(last, d.np))))
    total = api.sum(api.cast(keep, dt.int32))
    n = ordered.shape[0]
    return _picked(
        "setxor1d", ordered, api.less(np.arange(n, dtype=np.int32), total), size, fill_value
    )


__all__: Sequence[str] = [
    "UniqueAllResult",
    "UniqueCountsResult",
    "UniqueInverseResult",
    "argwhere",
    "compress",
    "extract",
    "flatnonzero",
    "intersect1d",
    "nonzero",
    "setdiff1d",
    "setxor1d",
    "union1d",
    "unique",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
]
