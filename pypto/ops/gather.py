"""``jax.lax``'s general ``gather`` and ``scatter`` (XLA's operators), over pypto's indexing.

A gather takes one window of ``slice_sizes`` from the operand per index vector; a scatter
combines one window of updates into the operand per index vector. Both are written here as
what they are element by element: each operand axis' position is the window's start on that
axis (from the index vector through ``start_index_map``, clamped or checked by ``mode``),
plus the element's offset in the window, or the batch position for the batching axes. These
positions, as integer arrays over the result's axes, are a key of numpy's advanced indexing,
so ``x[key]`` is the gather and ``x.at[key].op(updates)`` the scatter (:mod:`pypto.ops.indexing`,
with its gradients and its compiled forms). An axis the windows take whole is a plain slice in
the key, not an array; the result's axes are then moved to where the dimension numbers put
them.

Out-of-bounds windows follow ``mode`` as in JAX: ``"clip"`` (and ``"promise_in_bounds"`` for a
gather, as XLA clamps) moves a window inside the operand; ``"fill"`` gives a gather's whole
window ``fill_value``; ``"drop"`` (and ``"promise_in_bounds"`` for a scatter) drops a scatter's
whole window. Start indices do not count from the end.

>>> import numpy as np
>>> import pypto as pto
>>> from pypto import lax
>>> x = pto.arange(12).reshape(3, 4)
>>> dn = lax.GatherDimensionNumbers(
...     offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1)
... )
>>> lax.gather(x, np.array([[0, 1], [2, 2]]), dn, slice_sizes=(1, 2)).numpy()
array([[ 1,  2],
       [10, 11]], dtype=int32)
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import DTypeError, PyptoError, ShapeError
from pypto.ops import api, composite, indexing, rules

__all__ = [
    "GatherDimensionNumbers",
    "GatherScatterMode",
    "ScatterDimensionNumbers",
    "gather",
    "scatter",
    "scatter_add",
    "scatter_apply",
    "scatter_max",
    "scatter_min",
    "scatter_mul",
    "scatter_sub",
]


class GatherDimensionNumbers(NamedTuple):
    """How the operand, the start indices and the output of :func:`gather` relate
    (``jax.lax.GatherDimensionNumbers``; JAX's own object is accepted too).

    ``offset_dims``: the output axes of each window's axes that are kept, in order;
    ``collapsed_slice_dims``: operand axes whose window (of size 1) has no output axis;
    ``start_index_map``: the operand axis each entry of an index vector starts;
    ``operand_batching_dims`` / ``start_indices_batching_dims``: axes the operand and the
    indices share, pair by pair (window ``b`` reads the operand's batch ``b``)."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """How the operand, the indices and the updates of a scatter relate
    (``jax.lax.ScatterDimensionNumbers``; JAX's own object is accepted too).

    ``update_window_dims``: the updates' axes that are window axes, in order;
    ``inserted_window_dims``: operand axes whose window (of size 1) has no update axis;
    ``scatter_dims_to_operand_dims``: the operand axis each entry of an index vector starts;
    ``operand_batching_dims`` / ``scatter_indices_batching_dims``: axes the operand and the
    indices share, pair by pair."""

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


class GatherScatterMode(enum.Enum):
    """Out-of-bounds windows (``jax.lax.GatherScatterMode``): ``CLIP`` moves the window inside;
    ``FILL_OR_DROP`` fills a gathered window, drops a scattered one; ``PROMISE_IN_BOUNDS``
    clamps a gather and drops a scatter, as XLA does. (JAX's ``ONE_HOT`` is not built.)"""

    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()

    @staticmethod
    def from_any(s: Any, op: str = "lax.gather") -> GatherScatterMode:
        """The mode of a string (``"clip"``, ``"fill"``, ``"drop"``, ``"promise_in_bounds"``),
        this enum, JAX's enum, or None (``FILL_OR_DROP``, as JAX)."""
        if isinstance(s, GatherScatterMode):
            return s
        name = getattr(s, "name", None)  # jax.lax.GatherScatterMode
        if isinstance(name, str) and name in GatherScatterMode.__members__:
            return GatherScatterMode[name]
        by_str = {
            None: "FILL_OR_DROP",
            "fill": "FILL_OR_DROP",
            "drop": "FILL_OR_DROP",
            "clip": "CLIP",
            "promise_in_bounds": "PROMISE_IN_BOUNDS",
        }
        if isinstance(s, str | type(None)) and s in by_str:
            return GatherScatterMode[by_str[s]]
        raise ShapeError(
            f"unknown mode {s!r}",
            op=op,
            hint='use "clip", "fill" (or "drop") or "promise_in_bounds"',
        )


class _Windows(NamedTuple):
    """The windows of a gather or a scatter, in the terms both share. ``result`` is the
    gather's output (the scatter's updates), ``window`` its window axes in order, and
    ``free`` the operand axes they are; ``sizes`` is each operand axis' window size."""

    window: tuple[int, ...]
    free: tuple[int, ...]
    dropped: tuple[int, ...]
    starts: tuple[int, ...]
    operand_batch: tuple[int, ...]
    index_batch: tuple[int, ...]
    sizes: tuple[int, ...]
    result: tuple[int, ...]


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _ints(op: str, name: str, xs: Any) -> tuple[int, ...]:
    return tuple(rules.integer(op, name, x) for x in xs)


def _check(op: str, what: str, ok: bool, hint: str | None = None) -> None:
    if not ok:
        raise ShapeError(what, op=op, hint=hint)


def _windows(
    op: str,
    shape: tuple[int, ...],
    idx: tuple[int, ...],
    window: tuple[int, ...],
    dropped: tuple[int, ...],
    starts: tuple[int, ...],
    operand_batch: tuple[int, ...],
    index_batch: tuple[int, ...],
    sizes: tuple[int, ...],
    names: tuple[str, str, str, str, str],
) -> _Windows:
    """Check the dimension numbers against the shapes (the operand's, the indices' and the
    window sizes), naming the field at fault as the caller spells it (``names``: the window,
    dropped and start fields, the operand's and the indices' batching fields)."""
    nd = len(shape)
    what = f"operand {list(shape)}, indices {list(idx)}: "
    _check(
        op,
        what + "the indices need at least one axis (the last holds the index vectors)",
        len(idx) >= 1,
        "give one index vector per window: shape [..., len(start axes)]",
    )
    for name, dims in zip(names[1:4], (dropped, starts, operand_batch), strict=True):
        _check(
            op,
            what + f"{name}={dims} must name distinct operand axes below {nd}",
            len(set(dims)) == len(dims) and all(0 <= d < nd for d in dims),
        )
    _check(
        op,
        what + f"{names[1]}={dropped} and {names[3]}={operand_batch} must be sorted",
        list(dropped) == sorted(dropped) and list(operand_batch) == sorted(operand_batch),
    )
    _check(
        op,
        what + f"{names[1]}={dropped} and {names[3]}={operand_batch} share an axis",
        not set(dropped) & set(operand_batch),
    )
    _check(
        op,
        what + f"{names[2]}={starts} and {names[3]}={operand_batch} share an axis",
        not set(starts) & set(operand_batch),
    )
    _check(
        op,
        what + f"the index vectors have {idx[-1]} entries for {names[2]}={starts}",
        idx[-1] == len(starts),
        f"the indices' last axis is one entry per axis of {names[2]}",
    )
    nb = len(idx) - 1
    _check(
        op,
        what + f"{names[4]}={index_batch} must be distinct axes of the indices below {nb} "
        f"(the last is the index vector), one for each of {names[3]}={operand_batch}",
        len(index_batch) == len(operand_batch)
        and len(set(index_batch)) == len(index_batch)
        and all(0 <= d < nb for d in index_batch),
    )
    for a, b in zip(operand_batch, index_batch, strict=True):
        _check(
            op,
            what + f"batching axis {a} of the operand has {shape[a]} entries, axis {b} of "
            f"the indices {idx[b]}",
            shape[a] == idx[b],
        )
    free = tuple(d for d in range(nd) if d not in dropped and d not in operand_batch)
    rank = nb + len(free)
    _check(
        op,
        what + f"{names[0]}={window} must be {len(free)} sorted, distinct axes below {rank} "
        f"(one per operand axis not in {names[1]} or {names[3]})",
        len(window) == len(free)
        and list(window) == sorted(set(window))
        and all(0 <= w < rank for w in window),
    )
    for d in range(nd):
        _check(
            op,
            what + f"a window of {sizes[d]} on operand axis {d} of {shape[d]}",
            0 <= sizes[d] <= shape[d],
        )
    for d in (*dropped, *operand_batch):
        _check(
            op,
            what + f"operand axis {d} has no axis in the result, so its window is 1 wide, "
            f"not {sizes[d]}",
            sizes[d] <= 1,
        )
    batch = iter(idx[:-1])
    wins = dict(zip(window, free, strict=True))
    result = tuple(sizes[wins[a]] if a in wins else next(batch) for a in range(rank))
    return _Windows(window, free, dropped, starts, operand_batch, index_batch, sizes, result)


def _key(
    w: _Windows, start: Any, valid: Any, shape: tuple[int, ...]
) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """The indexing key of the windows and ``axes``: which result axis each axis of
    ``v[key]`` is. ``start`` holds the (already clamped) index vectors; where ``valid`` (not
    None) is False the first start axis' position is past the end (a dropped window)."""
    rank = len(w.result)
    nb = len(w.result) - len(w.window)
    batch_axes = [a for a in range(rank) if a not in w.window]
    # axes the windows take whole need no positions
    whole = {d for d in w.free if d not in w.starts and w.sizes[d] == shape[d]}
    if len(whole) == len(shape) and nb:
        whole = set()  # the batch axes must come from some array: give every axis one
    adv = [a for a in range(rank) if a not in {w.window[w.free.index(d)] for d in whole}]
    adv_shape = tuple(w.result[a] for a in adv)

    def at(axis: int, n: int) -> tuple[int, ...]:
        return tuple(n if a == axis else 1 for a in adv)

    def batch_part(x: Any) -> Any:
        """A value over the indices' batch axes, laid over the advanced axes."""
        return api.reshape(x, tuple(w.result[a] if a in batch_axes else 1 for a in adv))

    key: list[Any] = []
    arrays: list[int] = []
    for d in range(len(shape)):
        if d in whole:
            key.append(slice(None))
            continue
        pos: Any = np.zeros((1,) * len(adv), np.int32)
        if d in w.starts:
            i = w.starts.index(d)
            s = batch_part(api.getitem(start, (..., i)))
            if valid is not None and i == 0:
                s = api.where(batch_part(valid), s, shape[d])
            pos = api.add(pos, s)
        if d in w.free:
            a = w.window[w.free.index(d)]
            pos = api.add(pos, np.arange(w.sizes[d], dtype=np.int32).reshape(at(a, -1)))
        if d in w.operand_batch:
            a = batch_axes[w.index_batch[w.operand_batch.index(d)]]
            pos = api.add(pos, np.arange(shape[d], dtype=np.int32).reshape(at(a, -1)))
        key.append(api.broadcast_to(pos, adv_shape))
        arrays.append(d)
    if not arrays:
        return tuple(key), tuple(w.window[w.free.index(d)] for d in range(len(shape)))
    sliced = [w.window[w.free.index(d)] for d in range(len(shape)) if d in whole]
    # numpy's rule: the advanced axes go where the arrays are when they are adjacent in the
    # key, else first
    if arrays == list(range(arrays[0], arrays[-1] + 1)):
        before = [w.window[w.free.index(d)] for d in range(arrays[0]) if d in whole]
        axes = [*before, *adv, *sliced[len(before) :]]
    else:
        axes = [*adv, *sliced]
    return tuple(key), tuple(axes)


def _starts(
    op: str, indices: Any, w: _Windows, shape: tuple[int, ...], clamp: bool
) -> tuple[Any, Any]:
    """The index vectors as int32 (clamped so each window lies inside when ``clamp``), and
    whether each window lay inside before (None when none can lie outside)."""
    iv = api.asvalue(indices, op)
    if not iv.dtype.is_integer:  # type: ignore[attr-defined]
        raise DTypeError(
            f"indices {api._aval(iv)} must be integers",
            op=op,
            hint="cast them with .astype(pto.int32)",
        )
    iv = api.cast(iv, dt.int32)
    if not w.starts:
        return iv, None
    hi = np.array([shape[d] - w.sizes[d] for d in w.starts], np.int32)
    inside = composite.logical_and(api.greater_equal(iv, 0), api.less_equal(iv, hi))
    ok = composite.all(inside, -1)
    if clamp:
        iv = composite.clip(iv, 0, hi)
    return iv, ok


def gather(
    operand: Any,
    start_indices: Any,
    dimension_numbers: Any,
    slice_sizes: Sequence[int],
    *,
    unique_indices: bool = False,
    indices_are_sorted: bool = False,
    mode: Any = None,
    fill_value: Any = None,
) -> Any:
    """XLA's gather (``jax.lax.gather``): for each index vector (the last axis of
    ``start_indices``), the window of ``slice_sizes`` starting there, its axes placed by
    ``dimension_numbers`` (:class:`GatherDimensionNumbers`). ``mode`` None is JAX's default
    for ``lax.gather``, ``"promise_in_bounds"``: windows are moved inside, as ``"clip"``;
    ``"fill"`` gives a window that reaches outside ``fill_value`` (NaN, the most negative
    integer or True by default). Differentiable in the operand.

    >>> import numpy as np
    >>> import pypto as pto
    >>> dn = pto.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
    ...                                     start_index_map=(0,))
    >>> rows = pto.lax.gather(pto.arange(6.0).reshape(3, 2), np.array([[2], [0]]), dn, (1, 2))
    >>> rows.numpy()  # rows 2 and 0: an embedding lookup
    array([[4., 5.],
           [0., 1.]], dtype=float32)
    """
    op = "lax.gather"
    try:
        v = api.asvalue(operand, op)
        shape = tuple(v.shape)  # type: ignore[attr-defined]
        m = GatherScatterMode.from_any("promise_in_bounds" if mode is None else mode, op)
        dn = dimension_numbers
        sizes = _ints(op, "slice_sizes", slice_sizes)
        _check(
            op,
            f"slice_sizes={sizes} for operand {list(shape)}: one size per operand axis",
            len(sizes) == len(shape),
        )
        idx_shape = _shape(start_indices)
        w = _windows(
            op,
            shape,
            idx_shape,
            _ints(op, "offset_dims", dn.offset_dims),
            _ints(op, "collapsed_slice_dims", dn.collapsed_slice_dims),
            _ints(op, "start_index_map", dn.start_index_map),
            _ints(op, "operand_batching_dims", getattr(dn, "operand_batching_dims", ())),
            _ints(
                op, "start_indices_batching_dims", getattr(dn, "start_indices_batching_dims", ())
            ),
            sizes,
            (
                "offset_dims",
                "collapsed_slice_dims",
                "start_index_map",
                "operand_batching_dims",
                "start_indices_batching_dims",
            ),
        )
        start, ok = _starts(op, start_indices, w, shape, clamp=True)
        if math.prod(w.result) == 0 or not shape:
            # no element to read, or a scalar's one window per index vector
            filled = api.asvalue(np.zeros((), v.dtype.np) if shape else v, op)  # type: ignore[attr-defined]
            return api.broadcast_to(filled, w.result)
        key, axes = _key(w, start, None, shape)
        got = v if all(isinstance(k, slice) for k in key) else indexing.getitem(v, key)
        out = api.transpose(got, tuple(axes.index(a) for a in range(len(axes))))
        if m is GatherScatterMode.FILL_OR_DROP and ok is not None:
            fill = indexing._fill(v.dtype) if fill_value is None else fill_value  # type: ignore[attr-defined]
            keep = api.reshape(ok, tuple(1 if a in w.window else n for a, n in enumerate(w.result)))
            out = api.where(keep, out, api.cast(api.asvalue(fill, op), v.dtype))  # type: ignore[attr-defined]
        return out
    except PyptoError as e:
        raise e.stripped() from None


def _scatter(
    op: str,
    kind: str,
    operand: Any,
    scatter_indices: Any,
    updates: Any,
    dimension_numbers: Any,
    mode: Any,
    unique_indices: bool,
    func: Callable[[Any], Any] | None = None,
    update_shape: Sequence[int] | None = None,
) -> Any:
    try:
        v = api.asvalue(operand, op)
        shape = tuple(v.shape)  # type: ignore[attr-defined]
        m = GatherScatterMode.from_any(mode, op)
        dn = dimension_numbers
        u = None
        if func is None:
            u = api.asvalue(updates, op)
            if u.dtype is not v.dtype:  # type: ignore[attr-defined]
                raise DTypeError(
                    f"updates {api._aval(u)} for operand {api._aval(v)}: the dtypes differ",
                    op=op,
                    hint=f"cast the updates to {v.dtype.name}, as jax.lax requires",  # type: ignore[attr-defined]
                )
            ushape = tuple(u.shape)  # type: ignore[attr-defined]
        else:
            ushape = _ints(op, "update_shape", update_shape or ())
        idx_shape = _shape(scatter_indices)
        window = _ints(op, "update_window_dims", dn.update_window_dims)
        dropped = _ints(op, "inserted_window_dims", dn.inserted_window_dims)
        operand_batch = _ints(op, "operand_batching_dims", getattr(dn, "operand_batching_dims", ()))
        free = [d for d in range(len(shape)) if d not in dropped and d not in operand_batch]
        _check(
            op,
            f"updates {list(ushape)}: update_window_dims={window} name {len(free)} axes of "
            f"the updates, one per operand axis not inserted or batching",
            len(window) == len(free) and all(0 <= a < len(ushape) for a in window),
        )
        sizes = [1] * len(shape)
        for a, d in zip(window, free, strict=True):
            sizes[d] = ushape[a]
        w = _windows(
            op,
            shape,
            idx_shape,
            window,
            dropped,
            _ints(op, "scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims),
            operand_batch,
            _ints(
                op,
                "scatter_indices_batching_dims",
                getattr(dn, "scatter_indices_batching_dims", ()),
            ),
            tuple(sizes),
            (
                "update_window_dims",
                "inserted_window_dims",
                "scatter_dims_to_operand_dims",
                "operand_batching_dims",
                "scatter_indices_batching_dims",
            ),
        )
        _check(
            op,
            f"updates {list(ushape)} for operand {list(shape)} and indices {list(idx_shape)}: "
            f"the windows and index batches make {list(w.result)}",
            w.result == ushape,
        )
        if math.prod(w.result) == 0:
            return v
        _check(
            op,
            f"a scatter into a scalar ({api._aval(v)}) is not built",
            bool(shape),
            "reshape the operand to [1] and scatter along that axis",
        )
        drop = m is not GatherScatterMode.CLIP
        start, ok = _starts(op, scatter_indices, w, shape, clamp=True)
        key, axes = _key(w, start, ok if drop else None, shape)
        ref = indexing.IndexUpdateRef(v, key)
        how: dict[str, Any] = dict(
            mode="drop", unique_indices=unique_indices, wrap_negative_indices=False
        )
        if func is not None:
            return ref.apply(func, **how)
        assert u is not None
        laid = api.transpose(u, axes)
        return getattr(ref, kind)(laid, **how)
    except PyptoError as e:
        raise e.stripped() from None


def _scatter_fn(kind: str, name: str, doc: str) -> Callable[..., Any]:
    """``jax.lax``'s scatter ``name``, combining each update by ``kind`` (an ``x.at[]``
    method)."""

    def fn(
        operand: Any,
        scatter_indices: Any,
        updates: Any,
        dimension_numbers: Any,
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: Any = None,
    ) -> Any:
        return _scatter(
            f"lax.{name}",
            kind,
            operand,
            scatter_indices,
            updates,
            dimension_numbers,
            mode,
            unique_indices,
        )

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


scatter = _scatter_fn(
    "set",
    "scatter",
    """XLA's scatter with replacement (``jax.lax.scatter``): each window of ``updates``
    written into ``operand`` at its index vector, placed by ``dimension_numbers``
    (:class:`ScatterDimensionNumbers`); of repeated positions the last update stays. ``mode``
    None is ``"drop"`` (a window reaching outside is dropped whole); ``"clip"`` moves it
    inside.

    >>> import numpy as np
    >>> import pypto as pto
    >>> dn = pto.lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
    ...                                      scatter_dims_to_operand_dims=(0,))
    >>> ones = pto.ones((2, 2))
    >>> pto.lax.scatter(pto.zeros((3, 2)), np.array([[2], [5]]), ones, dn).numpy()
    array([[0., 0.],
           [0., 0.],
           [1., 1.]], dtype=float32)
    """,
)
scatter_add = _scatter_fn(
    "add", "scatter_add", ":func:`scatter` adding each update (``jax.lax.scatter_add``)."
)
scatter_sub = _scatter_fn(
    "subtract", "scatter_sub", ":func:`scatter` subtracting each update (``jax.lax.scatter_sub``)."
)
scatter_mul = _scatter_fn(
    "multiply",
    "scatter_mul",
    ":func:`scatter` multiplying by each update (``jax.lax.scatter_mul``).",
)
scatter_min = _scatter_fn(
    "min", "scatter_min", ":func:`scatter` keeping the minimum (``jax.lax.scatter_min``)."
)
scatter_max = _scatter_fn(
    "max", "scatter_max", ":func:`scatter` keeping the maximum (``jax.lax.scatter_max``)."
)


def scatter_apply(
    operand: Any,
    scatter_indices: Any,
    func: Callable[[Any], Any],
    dimension_numbers: Any,
    *,
    update_shape: Sequence[int] = (),
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
    mode: Any = None,
) -> Any:
    """``operand`` with ``func`` applied at each window's positions, once per repeat
    (``jax.lax.scatter_apply``); ``update_shape`` is the shape the updates would have.

    >>> import numpy as np
    >>> import pypto as pto
    >>> dn = pto.lax.ScatterDimensionNumbers((), (0,), (0,))
    >>> pto.lax.scatter_apply(pto.ones(3), np.array([[1], [1]]), lambda x: x * 3, dn,
    ...                       update_shape=(2,)).numpy()
    array([1., 9., 1.], dtype=float32)
    """
    return _scatter(
        "lax.scatter_apply",
        "apply",
        operand,
        scatter_indices,
        None,
        dimension_numbers,
        mode,
        unique_indices,
        func=func,
        update_shape=update_shape,
    )
