"""The regularized incomplete gamma functions ``pto.scipy.special.gammainc`` and ``gammaincc``,
the incomplete beta function ``betainc``, and the distribution functions over them (gamma,
chi2, poisson, beta): against scipy's float64 across every region of the computation, against
JAX where JAX's float32 is accurate, against high-precision values for large ``a`` (where
JAX's float32 drifts), JAX's values at the edges, gradients against ``jax.grad`` in float64
(and ``betainc``'s in ``a`` and ``b``, which JAX does not have, against central differences),
and the compiled paths. Spence's function (the dilogarithm), Dawson's integral, the sine and
cosine integrals, the exponential integrals ``Eₙ``, the Fresnel integrals, the Bessel
functions ``Jₙ`` and Owen's T function too."""

from __future__ import annotations

import itertools
from typing import Any

import jax
import numpy as np
import pytest
import scipy.special
import scipy.stats

import pypto as pto
from tests.ops.jaxref import assert_matches

S = pto.scipy.special
ST = pto.scipy.stats


def grid(seed: int, n: int, lo: float, hi: float, spread: str) -> tuple[np.ndarray, np.ndarray]:
    """``a`` log-uniform in ``[lo, hi]``; ``x`` near ``a`` (a few standard deviations) or
    log-uniform over a wide range."""
    rng = np.random.default_rng(seed)
    a = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    if spread == "near":
        x = a * np.exp(rng.normal(0.0, 3.0 / np.sqrt(a) + 0.05, n))
    else:
        x = np.exp(rng.uniform(np.log(1e-3), np.log(max(3 * hi, 10.0)), n))
    return a.astype(np.float32), x.astype(np.float32)


@pytest.mark.parametrize("spread", ["near", "wide"])
@pytest.mark.parametrize("lo, hi", [(0.01, 1.0), (1.0, 10.0), (10.0, 30.0), (30.0, 1e4)])
def test_matches_scipy_in_float64_in_every_region(lo: float, hi: float, spread: str) -> None:
    """Series, continued fraction, Q's own series and Temme's expansion: within 3e-6 of the
    float64 value absolutely, and relatively within 1e-4 wherever the value is a normal
    float32 (scipy itself is not trusted past a = 1e4: it drifts, see below)."""
    a, x = grid(int(lo * 100 + hi), 4000, lo, hi, spread)
    for ours, ref in ((S.gammainc, scipy.special.gammainc), (S.gammaincc, scipy.special.gammaincc)):
        got = np.asarray(ours(pto.tensor(a), pto.tensor(x))).astype(np.float64)
        want = ref(a.astype(np.float64), x.astype(np.float64))
        assert np.abs(got - want).max() < 3e-6, ours.__name__
        normal = want > 1e-30
        rel = np.abs(got - want)[normal] / want[normal]
        assert rel.max() < 1e-4, (ours.__name__, rel.max())


def test_matches_jax_where_jaxs_float32_is_accurate() -> None:
    a, x = grid(3, 512, 0.05, 30.0, "wide")
    assert_matches(S.gammainc(pto.tensor(a), pto.tensor(x)), jax.scipy.special.gammainc(a, x), 16)
    assert_matches(S.gammaincc(pto.tensor(a), pto.tensor(x)), jax.scipy.special.gammaincc(a, x), 16)


# (a, x, P, Q) at 40 digits (mpmath); JAX's float32 gammainc(1e5, 1e5) is 0.4585
LARGE = [
    (1e3, 1e3, 0.5042052441802155, 0.4957947558197845),
    (1e3, 950.0, 0.05505468623073803, 0.9449453137692619),
    (1e3, 1080.0, 0.9933533953588841, 0.006646604641115928),
    (1e5, 1e5, 0.5004205221103651, 0.4995794778896348),
    (1e5, 99500.0, 0.05674182321279226, 0.9432581767872077),
    (1e5, 100800.0, 0.9942012539683462, 0.005798746031653784),
    (1e7, 1e7, 0.5000420522087237, 0.4999579477912763),
    (1e7, 9996000.0, 0.10294026222857387, 0.8970597377714261),
    (2e4, 21000.0, 0.9999999999982851, 1.7148666085753986e-12),
    (300.0, 240.0, 0.00010493868382420005, 0.9998950613161758),
]


def test_large_a_keeps_float32_precision() -> None:
    a, x, p, q = (np.array(c) for c in zip(*LARGE, strict=True))
    a32, x32 = pto.tensor(a.astype(np.float32)), pto.tensor(x.astype(np.float32))
    np.testing.assert_allclose(np.asarray(S.gammainc(a32, x32)), p, rtol=2e-5)
    np.testing.assert_allclose(np.asarray(S.gammaincc(a32, x32)), q, rtol=2e-5)


def test_edges_are_jaxs() -> None:
    nan, inf = np.nan, np.inf
    a = np.array([0.0, 0.0, 1.0, 1.0, -1.0, 1.0, inf, 1.0, nan, 2.0, 3.0], np.float32)
    x = np.array([0.0, 1.0, 0.0, -1.0, 1.0, inf, 1.0, nan, 1.0, 1e30, 1e-30], np.float32)
    for name in ("gammainc", "gammaincc"):
        got = np.asarray(getattr(S, name)(pto.tensor(a), pto.tensor(x)))
        want = np.asarray(getattr(jax.scipy.special, name)(a, x))
        np.testing.assert_array_equal(got, want, err_msg=name)


# a point in each region: Q's series (small x), P's series, the continued fraction, Temme
A = np.array([0.01, 0.3, 1.0, 2.5, 3.0, 8.5, 15.0, 25.0, 25.0, 50.0, 80.0, 150.0, 5.0], np.float32)
X = np.array([0.8, 0.2, 1.0, 4.0, 0.7, 9.0, 40.0, 22.0, 30.0, 49.0, 100.0, 120.0, 0.3], np.float32)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_gradients_in_both_arguments_match_jax(name: str) -> None:
    with jax.enable_x64():
        want = jax.grad(lambda u, v: getattr(jax.scipy.special, name)(u, v).sum(), argnums=(0, 1))(
            A.astype(np.float64), X.astype(np.float64)
        )
    got = pto.grad(lambda u, v: getattr(S, name)(u, v).sum(), argnums=(0, 1))(
        pto.tensor(A), pto.tensor(X)
    )
    for g, w, arg in zip(got, want, "ax", strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, err_msg=arg)


@pytest.mark.parametrize("d", [pto.float16, pto.bfloat16], ids=lambda d: d.short)
def test_half_precision_is_computed_in_float32_and_rounded_once(d: pto.DType) -> None:
    a, x = grid(9, 64, 0.1, 20.0, "wide")
    a, x = a.astype(d.np), x.astype(d.np)
    got = S.gammainc(pto.tensor(a), pto.tensor(x))
    assert got.dtype == d
    assert_matches(got, jax.scipy.special.gammainc(a, x), 4)


@pytest.mark.parametrize("backend", ["interpret", "npu"])
def test_compiled_equals_eager(backend: str) -> None:
    a = np.linspace(0.3, 60, 32).reshape(4, 8).astype(np.float32)
    x = np.linspace(0.01, 80, 32).reshape(4, 8).astype(np.float32)[:, ::-1].copy()
    eager = np.asarray(S.gammaincc(pto.tensor(a), pto.tensor(x)))
    f = pto.jit(lambda u, v: S.gammaincc(u, v), backend=backend, machine="tiny")
    np.testing.assert_allclose(np.asarray(f(a, x)), eager, rtol=1e-6, atol=1e-7)


def test_distribution_functions_match_scipy() -> None:
    k = np.array([-1.0, 0.0, 1.0, 2.5, 7.0, 30.0], np.float32)
    np.testing.assert_allclose(
        np.asarray(ST.poisson.cdf(pto.tensor(k), 4.0)), scipy.stats.poisson.cdf(k, 4.0), rtol=1e-5
    )
    x = np.array([0.5, 3.84146, 6.6349, 20.0], np.float32)
    for df in (1.0, 3.0):
        np.testing.assert_allclose(
            np.asarray(ST.chi2.sf(pto.tensor(x), df)), scipy.stats.chi2.sf(x, df), rtol=1e-5
        )
    y = np.array([-1.0, 0.0, 0.5, 2.0, 9.0], np.float32)
    got: Any = ST.gamma.sf(pto.tensor(y), 2.5, 0.0, 1.5)
    np.testing.assert_allclose(np.asarray(got), scipy.stats.gamma.sf(y, 2.5, 0.0, 1.5), rtol=1e-5)
    got = ST.gamma.logcdf(pto.tensor(y[2:]), 2.5)
    np.testing.assert_allclose(np.asarray(got), scipy.stats.gamma.logcdf(y[2:], 2.5), rtol=1e-5)


def beta_grid(seed: int, n: int, lo: float, hi: float) -> tuple[np.ndarray, ...]:
    """``a``, ``b`` log-uniform in ``[lo, hi]``; half of ``x`` uniform on ``[0, 1]``, half within
    two standard deviations of the mean."""
    rng = np.random.default_rng(seed)
    a = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    b = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    mean, var = a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))
    near = np.clip(mean + np.sqrt(var) * rng.normal(0.0, 2.0, n), 1e-6, 1 - 1e-6)
    x = np.where(np.arange(n) % 2, rng.uniform(0.0, 1.0, n), near)
    return a.astype(np.float32), b.astype(np.float32), x.astype(np.float32)


@pytest.mark.parametrize("lo, hi", [(0.01, 1.0), (0.5, 10.0), (5.0, 100.0), (50.0, 1e4)])
def test_betainc_matches_scipy_in_float64(lo: float, hi: float) -> None:
    """Within 1e-5 of the float64 value everywhere (JAX's float32 is 1e-2 off for a and b
    in the thousands)."""
    a, b, x = beta_grid(int(lo * 100 + hi), 4000, lo, hi)
    got = np.asarray(S.betainc(pto.tensor(a), pto.tensor(b), pto.tensor(x))).astype(np.float64)
    want = scipy.special.betainc(a.astype(np.float64), b.astype(np.float64), x.astype(np.float64))
    assert np.abs(got - want).max() < 1e-5


def test_betainc_matches_jax_and_its_edges() -> None:
    a, b, x = beta_grid(4, 512, 0.3, 4.0)
    assert_matches(
        S.betainc(pto.tensor(a), pto.tensor(b), pto.tensor(x)),
        jax.scipy.special.betainc(a, b, x),
        16,
    )
    # wider, JAX's float32 strays further from float64 than pypto's does
    a, b, x = beta_grid(5, 2048, 0.1, 20.0)
    ours = np.asarray(S.betainc(pto.tensor(a), pto.tensor(b), pto.tensor(x)))
    jaxs = np.asarray(jax.scipy.special.betainc(a, b, x))
    want = scipy.special.betainc(a.astype(np.float64), b.astype(np.float64), x.astype(np.float64))
    assert np.abs(ours - want).max() < np.abs(jaxs - want).max()
    vals, xs = [0.0, 1.0, np.inf, -1.0, np.nan, 2.5], [0.0, 0.5, 1.0, -0.1, 1.5, np.nan, 0.3]
    rows = np.array(list(itertools.product(vals, vals, xs)), np.float32).T
    got = np.asarray(S.betainc(*(pto.tensor(r) for r in rows)))
    want = np.asarray(jax.scipy.special.betainc(*rows))
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)  # NaN where JAX's is


def test_betainc_gradients_in_all_three_arguments() -> None:
    # the fraction, its flipped side, and Temme's expansion (the last three)
    a = np.array([0.5, 2.0, 3.0, 20.0, 150.0, 1.5, 40.0, 3000.0, 1e5, 2500.0], np.float32)
    b = np.array([0.7, 3.0, 1.5, 30.0, 100.0, 8.0, 5.0, 2000.0, 5e4, 40.0], np.float32)
    x = np.array([0.3, 0.4, 0.9, 0.45, 0.61, 0.05, 0.85, 0.601, 0.6667, 0.985], np.float32)
    ga, gb, gx = pto.grad(lambda u, v, w: S.betainc(u, v, w).sum(), argnums=(0, 1, 2))(
        pto.tensor(a), pto.tensor(b), pto.tensor(x)
    )
    a64, b64, x64 = (v.astype(np.float64) for v in (a, b, x))
    with jax.enable_x64():
        wx = jax.grad(lambda w: jax.scipy.special.betainc(a64, b64, w).sum())(x64)
    np.testing.assert_allclose(np.asarray(gx), np.asarray(wx), rtol=2e-5)
    h, inc = 1e-6, scipy.special.betainc
    wa = (inc(a64 * (1 + h), b64, x64) - inc(a64 * (1 - h), b64, x64)) / (2 * h * a64)
    wb = (inc(a64, b64 * (1 + h), x64) - inc(a64, b64 * (1 - h), x64)) / (2 * h * b64)
    np.testing.assert_allclose(np.asarray(ga), wa, rtol=2e-5)
    np.testing.assert_allclose(np.asarray(gb), wb, rtol=2e-5)


@pytest.mark.parametrize("backend", ["interpret", "npu"])
def test_betainc_compiled_equals_eager(backend: str) -> None:
    a = np.linspace(0.3, 60, 32).reshape(4, 8).astype(np.float32)
    b, x = a[::-1].copy(), np.linspace(0.01, 0.99, 32).reshape(4, 8).astype(np.float32)
    eager = np.asarray(S.betainc(pto.tensor(a), pto.tensor(b), pto.tensor(x)))
    f = pto.jit(lambda u, v, w: S.betainc(u, v, w), backend=backend, machine="tiny")
    np.testing.assert_allclose(np.asarray(f(a, b, x)), eager, rtol=1e-6, atol=1e-7)


def test_beta_distribution_functions_match_scipy() -> None:
    y = np.array([-0.5, 0.0, 0.1, 0.5, 0.93, 1.0, 2.0], np.float32)
    for fn in ("cdf", "sf", "logcdf", "logsf"):
        got = np.asarray(getattr(ST.beta, fn)(pto.tensor(y), 2.5, 4.0, -0.5, 2.0))
        want = getattr(scipy.stats.beta, fn)(y, 2.5, 4.0, -0.5, 2.0)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-7, err_msg=fn)


def test_betainc_with_huge_or_tiny_parameters_stays_in_the_unit_interval() -> None:
    """Parameters from 1e-30 to 1e20 (JAX's float32 gives -1e11 at a = b = 1e7): finite,
    within [0, 1] and within 3e-6 of float64."""
    p = np.array([1e-30, 1e-5, 0.01, 0.5, 2.0, 8.01, 50.0, 1e3, 1e5, 1e7, 1e20], np.float32)
    xs = np.array([1e-38, 1e-7, 0.001, 0.3, 0.5, 0.7, 0.999, 1 - 6e-8], np.float32)
    a, b, x = (np.array(v, np.float32) for v in zip(*itertools.product(p, p, xs), strict=True))
    got = np.asarray(S.betainc(pto.tensor(a), pto.tensor(b), pto.tensor(x)))
    assert np.isfinite(got).all() and (got >= 0).all() and (got <= 1).all()
    want = scipy.special.betainc(a.astype(np.float64), b.astype(np.float64), x.astype(np.float64))
    assert np.abs(got - want).max() < 3e-6


def test_spence_matches_scipy_and_jaxs_edges_and_has_a_derivative() -> None:
    """Within 3e-7 of float64 from 1e-38 to 3e38 through each of its four forms; NaN below 0
    and at inf, as JAX's; its derivative ``log x / (1 - x)`` (JAX's gradient is NaN)."""
    rng = np.random.default_rng(8)
    edges = [0.0, 1e-38, 1e-7, 0.4999, 0.5, 1.0, 1.4999, 1.5, 1.5001, 1.9999, 2.0, 2.0001, 3e38]
    x = np.r_[np.array(edges), np.exp(rng.uniform(-20, 40, 4000))].astype(np.float32)
    got = np.asarray(S.spence(pto.tensor(x))).astype(np.float64)
    want = scipy.special.spence(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=1e-30)
    odd = np.array([-1.0, np.inf, np.nan, 0.0, 1.0], np.float32)
    np.testing.assert_array_equal(
        np.asarray(S.spence(pto.tensor(odd))), np.asarray(jax.scipy.special.spence(odd))
    )
    y = np.array([0.1, 0.7, 1.0, 1.75, 2.0, 5.0, 100.0], np.float32)
    g = np.asarray(pto.grad(lambda v: S.spence(v).sum())(pto.tensor(y)))
    y64 = y.astype(np.float64)
    w = np.where(y64 == 1, -1.0, np.log(y64) / np.where(y64 == 1, 1.0, 1 - y64))
    np.testing.assert_allclose(g, w, rtol=2e-6)
    f = pto.jit(lambda v: S.spence(v), backend="npu", machine="tiny")
    np.testing.assert_array_equal(np.asarray(f(y)), np.asarray(S.spence(pto.tensor(y))))


def test_dawsn_matches_scipy_and_jaxs_edges_and_its_derivative() -> None:
    """Within 5e-7 of float64 through its series, Rybicki's sum and the asymptotic
    expansion; odd with -0 at -0 and ±0 at ±inf, as JAX's; ``F' = 1 - 2xF``."""
    rng = np.random.default_rng(9)
    y = np.exp(rng.uniform(-10, 10, 4000)).astype(np.float32)
    x = np.r_[y, -y[:100], np.array([0.9999, 1.0, 1.0001, 9.999, 10.0, 10.001], np.float32)]
    got = np.asarray(S.dawsn(pto.tensor(x))).astype(np.float64)
    np.testing.assert_allclose(got, scipy.special.dawsn(x.astype(np.float64)), rtol=5e-7)
    odd = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, -1e30, 1e-30], np.float32)
    got_odd = np.asarray(S.dawsn(pto.tensor(odd)))
    want_odd = np.asarray(jax.scipy.special.dawsn(odd))
    np.testing.assert_array_equal(got_odd, want_odd)
    np.testing.assert_array_equal(np.signbit(got_odd), np.signbit(want_odd))
    z = np.array([0.05, 0.5, 0.99, 1.5, 4.0, 12.0, -2.0], np.float32)
    g = np.asarray(pto.grad(lambda v: S.dawsn(v).sum())(pto.tensor(z)))
    f = scipy.special.dawsn(z.astype(np.float64))
    np.testing.assert_allclose(g, 1 - 2 * z.astype(np.float64) * f, rtol=2e-5, atol=1e-7)
    npu = pto.jit(lambda v: S.dawsn(v), backend="npu", machine="tiny")
    np.testing.assert_array_equal(np.asarray(npu(z)), np.asarray(S.dawsn(pto.tensor(z))))


def test_sici_matches_scipy_and_jaxs_edges_and_its_derivatives() -> None:
    """Si within 3e-7 relatively and Ci within 2e-6 absolutely of float64 (Ci has zeros), both
    through the series and through E₁'s continued fraction at it; JAX's values at the edges
    (Si odd, Ci the real part for negative x, -inf at 0, NaN at -inf); derivatives
    ``sin x / x`` and ``cos x / x``."""
    rng = np.random.default_rng(10)
    x = np.r_[np.exp(rng.uniform(-10, 12, 4000)), [3.9999, 4.0, 4.0001]].astype(np.float32)
    si, ci = S.sici(pto.tensor(x))
    ws, wc = scipy.special.sici(x.astype(np.float64))
    np.testing.assert_allclose(np.asarray(si), ws, rtol=3e-7)
    np.testing.assert_allclose(np.asarray(ci), wc, rtol=0, atol=2e-6)
    odd = np.array([-2.0, -0.0, 0.0, np.inf, -np.inf, np.nan, 1e-30], np.float32)
    for got, want in zip(S.sici(pto.tensor(odd)), jax.scipy.special.sici(odd), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-7)
    z = np.array([0.3, 1.0, 3.9, 4.1, 7.0, 30.0, -2.0], np.float32)
    z64 = z.astype(np.float64)
    g_si = np.asarray(pto.grad(lambda v: S.sici(v)[0].sum())(pto.tensor(z)))
    g_ci = np.asarray(pto.grad(lambda v: S.sici(v)[1].sum())(pto.tensor(z)))
    np.testing.assert_allclose(g_si, np.sin(z64) / z64, rtol=2e-6)
    np.testing.assert_allclose(g_ci, np.cos(z64) / z64, rtol=2e-6)
    npu_si, npu_ci = pto.jit(S.sici, backend="npu", machine="tiny")(z)
    np.testing.assert_array_equal(np.asarray(npu_si), np.asarray(S.sici(pto.tensor(z))[0]))
    np.testing.assert_array_equal(np.asarray(npu_ci), np.asarray(S.sici(pto.tensor(z))[1]))


def test_expn_matches_scipy_and_its_edges_and_derivative() -> None:
    """Within 5e-7 of scipy's float64 for orders 0 to 10⁴ and ``x`` from 1e-30 to 500,
    through the series (the logarithmic term from its own products and harmonic sums) and
    the continued fraction; scipy's edges (a non-integer order truncated, NaN below 0,
    ``1/(n-1)`` at 0); ``d/dx Eₙ = -Eₙ₋₁`` and no cotangent for ``n``, as JAX's."""
    rng = np.random.default_rng(11)
    n = np.r_[np.arange(0, 12), rng.integers(12, 10_000, 60)].astype(np.float32)
    x = np.r_[
        [1e-30, 1e-6, 0.5, 0.999, 1.0, 1.001, 2.0, 80.0, 500.0], np.exp(rng.uniform(-8, 5, 40))
    ]
    nn, xx = (a.ravel().astype(np.float32) for a in np.meshgrid(n, x))
    got = np.asarray(S.expn(pto.tensor(nn), pto.tensor(xx))).astype(np.float64)
    want = scipy.special.expn(nn.astype(np.int64), xx.astype(np.float64))
    normal = want > 1e-37
    np.testing.assert_allclose(got[normal], want[normal], rtol=5e-7)
    assert (got[~normal] < 1e-37).all()
    edge_n = np.array([2.5, 3.9, 0.7, -1.0, 2.0, 0.0, 1.0, 3.0, 5.0, np.nan, 2.0, 2.0], np.float32)
    edge_x = np.array(
        [0.5, 3.0, 2.0, 1.0, -1.0, 0.0, 0.0, 0.0, 0.0, 1.0, np.inf, np.nan], np.float32
    )
    got = np.asarray(S.expn(pto.tensor(edge_n), pto.tensor(edge_x)))
    with np.errstate(all="ignore"):
        trunc = np.where(np.isnan(edge_n) | (edge_n < 0), -1, np.trunc(np.nan_to_num(edge_n)))
        want = scipy.special.expn(trunc.astype(np.int64), edge_x.astype(np.float64))
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=3e-7)
    assert got[5] == got[6] == np.inf and got[7] == 0.5 and got[8] == 0.25
    z = np.array([0.05, 0.5, 1.0, 1.5, 4.0, 30.0], np.float32)
    for order in (1.0, 2.0, 3.0, 7.0):
        orders = np.full_like(z, order)
        gx = np.asarray(pto.grad(lambda v, o=orders: S.expn(o, v).sum())(pto.tensor(z)))
        want = -scipy.special.expn(int(order) - 1, z.astype(np.float64))
        np.testing.assert_allclose(gx, want, rtol=3e-6)
        jx = jax.grad(lambda v, o=orders: jax.scipy.special.expn(o, v).sum())(z)
        np.testing.assert_allclose(gx, np.asarray(jx), rtol=2e-5)
        gn = np.asarray(pto.grad(lambda o: S.expn(o, pto.tensor(z)).sum())(pto.tensor(orders)))
        assert (gn == 0).all()
    npu = pto.jit(S.expn, backend="npu", machine="tiny")
    orders = np.array([0, 1, 2, 3, 9, 40], np.float32)
    np.testing.assert_array_equal(
        np.asarray(npu(orders, z)), np.asarray(S.expn(pto.tensor(orders), pto.tensor(z)))
    )


def test_fresnel_matches_scipy_and_jaxs_edges_and_derivatives() -> None:
    """Within 3e-7 of scipy's float64 from 1e-5 to 3e7 through the series and the
    continued fraction, with the phase from ``x² mod 4`` (JAX's float32 is 1.7e-5 off near
    37,000, where it turns to 0.5); JAX's values at the edges (odd, ±0.5 at ±inf, +0 at -0);
    ``S' = sin(πx²/2)``, ``C' = cos(πx²/2)``; the compiled paths equal eager."""
    rng = np.random.default_rng(12)
    edges = [0.999, 1.0, 1.001, 2.0, 37_250.246, 16_777_215.0, 16_777_216.0, 3e7]
    x = np.r_[np.exp(rng.uniform(-12, 17, 6000)), edges].astype(np.float32)
    x = np.r_[x, -x[:200]]
    s, c = S.fresnel(pto.tensor(x))
    ws, wc = scipy.special.fresnel(x.astype(np.float64))
    np.testing.assert_allclose(np.asarray(s), ws, rtol=3e-7, atol=1e-38)
    np.testing.assert_allclose(np.asarray(c), wc, rtol=3e-7)
    odd = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -2.0, 1e10, 3e38], np.float32)
    for got, want in zip(S.fresnel(pto.tensor(odd)), jax.scipy.special.fresnel(odd), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-7)
        np.testing.assert_array_equal(np.signbit(np.asarray(got)), np.signbit(np.asarray(want)))
    z = np.array([0.3, 0.9, 1.1, 2.0, 7.5, 30.0, -1.7], np.float32)
    phase = np.pi * z.astype(np.float64) ** 2 / 2
    g_s = np.asarray(pto.grad(lambda v: S.fresnel(v)[0].sum())(pto.tensor(z)))
    g_c = np.asarray(pto.grad(lambda v: S.fresnel(v)[1].sum())(pto.tensor(z)))
    np.testing.assert_allclose(g_s, np.sin(phase), atol=5e-7)
    np.testing.assert_allclose(g_c, np.cos(phase), atol=5e-7)
    for backend in ("interpret", "npu"):
        got_s, got_c = pto.jit(S.fresnel, backend=backend, machine="tiny")(z)
        want_s, want_c = S.fresnel(pto.tensor(z))
        np.testing.assert_array_equal(np.asarray(got_s), np.asarray(want_s))
        np.testing.assert_array_equal(np.asarray(got_c), np.asarray(want_c))


@pytest.mark.parametrize("v", [0, 1, 3, 20, 60])
def test_bessel_jn_matches_scipy_everywhere_and_jax_where_jax_converges(v: int) -> None:
    """``J₀ … J_v`` within 5e-7 of scipy's float64 (absolutely: they oscillate through zero)
    from 3e-4 to 3000 through the series, Miller's recurrence (both normalizations) and
    Hankel's expansion with the upward recurrence; odd orders odd; JAX's where its default
    50 iterations converge (4 to 34; it is NaN below about 4 and 1e-5 off by 38)."""
    rng = np.random.default_rng(13 + v)
    top = float(max(v, 12))
    edges = [0.5, 1.999, 2.0, 2.001, 11.99, 12.0, 12.01, top, top + 0.01, np.inf, -np.inf]
    z = np.r_[np.exp(rng.uniform(-8, 8, 2000)), edges].astype(np.float32)
    z = np.r_[z, -z[:100], [np.nan]].astype(np.float32)
    got = np.asarray(S.bessel_jn(pto.tensor(z), v=v)).astype(np.float64)
    assert got.shape == (v + 1, z.size)
    with np.errstate(invalid="ignore"):
        want = scipy.special.jv(np.arange(v + 1)[:, None], z.astype(np.float64)[None, :])
    want[:, np.isinf(z)] = 0.0
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-7)
    mid = np.linspace(4.0, 34.0, 200, dtype=np.float32)
    ours = np.asarray(S.bessel_jn(pto.tensor(mid), v=min(v, 3)))
    np.testing.assert_allclose(
        ours, np.asarray(jax.scipy.special.bessel_jn(mid, v=min(v, 3))), atol=2e-6
    )


def test_bessel_jn_shapes_gradients_compiled_and_errors() -> None:
    z = np.array([[0.3, 1.9, 2.1], [5.0, 12.5, -2.5]], np.float32)
    out = S.bessel_jn(pto.tensor(z), v=3)
    assert out.shape == (4, 2, 3)
    zh = z.astype(np.float16)
    half = S.bessel_jn(pto.tensor(zh), v=3)
    assert half.dtype == pto.float16  # computed in float32, rounded once
    once = S.bessel_jn(pto.tensor(zh.astype(np.float32)), v=3)
    np.testing.assert_array_equal(np.asarray(half), np.asarray(once).astype(np.float16))
    z64 = z.astype(np.float64)
    for n in range(4):
        g = np.asarray(pto.grad(lambda x, n=n: S.bessel_jn(x, v=3)[n].sum())(pto.tensor(z)))
        nxt = scipy.special.jv(n + 1, z64)
        want = -nxt if n == 0 else (scipy.special.jv(n - 1, z64) - nxt) / 2
        np.testing.assert_allclose(g, want, atol=2e-6)
    for backend in ("interpret", "npu"):
        f = pto.jit(lambda x: S.bessel_jn(x, v=3), backend=backend, machine="tiny")
        np.testing.assert_array_equal(np.asarray(f(z)), np.asarray(out))
    for bad in (-1, 2.0, True):
        with pytest.raises(
            pto.PyptoError, match="bessel_jn: the order v must be a non-negative int"
        ):
            S.bessel_jn(pto.tensor(z), v=bad)  # type: ignore[arg-type]


def test_owens_t_matches_scipy_and_jaxs_edges_and_derivatives() -> None:
    """Within 2e-6 of scipy's float64 for ``|h| < 5`` (JAX's float32: 3e-6) and within
    ndtr's float32 precision of the normal tail beyond (1.2e-5 at 12), for ``a`` from 3e-4
    to 3e3, through the quadrature and Owen's identity; even in ``h``, odd in ``a``; JAX's
    edges but ``T(0, inf) = 1/4`` (JAX's is NaN); its partial derivatives in closed form."""
    rng = np.random.default_rng(14)
    h = np.r_[np.exp(rng.uniform(-6, 2.5, 3000)), [0.0, 1.0, 4.8, 12.0]].astype(np.float32)
    a = np.r_[np.exp(rng.uniform(-8, 8, 3000)), [1.0, 1.0, 1.0027, 0.5]].astype(np.float32)
    h, a = np.r_[h, -h[:200]], np.r_[a, -a[:200]]
    got = np.asarray(S.owens_t(pto.tensor(h), pto.tensor(a))).astype(np.float64)
    want = scipy.special.owens_t(h.astype(np.float64), a.astype(np.float64))
    near = np.abs(h) < 5
    np.testing.assert_allclose(got[near], want[near], rtol=2e-6, atol=1e-38)
    np.testing.assert_allclose(got[~near], want[~near], rtol=1.2e-5, atol=1e-38)
    odd_h = np.array([0.0, 1.0, np.inf, 0.0, np.nan, 3.0, -2.0, 1e-30], np.float32)
    odd_a = np.array([0.0, -np.inf, 1.0, 1e30, 1.0, np.nan, -0.0, 1e30], np.float32)
    got_odd = np.asarray(S.owens_t(pto.tensor(odd_h), pto.tensor(odd_a)))
    want_odd = np.asarray(jax.scipy.special.owens_t(odd_h, odd_a))
    np.testing.assert_allclose(got_odd, want_odd, rtol=1e-6)
    np.testing.assert_array_equal(np.signbit(got_odd), np.signbit(want_odd))
    inf = S.owens_t(pto.tensor(np.float32([0.0, 0.0])), pto.tensor(np.float32([np.inf, -np.inf])))
    np.testing.assert_array_equal(np.asarray(inf), [0.25, -0.25])
    hh = np.array([0.3, 1.3, 2.0, 4.0, -1.0, 0.0], np.float32)
    aa = np.array([0.7, 0.5, 3.0, 1.5, 2.0, 0.4], np.float32)
    g_h = np.asarray(pto.grad(lambda x: S.owens_t(x, pto.tensor(aa)).sum())(pto.tensor(hh)))
    g_a = np.asarray(pto.grad(lambda y: S.owens_t(pto.tensor(hh), y).sum())(pto.tensor(aa)))
    h64, a64 = hh.astype(np.float64), aa.astype(np.float64)
    w_a = np.exp(-(h64**2) * (1 + a64**2) / 2) / (2 * np.pi * (1 + a64**2))
    w_h = (
        -np.exp(-(h64**2) / 2) / np.sqrt(2 * np.pi) * scipy.special.erf(a64 * h64 / np.sqrt(2)) / 2
    )
    np.testing.assert_allclose(g_h, w_h, atol=1e-7)
    np.testing.assert_allclose(g_a, w_a, atol=1e-7)
    for backend in ("interpret", "npu"):
        f = pto.jit(S.owens_t, backend=backend, machine="tiny")
        np.testing.assert_array_equal(
            np.asarray(f(hh, aa)), np.asarray(S.owens_t(pto.tensor(hh), pto.tensor(aa)))
        )
