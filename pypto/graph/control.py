"""Structured control flow with JAX's signatures: ``cond``, ``switch``, ``fori_loop``,
``while_loop``, ``scan`` and ``map`` (``pto.lax``).

The Tensor IR has no control-flow equations, so these work at trace time. A choice whose
predicate is known there (a Python value or an eager tensor) runs its branch alone; a traced
one runs every branch and selects each output with ``where`` — what ``jax.lax.cond`` becomes
under ``vmap``, and on the NPU, whose kernels have no data-dependent branches, the honest
lowering. It is recorded as one call (a ``custom_vjp_call``, inlined before tiling) whose
backward chooses among the branches' VJPs, so a branch not taken adds nothing to the
gradient, not even a NaN. Loops run their body once per iteration: a ``fori_loop`` or
``scan`` of static length unrolls into the graph (its size grows with the trip count, as
``unroll=True`` in JAX), and a ``while_loop`` needs a condition known at trace time.
Everything composes with ``grad``, ``vmap`` and ``jit`` because what is recorded is ordinary
ops and calls with rules for each.

Each body's outputs must keep the structure, shapes and dtypes of its inputs (the carry) and
the branches must agree with each other, as in JAX; a mismatch is a :class:`pto.TraceError`
naming both sides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import TraceError
from pypto.graph import autodiff, interpret, pytree
from pypto.graph.batching import vmap
from pypto.graph.custom_vjp import custom_vjp
from pypto.graph.ir import Func
from pypto.graph.tracer import Spec, Tracer, trace
from pypto.ops import api, composite
from pypto.ops.table import AVal


def _avals(op: str, what: str, tree: Any) -> tuple[pytree.TreeDef, list[AVal]]:
    leaves, td = pytree.flatten(tree)
    avals = []
    for i, leaf in enumerate(leaves):
        try:
            avals.append(api._aval(api.asvalue(leaf, op)))
        except Exception:
            raise TraceError(
                f"{what} holds a {type(leaf).__name__} at leaf {i}: only tensors, arrays and "
                "numbers can be carried",
                op=op,
            ) from None
    return td, avals


def _same(op: str, a: tuple[str, Any], b: tuple[str, Any], hint: str) -> None:
    """Raise unless the two named pytrees have one structure, shapes and dtypes."""
    (na, ta), (nb, tb) = a, b
    da, aa = _avals(op, na, ta)
    db, ab = _avals(op, nb, tb)
    if da != db:
        raise TraceError(f"{na} has structure {da} but {nb} has {db}", op=op, hint=hint)
    for i, (x, y) in enumerate(zip(aa, ab, strict=True)):
        if x != y:
            where = "" if da.kind == "leaf" else f" at leaf {i}"
            raise TraceError(f"{na} is {x} but {nb} is {y}{where}", op=op, hint=hint)


def _values(op: str, tree: Any) -> Any:
    """``tree`` with every leaf a tensor (numbers and arrays converted), as JAX returns."""
    leaves, td = pytree.flatten(tree)
    return pytree.unflatten(td, [api.asvalue(v, op) for v in leaves])


def _concrete(x: Any) -> bool:
    leaves, _ = pytree.flatten(x)
    return not any(isinstance(v, Tracer) for v in leaves)


def _scalar(op: str, what: str, x: Any) -> Any:
    v = api.asvalue(x, op)
    if tuple(v.shape) != ():  # type: ignore[attr-defined]
        raise TraceError(
            f"{what} must be a scalar, got {api._aval(v)}",
            op=op,
            hint="for an elementwise choice use pto.where(cond, x, y)",
        )
    return v


def _select(which: Any, outs: list[Any]) -> Any:
    """``outs[which]`` leaf by leaf for a traced int32 ``which`` (already clamped): a scalar,
    or one per example of the leaves' leading (batch) axes."""
    trees = [pytree.flatten(o) for o in outs]
    leaves = [t[0] for t in trees]
    k = len(which.shape)
    picked = []
    for j in range(len(leaves[0])):
        r = leaves[-1][j]
        for i in reversed(range(len(outs) - 1)):
            m = api.equal(which, i)
            if k:
                m = api.reshape(m, (*which.shape, *(1,) * (len(r.shape) - k)))
            r = api.where(m, leaves[i][j], r)
        picked.append(r)
    return pytree.unflatten(trees[0][1], picked)


def _abstract(fn: Callable[..., Any], operands: tuple[Any, ...]) -> Any:
    """``fn``'s outputs as shape-and-dtype stand-ins, traced without running it."""
    func, out_tree, _ = trace(fn, operands)
    return pytree.unflatten(out_tree, [Spec(o.aval) for o in func.outputs])


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """``branches[index](*operands)``, as ``jax.lax.switch``: ``index`` (an integer scalar) is
    clamped to the branches' range. A traced ``index`` runs every branch and selects.

    >>> import pypto as pto
    >>> pto.lax.switch(1, [pto.sin, pto.cos, pto.exp], pto.tensor(0.0)).item()
    1.0
    """
    if not branches:
        raise TraceError("switch needs at least one branch", op="switch")
    i = _scalar("switch", "the index", index)
    if i.dtype.is_floating:
        raise TraceError(
            f"the index must be an integer, got {api._aval(i)}",
            op="switch",
            hint="cast it with .astype(pto.int32)",
        )
    return _choose("switch", i, branches, [f"branch {j}" for j in range(len(branches))], operands)


def _choose(
    op: str, i: Any, branches: Sequence[Callable[..., Any]], names: list[str], operands: Any
) -> Any:
    """The output of ``branches[i]`` (``i`` an integer or bool scalar, clamped), ``names``
    naming the branches in messages."""
    n = len(branches)
    hint = "every branch returns the same structure, shapes and dtypes"
    if _concrete(i):
        k = int(np.clip(int(np.asarray(i)), 0, n - 1))
        out = _values(op, branches[k](*operands))
        for j, b in enumerate(branches):  # the others are traced only, to check they agree
            if j != k:
                _same(
                    op,
                    (f"{names[k]}'s output", out),
                    (f"{names[j]}'s", _abstract(b, operands)),
                    hint,
                )
        return out
    traced = [trace(b, operands, name=op) for b in branches]
    outs = [pytree.unflatten(t, [Spec(o.aval) for o in f.outputs]) for f, t, _ in traced]
    for j in range(1, n):
        _same(op, (f"{names[j]}'s output", outs[j]), (f"{names[0]}'s", outs[0]), hint)
    which = composite.clip(api.cast(i, dt.int32), 0, n - 1)
    choice, frees = _Choice.traced(op, traced)
    leaves = [api.asvalue(v, op) for v in pytree.flatten(tuple(operands))[0]]
    return choice(which, *leaves, *frees)


class _Choice(custom_vjp):
    """A traced ``cond`` or ``switch``: one ``custom_vjp_call`` whose body runs every branch
    and selects each output with ``where``, and whose backward is again a choice, among the
    branches' VJPs, as ``jax.lax.cond``'s transpose is a ``cond``.

    Selecting the gradients rather than adding them is the point: a branch not taken may have
    a NaN gradient at the operands (``log`` at 0: the zero cotangent ``where`` gives it, times
    ``1/0``), and the choice drops it, as JAX does. Each branch is a function of the call's
    flat arguments (operands, then every value a branch closes over). Under ``vmap`` the call
    becomes a choice among the mapped branches, per example when ``which`` is mapped too, so
    the gradient of a mapped choice is chosen per example as well.
    """

    def __init__(self, op: str, branches: list[Callable[..., Any]]) -> None:
        self.op = op
        self.branches = branches

        def choice(which: Any, *args: Any) -> Any:
            return _select(which, [b(*args) for b in self.branches])

        choice.__name__ = op
        super().__init__(choice)
        # no forward of its own: the residuals are the arguments (_residuals below)
        self.defvjp(choice, self._backward)

    @classmethod
    def traced(
        cls, op: str, traced: list[tuple[Func, pytree.TreeDef, list[Any]]]
    ) -> tuple[_Choice, list[Any]]:
        """The choice among branches traced on the operands, and the values they close over,
        which follow the operands in the call's arguments."""
        frees: list[Any] = []
        branches = []
        n_ops = len(traced[0][0].params) - len(traced[0][2])
        for func, tree, free in traced:
            pos = []
            for x in free:
                k = next((k for k, y in enumerate(frees) if y is x), None)
                if k is None:
                    k = len(frees)
                    frees.append(x)
                pos.append(k)

            def branch(*args: Any, func: Func = func, tree: Any = tree, pos: Any = pos) -> Any:
                ins = [*args[:n_ops], *(args[n_ops + k] for k in pos)]
                return pytree.unflatten(tree, interpret.evaluate(func, ins, groups=True))

            branches.append(branch)
        return cls(op, branches), frees

    def _residuals(self, args: tuple[Any, ...], body: Func, out_tree: pytree.TreeDef) -> Any:
        return args  # the backward runs the branches' VJPs from the arguments alone

    def _backward(self, args: tuple[Any, ...], ct: Any) -> tuple[Any, ...]:
        which, rest = args[0], list(args[1:])
        cts, ct_tree = pytree.flatten(ct)
        floats = [k for k, v in enumerate(rest) if v.dtype.is_floating]
        n = len(rest)

        def vjp_of(branch: Callable[..., Any]) -> Callable[..., Any]:
            def branch_vjp(*vals: Any) -> tuple[Any, ...]:
                _, f_vjp = autodiff.vjp(branch, *vals[:n])
                grads = f_vjp(pytree.unflatten(ct_tree, list(vals[n:])))
                return tuple(grads[k] for k in floats)

            return branch_vjp

        picked = _Choice(self.op, [vjp_of(b) for b in self.branches])(which, *rest, *cts)
        out: list[Any] = [None] * n
        for k, g in zip(floats, picked, strict=True):
            out[k] = g
        return (None, *out)

    def batch(self, args: list[Any], batched: list[bool], size: int, result: int) -> Any:
        """The call on a batch (axis 0 of the batched arguments): a choice among the mapped
        branches. When ``which`` is batched every argument is: the choice is then per
        example, and so is the backward's choice of each argument's gradient (an unbatched
        argument's is summed over the examples by the ``broadcast_to`` below)."""
        if batched[0]:
            args = [
                args[0],
                *(
                    a if b else api.broadcast_to(a, (size, *a.shape))
                    for a, b in zip(args[1:], batched[1:], strict=True)
                ),
            ]
            batched = [True] * len(args)
        axes = tuple(0 if b else None for b in batched[1:])
        out = _Choice(self.op, [vmap(b, in_axes=axes) for b in self.branches])(*args)
        return pytree.flatten(out)[0][result]


def cond(
    pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any
) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, as ``jax.lax.cond``:
    ``pred`` is a scalar (a number is true when nonzero). A traced ``pred`` runs both branches
    and selects each output with ``where``; the gradient is the selected branch's alone, even
    where the other's is NaN (``log`` at 0), as in JAX.

    >>> import pypto as pto
    >>> f = pto.jit(lambda x: pto.lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: -v, x))
    >>> f(pto.tensor([1.0, -3.0])).numpy()
    array([-1.,  3.], dtype=float32)
    >>> f(pto.tensor([1.0, 3.0])).numpy()
    array([2., 6.], dtype=float32)
    """
    p = _scalar("cond", "pred", pred)
    if not p.dtype.is_floating and p.dtype is not dt.bool_:
        p = api.not_equal(p, 0)
    elif p.dtype.is_floating:
        raise TraceError(
            f"pred must be a bool or an integer, got {api._aval(p)}",
            op="cond",
            hint="compare it first, e.g. x > 0",
        )
    return _choose("cond", p, [false_fun, true_fun], ["false_fun", "true_fun"], operands)


def _bound(op: str, what: str, x: Any) -> int:
    if isinstance(x, Tracer):
        raise TraceError(
            f"the {what} bound is traced ({api._aval(x)}): the loop unrolls, so its trip count "
            "must be known when tracing",
            op=op,
            hint="pass a Python int (a static argument of jit: static_argnums)",
        )
    v = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
    if v.shape != () or v.dtype.kind not in "iu":
        raise TraceError(f"the {what} bound must be an integer, got {v!r}", op=op)
    return int(v)


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any) -> Any:
    """``body_fun(i, val)`` for ``i`` from ``lower`` to ``upper - 1``, as
    ``jax.lax.fori_loop``; the bounds must be known when tracing, and the loop unrolls (``i``
    is an int32 scalar). ``val`` may be a pytree; each iteration must keep its structure,
    shapes and dtypes.

    >>> import pypto as pto
    >>> pto.lax.fori_loop(0, 5, lambda i, v: v * 2 + i, pto.tensor(1.0)).item()
    58.0
    """
    lo, hi = _bound("fori_loop", "lower", lower), _bound("fori_loop", "upper", upper)
    val = _values("fori_loop", init_val)
    for i in range(lo, hi):
        new = _values("fori_loop", body_fun(api.asvalue(np.int32(i)), val))
        _same(
            "fori_loop",
            ("the body's output", new),
            ("its input", val),
            "the body returns a value of the carry's structure, shapes and dtypes",
        )
        val = new
    return val


def while_loop(
    cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any
) -> Any:
    """``val = body_fun(val)`` while ``cond_fun(val)``, as ``jax.lax.while_loop``. The
    condition must be known at each step when tracing: in eager mode it always is; under
    ``jit`` it may depend on static values only (a loop whose trip count depends on data
    cannot be compiled: the NPU program has no data-dependent loops).

    >>> import pypto as pto
    >>> pto.lax.while_loop(lambda v: v < 100, lambda v: v * 3, pto.tensor(1)).item()
    243
    """
    val = _values("while_loop", init_val)
    while True:
        c = _scalar("while_loop", "the condition", cond_fun(val))
        if isinstance(c, Tracer):
            raise TraceError(
                f"the condition is traced ({api._aval(c)}): a loop whose trip count depends on "
                "data cannot be compiled, the NPU program has no data-dependent loops",
                op="while_loop",
                hint="run it eagerly, or bound it: fori_loop with a static trip count and "
                "pto.where(done, val, body(val)) inside",
            )
        if not bool(np.asarray(c)):
            return val
        new = _values("while_loop", body_fun(val))
        _same(
            "while_loop",
            ("the body's output", new),
            ("its input", val),
            "the body returns a value of the carry's structure, shapes and dtypes",
        )
        val = new


def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | None = None,
    reverse: bool = False,
) -> tuple[Any, Any]:
    """``carry, y = f(carry, x)`` over the slices ``x`` of ``xs`` along its leading axis, as
    ``jax.lax.scan``: returns the final carry and the ``y``s stacked on a new leading axis
    (pytrees both; ``xs=None`` with ``length`` scans without inputs; ``reverse`` walks from
    the end and stacks the ``y``s in the original order). The scan unrolls.

    >>> import pypto as pto
    >>> total, running = pto.lax.scan(lambda c, x: (c + x, c + x), 0.0, pto.arange(4.0))
    >>> total.item(), running.numpy()
    (6.0, array([0., 1., 3., 6.], dtype=float32))
    """
    leaves, x_tree = pytree.flatten(xs)
    leaves = [api.asvalue(x, "scan") for x in leaves]
    if any(len(v.shape) == 0 for v in leaves):
        raise TraceError("xs must have a leading axis to scan over, got a scalar", op="scan")
    lengths = {int(v.shape[0]) for v in leaves}
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise TraceError(
            f"the leading axes of xs (and length) disagree: {sorted(lengths)}"
            if lengths
            else "scan needs xs or length",
            op="scan",
            hint="every leaf of xs has the same leading axis, and length matches it",
        )
    (n,) = lengths
    carry = _values("scan", init)
    ys: list[Any] = []
    for i in reversed(range(n)) if reverse else range(n):
        x = pytree.unflatten(x_tree, [api.getitem(v, i) for v in leaves])
        out = f(carry, x)
        if not isinstance(out, tuple) or len(out) != 2:
            raise TraceError(
                f"f must return a pair (carry, y), got {type(out).__name__}",
                op="scan",
            )
        new, y = _values("scan", out[0]), out[1]
        _same(
            "scan",
            ("f's carry output", new),
            ("its carry input", carry),
            "f returns a carry of the init's structure, shapes and dtypes",
        )
        carry = new
        ys.append(y)
    if reverse:
        ys.reverse()
    if not ys:  # no steps: the ys' shapes from an abstract trace of one step
        avals = [api._aval(api.asvalue(v, "scan")) for v in leaves]
        x0 = pytree.unflatten(x_tree, [Spec(AVal(a.shape[1:], a.dtype)) for a in avals])
        y_leaves, y_tree = pytree.flatten(_abstract(f, (init, x0))[1])
        empty = [api.asvalue(np.zeros((0, *y.shape), y.dtype.np)) for y in y_leaves]
        return carry, pytree.unflatten(y_tree, empty)
    y_trees = [pytree.flatten(y) for y in ys]
    stacked = [composite.stack([t[0][k] for t in y_trees], 0) for k in range(len(y_trees[0][0]))]
    return carry, pytree.unflatten(y_trees[0][1], stacked)


def map_(f: Callable[[Any], Any], xs: Any) -> Any:
    """``f`` of each slice of ``xs`` along its leading axis, stacked, as ``jax.lax.map``
    (``pto.vmap`` batches instead of looping, and is usually what you want on the NPU).

    >>> import pypto as pto
    >>> pto.lax.map(lambda r: r.sum(), pto.ones((3, 4))).numpy()
    array([4., 4., 4.], dtype=float32)
    """
    return scan(lambda c, x: (c, f(x)), (), xs)[1]
