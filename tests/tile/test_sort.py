"""Sorting on the simulated NPU: ``sort``, ``argsort`` and ``top_k`` compiled through the four
levels equal JAX exactly — stable orders, NaN and signed zeros, int32 over its whole range (two
radix passes), rows padded to the sorting unit's blocks of 32, rows spread over grid points,
rows too long for UB merged through GM, ``top_k`` of long rows in stages with its runs cut to
their first k — and their gradients equal ``jax.grad``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto as pto

RNG = np.random.default_rng(11)
SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)


def _floats(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Small integers (ties) with NaNs of both signs, infinities and signed zeros."""
    a = RNG.integers(-6, 7, shape).astype(np.float32)
    mask = RNG.random(shape) < 0.2
    a[mask] = RNG.choice(SPECIALS, int(mask.sum()))
    return a.astype(dtype)


def _ints(shape: tuple[int, ...]) -> np.ndarray:
    """int32 over the whole range, with equal low 12 bits under different high ones, equal
    high parts over different low ones, and the two ends."""
    a = RNG.integers(-(2**31), 2**31 - 1, shape, endpoint=True).astype(np.int64)
    flat = a.reshape(-1)
    flat[::3] = (flat[::3] >> 12 << 12) | 0x5A5  # shared low digit
    flat[1::5] = 77 + (RNG.integers(-3, 3, flat[1::5].shape) << 12)  # few high parts
    flat[:2] = [-(2**31), 2**31 - 1]
    return a.astype(np.int32)


def _same(got: pto.Tensor, want: jax.Array, what: str) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype, what
    if g.dtype.kind == "f":  # bit for bit: NaN signs and the order of -0.0 and 0.0 count
        assert g.tobytes() == w.tobytes(), what
    else:
        np.testing.assert_array_equal(g, w, err_msg=what)


CASES = [
    ((3, 64), np.float32),  # whole blocks of 32: no padding
    ((70, 40), np.float16),  # several grid points, each padded to 64
    ((2, 3, 100), np.float32),
    ((5, 33), np.int32),
    ((2, 300), np.int32),
    ((4, 1), np.float32),
]


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
@pytest.mark.parametrize(("shape", "dtype"), CASES, ids=[f"{s}-{d.__name__}" for s, d in CASES])
def test_sorts_equal_jax(shape: tuple[int, ...], dtype: type, machine: str) -> None:
    a = _ints(shape) if dtype is np.int32 else _floats(shape, np.dtype(dtype))
    k = min(5, shape[-1])

    def fn(x: pto.Tensor) -> tuple[pto.Tensor, ...]:
        return (
            pto.argsort(x),
            pto.argsort(x, axis=0, descending=True),
            pto.sort(x),
            pto.sort(x, axis=-1, descending=True),
            *pto.top_k(x, k),
        )

    got = pto.jit(fn, machine=machine)(pto.tensor(a))
    j = jnp.asarray(a)
    want = (
        jnp.argsort(j, stable=True),
        jnp.argsort(j, axis=0, stable=True, descending=True),
        jnp.sort(j),
        jnp.sort(j, axis=-1, descending=True),
        *jax.lax.top_k(j, k),
    )
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        _same(g, w, f"output {i} of {shape} {dtype.__name__} on {machine}")


def test_sort_is_one_kernel_on_the_sorting_unit() -> None:
    low = pto.jit(pto.sort, machine="tiny").lower(np.zeros((8, 1000), np.float32))
    assert [k.name for k in low.tile_ir.kernels] == ["argsort"]  # the values gathered there
    ops = [line.split()[0] for line in str(low.isa).splitlines() if line.strip()]
    assert ops.count("TSORT32") == 1 and ops.count("TMRGSORT") == 3  # runs 32, 128, 512
    assert ops.count("TGATHER") == 3  # spread to 1024, the permutation, the values
    assert ops.count("TSTORE") == 1  # the values only: nothing else reads the permutation


@pytest.mark.parametrize(("n", "widths"), [(5000, [1280, 32]), (4099, [2048, 32])])
def test_top_k_of_long_rows_runs_in_stages(n: int, widths: list[int]) -> None:
    """Blocks of 1,250 divide a 5,000-wide row (sorted padded to 1,280); 4,099 has no divisor
    near 2,048, so its last block is padded with the smallest value. The candidates (4 or 3
    blocks' top 7) are one more sort."""
    a = _floats((2, n), np.dtype(np.float16))
    a[:, -3:] = np.float16(-np.nan)  # the padding's neighbours: NaNs with the sign set
    f = pto.jit(lambda x: pto.top_k(x, 7), machine="tiny")
    vals, idx = f(pto.tensor(a))
    want_v, want_i = jax.lax.top_k(jnp.asarray(a), 7)
    _same(idx, want_i, "indices")
    _same(vals, want_v, "values")
    tf = f.lower(pto.tensor(a)).tile_ir
    assert [dict(k.tile)["cols"] for k in tf.kernels if k.name.startswith("argsort")] == widths
    # the first stage stores only each block's top 7 indices and values (its slices are done)
    first = next(k for k in tf.kernels if k.name == "argsort")
    stores = [ln for ln in str(first).splitlines() if "tstore" in ln]
    assert len(stores) == 2 and all(": +7]" in ln for ln in stores)


@pytest.mark.parametrize(
    ("n", "dtype", "machine"),
    [(5000, np.float32, "tiny"), (9000, np.float16, "tiny"), (4500, "bfloat16", "ascend910b")],
)
def test_rows_longer_than_ub_merge_through_gm(n: int, dtype: Any, machine: str) -> None:
    """Blocks of 2,048 sorted in UB, padded to a power of two of blocks, merged pairwise
    through GM by the merge path: exact, stable, NaN and signed zeros as JAX's, for the
    permutation and for the values (carried in the structures)."""
    d = getattr(pto, dtype).np if isinstance(dtype, str) else np.dtype(dtype)
    a = _floats((2, n), d)
    a[0, :] = a[0, 0]  # one row of equal elements: stability across every merge

    def fn(x: pto.Tensor) -> tuple[pto.Tensor, ...]:
        return pto.argsort(x), pto.sort(x, descending=True), pto.argsort(x, descending=True)

    f = pto.jit(fn, machine=machine)
    got = f(pto.tensor(a))
    j = jnp.asarray(a)
    want = (
        jnp.argsort(j, stable=True),
        jnp.sort(j, descending=True),
        jnp.argsort(j, stable=True, descending=True),
    )
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        _same(g, w, f"output {i}, rows of {n}")
    names = [k.name for k in f.lower(pto.tensor(a)).tile_ir.kernels]
    assert any(k.startswith("sort_merge") for k in names), names


def test_top_k_beyond_its_stages_uses_the_long_sort() -> None:
    # k above a quarter of the block: the whole row is sorted in IEEE total order
    a = _floats((1, 5000), np.dtype(np.float32))
    vals, idx = pto.jit(lambda x: pto.top_k(x, 600), machine="tiny")(pto.tensor(a))
    want_v, want_i = jax.lax.top_k(jnp.asarray(a), 600)
    _same(idx, want_i, "indices")
    _same(vals, want_v, "values")


def test_long_int32_rows_sort_by_two_digits_through_gm() -> None:
    """Rows of int32 too long for UB: a stable sort by the low 12 bits (carrying the index,
    and in a second sort the high bits), then by the high bits carrying the first order."""
    a = _ints((2, 5000))
    f = pto.jit(lambda x: (pto.argsort(x), pto.sort(x, descending=True)), machine="tiny")
    got = f(pto.tensor(a))
    j = jnp.asarray(a)
    want = (jnp.argsort(j, stable=True), jnp.sort(j, descending=True))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        _same(g, w, f"output {i}")


def test_a_long_gather_by_other_indices_is_a_clear_error() -> None:
    x = np.zeros((2, 8000), np.float32)
    i = np.zeros((2, 8000), np.int32)
    f = pto.jit(lambda x, i: pto.take_along_axis(x, i, axis=1), machine="ascend910b")
    with pytest.raises(pto.TileError) as ei:
        f.lower(x, i)
    msg = str(ei.value)
    assert "take_along_axis: gathering 8000 of 8000 f32 elements per row needs" in msg
    assert "backend='interpret'" in msg and "test_sort.py" in msg


@pytest.mark.parametrize(("dtype", "n"), [(np.float32, 40), (np.float16, 40), (np.float32, 6000)])
def test_gradients_on_the_npu_equal_jax(dtype: type, n: int) -> None:
    """The cotangent goes back through the inverse permutation: an argsort of the permutation
    (exact in f32) whose kernel gathers the cotangent's rows — or, for rows longer than UB,
    carries the cotangent through the merges."""
    a = (RNG.integers(-3, 4, (6, n)) * 0.5).astype(dtype)  # ties: stable routing
    w = RNG.standard_normal((6, n)).astype(dtype)

    def f(x: pto.Tensor, w: pto.Tensor) -> pto.Tensor:
        s = pto.sort(x, axis=-1, descending=True) * w + pto.sort(x) * w
        return (s.sum() + (pto.top_k(x, 3)[0] * w[:, :3]).sum()).astype(pto.float32)

    def jf(x: jax.Array, w: jax.Array) -> jax.Array:
        s = jnp.sort(x, axis=-1, descending=True) * w + jnp.sort(x) * w
        return (s.sum() + (jax.lax.top_k(x, 3)[0] * w[:, :3]).sum()).astype(jnp.float32)

    g = pto.jit(pto.grad(f), machine="tiny")
    got = g(pto.tensor(a), pto.tensor(w))
    want = jax.grad(jf)(jnp.asarray(a), jnp.asarray(w))
    np.testing.assert_allclose(
        np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32), rtol=1e-2
    )
    names = [k.name for k in g.lower(pto.tensor(a), pto.tensor(w)).tile_ir.kernels]
    if n > 4096:
        assert any(k.startswith("sort_merge") for k in names)


def test_a_cotangent_made_before_the_inverse_permutation_is_gathered_in_its_kernel() -> None:
    g = pto.jit(pto.grad(lambda x, w: (pto.sort(x) * w).sum()), machine="tiny")
    a, w = _floats((4, 40), np.dtype(np.float32)), RNG.standard_normal((4, 40)).astype(np.float32)
    a[np.isnan(a)] = 1.0
    names = [k.name for k in g.lower(pto.tensor(a), pto.tensor(w)).tile_ir.kernels]
    assert not any(k.startswith("gather") for k in names), names
    want = jax.grad(lambda x, w: (jnp.sort(x) * w).sum())(jnp.asarray(a), jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(g(pto.tensor(a), pto.tensor(w))), np.asarray(want))


def test_vmap_of_sort_compiles() -> None:
    a = _floats((3, 4, 50), np.dtype(np.float32))
    got = pto.jit(pto.vmap(lambda x: pto.sort(x, axis=0)), machine="tiny")(pto.tensor(a))
    _same(got, jax.vmap(lambda x: jnp.sort(x, axis=0))(jnp.asarray(a)), "vmap(sort)")


def test_quantiles_and_their_gradients_on_the_npu() -> None:
    a = RNG.standard_normal((6, 40)).astype(np.float32)

    def f(x: pto.Tensor) -> pto.Tensor:
        return pto.quantile(x, [0.25, 0.75], axis=1).sum() + pto.median(x, 0).sum()

    def jf(x: jax.Array) -> jax.Array:
        return jnp.quantile(x, jnp.array([0.25, 0.75]), axis=1).sum() + jnp.median(x, 0).sum()

    np.testing.assert_allclose(float(pto.jit(f, machine="tiny")(a)), float(jf(a)), rtol=1e-6)
    g = pto.jit(pto.grad(f), machine="tiny")(pto.tensor(a))
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(jf)(a)), rtol=1e-6, atol=1e-7)


def test_nan_quantiles_and_their_gradients_on_the_npu() -> None:
    """Per-row positions from the count of non-NaN elements, read by a gather: values and
    gradients against JAX, with a row that is all NaN."""
    a = RNG.standard_normal((6, 40)).astype(np.float32)
    a[a > 1.0] = np.nan
    a[2] = np.nan

    def f(x: pto.Tensor) -> pto.Tensor:
        q = pto.nanquantile(x, [0.25, 0.75], axis=1)
        return pto.where(pto.isnan(q), 0.0, q).sum() + pto.nanmedian(x[3:], 1).sum()

    def jf(x: jax.Array) -> jax.Array:
        q = jnp.nanquantile(x, jnp.array([0.25, 0.75]), axis=1)
        return jnp.where(jnp.isnan(q), 0.0, q).sum() + jnp.nanmedian(x[3:], 1).sum()

    np.testing.assert_allclose(float(pto.jit(f, machine="tiny")(a)), float(jf(a)), rtol=1e-6)
    g = pto.jit(pto.grad(f), machine="tiny")(pto.tensor(a))
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(jf)(a)), rtol=1e-6, atol=1e-7)


def test_quantile_misuse_is_a_clear_error() -> None:
    x = pto.tensor(np.ones((3, 4), np.float32))
    with pytest.raises(pto.ShapeError, match="q must lie in"):
        pto.quantile(x, 1.5)
    with pytest.raises(pto.ShapeError, match="method 'inverted_cdf' is not one of"):
        pto.quantile(x, 0.5, method="inverted_cdf")
    with pytest.raises(pto.ShapeError, match="q must have rank 0 or 1"):
        pto.quantile(x, [[0.5]])
    with pytest.raises(pto.ShapeError, match="zero-size axis"):
        pto.median(pto.tensor(np.ones((3, 0), np.float32)), 1)
    with pytest.raises(pto.DTypeError, match=r"q must be numbers, got bool\[\]"):
        pto.jit(lambda x, q: pto.quantile(x, q), backend="interpret")(x, pto.tensor(True))
    with pytest.raises(pto.ShapeError, match=r"q must have rank 0 or 1, got f32\[1,1\]"):
        pto.jit(lambda x, q: pto.quantile(x, q), backend="interpret")(x, np.ones((1, 1)))


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_traced_q_reads_its_positions_with_a_gather(method: str) -> None:
    """q an argument of the jitted function, as in JAX: its positions q·(n - 1), clamped into
    the row, are computed when it runs (q out of [0, 1] and NaN rows as JAX has them)."""
    a = RNG.standard_normal((5, 9)).astype(np.float32)
    a[1, 3] = np.nan
    for fn, jfn, q in (
        (pto.quantile, jnp.quantile, np.float32(0.3)),
        (pto.quantile, jnp.quantile, np.array([0.0, 0.25, 1.0, 1.5, -0.2], np.float32)),
        (pto.nanquantile, jnp.nanquantile, np.array([0.1, 0.9], np.float32)),
        (pto.percentile, jnp.percentile, np.array([10.0, 50.0], np.float32)),
        (pto.nanpercentile, jnp.nanpercentile, np.float32(75.0)),
    ):
        for axis in (1, None):
            kw = dict(axis=axis, method=method)
            got = pto.jit(lambda x, q, f=fn, kw=kw: f(x, q, **kw), backend="interpret")
            want = jax.jit(lambda x, q, f=jfn, kw=kw: f(x, q, **kw))(a, q)
            what = f"{fn.__name__} {q} axis={axis}"
            np.testing.assert_allclose(np.asarray(got(a, q)), want, 1e-6, 1e-6, True, what)
    b = np.nan_to_num(a)
    q = np.array([0.2, 0.8], np.float32)

    def f(x: Any, q: Any) -> Any:
        return pto.quantile(x, q, axis=1, method=method).sum()

    def jf(x: Any, q: Any) -> Any:
        return jnp.quantile(x, q, axis=1, method=method).sum()

    np.testing.assert_allclose(float(pto.jit(f, machine="tiny")(b, q)), float(jf(b, q)), 1e-6)
    g = pto.jit(pto.grad(f), machine="tiny")(b, q)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(jf)(b, q)), 1e-6, 1e-7)


@st.composite
def _sort_cases(draw: st.DrawFn) -> dict[str, Any]:
    """A sort on the NPU: rows around the sorting unit's block of 32, the 2,048 of a top_k
    block and UB's limit (longer rows merge through GM), every dtype and result."""
    n = draw(st.sampled_from([1, 5, 32, 33, 200, 2047, 2049, 4100, 5000]), label="n")
    rows = draw(st.integers(1, 3), label="rows")
    dtype = draw(st.sampled_from(["float32", "float16", "bfloat16", "int32", "int8"]))
    what = draw(st.sampled_from(["argsort", "sort", "top_k", "median"]), label="what")
    return {
        "n": n,
        "rows": rows,
        "dtype": dtype,
        "what": what,
        "descending": draw(st.booleans(), label="descending"),
        "k": draw(st.integers(0, min(n, 700)), label="k"),
        "seed": draw(st.integers(0, 2**16), label="seed"),
    }


@settings(max_examples=20)
@given(_sort_cases())
def test_random_sorts_on_tiny(case: dict[str, Any]) -> None:
    d = getattr(pto, case["dtype"]).np
    rng = np.random.default_rng(case["seed"])
    shape = (case["rows"], case["n"])
    if case["dtype"] == "int32":
        a = rng.integers(-(2**31), 2**31 - 1, shape, endpoint=True).astype(np.int32)
        a.reshape(-1)[::2] = rng.integers(-3, 3, a.size // 2 + a.size % 2)  # ties
    else:
        a = rng.integers(-20, 20, shape).astype(np.float32)
        if case["dtype"] != "int8":
            mask = rng.random(shape) < 0.1
            a[mask] = rng.choice(SPECIALS, int(mask.sum()))
        a = a.astype(d)
    j, desc, k = jnp.asarray(a), case["descending"], case["k"]
    fns = {
        "argsort": (
            lambda x: pto.argsort(x, descending=desc),
            lambda x: jnp.argsort(x, stable=True, descending=desc),
        ),
        "sort": (lambda x: pto.sort(x, descending=desc), lambda x: jnp.sort(x, descending=desc)),
        "top_k": (lambda x: pto.top_k(x, k), lambda x: tuple(jax.lax.top_k(x, k))),
        "median": (lambda x: pto.median(x, axis=1), lambda x: jnp.median(x, axis=1)),
    }
    fn, ref = fns[case["what"]]
    got = pto.jit(fn, machine="tiny")(pto.tensor(a))
    want = ref(j)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        _same(g, w, f"{case} output {i}")


def test_numpy_sort_arguments_are_refused_with_the_fix() -> None:
    x = pto.tensor(np.arange(4.0, dtype=np.float32))
    with pytest.raises(pto.DTypeError, match="kind='mergesort' is not supported") as ei:
        pto.sort(x, kind="mergesort")
    assert "always stable" in str(ei.value)
    with pytest.raises(pto.DTypeError, match="order='f0' is not supported") as ei:
        pto.argsort(x, order="f0")
    assert "pto.lexsort" in str(ei.value)
    with pytest.raises(pto.ShapeError, match="keys of different shapes"):
        pto.lexsort([x, pto.tensor(np.ones(3, np.float32))])


@pytest.mark.parametrize(("ub", "n", "block"), [(16 * 1024, 1000, 128), (64 * 1024, 3000, 512)])
def test_a_smaller_ub_takes_smaller_blocks(ub: int, n: int, block: int) -> None:
    """The blocks of a sort through GM shrink (by powers of two) until their kernels fit the
    machine's UB; the results do not change."""
    m = pto.npu.machine("tiny").replace(ub_bytes=ub)
    a = _floats((2, n), np.dtype(np.float32))
    ints = _ints((1, 700))
    f = pto.jit(lambda x, i: (pto.sort(x), pto.argsort(i, descending=True)), machine=m)
    got = f(pto.tensor(a), pto.tensor(ints))
    _same(got[0], jnp.sort(jnp.asarray(a)), "sort")
    _same(got[1], jnp.argsort(jnp.asarray(ints), stable=True, descending=True), "argsort")
    kernels = pto.jit(pto.sort, machine=m).lower(a).tile_ir.kernels
    assert {dict(k.tile)["cols"] for k in kernels if "merge" in k.name} == {block}
