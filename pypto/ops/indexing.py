"""Advanced indexing and JAX's functional updates ``x.at[key].set(y)``, ``.add(y)``, ...

One parse serves both directions. A key (after its ``...`` is expanded and each static boolean
mask becomes the integer arrays of its ``nonzero``) is an :class:`Index`: a basic part, one
strided slice per axis, and an advanced part, the integer arrays broadcast together on the
axes they index, as one flat position into those axes' product.

A gather (``x[key]``) slices, moves the advanced axes together, merges them into one and takes
along it at the flat positions. A scatter (``x.at[key].op(y)``) is its transpose: the same
slice, an update along the merged axis, and the block placed back with a zero pad and a mask.
Positions known when tracing (lists, numpy arrays) are resolved in numpy: each round of
repeated positions is one gather of update rows. Traced positions go through a one-hot of the
positions against an iota: a ``set`` gathers the last update of each position, a float ``add``
is a matmul on the cube; ``multiply``, ``min``, ``max`` and integer sums sort the updates by
position and combine each run with a segmented scan (⌈log₂ K⌉ shifted steps along rows).

numpy's ``put`` and ``put_along_axis`` are updates of this kind.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import BoundsError, DTypeError, PyptoError, ShapeError
from pypto.ops import api, composite, layout, rules
from pypto.ops.composite import _composite
from pypto.ops.table import Value

Shape = tuple[int, ...]
Positions = np.ndarray | Value

_MODES = (None, "promise_in_bounds", "clip", "drop", "fill")
# More rounds of repeated static positions than this go through the one-hot form instead.
_MAX_ROUNDS = 8
# A traced ``apply`` runs one round per possible repeat; past this, unique_indices=True is asked.
_MAX_APPLY_ROUNDS = 32


@dataclass(frozen=True)
class Index:
    """A parsed key of a tensor of ``shape``.

    ``spec`` slices every axis (advanced axes whole) to ``sliced``; ``adv`` are the axes the
    integer arrays index (empty for basic indexing); ``pos`` is the flat position into those
    axes' product, of the arrays' broadcast shape ``bshape`` (always in range); ``valid`` marks
    the positions that were in range before clamping (None: all); ``front`` is numpy's rule
    that the arrays' axes come first when other entries separate them; ``out`` is the shape of
    ``x[key]`` and ``core`` the shape an update is laid out in: ``out`` without None's axes
    (for basic keys, the slice's, ints' axes kept at length 1).
    """

    shape: Shape
    spec: layout.SliceSpec
    sliced: Shape
    full: bool
    adv: tuple[int, ...]
    pos: Positions | None
    valid: Positions | None
    bshape: Shape
    front: bool
    out: Shape
    core: Shape


def _int_array(k: Any) -> bool:
    return isinstance(k, list) or (isinstance(k, np.ndarray) and k.ndim > 0)


def _expand(v: Value, key: Any, op: str) -> tuple[list[Any], list[int]]:
    """The key's entries with ``...`` expanded and static boolean masks as integer arrays,
    and for each the place in the key it came from (numpy's rule for where the arrays' axes
    go looks at the key as written: even an empty ``...`` separates two arrays)."""
    shown = api._aval(v)
    nd = len(v.shape)  # type: ignore[attr-defined]
    entries: list[Any] = []
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind in "iu":
            k = int(k)  # a 0-d integer numpy array is an int, as in numpy
        elif _int_array(k):
            # (an empty list is an empty integer index, as in numpy)
            k = np.asarray(k) if not (isinstance(k, list) and not k) else np.zeros(0, np.int32)
            if k.dtype.kind not in "biu":
                raise DTypeError(
                    f"an index array of {k.dtype} for {shown}: indices must be integers "
                    "(or a boolean mask)",
                    op=op,
                    hint="cast the indices with .astype(int)",
                )
        elif isinstance(k, Value) and k.dtype is dt.bool_:  # type: ignore[attr-defined]
            raise ShapeError(
                f"a boolean mask index of {shown} selects a number of elements known only from "
                "its values, and tensor shapes are static",
                op=op,
                hint="keep the shape: pto.where(mask, x, 0), or sum with the mask as weights; "
                "a mask known when tracing (a numpy array) can index",
            )
        entries.append(k)
    if builtins.sum(1 for k in entries if k is Ellipsis) > 1:
        raise ShapeError(
            f"an index can only have a single Ellipsis ('...'), indexing {shown}", op=op
        )

    def width(k: Any) -> int:
        if k is None or k is Ellipsis:
            return 0
        return k.ndim if isinstance(k, np.ndarray) and k.dtype == np.bool_ else 1

    real = builtins.sum(width(k) for k in entries)
    if real > nd:
        raise BoundsError(
            f"too many indices: {real} for a {nd}-d tensor {shown}",
            op=op,
            hint=f"index at most {nd} axes (None and ... do not count; a mask counts its axes)",
        )
    out: list[Any] = []
    origin: list[int] = []
    d = 0
    for place, k in enumerate(entries):
        before = len(out)
        if k is Ellipsis:
            out.extend([slice(None)] * (nd - real))
            d += nd - real
        elif isinstance(k, np.ndarray) and k.dtype == np.bool_:
            if k.ndim == 0:
                raise ShapeError(
                    f"a 0-d boolean index of {shown} adds an axis of data-dependent length",
                    op=op,
                    hint="index with ints, slices, None, ... and integer arrays",
                )
            want = tuple(v.shape[d : d + k.ndim])  # type: ignore[attr-defined]
            if k.shape != want:
                raise BoundsError(
                    f"a boolean mask of shape {list(k.shape)} for axes {d}..{d + k.ndim - 1} "
                    f"of {shown}, whose sizes are {list(want)}",
                    op=op,
                    hint="a mask has the shape of the axes it selects from",
                )
            out.extend(a.astype(np.int32) for a in np.nonzero(k))
            d += k.ndim
        else:
            out.append(k)
            d += 0 if k is None else 1
        origin.extend([place] * (len(out) - before))
    # the axes left are whole
    rest = nd - d
    return out + [slice(None)] * rest, origin + list(range(len(entries), len(entries) + rest))


def _is_array(k: Any) -> bool:
    return isinstance(k, np.ndarray | Value)


def _concrete(v: Value) -> np.ndarray | None:
    """The values of an eager tensor; None for a traced one (which has no ``numpy()``)."""
    numpy = getattr(v, "numpy", None)
    return None if numpy is None else np.asarray(numpy())


def parse(
    v: Value, key: Any, *, op: str, mode: str | None = None, update: bool = False, wrap: bool = True
) -> Index:
    """``key`` for the tensor ``v``.

    Out-of-range indices: by ``mode`` — ``"clip"`` clamps them; ``"drop"``/``"fill"`` mark
    them invalid (and so do updates by default, as in JAX); otherwise a gather refuses static
    ones (as numpy) and clamps traced ones in compiled code (as JAX). With ``wrap`` negative
    indices count from the end.
    """
    if mode not in _MODES:
        raise ShapeError(
            f"unknown mode {mode!r} for indexing {api._aval(v)}",
            op=op,
            hint="mode is one of 'promise_in_bounds', 'clip', 'drop', 'fill'",
        )
    lenient = update or mode is not None or not wrap
    entries, origin = _expand(v, key, op)
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    if lenient:
        # an int that the mode must judge becomes a 0-d array, which the mode applies to
        d = 0
        for j, k in enumerate(entries):
            if isinstance(k, int | np.integer) and not isinstance(k, bool | np.bool_):
                n = shape[d]
                if not (-n <= int(k) < n) or (int(k) < 0 and not wrap):
                    entries[j] = np.asarray(int(k))
            d += 0 if k is None else 1
    arrays = [j for j, k in enumerate(entries) if _is_array(k)]
    if not arrays:
        spec, out, full = api.slice_spec(shape, tuple(entries), v)
        sliced = tuple(len(_taken(s)) for s in spec)
        # (x[key] and the slice differ only by axes of length 1: ints' and None's)
        return Index(shape, spec, sliced, full, (), None, None, (), False, out, sliced)
    # with arrays about, ints are advanced indices too (0-d arrays), as in numpy
    entries = [
        np.asarray(int(k))
        if isinstance(k, int | np.integer) and not isinstance(k, bool | np.bool_)
        else k
        for k in entries
    ]
    arrays = [j for j, k in enumerate(entries) if _is_array(k)]
    places = sorted({origin[j] for j in arrays})
    adjacent = places == list(range(places[0], places[-1] + 1))
    basic = tuple(slice(None) if _is_array(k) else k for k in entries if k is not None)
    spec, sliced, full = api.slice_spec(shape, basic, v)
    axes: list[int] = []
    d = 0
    for k in entries:
        if _is_array(k):
            axes.append(d)
        d += 0 if k is None else 1
    idx = [entries[j] for j in arrays]
    try:
        bshape = tuple(np.broadcast_shapes(*(tuple(i.shape) for i in idx)))
    except ValueError:
        raise ShapeError(
            "index arrays of shapes "
            + ", ".join(str(list(i.shape)) for i in idx)
            + f" cannot be broadcast together (indexing {api._aval(v)})",
            op=op,
            hint="index arrays pair up elementwise, so their shapes must broadcast",
        ) from None
    pos, valid = _positions(v, idx, axes, bshape, op=op, mode=mode, update=update, wrap=wrap)
    # x[key]'s shape: the arrays' axes where numpy puts them among the others
    before: list[int] = []
    after: list[int] = []
    d = 0
    for j, k in enumerate(entries):
        if k is None:
            (before if j < arrays[0] or not adjacent else after).append(1)
        elif not _is_array(k):
            (before if j < arrays[0] or not adjacent else after).append(sliced[d])
        d += 0 if k is None else 1
    out = (*before, *bshape, *after) if adjacent else (*bshape, *before, *after)
    # the same without None's axes: the slices' lengths in axis order around the arrays' axes
    core_rest = [sliced[a] for a in range(len(shape)) if a not in axes]
    if adjacent:
        nb = builtins.sum(1 for a in range(axes[0]) if a not in axes)
        core = (*core_rest[:nb], *bshape, *core_rest[nb:])
    else:
        core = (*bshape, *core_rest)
    return Index(
        shape, spec, sliced, full, tuple(axes), pos, valid, bshape, not adjacent, out, core
    )


def _taken(s: tuple[int, int | None, int]) -> range:
    """The positions a slice spec takes (a None stop: past the start, stepping down)."""
    start, stop, step = s
    return range(start, -1 if stop is None else stop, step)


def _positions(
    v: Value,
    idx: list[Any],
    axes: list[int],
    bshape: Shape,
    *,
    op: str,
    mode: str | None,
    update: bool,
    wrap: bool,
) -> tuple[Positions, Positions | None]:
    """The flat position into the advanced axes' product, and where it is valid."""
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    sizes = [shape[a] for a in axes]
    judge = (
        "clip" if mode == "clip" else ("mask" if update or mode in ("drop", "fill") else "raise")
    )
    if all(isinstance(i, np.ndarray) for i in idx):
        pos = np.zeros(bshape, np.int64)
        ok = np.ones(bshape, bool)
        for raw, a, n in zip(idx, axes, sizes, strict=True):
            i = raw.astype(np.int64)
            if wrap:
                i = np.where(i < 0, i + n, i)
            bad = (i < 0) | (i >= n)
            if judge == "raise" and bad.any():
                first = raw.astype(np.int64)[bad].flat[0]
                raise BoundsError(
                    f"index {first} is out of range for axis {a} of size {n} in {api._aval(v)}",
                    op=op,
                    hint=f"use indices in [{-n}, {n}), or x.at[key].get(mode='clip' or 'fill')",
                )
            ok &= ~bad
            pos = pos * n + np.clip(i, 0, n - 1)
        valid = None if judge != "mask" or ok.all() else ok
        return pos.astype(np.int32), valid
    if len(idx) == 1 and judge == "raise" and wrap and isinstance(idx[0], Value):
        # pto.take's own rule: negatives wrap, out of range an error eagerly, clamped compiled
        return idx[0], None
    pos_v: Any = None
    ok_v: Any = None
    for i, a, n in zip(idx, axes, sizes, strict=True):
        if not isinstance(i, Value):
            i = api.asvalue(i.astype(np.int32), op)
        elif not i.dtype.is_integer:  # type: ignore[attr-defined]
            raise DTypeError(
                f"an index tensor {api._aval(i)} for {api._aval(v)}: indices must be integers",
                op=op,
                hint="cast the indices with .astype(pto.int32)",
            )
        elif judge == "raise" and (c := _concrete(i)) is not None:
            # eager: out of range is an error, as pto.take's
            c = c.astype(np.int64)
            if c.size and (c.min() < -n or c.max() >= n):
                bad = int(c.max()) if c.max() >= n else int(c.min())
                raise BoundsError(
                    f"index {bad} is out of range for axis {a} of size {n} in {api._aval(v)}",
                    op=op,
                    hint=f"use indices in [{-n}, {n}), or x.at[key].get(mode='clip' or 'fill')",
                )
        i = api.cast(i, dt.int32)
        if wrap:
            i = api.where(api.less(i, 0), api.add(i, n), i)
        if judge == "mask":
            good = composite.logical_and(api.greater_equal(i, 0), api.less(i, n))
            ok_v = good if ok_v is None else composite.logical_and(ok_v, good)
        i = composite.clip(i, 0, n - 1)
        pos_v = i if pos_v is None else api.add(api.mul(pos_v, n), i)
    pos_v = api.broadcast_to(pos_v, bshape)
    if ok_v is not None:
        ok_v = api.broadcast_to(ok_v, bshape)
    return pos_v, ok_v


# --- gather ---------------------------------------------------------------------------------


def _merge(x1: Value, adv: tuple[int, ...]) -> tuple[Value, int, Shape, Shape]:
    """``x1`` with its advanced axes moved together and merged into one at their first's
    place: (merged, that axis, the shapes of the axes before and after it)."""
    shape = tuple(x1.shape)  # type: ignore[attr-defined]
    p = adv[0]
    rest = [a for a in range(len(shape)) if a not in adv and a > p]
    perm = (*range(p), *adv, *rest)
    if perm != tuple(range(len(shape))):
        x1 = api.transpose(x1, perm)
    pre, post = shape[:p], tuple(shape[a] for a in rest)
    return api.reshape(x1, (*pre, math.prod(shape[a] for a in adv), *post)), p, pre, post


def _unmerge(x2: Value, ix: Index) -> Value:
    """The inverse of :func:`_merge` for the sliced block of ``ix``."""
    adv, p = ix.adv, ix.adv[0]
    rest = [a for a in range(len(ix.sliced)) if a not in adv and a > p]
    perm = (*range(p), *adv, *rest)
    x1 = api.reshape(x2, tuple(ix.sliced[a] for a in perm))
    if perm == tuple(range(len(perm))):
        return x1
    return api.transpose(x1, tuple(int(a) for a in np.argsort(perm)))


def _slice(v: Value, ix: Index) -> Value:
    return v if ix.full else api._bind(layout.SLICE, (v,), {"index": ix.spec})


def gather(v: Value, ix: Index, fill_value: Any = None) -> Value:
    """``v[key]`` for the parsed key; where ``ix.valid`` is False, ``fill_value``."""
    x1 = _slice(v, ix)
    if not ix.adv:
        return api.reshape(x1, ix.out)
    x2, p, _, _ = _merge(x1, ix.adv)
    g = api.take(x2, ix.pos, p)
    nb = len(ix.bshape)
    if ix.valid is not None:
        ok = api.reshape(
            api.asvalue(ix.valid), (*(1,) * p, *ix.bshape, *(1,) * (len(g.shape) - p - nb))
        )
        g = api.where(ok, g, fill_value)
    if ix.front and p:
        g = api.transpose(g, (*range(p, p + nb), *range(p), *range(p + nb, len(g.shape))))
    return api.reshape(g, ix.out)


def _fill(d: dt.DType) -> Any:
    """JAX's fill for out-of-range gathers: NaN, the most negative int, True."""
    if d.is_floating:
        return math.nan
    if d is dt.bool_:
        return True
    return int(np.iinfo(d.np).min)


# --- scatter --------------------------------------------------------------------------------

Combine = Callable[[Any, Any], Any]


def _combine(kind: str, func: Callable[[Any], Any] | None) -> Combine:
    return {
        "set": lambda a, b: b,
        "add": api.add,
        "subtract": api.sub,
        "multiply": api.mul,
        "min": api.minimum,
        "max": api.maximum,
        "apply": lambda a, b: func(a),  # type: ignore[misc]
    }[kind]


def scatter(
    v: Value,
    ix: Index,
    y: Any,
    kind: str,
    *,
    func: Callable[[Any], Any] | None = None,
    unique: bool = False,
    op: str = "at",
) -> Any:
    """``v`` with ``y`` combined into ``v[key]`` by ``kind`` (set, add, subtract, multiply,
    min, max, apply), in the promoted dtype and cast back to ``v``'s, as JAX's scatters."""
    out_d = v.dtype  # type: ignore[attr-defined]
    if math.prod(ix.out) == 0:
        return v
    if kind == "apply":
        x = v
        yv = None
    else:
        x, yv = api.promote(op, (v, y))  # (a Python scalar is weak: x's dtype, as in JAX)
        if kind in ("add", "subtract", "multiply") and x.dtype is dt.bool_:  # type: ignore[attr-defined]
            raise DTypeError(
                f"{kind} into a bool tensor {api._aval(v)} with {api._aval(yv)}: a bool has no "
                "sum or product (as in JAX)",
                op=op,
                hint="x.at[key].max(y) is a logical or, .min(y) a logical and; or cast to an int",
            )
        try:
            yv = api.broadcast_to(yv, ix.out)
        except ShapeError:
            raise ShapeError(
                f"cannot broadcast the update {api._aval(api.asvalue(y))} to the shape "
                f"{list(ix.out)} of x[key] (x {api._aval(v)})",
                op=op,
                hint="the update broadcasts to x[key]'s shape, as in x[key] = y",
            ) from None
        yv = api.reshape(yv, ix.core)
    f = _combine(kind, func)
    x1 = _slice(x, ix)
    if not ix.adv:
        new1 = f(x1, yv)
    else:
        x2, p, pre, post = _merge(x1, ix.adv)
        nb = len(ix.bshape)
        if yv is not None:
            if ix.front and p:
                yv = api.transpose(
                    yv, (*range(nb, nb + p), *range(nb), *range(nb + p, len(ix.core)))
                )
            yv = api.reshape(yv, (*pre, math.prod(ix.bshape), *post))
        pos, valid = ix.pos, ix.valid
        if isinstance(pos, np.ndarray):
            keep = np.ones(pos.shape, bool) if valid is None else np.asarray(valid)
            new2 = _scatter_static(x2, p, pos.reshape(-1), keep.reshape(-1), yv, kind, f)
        else:
            flat = api.reshape(pos, (-1,))
            ok = None if valid is None else api.reshape(valid, (-1,))
            new2 = _scatter_traced(x2, p, flat, ok, yv, kind, f, unique=unique, op=op)
        new1 = _unmerge(new2, ix)
    out: Any = new1 if ix.full else _place(x, new1, ix)
    return out if out.dtype is out_d else api.cast(out, out_d)


def _along(mask: np.ndarray | Value, p: int, nd: int) -> Any:
    """A 1-d mask over axis ``p`` shaped to broadcast against an ``nd``-d tensor."""
    n = mask.shape[0]  # type: ignore[union-attr]
    shape = (*(1,) * p, n, *(1,) * (nd - p - 1))
    return mask.reshape(shape) if isinstance(mask, np.ndarray) else api.reshape(mask, shape)


def _scatter_static(
    x2: Value, p: int, pos: np.ndarray, keep: np.ndarray, y: Value | None, kind: str, f: Combine
) -> Value:
    """The update along axis ``p`` at positions known when tracing: one gather of update rows
    per round of repeats, applied in the updates' order (a serial scatter's)."""
    a_len = x2.shape[p]  # type: ignore[attr-defined]
    nd = len(x2.shape)  # type: ignore[attr-defined]
    src = np.nonzero(keep)[0]
    tgt = pos[src]
    if not src.size:
        return x2
    if kind == "set":
        return _apply_last(x2, p, pos, keep, y, f)
    order = np.argsort(tgt, kind="stable")
    t, s = tgt[order], src[order]
    starts = np.r_[0, np.nonzero(np.diff(t))[0] + 1]
    rank = np.arange(t.size) - np.repeat(starts, np.diff(np.r_[starts, t.size]))
    rounds = [(t[rank == j], s[rank == j]) for j in range(int(rank.max()) + 1)]
    if len(rounds) > _MAX_ROUNDS and kind != "apply":
        return _scatter_many(x2, p, pos, keep, y, kind, f)
    for t, s in rounds:
        hit = np.zeros(a_len, bool)
        hit[t] = True
        rows = None
        if y is not None:
            at = np.zeros(a_len, np.int32)
            at[t] = s
            rows = api.take(y, at, p)
        new = f(x2, rows)
        x2 = new if hit.all() else api.where(_along(hit, p, nd), new, x2)
    return x2


def _one_hot(a_len: int, pos: Value, ok: Value | None) -> Value:
    """[A, K]: whether update k goes to position a."""
    at = api.reshape(pos, (1, -1))
    if ok is not None:
        at = api.where(api.reshape(ok, (1, -1)), at, -1)
    return api.equal(api.asvalue(np.arange(a_len, dtype=np.int32).reshape(a_len, 1)), at)


def _apply_last(
    x2: Value, p: int, pos: Positions, ok: Positions | None, y: Value | None, f: Combine
) -> Value:
    """``x2[a] = f(x2[a], y[k])`` along axis ``p`` for the last update k at each position a
    (the others are ignored): one gather of update rows."""
    a_len = x2.shape[p]  # type: ignore[attr-defined]
    nd = len(x2.shape)  # type: ignore[attr-defined]
    if isinstance(pos, np.ndarray):
        keep = np.ones(pos.shape, bool) if ok is None else np.asarray(ok)
        src = np.nonzero(keep)[0]
        # the last of each: the first in the reversed order
        uniq, first = np.unique(pos[src][::-1], return_index=True)
        hit_np = np.zeros(a_len, bool)
        hit_np[uniq] = True
        at_np = np.zeros(a_len, np.int32)
        at_np[uniq] = src[::-1][first]
        new = f(x2, None if y is None else api.take(y, at_np, p))
        return new if hit_np.all() else api.where(_along(hit_np, p, nd), new, x2)
    k = pos.shape[0]  # type: ignore[attr-defined]
    hot = _one_hot(a_len, pos, ok)  # type: ignore[arg-type]
    # the last update of each position: its number, 1-based (0: none)
    last = api.max(api.where(hot, np.arange(1, k + 1, dtype=np.int32), 0), 1)
    rows = None if y is None else api.take(y, api.maximum(api.sub(last, 1), 0), p)
    return api.where(_along(api.greater(last, 0), p, nd), f(x2, rows), x2)


def _scatter_traced(
    x2: Value,
    p: int,
    pos: Value,
    ok: Value | None,
    y: Value | None,
    kind: str,
    f: Combine,
    *,
    unique: bool,
    op: str,
) -> Value:
    """The update along axis ``p`` at traced positions."""
    a_len = x2.shape[p]  # type: ignore[attr-defined]
    nd = len(x2.shape)  # type: ignore[attr-defined]
    k = pos.shape[0]  # type: ignore[attr-defined]
    if kind == "set" or (kind == "apply" and unique):
        return _apply_last(x2, p, pos, ok, y, f)
    if kind == "apply":
        if k > _MAX_APPLY_ROUNDS:
            raise ShapeError(
                f"apply at {k} traced positions of {api._aval(x2)}: a position may repeat up "
                f"to {k} times, and each repeat is a round over the whole tensor",
                op=op,
                hint="pass unique_indices=True when the positions do not repeat",
            )
        count = api.sum(api.cast(_one_hot(a_len, pos, ok), dt.int32), 1)
        for j in range(k):
            x2 = api.where(_along(api.greater(count, j), p, nd), f(x2, None), x2)
        return x2
    return _scatter_many(x2, p, pos, ok, y, kind, f)


def _scatter_many(
    x2: Value, p: int, pos: Positions, ok: Positions | None, y: Value | None, kind: str, f: Combine
) -> Value:
    """Updates with repeats, all at once. A float sum is a one-hot matmul on the cube; any
    other combination reduces each position's updates first — sorted by position, a
    segmented scan in ⌈log₂ K⌉ shifted steps leaves each run's total at its end — then
    applies the totals as a ``set`` would its last values."""
    assert y is not None
    d = y.dtype  # type: ignore[attr-defined]
    if kind in ("add", "subtract") and d.is_floating:
        a_len = x2.shape[p]  # type: ignore[attr-defined]
        shape = tuple(x2.shape)  # type: ignore[attr-defined]
        pre, post = math.prod(shape[:p]), math.prod(shape[p + 1 :])
        k = pos.shape[0]  # type: ignore[union-attr]
        hot = _one_hot(a_len, api.asvalue(pos), None if ok is None else api.asvalue(ok))
        total = scatter_sum(hot, api.reshape(y, (pre, k, post)))
        return f(x2, api.reshape(total, shape))
    # the running combination within a run of equal positions
    op = {"add": api.add, "subtract": api.add, "multiply": api.mul}.get(kind)
    work = dt.int32 if d is dt.bool_ else d
    if kind in ("min", "max"):
        op = api.minimum if kind == "min" else api.maximum
    assert op is not None
    a_len = x2.shape[p]  # type: ignore[attr-defined]
    k = pos.shape[0]  # type: ignore[union-attr]
    if isinstance(pos, np.ndarray):
        keep = np.ones(k, bool) if ok is None else np.asarray(ok)
        key_np = np.where(keep, pos, a_len)  # dropped updates sort last, past every position
        order: Any = np.argsort(key_np, kind="stable").astype(np.int32)
        skey: Any = key_np[order]
    else:
        key = pos if ok is None else api.where(ok, pos, a_len)
        order = composite.argsort(key)
        # (sorted again rather than gathered: a compiled 1-d gather moves element by element)
        skey = composite.sort(key)
    ys = api.take(y if work is d else api.cast(y, work), order, p)
    # the scan runs along the last axis, where a shift stays within each row
    shape = tuple(ys.shape)
    pre, post = math.prod(shape[:p]), math.prod(shape[p + 1 :])
    ys = api.transpose(api.reshape(ys, (pre, k, post)), (0, 2, 1))  # [pre, post, K]
    if isinstance(skey, np.ndarray):
        # (known positions: as many steps as the longest run needs)
        runs = np.diff(np.r_[0, np.nonzero(np.diff(skey))[0] + 1, k])
        reach = int(runs.max()) if runs.size else 1
    else:
        reach = k
    step = 1
    while step < reach:
        head, tail = slice(0, k - step), slice(step, None)
        if isinstance(skey, np.ndarray):
            same: Any = np.r_[np.zeros(step, bool), skey[tail] == skey[head]]
        else:
            same = api.concat(
                [
                    api.asvalue(np.zeros(step, bool)),
                    api.equal(api.getitem(skey, tail), api.getitem(skey, head)),
                ],
                0,
            )
        prev = api.concat(
            [api.getitem(ys, (Ellipsis, slice(0, step))), api.getitem(ys, (Ellipsis, head))], 2
        )
        ys = api.where(same, op(ys, prev), ys)
        step *= 2
    ys = api.reshape(api.transpose(ys, (0, 2, 1)), shape)
    if work is not d:
        ys = api.not_equal(ys, 0)
    valid = np.asarray(skey < a_len) if isinstance(skey, np.ndarray) else api.less(skey, a_len)
    return _apply_last(x2, p, skey, valid, ys, f)


def scatter_sum(hot: Value, y3: Value) -> Value:
    """``Σ_k hot[a, k]·y3[., k, .]`` (``hot`` a bool ``[A, K]``, ``y3`` ``[pre, K, post]``
    floats), as a scatter-add of the updates ``y3`` to positions ``a`` adds them: a matmul on
    the cube for the finite parts. Infinities and NaNs go as counts beside them, since
    ``0·inf`` in the one-hot would spread NaN to every position: one count of ``+inf`` or
    NaN and one of ``-inf`` or NaN, so that a position with both counts is NaN.

    >>> import pypto as pto, numpy as np
    >>> hot = pto.tensor([[True, False], [False, True]])
    >>> scatter_sum(hot, pto.tensor([[[1.0], [np.inf]]])).numpy().ravel().tolist()
    [1.0, inf]
    """
    d = y3.dtype  # type: ignore[attr-defined]
    post = y3.shape[2]  # type: ignore[attr-defined]
    nan = composite.isnan(y3)
    parts = [
        api.where(composite.isfinite(y3), y3, 0.0),
        api.cast(composite.logical_or(api.equal(y3, math.inf), nan), d),
        api.cast(composite.logical_or(api.equal(y3, -math.inf), nan), d),
    ]
    s = api.matmul(api.cast(hot, d), api.concat(parts, 2))  # [pre, A, 3·post]
    total, up, down = (
        api.getitem(s, (Ellipsis, slice(j * post, (j + 1) * post))) for j in range(3)
    )
    up, down = api.greater(up, 0), api.greater(down, 0)
    extra = api.where(
        composite.logical_and(up, down),
        math.nan,
        api.where(up, math.inf, api.where(down, -math.inf, 0.0)),
    )
    return api.cast(api.add(total, extra), d)


def _place(x: Value, new1: Value, ix: Index) -> Value:
    """``x`` with the sliced block replaced by ``new1``: a zero pad puts the block in place
    (strides as interior padding, reversed axes flipped back) and a mask chooses it."""
    config: list[tuple[int, int, int]] = []
    mask: Any = None
    block = new1
    for a, ((start, stop, step), n, m) in enumerate(zip(ix.spec, ix.shape, ix.sliced, strict=True)):
        if (start, stop, step) == (0, n, 1):
            config.append((0, 0, 0))
            continue
        at = np.asarray(_taken((start, stop, step)))
        if step < 0:
            block = composite.flip(block, a)
            at = at[::-1]
        lo, stride = int(at[0]), builtins.abs(step)
        config.append((lo, n - (lo + (m - 1) * stride + 1), stride - 1))
        hit = np.zeros(n, bool)
        hit[at] = True
        axis_mask = api.asvalue(_along(hit, a, len(ix.shape)))
        mask = axis_mask if mask is None else composite.logical_and(mask, axis_mask)
    placed = api._bind(layout.PAD, (block,), {"config": tuple(config)})
    return api.where(mask, placed, x)


# --- the surface ----------------------------------------------------------------------------


def getitem(v: Value, key: Any) -> Any:
    """``v[key]`` with integer arrays or static boolean masks in the key (see api.getitem)."""
    return gather(v, parse(v, key, op="getitem"))


class IndexUpdateHelper:
    """``x.at``: JAX's functional updates. ``x.at[key]`` names positions as ``x[key]`` does
    (ints, slices, None, ``...``, integer arrays — lists, numpy arrays or tensors — and
    boolean masks known when tracing); its methods return a new tensor:

    ===============================  ============================================
    ``x.at[key].set(y)``             ``x[key] = y``
    ``x.at[key].add(y)``             ``x[key] += y``, every repeat counted
    ``x.at[key].subtract(y)``        ``x[key] -= y``
    ``x.at[key].multiply(y)``        ``x[key] *= y``
    ``x.at[key].divide(y)``          ``x[key] /= y``
    ``x.at[key].power(y)``           ``x[key] **= y``
    ``x.at[key].min(y)``             ``x[key] = minimum(x[key], y)``
    ``x.at[key].max(y)``             ``x[key] = maximum(x[key], y)``
    ``x.at[key].apply(f)``           ``x[key] = f(x[key])``, once per repeat
    ``x.at[key].get()``              ``x[key]``
    ===============================  ============================================

    ``y`` broadcasts to ``x[key]``'s shape; the work is in the promoted dtype and the result
    has ``x``'s, as in JAX. Unlike numpy's ``x[idx] += y``, a repeated position gets every
    update; a ``set`` repeated keeps the last. ``mode`` says what an index out of range does:
    updates drop it by default (``"drop"``/``"fill"``/``"promise_in_bounds"``), ``"clip"``
    clamps it; ``get`` fills it with ``fill_value`` in ``"fill"`` mode. With
    ``wrap_negative_indices=False`` a negative index is out of range.

    >>> import pypto as pto
    >>> x = pto.zeros(5)
    >>> x.at[1:3].set(7.0).numpy()
    array([0., 7., 7., 0., 0.], dtype=float32)
    >>> x.at[pto.tensor([0, 0, 4])].add(1.0).numpy()
    array([2., 0., 0., 0., 1.], dtype=float32)
    >>> pto.arange(5).at[10].get(mode="fill", fill_value=-1).numpy()
    array(-1, dtype=int32)
    """

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array

    def __getitem__(self, key: Any) -> IndexUpdateRef:
        return IndexUpdateRef(self.array, key)

    def __repr__(self) -> str:
        return f"IndexUpdateHelper({api._aval(self.array)})"


class IndexUpdateRef:
    """``x.at[key]``: the positions an update goes to (see :class:`IndexUpdateHelper`)."""

    __slots__ = ("array", "index")

    def __init__(self, array: Any, index: Any) -> None:
        self.array = array
        self.index = index

    def __repr__(self) -> str:
        return f"IndexUpdateRef({api._aval(self.array)}, {self.index!r})"

    def _update(
        self,
        kind: str,
        values: Any,
        mode: str | None,
        wrap: bool,
        unique: bool = False,
        func: Callable[[Any], Any] | None = None,
        base: Any = None,
    ) -> Any:
        op = f"at[].{kind}"
        try:
            v = api.asvalue(self.array if base is None else base, op)
            ix = parse(v, self.index, op=op, mode=mode, update=True, wrap=wrap)
            return scatter(v, ix, values, kind, func=func, unique=unique, op=op)
        except PyptoError as e:
            raise e.stripped() from None

    def get(
        self,
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: str | None = None,
        fill_value: Any = None,
        wrap_negative_indices: bool = True,
    ) -> Any:
        """``x[key]``; out-of-range indices by ``mode`` ("clip" clamps, "fill" gives
        ``fill_value``: NaN, the most negative int or True by default).

        >>> import pypto as pto
        >>> pto.arange(4).at[pto.tensor([3, 5])].get(mode="clip").numpy()
        array([3, 3], dtype=int32)
        """
        try:
            v = api.asvalue(self.array, "at[].get")
            ix = parse(v, self.index, op="at[].get", mode=mode, wrap=wrap_negative_indices)
            fill = _fill(v.dtype) if fill_value is None else fill_value  # type: ignore[attr-defined]
            return gather(v, ix, fill)
        except PyptoError as e:
            raise e.stripped() from None

    def set(
        self,
        values: Any,
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: str | None = None,
        wrap_negative_indices: bool = True,
    ) -> Any:
        """``x[key] = values``; a repeated position keeps its last value.

        >>> import pypto as pto
        >>> pto.zeros((2, 3)).at[:, [0, 2]].set(pto.tensor([1.0, 2.0])).numpy()
        array([[1., 0., 2.],
               [1., 0., 2.]], dtype=float32)
        """
        return self._update("set", values, mode, wrap_negative_indices, unique_indices)

    def add(
        self,
        values: Any,
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: str | None = None,
        wrap_negative_indices: bool = True,
    ) -> Any:
        """``x[key] += values``, each repeat of a position adding its own value.

        >>> import pypto as pto
        >>> pto.zeros(3, pto.int32).at[[0, 2, 0]].add(pto.tensor([1, 2, 3])).numpy()
        array([4, 0, 2], dtype=int32)
        """
        return self._update("add", values, mode, wrap_negative_indices, unique_indices)

    def subtract(
        self,
        values: Any,
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: str | None = None,
        wrap_negative_indices: bool = True,
    ) -> Any:
        """``x[key] -= values``, each repeat subtracting its own value."""
        return self._update("subtract", values, mode, wrap_negative_indices, unique_indices)

    def multiply(
        self,
        values: Any,
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: str | None = None,
        wrap_negative_indices: bool = True,
    ) -> Any:
        """``x[key] *= values``, each repeat multiplying by its own value."""
        return self._update("multiply", values, mode, wrap_negative_indices, unique_indices)

    mul = multiply

    def divide(
        self,
        values: Any,
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: str | None = None,
        wrap_negative_indices: bool = True,
    ) -> Any:
        """``x / m`` where ``m`` is ones with ``values`` multiplied in at ``key``, as JAX
        (so an integer ``x`` gives a float result).

        >>> import pypto as pto
        >>> pto.ones(3).at[1].divide(4.0).numpy()
        array([1.  , 0.25, 1.  ], dtype=float32)
        """
        m = self._ones_times(values, mode, wrap_negative_indices, unique_indices)
        try:
            return api.div(self.array, m)
        except PyptoError as e:
            raise e.stripped() from None

    def power(
        self,
        values: Any,
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: str | None = None,
        wrap_negative_indices: bool = True,
    ) -> Any:
        """``x ** m`` where ``m`` is ones with ``values`` multiplied in at ``key``, as JAX.

        >>> import pypto as pto
        >>> pto.full(3, 2.0).at[2].power(3.0).numpy()
        array([2., 2., 8.], dtype=float32)
        """
        m = self._ones_times(values, mode, wrap_negative_indices, unique_indices)
        try:
            return api.pow(self.array, m)
        except PyptoError as e:
            raise e.stripped() from None

    def _ones_times(self, values: Any, mode: str | None, wrap: bool, unique: bool) -> Any:
        try:
            v = api.asvalue(self.array, "at[]")
            one = api.broadcast_to(api.asvalue(np.ones((), v.dtype.np)), v.shape)  # type: ignore[attr-defined]
        except PyptoError as e:
            raise e.stripped() from None
        return self._update("multiply", values, mode, wrap, unique, base=one)

    def min(
        self,
        values: Any,
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: str | None = None,
        wrap_negative_indices: bool = True,
    ) -> Any:
        """``x[key] = minimum(x[key], values)`` over every repeat."""
        return self._update("min", values, mode, wrap_negative_indices, unique_indices)

    def max(
        self,
        values: Any,
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: str | None = None,
        wrap_negative_indices: bool = True,
    ) -> Any:
        """``x[key] = maximum(x[key], values)`` over every repeat."""
        return self._update("max", values, mode, wrap_negative_indices, unique_indices)

    def apply(
        self,
        func: Callable[[Any], Any],
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: str | None = None,
        wrap_negative_indices: bool = True,
    ) -> Any:
        """``x[key] = func(x[key])``, applied once per repeat of a position (``func`` is
        elementwise).

        >>> import pypto as pto
        >>> pto.ones(3).at[[0, 0, 2]].apply(lambda t: t * 3).numpy()
        array([9., 1., 3.], dtype=float32)
        """
        return self._update("apply", None, mode, wrap_negative_indices, unique_indices, func=func)


# --- numpy's put functions -------------------------------------------------------------------


def _not_inplace(op: str, inplace: bool) -> None:
    if inplace:
        raise ShapeError(
            "cannot modify a tensor in place: tensors are immutable",
            op=op,
            hint=f"pass inplace=False for the updated copy (as jnp.{op} asks)",
        )


def _put_jax(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = True) -> Any:
    return jnp.put(a, ind, v, mode=mode, inplace=False)


@_composite("put", "a copy of a with v at flat positions ind (jnp.put)", _put_jax)
def put(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = True) -> Any:
    """``a`` with ``v`` at the flat positions ``ind``, as ``jnp.put(..., inplace=False)``:
    ``v`` is flattened and repeated to ``ind``'s size; a position counts from the end when
    negative and is clamped when out of range (``mode=None``, as ``jnp.unravel_index``), is
    clamped to ``[0, size)`` (``"clip"``) or wraps (``"wrap"``); of repeats the last wins.

    >>> import pypto as pto
    >>> pto.put(pto.zeros((2, 3)), [0, 5], 7.0, inplace=False).numpy()
    array([[7., 0., 0.],
           [0., 0., 7.]], dtype=float32)
    """
    _not_inplace("put", inplace)
    x = api.asvalue(a, "put")
    i = api.reshape(api.asvalue(ind, "put"), (-1,))
    vals = api.reshape(api.asvalue(v, "put"), (-1,))
    size, k, m = math.prod(x.shape), i.shape[0], vals.shape[0]  # type: ignore[attr-defined]
    if not (size and k and m):
        return x
    if m != k:  # numpy repeats v over the positions
        vals = api.take(vals, np.arange(k, dtype=np.int32) % m, 0)
    if mode not in (None, "clip", "wrap"):
        raise ShapeError(
            f"unknown mode {mode!r} for {api._aval(x)}",
            op="put",
            hint="mode is None, 'clip' or 'wrap' ('raise' needs the values: use numpy)",
        )
    if mode == "clip":
        i = composite.clip(i, 0, size - 1)
    elif mode == "wrap":
        i = composite.remainder(i, size)
    # (mode None: negatives count from the end and the rest clamp, as jnp.unravel_index)
    flat = api.reshape(x, (-1,))
    out = IndexUpdateRef(flat, (i,)).set(vals, mode="clip")
    return api.reshape(out, x.shape)  # type: ignore[attr-defined]


def _put_along_axis_jax(
    arr: Any, indices: Any, values: Any, axis: int | None, inplace: bool = True, *, mode: Any = None
) -> Any:
    return jnp.put_along_axis(arr, indices, values, axis, inplace=False, mode=mode)


@_composite(
    "put_along_axis",
    "a copy of arr with values at indices along an axis (jnp.put_along_axis)",
    _put_along_axis_jax,
)
def put_along_axis(
    arr: Any,
    indices: Any,
    values: Any,
    axis: int | None,
    inplace: bool = True,
    *,
    mode: str | None = None,
) -> Any:
    """``arr`` with ``values`` put where :func:`take_along_axis` would take from, as
    ``jnp.put_along_axis(..., inplace=False)``: ``indices`` has ``arr``'s number of axes
    (``axis=None``: 1-d, into the flattened ``arr``), the other axes broadcast; ``values``
    broadcasts to ``indices``; out-of-range positions by ``mode``, as ``x.at[...].set``.

    >>> import pypto as pto
    >>> x = pto.zeros((2, 3))
    >>> pto.put_along_axis(x, pto.tensor([[2], [0]]), 1.0, axis=1, inplace=False).numpy()
    array([[0., 0., 1.],
           [1., 0., 0.]], dtype=float32)
    """
    _not_inplace("put_along_axis", inplace)
    x = api.asvalue(arr, "put_along_axis")
    i = api.asvalue(indices, "put_along_axis")
    shape = tuple(x.shape)  # type: ignore[attr-defined]
    if axis is None:
        x, a = api.reshape(x, (-1,)), 0
    else:
        a = rules.normalize_axis("put_along_axis", axis, len(shape), api._aval(x))
    nd = len(x.shape)  # type: ignore[attr-defined]
    if len(i.shape) != nd:  # type: ignore[attr-defined]
        raise ShapeError(
            f"indices {api._aval(i)} and tensor {api._aval(x)} have different numbers of axes",
            op="put_along_axis",
            hint="add size-1 axes to the indices (i[..., None]) so that they broadcast",
        )
    try:
        vals = api.broadcast_to(api.asvalue(values, "put_along_axis"), tuple(i.shape))  # type: ignore[attr-defined]
    except ShapeError:
        raise ShapeError(
            f"values {api._aval(api.asvalue(values))} do not broadcast to the indices "
            f"{api._aval(i)}",
            op="put_along_axis",
        ) from None
    # every other axis indexed by its own iota, as np.indices(sparse=True)
    key = tuple(
        i if d == a else np.arange(n, dtype=np.int32).reshape((1,) * d + (n,) + (1,) * (nd - d - 1))
        for d, n in enumerate(x.shape)  # type: ignore[attr-defined]
    )
    out = IndexUpdateRef(x, key).set(vals, mode=mode)
    return api.reshape(out, shape)


__all__: Sequence[str] = [
    "IndexUpdateHelper",
    "IndexUpdateRef",
    "getitem",
    "parse",
    "put",
    "put_along_axis",
]
