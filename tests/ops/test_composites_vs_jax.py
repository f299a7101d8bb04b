"""The composite ops against their JAX reference, variant by variant, in float32, float16 and
bfloat16: softmax, log_softmax, layer_norm (with and without weight and bias), rms_norm, gelu
(tanh approximation), silu, relu, clip, the logical functions and their operators, mean,
expand_dims, squeeze, split, attention (causal or not, explicit scale, bool masks), and
cumsum, logsumexp, one_hot, stack, tril and triu (with gradients through them), and einsum
(diagonals, broadcast '...', three operands, bools and wrapping int8; gradients eager and
compiled), and the ulp accuracy of log1p and expm1 near zero, softplus, elu, nan_to_num and
the special-value tests at the edges.

Each is compared with the table's reference (``OPS[name].jax_impl``, which ``pto.check`` uses)
and, in float32, also with JAX's own library function (``jax.nn.dot_product_attention``,
``jax.nn.standardize``, ...), so that the references themselves are checked.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxref import FLOATS, assert_matches

import pypto as pto
from pypto.ops.table import OPS

F32 = pto.float32


def ref(name: str) -> Any:
    f = OPS[name].jax_impl
    assert f is not None
    return f


def normal(seed: int, shape: tuple[int, ...], d: pto.DType, scale: float = 2.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(d.np)


@pytest.fixture(params=FLOATS, ids=str)
def dtype(request: pytest.FixtureRequest) -> pto.DType:
    return request.param  # type: ignore[no-any-return]


# --- softmax, log_softmax -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_family(name: str, dtype: pto.DType) -> None:
    a = normal(0, (2, 3, 8), dtype, 4.0)
    a[0, 1, :3] = -np.inf  # masked entries
    a[1, 2, :] = -np.inf  # a fully masked row: NaN in both
    x = pto.tensor(a)
    for axis in (-1, 0, 1, 2):
        out = getattr(pto, name)(x, axis)
        assert_matches(out, ref(name)(a, axis=axis), a.shape[axis], what=f"axis={axis}")
    natural = jax.nn.softmax if name == "softmax" else jax.nn.log_softmax
    assert_matches(getattr(pto, name)(x), natural(a), 8)
    if name == "softmax":  # rows sum to one (where not fully masked)
        s = pto.sum(pto.softmax(x), -1).numpy().astype(np.float32)
        np.testing.assert_allclose(np.delete(s.reshape(-1), 5), 1.0, rtol=2e-2)


# --- layer_norm, rms_norm -------------------------------------------------------------------


@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("eps", [None, 1e-2])
def test_layer_norm(dtype: pto.DType, weight: bool, bias: bool, eps: float | None) -> None:
    a = normal(1, (3, 5, 16), dtype) + np.asarray(3.0, dtype.np)  # an offset to cancel
    kw: dict[str, np.ndarray] = {}
    if weight:
        kw["weight"] = normal(2, (16,), dtype, 1.0)
    if bias:
        kw["bias"] = normal(3, (16,), dtype, 1.0)
    e = {} if eps is None else {"eps": eps}
    out = pto.layer_norm(pto.tensor(a), **{k: pto.tensor(v) for k, v in kw.items()}, **e)
    assert_matches(out, ref("layer_norm")(a, **kw, **e), 16)
    if dtype is F32:
        y = jax.nn.standardize(a, axis=-1, epsilon=eps or 1e-5, algorithm="stable")
        y = y * kw.get("weight", 1.0) + kw.get("bias", 0.0)
        assert_matches(out, y, 16)


@pytest.mark.parametrize(
    ("d", "row"),
    [
        (pto.float16, [4.26171875, 3.970703125, 3.388671875]),
        (pto.float16, [4.83203125, 3.68359375, 4.74609375]),
        (pto.bfloat16, [2.734375, 2.421875, 2.609375]),
    ],
    ids=str,
)
def test_layer_norm_where_the_mean_cancels(d: pto.DType, row: list[float]) -> None:
    # x - mean(x) cancels most digits here, so a mean one ulp off (a float16 sum rounded
    # before the division; jnp.mean divides in float32) is off by percents afterwards.
    a = np.array([row], d.np)
    assert_matches(pto.layer_norm(pto.tensor(a)), ref("layer_norm")(a), 3)
    assert_matches(pto.mean(pto.tensor(a), -1), jnp.mean(a, -1), 1)


@pytest.mark.parametrize("weight", [False, True])
def test_rms_norm(dtype: pto.DType, weight: bool) -> None:
    a = normal(4, (4, 16), dtype)
    w = normal(5, (16,), dtype, 1.0)
    out = pto.rms_norm(pto.tensor(a), pto.tensor(w) if weight else None)
    assert_matches(out, ref("rms_norm")(a, w if weight else None), 16)
    if dtype is F32:
        y = a / np.sqrt(np.mean(a.astype(np.float64) ** 2, -1, keepdims=True) + 1e-6)
        assert_matches(out, (y * (w if weight else 1.0)).astype(np.float32), 16)


# --- elementwise composites -----------------------------------------------------------------


def test_gelu_is_the_tanh_approximation(dtype: pto.DType) -> None:
    a = np.linspace(-6, 6, 97).astype(dtype.np)
    assert_matches(pto.gelu(pto.tensor(a)), ref("gelu")(a))
    assert_matches(pto.gelu(pto.tensor(a)), jax.nn.gelu(a, approximate=True))
    # gelu_tanh(1) = 0.841192, gelu_erf(1) = 0.841345: float32 tells them apart
    g = float(pto.gelu(pto.tensor(1.0)))
    assert abs(g - 0.8411920) < 1e-6 and abs(g - float(jax.nn.gelu(1.0, approximate=False))) > 1e-4


def test_silu_and_relu(dtype: pto.DType) -> None:
    a = np.concatenate([np.linspace(-20, 20, 41), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    a = a.astype(dtype.np)
    x = pto.tensor(a)
    assert_matches(pto.silu(x), ref("silu")(a))
    assert_matches(pto.relu(x), ref("relu")(a))
    if dtype is F32:
        assert_matches(pto.silu(x), a * jax.nn.sigmoid(a))
        assert_matches(pto.relu(x), jnp.maximum(a, 0))


def test_clip(dtype: pto.DType) -> None:
    a = np.array([-3.0, -1.0, -0.5, 0.0, 0.25, 1.0, 7.0, np.nan, np.inf], dtype.np)
    x = pto.tensor(a)
    lo, hi = np.asarray(-0.75, dtype.np), np.asarray(0.5, dtype.np)
    for bounds in [(-1, 1), (None, 0.5), (-0.25, None), (lo, hi), (1.0, -1.0), (None, None)]:
        args = [pto.tensor(b) if isinstance(b, np.ndarray) else b for b in bounds]
        assert_matches(pto.clip(x, *args), jnp.clip(a, *bounds), what=f"clip{bounds}")


LOGICAL = {
    "logical_and": (pto.logical_and, jnp.logical_and, "&"),
    "logical_or": (pto.logical_or, jnp.logical_or, "|"),
    "logical_xor": (pto.logical_xor, jnp.logical_xor, "^"),
}


@pytest.mark.parametrize("name", sorted(LOGICAL))
def test_logical_functions_and_operators(name: str) -> None:
    """Nonzero is True for every dtype (NaN and -0.0 included, as in JAX); the operators are
    the functions on bool tensors, with Python bools and numpy bool arrays on either side."""
    fn, jfn, sym = LOGICAL[name]
    f = np.array([[0.0, -0.0, 1.5, np.nan], [np.inf, 0.0, -2.0, 0.0]], np.float32)
    i = np.array([0, 3, 0, -1], np.int32)
    b = np.array([True, False, True, False])
    for x, y in [(f, i), (i, b), (b, b[::-1].copy()), (f.astype(np.float16), 0), (i, 2.5)]:
        assert_matches(fn(pto.tensor(x) if np.ndim(x) else x, y), jfn(x, y), what=f"{name}")
    op = {"&": lambda a, c: a & c, "|": lambda a, c: a | c, "^": lambda a, c: a ^ c}[sym]
    t = pto.tensor(b)
    for x, y in [(t, pto.tensor(b[::-1].copy())), (t, True), (False, t), (b[::-1].copy(), t)]:
        assert_matches(op(x, y), jfn(np.asarray(x), np.asarray(y)), what=f"{sym}")


def test_logical_not_and_its_operator() -> None:
    f = np.array([0.0, -0.0, 1.5, np.nan], np.float32)
    assert_matches(pto.logical_not(pto.tensor(f)), jnp.logical_not(f))
    assert_matches(pto.logical_not(pto.tensor([0, 7])), jnp.logical_not(np.array([0, 7])))
    b = np.array([True, False])
    assert_matches(~pto.tensor(b), ~b)


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (lambda i, f: f & i, r"& of f32\[3\] and i32\[3\]: & is logical on bool tensors and"),
        (lambda i, f: 1 | f, r"\| of i32\[\] and f32\[3\]"),
        (lambda i, f: (f > 0) ^ f, r"\^ of bool\[3\] and f32\[3\]"),
        (lambda i, f: ~f, r"~ of f32\[3\]"),
    ],
)
def test_bitwise_operators_refuse_floats(expr: Any, message: str) -> None:
    """``&`` ``|`` ``^`` ``~`` are logical on bools and bitwise on integers (numpy's
    meanings); a float operand is refused, with the comparison that makes a mask as the
    fix, at the user's line."""
    i, f = pto.tensor(np.array([1, 2, 3], np.int32)), pto.tensor(np.ones(3, np.float32))
    with pytest.raises(pto.DTypeError, match=message) as e:
        expr(i, f)
    assert "a float has no bits to combine" in str(e.value)
    assert "test_composites_vs_jax.py" in str(e.value)
    assert "compare first" in str(e.value.hint)


def test_bitwise_operators_on_integers_and_bools() -> None:
    i = pto.tensor(np.array([5, -3, 12], np.int32))
    b = pto.tensor([True, False, True])
    np.testing.assert_array_equal((i & 6).numpy(), np.array([5, -3, 12]) & 6)
    np.testing.assert_array_equal((3 | i).numpy(), 3 | np.array([5, -3, 12]))
    np.testing.assert_array_equal((~i ^ i).numpy(), np.full(3, -1))
    np.testing.assert_array_equal((i << 2 >> 1).numpy(), np.array([10, -6, 24]))
    assert (b & True).dtype is pto.bool_ and (~b).numpy().tolist() == [False, True, False]
    assert (b | i).dtype is pto.int32  # bool with integers: bitwise, promoted


def test_mean(dtype: pto.DType) -> None:
    a = normal(6, (3, 4, 5), dtype)
    x = pto.tensor(a)
    for axis in (None, 0, -1, (0, 2), ()):
        for keepdims in (False, True):
            k = a.size if axis is None else math.prod(a.shape[i] for i in np.atleast_1d(axis))
            out = pto.mean(x, axis, keepdims)
            assert_matches(out, ref("mean")(a, axis, keepdims), k, what=f"mean {axis}")
            assert_matches(out, jnp.mean(a, axis=axis, keepdims=keepdims), k)


# --- shape composites -----------------------------------------------------------------------


def test_expand_dims_squeeze_split(dtype: pto.DType) -> None:
    a = normal(7, (2, 1, 6), dtype)
    x = pto.tensor(a)
    for axis in (0, -1, (0, 3), (1, -1)):
        assert_matches(pto.expand_dims(x, axis), ref("expand_dims")(a, axis))
    for axis in (None, 1, -2):
        assert_matches(pto.squeeze(x, axis), ref("squeeze")(a, axis))
    for how, axis in [(3, -1), (2, 0), ([1, 4], 2), ([0, 6], -1)]:
        got, want = pto.split(x, how, axis), ref("split")(a, how, axis)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_matches(g, w)


# --- attention ------------------------------------------------------------------------------


def _mask(kind: str) -> np.ndarray | None:
    if kind == "none":
        return None
    rng = np.random.default_rng(8)
    m = rng.random((2, 4, 6) if kind == "full" else (2, 1, 6)) < 0.6
    m[..., 0] = True  # every query sees a key (also under the causal mask)
    return m


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scale", [None, 0.2])
@pytest.mark.parametrize("mask", ["none", "full", "broadcast"])
def test_scaled_dot_product_attention(
    dtype: pto.DType, causal: bool, scale: float | None, mask: str
) -> None:
    q = normal(9, (2, 4, 8), dtype, 1.0)
    k = normal(10, (2, 6, 8), dtype, 1.0)
    v = normal(11, (2, 6, 8), dtype, 1.0)
    m = _mask(mask)
    out = pto.scaled_dot_product_attention(
        pto.tensor(q), pto.tensor(k), pto.tensor(v), None if m is None else pto.tensor(m),
        causal=causal, scale=scale,
    )  # fmt: skip
    want = ref("scaled_dot_product_attention")(q, k, v, m, causal=causal, scale=scale)
    assert_matches(out, want, 8 + 6)
    if dtype is F32:  # JAX's own attention, with one head: [B, T, N=1, H]
        nat = jax.nn.dot_product_attention(
            q[:, :, None], k[:, :, None], v[:, :, None],
            mask=None if m is None else m[:, None], scale=scale, is_causal=causal,
        )  # fmt: skip
        assert_matches(out, nat[:, :, 0], 8 + 6)


def test_attention_with_batch_heads_and_a_fully_masked_query() -> None:
    q = normal(12, (2, 3, 5, 4), F32, 1.0)
    k = normal(13, (2, 3, 7, 4), F32, 1.0)
    v = normal(14, (2, 3, 7, 2), F32, 1.0)
    m = np.ones((5, 7), bool)
    m[2] = False  # query 2 sees nothing: softmax over all -inf is NaN, as in JAX op by op
    out = pto.scaled_dot_product_attention(pto.tensor(q), k, v, m, causal=True)
    assert_matches(out, ref("scaled_dot_product_attention")(q, k, v, m, causal=True), 11)
    assert np.isnan(out.numpy()[:, :, 2]).all() and not np.isnan(np.delete(out.numpy(), 2, 2)).any()


# --- cumsum, logsumexp, one_hot, stack, tril/triu --------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 64, 1000])
def test_cumsum_over_long_axes(dtype: pto.DType, n: int) -> None:
    """⌈log₂ n⌉ scan steps; float16 and bfloat16 summed in float32 like JAX's, rounded once."""
    a = normal(20, (3, n), dtype, 1.0)
    for axis in (1, -1, None):
        out = pto.cumsum(pto.tensor(a), axis)
        want = jnp.cumsum(a, axis)
        assert_matches(out, want, a.shape[1] if axis is not None else a.size, what=f"{axis}")
    assert_matches(pto.tensor(a).cumsum(0), jnp.cumsum(a, 0), 3)


def test_cumsum_of_integers_is_exact_and_wraps_as_jax() -> None:
    rng = np.random.default_rng(21)
    for d in (np.int32, np.int8):
        info = np.iinfo(d)
        a = rng.integers(info.min, info.max, (5, 300), endpoint=True).astype(d)
        np.testing.assert_array_equal(pto.cumsum(pto.tensor(a), 1).numpy(), jnp.cumsum(a, 1))
    b = rng.random((4, 33)) < 0.5  # bools count in int32, as numpy's and JAX's
    got = pto.cumsum(pto.tensor(b), 0)
    assert got.dtype is pto.int32
    np.testing.assert_array_equal(got.numpy(), np.cumsum(b, 0))


def test_logsumexp_against_jax(dtype: pto.DType) -> None:
    a = normal(22, (4, 6), dtype, 200.0)  # exp overflows without the shift
    a[1] = -np.inf  # an all -inf row: -inf
    a[2, 3] = np.inf  # a +inf: +inf
    a[3, 0] = np.nan
    x = pto.tensor(a)
    for axis, keepdims in ((-1, False), (0, True), ((0, 1), False), (None, True)):
        out = pto.logsumexp(x, axis, keepdims)
        assert_matches(out, ref("logsumexp")(a, axis, keepdims), 7, what=f"{axis}")
    if dtype is F32:  # and JAX's own function over a row of -inf
        assert_matches(pto.logsumexp(x, 1), jax.scipy.special.logsumexp(a, 1), 6)
    e = pto.logsumexp(pto.zeros((2, 0), dtype), axis=1)  # the sum of no terms: -inf
    np.testing.assert_array_equal(e.numpy().astype(np.float32), [-np.inf, -np.inf])


def test_gradients_of_the_new_helpers_match_jax() -> None:
    """A cross-entropy written with one_hot and logsumexp, and a loss through stack, cumsum,
    tril and flip: pto.grad equals jax.grad, eagerly and compiled."""
    logits = normal(23, (5, 7), F32, 3.0)
    labels = np.array([0, 6, 3, 3, 1], np.int32)
    w = normal(24, (7, 7), F32, 1.0)

    def xent(z: Any, y: Any, lib: Any) -> Any:
        if lib is pto:
            return (pto.logsumexp(z, -1) - (z * pto.one_hot(y, 7)).sum(-1)).mean()
        return (jax.nn.logsumexp(z, -1) - (z * jax.nn.one_hot(y, 7)).sum(-1)).mean()

    def mix(z: Any, w: Any, lib: Any) -> Any:
        s = lib.stack([z, lib.flip(z, 1)], axis=1)  # [5, 2, 7]
        t = lib.cumsum(s, axis=-1) @ lib.tril(w, -1)
        return (lib.square(t) * lib.sign(w[0])).sum()

    for f, args in ((xent, (logits, labels)), (mix, (logits, w))):
        want = jax.grad(lambda z, *r, f=f: f(z, *r, jnp))(*args)
        got = pto.grad(lambda z, *r, f=f: f(z, *r, pto))(*(pto.tensor(a) for a in args))
        assert_matches(got, want, 14, what=f.__name__)
        jitted = pto.jit(pto.grad(lambda z, *r, f=f: f(z, *r, pto)), machine="tiny")
        assert_matches(jitted(*(pto.tensor(a) for a in args)), want, 14, what=f"jit {f.__name__}")


def test_one_hot_stack_and_triangles() -> None:
    ids = np.array([[0, 4], [-1, 2]], np.int32)
    for axis in (-1, 0, 1):
        assert_matches(pto.one_hot(ids, 4, axis=axis), jax.nn.one_hot(ids, 4, axis=axis))
    assert_matches(pto.one_hot(ids, 3, dtype=pto.int8), jax.nn.one_hot(ids, 3, dtype=jnp.int8))
    xs = [normal(25 + i, (2, 3), F32) for i in range(3)]
    for axis in (0, 1, 2, -1):
        assert_matches(pto.stack(xs, axis), jnp.stack(xs, axis))
    m = normal(28, (2, 4, 5), F32)
    for k in (-5, -1, 0, 2, 9):
        assert_matches(pto.tril(m, k), jnp.tril(m, k), what=f"tril {k}")
        assert_matches(pto.triu(m, k), jnp.triu(m, k), what=f"triu {k}")
    # triu and tril split a matrix exactly: tril(k) + triu(k + 1) == m
    np.testing.assert_array_equal((pto.tril(m, 1) + pto.triu(m, 2)).numpy(), m)


@pytest.mark.parametrize(
    ("spec", "shapes"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),  # attention scores
        ("ii->i", [(4, 4)]),  # a diagonal
        ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),  # broadcast batch axes
        ("ij,j,kj->ik", [(3, 4), (4,), (2, 4)]),  # three operands, a scaled product
        ("ij,ij->", [(3, 4), (3, 4)]),
        ("i,j->ij", [(3,), (1,)]),  # an outer product, one side broadcast from size 1
    ],
)
def test_einsum_and_its_gradient_match_jax(spec: str, shapes: list[tuple[int, ...]]) -> None:
    """Values and every operand's gradient, eagerly and compiled for the NPU (tiny)."""
    arrays = [normal(40 + i, s, F32, 1.0) for i, s in enumerate(shapes)]
    tensors = [pto.tensor(a) for a in arrays]
    k = 2 * math.prod(max(s) for s in shapes)
    assert_matches(pto.einsum(spec, *tensors), jnp.einsum(spec, *arrays), k, what=spec)
    argnums = tuple(range(len(arrays)))
    want = jax.grad(lambda *a: (jnp.einsum(spec, *a) ** 2).sum(), argnums)(*arrays)

    def loss(*a: Any) -> Any:
        return (pto.einsum(spec, *a) ** 2).sum()

    eager = pto.grad(loss, argnums)(*tensors)
    npu = pto.jit(pto.grad(loss, argnums), machine="tiny")(*tensors)
    for i, w in enumerate(want):
        assert_matches(eager[i], w, k, what=f"grad {spec} operand {i}")
        assert_matches(npu[i], w, k, what=f"jit grad {spec} operand {i}")


def test_einsum_of_bools_and_integers_follows_jax() -> None:
    a = np.random.default_rng(50).random((3, 4)) < 0.3
    b = np.random.default_rng(51).random((4, 2)) < 0.3
    assert_matches(pto.einsum("ij,jk", a, b), jnp.einsum("ij,jk", a, b))  # any of the products
    i8 = np.full((2, 64), 100, np.int8)  # products and sums wrap in int8, as JAX's do
    assert_matches(pto.einsum("ij,kj", i8, i8), jnp.einsum("ij,kj", i8, i8))
    assert_matches(pto.einsum("ij->j", i8), jnp.einsum("ij->j", i8))


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Units in the last place between float32 arrays of one sign pattern (0 where equal or
    both NaN)."""
    a, b = a.astype(np.float32), np.asarray(b, np.float32)
    d = np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))
    return np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0, d)


def test_log1p_and_expm1_keep_every_digit_near_zero() -> None:
    """Within 8 ulps of JAX in float32 from 1e-30 to 80 in magnitude, where the naive
    ``log(1 + x)`` and ``exp(x) - 1`` are off by up to 100% (checked, so the test can fail)."""
    mags = np.logspace(-30, np.log10(80), 4001)
    x = np.concatenate([mags, -mags[mags < 0.99]]).astype(np.float32)
    for name, fn, naive, want in (
        ("log1p", pto.log1p, lambda t: pto.log(t + 1), jnp.log1p(x)),
        ("expm1", pto.expm1, lambda t: pto.exp(t) - 1, jnp.expm1(x)),
    ):
        got = fn(pto.tensor(x)).numpy()
        assert _ulps(got, want).max() <= 8, name
        assert _ulps(naive(pto.tensor(x)).numpy(), want).max() > 1_000_000, name
        jit = pto.jit(fn, machine="tiny")(pto.tensor(x)).numpy()
        np.testing.assert_array_equal(jit, got, err_msg=f"{name}: NPU and eager differ")


def test_softplus_and_friends_at_the_edges() -> None:
    x = np.array([-np.inf, -200.0, -1.0, 0.0, 1e-6, 200.0, np.inf, np.nan], np.float32)
    t = pto.tensor(x)
    assert_matches(pto.softplus(t), jax.nn.softplus(x), 2)
    assert_matches(pto.elu(t, 0.5), jax.nn.elu(x, 0.5), 2)
    assert_matches(pto.nan_to_num(t), jnp.nan_to_num(x))
    assert_matches(pto.nan_to_num(t.astype(pto.float16)), jnp.nan_to_num(x.astype(np.float16)))
    # gradients: sigmoid for softplus (1/2 at 0, 1 at +inf, NaN at NaN), exp(x) for expm1
    for fn, ref_fn in ((pto.softplus, jax.nn.softplus), (pto.expm1, jnp.expm1)):
        got = pto.grad(lambda u, fn=fn: fn(u).sum())(t)
        want = jax.grad(lambda u, f=ref_fn: f(u).sum())(x)
        if fn is pto.expm1:  # JAX's rule is expm1(x) + 1, which loses exp(x) below -17
            want = np.where(x < -17, np.exp(x.astype(np.float64)), want).astype(np.float32)
        assert_matches(got, want, 2, what=f"grad {fn.__name__}")
    bools = pto.tensor(np.array([True, False]))
    assert_matches(pto.isfinite(bools), jnp.isfinite(np.array([True, False])))
    assert_matches(pto.log1p(bools), jnp.log1p(np.array([True, False])))
