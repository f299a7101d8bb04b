"""``pto.custom_vjp``: a function whose backward is written by hand, as ``jax.custom_vjp``.

Eagerly, and under a transform before :meth:`custom_vjp.defvjp`, the function simply runs.
With a backward defined, a traced call is recorded as ``custom_vjp_call`` equations (one per
result) naming the function, so :mod:`pypto.graph.autodiff` applies ``bwd`` through the op's
VJP rule instead of differentiating the body: the body may hold ops with no VJP at all (a
hand-written kernel). Forward values come from the body, traced once per signature; the
``inline`` pass splices it in before tiling, so lower levels see ordinary ops.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
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

__all__ = ["custom_vjp"]


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

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise TraceError(
                f"custom_vjp needs a function, got {type(fn).__name__}", op="custom_vjp"
            )
        self.fn = fn
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.name: str = CallName(_unique_name(fn), self)
        self._bodies: dict[tuple[AVal, ...], tuple[Func, pytree.TreeDef]] = {}
        functools.update_wrapper(self, fn)
        CALLS[str(self.name)] = self  # a plain key: the CallName would keep self alive

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        """Set the forward ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, g)``."""
        for role, f in (("fwd", fwd), ("bwd", bwd)):
            if not callable(f):
                raise TraceError(
                    f"defvjp of {self.name}: {role} must be a function, got {type(f).__name__}",
                    op="custom_vjp",
                    hint="call f.defvjp(f_fwd, f_bwd) with the two functions",
                )
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TraceError(
                f"{self.name} called with keyword arguments {sorted(kwargs)}",
                op="custom_vjp",
                hint="pass the arguments of a custom_vjp function positionally",
            )
        if self.bwd is None or dispatch.is_eager():
            # Nothing to record: eager values have no tape, and without a backward autodiff
            # differentiates the body like any other code.
            return self.fn(*args)
        vals = []
        for i, a in enumerate(args):
            if a is None or isinstance(a, tuple | list | dict):
                raise TraceError(
                    f"argument {i} of {self.name} is a {type(a).__name__}; "
                    "a custom_vjp function takes tensors",
                    op="custom_vjp",
                    hint="pass the leaves as separate arguments",
                )
            vals.append(api.asvalue(a, self.name))
        avals = tuple(AVal(tuple(v.shape), v.dtype) for v in vals)  # type: ignore[attr-defined]
        body, out_tree = self.body(avals)
        n = len(body.outputs)
        outs = [dispatch.bind(CUSTOM_VJP_CALL, tuple(vals), self.params(i, n)) for i in range(n)]
        return pytree.unflatten(out_tree, outs)

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
                raise TraceError(
                    f"custom_vjp function {self.name} closes over a value traced by an "
                    "enclosing transform",
                    op="custom_vjp",
                    loc=_loc(self.fn),
                    hint="pass the value as an argument instead",
                )
            hit = self._bodies[avals] = (func, out_tree)
        return hit

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
        t = dispatch.current_trace()
        before = len(getattr(t, "free", ()))
        grads = self.bwd(res, pytree.unflatten(out_tree, cts))
        lifted = getattr(t, "free", ())[before:]
        if lifted:
            raise TraceError(
                f"bwd of custom_vjp function {self.name} uses a value traced outside it "
                f"({', '.join(str(v.aval) for v, _ in lifted)}), not one of its residuals",
                op="custom_vjp",
                loc=_loc(self.bwd),
                hint="return the value among fwd's residuals and take it from there",
            )
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

    def _check_cotangents(self, grads: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        assert self.bwd is not None
        where = _loc(self.bwd)
        hint = "return a tuple with one cotangent per input, of its shape and dtype (None: zero)"
        if not isinstance(grads, tuple | list) or len(grads) != len(args):
            got = (
                f"{len(grads)} cotangent{'s' if len(grads) != 1 else ''}"
                if isinstance(grads, tuple | list)
                else f"a {type(grads).__name__}"
            )
            raise TraceError(
                f"bwd of custom_vjp function {self.name} returned {got} for its "
                f"{len(args)} input{'s' if len(args) != 1 else ''}",
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
                    f"bwd of custom_vjp function {self.name}: returned a cotangent of {have} "
                    f"for input {i}, which is {want}",
                    op="custom_vjp",
                    loc=where,
                    hint=hint,
                )
            out.append(v if want.dtype.is_floating else None)
        return tuple(out)

    def __repr__(self) -> str:
        return f"<pto.custom_vjp {self.name}>"


def _zeros(aval: AVal) -> Any:
    return api.broadcast_to(api.asvalue(np.zeros((), aval.dtype.np)), aval.shape)


def _dtype_of(a: Any) -> dt.DType:
    return dt.from_numpy(np.dtype(a.dtype))


def _avals(avals: list[AVal | None] | list[AVal], tree: pytree.TreeDef) -> str:
    texts = [str(a) if a is not None else "a non-tensor" for a in avals]
    return texts[0] if tree.kind == "leaf" else f"{tree} = ({', '.join(texts)})"
