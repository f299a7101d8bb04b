"""``pto.custom_vjp`` against ``jax.custom_vjp`` with the same fwd/bwd: eager, jit, grad, errors."""

from __future__ import annotations

import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto
from pypto.graph.passes import inline

from .close import assert_close
from .locations import line, printed_lines
from .roundtrip import assert_round_trip

HERE = os.path.basename(__file__)
rng = np.random.default_rng(0)


# ---- 1. a clipped-gradient identity (the jax.custom_vjp documentation's example) ----------


@pto.custom_vjp
def clip_gradient(lo, hi, x):
    return x


def clip_fwd(lo, hi, x):
    return x, (lo, hi)


def clip_bwd(res, g):
    lo, hi = res
    return (None, None, pto.clip(g, lo, hi))


clip_gradient.defvjp(clip_fwd, clip_bwd)


@jax.custom_vjp
def j_clip_gradient(lo, hi, x):
    return x


def j_clip_fwd(lo, hi, x):
    return x, (lo, hi)


def j_clip_bwd(res, g):
    lo, hi = res
    return (None, None, jnp.clip(g, lo, hi))


j_clip_gradient.defvjp(j_clip_fwd, j_clip_bwd)


def clip_loss(x, lo, hi):
    return (5.0 * clip_gradient(lo, hi, x) ** 2).sum()


def j_clip_loss(x, lo, hi):
    return (5.0 * j_clip_gradient(lo, hi, x) ** 2).sum()


X = np.array([-0.5, -0.05, 0.0, 0.02, 0.3, 2.0], np.float32)
LO, HI = np.float32(-1.0), np.float32(1.0)


def test_clip_gradient_eager_matches_jax() -> None:
    ours = pto.grad(clip_loss)(X, LO, HI)
    theirs = jax.grad(j_clip_loss)(X, LO, HI)
    assert_close(ours, theirs)
    plain = jax.grad(lambda x: (5.0 * x**2).sum())(X)
    assert not np.allclose(np.asarray(ours), plain)  # the clipping really happened


@pytest.mark.parametrize("backend", ["interpret", "npu"])
def test_clip_gradient_jit_grad_matches_jax(backend: str) -> None:
    g = pto.jit(pto.grad(clip_loss), backend=backend, machine="tiny")
    assert_close(g(X, LO, HI), jax.grad(j_clip_loss)(X, LO, HI))
    assert "custom_vjp_call" not in str(g.lower(X, LO, HI).tensor_ir)


# ---- 2. a numerically stable log1pexp ---------------------------------------------------


@pto.custom_vjp
def log1pexp(x):
    return pto.log(1.0 + pto.exp(x))


def log1pexp_fwd(x):
    return log1pexp(x), x


def log1pexp_bwd(x, g):
    return (g * (1.0 - 1.0 / (1.0 + pto.exp(x))),)


log1pexp.defvjp(log1pexp_fwd, log1pexp_bwd)


@jax.custom_vjp
def j_log1pexp(x):
    return jnp.log(1.0 + jnp.exp(x))


j_log1pexp.defvjp(
    lambda x: (j_log1pexp(x), x), lambda x, g: (g * (1.0 - 1.0 / (1.0 + jnp.exp(x))),)
)
XS = np.array([-3.0, 0.0, 10.0, 100.0], np.float32)


def test_log1pexp_gradient_is_stable_and_matches_jax() -> None:
    ours = pto.grad(lambda x: log1pexp(x).sum())(XS)
    theirs = jax.grad(lambda x: j_log1pexp(x).sum())(XS)
    assert_close(ours, theirs)
    assert np.asarray(ours)[-1] == 1.0
    # Through the body, exp(100) overflows and the gradient is inf/inf.
    naive = pto.grad(lambda x: pto.log(1.0 + pto.exp(x)).sum())(XS)
    assert np.isnan(np.asarray(naive)[-1])


@pytest.mark.parametrize("backend", ["interpret", "npu"])
def test_log1pexp_forward_and_gradient_under_jit(backend: str) -> None:
    f = pto.jit(log1pexp, backend=backend, machine="tiny")
    assert_close(f(XS), j_log1pexp(XS))
    vg = pto.jit(pto.value_and_grad(lambda x: log1pexp(x).sum()), backend=backend, machine="tiny")
    v, g = vg(XS[:3])
    jv, jg = jax.value_and_grad(lambda x: j_log1pexp(x).sum())(XS[:3])
    assert_close((v, g), (jv, jg))


# ---- 3. matmul + activation with a hand-written backward -------------------------------


@pto.custom_vjp
def dense_tanh(x, w):
    return pto.tanh(x @ w)


def dense_tanh_fwd(x, w):
    y = dense_tanh(x, w)
    return y, (x, w, y)


def dense_tanh_bwd(res, g):
    x, w, y = res
    gz = g * (1.0 - y * y)
    return (gz @ w.T, x.T @ gz)


dense_tanh.defvjp(dense_tanh_fwd, dense_tanh_bwd)


@jax.custom_vjp
def j_dense_tanh(x, w):
    return jnp.tanh(x @ w)


def j_dense_tanh_fwd(x, w):
    y = j_dense_tanh(x, w)
    return y, (x, w, y)


def j_dense_tanh_bwd(res, g):
    x, w, y = res
    gz = g * (1.0 - y * y)
    return (gz @ w.T, x.T @ gz)


j_dense_tanh.defvjp(j_dense_tanh_fwd, j_dense_tanh_bwd)

XM = rng.standard_normal((16, 32)).astype(np.float32)
WM = (0.2 * rng.standard_normal((32, 16))).astype(np.float32)
TM = rng.standard_normal((16, 16)).astype(np.float32)


def dense_loss(x, w, t):
    return ((dense_tanh(x, w) - t) ** 2).mean()


def j_dense_loss(x, w, t):
    return ((j_dense_tanh(x, w) - t) ** 2).mean()


def test_dense_forward_eager_and_jit_match_jax() -> None:
    want = j_dense_tanh(XM, WM)
    assert_close(dense_tanh(XM, WM), want, k=32)
    for backend in ("interpret", "npu"):
        assert_close(pto.jit(dense_tanh, backend=backend, machine="tiny")(XM, WM), want, k=32)


def test_dense_grad_and_vjp_match_jax() -> None:
    theirs = jax.grad(j_dense_loss, argnums=(0, 1))(XM, WM, TM)
    assert_close(pto.grad(dense_loss, argnums=(0, 1))(XM, WM, TM), theirs, k=32)
    y, pull = pto.vjp(dense_tanh, XM, WM)
    jy, jpull = jax.vjp(j_dense_tanh, XM, WM)
    assert_close(y, jy, k=32)
    assert_close(pull(pto.tensor(TM)), jpull(TM), k=32)


@pytest.mark.parametrize("backend", ["interpret", "npu"])
def test_dense_jit_of_grad_matches_jax(backend: str) -> None:
    g = pto.jit(pto.grad(dense_loss, argnums=(0, 1)), backend=backend, machine="tiny")
    assert_close(g(XM, WM, TM), jax.grad(j_dense_loss, argnums=(0, 1))(XM, WM, TM), k=32)


def test_the_backward_is_really_used() -> None:
    @pto.custom_vjp
    def doubled(x, w):
        return pto.tanh(x @ w)

    def doubled_bwd(res, g):
        gx, gw = dense_tanh_bwd(res, g)
        return (2.0 * gx, 2.0 * gw)

    doubled.defvjp(dense_tanh_fwd, doubled_bwd)
    truth = jax.grad(j_dense_loss, argnums=(0, 1))(XM, WM, TM)

    def loss(x, w, t):
        return ((doubled(x, w) - t) ** 2).mean()

    for g in (
        pto.grad(loss, argnums=(0, 1)),
        pto.jit(pto.grad(loss, argnums=(0, 1)), machine="tiny"),
    ):
        assert_close(g(XM, WM, TM), (2 * truth[0], 2 * truth[1]), k=32)


def test_grad_of_jit_and_the_traced_ir_round_trips() -> None:
    # grad of a jitted function that calls f: the call survives in the traced IR, by name
    inner = pto.jit(dense_tanh, backend="interpret")
    ours = pto.grad(lambda x, w: ((inner(x, w) - TM) ** 2).mean(), argnums=(0, 1))(XM, WM)
    assert_close(ours, jax.grad(j_dense_loss, argnums=(0, 1))(XM, WM, TM), k=32)
    traced = pto.make_graph(dense_loss)(XM, WM, TM)
    assert "custom_vjp_call %x, %w [fn='dense_tanh']" in str(traced)
    assert_round_trip(traced)
    body = inline(traced)
    assert "custom_vjp_call" not in str(body) and "tanh" in str(body)
    assert_round_trip(body.verify())


# ---- composition ------------------------------------------------------------------------


def test_several_results_nesting_and_groups() -> None:
    @pto.custom_vjp
    def two(x):
        return pto.softmax(x), log1pexp(x) * 3.0  # a composite group and a nested custom call

    def two_bwd(x, gs):
        ga, gb = gs
        s = pto.softmax(x)
        return (s * (ga - (ga * s).sum(-1, keepdims=True)) + gb * 3.0 * pto.sigmoid(x),)

    two.defvjp(lambda x: (two(x), x), two_bwd)

    @jax.custom_vjp
    def j_two(x):
        return jax.nn.softmax(x), j_log1pexp(x) * 3.0

    def j_two_bwd(x, gs):
        ga, gb = gs
        s = jax.nn.softmax(x)
        return (s * (ga - (ga * s).sum(-1, keepdims=True)) + gb * 3.0 * jax.nn.sigmoid(x),)

    j_two.defvjp(lambda x: (j_two(x), x), j_two_bwd)
    x = rng.standard_normal((4, 8)).astype(np.float32)

    def loss(x):
        a, b = two(x)
        return (a * a).sum() + b.mean()

    def j_loss(x):
        a, b = j_two(x)
        return (a * a).sum() + b.mean()

    want = jax.grad(j_loss)(x)
    assert_close(pto.grad(loss)(x), want, k=8)
    g = pto.jit(pto.grad(loss), machine="tiny")
    assert_close(g(x), want, k=8)
    text = str(g.lower(x).tensor_ir)
    assert "custom_vjp_call" not in text and "group @" in text
    traced = pto.make_graph(loss)(x)
    # (names are unique in a process: another test's "two" may have taken the plain name)
    assert re.search(r"\[fn='two(_\d+)?' result=1\]", str(traced)), str(traced)
    assert_round_trip(traced)


def test_without_defvjp_the_body_is_differentiated() -> None:
    @pto.custom_vjp
    def plain(x):
        return pto.sin(x) * x

    x = rng.standard_normal(5).astype(np.float32)
    ours = pto.grad(lambda x: plain(x).sum())(x)
    assert_close(ours, jax.grad(lambda x: (jnp.sin(x) * x).sum())(x))
    assert "custom_vjp_call" not in str(pto.make_graph(plain)(x))


def test_a_non_differentiable_body_needs_defvjp() -> None:
    kc = pytest.importorskip("pypto.ops.kernel_call")

    class Twice:  # a stand-in hand-written kernel: opaque to autodiff
        name = "twice_for_custom_vjp_test"

        def out_aval(self, avals, static):
            return avals[0]

        def interpret(self, arrays, static):
            return arrays[0] * np.float32(2)

        def jax(self, args, static):
            return args[0] * 2

        def cost(self, avals, static):
            return pto.ops.table.Cost(avals[0].size, "vector", avals[0].nbytes, avals[0].nbytes)

    kc.KERNELS[Twice.name] = Twice()
    try:

        def twice(x):
            return pto.core.dispatch.bind(kc.KERNEL_CALL, (x,), {"kernel": Twice.name})

        opaque = pto.custom_vjp(twice)
        x = np.arange(3, dtype=np.float32)
        with pytest.raises(pto.TraceError, match="cannot differentiate through the hand-written"):
            pto.grad(lambda x: opaque(x).sum())(x)
        opaque.defvjp(lambda x: (opaque(x), None), lambda _, g: (2.0 * g,))
        assert pto.grad(lambda x: opaque(x).sum())(x).numpy().tolist() == [2.0, 2.0, 2.0]
        g = pto.jit(pto.grad(lambda x: (opaque(x) * x).sum()), backend="interpret")
        assert g(x).numpy().tolist() == [0.0, 4.0, 8.0]
    finally:
        del kc.KERNELS[Twice.name]


# ---- errors -----------------------------------------------------------------------------


def _bad(bwd):
    @pto.custom_vjp
    def scaled(x, w):
        return x * w

    scaled.defvjp(lambda x, w: (scaled(x, w), (x, w)), bwd)
    return scaled


def test_wrong_number_of_cotangents() -> None:
    def bwd(res, g):  # forgets w
        return (g * res[1],)

    where = line() - 3
    f = _bad(bwd)
    with pytest.raises(pto.TraceError) as e:
        pto.grad(lambda x: f(x, pto.ones(3)).sum())(np.ones(3, np.float32))
    msg = str(e.value)
    assert f"bwd of custom_vjp function {f.name} returned 1 cotangent for its 2 inputs" in msg
    assert f"{HERE}:{where}" in msg


@pytest.mark.parametrize(
    ("wrong", "got"),
    [
        (lambda g: g.sum(), "f32[]"),
        (lambda g: g.astype(pto.float16), "f16[3]"),
    ],
)
def test_wrong_shape_or_dtype_of_a_cotangent(wrong, got) -> None:
    def bwd(res, g):
        return (g, wrong(g))

    where = line() - 3
    f = _bad(bwd)
    with pytest.raises(pto.TraceError) as e:
        pto.jit(pto.grad(lambda w: f(pto.ones(3), w).sum()))(np.ones(3, np.float32))
    msg = str(e.value)
    assert f"returned a cotangent of {got} for input 1, which is f32[3]" in msg
    assert f"function {f.name}:" in msg and f"{HERE}:{where}" in msg


def test_defvjp_needs_functions_and_fwd_a_pair() -> None:
    with pytest.raises(pto.TraceError, match="defvjp of log1pexp: bwd must be a function"):
        log1pexp.defvjp(log1pexp_fwd, None)  # type: ignore[arg-type]
    with pytest.raises(pto.TraceError, match="custom_vjp needs a function, got int"):
        pto.custom_vjp(3)  # type: ignore[arg-type]

    @pto.custom_vjp
    def h(x):
        return x * 2.0

    h.defvjp(lambda x: h(x), lambda r, g: (g,))
    with pytest.raises(
        pto.TraceError, match=r"fwd of custom_vjp function h(_\d+)? must return a pair"
    ):
        pto.grad(lambda x: h(x).sum())(np.ones(2, np.float32))
    with pytest.raises(pto.TraceError, match="called with keyword arguments"):
        pto.jit(lambda x: h(x=x))(np.ones(2, np.float32))


def test_closing_over_a_traced_value_is_refused() -> None:
    def loss(x, w):
        @pto.custom_vjp
        def f(x):
            return x * w

        f.defvjp(lambda x: (f(x), None), lambda r, g: (g,))
        return f(x).sum()

    with pytest.raises(pto.TraceError, match="closes over a value traced by an enclosing"):
        pto.grad(loss, argnums=1)(np.ones(2, np.float32), np.ones(2, np.float32))


def test_a_bwd_closing_over_a_traced_value_is_refused() -> None:
    # the value is the forward's (a Var of another graph): the backward's graph would take it
    # as a parameter nobody passes (this crashed in the interpreter before)
    def loss(w):
        a = w * 2.0

        @pto.custom_vjp
        def f(x):
            return x * 1.0

        f.defvjp(lambda x: (f(x), None), lambda r, g: (g * a,))
        return f(w).sum()

    for run in (pto.grad(loss), pto.jit(pto.grad(loss), backend="interpret")):
        with pytest.raises(
            pto.TraceError,
            match=r"bwd of custom_vjp function f(_\d+)? uses a value traced outside it",
        ) as e:
            run(np.ones(2, np.float32))
        assert "test_custom_vjp.py" in str(e.value)


# ---- source locations -------------------------------------------------------------------


def test_the_equations_of_bwd_carry_the_lines_of_bwd() -> None:
    """Under ``jit(value_and_grad(f))`` the call sits at the caller's line, and the equations
    ``bwd`` emits at the lines of ``bwd``: the code that made them, where a fix goes (JAX does
    the same). After inlining, the body's equations keep the body's lines."""
    x = rng.standard_normal((8, 128)).astype(np.float32)
    call = line() + 3

    def loss(x):
        return log1pexp(x).sum()

    body = log1pexp.__wrapped__.__code__.co_firstlineno + 2  # after @pto.custom_vjp and def
    bwd = log1pexp_bwd.__code__.co_firstlineno + 1
    low = pto.jit(pto.value_and_grad(loss)).lower(x)
    traced = printed_lines(low.traced, HERE)
    assert traced[:2] == [("custom_vjp_call", call), ("sum", call)]
    assert {n for op, n in traced[2:] if op in ("exp", "div")} == {bwd}
    assert {n for _, n in traced} == {call, bwd}
    assert {n for op, n in printed_lines(low.tensor_ir, HERE) if op == "log"} == {body}
