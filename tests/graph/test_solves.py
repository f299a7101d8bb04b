"""``pto.lax.custom_linear_solve`` and ``custom_root`` against ``jax.lax``'s: the values and the
implicit gradients (through the closed-over values, never the solver's steps), eagerly, under
``jit`` and on the NPU, with aux outputs, and the errors."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto
from tests.ops.jaxref import assert_matches

rng = np.random.default_rng(9)
M = (rng.normal(size=(4, 4)) + 4 * np.eye(4)).astype(np.float32)  # well conditioned
SPD = (M @ M.T / 8 + np.eye(4)).astype(np.float32)
B = rng.normal(size=4).astype(np.float32)


def newton(ns: Any, steps: int = 12) -> Any:
    """Newton's method for an elementwise f, its derivative by a jvp along ones."""

    def solve(f: Any, x: Any) -> Any:
        def step(i: Any, x: Any) -> Any:
            d = ns.jvp(f, (x,), (ns.ones_like(x),))[1]
            return x - f(x) / d

        return ns.lax.fori_loop(0, steps, step, x)

    return solve


class _Jax:
    """The bits of JAX the shared test functions use, under pypto's names."""

    lax = jax.lax
    linalg = jnp.linalg
    jvp = staticmethod(jax.jvp)
    jacfwd = staticmethod(jax.jacfwd)
    ones_like = staticmethod(jnp.ones_like)


def cube_root(ns: Any, a: Any) -> Any:
    # the root of x³ - a, from a guess of ones, as the solution of f(x) = 0
    def f(x: Any) -> Any:
        return x * x * x - a

    return ns.lax.custom_root(f, ns.ones_like(a), newton(ns), lambda g, y: y / g(ns.ones_like(y)))


def shifted_system(ns: Any, t: Any) -> Any:
    # the root of (M + t I) x - b: a linear system's root, the tangent solved by its Jacobian
    def f(x: Any) -> Any:
        return (M + t * np.eye(4, dtype=np.float32)) @ x - B

    def solve(f: Any, x: Any) -> Any:
        return ns.linalg.solve(M + t * np.eye(4, dtype=np.float32), B)

    def tangent(g: Any, y: Any) -> Any:
        return ns.linalg.solve(ns.jacfwd(g)(y), y)

    return ns.lax.custom_root(f, ns.ones_like(B), solve, tangent)


def general_solve(ns: Any, a: Any, b: Any) -> Any:
    # a non-symmetric A: the gradient solves with Aᵀ
    return ns.lax.custom_linear_solve(
        lambda x: a @ x,
        b,
        lambda mv, r: ns.linalg.solve(a, r),
        transpose_solve=lambda vm, r: ns.linalg.solve(a.T, r),
    )


def cg(ns: Any, a: Any, b: Any) -> Any:
    # conjugate gradients for an SPD A, a fixed number of steps: symmetric, so the gradient
    # runs CG again on the cotangent
    def solve(mv: Any, r0: Any) -> Any:
        def step(i: Any, s: Any) -> Any:
            x, r, p = s
            ap = mv(p)
            alpha = (r @ r) / (p @ ap)
            x2, r2 = x + alpha * p, r - alpha * ap
            return x2, r2, r2 + ((r2 @ r2) / (r @ r)) * p

        return ns.lax.fori_loop(0, 4, step, (r0 * 0.0, r0, r0))[0]

    return ns.lax.custom_linear_solve(lambda x: a @ x, b, solve, symmetric=True)


def test_custom_root_values_and_gradients_match_jax() -> None:
    a = np.array([8.0, 27.0, 2.0, 0.5], np.float32)
    assert_matches(cube_root(pto, a), cube_root(_Jax, a), 4, what="cube root")
    want = jax.grad(lambda a: cube_root(_Jax, a).sum())(a)
    assert_matches(pto.grad(lambda a: cube_root(pto, a).sum())(a), want, 8, what="grad")
    jitted = pto.jit(pto.grad(lambda a: cube_root(pto, a).sum()), backend="interpret")
    assert_matches(jitted(a), want, 8, what="jit grad")
    t = np.float32(0.7)
    want = jax.grad(lambda t: (shifted_system(_Jax, t) ** 2).sum())(t)
    got = pto.grad(lambda t: (shifted_system(pto, t) ** 2).sum())(t)
    assert_matches(got, want, 16, what="grad of a system's root")


def test_custom_linear_solve_values_and_gradients_match_jax() -> None:
    for fn, a in ((general_solve, M), (cg, SPD)):
        assert_matches(fn(pto, a, B), fn(_Jax, a, B), 16, what=fn.__name__)

        def loss(ns: Any, a: Any, b: Any, fn: Any = fn) -> Any:
            return (fn(ns, a, b) ** 2).sum()

        want = jax.grad(lambda a, b: loss(_Jax, a, b), argnums=(0, 1))(a, B)
        got = pto.grad(lambda a, b: loss(pto, a, b), argnums=(0, 1))(a, B)
        jitted = pto.jit(
            pto.grad(lambda a, b: loss(pto, a, b), argnums=(0, 1)), backend="interpret"
        )
        for name, g in (("grad", got), ("jit grad", jitted(a, B))):
            for i, (x, w) in enumerate(zip(g, want, strict=True)):
                assert_matches(x, w, 32, what=f"{fn.__name__} {name}[{i}]")


def test_the_gradient_does_not_go_through_the_solver() -> None:
    # CG stopped after one step is not the solution, so differentiating its steps would give
    # another gradient; the implicit one treats the result as A⁻¹ b, as JAX does
    def one_step(ns: Any, a: Any, b: Any) -> Any:
        def solve(mv: Any, r: Any) -> Any:
            return r * ((r @ r) / (r @ mv(r)))

        return ns.lax.custom_linear_solve(lambda x: a @ x, b, solve, symmetric=True)

    want = jax.grad(lambda b: one_step(_Jax, SPD, b).sum())(B)
    assert_matches(pto.grad(lambda b: one_step(pto, SPD, b).sum())(B), want, 8)
    steps = pto.grad(lambda b: (b * ((b @ b) / (b @ (SPD @ b)))).sum())(B)
    assert not np.allclose(np.asarray(steps), np.asarray(want), atol=1e-3)


def test_aux_outputs_and_pytrees() -> None:
    def solve(mv: Any, r: Any) -> Any:
        x = {"u": r["u"] / 2.0, "v": r["v"] / 3.0}
        return x, r["u"].sum()

    def f(ns: Any, u: Any) -> Any:
        mv = lambda x: {"u": 2.0 * x["u"], "v": 3.0 * x["v"]}  # noqa: E731
        rhs = {"u": u, "v": u * u}
        x, aux = ns.lax.custom_linear_solve(mv, rhs, solve, symmetric=True, has_aux=True)
        return (x["u"] + x["v"]).sum() + 0.0 * aux

    u = np.array([1.0, 2.0], np.float32)
    assert_matches(pto.grad(lambda u: f(pto, u))(u), jax.grad(lambda u: f(_Jax, u))(u))


def test_on_the_npu() -> None:
    a = np.array([[8.0, 27.0], [2.0, 0.5]], np.float32)
    got = pto.jit(pto.grad(lambda a: cube_root(pto, a).sum()), machine="tiny")(a)
    assert_matches(got, jax.grad(lambda a: cube_root(_Jax, a).sum())(a), 8)


def test_errors_name_the_solve() -> None:
    def no_transpose(a: Any, b: Any) -> Any:
        return pto.lax.custom_linear_solve(lambda x: a @ x, b, lambda mv, r: pto.linalg.solve(a, r))

    assert_matches(no_transpose(M, B), general_solve(_Jax, M, B), 16)  # the value needs none
    with pytest.raises(pto.TraceError, match=r"lax\.custom_linear_solve: .*needs transpose_solve"):
        pto.grad(lambda b: no_transpose(M, b).sum())(B)
    with pytest.raises(pto.TraceError, match=r"lax\.custom_root: f returns structure"):
        pto.lax.custom_root(lambda x: (x, x), B, lambda f, x: x, lambda g, y: y)
