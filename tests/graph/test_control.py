"""pto.lax's control flow against jax.lax: values, gradients, vmap, jit on the NPU, errors."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto

RNG = np.random.default_rng(41)
X = RNG.standard_normal((3, 4)).astype(np.float32)
W = RNG.standard_normal((4, 4)).astype(np.float32) * 0.5


def _close(got: Any, want: Any, what: str, rtol: float = 1e-5) -> None:
    g_leaves, g_tree = jax.tree_util.tree_flatten(
        jax.tree_util.tree_map(np.asarray, got, is_leaf=lambda t: isinstance(t, pto.Tensor))
    )
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert g_tree == w_tree, f"{what}: {g_tree} != {w_tree}"
    for g, w in zip(g_leaves, w_leaves, strict=True):
        assert g.shape == np.shape(w) and g.dtype == np.asarray(w).dtype, what
        np.testing.assert_allclose(g, np.asarray(w), rtol=rtol, atol=1e-6, err_msg=what)


def _model(lib: Any, x: Any, w: Any) -> Any:
    """A little of everything: a branch on data, a loop with a pytree carry, a scan."""
    lax = pto.lax if lib is pto else jax.lax
    h = lax.cond(x.sum() > 0, lambda v: lib.tanh(v @ w), lambda v: v * 0.5, x)
    h = lax.switch(2, [lambda v: v, lambda v: -v, lambda v: v * v], h)

    def body(i: Any, c: Any) -> Any:
        return {"h": lib.sin(c["h"] @ w) + c["n"], "n": c["n"] * 0.9 + i}

    c = lax.fori_loop(0, 3, body, {"h": h, "n": jnp.float32(1.0) if lib is jnp else 1.0})

    def step(carry: Any, row: Any) -> Any:
        new = carry * 0.5 + row
        return new, (new * 2, lib.exp(row).sum())

    last, (ys, sums) = lax.scan(step, c["h"][0], c["h"], reverse=True)
    return (last * last).sum() + (ys * ys).sum() + sums.sum() + c["n"]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_control_flow_matches_jax_eager_jit_and_grad(sign: float) -> None:
    x = X * sign
    want = _model(jnp, x, W)
    _close(_model(pto, pto.tensor(x), pto.tensor(W)), want, "eager")
    _close(pto.jit(lambda a, b: _model(pto, a, b), machine="tiny")(x, W), want, "jit")
    g = pto.grad(lambda a, b: _model(pto, a, b), (0, 1))
    want_g = jax.grad(lambda a, b: _model(jnp, a, b), (0, 1))(x, W)
    _close(g(x, W), want_g, "grad", rtol=1e-4)
    _close(pto.jit(g, machine="tiny")(x, W), want_g, "jit(grad)", rtol=1e-4)


def test_a_traced_choice_under_vmap_selects_per_example() -> None:
    def f(lib: Any, v: Any) -> Any:
        lax = pto.lax if lib is pto else jax.lax
        k = (v.sum() * 2).astype(lib.int32)
        a = lax.cond(v[0] > 0, lambda u: u * 2, lambda u: lib.exp(u), v)
        b = lax.switch(k, [lambda u: u, lambda u: u + 1, lambda u: u * u], v)
        return a + b

    want = jax.vmap(lambda v: f(jnp, v))(X)
    _close(pto.vmap(lambda v: f(pto, v))(X), want, "vmap")
    _close(pto.jit(pto.vmap(lambda v: f(pto, v)), machine="tiny")(X), want, "jit(vmap)")


def _guarded(lib: Any, x: Any, w: Any) -> Any:
    """Branches whose gradients are NaN or infinite where they are not taken: ``log`` and
    ``sqrt`` at 0, a reciprocal of the closed-over ``w``."""
    lax = pto.lax if lib is pto else jax.lax
    k = (x[1] > 0).astype(lib.int32) + (x[2] > 0).astype(lib.int32)
    a = lax.cond(x[0] > 0, lambda v: lib.log(v).sum(), lambda v: (v * w).sum(), x)
    b = lax.switch(k, [lambda v: v * 3, lambda v: lib.sqrt(v), lambda v: v / w], x)
    return a + (b * b).sum()


@pytest.mark.parametrize(
    "x, w",
    [
        # the branches not taken (log, sqrt and 1/w) have 0 * inf in their VJPs here
        ([0.0, 0.0, -1.0, 0.0], [0.5, 0.0, 2.0, 0.0]),
        ([2.0, 1.0, 3.0, 0.5], [0.5, 1.0, 2.0, 4.0]),  # log and v / w taken
    ],
)
def test_a_traced_choice_differentiates_only_the_branch_taken(x: Any, w: Any) -> None:
    # JAX's gradient is the taken branch's alone, and so is pypto's: eagerly, staged, on the
    # NPU and under vmap (the predicate mapped too).
    x, w = np.array(x, np.float32), np.array(w, np.float32)
    want = jax.grad(lambda a, b: _guarded(jnp, a, b), (0, 1))(x, w)
    assert all(np.isfinite(np.asarray(g)).all() for g in want)
    g = pto.grad(lambda a, b: _guarded(pto, a, b), (0, 1))
    _close(g(x, w), want, "grad")
    _close(pto.jit(g, backend="interpret")(x, w), want, "jit(grad)")
    _close(pto.jit(g, machine="tiny")(x, w), want, "jit(grad) on the NPU")
    xs = np.stack([x, x[::-1], -x]).astype(np.float32)
    ws = np.stack([w, w, w + 1.0]).astype(np.float32)

    def batched(lib: Any, a: Any, b: Any) -> Any:
        vm = pto.vmap if lib is pto else jax.vmap
        return vm(lambda r, s: _guarded(lib, r, s))(a, b).sum()

    want = jax.grad(lambda a, b: batched(jnp, a, b), (0, 1))(xs, ws)
    _close(pto.grad(lambda a, b: batched(pto, a, b), (0, 1))(xs, ws), want, "grad(vmap)")
    _close(
        pto.vmap(pto.grad(lambda a, b: _guarded(pto, a, b), (0, 1)))(xs, ws),
        jax.vmap(jax.grad(lambda a, b: _guarded(jnp, a, b), (0, 1)))(xs, ws),
        "vmap(grad)",
    )


def test_a_traced_choice_has_second_derivatives_of_the_branch_taken() -> None:
    def f(lib: Any, x: Any) -> Any:
        lax = pto.lax if lib is pto else jax.lax
        return lax.cond(x > 0, lambda v: lib.sqrt(v) * v, lambda v: v * v * v, x)

    for x0 in (0.0, 1.5, -2.0):
        want = jax.grad(jax.grad(lambda v: f(jnp, v)))(np.float32(x0))
        got = pto.grad(pto.grad(lambda v: f(pto, v)))(pto.tensor(np.float32(x0)))
        _close(got, want, f"grad(grad) at {x0}")


def test_a_choice_mapped_only_in_its_predicate_selects_per_example() -> None:
    # only the predicate is batched: both branches see the same (closed-over) w
    w = pto.tensor(W[0])

    def f(lib: Any, p: Any, w: Any) -> Any:
        lax = pto.lax if lib is pto else jax.lax
        return lax.cond(p > 0, lambda: lib.log(w * w).sum(), lambda: (w * 2).sum())

    ps = np.array([1.0, -1.0, 0.5], np.float32)
    want = jax.grad(lambda w: jax.vmap(lambda p: f(jnp, p, w))(ps).sum())(np.asarray(w))
    got = pto.grad(lambda w: pto.vmap(lambda p: f(pto, p, w))(ps).sum())(w)
    _close(got, want, "grad(vmap) over the predicate")


def test_a_traced_choice_is_one_call_that_keeps_its_branches_composites() -> None:
    # the Tensor IR records one call (its backward is a choice too); inlined before tiling,
    # where a softmax inside a branch is still one group, fused into one row kernel
    x = RNG.standard_normal((8, 32)).astype(np.float32)

    def f(v: Any) -> Any:
        return pto.lax.cond(v.sum() > 0, lambda u: pto.softmax(u, -1), lambda u: u * 2.0, v)

    traced = str(pto.make_graph(f)(x))
    assert traced.count("custom_vjp_call") == 1, traced
    low = pto.jit(f, machine="tiny").lower(x)
    assert "custom_vjp_call" not in str(low.tensor_ir) and "softmax" in str(low.tensor_ir)
    assert any("softmax" in k.name for k in low.tile_ir.kernels)
    want = jax.nn.softmax(x, -1) if x.sum() > 0 else x * 2
    _close(pto.jit(f, machine="tiny")(x), np.asarray(want), "npu")


def test_scan_forms_match_jax() -> None:
    xs = {"a": X, "b": X[:, :2] * 2}

    def f(c: Any, x: Any) -> Any:
        return c + x["a"].sum() - x["b"][0], None

    got = pto.lax.scan(f, 0.5, {k: pto.tensor(v) for k, v in xs.items()})
    want = jax.lax.scan(f, jnp.float32(0.5), xs)
    _close(got[0], want[0], "carry")
    assert got[1] is None
    got = pto.lax.scan(lambda c, _: (c * 2, c), pto.tensor(1.0), length=4)
    _close(got, jax.lax.scan(lambda c, _: (c * 2, c), jnp.float32(1.0), length=4), "length")
    got = pto.lax.scan(lambda c, x: (c, x * 2), pto.tensor(0.0), pto.zeros((0, 3)))
    assert got[1].shape == (0, 3) and got[1].dtype is pto.float32
    _close(pto.lax.map(lambda r: r.max(), X), jax.lax.map(lambda r: r.max(), X), "map")


def test_choices_on_known_values_run_one_branch_and_loops_run_eagerly() -> None:
    ran = []

    def branch(tag: str) -> Any:
        def fn(v: Any) -> Any:
            ran.append(tag)
            return v + 1

        return fn

    assert pto.lax.cond(True, branch("t"), branch("f"), pto.tensor(1.0)).item() == 2.0
    assert ran == ["t", "f"]  # the other branch traced (to check it agrees), not run eagerly
    assert pto.lax.switch(7, [lambda v: v, lambda v: v * 3], 2).item() == 6  # clamped
    assert pto.lax.switch(-3, [lambda v: v, lambda v: v * 3], 2).item() == 2
    got = pto.lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 3, c[1] * 2), (0, 1))
    assert [int(v) for v in got] == [12, 16]


def test_control_flow_misuse_is_a_clear_error() -> None:
    x = pto.tensor(X)
    with pytest.raises(
        pto.TraceError, match=r"cond: true_fun's output is f32\[3,4\] but false_fun's is f32\[\]"
    ):
        pto.lax.cond(True, lambda v: v, lambda v: v.sum(), x)
    with pytest.raises(
        pto.TraceError, match=r"switch: branch 1's output has structure \* but branch 0's has"
    ):
        pto.jit(lambda v: pto.lax.switch(v[0, 0] > 0, [lambda u: (u, u), lambda u: u], v))(X)
    with pytest.raises(pto.TraceError, match=r"cond: pred must be a scalar, got bool\[3,4\]"):
        pto.lax.cond(x > 0, lambda v: v, lambda v: v, x)
    with pytest.raises(pto.TraceError, match=r"pred must be a bool or an integer, got f32"):
        pto.lax.cond(x[0, 0], lambda v: v, lambda v: v, x)
    with pytest.raises(
        pto.TraceError,
        match=r"fori_loop: the body's output is f32\[4\] but its input is f32\[3,4\]",
    ):
        pto.lax.fori_loop(0, 2, lambda i, v: v.sum(0), x)
    with pytest.raises(pto.TraceError, match=r"fori_loop: the upper bound is traced") as e:
        pto.jit(lambda v, n: pto.lax.fori_loop(0, n, lambda i, u: u * 2, v))(
            X, np.array(3, np.int32)
        )
    assert "static_argnums" in str(e.value)
    with pytest.raises(pto.TraceError, match=r"while_loop: the condition is traced") as e:
        pto.jit(lambda v: pto.lax.while_loop(lambda u: u.sum() < 9, lambda u: u * 2, v))(X)
    assert "fori_loop with a static trip count" in str(e.value)
    with pytest.raises(pto.TraceError, match=r"scan: the leading axes of xs .* disagree"):
        pto.lax.scan(lambda c, x: (c, x), 0.0, (X, X[:2]))
    with pytest.raises(pto.TraceError, match=r"scan: f's carry output is f32\[4\]"):
        pto.lax.scan(lambda c, x: (x, x), 0.0, X)
    with pytest.raises(pto.TraceError, match=r"pto\.lax\.cond for branches"):
        pto.jit(lambda v: v * 2 if v.sum() > 0 else v)(X)


def test_a_traced_choice_lives_as_long_as_its_graph() -> None:
    """Each traced ``cond`` is a call of a function of its own; the registry holds it weakly,
    so a gradient traced afresh on every call does not keep one per call for the rest of the
    process, while a jitted graph keeps its own alive and runs again."""
    import gc

    from pypto.ops.custom_vjp_call import CALLS

    def loss(x: Any) -> Any:
        return pto.lax.cond(x.sum() > 0, lambda v: (v * v).sum(), lambda v: v.sum(), x)

    x = pto.ones(3)
    g = pto.grad(loss)
    np.testing.assert_array_equal(np.asarray(g(x)), [2.0, 2.0, 2.0])
    gc.collect()
    before = len(CALLS)
    for _ in range(20):
        g(x)
    gc.collect()
    assert len(CALLS) <= before + 2
    f = pto.jit(g)
    f(x)
    gc.collect()
    np.testing.assert_array_equal(np.asarray(f(x)), [2.0, 2.0, 2.0])

    # a name is never reused, even after its function is gone, so an old graph's text
    # cannot name a newer function
    def twin(v: Any) -> Any:
        return v

    first = str(pto.custom_vjp(twin).name)  # the plain name: the CallName holds it
    gc.collect()
    assert first not in CALLS  # nothing holds it
    second = pto.custom_vjp(twin).name
    assert second != first and second.startswith("twin")
