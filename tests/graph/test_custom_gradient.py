"""``pto.custom_gradient`` against ``jax.custom_gradient``, and ``pto.closure_convert``
against ``jax.closure_convert`` carrying a closure across a ``custom_vjp`` boundary."""

from __future__ import annotations

import os
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto

from .close import assert_close

HERE = os.path.basename(__file__)
X = np.array([-2.0, -0.5, 0.3, 1.5], np.float32)
Y = np.array([0.5, 2.0, -1.0, 3.0], np.float32)


def clipped(m: Any, deco: Any) -> Any:
    """``x * y`` whose gradient in ``x`` is clipped to [-1, 1] and scaled by ``cos(x)``, a
    value the backward closes over."""

    @deco
    def f(x: Any, y: Any) -> Any:
        c = m.cos(x)
        return x * y, lambda g: (m.clip(g * y, -1.0, 1.0) * c, g * x)

    return f


def test_values_and_gradients_are_jaxs() -> None:
    ours, theirs = clipped(pto, pto.custom_gradient), clipped(jnp, jax.custom_gradient)
    assert_close(ours(X, Y), theirs(X, Y))

    def loss(f: Any) -> Any:
        return lambda x, y: (f(x, y) * f(y, x)).sum()

    want = jax.value_and_grad(loss(theirs), argnums=(0, 1))(X, Y)
    for g in (
        pto.value_and_grad(loss(ours), argnums=(0, 1)),
        pto.jit(pto.value_and_grad(loss(ours), argnums=(0, 1)), backend="interpret"),
        pto.jit(pto.value_and_grad(loss(ours), argnums=(0, 1)), machine="tiny"),
    ):
        assert_close(g(X, Y), want, k=4)
    ct = np.linspace(-3, 3, 4).astype(np.float32)
    assert_close(pto.vjp(ours, X, Y)[1](ct), jax.vjp(theirs, X, Y)[1](ct))
    assert_close(
        pto.vmap(pto.grad(lambda x: ours(x, x).sum()))(np.stack([X, Y])),
        jax.vmap(jax.grad(lambda x: theirs(x, x).sum()))(np.stack([X, Y])),
    )


def test_one_argument_and_second_order() -> None:
    def f(m: Any, deco: Any) -> Any:
        @deco
        def g(x: Any) -> Any:
            s = m.sin(x)
            return s * s, lambda t: (2.0 * s * m.cos(x) * t,)

        return g

    ours, theirs = f(pto, pto.custom_gradient), f(jnp, jax.custom_gradient)
    assert_close(pto.grad(lambda x: ours(x).sum())(X), jax.grad(lambda x: theirs(x).sum())(X))
    h = pto.hessian(lambda x: ours(x).sum())(X)
    assert_close(h, jax.hessian(lambda x: theirs(x).sum())(X), k=8)


def test_bad_rules_are_errors_at_their_lines() -> None:
    @pto.custom_gradient
    def no_pair(x: Any) -> Any:
        return x * 2

    with pytest.raises(pto.TraceError, match="must return a pair \\(out, vjp_fn\\)") as e:
        pto.grad(lambda x: no_pair(x).sum())(X)
    assert f"{HERE}:" in str(e.value)

    @pto.custom_gradient
    def two_arguments(x: Any, y: Any) -> Any:
        return x * y, lambda g: (g * y,)  # one cotangent for two arguments

    with pytest.raises(pto.TraceError, match="the gradient function of custom_gradient") as e:
        pto.grad(lambda x: two_arguments(x, x).sum())(X)
    assert "returned 1 cotangent for its 2 inputs" in str(e.value)
    assert f"{HERE}:{two_arguments.fun.__code__.co_firstlineno + 2}" in str(e.value)

    @pto.custom_gradient
    def shape(x: Any) -> Any:
        return x.sum(), lambda g: (g,)

    with pytest.raises(pto.TraceError, match=r"cotangent of f32\[\] for input 0, which is "):
        pto.grad(shape)(X)
    with pytest.raises(pto.TraceError, match="custom_gradient needs a function, got int"):
        pto.custom_gradient(3)  # type: ignore[arg-type]


# ---- closure_convert: a fixed-point solver whose function closes over its parameters -----


def fixed_point(m: Any, custom_vjp: Any, convert: Any, grad: Any) -> Any:
    """``x = f(x)`` by iteration, differentiated by the implicit function theorem: the
    solver's ``custom_vjp`` gets ``f`` through ``nondiff_argnums``, so the parameters ``f``
    closes over must be hoisted to be differentiated."""

    @partial(custom_vjp, nondiff_argnums=(0,))
    def solve(f: Any, x0: Any, *consts: Any) -> Any:
        x = x0
        for _ in range(60):
            x = f(x, *consts)
        return x

    def fwd(f: Any, x0: Any, *consts: Any) -> Any:
        x = solve(f, x0, *consts)
        return x, (x, consts)

    def bwd(f: Any, res: Any, g: Any) -> Any:
        x, consts = res
        # (I - df/dx)^T u = g by iteration, then the parameters' part of f's VJP at x
        _, vjp_x = (pto.vjp if m is pto else jax.vjp)(lambda v: f(v, *consts), x)
        u = g
        for _ in range(60):
            u = g + vjp_x(u)[0]
        _, vjp_c = (pto.vjp if m is pto else jax.vjp)(lambda *c: f(x, *c), *consts)
        return (m.zeros_like(x), *vjp_c(u))

    solve.defvjp(fwd, bwd)

    def run(a: Any, x0: Any) -> Any:
        f = lambda x: 0.5 * m.tanh(a * x) + 0.3  # noqa: E731  (closes over a)
        g, consts = convert(lambda x, *c: f(x), x0)
        return solve(g, x0, *consts)

    return run


def test_closure_convert_hoists_what_a_custom_vjp_must_differentiate() -> None:
    a = np.array([0.4, 1.2, -0.8, 2.0], np.float32)
    x0 = np.zeros(4, np.float32)
    ours = fixed_point(pto, pto.custom_vjp, pto.closure_convert, pto.grad)
    theirs = fixed_point(jnp, jax.custom_vjp, jax.closure_convert, jax.grad)
    assert_close(ours(a, x0), theirs(a, x0), k=8)
    want = jax.grad(lambda a: theirs(a, x0).sum())(a)
    assert_close(pto.grad(lambda a: ours(a, x0).sum())(a), want, k=64)
    assert_close(pto.jit(pto.grad(lambda a: ours(a, x0).sum()), backend="interpret")(a), want, k=64)


def test_closure_convert_outside_a_trace_and_its_errors() -> None:
    w = pto.tensor(Y)
    g, consts = pto.closure_convert(lambda p: {"y": p["x"] * w}, {"x": X})
    assert consts == []
    assert_close(g({"x": X})["y"], X * Y)
    with pytest.raises(pto.TraceError, match="takes arguments structured as"):
        g(X)
