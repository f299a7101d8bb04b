"""Differential fuzzing: random well-typed programs run eagerly, through the interpreter, compiled
for the simulated NPU and in JAX. Eager and interpret share the op table's numpy
implementations, so they must agree bit for bit; the NPU (whose reductions may sum in another
order) and JAX must agree within the tolerance table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import pypto as pto
from pypto.graph.tracer import trace
from pypto.reference import compare
from pypto.reference.jax_bridge import precisions, sum_lengths

from .roundtrip import assert_round_trip

DTYPES = [pto.float32, pto.float16, pto.bfloat16]

# Each step maps values from the pool to a new value; all keep magnitudes moderate.
UNARY: list[tuple[str, Callable[[Any], Any]]] = [
    ("tanh", pto.tanh),
    ("sigmoid", pto.sigmoid),
    ("sin", pto.sin),
    ("cos", pto.cos),
    ("neg", pto.neg),
    ("abs", pto.abs),
    ("relu", pto.relu),
    ("gelu", pto.gelu),
    ("silu", pto.silu),
    ("exp∘tanh", lambda x: pto.exp(pto.tanh(x))),
    ("log1p|x|", lambda x: pto.log(pto.abs(x) + 1)),
    ("sqrt", lambda x: pto.sqrt(pto.abs(x) + 0.5)),
    ("rsqrt", lambda x: pto.rsqrt(x * x + 1)),
    ("scale", lambda x: x * 0.75 + 0.25),
    ("softmax", lambda x: pto.softmax(x, -1)),
    ("sum-keep", lambda x: pto.sum(x, -1, keepdims=True) * 0.25),
    ("max-keep", lambda x: pto.max(x, 0, keepdims=True)),
    ("mean-keep", lambda x: pto.mean(x, -1, keepdims=True)),
    # a reduction without keepdims, an op on it in its kernel, and the axis put back
    ("mean-flat", lambda x: x - pto.expand_dims(pto.tanh(pto.mean(x, -1)) * 2.0, -1)),
    ("T.T", lambda x: x.T.T),
    ("clip", lambda x: pto.clip(x, -1.5, 1.5)),
    # layout ops that keep the shape: slices, concatenations and transposes of leading axes,
    # which row kernels take as windows of their loads and stores
    ("roll", lambda x: _last(x, lambda n: pto.concat([x[..., 1:], x[..., :1]], axis=-1))),
    (
        "halves",
        lambda x: _last(
            x,
            lambda n: pto.concat([x[..., : n // 2] * 0.5, pto.tanh(x[..., n // 2 :])], axis=-1),
        ),
    ),
    ("swap-lead", lambda x: _swap_lead(x)),
    # matmuls over the last two axes with transposed operands and a transposed product, which
    # the cube reads and writes in place (TEXTRACT_T); the shape comes back
    ("gram", lambda x: _with_t(x, lambda t, T: pto.tanh(x @ t * 0.3) @ x * 0.3)),
    ("gram-T", lambda x: _with_t(x, lambda t, T: T(t @ pto.tanh(x @ t * 0.3)) * 0.3)),
    ("layer_norm", lambda x: pto.layer_norm(x) * 0.5),
    ("rms_norm", lambda x: pto.rms_norm(x) * 0.5),
    ("log_softmax", lambda x: pto.log_softmax(x, -1) * 0.3),
    ("cast-trip", lambda x: x.astype(_other(x.dtype)).astype(x.dtype)),
    ("reverse", lambda x: _last(x, lambda n: pto.take(x, np.arange(n)[::-1].copy(), axis=-1))),
    # causal self-attention over two heads split from the last axis and merged back, which the
    # attention kernel reads and writes in place
    ("heads", lambda x: _heads(x)),
    ("heads-mm", lambda x: _heads(x, mm=True)),
    # numpy's helpers: a scan (scaled back by its length), a shifted log-sum, triangles, flips
    ("cumsum", lambda x: pto.cumsum(x, -1) * (1.0 / x.shape[-1]) if x.ndim else x),
    ("logsumexp", lambda x: pto.logsumexp(x, -1, keepdims=True) * 0.25 if x.ndim else x),
    # a product of factors near 1 (finite over any length here), down the leading axis
    ("prod", lambda x: pto.prod(pto.tanh(x) * 0.05 + 1.0, 0) if x.ndim > 1 else x),
    (
        "cumprod",
        lambda x: pto.cumprod(pto.tanh(x) * 0.05 + 1.0, -1, reverse=True) * x if x.ndim else x,
    ),
    ("tril", lambda x: pto.tril(x, -1) + pto.triu(pto.tanh(x)) if x.ndim > 1 else x),
    ("flip-sign", lambda x: pto.flip(x) * pto.sign(x) if x.ndim else x),
    # sorts down the first axis and along the last (top_k of the whole row: total order)
    ("sort", lambda x: pto.sort(x, 0, descending=True) if x.ndim else x),
    ("top_k", lambda x: pto.top_k(x, x.shape[-1])[0] * 0.5 if x.ndim else x),
    ("einsum", lambda x: _einsum(x)),
    # accurate near zero (stop-gradient corrections inside), and a mask from a NaN test
    ("expm1∘tanh", lambda x: pto.expm1(pto.tanh(x))),
    ("softplus", lambda x: pto.softplus(x) - 0.5),
    ("leaky+elu", lambda x: pto.leaky_relu(x, 0.1) + pto.elu(x) * 0.5),
    ("isnan-mask", lambda x: pto.where(pto.isnan(pto.sqrt(x)), x * 0.5, x)),
]


def _einsum(x: Any) -> Any:
    """A gram product of the last two axes and its product with ``x`` as einsums over
    ``...``, or a dot product scaling a vector; the shape comes back."""
    if x.ndim < 2:
        return x * pto.tanh(pto.einsum("i,i", x, x) * 0.1) if x.ndim else x
    s = pto.tanh(pto.einsum("...ij,...kj->...ik", x, x) * 0.3)
    return pto.einsum("...ik,...kj->...ij", s, x) * 0.3


def _heads(x: Any, mm: bool = False) -> Any:
    """``x [.., s, 2d]`` through two-head causal attention (or, with ``mm``, batched products
    of the heads with their transposes), back to its shape."""
    if x.ndim < 2 or x.shape[-1] % 2:
        return x
    *lead, s, c = x.shape
    n = len(lead)
    perm = (*range(n), n + 1, n, n + 2)
    h = x.reshape((*lead, s, 2, c // 2)).transpose(perm)
    if mm:
        last = (*range(n + 1), n + 2, n + 1)
        a = pto.tanh(h @ h.transpose(last) * 0.3) @ h * 0.3
    else:
        a = pto.scaled_dot_product_attention(h, h, h, causal=True)
    return a.transpose(perm).reshape(x.shape)


def _with_t(x: Any, f: Callable[[Any, Callable[[Any], Any]], Any]) -> Any:
    """``f(x with its last two axes swapped, the swap)`` for x of 2+ axes, else ``x``."""
    if x.ndim < 2:
        return x
    n = x.ndim

    def T(y: Any) -> Any:
        return y.transpose((*range(n - 2), n - 1, n - 2))

    return f(T(x), T)


def _other(d: Any) -> Any:
    """A float dtype other than ``d`` (a cast there and back)."""
    return pto.float32 if d is not pto.float32 else pto.bfloat16


def _last(x: Any, f: Callable[[int], Any]) -> Any:
    """``f(n)`` for a last axis of ``n`` > 1 elements, else ``x``."""
    n = x.shape[-1] if x.ndim else 1
    return f(n) if n > 1 else x


def _swap_lead(x: Any) -> Any:
    """An elementwise op between two transposes of the leading axes (the shape comes back)."""
    if x.ndim < 3:
        return x
    p = (1, 0, *range(2, x.ndim))
    return (pto.sin(x.transpose(p)) * 1.5).transpose(p)


BINARY: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("add", pto.add),
    ("sub", pto.sub),
    ("mul", lambda x, y: pto.tanh(x) * y),
    ("div", lambda x, y: x / (pto.abs(y) + 1)),
    ("maximum", pto.maximum),
    ("minimum", pto.minimum),
    # (the comparison is shifted off equality: programs make near-ties, a self-attention
    # output is its input within an ulp, and there 1 ulp of rounding would flip the choice)
    ("where", lambda x, y: pto.where(x > y + 0.3, x, y * 0.5)),
]


# Sizes on ascend910b: several cores, row kernels split into column tiles, edge tiles.
WIDE = [1, 2, 3, 16, 24, 48, 64, 100, 128, 200, 256]


@st.composite
def programs(
    draw: st.DrawFn, sizes: list[int] | None = None
) -> tuple[list[np.ndarray], list[tuple[int, ...]], Any]:
    dtype = draw(st.sampled_from(DTYPES))
    size = st.integers(1, 5) if sizes is None else st.sampled_from(sizes)
    base = draw(st.lists(size, min_size=1, max_size=3))
    n_in = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n_in):
        drop = draw(st.integers(0, len(base) - 1))
        shape = [1 if draw(st.booleans()) and draw(st.booleans()) else s for s in base[drop:]]
        shapes.append(tuple(shape))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-2, 2, s).astype(np.float32).astype(dtype.np) for s in shapes]
    steps = []
    for _ in range(draw(st.integers(1, 30))):
        if draw(st.booleans()):
            steps.append(("u", draw(st.integers(0, len(UNARY) - 1)), draw(st.integers(0, 99)), 0))
        else:
            steps.append(
                (
                    "b",
                    draw(st.integers(0, len(BINARY) - 1)),
                    draw(st.integers(0, 99)),
                    draw(st.integers(0, 99)),
                )
            )
    return inputs, shapes, steps


def build(steps: list[tuple[str, int, int, int]]) -> Callable[..., Any]:
    def program(*xs: Any) -> Any:
        pool = list(xs)
        for kind, op, a, b in steps:
            if kind == "u":
                pool.append(UNARY[op][1](pool[a % len(pool)]))
            else:
                pool.append(BINARY[op][1](pool[a % len(pool)], pool[b % len(pool)]))
        # Two outputs: the last value and one from the middle of the chain.
        return pool[-1], pool[len(xs) + (len(pool) - len(xs)) // 2]

    return program


def every_path(fn: Callable[..., Any], inputs: list[np.ndarray]) -> tuple[Any, ...]:
    """``fn``'s outputs eagerly, interpreted fused and unfused, compiled for tiny and in JAX,
    and its traced graph (checked to round-trip through its text)."""
    tensors = [pto.tensor(a) for a in inputs]
    eager = fn(*tensors)
    staged = pto.jit(fn, backend="interpret")(*tensors)
    unfused = pto.jit(fn, backend="interpret", fuse=False)(*tensors)
    npu = pto.jit(fn, machine="tiny")(*tensors)
    ref = pto.to_jax(fn)(*inputs)
    func, _, _ = trace(fn, tensors)
    assert_round_trip(func)
    return eager, staged, unfused, npu, ref, func


@settings(max_examples=40)
@given(programs())
def test_random_programs_agree_eager_interpret_jax(prog: Any) -> None:
    inputs, _, steps = prog
    fn = build(steps)
    tensors = [pto.tensor(a) for a in inputs]
    eager, staged, unfused, npu, ref, func = every_path(fn, inputs)
    assert_round_trip(pto.jit(fn).lower(*tensors).tensor_ir)
    ks, ps = sum_lengths(func), precisions(func)
    names = [(UNARY if t == "u" else BINARY)[o][0] for t, o, _, _ in steps]
    outs = zip(eager, staged, unfused, npu, ref, ks, ps, strict=True)
    for i, (e, s, u, n, r, k, p) in enumerate(outs):
        np.testing.assert_array_equal(np.asarray(e), np.asarray(s), err_msg=f"interpret out {i}")
        np.testing.assert_array_equal(np.asarray(e), np.asarray(u), err_msg=f"unfused out {i}")
        assert e.dtype == s.dtype == n.dtype and e.shape == s.shape == n.shape
        c = compare(
            f"npu out[{i}]", n, np.asarray(e), k=k * (len(steps) + 1), scale=1.0, precision=p
        )
        assert c.ok, f"{c}\nprogram: {names}"
        # Rounding differences compound along the chain; allow for its length. The steps keep
        # values near 1, so an output that cancels to ~0 is judged at that scale (scale=1.0).
        c = compare(f"out[{i}]", e, np.asarray(r), k=k * (len(steps) + 1), scale=1.0, precision=p)
        assert c.ok, f"{c}\nprogram: {names}"


@settings(max_examples=25, deadline=None)
@given(programs(), st.data())
def test_random_programs_vmap_like_a_loop(prog: Any, data: st.DataObject) -> None:
    """``pto.vmap`` of a random program over a batch of 3 (each input mapped or not, at a
    drawn axis) equals the program run on each example, stacked: every batching rule the
    program meets, on the shapes the fuzzer makes."""
    inputs, _, steps = prog
    fn = build(steps)
    mapped = [data.draw(st.booleans(), label=f"map {i}") for i in range(len(inputs))]
    mapped[0] = True
    axes = [
        data.draw(st.integers(0, a.ndim), label="axis") if m else None
        for a, m in zip(inputs, mapped)
    ]
    examples = [
        [(a * (1 + 0.25 * k)).astype(a.dtype) if m else a for a, m in zip(inputs, mapped)]
        for k in range(3)
    ]
    batched = [
        pto.tensor(np.stack([ex[i] for ex in examples], ax)) if ax is not None else pto.tensor(a)
        for i, (a, ax) in enumerate(zip(inputs, axes))
    ]
    got = pto.vmap(fn, in_axes=tuple(axes))(*batched)
    per = [fn(*(pto.tensor(a) for a in ex)) for ex in examples]
    names = [(UNARY if t == "u" else BINARY)[o][0] for t, o, _, _ in steps]
    func = trace(fn, [pto.tensor(a) for a in examples[0]])[0]
    tols = zip(sum_lengths(func), precisions(func), strict=True)
    for i, (g, (k, p)) in enumerate(zip(got, tols, strict=True)):
        want = np.stack([np.asarray(r[i]) for r in per])
        assert g.dtype == per[0][i].dtype and g.shape == want.shape, f"out {i}: {names}"
        c = compare(f"vmap out[{i}]", g, want, k=k * (len(steps) + 1), scale=1.0, precision=p)
        assert c.ok, f"{c}\nprogram: {names}, in_axes {axes}"


@settings(max_examples=30, deadline=None)
@given(programs(WIDE))
def test_random_programs_on_ascend910b_agree_with_eager(prog: Any) -> None:
    """Wider tensors on the full machine: the paths that only several cores and larger tiles
    take (column splits, edge tiles, work dealt over 48 vector cores) against eager mode."""
    inputs, _, steps = prog
    fn = build(steps)
    tensors = [pto.tensor(a) for a in inputs]
    eager = fn(*tensors)
    npu = pto.jit(fn, machine="ascend910b")(*tensors)
    func = trace(fn, tensors)[0]
    names = [(UNARY if t == "u" else BINARY)[o][0] for t, o, _, _ in steps]
    tols = zip(sum_lengths(func), precisions(func), strict=True)
    for i, (e, n, (k, p)) in enumerate(zip(eager, npu, tols, strict=True)):
        assert e.dtype == n.dtype and e.shape == n.shape
        c = compare(
            f"npu out[{i}]", n, np.asarray(e), k=k * (len(steps) + 1), scale=1.0, precision=p
        )
        assert c.ok, f"{c}\nprogram: {names}, shapes {[a.shape for a in inputs]}"


@settings(max_examples=30, deadline=None)
@given(
    programs(WIDE),
    st.sampled_from([1, 2, 3, 4, 8, 16]),
    st.sampled_from([8, 16, 24, 32, 64, 128, 256]),
    st.sampled_from([None, ([16, 16], [16, 16], [16, 16]), ([32, 64], [32, 64], [32, 64])]),
)
def test_random_programs_with_the_users_tiles_agree_or_refuse_them(
    prog: Any, rows: int, cols: int, cube: Any
) -> None:
    """A user's vector (and cube) tiles either give eager mode's results on ascend910b or are
    refused with a TileError naming the tile, the kernel and why: never a crash inside the
    lower levels, and never a wrong result."""
    inputs, _, steps = prog
    assume(sum(a.size for a in inputs) <= 1 << 16)  # (small tiles: every tile simulated)
    fn = build(steps[:12])
    tensors = [pto.tensor(a) for a in inputs]
    tile: dict[str, Any] = {"vec": (rows, cols)}
    if cube is not None:
        tile["cube"] = cube
    try:
        npu = pto.jit(fn, machine="ascend910b", tile=tile)(*tensors)
    except pto.TileError as e:
        assert "tile" in str(e) and e.hint, str(e)
        return
    eager = fn(*tensors)
    func = trace(fn, tensors)[0]
    tols = zip(sum_lengths(func), precisions(func), strict=True)
    for i, (e_, n, (k, p)) in enumerate(zip(eager, npu, tols, strict=True)):
        c = compare(
            f"npu out[{i}]", n, np.asarray(e_), k=k * (len(steps) + 1), scale=1.0, precision=p
        )
        assert c.ok, f"{c}\ntile {tile}"


def gradients(
    fn: Callable[..., Any], inputs: list[np.ndarray], seed: int, jax_too: bool = True
) -> tuple[Any, Any, Any, list[pto.DType]]:
    """The gradient of a weighted sum of ``fn``'s outputs (in float32, weights drawn from
    ``seed``) with respect to every input: eagerly, compiled for tiny, and by ``jax.grad``
    (None without ``jax_too``); and the precision of each (the least precise dtype a value on
    its way was rounded to: a cotangent through a float16 round trip is rounded to float16)."""
    import jax

    outs = fn(*[pto.tensor(a) for a in inputs])
    rng = np.random.default_rng(seed)
    ws = [rng.uniform(-1, 1, o.shape).astype(np.float32) for o in outs]

    def loss(*xs: Any) -> Any:
        return sum((o.astype(pto.float32) * w).sum() for o, w in zip(fn(*xs), ws, strict=True))

    argnums = tuple(range(len(inputs)))
    tensors = [pto.tensor(a) for a in inputs]
    eager = pto.grad(loss, argnums=argnums)(*tensors)
    npu = pto.jit(pto.grad(loss, argnums=argnums), machine="tiny")(*tensors)
    ref = jax.grad(pto.to_jax(loss), argnums=argnums)(*inputs) if jax_too else None
    func, _, _ = trace(pto.grad(loss, argnums=argnums), tensors)
    return eager, npu, ref, precisions(func)


@settings(max_examples=30, deadline=None)
@given(programs())
def test_random_programs_gradients_agree_with_jax(prog: Any) -> None:
    """``grad`` of a weighted sum of a random program's outputs, eagerly and compiled for the
    simulated NPU, against ``jax.grad`` (float32: the chain's rounding stays small enough to
    compare gradients through 30 ops). Softmax, log_softmax and attention take their whole
    rules (docs/autodiff.md), the other ops their own."""
    inputs, _, steps = prog
    inputs = [a.astype(np.float32) for a in inputs]
    eager, npu, ref, ps = gradients(build(steps), inputs, len(steps))
    names = [(UNARY if t == "u" else BINARY)[o][0] for t, o, _, _ in steps]
    k = 4 * (len(steps) + 1) * max(a.size for a in inputs)
    # a gradient is a sum of terms of the inputs' and weights' magnitude (about 1), which may
    # cancel (rms_norm over one element: 1/rms - x²/rms³): judge the error on that scale
    for i, (e, n, r, p) in enumerate(zip(eager, npu, ref, ps, strict=True)):
        c = compare(f"grad[{i}]", np.asarray(e), np.asarray(r), k=k, scale=1.0, precision=p)
        assert c.ok, f"{c}\nprogram: {names}"
        c = compare(f"npu grad[{i}]", np.asarray(n), np.asarray(e), k=k, scale=1.0, precision=p)
        assert c.ok, f"{c}\nprogram: {names}"


@settings(max_examples=20, deadline=None)
@given(programs(), st.sampled_from([pto.float16, pto.bfloat16]))
def test_random_programs_low_precision_gradients_on_the_npu_agree_with_eager(
    prog: Any, dtype: pto.DType
) -> None:
    """The same gradients in float16 and bfloat16, compiled for the NPU against eager mode:
    both round every op of the backward graph to the dtype (the numerics contract), so they
    differ only by the order of the sums. (Against JAX a chain of 30 low-precision ops drifts
    too far to judge; the float32 test above covers that.)"""
    inputs, _, steps = prog
    inputs = [a.astype(np.float32).astype(dtype.np) for a in inputs]
    eager, npu, _, _ = gradients(build(steps), inputs, len(steps), jax_too=False)
    names = [(UNARY if t == "u" else BINARY)[o][0] for t, o, _, _ in steps]
    k = 4 * (len(steps) + 1) * max(a.size for a in inputs)
    for i, (e, n) in enumerate(zip(eager, npu, strict=True)):
        assert e.dtype is dtype and n.dtype is dtype
        c = compare(f"npu grad[{i}]", np.asarray(n), np.asarray(e), k=k, scale=1.0)
        assert c.ok, f"{c}\nprogram: {names}"
