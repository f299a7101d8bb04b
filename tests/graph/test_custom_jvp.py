"""``pto.custom_jvp`` against ``jax.custom_jvp`` with the same rules, and ``nondiff_argnums``
of both custom-derivative kinds against JAX's: grad, jvp, second order, jit on both backends,
several results, errors."""

from __future__ import annotations

import os
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto

from .close import assert_close
from .locations import line

HERE = os.path.basename(__file__)
X = np.array([-3.0, -0.5, 0.0, 0.7, 20.0, 200.0], np.float32)
T = np.array([1.0, -2.0, 0.5, 3.0, 1.0, -1.0], np.float32)


# ---- a stable softplus: the rule's tangent, not the body's derivative (nan at 200) --------


@pto.custom_jvp
def softplus(x):
    return pto.log(1.0 + pto.exp(x))


@softplus.defjvp
def softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t * pto.sigmoid(x)


@jax.custom_jvp
def j_softplus(x):
    return jnp.log(1.0 + jnp.exp(x))


@j_softplus.defjvp
def j_softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return j_softplus(x), t * jax.nn.sigmoid(x)


def loss(x):
    return (softplus(x) * softplus(0.5 * x)).sum()


def j_loss(x):
    return (j_softplus(x) * j_softplus(0.5 * x)).sum()


def test_the_rule_gives_grad_vjp_and_jvp_eagerly() -> None:
    xs = X[:5]  # (the forward overflows at 200 in both)
    ours = pto.grad(loss)(xs)
    assert_close(ours, jax.grad(j_loss)(xs))
    assert np.isfinite(np.asarray(pto.grad(lambda x: softplus(x).sum())(X))).all()
    plain = pto.grad(lambda x: pto.log(1.0 + pto.exp(x)).sum())(X)
    assert np.isnan(np.asarray(plain)[-1])  # the body's own derivative: what the rule avoids
    y, t = pto.jvp(softplus, (X,), (T,))
    jy, jt = jax.jvp(j_softplus, (X,), (T,))
    assert_close((y, t), (jy, jt))
    out, f_vjp = pto.vjp(softplus, xs)
    _, j_vjp = jax.vjp(j_softplus, xs)
    assert_close(f_vjp(T[:5]), j_vjp(T[:5]))
    assert np.asarray(out).shape == xs.shape
    rows = np.stack([xs, -xs, 2.0 * xs])
    per_row = pto.vmap(pto.grad(lambda r: softplus(r).sum()))(rows)
    assert_close(per_row, jax.vmap(jax.grad(lambda r: j_softplus(r).sum()))(rows))


@pytest.mark.parametrize("backend", ["interpret", "npu"])
def test_jit_of_grad_and_of_jvp_on_both_backends(backend: str) -> None:
    xs = X[:5]
    g = pto.jit(pto.grad(loss), backend=backend, machine="tiny")
    assert_close(g(xs), jax.grad(j_loss)(xs))
    assert "custom_vjp_call" not in str(g.lower(xs).tensor_ir)  # inlined before tiling
    fj = pto.jit(lambda x, t: pto.jvp(softplus, (x,), (t,))[1], backend=backend, machine="tiny")
    assert_close(fj(X, T), jax.jvp(j_softplus, (X,), (T,))[1])


def test_second_order_differentiates_the_rule() -> None:
    # JAX's second derivative of a custom_jvp function differentiates the rule's tangent
    xs = X[:5]
    ours = pto.grad(lambda x: pto.grad(loss)(x).sum())(xs)
    theirs = jax.grad(lambda x: jax.grad(j_loss)(x).sum())(xs)
    assert_close(ours, theirs, k=4)
    h = pto.hessian(lambda x: softplus(x).sum())(xs[:3])
    assert_close(h, jax.hessian(lambda x: j_softplus(x).sum())(xs[:3]), k=4)


def test_the_rule_is_really_used() -> None:
    # identity forward, a rule that triples the tangent: every mode sees 3
    @pto.custom_jvp
    def f(x):
        return x

    f.defjvp(lambda p, t: (f(p[0]), 3.0 * t[0]))
    assert np.allclose(np.asarray(pto.grad(lambda x: f(x).sum())(X)), 3.0)
    assert np.allclose(np.asarray(pto.jvp(f, (X,), (T,))[1]), 3.0 * T)
    assert np.allclose(np.asarray(f(X)), X)  # eagerly the function simply runs
    jf = pto.jit(pto.grad(lambda x: (f(x) ** 2).sum()), machine="tiny")
    assert np.allclose(np.asarray(jf(X)), 6.0 * X, rtol=1e-5)


# ---- several arguments and results ------------------------------------------------------


@pto.custom_jvp
def polar(r, th):
    return r * pto.cos(th), r * pto.sin(th)


@polar.defjvp
def polar_jvp(primals, tangents):
    (r, th), (dr, dth) = primals, tangents
    c, s = pto.cos(th), pto.sin(th)
    return polar(r, th), (dr * c - r * s * dth, dr * s + r * c * dth)


@jax.custom_jvp
def j_polar(r, th):
    return r * jnp.cos(th), r * jnp.sin(th)


@j_polar.defjvp
def j_polar_jvp(primals, tangents):
    (r, th), (dr, dth) = primals, tangents
    c, s = jnp.cos(th), jnp.sin(th)
    return j_polar(r, th), (dr * c - r * s * dth, dr * s + r * c * dth)


def test_several_arguments_and_results() -> None:
    r, th = np.abs(X[:5]) + 0.5, X[:5]

    def f(polar):
        def loss(r, th):
            x, y = polar(r, th)
            return (x * x * y + 3.0 * y).sum()

        return loss

    ours = pto.grad(f(polar), argnums=(0, 1))(r, th)
    assert_close(ours, jax.grad(f(j_polar), argnums=(0, 1))(r, th))
    jitted = pto.jit(pto.grad(f(polar), argnums=(0, 1)), machine="tiny")
    assert_close(jitted(r, th), jax.grad(f(j_polar), argnums=(0, 1))(r, th))
    assert_close(
        pto.jvp(polar, (r, th), (T[:5], T[1:6]))[1],
        jax.jvp(j_polar, (r, th), (T[:5], T[1:6]))[1],
    )


def test_defjvps_sums_one_rule_per_argument() -> None:
    @pto.custom_jvp
    def f(x, y):
        return pto.sin(x) * y

    f.defjvps(lambda t, ans, x, y: pto.cos(x) * y * t, lambda t, ans, x, y: 2.0 * pto.sin(x) * t)

    @jax.custom_jvp
    def jf(x, y):
        return jnp.sin(x) * y

    jf.defjvps(lambda t, ans, x, y: jnp.cos(x) * y * t, lambda t, ans, x, y: 2.0 * jnp.sin(x) * t)
    y = X[::-1].copy()
    args = (X[:5], y[:5])
    ours = pto.grad(lambda x, y: f(x, y).sum(), argnums=(0, 1))(*args)
    assert_close(ours, jax.grad(lambda x, y: jf(x, y).sum(), argnums=(0, 1))(*args))

    # None: that argument's tangent contributes nothing
    @pto.custom_jvp
    def g(x, y):
        return x * y

    g.defjvps(None, lambda t, ans, x, y: x * t)
    gx, gy = pto.grad(lambda x, y: g(x, y).sum(), argnums=(0, 1))(*args)
    assert np.allclose(np.asarray(gx), 0.0) and np.allclose(np.asarray(gy), args[0])


def test_an_integer_argument_gets_no_gradient() -> None:
    @pto.custom_jvp
    def powi(x, n):
        return x ** n.astype(pto.float32)

    @powi.defjvp
    def powi_jvp(primals, tangents):
        (x, n), (t, _) = primals, tangents
        nf = n.astype(pto.float32)
        return powi(x, n), nf * x ** (nf - 1.0) * t

    n = np.array(3, np.int32)
    g = pto.grad(lambda x: powi(x, n).sum())(X[:4])
    assert np.allclose(np.asarray(g), 3.0 * X[:4] ** 2)
    _, gn = pto.vjp(powi, X[:4], n)[1](np.ones(4, np.float32))
    assert np.allclose(np.asarray(gn), 0)


# ---- nondiff_argnums, both kinds, against JAX -------------------------------------------


@partial(pto.custom_jvp, nondiff_argnums=(0,))
def apply_fn(f, x):
    return f(x)


@apply_fn.defjvp
def apply_fn_jvp(f, primals, tangents):
    (x,), (t,) = primals, tangents
    return apply_fn(f, x), 2.0 * t  # a stand-in rule: every f gets 2


@partial(jax.custom_jvp, nondiff_argnums=(0,))
def j_apply_fn(f, x):
    return f(x)


@j_apply_fn.defjvp
def j_apply_fn_jvp(f, primals, tangents):
    (x,), (t,) = primals, tangents
    return j_apply_fn(f, x), 2.0 * t


@partial(pto.custom_vjp, nondiff_argnums=(1, 2))
def clip_grad(x, lo, hi):
    return x


clip_grad.defvjp(lambda x, lo, hi: (x, None), lambda lo, hi, _, g: (pto.clip(g, lo, hi),))


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def j_clip_grad(x, lo, hi):
    return x


j_clip_grad.defvjp(lambda x, lo, hi: (x, None), lambda lo, hi, _, g: (jnp.clip(g, lo, hi),))


def test_nondiff_argnums_bind_functions_and_numbers() -> None:
    xs = X[:5]
    for f, jf in ((pto.sin, jnp.sin), (pto.exp, jnp.exp)):
        ours = pto.grad(lambda x, f=f: (apply_fn(f, x) * x).sum())(xs)
        assert_close(ours, jax.grad(lambda x, jf=jf: (j_apply_fn(jf, x) * x).sum())(xs))
    assert_close(
        pto.jvp(partial(apply_fn, pto.sin), (xs,), (T[:5],)),
        jax.jvp(partial(j_apply_fn, jnp.sin), (xs,), (T[:5],)),
    )

    def cl(x):
        return (10.0 * clip_grad(x, -1.0, 2.0) ** 2).sum()

    def jl(x):
        return (10.0 * j_clip_grad(x, -1.0, 2.0) ** 2).sum()

    assert_close(pto.grad(cl)(xs), jax.grad(jl)(xs))
    assert_close(pto.jit(pto.grad(cl), machine="tiny")(xs), jax.grad(jl)(xs))
    # one binding per value: another bound gives another function
    g2 = pto.grad(lambda x: (10.0 * clip_grad(x, -0.5, 0.5) ** 2).sum())(xs)
    assert np.abs(np.asarray(g2)).max() == 0.5
    assert len(clip_grad._bound) == 2


def test_nondiff_argnums_errors() -> None:
    with pytest.raises(pto.TraceError, match=r"argument 1 of clip_grad is a tensor at a nondiff"):
        pto.grad(lambda x: clip_grad(x, pto.tensor(-1.0), 1.0).sum())(X)
    with pytest.raises(
        pto.TraceError,
        match=r"argument 1 of clip_grad at a nondiff_argnums position is not hashable",
    ):
        pto.grad(lambda x: clip_grad(x, [-1.0], 1.0).sum())(X)
    with pytest.raises(pto.TraceError, match=r"nondiff_argnums=\(1, 2\) but was called with 2"):
        pto.grad(lambda x: clip_grad(x, -1.0).sum())(X)
    with pytest.raises(pto.TraceError, match="must be distinct non-negative argument positions"):
        pto.custom_jvp(lambda x: x, nondiff_argnums=(0, 0))


# ---- errors -----------------------------------------------------------------------------


def test_rule_errors_name_the_function_and_the_rules_line() -> None:
    @pto.custom_jvp
    def f(x):
        return x * 2.0

    def not_a_pair(p, t):
        return 2.0 * t[0]

    where = line() - 3
    f.defjvp(not_a_pair)
    with pytest.raises(pto.TraceError, match=r"must return a pair \(out, tangent_out\)") as e:
        pto.grad(lambda x: f(x).sum())(X)
    assert f"{HERE}:{where}" in str(e.value)

    f.defjvp(lambda p, t: (f(p[0]), t[0].sum()))
    with pytest.raises(
        pto.TraceError, match=r"returns the tangent f32\[\] but f(_\d+)? returns f32\[6\]"
    ):
        pto.jit(pto.grad(lambda x: f(x).sum()))(X)
    f.defjvp(lambda p, t: (f(p[0]), t[0].astype(pto.float16)))
    with pytest.raises(
        pto.TraceError, match=r"returns the tangent f16\[6\] but f(_\d+)? returns f32\[6\]"
    ):
        pto.grad(lambda x: f(x).sum())(X)
    with pytest.raises(pto.TraceError, match="is a custom_jvp function: give it a JVP rule"):
        f.defvjp(lambda x: (x, None), lambda r, g: (g,))
    with pytest.raises(pto.TraceError, match="symbolic_zeros=True is not supported"):
        f.defjvp(lambda p, t: (p, t), symbolic_zeros=True)
    with pytest.raises(pto.TraceError, match="jvp must be a function, got int"):
        f.defjvp(3)  # type: ignore[arg-type]
    with pytest.raises(
        pto.TraceError, match=r"defjvps of product(_\d+)? has 1 rule for 2 arguments"
    ):

        @pto.custom_jvp
        def product(x, y):
            return x * y

        product.defjvps(lambda t, ans, x, y: t)
        pto.grad(lambda x: product(x, x).sum())(X)


def test_a_rule_closing_over_a_traced_value_is_refused() -> None:
    def loss(w):
        a = w * 2.0

        @pto.custom_jvp
        def f(x):
            return x * 1.0

        f.defjvp(lambda p, t: (f(p[0]), t[0] * a))
        return f(w).sum()

    with pytest.raises(
        pto.TraceError,
        match=r"JVP rule of custom_jvp function f(_\d+)? uses a value traced outside it",
    ):
        pto.grad(loss)(X)


def test_the_call_is_one_equation_that_round_trips() -> None:
    text = str(pto.make_graph(lambda x: softplus(x).sum())(X))
    assert "custom_vjp_call %x [fn='softplus']" in text
    assert repr(softplus) == "<pto.custom_jvp softplus>"
