"""``pto.checkpoint`` against ``jax.checkpoint``: values and derivatives with every policy,
what each policy recomputes (in the compiled IR and in the residuals), what it changes on
the simulated chip, the transforms around it, and its errors."""

from __future__ import annotations

import contextlib
import io
import os
from collections import Counter
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import ad_checkpoint
from jax._src.ad_checkpoint import saved_residuals as jax_saved_residuals

import pypto as pto
from pypto.graph.remat import saved_residuals

from .close import assert_close

HERE = os.path.basename(__file__)
RNG = np.random.default_rng(7)
X = RNG.standard_normal((4, 6)).astype(np.float32)
W = (RNG.standard_normal((6, 5)) * 0.5).astype(np.float32)


def layer(m: Any, name: Any) -> Any:
    """``sum(sin(x @ w) ** 2)`` in the array module ``m``; ``name`` tags ``sin``'s output."""

    def f(x: Any, w: Any) -> Any:
        h = x @ w
        a = name(m.sin(h), "a")
        return (a * a).sum()

    return f


PTO = layer(pto, pto.checkpoint_name)
JAX = layer(jnp, ad_checkpoint.checkpoint_name)
P, JP = pto.checkpoint_policies, jax.checkpoint_policies

# policy -> (pypto's, JAX's, matmuls and sines in the compiled value_and_grad)
POLICIES = {
    "nothing_saveable": (P.nothing_saveable, JP.nothing_saveable, 4, 2),
    "default": (None, None, 4, 2),
    "dots_saveable": (P.dots_saveable, JP.dots_saveable, 3, 2),
    "dots_with_no_batch_dims": (
        P.dots_with_no_batch_dims_saveable,
        JP.dots_with_no_batch_dims_saveable,
        3,
        2,
    ),
    "everything_saveable": (P.everything_saveable, JP.everything_saveable, 3, 1),
    "save_only_these_names": (
        P.save_only_these_names("a"),
        JP.save_only_these_names("a"),
        4,
        1,
    ),
    "save_any_names_but_these": (
        P.save_any_names_but_these("b"),
        JP.save_any_names_but_these("b"),
        4,
        1,
    ),
    "save_from_both_policies": (
        P.save_from_both_policies(P.dots_saveable, P.save_only_these_names("a")),
        JP.save_from_both_policies(JP.dots_saveable, JP.save_only_these_names("a")),
        3,
        1,
    ),
}


@pytest.mark.parametrize("which", list(POLICIES))
def test_each_policy_gives_jaxs_values_and_recomputes_what_it_does_not_save(which: str) -> None:
    ours, theirs, matmuls, sines = POLICIES[which]
    f = pto.value_and_grad(pto.checkpoint(PTO, policy=ours), argnums=(0, 1))
    want = jax.value_and_grad(jax.checkpoint(JAX, policy=theirs), argnums=(0, 1))(X, W)
    assert_close(f(X, W), want, k=6)
    jitted = pto.jit(f, backend="interpret")
    assert_close(jitted(X, W), want, k=6)
    ops = Counter(e.op for e in jitted.lower(X, W).tensor_ir.eqns)
    # forward: one matmul and one sine; backward: two matmuls (dx, dw), plus the replay
    assert (ops["matmul"], ops["sin"]) == (matmuls, sines), ops
    assert "optimization_barrier" not in ops and "checkpoint_name" not in ops


def test_without_checkpoint_nothing_is_recomputed() -> None:
    jitted = pto.jit(pto.value_and_grad(PTO, argnums=(0, 1)), backend="interpret")
    ops = Counter(e.op for e in jitted.lower(X, W).tensor_ir.eqns)
    assert (ops["matmul"], ops["sin"]) == (3, 1)


def test_prevent_cse_false_lets_cse_merge_the_replay() -> None:
    f = pto.value_and_grad(pto.checkpoint(PTO, prevent_cse=False), argnums=(0, 1))
    jitted = pto.jit(f, backend="interpret")
    ops = Counter(e.op for e in jitted.lower(X, W).tensor_ir.eqns)
    assert (ops["matmul"], ops["sin"]) == (3, 1)
    assert_close(jitted(X, W), jax.value_and_grad(JAX, argnums=(0, 1))(X, W), k=6)


@pytest.mark.parametrize(
    "which", ["nothing_saveable", "dots_saveable", "save_only_these_names", "everything_saveable"]
)
def test_saved_residuals_are_jaxs(which: str) -> None:
    """What the backward pass reads from the forward one: the arguments, and the values the
    policy saves (the matmul's output, or the named sine)."""
    ours, theirs, _, _ = POLICIES[which]
    got = saved_residuals(pto.checkpoint(PTO, policy=ours), X, W)
    want = jax_saved_residuals(jax.checkpoint(JAX, policy=theirs), X, W)
    assert sorted(a.shape for a, _ in got) == sorted(a.shape for a, _ in want)
    assert [s for _, s in got][:2] == ["from the argument x", "from the argument w"]
    where = f"from {HERE}:"
    extra = {s.split(" from")[0] for _, s in got[2:]}
    assert all(where in s for _, s in got[2:]), got
    assert (
        extra
        == {
            "nothing_saveable": set(),
            "dots_saveable": {"output of matmul"},
            "save_only_these_names": {"output of sin"},
            "everything_saveable": {"output of matmul", "output of sin"},  # JAX: cos, not matmul
        }[which]
    )


def test_print_saved_residuals_prints_one_line_each() -> None:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        pto.ad_checkpoint.print_saved_residuals(pto.checkpoint(PTO), X, W)
    assert buf.getvalue() == "f32[4,6] from the argument x\nf32[6,5] from the argument w\n"


def test_batch_dims_decide_dots_with_no_batch_dims() -> None:
    from pypto.ops.table import AVal

    policy, f32 = P.dots_with_no_batch_dims_saveable, pto.float32

    def av(*shape: int) -> AVal:
        return AVal(shape, f32)

    assert policy("matmul", av(3, 4, 5), av(5, 6))  # a weight: rows of the batch are free dims
    assert policy("matmul", av(1, 4, 5), av(2, 5, 6))  # size 1: broadcast, not batched
    assert policy("matmul", av(5), av(5, 6))
    assert not policy("matmul", av(3, 4, 5), av(3, 5, 6))
    assert not policy("sin", av(3))
    assert P.dots_saveable("matmul", av(3, 4, 5), av(3, 5, 6))


# ---- pytrees, keywords, static arguments, several results ------------------------------------


def mlp(m: Any) -> Any:
    def f(params: dict[str, Any], x: Any, *, scale: Any) -> Any:
        h = m.tanh(x @ params["w"] + params["b"])
        return {"out": h * scale, "norm": (h * h).sum(axis=-1)}

    return f


def test_pytree_arguments_keywords_and_several_results() -> None:
    params = {"w": W, "b": RNG.standard_normal(5).astype(np.float32)}
    scale = np.float32(1.5)

    def loss(m: Any, ck: Any) -> Any:
        g = ck(mlp(m))
        return lambda p, x: g(p, x, scale=scale)["out"].sum() + g(p, x, scale=scale)["norm"].sum()

    want = jax.grad(loss(jnp, jax.checkpoint), argnums=(0, 1))(params, X)
    for f in (
        pto.grad(loss(pto, pto.checkpoint), argnums=(0, 1)),
        pto.jit(pto.grad(loss(pto, pto.checkpoint), argnums=(0, 1)), backend="interpret"),
    ):
        assert_close(f(params, X), want, k=6)


def test_static_argnums_are_python_values() -> None:
    def f(x: Any, n: int) -> Any:
        for _ in range(n):
            x = pto.sin(x)
        return x.sum()

    def jf(x: Any, n: int) -> Any:
        for _ in range(n):
            x = jnp.sin(x)
        return x.sum()

    ours = pto.checkpoint(f, static_argnums=(1,))
    theirs = jax.checkpoint(jf, static_argnums=(1,))
    for n in (1, 3):
        assert_close(pto.grad(ours)(X, n), jax.grad(theirs)(X, n), k=4)
        assert_close(pto.jit(pto.grad(ours), static_argnums=1)(X, n), jax.grad(theirs)(X, n), k=4)


def test_eagerly_it_simply_runs() -> None:
    f = pto.remat(lambda x: pto.sin(x) * 2.0)
    assert pto.remat is pto.checkpoint
    assert_close(f(X), np.sin(X) * 2)


# ---- transforms around it ---------------------------------------------------------------------


def test_second_order_jvp_vmap_and_nested_checkpoints() -> None:
    inner = pto.checkpoint(lambda v: pto.sin(v) * v)
    j_inner = jax.checkpoint(lambda v: jnp.sin(v) * v)
    ours = pto.checkpoint(lambda v: (inner(pto.tanh(v)) ** 2).sum())
    theirs = jax.checkpoint(lambda v: (j_inner(jnp.tanh(v)) ** 2).sum())
    x = X[0]
    assert_close(pto.hessian(ours)(x), jax.hessian(theirs)(x), k=12)
    assert_close(pto.jvp(ours, (x,), (X[1],)), jax.jvp(theirs, (x,), (X[1],)), k=12)
    assert_close(pto.vmap(pto.grad(ours))(X), jax.vmap(jax.grad(theirs))(X), k=6)
    assert_close(
        pto.jit(pto.vmap(pto.grad(ours)), backend="interpret")(X),
        jax.vmap(jax.grad(theirs))(X),
        k=6,
    )
    assert_close(
        pto.grad(lambda v: pto.vmap(ours)(v).sum())(X),
        jax.grad(lambda v: jax.vmap(theirs)(v).sum())(X),
        k=6,
    )


def test_a_checkpointed_scan_body() -> None:
    def body(m: Any, ck: Any) -> Any:
        @ck
        def step(c: Any, x: Any) -> Any:
            c = m.tanh(c * 0.9 + x)
            return c, c.sum()

        return step

    def loss(m: Any, ck: Any, scan: Any) -> Any:
        return lambda xs: scan(body(m, ck), xs[0] * 0.0, xs)[1].sum()

    want = jax.grad(loss(jnp, jax.checkpoint, jax.lax.scan))(X)
    assert_close(pto.grad(loss(pto, pto.checkpoint, pto.lax.scan))(X), want, k=6)
    jitted = pto.jit(pto.grad(loss(pto, pto.checkpoint, pto.lax.scan)), backend="interpret")
    assert_close(jitted(X), want, k=6)


def test_a_print_inside_prints_once() -> None:
    def f(x: Any) -> Any:
        pto.debug.print("s={}", x.sum())
        return pto.sin(x).sum()

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        pto.jit(pto.grad(pto.checkpoint(f)), backend="interpret")(X[0])
    assert buf.getvalue().count("s=") == 1


# ---- on the simulated chip ------------------------------------------------------------------


def test_on_the_npu_a_recomputed_chain_keeps_its_intermediates_out_of_hbm() -> None:
    """An elementwise chain's backward needs its intermediate values. Behind ``log(sum)``
    the backward cannot run in the forward's kernel (it scales by ``1 / sum``). Kept, the
    forward kernel writes the intermediates to HBM and the backward's reads them back;
    recomputed, the replay fuses into the backward's own kernel, which reads ``x`` alone."""
    x = pto.tensor(RNG.standard_normal((512, 1024)).astype(np.float16))

    def chain(v: Any) -> Any:
        y = pto.tanh(v) * pto.sigmoid(v * 2.0)
        return pto.exp(-y * y) + y

    profiles = {}
    for label, f in (("kept", chain), ("recomputed", pto.checkpoint(chain))):
        g = pto.jit(pto.value_and_grad(lambda v, f=f: pto.log(f(v).astype(pto.float32).sum())))
        profiles[label] = g.profile(x, numerics=False, trace=False)
    kept, recomputed = profiles["kept"], profiles["recomputed"]
    assert recomputed.hbm_bytes < 0.6 * kept.hbm_bytes, (recomputed.hbm_bytes, kept.hbm_bytes)
    assert recomputed.cycles < 0.7 * kept.cycles, (recomputed.cycles, kept.cycles)


def test_on_tiny_the_checkpointed_gradient_is_jaxs() -> None:
    x = RNG.standard_normal((32, 64)).astype(np.float32)
    w = (RNG.standard_normal((64, 48)) * 0.2).astype(np.float32)
    ours = pto.checkpoint(PTO, policy=P.dots_saveable)
    theirs = jax.checkpoint(JAX, policy=JP.dots_saveable)
    got = pto.jit(pto.value_and_grad(ours, argnums=(0, 1)), machine="tiny")(x, w)
    assert_close(got, jax.value_and_grad(theirs, argnums=(0, 1))(x, w), k=64)


# ---- errors -----------------------------------------------------------------------------------


def test_bad_uses_are_clear_errors() -> None:
    with pytest.raises(pto.TraceError, match="checkpoint needs a function, got int"):
        pto.checkpoint(3)  # type: ignore[arg-type]
    with pytest.raises(pto.TraceError, match="policy must be a function, got str"):
        pto.checkpoint(PTO, policy="dots")  # type: ignore[arg-type]
    with pytest.raises(pto.TraceError, match="checkpoint_name needs a string name, got int"):
        pto.checkpoint_name(X, 3)  # type: ignore[arg-type]

    def bad_policy(op: str, *avals: Any, **params: Any) -> bool:
        raise KeyError(op)

    f = pto.checkpoint(PTO, policy=bad_policy)
    with pytest.raises(pto.TraceError, match=r"policy 'bad_policy' failed on matmul of f32\[4,6\]"):
        pto.grad(f)(X, W)

    g = pto.checkpoint(lambda x, how: x * 2 if how == "double" else x, static_argnums=1)
    with pytest.raises(pto.TraceError, match="a static argument is not hashable"):
        pto.grad(lambda x: g(x, ["double"]).sum())(X)
    h = pto.checkpoint(lambda x, how: x * 2)
    with pytest.raises(pto.TraceError, match="argument leaf 1 is a str") as e:
        pto.grad(lambda x: h(x, "double").sum())(X)
    assert e.value.hint is not None and "static_argnums" in e.value.hint
    with pytest.raises(pto.TraceError, match=r"static_argnums=\(2,\) but was called with 1"):
        pto.grad(lambda x: pto.checkpoint(pto.sin, static_argnums=2)(x).sum())(X)


def test_an_error_inside_names_the_users_line() -> None:
    def f(x: Any) -> Any:
        return x @ pto.ones((3, 3))

    where = f.__code__.co_firstlineno + 1
    with pytest.raises(pto.ShapeError) as e:
        pto.grad(lambda x: pto.checkpoint(f)(x).sum())(X)
    assert f"{HERE}:{where}" in str(e.value)


def test_each_result_walks_only_its_own_path() -> None:
    """A call with two results is two equations; each one's rule carries only its own
    cotangent (no products with zeros for the other), and CSE shares the one replay."""
    ours = pto.checkpoint(lambda v: (pto.sin(v), pto.cos(v * 2.0)))
    theirs = jax.checkpoint(lambda v: (jnp.sin(v), jnp.cos(v * 2.0)))
    f = pto.value_and_grad(lambda v: ours(v)[0].sum() + (ours(v)[1] ** 2).sum())
    want = jax.value_and_grad(lambda v: theirs(v)[0].sum() + (theirs(v)[1] ** 2).sum())(X)
    jitted = pto.jit(f, backend="interpret")
    assert_close(jitted(X), want, k=6)
    ir = jitted.lower(X).tensor_ir
    assert not [v for v, a in ir.consts if not np.any(a)], "a zero cotangent was walked"
    ops = Counter(e.op for e in ir.eqns)
    # forward: sin, cos; backward: sin's derivative (a cos) and cos's (a sin); the square,
    # outside the checkpoint, reads the forward's cos
    assert (ops["sin"], ops["cos"]) == (2, 2), ops


def test_a_sums_gradient_runs_in_the_forwards_kernel() -> None:
    """The cotangent of ``sum`` is a constant spread over its input; read as a scalar, it
    ties the backward to nothing the forward computes after its elementwise ops, so the
    whole backward joins the forward's kernel and nothing needs recomputing."""

    def chain(v: Any) -> Any:
        y = pto.tanh(v) * pto.sigmoid(v * 2.0)
        return pto.exp(-y * y) + y

    g = pto.jit(pto.value_and_grad(lambda v: chain(v).sum()), backend="interpret")
    ir = g.lower(X).tensor_ir
    assert [name for _, name in ir.groups] == ["tanh_sub", "mul_sigmoid_mul_neg_etc", "sum"]
    assert "broadcast_to" not in {e.op for e in ir.eqns}

    def jchain(v: Any) -> Any:
        y = jnp.tanh(v) * jax.nn.sigmoid(v * 2.0)
        return jnp.exp(-y * y) + y

    assert_close(g(X), jax.value_and_grad(lambda v: jchain(v).sum())(X), k=24)


def test_a_body_closing_over_traced_weights() -> None:
    """``checkpoint(lambda x: layer(w, x))`` inside the differentiated function: the weights
    it reads become arguments of the call, so they get their gradient, and are recomputed
    with the rest."""

    def loss(m: Any, ck: Any) -> Any:
        def f(w: Any, x: Any) -> Any:
            layer = ck(lambda x: m.tanh(x @ w))
            return (layer(x) ** 2).sum()

        return f

    want = jax.value_and_grad(loss(jnp, jax.checkpoint), argnums=(0, 1))(W, X)
    f = pto.value_and_grad(loss(pto, pto.checkpoint), argnums=(0, 1))
    assert_close(f(W, X), want, k=6)
    jitted = pto.jit(f, backend="interpret")
    assert_close(jitted(W, X), want, k=6)
    ops = Counter(e.op for e in jitted.lower(W, X).tensor_ir.eqns)
    assert (ops["matmul"], ops["tanh"]) == (4, 2), ops
