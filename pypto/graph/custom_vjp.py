"""``pto.custom_vjp`` and ``pto.custom_jvp``: functions whose derivative is written by hand,
as ``jax.custom_vjp`` and ``jax.custom_jvp``.

Eagerly, and under a transform before :meth:`custom_vjp.defvjp`, the function simply runs.
With a backward defined, a traced call is recorded as ``custom_vjp_call`` equations (one per
result) naming the function, so :mod:`pypto.graph.autodiff` applies ``bwd`` through the op's
VJP rule instead of differentiating the body: the body may hold ops with no VJP at all (a
hand-written kernel). Forward values come from the body, traced once per signature; the
``inline`` pass splices it in before tiling, so lower levels see ordinary ops.

A ``custom_jvp`` function is the same call with its backward derived from the JVP rule, as
JAX derives it: the rule's tangent output is linear in the tangents, so its VJP with respect
to them (pypto's reverse mode applied to the rule) is the function's VJP, and ``pto.jvp``,
the transpose of that, gives back the rule's tangent. Arguments at ``nondiff_argnums``
(functions, numbers, strings: anything hashable but a tensor) are bound once per value: each
binding is a function of its own with the other arguments.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core import dispatch, hints
from pypto.core.errors import SourceLoc, TraceError
from pypto.graph import interpret, pytree
from pypto.graph.ir import Atom, Func, Lit, Var
from pypto.graph.tracer import Spec, trace
from pypto.ops import api
from pypto.ops.custom_vjp_call import CALLS, CUSTOM_VJP_CALL, CallName
from pypto.ops.table import OPS, AVal, Cost, Value

__all__ = ["closure_convert", "custom_gradient", "custom_jvp", "custom_vjp"]


def _loc(fn: Any) -> SourceLoc | None:
    code = getattr(fn, "__code__", None)
    return SourceLoc(code.co_filename, code.co_firstlineno) if code is not None else None


_ISSUED: set[str] = set()
"""Every name given out: a name is never reused, even after its function is gone, so an
old graph's text cannot name a newer function."""


def _unique_name(fn: Callable[..., Any]) -> str:
    base = re.sub(r"\W", "", getattr(fn, "__name__", "f")) or "f"
    name, k = base, 0
    while name in _ISSUED:
        k += 1
        name = f"{base}_{k}"
    _ISSUED.add(name)
    return name


class Named:
    """A callable standing for a user's function ``fn``: it keeps ``fn``'s name and code,
    which name the function in the IR and place its errors. (Slots: ``functools.
    update_wrapper`` copies a wrapped function's ``__dict__`` into its wrapper.)"""

    __slots__ = ("__code__", "__name__")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.__name__ = getattr(fn, "__name__", "f")
        self.__code__ = getattr(fn, "__code__", None)


class custom_vjp:
    """Give ``fn`` a hand-written backward: ``f.defvjp(fwd, bwd)``, as ``jax.custom_vjp``.

    ``fwd(*args)`` returns ``(out, residuals)`` (residuals: any pytree of tensors);
    ``bwd(residuals, g)`` returns a tuple with one cotangent per argument (``None`` for zero),
    each of that argument's shape and dtype. Arguments are tensors, passed positionally.

    >>> import pypto as pto
    >>> @pto.custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> def fwd(x):
    ...     return x, None
    >>> def bwd(res, g):
    ...     return (pto.clip(g, -1.0, 1.0),)
    >>> clip_gradient.defvjp(fwd, bwd)
    >>> pto.grad(lambda x: (3.0 * clip_gradient(x)).sum())(pto.ones(2)).numpy()
    array([1., 1.], dtype=float32)
    """

    kind = "custom_vjp"

    def __init__(self, fn: Callable[..., Any], nondiff_argnums: tuple[int, ...] = ()) -> None:
        if not callable(fn):
            raise TraceError(f"{self.kind} needs a function, got {type(fn).__name__}", op=self.kind)
        if isinstance(nondiff_argnums, int):
            nondiff_argnums = (nondiff_argnums,)
        bad = [i for i in nondiff_argnums if not isinstance(i, int) or i < 0]
        if bad or len(set(nondiff_argnums)) != len(nondiff_argnums):
            raise TraceError(
                f"{self.kind}: nondiff_argnums={nondiff_argnums!r} must be distinct "
                "non-negative argument positions",
                op=self.kind,
                hint="e.g. nondiff_argnums=(0,) for a function's first argument",
            )
        self.fn = fn
        self.nondiff_argnums: tuple[int, ...] = tuple(sorted(nondiff_argnums))
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.name: str = CallName(_unique_name(fn), self)
        self._bodies: dict[tuple[AVal, ...], tuple[Func, pytree.TreeDef]] = {}
        self._bound: dict[tuple[Any, ...], custom_vjp] = {}
        functools.update_wrapper(self, fn)
        CALLS[str(self.name)] = self  # a plain key: the CallName would keep self alive

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        """Set the forward ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, g)``
        (``bwd(*nondiff_args, residuals, g)`` with ``nondiff_argnums``)."""
        for role, f in (("fwd", fwd), ("bwd", bwd)):
            if not callable(f):
                raise TraceError(
                    f"defvjp of {self.name}: {role} must be a function, got {type(f).__name__}",
                    op="custom_vjp",
                    hint="call f.defvjp(f_fwd, f_bwd) with the two functions",
                )
        self.fwd, self.bwd = fwd, bwd
        self._bound.clear()

    def _defined(self) -> bool:
        """Whether the derivative rule is set (before that, the function simply runs)."""
        return self.bwd is not None

    def _bind(self, static: tuple[Any, ...]) -> custom_vjp:
        """The function of the other arguments with ``static`` at ``nondiff_argnums``."""
        assert self.fwd is not None and self.bwd is not None
        fwd, bwd, pos = self.fwd, self.bwd, self.nondiff_argnums
        out = custom_vjp(_Partial(self.fn, pos, static))
        out.defvjp(_Partial(fwd, pos, static), _Leading(bwd, static))
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TraceError(
                f"{self.name} called with keyword arguments {sorted(kwargs)}",
                op=self.kind,
                hint=f"pass the arguments of a {self.kind} function positionally",
            )
        if not self._defined() or dispatch.is_eager():
            # Nothing to record: eager values have no tape, and without a rule autodiff
            # differentiates the body like any other code.
            return self.fn(*args)
        if self.nondiff_argnums:
            return self._call_bound(args)
        vals = []
        for i, a in enumerate(args):
            if a is None or isinstance(a, tuple | list | dict):
                raise TraceError(
                    f"argument {i} of {self.name} is a {type(a).__name__}; "
                    f"a {self.kind} function takes tensors",
                    op=self.kind,
                    hint="pass the leaves as separate arguments, or name the argument in "
                    "nondiff_argnums",
                )
            vals.append(api.asvalue(a, self.name))
        avals = tuple(AVal(tuple(v.shape), v.dtype) for v in vals)  # type: ignore[attr-defined]
        body, out_tree = self.body(avals)
        n = len(body.outputs)
        outs = [dispatch.bind(CUSTOM_VJP_CALL, tuple(vals), self.params(i, n)) for i in range(n)]
        return pytree.unflatten(out_tree, outs)

    def _call_bound(self, args: tuple[Any, ...]) -> Any:
        pos = self.nondiff_argnums
        if pos[-1] >= len(args):
            raise TraceError(
                f"{self.name} has nondiff_argnums={pos} but was called with {len(args)} "
                f"argument{'s' if len(args) != 1 else ''}",
                op=self.kind,
            )
        static = tuple(args[i] for i in pos)
        for i, a in zip(pos, static, strict=True):
            if isinstance(a, Value | np.ndarray):
                raise TraceError(
                    f"argument {i} of {self.name} is a tensor at a nondiff_argnums position",
                    op=self.kind,
                    hint="pass tensors as ordinary arguments (the rule may give them no "
                    "derivative); nondiff_argnums are for functions and Python values",
                )
        key = (len(args), *static)
        try:
            hit = self._bound.get(key)
        except TypeError:
            raise TraceError(
                f"argument {pos[_unhashable(static)]} of {self.name} at a nondiff_argnums "
                "position is not hashable",
                op=self.kind,
                hint="make it hashable (a tuple rather than a list), or pass it as an "
                "ordinary tensor argument",
            ) from None
        if hit is None:
            hit = self._bound[key] = self._bind(static)
        return hit(*(a for i, a in enumerate(args) if i not in pos))

    def params(self, result: int, n: int) -> dict[str, Any]:
        return {"fn": self.name} if n == 1 else {"fn": self.name, "result": result}

    def body(self, avals: tuple[AVal, ...]) -> tuple[Func, pytree.TreeDef]:
        """The traced body for arguments of ``avals`` and its output structure (cached)."""
        hit = self._bodies.get(avals)
        if hit is None:
            # the body is shared by every call: a pto.hint around one call is not its own
            with hints.replaced(()):
                func, out_tree, free = trace(self.fn, [Spec(a) for a in avals], name=self.name)
            if free:
                self._closes_over(func, out_tree, free)
            hit = self._bodies[avals] = (func, out_tree)
        return hit

    def _closes_over(self, func: Func, out_tree: pytree.TreeDef, free: list[Any]) -> None:
        """The body read values of an enclosing trace (``free``, its last parameters)."""
        raise TraceError(
            f"custom_vjp function {self.name} closes over a value traced by an enclosing transform",
            op="custom_vjp",
            loc=_loc(self.fn),
            hint="pass the value as an argument instead",
        )

    # -- the protocol of pypto.ops.custom_vjp_call
    def out_aval(self, avals: tuple[AVal, ...], result: int) -> AVal:
        return self.body(avals)[0].outputs[result].aval

    def interpret(self, arrays: tuple[np.ndarray, ...], result: int) -> np.ndarray:
        avals = tuple(AVal(a.shape, _dtype_of(a)) for a in arrays)
        return interpret.run(self.body(avals)[0], arrays)[result]

    def jax(self, args: tuple[Any, ...], result: int) -> Any:
        import jax.numpy as jnp

        avals = tuple(AVal(tuple(a.shape), _dtype_of(a)) for a in args)
        body = self.body(avals)[0]
        env: dict[Var, Any] = dict(zip(body.params, args, strict=True))
        for v, arr in body.consts:
            env[v] = jnp.asarray(arr)

        def read(a: Atom) -> Any:
            return jnp.asarray(a.value) if isinstance(a, Lit) else env[a]

        for e in body.eqns:
            env[e.out] = OPS[e.op].jax_impl(*(read(a) for a in e.inputs), **e.kwargs)  # type: ignore[misc]
        return read(body.outputs[result])

    def cost(self, avals: tuple[AVal, ...], result: int) -> Cost:
        body = self.body(avals)[0]
        out = body.outputs[result].aval
        by_unit: dict[str, int] = {}
        if result == 0:  # the body's work is counted once, on the first result
            for e in body.eqns:
                c = OPS[e.op].cost_rule(  # type: ignore[misc]
                    *(a.aval for a in e.inputs), out=e.out.aval, **e.kwargs
                )
                by_unit[c.unit] = by_unit.get(c.unit, 0) + c.flops
        unit = max(by_unit, key=lambda u: by_unit[u], default="vector")
        return Cost(sum(by_unit.values()), unit, sum(a.nbytes for a in avals), out.nbytes)

    def vjp(self, ct: Any, args: tuple[Any, ...], result: int) -> tuple[Any, ...]:
        if self.fwd is None or self.bwd is None:
            raise TraceError(f"{self.name} has no backward: call defvjp first", op="grad")
        avals = tuple(AVal(tuple(a.shape), a.dtype) for a in args)
        body, out_tree = self.body(avals)
        res = self._residuals(args, body, out_tree)
        # One equation per result: the others' cotangents are zero here (bwd is linear in g).
        cts = [ct if i == result else _zeros(o.aval) for i, o in enumerate(body.outputs)]
        # a value bwd closes over that another trace made (the forward's, say) would become a
        # parameter of the backward's graph that nobody passes: refuse it by name
        with _no_lifted(
            f"bwd of custom_vjp function {self.name}",
            "not one of its residuals",
            "custom_vjp",
            _loc(self.bwd),
            "return the value among fwd's residuals and take it from there",
        ):
            grads = self.bwd(res, pytree.unflatten(out_tree, cts))
        return self._check_cotangents(grads, args)

    def _residuals(self, args: tuple[Any, ...], body: Func, out_tree: pytree.TreeDef) -> Any:
        assert self.fwd is not None
        r = self.fwd(*args)
        if not isinstance(r, tuple) or len(r) != 2:
            raise TraceError(
                f"fwd of custom_vjp function {self.name} must return a pair "
                f"(output, residuals), got {type(r).__name__}",
                op="custom_vjp",
                loc=_loc(self.fwd),
            )
        leaves, tree = pytree.flatten(r[0])
        got = [AVal(tuple(x.shape), x.dtype) if isinstance(x, Value) else None for x in leaves]  # type: ignore[attr-defined]
        want = [o.aval for o in body.outputs]
        if tree != out_tree or got != want:
            raise TraceError(
                f"fwd of custom_vjp function {self.name} returns {_avals(got, tree)} but "
                f"{self.name} returns {_avals(want, out_tree)}",
                op="custom_vjp",
                loc=_loc(self.fwd),
                hint="fwd must return (f(*args), residuals)",
            )
        return r[1]

    def _check_cotangents(
        self, grads: Any, args: tuple[Any, ...], rule: Callable[..., Any] | None = None
    ) -> tuple[Any, ...]:
        """``grads`` as one cotangent (or None) per argument, checked against the arguments;
        errors name ``rule`` (``bwd`` by default) and its line."""
        rule = rule if rule is not None else self.bwd
        who = (
            f"bwd of custom_vjp function {self.name}"
            if rule is self.bwd
            else f"the gradient function of {self.kind} function {self.name}"
        )
        where = _loc(rule)
        hint = "return a tuple with one cotangent per input, of its shape and dtype (None: zero)"
        if not isinstance(grads, tuple | list) or len(grads) != len(args):
            got = (
                f"{len(grads)} cotangent{'s' if len(grads) != 1 else ''}"
                if isinstance(grads, tuple | list)
                else f"a {type(grads).__name__}"
            )
            raise TraceError(
                f"{who} returned {got} for its {len(args)} input{'s' if len(args) != 1 else ''}",
                op="custom_vjp",
                loc=where,
                hint=hint,
            )
        out: list[Any] = []
        for i, (g, a) in enumerate(zip(grads, args, strict=True)):
            if g is None:
                out.append(None)
                continue
            want = AVal(tuple(a.shape), a.dtype)
            v = api.asvalue(g, self.name) if not isinstance(g, Value) else g
            have = AVal(tuple(v.shape), v.dtype)  # type: ignore[attr-defined]
            if have != want:
                raise TraceError(
                    f"{who}: returned a cotangent of {have} for input {i}, which is {want}",
                    op="custom_vjp",
                    loc=where,
                    hint=hint,
                )
            out.append(v if want.dtype.is_floating else None)
        return tuple(out)

    def __repr__(self) -> str:
        return f"<pto.custom_vjp {self.name}>"


class custom_gradient(custom_vjp):
    """``fun(*args)`` returns ``(out, vjp_fn)``; the function returns ``out``, and its
    backward is ``vjp_fn(g)``, a tuple with one cotangent per argument, as
    ``jax.custom_gradient``. ``vjp_fn`` may close over ``fun``'s intermediate values (the
    backward pass runs ``fun`` again; under ``jit`` CSE merges that with the forward).

    >>> import pypto as pto
    >>> @pto.custom_gradient
    ... def f(x):
    ...     return x ** 2, lambda g: (g * x,)
    >>> float(f(pto.tensor(3.0))), float(pto.grad(f)(pto.tensor(3.0)))
    (9.0, 3.0)
    """

    kind = "custom_gradient"

    def __init__(self, fun: Callable[..., Any]) -> None:
        if not callable(fun):
            raise TraceError(
                f"custom_gradient needs a function, got {type(fun).__name__}",
                op="custom_gradient",
            )
        self.fun = fun
        super().__init__(_Primal(fun))

    def _defined(self) -> bool:
        return True

    def vjp(self, ct: Any, args: tuple[Any, ...], result: int) -> tuple[Any, ...]:
        avals = tuple(AVal(tuple(a.shape), a.dtype) for a in args)
        body, out_tree = self.body(avals)
        cts = [ct if i == result else _zeros(o.aval) for i, o in enumerate(body.outputs)]
        _, rule = _pair(self.fun, self.fun(*args), self.name)
        with _no_lifted(
            f"the gradient function of custom_gradient function {self.name}",
            "",
            "custom_gradient",
            _loc(rule),
            "compute what it needs inside the function, or pass it as an argument",
        ):
            grads = rule(pytree.unflatten(out_tree, cts))
        if not isinstance(grads, tuple | list) and len(args) == 1:
            grads = (grads,)  # (TensorFlow's form for one argument)
        return self._check_cotangents(grads, args, rule)

    def __repr__(self) -> str:
        return f"<pto.custom_gradient {self.name}>"


def _pair(fun: Callable[..., Any], r: Any, name: str) -> tuple[Any, Callable[..., Any]]:
    if not isinstance(r, tuple) or len(r) != 2 or not callable(r[1]):
        raise TraceError(
            f"custom_gradient function {name} must return a pair (out, vjp_fn), got "
            f"{type(r).__name__}",
            op="custom_gradient",
            loc=_loc(fun),
            hint="return the value and a function of its cotangent: (y, lambda g: (...,))",
        )
    return r[0], r[1]


class _Primal(Named):
    """The value alone of a ``custom_gradient`` function."""

    __slots__ = ("fun",)

    def __init__(self, fun: Callable[..., Any]) -> None:
        super().__init__(fun)
        self.fun = fun

    def __call__(self, *args: Any) -> Any:
        return _pair(self.fun, self.fun(*args), self.__name__)[0]


def closure_convert(fun: Callable[..., Any], *example_args: Any) -> tuple[Any, list[Any]]:
    """``(converted, consts)``: ``fun`` with the values it reads from enclosing traces
    (weights a transform is differentiating, say) hoisted into arguments, as
    ``jax.closure_convert``. ``converted(*args, *consts)`` computes ``fun(*args)`` for
    arguments structured and typed like ``example_args``; it is what a ``custom_vjp``
    taking a function through ``nondiff_argnums`` needs, so the hoisted values get their
    cotangents. Outside any trace ``consts`` is empty.

    >>> import pypto as pto
    >>> def outer(w):
    ...     g, consts = pto.closure_convert(lambda x: x * w, pto.ones(2))
    ...     return len(consts), g(pto.ones(2), *consts)
    >>> n, y = outer(pto.tensor([2.0, 3.0]))
    >>> n, y.numpy()
    (0, array([2., 3.], dtype=float32))
    >>> pto.grad(lambda w: outer(w)[1].sum())(pto.tensor([2.0, 3.0])).numpy()
    array([1., 1.], dtype=float32)
    """
    func, out_tree, free = trace(fun, example_args)
    in_tree = pytree.flatten(tuple(example_args))[1]
    n = len(free)

    def converted(*args_and_consts: Any) -> Any:
        split = len(args_and_consts) - n
        args, consts = args_and_consts[:split], args_and_consts[split:]
        leaves, tree = pytree.flatten(tuple(args))
        if tree != in_tree or split < 0:
            raise TraceError(
                f"the closure-converted {getattr(fun, '__name__', 'function')} takes "
                f"arguments structured as {in_tree} and {n} hoisted values, got {tree}",
                op="closure_convert",
                hint="pass the example arguments' structure, then the returned consts",
            )
        vals = [api.asvalue(x, "closure_convert") for x in (*leaves, *consts)]
        return pytree.unflatten(out_tree, interpret.call(func, vals))

    converted.__name__ = getattr(fun, "__name__", "f")
    return converted, list(free)


class custom_jvp(custom_vjp):
    """Give ``fn`` a hand-written JVP: ``f.defjvp(jvp)``, as ``jax.custom_jvp``.

    ``jvp(primals, tangents)`` takes two tuples (one entry per argument) and returns
    ``(out, tangent_out)``, the tangent linear in ``tangents`` and shaped like ``out``.
    ``f.defjvps(*jvps)`` gives one rule per argument instead, ``jvp_i(t_i, out, *args)``,
    the results summed (``None``: the argument's tangent contributes nothing). Arguments at
    ``nondiff_argnums`` come first: ``jvp(*nondiff_args, primals, tangents)``.

    Forward values come from ``fn``. ``grad`` and ``vjp`` transpose the rule (its VJP with
    respect to the tangents), and ``jvp`` transposes that back: the rule's tangent is what
    every mode sees, and the body is never differentiated.

    >>> import pypto as pto
    >>> @pto.custom_jvp
    ... def softplus(x):
    ...     return pto.log1p(pto.exp(x))
    >>> @softplus.defjvp
    ... def softplus_jvp(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return softplus(x), pto.sigmoid(x) * t
    >>> pto.grad(lambda x: softplus(x).sum())(pto.tensor([0.0, 200.0])).numpy()
    array([0.5, 1. ], dtype=float32)
    """

    kind = "custom_jvp"

    def __init__(self, fn: Callable[..., Any], nondiff_argnums: tuple[int, ...] = ()) -> None:
        super().__init__(fn, nondiff_argnums)
        self.jvp_rule: Callable[..., Any] | None = None

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        raise TraceError(
            f"{self.name} is a custom_jvp function: give it a JVP rule",
            op="custom_jvp",
            hint="f.defjvp(jvp) with jvp(primals, tangents) -> (out, tangent_out), or use "
            "pto.custom_vjp for a hand-written backward",
        )

    def defjvp(self, jvp: Callable[..., Any], symbolic_zeros: bool = False) -> Callable[..., Any]:
        """Set ``jvp(primals, tangents) -> (out, tangent_out)``; returns ``jvp`` (a
        decorator)."""
        if not callable(jvp):
            raise TraceError(
                f"defjvp of {self.name}: jvp must be a function, got {type(jvp).__name__}",
                op="custom_jvp",
                hint="call f.defjvp(f_jvp) with jvp(primals, tangents) -> (out, tangent_out)",
            )
        if symbolic_zeros:
            raise TraceError(
                f"defjvp of {self.name}: symbolic_zeros=True is not supported",
                op="custom_jvp",
                hint="zero tangents are passed as zero tensors; drop symbolic_zeros",
            )
        self.jvp_rule = jvp
        self._bound.clear()
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """One rule per argument, ``jvp_i(t_i, out, *args)`` (``None``: no contribution);
        the function's tangent is their sum."""
        n = len(jvps)
        for i, f in enumerate(jvps):
            if f is not None and not callable(f):
                raise TraceError(
                    f"defjvps of {self.name}: rule {i} must be a function or None, got "
                    f"{type(f).__name__}",
                    op="custom_jvp",
                )

        def jvp(*args: Any) -> tuple[Any, Any]:
            static, (primals, tangents) = args[:-2], args[-2:]
            if len(primals) != n:
                raise TraceError(
                    f"defjvps of {self.name} has {n} rule{'s' if n != 1 else ''} for "
                    f"{len(primals)} argument{'s' if len(primals) != 1 else ''}",
                    op="custom_jvp",
                    hint="give one rule (or None) per differentiable argument",
                )
            out = self.fn(*_merge(self.nondiff_argnums, static, primals))
            outs, tree = pytree.flatten(out)
            total: list[Any] = [None] * len(outs)
            for i, (f, t) in enumerate(zip(jvps, tangents, strict=True)):
                if f is None:
                    continue
                part, ptree = pytree.flatten(f(t, out, *primals))
                if ptree != tree:
                    raise TraceError(
                        f"defjvps of {self.name}: rule {i} returns {ptree}, the function {tree}",
                        op="custom_jvp",
                        loc=_loc(f),
                    )
                total = [
                    p if a is None else api.add(a, p) for a, p in zip(total, part, strict=True)
                ]
            zero = [_zeros(AVal(tuple(o.shape), o.dtype)) for o in outs]
            return out, pytree.unflatten(
                tree, [z if a is None else a for a, z in zip(total, zero, strict=True)]
            )

        self.defjvp(jvp)

    def _defined(self) -> bool:
        return self.jvp_rule is not None

    def _bind(self, static: tuple[Any, ...]) -> custom_vjp:
        assert self.jvp_rule is not None
        out = custom_jvp(_Partial(self.fn, self.nondiff_argnums, static))
        out.defjvp(_Leading(self.jvp_rule, static))
        return out

    def vjp(self, ct: Any, args: tuple[Any, ...], result: int) -> tuple[Any, ...]:
        from pypto.graph import autodiff  # (autodiff reaches this module through the op table)

        if self.jvp_rule is None:
            raise TraceError(f"{self.name} has no JVP rule: call defjvp first", op="grad")
        rule = self.jvp_rule
        avals = tuple(AVal(tuple(a.shape), a.dtype) for a in args)
        body, out_tree = self.body(avals)
        want = [o.aval for o in body.outputs]
        where = _loc(rule)

        def tangent_out(*tangents: Any) -> list[Any]:
            r = rule(tuple(args), tuple(tangents))
            if not isinstance(r, tuple) or len(r) != 2:
                raise TraceError(
                    f"the JVP rule of custom_jvp function {self.name} must return a pair "
                    f"(out, tangent_out), got {type(r).__name__}",
                    op="custom_jvp",
                    loc=where,
                )
            for role, tree in (("output", r[0]), ("tangent", r[1])):
                leaves, t = pytree.flatten(tree)
                got = [_aval_of(x) for x in leaves]
                if t != out_tree or got != want:
                    raise TraceError(
                        f"the JVP rule of custom_jvp function {self.name} returns the "
                        f"{role} {_avals(got, t)} but {self.name} returns "
                        f"{_avals(want, out_tree)}",
                        op="custom_jvp",
                        loc=where,
                        hint="return (f(*primals), tangent) with the tangent shaped and typed "
                        "like the output",
                    )
            return [api.asvalue(x) for x in pytree.flatten(r[1])[0]]

        zeros = tuple(_zeros(a) for a in avals)
        cts = [ct if i == result else _zeros(o.aval) for i, o in enumerate(body.outputs)]
        with _no_lifted(
            f"the JVP rule of custom_jvp function {self.name}",
            "",
            "custom_jvp",
            where,
            "pass the value as an argument of the function",
        ):
            _, f_vjp = autodiff.vjp(tangent_out, *zeros)
        grads = f_vjp(cts)
        return tuple(g if a.dtype.is_floating else None for g, a in zip(grads, avals, strict=True))

    def __repr__(self) -> str:
        return f"<pto.custom_jvp {self.name}>"


@contextlib.contextmanager
def _no_lifted(who: str, why: str, op: str, loc: SourceLoc | None, hint: str) -> Iterator[None]:
    """Refuse a rule that reads a value another trace made (the forward's, say): it would
    become a parameter of the backward's graph that nobody passes."""
    t = dispatch.current_trace()
    before = len(getattr(t, "free", ()))
    yield
    lifted = getattr(t, "free", ())[before:]
    if lifted:
        raise TraceError(
            f"{who} uses a value traced outside it "
            f"({', '.join(str(v.aval) for v, _ in lifted)})" + (f", {why}" if why else ""),
            op=op,
            loc=loc,
            hint=hint,
        )


def _merge(pos: tuple[int, ...], static: tuple[Any, ...], rest: tuple[Any, ...]) -> list[Any]:
    """The arguments in order: ``static`` at positions ``pos``, ``rest`` in the others."""
    it, fixed = iter(rest), dict(zip(pos, static, strict=True))
    return [fixed[i] if i in fixed else next(it) for i in range(len(static) + len(rest))]


def _aval_of(x: Any) -> AVal | None:
    return AVal(tuple(x.shape), x.dtype) if isinstance(x, Value) else None  # type: ignore[attr-defined]


def _zeros(aval: AVal) -> Any:
    return api.broadcast_to(api.asvalue(np.zeros((), aval.dtype.np)), aval.shape)


def _dtype_of(a: Any) -> dt.DType:
    return dt.from_numpy(np.dtype(a.dtype))


def _avals(avals: list[AVal | None] | list[AVal], tree: pytree.TreeDef) -> str:
    texts = [str(a) if a is not None else "a non-tensor" for a in avals]
    return texts[0] if tree.kind == "leaf" else f"{tree} = ({', '.join(texts)})"


def _unhashable(xs: tuple[Any, ...]) -> int:
    """The index of the first of ``xs`` that cannot be hashed."""
    for i, x in enumerate(xs):
        try:
            hash(x)
        except TypeError:
            return i
    return 0


class _Partial(Named):
    """``fn`` of the arguments other than ``pos``, which are ``static``: a
    ``nondiff_argnums`` binding."""

    __slots__ = ("fn", "pos", "static")

    def __init__(
        self, fn: Callable[..., Any], pos: tuple[int, ...], static: tuple[Any, ...]
    ) -> None:
        super().__init__(fn)
        self.fn, self.pos, self.static = fn, pos, static

    def __call__(self, *dyn: Any) -> Any:
        return self.fn(*_merge(self.pos, self.static, dyn))


class _Leading(Named):
    """``fn`` with ``static`` passed first: ``bwd(*nondiff_args, res, g)`` and
    ``jvp(*nondiff_args, primals, tangents)``, as JAX passes them."""

    __slots__ = ("fn", "static")

    def __init__(self, fn: Callable[..., Any], static: tuple[Any, ...]) -> None:
        super().__init__(fn)
        self.fn, self.static = fn, static

    def __call__(self, *args: Any) -> Any:
        return self.fn(*self.static, *args)
