"""numpy's function-mapping helpers on :func:`pypto.vmap`: ``vectorize`` (with generalized
ufunc signatures), ``apply_along_axis`` and ``apply_over_axes``, as ``jax.numpy``'s.

A mapped function is traced once per call for one example, whatever the number of examples:
each loop axis is one ``vmap`` over it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import PyptoError, ShapeError
from pypto.graph import control
from pypto.graph.batching import vmap
from pypto.ops import api, composite, rules

_DIMS = r"\((?:\w+(?:,\s*\w+)*)?\)"
_SIGNATURE = re.compile(rf"^\s*{_DIMS}(?:\s*,\s*{_DIMS})*\s*->\s*{_DIMS}(?:\s*,\s*{_DIMS})*\s*$")


def _parse(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """``"(m,n),(n)->(m)"`` as the inputs' and outputs' core dimension names."""
    if not _SIGNATURE.match(signature):
        raise ShapeError(
            f"not a generalized ufunc signature: {signature!r}",
            op="vectorize",
            hint="write it as '(m,n),(n)->(m)': a tuple of dimension names per argument",
        )
    ins, outs = signature.split("->")

    def groups(s: str) -> list[tuple[str, ...]]:
        return [
            tuple(d.strip() for d in g.split(",") if d.strip())
            for g in re.findall(r"\(([^)]*)\)", s)
        ]

    return groups(ins), groups(outs)


def vectorize(
    pyfunc: Callable[..., Any],
    *,
    excluded: Collection[int | str] = frozenset(),
    signature: str | None = None,
) -> Callable[..., Any]:
    """``pyfunc`` of single elements (or, with ``signature``, of core blocks such as
    ``"(n),(n)->()"``) applied over the broadcast leading axes of its arguments, as
    ``jnp.vectorize``: one ``vmap`` per loop axis, so ``pyfunc`` is traced once. Positional
    arguments in ``excluded`` and keyword arguments pass through unmapped.

    >>> import pypto as pto
    >>> dot = pto.vectorize(lambda a, b: (a * b).sum(), signature="(n),(n)->()")
    >>> dot(pto.ones((4, 3)), pto.arange(3.0)).numpy()
    array([3., 3., 3., 3.], dtype=float32)
    """
    ins_core: list[tuple[str, ...]] | None = None
    outs_core: list[tuple[str, ...]] | None = None
    if signature is not None:
        ins_core, outs_core = _parse(signature)

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            mapped_at = [i for i in range(len(args)) if i not in excluded]
            vals = [api.asvalue(args[i], "vectorize") for i in mapped_at]
            cores = ins_core if ins_core is not None else [()] * len(vals)
            if len(cores) != len(vals):
                raise ShapeError(
                    f"the signature {signature!r} has {len(cores)} inputs, the call "
                    f"{len(vals)} mapped arguments",
                    op="vectorize",
                )
            sizes: dict[str, int] = {}
            loops = []
            for v, core in zip(vals, cores, strict=True):
                shape = tuple(v.shape)  # type: ignore[attr-defined]
                if len(shape) < len(core):
                    raise ShapeError(
                        f"{api._aval(v)} has fewer axes than its core dimensions {core}",
                        op="vectorize",
                    )
                for name, n in zip(core, shape[len(shape) - len(core) :], strict=True):
                    if sizes.setdefault(name, n) != n:
                        raise ShapeError(
                            f"core dimension {name!r} is {sizes[name]} and {n} "
                            f"(signature {signature!r})",
                            op="vectorize",
                        )
                loops.append(shape[: len(shape) - len(core)])
            try:
                loop = tuple(np.broadcast_shapes(*loops)) if loops else ()
            except ValueError:
                raise ShapeError(
                    "the loop axes " + ", ".join(str(list(s)) for s in loops) + " do not broadcast",
                    op="vectorize",
                ) from None
            full = [
                api.broadcast_to(v, loop + tuple(v.shape)[len(lp) :])  # type: ignore[attr-defined]
                for v, lp in zip(vals, loops, strict=True)
            ]

            def one(*mapped: Any) -> Any:
                call = list(args)
                for i, m in zip(mapped_at, mapped, strict=True):
                    call[i] = m
                out = pyfunc(*call, **kwargs)
                if outs_core is not None:
                    outs = out if isinstance(out, tuple) else (out,)
                    if len(outs) != len(outs_core):
                        raise ShapeError(
                            f"the function returned {len(outs)} outputs, the signature "
                            f"{signature!r} names {len(outs_core)}",
                            op="vectorize",
                        )
                    for o, core in zip(outs, outs_core, strict=True):
                        o = api.asvalue(o, "vectorize")
                        if len(o.shape) != len(core):  # type: ignore[attr-defined]
                            raise ShapeError(
                                f"an output {api._aval(o)} does not have the core dimensions "
                                f"{core} of {signature!r}",
                                op="vectorize",
                            )
                return out

            f: Callable[..., Any] = one
            for _ in loop:
                f = vmap(f)
            return f(*full)
        except PyptoError as e:
            raise e.stripped() from None

    return wrapped


def apply_along_axis(
    func1d: Callable[..., Any], axis: int, arr: Any, *args: Any, **kwargs: Any
) -> Any:
    """``func1d`` applied to every 1-d slice of ``arr`` along ``axis``, the results' axes in
    its place, as ``jnp.apply_along_axis``: one ``vmap`` per other axis.

    >>> import pypto as pto
    >>> x = pto.arange(6.0).reshape(2, 3)
    >>> pto.apply_along_axis(lambda r: r.max() - r.min(), 1, x).numpy()
    array([2., 2.], dtype=float32)
    """
    try:
        v = api.asvalue(arr, "apply_along_axis")
        nd = len(v.shape)  # type: ignore[attr-defined]
        a = rules.normalize_axis("apply_along_axis", axis, nd, api._aval(v))
        f: Callable[..., Any] = lambda r: func1d(r, *args, **kwargs)  # noqa: E731
        for i in range(1, nd - a):
            f = vmap(f, in_axes=i, out_axes=-1)
        for _ in range(a):
            f = vmap(f, in_axes=0, out_axes=0)
        return f(v)
    except PyptoError as e:
        raise e.stripped() from None


def apply_over_axes(func: Callable[[Any, int], Any], a: Any, axes: Sequence[int]) -> Any:
    """``func(a, axis)`` for each axis in turn, putting a removed axis back with length 1,
    as ``jnp.apply_over_axes``.

    >>> import pypto as pto
    >>> pto.apply_over_axes(pto.sum, pto.ones((2, 3, 4)), [0, 2]).shape
    (1, 3, 1)
    """
    try:
        v = api.asvalue(a, "apply_over_axes")
        for ax in axes:
            nd = len(v.shape)  # type: ignore[attr-defined]
            out = api.asvalue(func(v, ax), "apply_over_axes")
            if len(out.shape) == nd - 1:  # type: ignore[attr-defined]
                out = api.reshape(out, _with_axis(tuple(out.shape), ax % nd))  # type: ignore[attr-defined]
            elif len(out.shape) != nd:  # type: ignore[attr-defined]
                raise ShapeError(
                    f"func gave {api._aval(out)} for {api._aval(v)} over axis {ax}: it must keep "
                    "the axes or remove that one",
                    op="apply_over_axes",
                )
            v = out
        return v
    except PyptoError as e:
        raise e.stripped() from None


def _with_axis(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return (*shape[:axis], 1, *shape[axis:])


__all__ = ["apply_along_axis", "apply_over_axes", "vectorize"]


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """``funclist[i]`` applied where ``condlist[i]`` holds, as ``jnp.piecewise``: where several
    conditions hold the last one wins, and one function more than conditions is the default
    (else the default is 0). An entry of ``funclist`` is a function of one element (called as
    ``f(x, *args, **kw)``) or a constant; the result has ``x``'s dtype.

    Each element goes through a ``lax.switch`` on the index of its condition, mapped over
    every element: every function runs on the whole of ``x``, and the gradient at an element
    is its own function's alone (``log`` where ``x <= 0`` adds no NaN where it is not chosen).

    >>> import pypto as pto
    >>> x = pto.tensor([-2.0, -0.5, 0.5, 2.0])
    >>> pto.piecewise(x, [x < -1, x > 1], [lambda v: v + 1, lambda v: v - 1, 0.0]).numpy()
    array([-1.,  0.,  0.,  1.], dtype=float32)
    """
    op = "piecewise"
    xv = api.asvalue(x, op)
    if isinstance(condlist, list | tuple):
        conds = composite.stack([api.asvalue(c, op) for c in condlist], 0) if condlist else None
    else:
        conds = api.asvalue(condlist, op)
    nc = 0 if conds is None else int(conds.shape[0]) if conds.shape else 1
    if conds is not None and not conds.shape:
        conds = api.reshape(conds, (1,))
    funcs = list(funclist)
    if len(funcs) == nc + 1:
        funcs = funcs[-1:] + funcs[:-1]
    elif len(funcs) == nc:
        funcs = [0, *funcs]
    else:
        raise ShapeError(
            f"{nc} condition{'s' if nc != 1 else ''} and {len(funcs)} functions",
            op=op,
            hint=f"give {nc} function{'s' if nc != 1 else ''}, or {nc + 1} with a default last",
        )
    d = api._aval(xv).dtype

    def branch(f: Any) -> Callable[[Any], Any]:
        if callable(f):
            return lambda v: api.cast(api.asvalue(f(v, *args, **kw), op), d)
        c = np.asarray(f).astype(d.np)
        return lambda v: api.asvalue(c)

    if conds is None:
        return vectorize(branch(funcs[0]))(xv)
    if conds.dtype is not dt.bool_:
        conds = api.not_equal(conds, 0)
    counts = composite.cumsum(api.cast(conds, dt.int32), 0)
    first = api.broadcast_to(api.asvalue(np.zeros((), np.int32)), (1, *counts.shape[1:]))
    index = api.argmax(api.concat([first, counts], 0), 0)
    # the conditions' shape and x's broadcast together (a condition per x, or one for all)
    shape = rules.broadcast_shapes(op, api._aval(index), api._aval(xv))
    index, xv = api.broadcast_to(index, shape), api.broadcast_to(xv, shape)
    branches = [branch(f) for f in funcs]
    return vectorize(lambda i, v: control.switch(i, branches, v))(index, xv)
