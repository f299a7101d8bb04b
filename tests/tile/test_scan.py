"""Running reductions on the simulated NPU: ``cumsum``, ``cumprod``, ``cummax`` and ``cummin``
compiled through the four levels equal JAX on rows of one chunk, of several chunks (each carrying
its last results into the next) and with a narrower last chunk, forwards and reversed, on the
shipped machines and on one whose small UB makes the chunks narrow; their gradients — the linear
recurrence ``scan_affine`` from the end, whose first chunk is peeled off the loop — equal
``jax.grad``, exactly where a product has zeros."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto

RNG = np.random.default_rng(23)

# chunks on the shipped machines: 1,024 columns for a scan, 512 for scan_affine
WIDTHS = [7, 512, 1024, 1300, 2500]
LAX = {
    "cumsum": jax.lax.cumsum,
    "cumprod": jax.lax.cumprod,
    "cummax": jax.lax.cummax,
    "cummin": jax.lax.cummin,
}


def _values(name: str, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """Factors near ±1 for products (finite over thousands of them, with a few zeros), normal
    values with NaN and infinities for the others."""
    if name == "cumprod":
        a = RNG.uniform(0.95, 1.05, shape) * RNG.choice([-1.0, 1.0], shape)
        a.reshape(-1)[:: max(1, a.size // 3)] = 0.0
    else:
        a = RNG.standard_normal(shape)
        a.reshape(-1)[5 :: max(1, a.size // 4)] = [np.nan, np.inf, -np.inf, 0.0][
            : len(a.reshape(-1)[5 :: max(1, a.size // 4)])
        ]
    return a.astype(dtype)


def _ref(name: str, a: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    return np.asarray(LAX[name](jnp.asarray(a), axis % a.ndim, reverse=reverse))


@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("name", list(LAX))
def test_running_reductions_equal_jax(name: str, n: int) -> None:
    a = _values(name, (3, n))
    fn = getattr(pto, name)
    got = pto.jit(lambda x: (fn(x, 1), fn(x, 1, reverse=True)), machine="tiny")(pto.tensor(a))
    for g, rev in zip(got, (False, True), strict=True):
        want = _ref(name, a, 1, rev)
        if name in ("cummax", "cummin"):  # no rounding: exact (a NaN's sign is the target's)
            np.testing.assert_array_equal(g, want, err_msg=f"{name} {n} {rev}")
        else:
            np.testing.assert_allclose(g, want, rtol=2e-5, atol=1e-4, err_msg=f"{name} {n} {rev}")


@pytest.mark.parametrize("name", list(LAX))
def test_int32_scans_wrap_as_jax_does(name: str) -> None:
    a = RNG.integers(-(2**31), 2**31 - 1, (2, 1500), endpoint=True).astype(np.int32)
    if name == "cumprod":
        a = a | 1  # odd factors: the wrapped products do not collapse to 0
    got = pto.jit(lambda x: getattr(pto, name)(x, 1), machine="ascend910b")(pto.tensor(a))
    np.testing.assert_array_equal(got, _ref(name, a, 1, False), err_msg=name)


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_low_precision_scans_round_once(dtype: Any) -> None:
    d = jnp.dtype(dtype)
    a = _values("cummax", (4, 1100), d)
    got = pto.jit(lambda x: (pto.cummax(x, 0), pto.cumsum(x, 1)), machine="tiny")(pto.tensor(a))
    np.testing.assert_array_equal(got[0], _ref("cummax", a, 0, False))
    want = np.cumsum(a.astype(np.float32), 1).astype(d).astype(np.float32)
    np.testing.assert_allclose(np.asarray(got[1], np.float32), want, rtol=1e-2, atol=0.05)


def test_a_small_ub_takes_narrow_chunks() -> None:
    """16 KiB of UB: chunks of 85 columns (42 for pairs), so a row of 300 is three chunks and a
    tail (seven and a tail for pairs); the results and gradients do not change."""
    m = pto.npu.machine("tiny").replace(ub_bytes=16 * 1024)
    a = _values("cumprod", (2, 300))
    f = pto.jit(lambda x: (pto.cumprod(x, 1), pto.cummin(x, 1)), machine=m)
    got = f(pto.tensor(a))
    np.testing.assert_allclose(got[0], _ref("cumprod", a, 1, False), rtol=2e-5, atol=1e-6)
    np.testing.assert_array_equal(got[1], _ref("cummin", a, 1, False))
    cols = min(dict(k.tile)["cols"] for k in f.lower(a).tile_ir.kernels if k.kind == "scan")
    assert cols < 100, cols
    g = pto.jit(pto.grad(lambda x: (pto.cumprod(x, 1) * x).sum()), machine=m)(pto.tensor(a))
    want = jax.grad(lambda x: (jax.lax.cumprod(x, 1) * x).sum())(a)
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [9, 1300])
@pytest.mark.parametrize("name", list(LAX))
def test_gradients_on_the_npu_equal_jax(name: str, n: int) -> None:
    """Distinct values (no ties, where JAX's maxima split their cotangents by its scan tree),
    and zeros among the factors of a product."""
    a = RNG.permutation(n * 2).reshape(2, n).astype(np.float32) / n - 1.0
    if name == "cumprod":
        a = (1.0 + a * 0.05) * RNG.choice([-1.0, 1.0], a.shape)
        a[:, n // 3] = 0.0
        a[1, n // 2] = 0.0
    a = a.astype(np.float32)
    w = RNG.standard_normal(a.shape).astype(np.float32)
    fn, ref = getattr(pto, name), LAX[name]
    g = pto.jit(pto.grad(lambda x: (fn(x, 1, reverse=True) * w).sum()), machine="tiny")
    want = jax.grad(lambda x: (ref(x, 1, reverse=True) * w).sum())(a)
    np.testing.assert_allclose(g(pto.tensor(a)), want, rtol=1e-4, atol=1e-4, err_msg=name)


def test_cummax_gives_each_output_to_the_first_element_that_reached_it() -> None:
    x = pto.tensor([1.0, 3.0, 3.0, 2.0, 5.0])
    g = pto.grad(lambda x: pto.cummax(x).sum())(x)
    np.testing.assert_array_equal(g, [1.0, 3.0, 0.0, 0.0, 1.0])
    # the total is every output's cotangent once, as JAX's
    jg = jax.grad(lambda x: jax.lax.cummax(x, 0).sum())(np.asarray(x))
    assert float(jnp.sum(jg)) == float(np.sum(np.asarray(g))) == 5.0


def test_a_scan_is_one_kernel_and_its_axis_moves_by_transposes() -> None:
    low = pto.jit(lambda x: pto.cummax(x, 0), machine="tiny").lower(np.zeros((3000, 8), np.float32))
    scans = [k for k in low.tile_ir.kernels if k.kind == "scan"]
    assert len(scans) == 1
    text = str(low.tile_ir)
    assert "= tmax %y, %sh" in text and "tgather" in text


def test_misuse_is_a_clear_error() -> None:
    x = pto.ones((2, 3))
    with pytest.raises(pto.ShapeError, match=r"cummax.*axis 2 is out of range"):
        pto.cummax(x, 2)
    with pytest.raises(pto.ShapeError, match="cumprod"):
        pto.cumprod(pto.ones(()), 0)
