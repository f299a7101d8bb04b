"""numpy's index helpers, on advanced indexing and the functional updates of
:mod:`pypto.ops.indexing`: ``unravel_index``, ``ravel_multi_index``, ``choose``,
``fill_diagonal``, ``place``, ``delete``, ``insert``, ``ediff1d``, ``vander``, ``gcd``,
``lcm``; and the index arrays ``indices``, ``ix_``, ``diag_indices``, ``tril_indices``,
``triu_indices``, ``tri`` (known when tracing: constants).

Each follows its ``jax.numpy`` namesake, which the tests check it against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import BoundsError, DTypeError, ShapeError
from pypto.ops import api, composite, rules
from pypto.ops.composite import _composite
from pypto.ops.indexing import IndexUpdateRef, _concrete
from pypto.ops.numpy_lib import ravel
from pypto.ops.table import Value


def _ints(op: str, *xs: Any) -> list[Any]:
    vs = [api.asvalue(x, op) for x in xs]
    for v in vs:
        if not v.dtype.is_integer:  # type: ignore[attr-defined]
            raise DTypeError(
                f"needs integers, got {api._aval(v)}",
                op=op,
                hint="cast with .astype(pto.int32)",
            )
    return vs


def _shape_of(op: str, shape: Any) -> tuple[int, ...]:
    dims = tuple(shape) if isinstance(shape, Sequence) else (shape,)
    return tuple(rules.integer(op, "shape", d) for d in dims)


def _in_range(op: str, i: Any, n: int, mode: str, what: str) -> Any:
    """``i`` in ``[0, n)`` by ``mode``: checked (``"raise"``, which needs its values),
    wrapped (``"wrap"``) or clamped (``"clip"``)."""
    if mode == "wrap":
        return composite.remainder(i, n)
    if mode == "clip":
        return composite.clip(i, 0, n - 1)
    if mode != "raise":
        raise ShapeError(f"unknown mode {mode!r}", op=op, hint="'raise', 'wrap' or 'clip'")
    c = _concrete(i)
    if c is None:
        raise ShapeError(
            f"mode='raise' checks the values of {api._aval(i)}, which are traced",
            op=op,
            hint="use mode='wrap' or mode='clip' when compiling",
        )
    if c.size and (c.min() < 0 or c.max() >= n):
        raise BoundsError(f"{what} of {api._aval(i)} is outside [0, {n})", op=op)
    return i


def _unravel_index_jax(indices: Any, shape: Any) -> Any:
    return jnp.unravel_index(indices, shape)


@_composite(
    "unravel_index",
    "flat indices as one index array per axis",
    _unravel_index_jax,
    differentiable=False,
)
def unravel_index(indices: Any, shape: Any) -> Any:
    """The coordinates in ``shape`` of flat ``indices``, one int tensor per axis, as
    ``jnp.unravel_index``: a negative index counts from the end, one out of range clamps to
    the first or last element.

    >>> import pypto as pto
    >>> [i.numpy() for i in pto.unravel_index(pto.tensor([5, 7]), (2, 4))]
    [array([1, 1], dtype=int32), array([1, 3], dtype=int32)]
    """
    (v,) = _ints("unravel_index", indices)
    dims = _shape_of("unravel_index", shape)
    out: list[Any] = [None] * len(dims)
    rest = v
    for i in reversed(range(len(dims))):
        rest, out[i] = composite.floor_divide(rest, dims[i]), composite.remainder(rest, dims[i])
    high, low = api.greater(rest, 0), api.less(rest, -1)
    return tuple(
        api.where(high, s - 1, api.where(low, 0, o)) for s, o in zip(dims, out, strict=True)
    )


def _ravel_multi_index_jax(
    multi_index: Any, dims: Any, mode: str = "raise", order: str = "C"
) -> Any:
    return jnp.ravel_multi_index(multi_index, dims, mode=mode, order=order)


@_composite(
    "ravel_multi_index",
    "one index array per axis as flat indices",
    _ravel_multi_index_jax,
    differentiable=False,
)
def ravel_multi_index(
    multi_index: Sequence[Any], dims: Any, mode: str = "raise", order: str = "C"
) -> Any:
    """Flat indices of coordinates in ``dims`` (row-major, or column-major with
    ``order="F"``), as ``jnp.ravel_multi_index``: coordinates out of range are an error
    (``mode="raise"``, which needs their values), wrap (``"wrap"``) or clamp (``"clip"``).

    >>> import pypto as pto
    >>> pto.ravel_multi_index((pto.tensor([1, 1]), pto.tensor([1, 3])), (2, 4)).numpy()
    array([5, 7], dtype=int32)
    """
    op = "ravel_multi_index"
    shape = _shape_of(op, dims)
    idx = _ints(op, *multi_index)
    if len(idx) != len(shape):
        raise ShapeError(f"{len(idx)} index arrays for {len(shape)} dims {list(shape)}", op=op)
    if order not in ("C", "F"):
        raise ShapeError(f"unknown order {order!r}", op=op, hint="'C' or 'F'")
    idx = [_in_range(op, i, n, mode, "a coordinate") for i, n in zip(idx, shape, strict=True)]
    order_dims = shape if order == "C" else shape[::-1]
    strides = [math.prod(order_dims[k + 1 :]) for k in range(len(order_dims))]
    if order == "F":
        strides = strides[::-1]
    out: Any = api.asvalue(np.zeros((), np.int32))
    for i, s in zip(idx, strides, strict=True):
        out = api.add(out, api.mul(api.cast(i, dt.int32), s))
    return out


def _fill_diagonal_jax(a: Any, val: Any, wrap: bool = False, *, inplace: bool = True) -> Any:
    return jnp.fill_diagonal(a, val, wrap, inplace=False)


@_composite("fill_diagonal", "a copy with its main diagonal set", _fill_diagonal_jax)
def fill_diagonal(a: Any, val: Any, wrap: bool = False, *, inplace: bool = True) -> Any:
    """``a`` with its main diagonal ``a[i, i, ...]`` set to ``val`` (a scalar, or values
    repeated along it), as ``jnp.fill_diagonal(..., inplace=False)``.

    >>> import pypto as pto
    >>> pto.fill_diagonal(pto.zeros((2, 3)), 5.0, inplace=False).numpy()
    array([[5., 0., 0.],
           [0., 5., 0.]], dtype=float32)
    """
    op = "fill_diagonal"
    if inplace:
        raise ShapeError(
            "cannot fill in place: tensors are immutable", op=op, hint="pass inplace=False"
        )
    if wrap:
        raise ShapeError("wrap=True is not supported (nor by JAX)", op=op)
    v = api.asvalue(a, op)
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    if len(shape) < 2:
        raise ShapeError(f"needs at least 2 axes, got {api._aval(v)}", op=op)
    if len(shape) > 2 and len(set(shape)) != 1:
        raise ShapeError(f"all axes must have one length, got {api._aval(v)}", op=op)
    n = min(shape)
    w = api.asvalue(val, op)
    if w.shape:  # type: ignore[attr-defined]
        w = api.take(ravel(w), np.arange(n) % math.prod(w.shape), 0)  # type: ignore[attr-defined]
    return IndexUpdateRef(v, diag_indices(n, len(shape))).set(w)


def _choose_jax(a: Any, choices: Any, out: Any = None, mode: str = "raise") -> Any:
    return jnp.choose(a, choices, mode=mode)


@_composite("choose", "an element of one of several arrays, picked by index", _choose_jax)
def choose(a: Any, choices: Sequence[Any], out: None = None, mode: str = "raise") -> Any:
    """``choices[a[i]][i]`` for every position (all broadcast together), as ``jnp.choose``:
    an index out of range is an error (``mode="raise"``, which needs its values), wraps
    (``"wrap"``) or clamps (``"clip"``).

    >>> import pypto as pto
    >>> pto.choose(pto.tensor([0, 1, 0]), [pto.tensor([1, 2, 3]), 10]).numpy()
    array([ 1, 10,  3], dtype=int32)
    """
    op = "choose"
    if out is not None:
        raise ShapeError("out= is not supported: tensors are immutable", op=op)
    (i,) = _ints(op, a)
    i = _in_range(op, i, len(choices), mode, "an index")
    cs = api.promote(op, list(choices))
    shape = np.broadcast_shapes(tuple(i.shape), *(tuple(c.shape) for c in cs))  # type: ignore[attr-defined]
    stacked = composite.stack([api.broadcast_to(c, shape) for c in cs], 0)
    pick = api.reshape(api.broadcast_to(i, shape), (1, *shape))
    return api.reshape(composite.take_along_axis(stacked, pick, 0), shape)


def _place_jax(arr: Any, mask: Any, vals: Any, *, inplace: bool = True) -> Any:
    return jnp.place(arr, mask, vals, inplace=False)


@_composite("place", "a copy with vals put where mask holds, in order", _place_jax)
def place(arr: Any, mask: Any, vals: Any, *, inplace: bool = True) -> Any:
    """``arr`` with the elements where ``mask`` is true replaced by ``vals`` in order
    (repeated when shorter), as ``jnp.place(..., inplace=False)``.

    >>> import pypto as pto
    >>> x = pto.arange(5)
    >>> pto.place(x, x > 1, pto.tensor([-1, -2]), inplace=False).numpy()
    array([ 0,  1, -1, -2, -1], dtype=int32)
    """
    op = "place"
    if inplace:
        raise ShapeError(
            "cannot place in place: tensors are immutable", op=op, hint="pass inplace=False"
        )
    v = api.asvalue(arr, op)
    m = api.asvalue(mask, op)
    w = ravel(api.asvalue(vals, op))
    size = math.prod(v.shape)  # type: ignore[attr-defined]
    if math.prod(m.shape) != size:  # type: ignore[attr-defined]
        raise ShapeError(f"mask {api._aval(m)} and {api._aval(v)} differ in size", op=op)
    nv = w.shape[0]
    if not nv:
        raise ShapeError(f"no values to place ({api._aval(w)})", op=op)
    if not size:
        return v
    hit = ravel(m if m.dtype is dt.bool_ else api.not_equal(m, 0))  # type: ignore[attr-defined]
    # the k-th true element takes vals[k % len(vals)]
    k = api.sub(composite.cumsum(api.cast(hit, dt.int32)), 1)
    picked = api.take(w, composite.remainder(composite.clip(k, 0, None), nv), 0)
    out = api.where(hit, api.cast(picked, v.dtype), ravel(v))  # type: ignore[attr-defined]
    return api.reshape(out, v.shape)  # type: ignore[attr-defined]


def _static_positions(op: str, obj: Any, n: int) -> np.ndarray:
    """``obj`` (an int, a slice, a list or array, an eager tensor) as positions in [0, n)."""
    if isinstance(obj, slice):
        return np.arange(n)[obj]
    c = _concrete(obj) if isinstance(obj, Value) else np.asarray(obj)
    if c is None:
        raise ShapeError(
            f"traced positions {api._aval(obj)}: the result's length depends on them",
            op=op,
            hint="pass the positions as a list or numpy array (known when tracing)",
        )
    if c.dtype.kind not in "iu" and c.size:
        raise DTypeError(f"positions must be integers, got {c.dtype}", op=op)
    return c.astype(np.int64)


def _delete_jax(arr: Any, obj: Any, axis: Any = None, **kw: Any) -> Any:
    return jnp.delete(arr, obj, axis, **kw)


@_composite("delete", "a copy without the slices at given positions", _delete_jax)
def delete(
    arr: Any, obj: Any, axis: int | None = None, *, assume_unique_indices: bool = False
) -> Any:
    """``arr`` without the slices at positions ``obj`` (an int, a slice, or ints known when
    tracing; negative ones count from the end) along ``axis`` (of ``arr`` flattened when
    None), as ``jnp.delete``.

    >>> import pypto as pto
    >>> pto.delete(pto.arange(6), [0, -1, 0]).numpy()
    array([1, 2, 3, 4], dtype=int32)
    """
    op = "delete"
    v = api.asvalue(arr, op)
    if axis is None:
        v, a = ravel(v), 0
    else:
        a = rules.normalize_axis(op, axis, len(v.shape), api._aval(v))  # type: ignore[attr-defined]
    n = v.shape[a]  # type: ignore[attr-defined]
    pos = _static_positions(op, obj, n)
    if np.ndim(pos) == 0 and not -n <= int(pos) < n:
        raise BoundsError(f"position {int(pos)} is out of range for axis {a} of size {n}", op=op)
    bad = pos[(pos < -n) | (pos >= n)] if np.ndim(pos) else np.zeros(0)
    if bad.size:
        raise BoundsError(
            f"position {int(bad.flat[0])} is out of range for axis {a} of size {n}", op=op
        )
    gone = np.zeros(n, bool)
    gone[np.where(np.asarray(pos) < 0, np.asarray(pos) + n, pos)] = True
    return api.take(v, np.nonzero(~gone)[0].astype(np.int32), a)


def _insert_jax(arr: Any, obj: Any, values: Any, axis: Any = None) -> Any:
    return jnp.insert(arr, obj, values, axis)


@_composite("insert", "a copy with values inserted before given positions", _insert_jax)
def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Any:
    """``arr`` with ``values`` inserted before the positions ``obj`` (an int, a slice, or
    ints known when tracing; clamped to ``[0, n]``, negative ones from the end) along
    ``axis`` (of ``arr`` flattened when None), as ``jnp.insert``; ``values`` broadcast to
    the inserted slices, in ``arr``'s dtype.

    >>> import pypto as pto
    >>> pto.insert(pto.arange(4), [1, 3], pto.tensor([-1, -2])).numpy()
    array([ 0, -1,  1,  2, -2,  3], dtype=int32)
    """
    op = "insert"
    v = api.asvalue(arr, op)
    if axis is None:
        v, a = ravel(v), 0
    else:
        a = rules.normalize_axis(op, axis, len(v.shape), api._aval(v))  # type: ignore[attr-defined]
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    n = shape[a]
    pos = np.asarray(_static_positions(op, obj, n))
    if pos.ndim > 1:
        raise ShapeError(f"positions must be an int, a slice or 1-d, got shape {pos.shape}", op=op)
    w = api.cast(api.asvalue(values, op), v.dtype)  # type: ignore[attr-defined]
    nd = len(shape)
    if len(w.shape) < nd:
        w = api.reshape(w, (1,) * (nd - len(w.shape)) + tuple(w.shape))
    if pos.size == 1:
        if pos.ndim == 0:
            w = composite.moveaxis(w, 0, a)
        pos = np.full(w.shape[a], int(pos.reshape(-1)[0]))
    k = int(np.broadcast_shapes(pos.shape, (w.shape[a],))[0])
    pos = np.broadcast_to(pos, (k,))
    pos = np.clip(np.where(pos < 0, pos + n, pos), 0, n)
    # where each inserted slice lands: its position plus the insertions before it (stable)
    order = np.argsort(pos, kind="stable")
    at = pos.copy()
    at[order] += np.arange(k)
    keep = np.ones(n + k, bool)
    keep[at] = False
    src = np.empty(n + k, np.int64)
    src[keep] = np.arange(n)  # arr's slices
    src[at] = n + np.arange(k)  # then the inserted ones
    wb = api.broadcast_to(w, (*shape[:a], k, *shape[a + 1 :]))
    return api.take(api.concat([v, wb], a), src.astype(np.int32), a)


def _ediff1d_jax(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    return jnp.ediff1d(ary, to_end, to_begin)


@_composite("ediff1d", "differences of the flattened array, with optional ends", _ediff1d_jax)
def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """``ary.ravel()[1:] - ary.ravel()[:-1]``, with ``to_begin`` and ``to_end`` (in its
    dtype) before and after, as ``jnp.ediff1d``.

    >>> import pypto as pto
    >>> pto.ediff1d(pto.tensor([1, 4, 9]), to_begin=0).numpy()
    array([0, 3, 5], dtype=int32)
    """
    v = ravel(api.asvalue(ary, "ediff1d"))
    parts = [api.sub(api.getitem(v, slice(1, None)), api.getitem(v, slice(0, -1)))]
    if to_begin is not None:
        parts.insert(0, ravel(api.cast(api.asvalue(to_begin, "ediff1d"), v.dtype)))
    if to_end is not None:
        parts.append(ravel(api.cast(api.asvalue(to_end, "ediff1d"), v.dtype)))
    return api.concat(parts, 0) if len(parts) > 1 else parts[0]


def _vander_jax(x: Any, N: Any = None, increasing: bool = False) -> Any:
    return jnp.vander(x, N, increasing)


@_composite("vander", "the Vandermonde matrix: columns of powers of x", _vander_jax)
def vander(x: Any, N: int | None = None, increasing: bool = False) -> Any:
    """Columns ``x**(N-1), ..., x**0`` (``increasing``: the other way), as ``jnp.vander``.

    >>> import pypto as pto
    >>> pto.vander(pto.tensor([1, 2, 3]), 3).numpy()
    array([[1, 1, 1],
           [4, 2, 1],
           [9, 3, 1]], dtype=int32)
    """
    v = api.asvalue(x, "vander")
    if len(v.shape) != 1:  # type: ignore[attr-defined]
        raise ShapeError(f"x must be 1-d, got {api._aval(v)}", op="vander")
    n = v.shape[0] if N is None else rules.integer("vander", "N", N)  # type: ignore[attr-defined]
    if n < 0:
        raise ShapeError(f"N must be >= 0, got {n}", op="vander")
    p = np.arange(n) if increasing else np.arange(n)[::-1]
    powers = api.cast(api.asvalue(p.astype(np.int32)), v.dtype)  # type: ignore[attr-defined]
    return api.pow(api.reshape(v, (-1, 1)), powers)


# Euclid's algorithm needs at most as many steps as the Fibonacci numbers below the dtype's
# largest value: 45 for int32, 11 for int8.
_GCD_STEPS = {dt.int32: 46, dt.int8: 12}


def _gcd_pair(op: str, x1: Any, x2: Any) -> tuple[Any, Any, Any]:
    a, b = api.promote(op, (x1, x2))
    if not a.dtype.is_integer or a.dtype is dt.bool_:  # type: ignore[attr-defined]
        raise DTypeError(
            f"needs integers, got {api._aval(a)} and {api._aval(b)}",
            op=op,
            hint="cast with .astype(pto.int32)",
        )
    shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))  # type: ignore[attr-defined]
    a, b = api.abs(api.broadcast_to(a, shape)), api.abs(api.broadcast_to(b, shape))
    for _ in range(_GCD_STEPS[a.dtype]):
        nz = api.not_equal(b, 0)
        a, b = api.where(nz, b, a), api.where(nz, api.fmod(a, api.where(nz, b, 1)), 0)
        lo = api.less(a, b)
        a, b = api.where(lo, b, a), api.where(lo, a, b)
    return a, x1, x2


@_composite("gcd", "greatest common divisor, elementwise (integers)", jnp.gcd, differentiable=False)
def gcd(x1: Any, x2: Any) -> Any:
    """The greatest common divisor of ``|x1|`` and ``|x2|`` (0 when both are 0), as
    ``jnp.gcd``: Euclid's algorithm, unrolled for the most steps the dtype can need.

    >>> import pypto as pto
    >>> pto.gcd(pto.tensor([12, 7, 0]), pto.tensor([18, 0, 0])).numpy()
    array([6, 7, 0], dtype=int32)
    """
    return _gcd_pair("gcd", x1, x2)[0]


@_composite("lcm", "least common multiple, elementwise (integers)", jnp.lcm, differentiable=False)
def lcm(x1: Any, x2: Any) -> Any:
    """The least common multiple ``|x1 · (x2 // gcd)|`` (0 when either is 0), as ``jnp.lcm``.

    >>> import pypto as pto
    >>> pto.lcm(pto.tensor([4, 6, 0]), pto.tensor([6, 4, 5])).numpy()
    array([12, 12,  0], dtype=int32)
    """
    d, _, _ = _gcd_pair("lcm", x1, x2)
    a, b = api.promote("lcm", (x1, x2))
    safe = api.where(api.equal(d, 0), 1, d)
    return api.where(api.equal(d, 0), 0, api.abs(api.mul(a, composite.floor_divide(b, safe))))


# --- index arrays (known when tracing) -----------------------------------------------------


def indices(dimensions: Sequence[int], dtype: Any = dt.int32, sparse: bool = False) -> Any:
    """The index grid of ``dimensions``: one tensor per axis holding that axis' index, stacked
    (``[ndim, *dimensions]``), or with ``sparse`` a tuple of tensors broadcasting together,
    as ``jnp.indices``.

    >>> import pypto as pto
    >>> pto.indices((2, 3))[1].numpy()
    array([[0, 1, 2],
           [0, 1, 2]], dtype=int32)
    """
    d = dt.dtype(dtype)
    grids: Any = np.indices(_shape_of("indices", dimensions), dtype=d.np, sparse=sparse)  # type: ignore[call-overload]
    if sparse:
        return tuple(api.asvalue(g) for g in grids)
    return api.asvalue(grids)


def ix_(*args: Any) -> tuple[Any, ...]:
    """1-d integer (or static boolean) sequences shaped to index an open mesh together, as
    ``jnp.ix_``: ``x[pto.ix_(rows, cols)]`` is the block at those rows and columns.

    >>> import pypto as pto
    >>> x = pto.arange(12).reshape(3, 4)
    >>> x[pto.ix_([0, 2], [1, 3])].numpy()
    array([[ 1,  3],
           [ 9, 11]], dtype=int32)
    """
    out = []
    for k, a in enumerate(args):
        v: Any = a if isinstance(a, Value) else np.asarray(a)
        if isinstance(v, np.ndarray) and v.dtype == np.bool_:
            v = np.nonzero(v)[0]
        if len(v.shape) != 1:
            raise ShapeError(
                f"ix_ takes 1-d sequences, argument {k} has shape {list(v.shape)}", op="ix_"
            )
        shape = (1,) * k + (v.shape[0],) + (1,) * (len(args) - k - 1)
        out.append(api.reshape(api.asvalue(v, "ix_"), shape))
    return tuple(out)


def diag_indices(n: int, ndim: int = 2) -> tuple[Any, ...]:
    """The indices ``(i, i, ...)`` of the main diagonal of an ``n``-sided ``ndim``-d tensor,
    as ``jnp.diag_indices``.

    >>> import pypto as pto
    >>> [i.numpy() for i in pto.diag_indices(2)]
    [array([0, 1], dtype=int32), array([0, 1], dtype=int32)]
    """
    n = rules.integer("diag_indices", "n", n)
    i = np.arange(n, dtype=np.int32)
    return tuple(api.asvalue(i) for _ in range(rules.integer("diag_indices", "ndim", ndim)))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """The row and column indices of the lower triangle (from diagonal ``k``) of an
    ``n``-by-``m`` matrix, as ``jnp.tril_indices``.

    >>> import pypto as pto
    >>> [i.numpy() for i in pto.tril_indices(2)]
    [array([0, 1, 1], dtype=int32), array([0, 0, 1], dtype=int32)]
    """
    r, c = np.tril_indices(n, k, m)
    return api.asvalue(r.astype(np.int32)), api.asvalue(c.astype(np.int32))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """The row and column indices of the upper triangle (from diagonal ``k``) of an
    ``n``-by-``m`` matrix, as ``jnp.triu_indices``.

    >>> import pypto as pto
    >>> [i.numpy() for i in pto.triu_indices(2)]
    [array([0, 0, 1], dtype=int32), array([0, 1, 1], dtype=int32)]
    """
    r, c = np.triu_indices(n, k, m)
    return api.asvalue(r.astype(np.int32)), api.asvalue(c.astype(np.int32))


def _square_like(op: str, arr: Any, nd: int | None = None) -> tuple[int, ...]:
    s = tuple(api.asvalue(arr, op).shape)  # type: ignore[attr-defined]
    if nd is not None and len(s) != nd:
        raise ShapeError(f"needs a {nd}-d tensor, got shape {s}", op=op)
    return s


def diag_indices_from(arr: Any) -> tuple[Any, ...]:
    """:func:`diag_indices` of ``arr``'s size and number of axes (all of one length, at
    least 2), as ``jnp.diag_indices_from``.

    >>> import pypto as pto
    >>> [i.numpy() for i in pto.diag_indices_from(pto.ones((2, 2)))]
    [array([0, 1], dtype=int32), array([0, 1], dtype=int32)]
    """
    s = _square_like("diag_indices_from", arr)
    if len(s) < 2 or len(set(s)) != 1:
        raise ShapeError(
            f"needs at least 2 axes, all of one length, got shape {s}", op="diag_indices_from"
        )
    return diag_indices(s[0], len(s))


def tril_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """:func:`tril_indices` of the 2-d ``arr``'s shape, as ``jnp.tril_indices_from``.

    >>> import pypto as pto
    >>> [i.numpy() for i in pto.tril_indices_from(pto.ones((2, 3)))]
    [array([0, 1, 1], dtype=int32), array([0, 0, 1], dtype=int32)]
    """
    n, m = _square_like("tril_indices_from", arr, 2)
    return tril_indices(n, k, m)


def triu_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """:func:`triu_indices` of the 2-d ``arr``'s shape, as ``jnp.triu_indices_from``.

    >>> import pypto as pto
    >>> [i.numpy() for i in pto.triu_indices_from(pto.ones((2, 2)), 1)]
    [array([0], dtype=int32), array([1], dtype=int32)]
    """
    n, m = _square_like("triu_indices_from", arr, 2)
    return triu_indices(n, k, m)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = dt.float32) -> Any:
    """Ones on and below diagonal ``k`` of an ``N``-by-``M`` matrix, zeros above, as ``jnp.tri``.

    >>> import pypto as pto
    >>> pto.tri(2, 3, 1, pto.int32).numpy()
    array([[1, 1, 0],
           [1, 1, 1]], dtype=int32)
    """
    return api.asvalue(np.tri(N, M, k, dtype=dt.dtype(dtype).np))


__all__: Sequence[str] = [
    "c_",
    "choose",
    "delete",
    "diag_indices",
    "diag_indices_from",
    "ediff1d",
    "fill_diagonal",
    "gcd",
    "indices",
    "insert",
    "ix_",
    "lcm",
    "mgrid",
    "ogrid",
    "place",
    "r_",
    "ravel_multi_index",
    "tri",
    "tril_indices",
    "tril_indices_from",
    "triu_indices",
    "triu_indices_from",
    "unravel_index",
    "vander",
]


# ---------------------------------------------------------------------------------------------
# Index-expression objects: grids and concatenation by slice syntax (not ops: they build
# constants or call concat)


def _grid_1d(s: slice, op: str) -> np.ndarray:
    """The values a slice names: ``arange(start, stop, step)``, or with an imaginary step
    ``linspace(start, stop, |step|)`` (numpy's convention)."""
    start, stop, step = (
        (0 if s.start is None else s.start),
        s.stop,
        (1 if s.step is None else s.step),
    )
    if stop is None:
        raise ShapeError(f"{op}[{s!r}]: a slice needs a stop", op=op, hint="write start:stop")
    if isinstance(step, complex):
        return np.linspace(start, stop, int(abs(step)))
    return np.arange(start, stop, step)


class _Grid:
    """``mgrid`` (``sparse=False``) and ``ogrid``, as ``jnp.mgrid`` and ``jnp.ogrid``."""

    def __init__(self, name: str, sparse: bool) -> None:
        self.name, self.sparse = name, sparse

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Any:
        keys = key if isinstance(key, tuple) else (key,)
        if not all(isinstance(k, slice) for k in keys):
            raise ShapeError(
                f"{self.name}[...] takes slices, got {key!r:.60}",
                op=self.name,
                hint="write e.g. pto.mgrid[0:3, 0:4] or pto.mgrid[0:1:5j]",
            )
        axes = [_grid_1d(k, self.name) for k in keys]
        dtype = np.result_type(*axes)
        if not isinstance(key, tuple):
            return api.asvalue(axes[0].astype(dtype))
        grids = np.meshgrid(*axes, indexing="ij", sparse=self.sparse)
        if self.sparse:
            return [api.asvalue(g.astype(dtype)) for g in grids]
        return api.asvalue(np.stack(grids).astype(dtype))

    def __repr__(self) -> str:
        return f"pto.{self.name}"


mgrid = _Grid("mgrid", sparse=False)
mgrid.__doc__ = """Dense coordinate grids from slices, as ``jnp.mgrid``: ``mgrid[0:2, 0:3]``
is ``[2, 2, 3]`` (an imaginary step is a count of points, ends included).

>>> import pypto as pto
>>> pto.mgrid[0:2, 0:3].shape, pto.mgrid[0:1:3j].numpy()
((2, 2, 3), array([0. , 0.5, 1. ], dtype=float32))
"""
ogrid = _Grid("ogrid", sparse=True)
ogrid.__doc__ = """Open (broadcastable) coordinate grids from slices, as ``jnp.ogrid``: a list
of one array per slice, each along its own axis.

>>> import pypto as pto
>>> [g.shape for g in pto.ogrid[0:2, 0:3]]
[(2, 1), (1, 3)]
"""


class _Concat:
    """``r_`` and ``c_``: concatenation written as indexing, as ``jnp.r_`` and ``jnp.c_``."""

    def __init__(self, name: str, axis: int, ndmin: int, trans1d: int) -> None:
        self.name, self.defaults = name, (axis, ndmin, trans1d)

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        (axis, ndmin, trans1d), matrix = self.defaults, None
        if items and isinstance(items[0], str):  # "axis[,ndmin[,trans1d]]", or "r" / "c"
            directive, items = items[0], items[1:]
            if directive in ("r", "c"):
                matrix = 0 if directive == "r" else 1
            else:
                try:
                    given = [int(p) for p in directive.split(",")[:3]]
                except ValueError:
                    raise ShapeError(
                        f"{self.name}: could not understand the directive {directive!r}",
                        op=self.name,
                        hint="'axis', 'axis,ndmin' or 'axis,ndmin,trans1d' (integers), 'r' or 'c'",
                    ) from None
                axis, ndmin, trans1d = (*given, *self.defaults[len(given) :])
        if not items:
            raise ShapeError(f"{self.name}[] needs something to concatenate", op=self.name)
        parts: list[Any] = []
        made = []
        for item in items:
            if isinstance(item, str):
                raise ShapeError(
                    f"{self.name}: a string directive must come first, got {item!r}",
                    op=self.name,
                )
            is_slice = isinstance(item, slice)
            parts.append(api.asvalue(_grid_1d(item, self.name) if is_slice else item, self.name))
            made.append((is_slice, item))
        # Python numbers are weak, as in a binary op; a slice's values are an array
        target = dt.result_type(
            *(
                p if s or not isinstance(i, int | float | bool) else i
                for p, (s, i) in zip(parts, made, strict=True)
            )
        )
        out = []
        for part, (is_slice, _) in zip(parts, made, strict=True):
            v = part if part.dtype is target else api.cast(part, target)
            nd = 0 if is_slice else len(v.shape)
            shape = tuple(v.shape)
            if len(shape) < ndmin:
                v = api.reshape(v, (1,) * (ndmin - len(shape)) + shape)
            if trans1d != -1 and ndmin - nd > 0:  # the item's own axes move to trans1d
                shift = ndmin - abs(ndmin + trans1d + 1) % ndmin
                order = tuple(range(ndmin))
                v = api.transpose(v, order[shift:] + order[:shift])
            out.append(v)
        res = api.concat(out, axis)
        if matrix is not None and len(res.shape) == 1:
            res = composite.expand_dims(res, matrix)
        return res

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"pto.{self.name}"


r_ = _Concat("r_", 0, 1, -1)
r_.__doc__ = """Concatenation along the first axis written as indexing, as ``jnp.r_``: slices
become ranges (an imaginary step: a count of points), numbers and tensors are joined; a
leading string ``"axis,ndmin,trans1d"`` (or ``"r"``/``"c"``: a 2-d row or column) sets how.

>>> import pypto as pto
>>> pto.r_[0:3, 7, pto.tensor([8, 9])].numpy()
array([0, 1, 2, 7, 8, 9], dtype=int32)
"""
c_ = _Concat("c_", -1, 2, 0)
c_.__doc__ = """Concatenation along the last axis, 1-d pieces as columns, as ``jnp.c_``.

>>> import pypto as pto
>>> pto.c_[pto.tensor([1, 2]), pto.tensor([3, 4])].numpy()
array([[1, 3],
       [2, 4]], dtype=int32)
"""
