"""``custom_linear_solve`` and ``custom_root`` (``pto.lax``): solvers differentiated
implicitly, as ``jax.lax``'s.

A solver's own steps (an iteration, a factorization) are not what the gradient should go
through: the solution of ``A x = b`` changes with ``b`` and ``A`` as ``A⁻¹`` says, however it
was found, and the root of ``f(x, θ) = 0`` with ``θ`` by the implicit function theorem. Each
call is one ``custom_vjp_call`` (as a traced ``cond`` is, :mod:`pypto.graph.control`) whose
arguments are the right-hand side (or the guess) and every value the functions close over:
``matvec`` and ``f`` are traced once to find those, and replayed from the arguments. Its
backward solves once more, on the cotangent:

* ``custom_linear_solve``: ``λ = transpose_solve(vecmat, ct)`` (``solve`` itself when
  ``symmetric``), with ``vecmat`` the transpose of ``matvec`` (its VJP); ``b`` gets ``λ`` and
  each value ``matvec`` closes over ``-∂(A x)/∂θ · λ``;
* ``custom_root``: ``λ`` from the transpose of ``y ↦ tangent_solve(g, y)`` at ``ct``, with
  ``g`` the linearization of ``f`` at the root in ``x``; each value ``f`` closes over gets
  ``-∂f/∂θ · λ`` and the guess nothing.

Values only ``solve`` (or ``tangent_solve``) closes over get no gradient, as in JAX. Reverse
mode only: pypto's ``jvp`` of these calls differentiates the solver's steps.

>>> import pypto as pto
>>> def sqrt(a):  # Newton's method, differentiated as the root of x² - a
...     f = lambda x: x * x - a
...     newton = lambda f, x: pto.lax.fori_loop(0, 20, lambda i, x: x - f(x) / (2 * x), x)
...     return pto.lax.custom_root(f, pto.ones_like(a), newton, lambda g, y: y / g(1.0))
>>> float(pto.grad(sqrt)(pto.tensor(4.0)))
0.25
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pypto.core.errors import TraceError
from pypto.graph import autodiff, interpret, pytree
from pypto.graph.custom_vjp import custom_vjp
from pypto.graph.ir import Func
from pypto.graph.tracer import trace
from pypto.ops import api

__all__ = ["custom_linear_solve", "custom_root"]


def _leaves(op: str, tree: Any) -> tuple[list[Any], pytree.TreeDef]:
    leaves, td = pytree.flatten(tree)
    return [api.asvalue(x, op) for x in leaves], td


class _Closed:
    """A function of one pytree, traced on ``like``, as a function of it and the values it
    closes over: ``call(x, args)`` replays it with those values taken from ``args`` at
    ``pos`` (their positions among a call's arguments, :meth:`_Implicit.frees`)."""

    def __init__(self, op: str, fn: Callable[[Any], Any], like: Any) -> None:
        func, out_tree, free = trace(fn, (like,), name=op)
        self.op = op
        self.func: Func = func
        self.out_tree = out_tree
        self.free: list[Any] = free
        self.pos: list[int] = []

    def call(self, x: Any, args: tuple[Any, ...]) -> Any:
        leaves = pytree.flatten(x)[0]
        ins = [*leaves, *(args[k] for k in self.pos)]
        return pytree.unflatten(self.out_tree, interpret.evaluate(self.func, ins, groups=True))


class _Implicit(custom_vjp):
    """One implicitly differentiated solve: the call's arguments are ``n`` leaves of the
    right-hand side (or the guess) and then every value ``closed`` functions close over."""

    def __init__(
        self,
        op: str,
        n: int,
        tree: pytree.TreeDef,
        closed: list[_Closed],
        body: Callable[..., Any],
        backward: Callable[[tuple[Any, ...], Any, Any], tuple[Any, ...]],
    ) -> None:
        self.op, self.n, self.tree = op, n, tree
        self.frees: list[Any] = []
        for c in dict.fromkeys(closed):  # one argument per distinct closed-over value
            for x in c.free:
                k = next((k for k, y in enumerate(self.frees) if y is x), None)
                if k is None:
                    k = len(self.frees)
                    self.frees.append(x)
                c.pos.append(n + k)

        def solved(*args: Any) -> Any:
            return body(pytree.unflatten(tree, list(args[:n])), args)

        def fwd(*args: Any) -> Any:
            out = solved(*args)
            return out, (args, out)

        def bwd(res: Any, ct: Any) -> tuple[Any, ...]:
            args, out = res
            return backward(args, out, ct)

        solved.__name__ = op.split(".")[-1]
        super().__init__(solved)
        self.defvjp(fwd, bwd)

    def run(self, rhs: Any) -> Any:
        leaves, _ = _leaves(self.op, rhs)
        return self(*leaves, *self.frees)


def _check_tree(op: str, what: str, got: pytree.TreeDef, want: pytree.TreeDef) -> None:
    if got != want:
        raise TraceError(
            f"{what} returns structure {got}, the input's is {want}",
            op=op,
            hint="it must return a tree of the same structure as its input",
        )


def _solution(out: Any, has_aux: bool) -> Any:
    return out[0] if has_aux else out


def _add_closed_grads(
    c: _Closed, x: Any, args: tuple[Any, ...], lam: Any, grads: list[Any]
) -> tuple[Any, ...]:
    """``grads`` plus, for each value ``c`` closes over, ``-(∂c(x)/∂θ)ᵀ lam``: the implicit
    gradient through the values the system (``matvec`` or ``f``) depends on."""
    own = [args[k] for k in c.pos]
    if own:

        def at(*vals: Any) -> Any:  # c at x, its closed-over values replaced by vals
            swapped = list(args)
            for k, v in zip(c.pos, vals, strict=True):
                swapped[k] = v
            return c.call(x, tuple(swapped))

        _, back = autodiff.vjp(at, *own)
        for k, g in zip(c.pos, back(lam), strict=True):
            if g is not None:
                g = api.neg(g)
                grads[k] = g if grads[k] is None else api.add(grads[k], g)
    return tuple(grads)


def custom_linear_solve(
    matvec: Callable[[Any], Any],
    b: Any,
    solve: Callable[[Callable[[Any], Any], Any], Any],
    transpose_solve: Callable[[Callable[[Any], Any], Any], Any] | None = None,
    symmetric: bool = False,
    has_aux: bool = False,
) -> Any:
    """``solve(matvec, b)``, differentiated as the solution of the linear system
    ``matvec(x) = b`` (``jax.lax.custom_linear_solve``): the gradient solves again, with
    ``transpose_solve(vecmat, ct)`` (or ``solve`` when ``symmetric``), whatever ``solve``
    does inside (an iteration, a factorization). ``b`` and ``x`` may be pytrees;
    ``has_aux``: ``solve`` returns ``(x, aux)``.

    >>> import numpy as np
    >>> import pypto as pto
    >>> def f(a, b):  # A x = b by a factorization the gradient need not go through
    ...     mv = lambda x: a @ x
    ...     return pto.lax.custom_linear_solve(
    ...         mv, b, lambda mv, r: pto.linalg.solve(a, r), symmetric=True)
    >>> a = np.array([[2.0, 0.0], [0.0, 4.0]], np.float32)
    >>> pto.grad(lambda b: f(a, b).sum())(np.ones(2, np.float32)).numpy()
    array([0.5 , 0.25], dtype=float32)
    """
    op = "lax.custom_linear_solve"
    leaves, tree = _leaves(op, b)
    like = pytree.unflatten(tree, leaves)
    mv = _Closed(op, matvec, like)
    _check_tree(op, "matvec", mv.out_tree, tree)
    sol = _Closed(op, lambda r: solve(matvec, r), like)
    tsol = sol
    if not symmetric and transpose_solve is not None:

        def vecmat(y: Any) -> Any:  # matvec's transpose (linear: its VJP anywhere)
            zero = pytree.unflatten(tree, [api.mul(v, 0.0) for v in leaves])
            return autodiff.vjp(matvec, zero)[1](y)[0]

        tsol = _Closed(op, lambda r: transpose_solve(vecmat, r), like)

    def body(rhs: Any, args: tuple[Any, ...]) -> Any:
        return sol.call(rhs, args)

    def backward(args: tuple[Any, ...], out: Any, ct: Any) -> tuple[Any, ...]:
        x, ct_x = _solution(out, has_aux), _solution(ct, has_aux)
        if not symmetric and transpose_solve is None:
            raise TraceError(
                "the gradient of a custom_linear_solve needs transpose_solve (or symmetric=True)",
                op=op,
                hint="pass transpose_solve=lambda vecmat, b: ..., which solves the transposed "
                "system",
            )
        lam = _solution(tsol.call(ct_x, args), has_aux)
        grads: list[Any] = [*pytree.flatten(lam)[0], *([None] * (len(args) - len(leaves)))]
        return _add_closed_grads(mv, x, args, lam, grads)

    out = _Implicit(op, len(leaves), tree, [mv, sol, tsol], body, backward).run(b)
    _check_tree(op, "solve", pytree.flatten(_solution(out, has_aux))[1], tree)
    return out


def custom_root(
    f: Callable[[Any], Any],
    initial_guess: Any,
    solve: Callable[[Callable[[Any], Any], Any], Any],
    tangent_solve: Callable[[Callable[[Any], Any], Any], Any],
    has_aux: bool = False,
) -> Any:
    """``solve(f, initial_guess)``, differentiated as a root of ``f`` by the implicit
    function theorem (``jax.lax.custom_root``): the gradient with respect to the values ``f``
    closes over is ``-(∂f/∂x)⁻¹ ∂f/∂θ`` at the root, with ``tangent_solve(g, y)`` solving the
    linearization ``g`` of ``f`` there (``lambda g, y: y / g(1.0)`` for a scalar); the guess
    gets none. See the module's example.
    """
    op = "lax.custom_root"
    leaves, tree = _leaves(op, initial_guess)
    guess = pytree.unflatten(tree, leaves)
    fc = _Closed(op, f, guess)
    _check_tree(op, "f", fc.out_tree, tree)
    sol = _Closed(op, lambda g: solve(f, g), guess)

    def linear_solve(xy: tuple[Any, Any]) -> Any:
        x, y = xy

        def g(t: Any) -> Any:  # f linearized at x, in x
            return autodiff.jvp(f, (x,), (t,))[1]

        return tangent_solve(g, y)

    lsol = _Closed(op, linear_solve, (guess, guess))

    def body(g: Any, args: tuple[Any, ...]) -> Any:
        return sol.call(g, args)

    def backward(args: tuple[Any, ...], out: Any, ct: Any) -> tuple[Any, ...]:
        x, ct_x = _solution(out, has_aux), _solution(ct, has_aux)
        # λ: the transpose of y ↦ tangent_solve(g, y) (linear in y) at the cotangent, g the
        # linearization at the root
        _, back = autodiff.vjp(lambda y: lsol.call((x, y), args), x)
        lam = back(ct_x)[0]
        return _add_closed_grads(fc, x, args, lam, [None] * len(args))

    out = _Implicit(op, len(leaves), tree, [fc, sol, lsol], body, backward).run(initial_guess)
    _check_tree(op, "solve", pytree.flatten(_solution(out, has_aux))[1], tree)
    return out
