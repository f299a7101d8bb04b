"""``pto.vmap``: a function of one example mapped over a batch axis, as ``jax.vmap``.

The function is traced once on one example's shapes (its Tensor IR), then the equations are
applied to the whole batch through each primitive's batching rule (:mod:`pypto.ops.batch`):
a value that depends on a batched argument carries the batch as its axis 0, the others stay
as they are. The result is ordinary pypto ops on the batch, so ``vmap`` runs eagerly, stages
under ``jit`` (one batched graph, fused and compiled like any other) and composes with
``grad``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pypto.core import dispatch, hints
from pypto.core.errors import PyptoError, ShapeError, TraceError, at_location
from pypto.graph import pytree
from pypto.graph.ir import Atom, Lit, Var
from pypto.graph.tracer import Spec, trace
from pypto.ops import api
from pypto.ops import batch as rules
from pypto.ops.table import OPS, AVal

__all__ = ["vmap"]

Axes = int | None | Sequence[Any]


def _axis(op: str, a: Any, ndim: int, where: str) -> int | None:
    if a is None:
        return None
    if isinstance(a, bool) or not isinstance(a, int):
        raise TraceError(
            f"{where}: an axis is an int or None, got {a!r}",
            op=op,
            hint="in_axes=0 maps every argument over its first axis; None leaves one unmapped",
        )
    if not -ndim <= a < ndim:
        raise ShapeError(f"{where}: axis {a} is out of range for {ndim} axes", op=op)
    return a % ndim


def _prefix(op: str, spec: Any, td: pytree.TreeDef, where: str) -> list[Any]:
    """``spec`` as one axis per leaf of the tree ``td``: an int or None stands for a whole
    subtree, a tuple, list or dict for a node of that kind (its entries matching the node's,
    recursively) — JAX's pytree prefixes.

    >>> from pypto.graph import pytree
    >>> _prefix("vmap", {"b": 0, "w": None}, pytree.flatten({"w": 1, "b": (2, 3)})[1], "in_axes")
    [0, 0, None]
    """
    if spec is None or isinstance(spec, int):
        return [spec] * td.num_leaves
    # exact types, as pytree's nodes are
    t = type(spec)
    kind = "tuple" if t is tuple else "list" if t is list else "dict" if t is dict else None
    if isinstance(spec, tuple) and hasattr(t, "_fields"):
        kind = "namedtuple"
    if kind == "dict" and td.kind == "dict" and tuple(sorted(spec)) == td.keys:
        parts = [spec[k] for k in td.keys]
    elif (
        kind in ("tuple", "list", "namedtuple")
        and td.kind == kind
        and len(spec) == len(td.children)
        and (kind != "namedtuple" or td.keys[0] is t)
    ):
        parts = list(spec)
    else:
        raise TraceError(
            f"{where}: {spec!r} does not match the structure {td}",
            op=op,
            hint="give an int or None for a whole argument, or a tree of its structure "
            "(a dict of axes for a dict, a tuple for a tuple)",
        )
    return [
        a
        for part, child in zip(parts, td.children, strict=True)
        for a in _prefix(op, part, child, where)
    ]


def _per_arg(op: str, axes: Axes, n: int, name: str) -> list[Any]:
    if isinstance(axes, int | type(None)) and not isinstance(axes, bool):
        return [axes] * n
    if isinstance(axes, list | tuple) and len(axes) == n:
        return list(axes)
    raise TraceError(
        f"{name}={axes!r} must be an int, None, or a tuple with one entry per "
        f"{'argument' if name == 'in_axes' else 'output'} ({n})",
        op=op,
        hint=f"e.g. {name}=0, or {name}=(0, None)",
    )


def vmap(fn: Callable[..., Any], in_axes: Axes = 0, out_axes: Axes = 0) -> Callable[..., Any]:
    """``fn`` of one example, mapped over axis ``in_axes`` of its arguments (an int for all,
    or one entry per positional argument, None leaving an argument unmapped); the results
    carry the batch at ``out_axes``, as ``jax.vmap``. An entry for a pytree argument (a dict
    of parameters, a tuple) is an int or None for all of it, or a tree of its structure with
    an axis per part; ``out_axes`` is likewise a prefix of the results' tree.

    >>> import pypto as pto
    >>> x = pto.ones((5, 3)); w = pto.ones((3, 2))
    >>> pto.vmap(lambda row, w: row @ w, in_axes=(0, None))(x, w).shape
    (5, 2)
    >>> p = {"w": w, "b": pto.zeros((5, 2))}  # a bias per example, one shared weight
    >>> pto.vmap(lambda p, row: row @ p["w"] + p["b"], in_axes=({"w": None, "b": 0}, 0))(p, x).shape
    (5, 2)
    """

    def mapped(*args: Any, **kwargs: Any) -> Any:
        try:
            if not kwargs:
                return _vmap_call(fn, args, in_axes, out_axes)
            # keyword arguments are mapped over their axis 0, as in JAX
            n = len(args)
            per = _per_arg("vmap", in_axes, n, "in_axes")
            return _vmap_call(lambda *a: fn(*a[:n], **a[n]), (*args, kwargs), (*per, 0), out_axes)
        except PyptoError as e:
            raise e.stripped() from None

    mapped.__name__ = f"vmap_{getattr(fn, '__name__', 'f')}"
    mapped.__doc__ = fn.__doc__
    return mapped


def _vmap_call(fn: Callable[..., Any], args: tuple[Any, ...], in_axes: Axes, out_axes: Axes) -> Any:
    op = "vmap"
    per_arg = _per_arg(op, in_axes, len(args), "in_axes")
    leaves: list[Any] = []
    axes: list[int | None] = []
    for i, (arg, ax) in enumerate(zip(args, per_arg, strict=True)):
        arg_leaves, td = pytree.flatten(arg)
        where = f"in_axes of argument {i}"
        for leaf, a in zip(arg_leaves, _prefix(op, ax, td, where), strict=True):
            v = api.asvalue(leaf, op)
            leaves.append(v)
            axes.append(_axis(op, a, len(v.shape), where))  # type: ignore[attr-defined]
    sizes = {v.shape[a] for v, a in zip(leaves, axes, strict=True) if a is not None}
    if not sizes:
        raise TraceError(
            "no argument is mapped (every in_axes is None)", op=op, hint="map one with in_axes=0"
        )
    if len(sizes) > 1:
        found = ", ".join(
            f"{api._aval(v)} at axis {a}"
            for v, a in zip(leaves, axes, strict=True)
            if a is not None
        )
        raise ShapeError(
            f"the mapped axes differ in size: {found}",
            op=op,
            hint="every mapped argument has the batch size along its mapped axis",
        )
    (size,) = sizes
    # one example's abstract values (the mapped axis dropped), the batch moved to axis 0
    specs: list[Any] = []
    batch: list[Any] = []
    for v, a in zip(leaves, axes, strict=True):
        shape = tuple(v.shape)
        if a is None:
            specs.append(v)
            batch.append((v, False))
        else:
            specs.append(Spec(AVal(shape[:a] + shape[a + 1 :], v.dtype)))
            moved = api.transpose(v, (a, *(i for i in range(len(shape)) if i != a)))
            batch.append((moved, True))
    example_args = _rebuild(args, specs)
    func, out_tree, free = trace(fn, example_args)
    env: dict[Var, tuple[Any, bool]] = dict(
        zip(func.params, [*batch, *((f, False) for f in free)], strict=True)
    )
    for c, arr in func.consts:
        env[c] = (api.asvalue(arr), False)

    def read(a: Atom) -> tuple[Any, bool]:
        if isinstance(a, Lit):
            return dispatch.current_trace().const(a.value), False  # type: ignore[attr-defined]
        return env[a]

    for e in func.eqns:
        vals = [read(a) for a in e.inputs]
        with hints.hinted(e.hint), at_location(e.loc):
            if any(b for _, b in vals):
                rule = OPS[e.op].rules["batch"]
                out = rule([x for x, _ in vals], [b for _, b in vals], size, e.out.aval, **e.kwargs)
                env[e.out] = (out, True)
            else:
                env[e.out] = (dispatch.bind(OPS[e.op], tuple(x for x, _ in vals), e.kwargs), False)
    outs = [read(o) for o in func.outputs]
    per_out = _prefix(op, out_axes, out_tree, "out_axes")
    results = []
    for i, ((x, b), ax) in enumerate(zip(outs, per_out, strict=True)):
        if ax is None:
            if b:
                raise TraceError(
                    f"output {i} depends on the mapped arguments, but its out_axes is None",
                    op=op,
                    hint="give it an axis (out_axes=0)",
                )
            results.append(x)
            continue
        if not b:
            x = rules.broadcast_batch(x, size)
        nd = len(x.shape)
        a = _axis(op, ax, nd, f"out_axes of output {i}")
        assert a is not None
        if a:
            x = api.transpose(x, (*range(1, a + 1), 0, *range(a + 1, nd)))
        results.append(x)
    return pytree.unflatten(out_tree, results)


def _rebuild(args: tuple[Any, ...], leaves: list[Any]) -> list[Any]:
    """``args`` with their leaves replaced by ``leaves`` in order."""
    out = []
    k = 0
    for arg in args:
        arg_leaves, tree = pytree.flatten(arg)
        out.append(pytree.unflatten(tree, leaves[k : k + len(arg_leaves)]))
        k += len(arg_leaves)
    return out
