"""Reverse mode over the Tensor IR against jax.grad: models, transforms composed, errors."""

from __future__ import annotations

import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto
from pypto.graph.autodiff import backward_func
from pypto.graph.tracer import trace
from pypto.reference import compare

from .locations import line, printed_lines
from .roundtrip import assert_round_trip

HERE = os.path.basename(__file__)


def assert_grads_close(ours, theirs, k: int, truth=None) -> None:
    """Ours within the tolerance table of JAX's gradient.

    For bfloat16, two bf16 computations of a gradient with cancellation (layer norm's backward)
    can differ from each other by more than either differs from the exact value. There the
    reference is JAX's float32 gradient (``truth``) at the same bf16-rounded inputs, and ours
    must also stay within a small factor (3 times, plus 2 ulp) of JAX's own bf16 error.
    """
    leaves_a = jax.tree_util.tree_leaves(jax.tree_util.tree_map(np.asarray, ours))
    leaves_b = jax.tree_util.tree_leaves(theirs)
    leaves_t = leaves_b if truth is None else jax.tree_util.tree_leaves(truth)
    assert len(leaves_a) == len(leaves_b) == len(leaves_t)
    for i, (a, b, t) in enumerate(zip(leaves_a, leaves_b, leaves_t, strict=True)):
        t = np.asarray(t).astype(np.asarray(a).dtype)
        c = compare(f"grad[{i}]", a, t, k=k)
        assert c.ok, str(c)
        if truth is not None:
            err_ours = np.abs(np.asarray(a, np.float32) - np.asarray(t, np.float32)).max()
            err_jax = np.abs(np.asarray(b, np.float32) - np.asarray(t, np.float32)).max()
            ulp = float(np.abs(t.astype(np.float32)).max()) * 2.0**-7  # bf16 spacing at the top
            assert err_ours <= 3 * err_jax + 2 * ulp, (i, err_ours, err_jax)


def f32_tree(tree):
    return jax.tree_util.tree_map(lambda a: np.asarray(a).astype(np.float32), tree)


# ---- model 1: MLP with softmax cross-entropy ---------------------------------------------


def mlp_loss(p, x, onehot):
    h = pto.gelu(x @ p["w1"] + p["b1"])
    logits = (h @ p["w2"] + p["b2"]).astype(pto.float32)
    return -(onehot * pto.log_softmax(logits)).sum(-1).mean()


def mlp_loss_jax(p, x, onehot):
    def mm(a, b):
        return jnp.matmul(a, b, preferred_element_type=jnp.float32).astype(a.dtype)

    h = jax.nn.gelu(mm(x, p["w1"]) + p["b1"], approximate=True)
    logits = (mm(h, p["w2"]) + p["b2"]).astype(jnp.float32)
    return -(onehot * jax.nn.log_softmax(logits)).sum(-1).mean()


def mlp_params(dtype):
    return {
        "w1": pto.random.normal(1, (16, 32), dtype, std=0.25),
        "b1": pto.random.normal(2, (32,), dtype, std=0.1),
        "w2": pto.random.normal(3, (32, 10), dtype, std=0.2),
        "b2": pto.random.normal(4, (10,), dtype, std=0.1),
    }


@pytest.mark.parametrize("dtype", [pto.float32, pto.bfloat16], ids=str)
def test_mlp_softmax_cross_entropy(dtype) -> None:
    p = mlp_params(dtype)
    x = pto.random.normal(0, (8, 16), dtype)
    onehot = pto.tensor(np.eye(10, dtype=np.float32)[np.arange(8) % 10])
    loss, g = pto.value_and_grad(mlp_loss)(p, x, onehot)
    assert_round_trip(pto.jit(pto.grad(mlp_loss)).lower(p, x, onehot).tensor_ir)
    pj = {k: np.asarray(v) for k, v in p.items()}
    lj, gj = jax.value_and_grad(mlp_loss_jax)(pj, np.asarray(x), np.asarray(onehot))
    assert compare("loss", loss, np.asarray(lj), k=32).ok
    assert set(g) == set(p) and all(g[k].dtype is dtype for k in g)
    truth = None
    if dtype is pto.bfloat16:
        truth = jax.grad(mlp_loss_jax)(f32_tree(pj), f32_tree(x), np.asarray(onehot))
    assert_grads_close(g, gj, k=32, truth=truth)


# ---- model 2: layer_norm + rms_norm stack ------------------------------------------------


def norms_loss(p, x):
    h = pto.layer_norm(x, p["ln_w"], p["ln_b"])
    h = pto.rms_norm(h @ p["w"], p["g"])
    return (h.astype(pto.float32) ** 2).mean()


def norms_loss_jax(p, x):
    def ln(x, w, b, eps=1e-5):
        mu = x.mean(-1, keepdims=True)
        xc = x - mu
        return xc * jax.lax.rsqrt((xc * xc).mean(-1, keepdims=True) + eps) * w + b

    def rms(x, g, eps=1e-6):
        return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + eps) * g

    h = ln(x, p["ln_w"], p["ln_b"])
    h = jnp.matmul(h, p["w"], preferred_element_type=jnp.float32).astype(h.dtype)
    return (rms(h, p["g"]).astype(jnp.float32) ** 2).mean()


@pytest.mark.parametrize("dtype", [pto.float32, pto.bfloat16], ids=str)
def test_layer_norm_rms_norm_stack(dtype) -> None:
    p = {
        "ln_w": pto.random.normal(1, (24,), dtype, mean=1.0, std=0.1),
        "ln_b": pto.random.normal(2, (24,), dtype, std=0.1),
        "w": pto.random.normal(3, (24, 12), dtype, std=0.2),
        "g": pto.random.normal(4, (12,), dtype, mean=1.0, std=0.1),
    }
    x = pto.random.normal(0, (6, 24), dtype)
    pj = {k: np.asarray(v) for k, v in p.items()}
    low = dtype is pto.bfloat16
    for argnums in (0, 1):
        g = pto.grad(norms_loss, argnums=argnums)(p, x)
        gj = jax.grad(norms_loss_jax, argnums=argnums)(pj, np.asarray(x))
        truth = jax.grad(norms_loss_jax, argnums)(f32_tree(pj), f32_tree(x)) if low else None
        assert_grads_close(g, gj, k=24, truth=truth)


# ---- model 3: causal attention -----------------------------------------------------------


def attn_loss(wq, wk, wv, x):
    q, k, v = x @ wq, x @ wk, x @ wv
    o = pto.scaled_dot_product_attention(q, k, v, causal=True)
    return (o.astype(pto.float32) ** 2).sum()


def attn_loss_jax(wq, wk, wv, x):
    def mm(a, b):
        return jnp.matmul(a, b, preferred_element_type=jnp.float32).astype(a.dtype)

    q, k, v = mm(x, wq), mm(x, wk), mm(x, wv)
    s = mm(q, jnp.swapaxes(k, -1, -2)) * jnp.asarray(1 / np.sqrt(q.shape[-1]), q.dtype)
    s = jnp.where(np.tril(np.ones((s.shape[-2], s.shape[-1]), bool)), s, -jnp.inf)
    o = mm(jax.nn.softmax(s, axis=-1), v)
    return (o.astype(jnp.float32) ** 2).sum()


@pytest.mark.parametrize("dtype", [pto.float32, pto.bfloat16], ids=str)
def test_causal_attention(dtype) -> None:
    ws = [pto.random.normal(i, (16, 8), dtype, std=0.3) for i in (1, 2, 3)]
    x = pto.random.normal(0, (2, 12, 16), dtype)
    g = pto.grad(attn_loss, argnums=(0, 1, 2, 3))(*ws, x)
    assert_round_trip(pto.jit(pto.grad(attn_loss)).lower(*ws, x).tensor_ir)
    args = [np.asarray(a) for a in (*ws, x)]
    gj = jax.grad(attn_loss_jax, argnums=(0, 1, 2, 3))(*args)
    truth = None
    if dtype is pto.bfloat16:
        truth = jax.grad(attn_loss_jax, argnums=(0, 1, 2, 3))(*f32_tree(args))
    assert_grads_close(list(g), list(gj), k=24, truth=truth)


# ---- normalisations differentiated whole ---------------------------------------------------

SOFTMAX_BACKWARD = """\
func @lambda_vjp(%a0: f32[4,8], %a1: f32[4,8], %a2: f32[]) -> (f32[], f32[4,8], f32[4,8]) {
  %0: f32[4,1] = max %a0 [axes=(1,) keepdims=true]
  %1: f32[4,1] = stop_gradient %0
  %2: f32[4,8] = sub %a0, %1
  %3: f32[4,8] = exp %2
  %4: f32[4,1] = sum %3 [axes=(1,) keepdims=true]
  %5: f32[4,8] = div %3, %4
  %6: f32[4,8] = mul %5, %a1
  %7: f32[] = sum %6 [axes=(0, 1) keepdims=false]
  %8: f32[1,1] = reshape %a2 [shape=(1, 1)]
  %9: f32[4,8] = broadcast_to %8 [shape=(4, 8)]
  %10: f32[4,8] = mul %9, %a1
  %11: f32[4,8] = mul %9, %5
  %12: f32[4,8] = mul %10, %5
  %13: f32[4,1] = sum %12 [axes=(1,) keepdims=true]
  %14: f32[4,8] = sub %10, %13
  %15: f32[4,8] = mul %5, %14
  return %7, %15, %11
}"""


def _no_lines(text: str) -> str:
    return "\n".join(re.sub(r"\s+#.*$", "", ln) for ln in text.splitlines())


def test_softmax_backward_reads_only_its_output() -> None:
    """The whole rule ``P·(g - Σ g·P)``: the backward reads P (%5), not exp(x) (%3) or its sums
    (%4), which autodiff of the division and the exponential would keep for it."""
    x = np.ones((4, 8), np.float32)
    f = trace(lambda x, w: (pto.softmax(x) * w).sum(), [x, x])[0]
    b = backward_func(f, 1)
    assert _no_lines(str(b)) == SOFTMAX_BACKWARD
    kept = (b.eqns[3].out, b.eqns[4].out)
    assert not any(a in kept for e in b.eqns[8:] for a in e.inputs)
    # log_softmax: g - exp(out)·Σ g, from its output
    f = trace(lambda x, w: (pto.log_softmax(x) * w).sum(), [x, x])[0]
    b = backward_func(f, 1)
    out = b.eqns[6].out
    assert [e.op for e in b.eqns[9:]] == [
        "reshape", "broadcast_to", "mul", "mul", "exp", "sum", "mul", "sub"
    ]  # fmt: skip
    assert b.eqns[13].inputs == (out,)


def _manual_softmax(x, shift, w, extra):
    e = pto.exp(x - shift)
    s = e.sum(-1, keepdims=True)
    out = (e / s * w).sum()
    return out + (e * extra).sum() if extra else out


def _manual_softmax_jax(x, shift, w, extra):
    e = jnp.exp(x - shift)
    s = e.sum(-1, keepdims=True)
    out = (e / s * w).sum()
    return out + (e * extra).sum() if extra else out


@pytest.mark.parametrize(
    "case",
    ["idiom", "shift by the max", "exp used again", "shift varies along the axis", "log"],
)
def test_idioms_apply_only_where_the_whole_rule_holds(case: str) -> None:
    """The whole rule is exact where it applies and is not applied where it would drop a
    cotangent (an intermediate used elsewhere) or where the shift is not constant along the
    normalised axis (the result then depends on it): each case equals jax.grad."""
    from pypto.graph.autodiff import idioms

    x = pto.random.normal(0, (3, 6))
    w = pto.random.normal(1, (3, 6))
    row = pto.random.normal(2, (3, 1))
    extra = 0.0
    shift = row
    if case == "shift by the max":
        shift = None
    elif case == "exp used again":
        extra = 0.5
    elif case == "shift varies along the axis":
        shift = pto.random.normal(3, (3, 6))
    if case == "log":

        def fn(x, shift, w):
            y = x - shift
            return ((y - pto.log(pto.exp(y).sum(-1, keepdims=True))) * w).sum()

        def fj(x, shift, w):
            y = x - shift
            return ((y - jnp.log(jnp.exp(y).sum(-1, keepdims=True))) * w).sum()

        args = (x, shift, w)
    else:

        def fn(x, shift, w):
            sh = pto.stop_gradient(x.max(-1, keepdims=True)) if shift is None else shift
            return _manual_softmax(x, sh, w, extra)

        def fj(x, shift, w):
            sh = jax.lax.stop_gradient(x.max(-1, keepdims=True)) if shift is None else shift
            return _manual_softmax_jax(x, sh, w, extra)

        args = (x, shift if shift is not None else row, w)
    f = trace(fn, list(args))[0]
    found = [i.kind for i in idioms(f).values()]
    want = {
        "idiom": ["softmax"],
        "shift by the max": ["softmax"],
        "exp used again": [],
        "shift varies along the axis": [],
        "log": ["log_softmax"],
    }[case]
    assert found == want
    ours = pto.grad(fn, argnums=(0, 1, 2))(*args)
    theirs = jax.grad(fj, argnums=(0, 1, 2))(*(np.asarray(a) for a in args))
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.numpy(), np.asarray(b), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize(
    "case", ["attention", "v broadcast over the batch", "P read again", "softmax over axis 1"]
)
@pytest.mark.parametrize("dtype", [pto.float32, pto.float16], ids=str)
def test_softmax_into_a_matmul_sums_its_rows_from_the_matmuls_output(case: str, dtype) -> None:
    """``softmax(x) @ v`` (attention's P V): the rule ``P·(g vᵀ - Σ g·out)`` takes the row sums
    from the ``[.., Lq, Dv]`` output instead of the ``[.., Lq, Lk]`` scores; where P has another
    use, or the softmax is not over the matmul's contracted axis, the softmax's own rule
    applies. Each case equals jax.grad."""
    from pypto.graph.autodiff import idioms

    x = pto.random.normal(0, (2, 5, 7), dtype)
    v = pto.random.normal(
        1, (1, 7, 3) if case == "v broadcast over the batch" else (2, 7, 3), dtype
    )
    w = pto.random.normal(2, (2, 5, 3), dtype)
    axis = 1 if case == "softmax over axis 1" else -1
    again = case == "P read again"

    def fn(x, v, w):
        p = pto.softmax(x, axis)
        out = ((p @ v) * w).astype(pto.float32).sum()
        return out + p.astype(pto.float32).sum() * 0.5 if again else out

    def fj(x, v, w):
        p = jax.nn.softmax(x, axis)
        out = jnp.matmul(p, v, preferred_element_type=jnp.float32).astype(p.dtype) * w
        out = out.astype(jnp.float32).sum()
        return out + p.astype(jnp.float32).sum() * 0.5 if again else out

    f = trace(fn, [x, v, w])[0]
    want = "softmax" if again or axis == 1 else "softmax_matmul"
    assert [i.kind for i in idioms(f).values()] == [want]
    ours = pto.grad(fn, argnums=(0, 1, 2))(x, v, w)
    args = [np.asarray(a) for a in (x, v, w)]
    theirs = jax.grad(fj, argnums=(0, 1, 2))(*args)
    assert_grads_close(list(ours), list(theirs), k=8)


# ---- transforms composed -----------------------------------------------------------------


def f_scalar(x, y):
    return (pto.sin(x) * y + pto.exp(x * 0.1)).sum()


def test_jit_of_grad_and_grad_of_jit_agree_with_jax() -> None:
    x, y = pto.random.normal(0, (5,)), pto.random.normal(1, (5,))
    want = jax.grad(lambda a, b: (jnp.sin(a) * b + jnp.exp(a * 0.1)).sum())(
        np.asarray(x), np.asarray(y)
    )
    for g in (
        pto.grad(f_scalar),
        pto.jit(pto.grad(f_scalar)),
        pto.grad(pto.jit(f_scalar)),
        pto.jit(pto.grad(pto.jit(f_scalar))),
    ):
        np.testing.assert_allclose(g(x, y).numpy(), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_grad_of_jit_of_grad_is_a_second_derivative() -> None:
    d2 = pto.grad(lambda x: pto.grad(lambda y: (y**3).sum())(x).sum())
    np.testing.assert_allclose(d2(pto.tensor([1.0, 2.0])).numpy(), [6.0, 12.0], rtol=1e-6)


def test_backward_graph_is_ordinary_ir_that_lowers() -> None:
    low = pto.jit(pto.grad(lambda w, x: pto.relu(x @ w).sum())).lower(
        pto.ones((4, 3)), pto.ones((2, 4))
    )
    ops = [e.op for e in low.tensor_ir.eqns]
    assert "matmul" in ops and "transpose" in ops
    low.tensor_ir.verify()


def test_vjp_and_has_aux() -> None:
    x = pto.tensor([1.0, 2.0, 3.0])
    y, f_vjp = pto.vjp(lambda a: a * a, x)
    (ct,) = f_vjp(pto.ones(3))
    assert y.numpy().tolist() == [1.0, 4.0, 9.0] and ct.numpy().tolist() == [2.0, 4.0, 6.0]
    (g, aux) = pto.grad(lambda a: ((a * a).sum(), {"n": a.shape[0]}), has_aux=True)(x)
    assert g.numpy().tolist() == [2.0, 4.0, 6.0] and aux == {"n": 3}
    (v, aux2), g2 = pto.value_and_grad(lambda a: ((a * a).sum(), a.max()), has_aux=True)(x)
    assert float(v) == 14.0 and float(aux2) == 3.0 and g2.numpy().tolist() == [2.0, 4.0, 6.0]


def test_integer_paths_give_zero_cotangents() -> None:
    idx = pto.tensor([2, 0])
    g = pto.grad(lambda x, i: pto.take(x, i).sum() + i.astype(pto.float32).sum())(
        pto.tensor([1.0, 2.0, 3.0]), idx
    )
    assert g.numpy().tolist() == [1.0, 0.0, 1.0]
    _, f_vjp = pto.vjp(lambda x, i: x * i.astype(pto.float32), pto.ones(2), idx)
    gx, gi = f_vjp(pto.ones(2))
    assert gx.numpy().tolist() == [2.0, 0.0] and gi.dtype is pto.int32
    assert gi.numpy().tolist() == [0, 0]


# ---- errors ------------------------------------------------------------------------------


def test_grad_of_a_non_scalar_output_is_an_error() -> None:
    with pytest.raises(pto.TraceError) as e:
        want = line() + 1
        pto.grad(lambda x: x * 2)(pto.ones(3))
    msg = str(e.value)
    assert "grad" in msg and "scalar" in msg and "f32[3]" in msg and f"{HERE}:{want}" in msg


def test_grad_with_respect_to_an_integer_is_an_error() -> None:
    with pytest.raises(pto.DTypeError) as e:
        want = line() + 1
        pto.grad(lambda x: x.sum())(pto.tensor([1, 2]))
    assert "int32" in str(e.value) and f"{HERE}:{want}" in str(e.value)


def test_bad_argnums() -> None:
    with pytest.raises(pto.TraceError) as e:
        want = line() + 1
        pto.grad(lambda x: x.sum(), argnums=2)(pto.ones(2))
    assert "argnums=2" in str(e.value) and f"{HERE}:{want}" in str(e.value)


def test_vjp_cotangent_with_the_wrong_structure_or_shape() -> None:
    _, f_vjp = pto.vjp(lambda a: (a, a * 2), pto.ones(2))
    with pytest.raises(pto.TraceError, match="structure") as e:
        want = line() + 1
        f_vjp(pto.ones(2))
    assert f"{HERE}:{want}" in str(e.value)
    with pytest.raises(pto.TraceError, match="f32\\[3\\]"):
        f_vjp((pto.ones(3), pto.ones(2)))


# ---- source locations --------------------------------------------------------------------
# A replayed forward equation keeps the line of the user's op; each backward equation carries
# the line of the forward equation whose VJP rule emitted it (JAX's convention), not the line
# that called grad or jit.


def three_lines(x):
    h = pto.sin(x)
    t = pto.exp(h)
    return (t * t).sum()


L = three_lines.__code__.co_firstlineno  # the def; the body is L + 1 .. L + 3
X8 = np.linspace(-1.0, 1.0, 8 * 128, dtype=np.float32).reshape(8, 128)


def test_jit_of_grad_keeps_the_lines_of_the_users_ops() -> None:
    traced = printed_lines(pto.jit(pto.grad(three_lines)).lower(X8).traced, HERE)
    forward = [("sin", L + 1), ("exp", L + 2), ("mul", L + 3), ("sum", L + 3)]
    # the forward as vjp evaluates it, then as the joint function replays it
    assert traced[:8] == forward + forward
    backward = traced[8:]
    lines = [n for _, n in backward]
    # walked in reverse: the sum and the product first, sin's rule (its cos) last
    assert lines == sorted(lines, reverse=True) and set(lines) == {L + 1, L + 2, L + 3}
    assert [n for op, n in backward if op in ("broadcast_to", "cos")] == [L + 3, L + 1]
    optimized = printed_lines(pto.jit(pto.grad(three_lines)).lower(X8).tensor_ir, HERE)
    assert {n for _, n in optimized} == {L + 1, L + 2, L + 3}


def test_kernels_lowered_from_a_backward_carry_the_users_lines() -> None:
    tile_ir = str(pto.jit(pto.grad(three_lines)).lower(X8).tile_ir)
    lines = {int(n) for n in re.findall(rf"# {re.escape(HERE)}:(\d+)", tile_ir)}
    assert lines == {L + 1, L + 2, L + 3}, tile_ir


def two_lines(x):
    h = pto.tanh(x)
    return h * x


T = two_lines.__code__.co_firstlineno


@pytest.mark.parametrize("how", ["vjp", "value_and_grad", "eager"])
def test_vjp_and_value_and_grad_keep_the_lines_of_the_users_ops(how: str) -> None:
    def through_vjp(x):
        y, f_vjp = pto.vjp(two_lines, x)
        return f_vjp(y)[0]

    def through_value_and_grad(x):
        return pto.value_and_grad(lambda a: two_lines(a).sum())(x)[1]

    total = line() - 2  # the .sum() of through_value_and_grad, and its rule's equations

    if how == "eager":  # eager grad runs the same joint function: its equations, directly
        func, _, _ = trace(two_lines, [X8])
        ops = printed_lines(backward_func(func, 1), HERE)
        assert ops[:2] == [("tanh", T + 1), ("mul", T + 2)]
    else:
        fn = through_vjp if how == "vjp" else through_value_and_grad
        ops = printed_lines(pto.jit(fn).lower(X8).traced, HERE)
    assert {n for _, n in ops} == {T + 1, T + 2} | ({total} if how == "value_and_grad" else set())
    assert [n for op, n in ops if op == "sub"] == [T + 1]  # tanh's rule: ct * (1 - y * y)


def test_nested_grad_keeps_the_lines_of_the_users_ops() -> None:
    outer = line() + 1
    low = pto.jit(pto.grad(lambda x: pto.grad(three_lines)(x).sum())).lower(X8)
    lines = {n for _, n in printed_lines(low.traced, HERE)}
    assert lines == {L + 1, L + 2, L + 3, outer}  # outer: the lambda's own .sum()


def test_a_tile_error_in_a_grad_program_names_the_users_line() -> None:
    at = line() + 4

    def f(x):
        with pto.hint(tile=(8, 96)):
            y = pto.exp(x)
        return (y * x).sum()

    with pytest.raises(pto.TileError) as e:
        pto.jit(pto.grad(f))(X8)
    assert f"(with pto.hint at {HERE}:{at})" in str(e.value)
    assert e.value.loc is not None and e.value.loc.line == at


def test_a_failed_backward_leaves_no_location_behind() -> None:
    @pto.custom_vjp
    def doubled(x):
        return x * 2.0

    doubled.defvjp(lambda x: (doubled(x), None), lambda res, g: ())  # no cotangent: an error
    with pytest.raises(pto.TraceError, match="returned 0 cotangents"):
        pto.jit(pto.grad(lambda x: doubled(x).sum())).lower(X8)
    ops = printed_lines(pto.jit(two_lines).lower(X8).traced, HERE)
    assert ops == [("tanh", T + 1), ("mul", T + 2)]


def _close(got, want, what: str) -> None:
    c = compare(what, got, np.asarray(want), k=16)
    assert c.ok, str(c)


def test_jvp_equals_jax_eagerly_under_jit_and_with_pytrees() -> None:
    rng = np.random.default_rng(7)
    x, t = (rng.normal(size=(3, 4)).astype(np.float32) for _ in range(2))
    w, tw = (rng.normal(size=(4, 2)).astype(np.float32) for _ in range(2))

    def f(lib, p):  # a dict of parameters in, a tuple out
        h = lib.tanh(p["x"] @ p["w"])
        return h * 2, (h * h).sum()

    primal, tangent = {"x": x, "w": w}, {"x": t, "w": tw}
    want_out, want_t = jax.jvp(lambda p: f(jnp, p), (primal,), (tangent,))
    as_t = {k: pto.tensor(v) for k, v in primal.items()}
    tan_t = {k: pto.tensor(v) for k, v in tangent.items()}
    out, tan = pto.jvp(lambda p: f(pto, p), (as_t,), (tan_t,))
    for i in range(2):
        _close(out[i], want_out[i], f"jvp out[{i}]")
        _close(tan[i], want_t[i], f"jvp tangent[{i}]")
    npu = pto.jit(lambda p, q: pto.jvp(lambda u: f(pto, u), (p,), (q,))[1], machine="tiny")
    for i, got in enumerate(npu(as_t, tan_t)):
        _close(got, want_t[i], f"jit jvp tangent[{i}]")
    # has_aux: fn returns (out, aux); aux is not differentiated and comes back last
    want = jax.jvp(lambda p: (f(jnp, p)[0], p["w"].sum()), (primal,), (tangent,), has_aux=True)
    got = pto.jvp(lambda p: (f(pto, p)[0], p["w"].sum()), (as_t,), (tan_t,), has_aux=True)
    for g, w, what in zip(got, want, ["out", "tangent", "aux"], strict=True):
        _close(g, w, f"jvp has_aux {what}")
    out, f_jvp, aux = pto.linearize(lambda v: (pto.sin(v), v * 2), as_t["x"], has_aux=True)
    _close(f_jvp(tan_t["x"]), np.cos(x) * t, "linearize has_aux tangent")
    _close(aux, x * 2, "linearize has_aux aux")


@pytest.mark.parametrize("name", ["jacrev", "jacfwd", "hessian"])
def test_jacobians_and_hessian_equal_jax(name: str) -> None:
    x = np.random.default_rng(8).normal(size=(2, 3)).astype(np.float32)
    w = np.random.default_rng(9).normal(size=(3,)).astype(np.float32)

    def f(lib, v, w):
        y = lib.sin(v) * (v @ w)[:, None]
        return (y * y).sum() if name == "hessian" else y

    want = getattr(jax, name)(lambda v, w: f(jnp, v, w), argnums=1)(x, w)
    got = getattr(pto, name)(lambda v, w: f(pto, v, w), argnums=1)(pto.tensor(x), pto.tensor(w))
    assert got.shape == want.shape
    _close(got, want, name)
    jitted = pto.jit(getattr(pto, name)(lambda v, w: f(pto, v, w), argnums=1), machine="tiny")
    _close(jitted(pto.tensor(x), pto.tensor(w)), want, f"jit {name}")


def test_jvp_and_jacobians_refuse_what_they_cannot_differentiate() -> None:
    x = pto.tensor([1.0, 2.0])
    with pytest.raises(pto.TraceError, match=r"jvp: .*must be tuples") as e:
        pto.jvp(pto.sin, x, x)
    assert "pto.jvp(f, (x,), (t,))" in str(e.value)
    with pytest.raises(pto.TraceError, match=r"tangent 0 is f32\[3\] but its primal is f32\[2\]"):
        pto.jvp(pto.sin, (x,), (pto.ones(3),))
    with pytest.raises(
        pto.DTypeError, match=r"primal 0 is i32\[2\]: only float inputs have derivatives"
    ):
        pto.jvp(pto.sin, (pto.tensor([1, 2]),), (pto.tensor([1, 2]),))
    _, f_jvp = pto.linearize(lambda a, b: a * b, x, x)
    _close(f_jvp(pto.ones(2), x), (x + x * x).numpy(), "linearize")  # t_a * b + a * t_b
    with pytest.raises(pto.TraceError, match=r"linearize: tangents .* do not match"):
        f_jvp(x)
    with pytest.raises(
        pto.TraceError, match=r"jacrev needs fn to return tensors .* str at output 1"
    ):
        pto.jacrev(lambda v: (v, "v"))(x)
    with pytest.raises(pto.DTypeError, match=r"jacfwd: argument 1 is i32\[2\]: only float"):
        pto.jacfwd(lambda a, b: a * b, argnums=1)(x, pto.tensor([1, 2]))
    with pytest.raises(pto.DTypeError, match=r"hessian: argument 0, leaf 1 is i32\[2\]: only"):
        pto.hessian(lambda p: p["a"].sum())({"a": x, "b": pto.tensor([1, 2])})
    with pytest.raises(pto.TraceError, match=r"jacrev: has_aux=True needs fn to return a pair"):
        pto.jacrev(lambda v: v * v, has_aux=True)(x)


@pytest.mark.parametrize("name", ["jacrev", "jacfwd", "hessian"])
def test_jacobians_of_pytrees_equal_jax(name: str) -> None:
    """Pytree arguments and outputs, a tuple of argnums and has_aux: JAX's structure (the
    output's tree, each leaf the arguments' tree) and values, eagerly and compiled."""
    rng = np.random.default_rng(14)
    a, b, c = (rng.normal(size=s).astype(np.float32) for s in [(2, 3), (3,), (2,)])

    def f(lib, p, c):
        y = lib.tanh(p["a"] @ p["b"]) * c
        if name == "hessian":
            return (y * y).sum() * c[1], y
        return {"y": y, "s": [(y * y).sum(), p["a"].sum(axis=0) * c[0]]}, y.sum()

    want, want_aux = getattr(jax, name)(lambda p, c: f(jnp, p, c), argnums=(0, 1), has_aux=True)(
        {"a": a, "b": b}, c
    )
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    args = ({"a": pto.tensor(a), "b": pto.tensor(b)}, pto.tensor(c))
    jac = getattr(pto, name)(lambda p, c: f(pto, p, c), argnums=(0, 1), has_aux=True)
    for how, fn in [("eager", jac), ("jit", pto.jit(jac, machine="tiny"))]:
        got, got_aux = fn(*args)
        g_leaves, g_tree = jax.tree_util.tree_flatten(
            jax.tree_util.tree_map(lambda t: t.numpy(), got, is_leaf=lambda t: hasattr(t, "numpy"))
        )
        assert g_tree == w_tree, f"{how}: {g_tree} != {w_tree}"
        for i, (g, w) in enumerate(zip(g_leaves, w_leaves, strict=True)):
            assert g.shape == w.shape, f"{how} leaf {i}: {g.shape} != {w.shape}"
            _close(g, w, f"{how} {name} leaf {i}")
        _close(got_aux, want_aux, f"{how} {name} aux")


@pytest.mark.parametrize("name", ["jacrev", "jacfwd"])
def test_jacobians_with_respect_to_several_arguments(name: str) -> None:
    a = (np.random.default_rng(12).normal(size=(2, 3)) * 0.5).astype(np.float32)
    b = (np.random.default_rng(13).normal(size=(3,)) * 0.5).astype(np.float32)

    def f(lib, u, v):
        return lib.tanh(u @ v) * u[:, 0]

    want = getattr(jax, name)(lambda u, v: f(jnp, u, v), argnums=(1, 0))(a, b)
    got = getattr(pto, name)(lambda u, v: f(pto, u, v), argnums=(1, 0))(
        pto.tensor(a), pto.tensor(b)
    )
    assert isinstance(got, tuple) and len(got) == 2
    for i in range(2):
        _close(got[i], want[i], f"{name}[{i}]")
