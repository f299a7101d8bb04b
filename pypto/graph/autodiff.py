"""Reverse-mode autodiff over the Tensor IR: ``vjp``, ``grad`` and ``value_and_grad``.

The derivative of a traced :class:`Func` is another Func, built by tracing a *joint* function:
evaluate the equations forward, then walk them backward applying each op's VJP rule (written
in pypto ops, registered in the op table). The backward graph is ordinary IR, so it optimizes,
lowers and compiles like a forward one. A replayed forward equation keeps its source line, and
the equations a VJP rule emits take the line of the equation it differentiates, so printed IR and
errors from lower levels name the user's own op (as JAX does). Integer and bool values get no
cotangent (JAX's float0); for such inputs ``vjp`` returns zeros and ``grad`` refuses them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pypto import dtypes as dt
from pypto.core.errors import DTypeError, TraceError, at_location
from pypto.core.passes import PassManager
from pypto.graph import interpret, passes, pytree
from pypto.graph.batching import vmap
from pypto.graph.ir import Atom, Eqn, Func, Lit, Var
from pypto.graph.tracer import Spec, trace
from pypto.ops import api
from pypto.ops import vjp as rules
from pypto.ops.table import OPS, AVal, Value


def _zeros(aval: AVal) -> Any:
    return api.broadcast_to(api.asvalue(_np_zero(aval.dtype)), aval.shape)


def _np_zero(d: dt.DType) -> Any:
    import numpy as np

    return np.zeros((), d.np)


@dataclass(frozen=True)
class Idiom:
    """A normalisation that autodiff differentiates whole (at the equation making ``out``).

    ``kind`` names its rule in :mod:`pypto.ops.vjp`; ``x`` is its input and ``axes`` the axes
    it normalises. For ``"softmax_matmul"`` the equation is ``out = probs @ v``, the only use of
    the softmax ``probs`` over its last axis.
    """

    kind: str
    x: Atom
    axes: tuple[int, ...]
    probs: Var | None = None


def idioms(f: Func) -> dict[Var, Idiom]:
    """The softmaxes and log_softmaxes of ``f``, by output, whose VJP applies whole.

    A softmax is ``e / sum(e, axes, keepdims)`` with ``e = exp(x - c)``, a log_softmax
    ``y - log(sum(exp(y), axes, keepdims))`` with ``y = x - c``, where ``c`` is constant along
    ``axes`` (the max, under ``stop_gradient``, as the composites write it): the result does not
    depend on ``c``, so nothing flows back to it. Each intermediate must be used only inside the
    idiom (and not be an output), so no other cotangent reaches it. A softmax over the last
    axis whose only use is the left operand of a matmul (attention's ``P @ V``) is found at the
    matmul: its rule then takes the row sums of ``g·P`` from the matmul's output instead.

    >>> import pypto as pto
    >>> from pypto.graph.tracer import trace
    >>> f = trace(lambda x: pto.softmax(x * 2.0), [pto.ones((2, 3))])[0]
    >>> [(i.kind, i.axes) for i in idioms(f).values()]
    [('softmax', (1,))]
    """
    defs = {e.out: e for e in f.eqns}
    uses = Counter(a for e in f.eqns for a in e.inputs if isinstance(a, Var))
    uses.update(o for o in f.outputs if isinstance(o, Var))
    users: dict[Var, Eqn] = {}
    for e in f.eqns:
        for a in e.inputs:
            if isinstance(a, Var):
                users[a] = e

    def made(a: Atom, op: str, n: int) -> Eqn | None:
        """The equation making ``a`` if it is ``op``'s and ``a`` has exactly ``n`` uses."""
        if not isinstance(a, Var):
            return None
        e = defs.get(a)
        return e if e is not None and e.op == op and uses[a] == n else None

    def shifted(y: Atom, n: int, axes: tuple[int, ...]) -> Atom | None:
        """``x`` if ``y = x - c`` (``n`` uses) with ``c`` constant along ``axes``."""
        sub = made(y, "sub", n)
        if sub is None:
            return None
        x, c = sub.inputs
        lead = len(x.aval.shape) - len(c.aval.shape)
        flat = all(i < lead or c.aval.shape[i - lead] == 1 for i in axes)
        same = x.aval.shape == y.aval.shape and x.aval.dtype is y.aval.dtype
        return x if flat and same else None

    found: dict[Var, Idiom] = {}
    for e in f.eqns:
        if e.op == "div":
            top, below = e.inputs
            total = made(below, "sum", 1)
            ex = made(top, "exp", 2)
            if total is None or ex is None or total.inputs[0] != top:
                continue
            axes, keep = total.kwargs["axes"], total.kwargs["keepdims"]
            x = shifted(ex.inputs[0], 1, axes) if keep else None
            if x is None:
                continue
            nd = len(e.out.aval.shape)
            mm = users.get(e.out) if uses[e.out] == 1 else None
            if (
                mm is not None
                and mm.op == "matmul"
                and mm.inputs[0] == e.out
                and nd >= 2
                and axes == (nd - 1,)
                and len(mm.inputs[1].aval.shape) >= 2
            ):
                found[mm.out] = Idiom("softmax_matmul", x, axes, e.out)
            else:
                found[e.out] = Idiom("softmax", x, axes)
        elif e.op == "sub":
            y, lg = e.inputs
            log = made(lg, "log", 1)
            total = made(log.inputs[0], "sum", 1) if log is not None else None
            if total is None or not total.kwargs["keepdims"]:
                continue
            ex = made(total.inputs[0], "exp", 1)
            x = (
                shifted(y, 2, total.kwargs["axes"])
                if ex is not None and ex.inputs[0] == y
                else None
            )
            if x is not None:
                found[e.out] = Idiom("log_softmax", x, total.kwargs["axes"])
    return found


def replay(f: Func, values: Sequence[Any], given: dict[Var, Any] | None = None) -> dict[Var, Any]:
    """Every value of ``f`` applied to ``values`` (one per parameter), by variable: each
    equation bound again on the current trace, except those whose output ``given`` supplies.
    Prints are not replayed (the forward pass printed them already)."""
    from pypto.core import dispatch, hints

    env: dict[Var, Any] = dict(zip(f.params, values, strict=True))
    for v, arr in f.consts:
        env[v] = api.asvalue(arr)
    for e in f.eqns:
        if given is not None and e.out in given:
            env[e.out] = given[e.out]
            continue
        if OPS[e.op].kind == "effect":
            continue
        with hints.hinted(e.hint), at_location(e.loc):
            ins = tuple(api.asvalue(a.value) if isinstance(a, Lit) else env[a] for a in e.inputs)
            env[e.out] = dispatch.bind(OPS[e.op], ins, e.kwargs)
    return env


def backward(f: Func, env: dict[Var, Any], cts: Sequence[Any]) -> list[Any | None]:
    """The cotangent of each parameter of ``f`` (``None``: nothing flows back to it), given
    the values ``env`` (:func:`replay`) and cotangents for the first ``len(cts)`` outputs
    (``None``: zero): the equations walked backward, each op's VJP rule applied (and each
    softmax idiom's)."""

    def read(a: Any) -> Any:
        return api.asvalue(a.value) if isinstance(a, Lit) else env[a]

    ct_env: dict[Var, Any] = {}
    for o, ct in zip(f.outputs[: len(cts)], cts, strict=True):
        if ct is not None and isinstance(o, Var) and o.aval.dtype.is_floating:
            ct_env[o] = ct if o not in ct_env else api.add(ct_env[o], ct)
    whole = idioms(f)
    for e in reversed(f.eqns):
        ct = ct_env.pop(e.out, None)
        if ct is None:
            continue
        idiom = whole.get(e.out)
        if idiom is not None:
            # a softmax or log_softmax (or a softmax into a matmul): its whole rule, from
            # its output; its intermediates get no cotangent, so the walk passes them by
            with at_location(e.loc):
                flows: list[tuple[Atom, Any]]
                if idiom.probs is None:
                    whole_rule = getattr(rules, idiom.kind)
                    flows = [(idiom.x, whole_rule(ct, env[e.out], idiom.axes))]
                else:
                    vv = e.inputs[1]
                    gx, gv = rules.softmax_matmul(ct, env[idiom.probs], read(vv), env[e.out])
                    flows = [(idiom.x, gx), (vv, gv)]
                for tgt, g in flows:
                    if isinstance(tgt, Var) and tgt.aval.dtype.is_floating:
                        ct_env[tgt] = g if tgt not in ct_env else api.add(ct_env[tgt], g)
            continue
        op = OPS[e.op]
        rule = op.rules.get("vjp")
        if rule is None:
            continue  # not differentiable: nothing flows back
        with at_location(e.loc):  # the rule's equations, and the sums of their cotangents
            ins = [read(a) for a in e.inputs]
            grads = rule(ct, *ins, out=env[e.out], **e.kwargs)
            for a, g in zip(e.inputs, grads, strict=True):
                if g is None or not isinstance(a, Var) or not a.aval.dtype.is_floating:
                    continue
                ct_env[a] = g if a not in ct_env else api.add(ct_env[a], g)
    return [ct_env.get(p) for p in f.params]


def backward_func(f: Func, n_out: int) -> Func:
    """The joint function ``(params..., cts for the first n_out outputs...) → (outs..., grads)``.

    One grad per parameter; parameters nobody differentiates through get zeros.
    """
    n_in = len(f.params)

    def joint(*vals: Any) -> Any:
        env = replay(f, vals[:n_in])
        grads = backward(f, env, vals[n_in:])
        outs = [api.asvalue(o.value) if isinstance(o, Lit) else env[o] for o in f.outputs]
        return (
            *outs,
            *(g if g is not None else _zeros(p.aval) for g, p in zip(grads, f.params, strict=True)),
        )

    args = [Spec(p.aval) for p in f.params] + [Spec(o.aval) for o in f.outputs[:n_out]]
    func, _, _ = trace(joint, args, name=f"{f.name}_vjp")
    # Cotangents nobody asked for (of literals, of integer inputs) die here, eager or staged.
    return PassManager(passes.SIMPLIFY).run(func)[0]


def vjp(fn: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """``(fn(*primals), vjp_fn)``; ``vjp_fn(ct)`` gives one cotangent per primal.

    With ``has_aux``, ``fn`` returns ``(out, aux)`` and the result is ``(out, vjp_fn, aux)``.

    >>> import pypto as pto
    >>> y, f_vjp = pto.vjp(pto.sin, pto.tensor(0.0))
    >>> float(f_vjp(pto.tensor(1.0))[0])
    1.0
    """
    func, out_tree, free = trace(fn, primals)
    prim_leaves, in_tree = pytree.flatten(tuple(primals))
    values = [api.asvalue(x) for x in prim_leaves] + list(free)
    outs = interpret.call(func, values)
    if has_aux:
        if out_tree.kind != "tuple" or len(out_tree.children) != 2:
            raise TraceError(
                f"has_aux=True needs fn to return a pair (out, aux), got structure {out_tree}",
                op="vjp",
            )
        main_tree, aux_tree = out_tree.children
    else:
        main_tree = out_tree
    n_out = main_tree.num_leaves
    cache: list[Func] = []

    def vjp_fn(ct: Any) -> tuple[Any, ...]:
        ct_leaves, ct_tree = pytree.flatten(ct)
        if ct_tree != main_tree:
            raise TraceError(
                f"cotangent structure {ct_tree} does not match the output structure {main_tree}",
                op="vjp",
            )
        cts = []
        for i, (c, o) in enumerate(zip(ct_leaves, func.outputs[:n_out], strict=True)):
            cv = api.asvalue(c, "vjp")
            if tuple(cv.shape) != o.aval.shape or cv.dtype is not o.aval.dtype:  # type: ignore[attr-defined]
                raise TraceError(
                    f"cotangent {i} is {AVal(tuple(cv.shape), cv.dtype)} but the output is "  # type: ignore[attr-defined]
                    f"{o.aval}",
                    op="vjp",
                    hint="pass cotangents with the outputs' shapes and dtypes",
                )
            cts.append(cv)
        if not cache:
            cache.append(backward_func(func, n_out))
        res = interpret.call(cache[0], values + cts)
        grads = res[len(func.outputs) : len(func.outputs) + len(prim_leaves)]
        return tuple(pytree.unflatten(in_tree, grads))

    if has_aux:
        main = pytree.unflatten(main_tree, outs[:n_out])
        aux = pytree.unflatten(aux_tree, outs[n_out:])
        return main, vjp_fn, aux
    return pytree.unflatten(out_tree, outs), vjp_fn


def _argnums(argnums: int | Sequence[int], nargs: int, op: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not isinstance(a, int) or not -nargs <= a < nargs:
            raise TraceError(
                f"argnums={argnums!r} is out of range for a call with {nargs} positional "
                f"argument{'s' if nargs != 1 else ''}",
                op=op,
                hint=f"use argument positions in [0, {nargs})",
            )
    return tuple(a % nargs for a in nums)


def value_and_grad(
    fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """A function returning ``(fn(*args), gradient)`` (``((value, aux), gradient)`` with aux).

    >>> import pypto as pto
    >>> v, g = pto.value_and_grad(lambda x: (x * x).sum())(pto.tensor([1.0, 2.0]))
    >>> float(v), g.numpy().tolist()
    (5.0, [2.0, 4.0])
    """
    single = isinstance(argnums, int)

    def wrapped(*args: Any) -> Any:
        nums = _argnums(argnums, len(args), "grad")
        diff = []
        for i in nums:
            leaves, tree = pytree.flatten(args[i])
            vals = []
            for leaf in leaves:
                v = api.asvalue(leaf, "grad")
                if not v.dtype.is_floating:  # type: ignore[attr-defined]
                    raise DTypeError(
                        f"grad with respect to argument {i} of integer/bool dtype "
                        f"{v.dtype} (shape {list(v.shape)})",  # type: ignore[attr-defined]
                        op="grad",
                        hint="differentiate with respect to float inputs; cast with .astype",
                    )
                vals.append(v)
            diff.append(pytree.unflatten(tree, vals))

        def g(*d: Any) -> Any:
            full = list(args)
            for i, v in zip(nums, d, strict=True):
                full[i] = v
            return fn(*full)

        res = vjp(g, *diff, has_aux=has_aux)
        out, f_vjp = res[0], res[1]
        out_leaves, _ = pytree.flatten(out)
        o = out_leaves[0] if len(out_leaves) == 1 else None
        if o is None or not isinstance(o, Value) or tuple(o.shape) != ():  # type: ignore[attr-defined]
            desc = (
                str(AVal(tuple(o.shape), o.dtype))  # type: ignore[attr-defined]
                if isinstance(o, Value)
                else f"a {type(out).__name__} of {len(out_leaves)} values"
            )
            raise TraceError(
                f"grad needs a scalar (0-d) output, but the function returned {desc}",
                op="grad",
                hint="reduce to a scalar (e.g. .sum() or .mean()), or use pto.vjp",
            )
        if not o.dtype.is_floating:  # type: ignore[attr-defined]
            raise DTypeError(f"grad of an output of dtype {o.dtype}", op="grad")  # type: ignore[attr-defined]
        grads = f_vjp(api.asvalue(_np_one(o.dtype)))  # type: ignore[attr-defined]
        grad_out = grads[0] if single else tuple(grads)
        if has_aux:
            return (out, res[2]), grad_out
        return out, grad_out

    wrapped.__name__ = f"value_and_grad_{getattr(fn, '__name__', 'f')}"
    return wrapped


def _np_one(d: dt.DType) -> Any:
    import numpy as np

    return np.ones((), d.np)


def grad(
    fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The gradient of a scalar-valued ``fn`` with respect to the ``argnums`` arguments.

    >>> import pypto as pto
    >>> pto.grad(lambda x: pto.exp(x).sum())(pto.tensor([0.0, 1.0])).numpy()
    array([1.      , 2.718282], dtype=float32)
    """
    vg = value_and_grad(fn, argnums, has_aux)

    def wrapped(*args: Any) -> Any:
        (value, g) = vg(*args)
        return (g, value[1]) if has_aux else g

    wrapped.__name__ = f"grad_{getattr(fn, '__name__', 'f')}"
    return wrapped


def _float_leaves(op: str, what: str, tree: Any, first: int = 0) -> tuple[list[Any], Any]:
    """The leaves of ``tree`` as values (``what`` ``first + i`` in messages), all floats."""
    leaves, structure = pytree.flatten(tree)
    vals = []
    for i, leaf in enumerate(leaves):
        v = api.asvalue(leaf, op)
        if not v.dtype.is_floating:  # type: ignore[attr-defined]
            raise DTypeError(
                f"{what} {first + i} is {api._aval(v)}: only float inputs have derivatives",
                op=op,
                hint="close over integer inputs (a lambda), or cast them with .astype",
            )
        vals.append(v)
    return vals, structure


def jvp(
    fn: Callable[..., Any],
    primals: Sequence[Any],
    tangents: Sequence[Any],
    has_aux: bool = False,
) -> Any:
    """``(fn(*primals), J·tangents)``: the forward-mode derivative of ``fn`` at ``primals``
    along ``tangents`` (one per primal, of its shape and dtype), as ``jax.jvp``; with
    ``has_aux=True`` ``fn`` returns ``(out, aux)`` and ``aux`` comes third.

    Computed as the transpose of the VJP: ``u ↦ Jᵀu`` is linear, so its own VJP applied to
    the tangents is ``J·t`` (two backward passes, no separate forward-mode rules).

    >>> import pypto as pto
    >>> y, t = pto.jvp(pto.sin, (pto.tensor(0.0),), (pto.tensor(2.0),))
    >>> float(y), float(t)
    (0.0, 2.0)
    """
    if not isinstance(primals, tuple | list) or not isinstance(tangents, tuple | list):
        raise TraceError(
            "primals and tangents must be tuples (one entry per argument of fn), got "
            f"{type(primals).__name__} and {type(tangents).__name__}",
            op="jvp",
            hint="e.g. pto.jvp(f, (x,), (t,))",
        )
    out, f_jvp, *aux = _linearize("jvp", fn, tuple(primals), has_aux)
    return (out, f_jvp(*tangents), *aux)


def linearize(fn: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """``(fn(*primals), f_jvp)`` with ``f_jvp(*tangents)`` the JVP at ``primals``, as
    ``jax.linearize``: the forward and backward graphs are traced once, then each call of
    ``f_jvp`` is one pass of the transposed VJP (see :func:`jvp`). With ``has_aux=True``
    ``fn`` returns ``(out, aux)`` and the result is ``(out, f_jvp, aux)``.

    >>> import pypto as pto
    >>> y, f_jvp = pto.linearize(pto.exp, pto.tensor(0.0))
    >>> float(f_jvp(pto.tensor(3.0)))
    3.0
    """
    return _linearize("linearize", fn, primals, has_aux)


def _linearize(
    op: str, fn: Callable[..., Any], primals: tuple[Any, ...], has_aux: bool = False
) -> Any:
    """``(out, f_jvp)``, or ``(out, f_jvp, aux)`` when ``fn`` returns ``(out, aux)``."""
    vals, tree = _float_leaves(op, "primal", primals)
    out, f_vjp, *aux = vjp(fn, *pytree.unflatten(tree, vals), has_aux=has_aux)
    o_leaves, o_tree = pytree.flatten(out)
    zero = pytree.unflatten(o_tree, [_zeros(api._aval(o)) for o in o_leaves])
    _, transpose = vjp(f_vjp, zero)

    def f_jvp(*tangents: Any) -> Any:
        t_vals, t_tree = _float_leaves(op, "tangent", tuple(tangents))
        if t_tree != tree:
            raise TraceError(f"tangents {t_tree} do not match the primals {tree}", op=op)
        for i, (p, t) in enumerate(zip(vals, t_vals, strict=True)):
            if tuple(p.shape) != tuple(t.shape) or p.dtype is not t.dtype:
                raise TraceError(
                    f"tangent {i} is {api._aval(t)} but its primal is {api._aval(p)}",
                    op=op,
                    hint="a tangent has its primal's shape and dtype",
                )
        (t_out,) = transpose(tuple(pytree.unflatten(t_tree, t_vals)))
        return t_out

    return (out, f_jvp, *aux)


def _mapped(fn: Callable[[Any], Any], aval: AVal, likes: Sequence[Any]) -> list[Any]:
    """``fn`` (returning one value per entry of ``likes``, of its shape) of each one-hot tensor
    of ``aval`` (row-major), each result stacked on a new axis 0: one batched pass (``vmap``)
    over the identity's rows."""
    import numpy as np

    n = int(np.prod(aval.shape, dtype=np.int64))
    if n == 0:  # no rows: vmap needs a batch, the result is empty
        return [api.asvalue(np.zeros((0, *v.shape), v.dtype.np)) for v in likes]
    eye = np.eye(n, dtype=aval.dtype.np).reshape((n, *aval.shape))
    return list(vmap(fn)(api.asvalue(eye)))


def _select(
    op: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    argnums: int | Sequence[int],
    has_aux: bool,
) -> Any:
    """``fn`` as a function of the float leaves of the ``argnums`` arguments alone, returning
    the tuple of its output's leaves (and its auxiliary output, with ``has_aux``); those
    leaves; and ``build(rows)``, which arranges one array per (output leaf, input leaf) pair
    (``rows[j][i]``) in JAX's Jacobian structure once ``f`` has run: the output's tree, each
    leaf the tree of the arguments (a tuple of them for a tuple ``argnums``)."""
    single = isinstance(argnums, int)
    nums = _argnums(argnums, len(args), op)
    leaves: list[Any] = []
    trees = []
    for i in nums:  # messages name the argument, and the leaf inside a pytree argument
        n = pytree.flatten(args[i])[1].num_leaves
        what, first = ("argument", i) if n == 1 else (f"argument {i}, leaf", 0)
        vals, tree = _float_leaves(op, what, (args[i],), first)
        leaves += vals
        trees.append(tree.children[0])
    in_tree = trees[0] if single else pytree.TreeDef("tuple", tuple(trees))
    out_tree: list[Any] = []

    def f(*vs: Any) -> Any:
        full = list(args)
        parts = pytree.unflatten(in_tree, list(vs))
        for k, i in enumerate(nums):
            full[i] = parts if single else parts[k]
        out = fn(*full)
        if has_aux:
            if not isinstance(out, tuple) or len(out) != 2:
                raise TraceError(
                    f"has_aux=True needs fn to return a pair (out, aux), got {type(out).__name__}",
                    op=op,
                )
            out, aux = out
        o_leaves, o_tree = pytree.flatten(out)
        for j, o in enumerate(o_leaves):
            if not isinstance(o, Value):
                raise TraceError(
                    f"{op} needs fn to return tensors (a pytree of them), got "
                    f"{type(o).__name__} at output {j}",
                    op=op,
                )
        out_tree[:] = [o_tree]
        return (tuple(o_leaves), aux) if has_aux else tuple(o_leaves)

    def build(rows: list[list[Any]]) -> Any:
        if single:
            per_out = [pytree.unflatten(in_tree, r) for r in rows]
        else:
            per_out = []
            for r in rows:
                it = iter(r)
                per_out.append(
                    tuple(
                        pytree.unflatten(t, [next(it) for _ in range(t.num_leaves)])
                        for t in in_tree.children
                    )
                )
        return pytree.unflatten(out_tree[0], per_out)

    return f, leaves, build


def jacrev(
    fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The Jacobian of ``fn`` with respect to argument ``argnums`` (a tuple of them for a
    tuple), as ``jax.jacrev``: the VJP mapped (``pto.vmap``) over the rows of the identity,
    one batched backward pass per output.

    Arguments and outputs may be pytrees: the result has the output's structure, and each of
    its leaves the argument's, an array of shape ``out_leaf.shape + x_leaf.shape``. With
    ``has_aux=True``, ``fn`` returns ``(out, aux)`` and the Jacobian comes back as
    ``(jacobian, aux)``.

    >>> import pypto as pto
    >>> pto.jacrev(lambda x: x * x)(pto.tensor([1.0, 3.0])).numpy()
    array([[2., 0.],
           [0., 6.]], dtype=float32)
    >>> params = {"a": pto.tensor(2.0), "b": pto.tensor(5.0)}
    >>> j = pto.jacrev(lambda p: {"y": p["a"] * p["b"]})(params)
    >>> float(j["y"]["a"]), float(j["y"]["b"])
    (5.0, 2.0)
    """
    return _jacrev(fn, argnums, has_aux, "jacrev")


def jacobian(
    fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """``jax.jacobian``, which is :func:`jacrev`.

    >>> import pypto as pto
    >>> pto.jacobian(lambda x: 3.0 * x)(pto.ones(2)).numpy()
    array([[3., 0.],
           [0., 3.]], dtype=float32)
    """
    return _jacrev(fn, argnums, has_aux, "jacobian")


def linear_transpose(fn: Callable[..., Any], *primals: Any) -> Callable[..., Any]:
    """The transpose of the linear function ``fn``, as ``jax.linear_transpose``: ``primals``
    give only the arguments' shapes and dtypes (tensors, arrays or ``pto.ShapeDtypeStruct``
    stand-ins); the result maps an output cotangent to a tuple of argument cotangents. It
    is ``fn``'s VJP at zero, which for a linear ``fn`` is its transpose everywhere (``fn``
    must be linear: a nonlinear one gets its VJP at zero).

    >>> import pypto as pto
    >>> t = pto.linear_transpose(lambda x: x.sum(0) * 2.0, pto.ShapeDtypeStruct((2, 3), "float32"))
    >>> t(pto.ones(3))[0].numpy()
    array([[2., 2., 2.],
           [2., 2., 2.]], dtype=float32)
    """
    leaves, tree = pytree.flatten(tuple(primals))
    zeros = [_zeros(AVal(tuple(x.shape), _dtype_of(x))) for x in leaves]
    _, f_vjp = vjp(fn, *pytree.unflatten(tree, zeros))
    return f_vjp


def _dtype_of(x: Any) -> dt.DType:
    d = x.dtype
    return d if isinstance(d, dt.DType) else dt.from_numpy(d)


def _jacrev(
    fn: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool, op: str
) -> Callable[..., Any]:
    def jac(*args: Any) -> Any:
        f, xs, build = _select(op, fn, args, argnums, has_aux)
        outs, f_vjp, *aux = vjp(f, *xs, has_aux=has_aux)
        zeros = [_zeros(api._aval(o)) for o in outs]
        rows = []
        for j, out in enumerate(outs):  # one batched backward pass per output leaf

            def row(ct: Any, j: int = j) -> Any:
                return f_vjp(tuple(ct if k == j else z for k, z in enumerate(zeros)))

            grads = _mapped(row, api._aval(out), xs)  # [out.size, *x.shape] for each x
            rows.append([api.reshape(g, (*out.shape, *x.shape)) for g, x in zip(grads, xs)])
        res = build(rows)
        return (res, aux[0]) if has_aux else res

    jac.__name__ = f"jacrev_{getattr(fn, '__name__', 'f')}"
    return jac


def jacfwd(
    fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The Jacobian of ``fn`` with respect to argument ``argnums`` (a tuple of them for a
    tuple), as ``jax.jacfwd``: the linearized ``fn`` (:func:`linearize`) mapped over the
    columns of the identity, one batched pass per argument leaf. Structure and ``has_aux``
    as :func:`jacrev`.

    >>> import pypto as pto
    >>> pto.jacfwd(lambda x: x.sum(keepdims=True) * x[0])(pto.tensor([1.0, 3.0])).numpy()
    array([[5., 1.]], dtype=float32)
    """
    return _jacfwd(fn, argnums, has_aux, "jacfwd")


def _jacfwd(
    fn: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool, op: str
) -> Callable[..., Any]:
    def jac(*args: Any) -> Any:
        f, xs, build = _select(op, fn, args, argnums, has_aux)
        outs, f_jvp, *aux = _linearize(op, f, tuple(xs), has_aux)
        zeros = [_zeros(api._aval(x)) for x in xs]
        cols = []  # cols[i][j]: output j's columns for argument leaf i
        for i, x in enumerate(xs):  # the other arguments' tangents are zero

            def along(t: Any, i: int = i) -> Any:
                return f_jvp(*(t if k == i else z for k, z in enumerate(zeros)))

            mapped = _mapped(along, api._aval(x), outs)  # [x.size, *out.shape]: column first
            cols.append(
                [
                    api.reshape(
                        api.transpose(c, (*range(1, len(o.shape) + 1), 0)), (*o.shape, *x.shape)
                    )
                    for c, o in zip(mapped, outs)
                ]
            )
        res = build([[cols[i][j] for i in range(len(xs))] for j in range(len(outs))])
        return (res, aux[0]) if has_aux else res

    jac.__name__ = f"jacfwd_{getattr(fn, '__name__', 'f')}"
    return jac


def hessian(
    fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The Hessian of a scalar-valued ``fn``: ``jacfwd(jacrev(fn))``, as ``jax.hessian``, of
    shape ``x.shape + x.shape`` for a tensor argument; for pytree arguments or a tuple of
    ``argnums``, the argument's structure nested in itself (``h[i][j]`` of shape
    ``x_i.shape + x_j.shape``).

    >>> import pypto as pto
    >>> pto.hessian(lambda x: (x ** 3).sum())(pto.tensor([1.0, 2.0])).numpy()
    array([[ 6.,  0.],
           [ 0., 12.]], dtype=float32)
    >>> h = pto.hessian(lambda a, b: (a * a * b).sum(), argnums=(0, 1))
    >>> [[float(v) for v in row] for row in h(pto.tensor(3.0), pto.tensor(2.0))]
    [[4.0, 6.0], [6.0, 0.0]]
    """
    h = _jacfwd(_jacrev(fn, argnums, has_aux, "hessian"), argnums, has_aux, "hessian")
    h.__name__ = f"hessian_{getattr(fn, '__name__', 'f')}"
    return h
