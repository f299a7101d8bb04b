"""``pto.scipy.special``: jax.scipy.special's names, and the functions written over the ops
(``gamma``, ``gammasgn``, ``factorial``, ``multigammaln``) against JAX, eager and under jit."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import scipy.special

import pypto as pto
from pypto.core.errors import DTypeError, ShapeError
from tests.ops.jaxref import assert_matches

S = pto.scipy.special
X = np.array(
    [
        [0.5, 1.0, 2.0, 5.5, 30.0, 1e-3],
        [-0.5, -1.5, -2.0, -0.0, 0.0, -7.25],
        [np.nan, np.inf, -np.inf, 3.0, 12.0, 0.25],
    ],
    np.float32,
)


def test_every_name_is_jax_scipy_specials() -> None:
    for name in S.__all__:
        assert hasattr(jax.scipy.special, name), name
    # and these of JAX's are all that is not built (two of them complex-valued)
    missing = {"hyp1f1", "hyp2f1", "sph_harm_y", "wofz"}
    names = {n for n in dir(jax.scipy.special) if not n.startswith("_")}
    assert names - set(S.__all__) == missing
    # the ops themselves, under scipy's names
    assert S.gammaln is pto.lgamma and S.erfinv is pto.erf_inv and S.expit is pto.sigmoid


@pytest.mark.parametrize("name", ["gamma", "gammasgn", "factorial"])
@pytest.mark.parametrize("backend", ["eager", "interpret", "npu"])
def test_functions_over_the_ops_match_jax(name: str, backend: str) -> None:
    fn = getattr(S, name)
    x = pto.tensor(X)
    got = fn(x) if backend == "eager" else pto.jit(fn, backend=backend, machine="tiny")(x)
    assert_matches(got, getattr(jax.scipy.special, name)(X), 16, what=f"{name} {backend}")


def test_multigammaln_and_its_gradient_match_jax() -> None:
    a = np.array([3.0, 4.5, 10.0], np.float32)
    assert_matches(S.multigammaln(pto.tensor(a), 3), jax.scipy.special.multigammaln(a, 3), 4)
    got = pto.grad(lambda v: S.multigammaln(v, 2).sum())(pto.tensor(a))
    want = jax.grad(lambda v: jax.scipy.special.multigammaln(v, 2).sum())(a)
    assert_matches(got, want, 4)


def test_gamma_gradient_is_gamma_times_digamma() -> None:
    x = np.array([0.7, 2.5, 4.0, -0.5, -2.5], np.float32)
    got = pto.grad(lambda v: S.gamma(v).sum())(pto.tensor(x))
    assert_matches(got, jax.grad(lambda v: jax.scipy.special.gamma(v).sum())(x), 16)


def test_zeta_and_polygamma_below_zero_are_scipys() -> None:
    """For a negative q (an integer s) the series is summed term by term up to q + 16 >= 0:
    the true values, which scipy gives and JAX's shifted series does not (-250.9 at
    zeta(2, -8.75))."""
    q = np.array([-0.5, -2.25, -8.745642, -15.9, -3.0, -17.5], np.float32)
    got = np.asarray(pto.zeta(pto.tensor(np.float32(2.0)), pto.tensor(q)))
    want = scipy.special.zeta(2.0, q.astype(np.float64))
    want[-1] = np.nan  # below -16: not summed
    np.testing.assert_allclose(got, want, rtol=1e-5)
    x = np.array([-0.5, -2.25, -8.745642], np.float32)
    for n in (1, 2, 3):
        got = np.asarray(pto.polygamma(n, pto.tensor(x)))
        np.testing.assert_allclose(got, scipy.special.polygamma(n, x.astype(np.float64)), rtol=1e-5)
    # a fractional s below zero is NaN, as in JAX and scipy
    assert np.isnan(float(pto.zeta(2.5, -0.5)))


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma_gradient_matches_jax(n: int) -> None:
    x = np.array([0.3, 1.0, 2.5, 7.0], np.float32)
    got = pto.grad(lambda v: pto.polygamma(n, v).sum())(pto.tensor(x))
    want = jax.grad(lambda v: jax.scipy.special.polygamma(n, v).sum())(x)
    assert_matches(got, want, 16, what=f"polygamma {n}")


def test_betaln_and_beta_match_jax_also_for_large_arguments() -> None:
    a = np.array([0.5, 3.0, 7.9, 1e-3, 20.0, 1e3, 2.0, 1e6, -0.5], np.float32)
    b = np.array([10.0, 8.0, 8.1, 50.0, 30.5, 2e3, 3.0, 1e6, 2.5], np.float32)
    assert_matches(S.betaln(a, b), jax.scipy.special.betaln(a, b), 4)
    assert_matches(S.betaln(b, a), jax.scipy.special.betaln(b, a), 4)
    assert_matches(S.beta(a[:7], b[:7]), jax.scipy.special.beta(a[:7], b[:7]), 16)
    # float64's value: no cancellation between gammaln(b) and gammaln(a + b)
    np.testing.assert_allclose(float(S.betaln(1e6, 1e6)), scipy.special.betaln(1e6, 1e6), 1e-7)
    got = pto.grad(lambda u, v: S.betaln(u, v).sum(), (0, 1))(pto.tensor(a[:7]), pto.tensor(b[:7]))
    want = jax.grad(lambda u, v: jax.scipy.special.betaln(u, v).sum(), (0, 1))(a[:7], b[:7])
    for g, w in zip(got, want, strict=True):
        assert_matches(g, w, 16)


def test_polygamma_refuses_a_float_order() -> None:
    with pytest.raises(DTypeError, match="integer dtype"):
        pto.polygamma(1.0, pto.tensor([2.0]))


def test_factorial_exact_is_refused() -> None:
    with pytest.raises(DTypeError, match="exact=True"):
        S.factorial(pto.tensor([3.0]), exact=True)


def test_the_other_functions_over_the_ops_match_jax() -> None:
    js = jax.scipy.special
    rng = np.random.default_rng(5)
    z = np.r_[rng.uniform(0.2, 6, 10), [1.0, 2.5]].astype(np.float32)
    m = np.r_[rng.integers(0, 5, 10), [0.0, -1.5]].astype(np.float32)
    assert_matches(S.poch(z, m), js.poch(z, m), 16)
    n = rng.integers(-2, 12, 20).astype(np.float32)
    k = rng.integers(-1, 8, 20).astype(np.float32)
    assert_matches(S.comb(n, k), js.comb(n, k), 16)
    assert_matches(S.comb(n, k, repetition=True), js.comb(n, k, repetition=True), 16)
    x = np.r_[rng.uniform(-3, 8, 12), [0.0, -0.0, np.inf]].astype(np.float32)
    assert_matches(S.loggamma(x), js.loggamma(x), 4)
    lam = np.r_[rng.uniform(-2, 2, 7), [0.0]].astype(np.float32)
    xp = rng.uniform(0.1, 5, 8).astype(np.float32)
    assert_matches(S.boxcox(xp, lam), js.boxcox(xp, lam), 4)
    assert_matches(S.boxcox1p(xp - 0.05, lam), js.boxcox1p(xp - 0.05, lam), 4)
    got = pto.grad(lambda v, w: S.boxcox(v, w).sum(), (0, 1))(pto.tensor(xp), pto.tensor(lam))
    want = jax.grad(lambda v, w: js.boxcox(v, w).sum(), (0, 1))(xp, lam)
    for g, w in zip(got, want, strict=True):
        assert_matches(g, w, 16)
    e = np.r_[rng.uniform(-4, 30, 12), [0.0, 1e4, 1e30, np.inf, -np.inf, np.nan]].astype(np.float32)
    # against float64: JAX's float32 erfcx is 0 between about 9.2 and 9.4 (0.0603 at 9.3)
    with jax.enable_x64():
        want64 = np.asarray(js.erfcx(e.astype(np.float64))).astype(np.float32)
    assert_matches(S.erfcx(e), want64, 4)
    assert float(S.erfcx(pto.tensor(np.float32(9.3)))) == pytest.approx(0.0603207515, rel=1e-6)
    assert_matches(S.bernoulli(12), js.bernoulli(12), 4)
    b = np.r_[rng.uniform(-88, 88, 12), [0.0, 1e-3, np.nan]].astype(np.float32)
    assert_matches(S.i1(b), js.i1(b), 8)
    # past 88.7 JAX's exp(|x|)·i1e overflows (inf at 89, NaN at ±inf); pypto's halves do not
    big = np.array([89.0, -90.0, np.inf, -np.inf], np.float32)
    np.testing.assert_allclose(
        np.asarray(S.i1(big)), [1.8905e37, -5.1111e37, np.inf, -np.inf], 1e-4
    )
    assert_matches(S.bernoulli(1), js.bernoulli(1))


def test_bernoulli_refuses_a_negative_n() -> None:
    with pytest.raises(ShapeError, match="non-negative"):
        S.bernoulli(-1)


def test_exponential_integrals_match_scipy_and_jax() -> None:
    # scipy's float64 over the whole range (JAX's own loops are slow to compile at inf)
    x = np.r_[np.linspace(-80, 88, 841), [1e-30, 1e-8, 0.999, 39.99, 40.01]].astype(np.float32)
    for name in ("exp1", "expi"):
        want = getattr(scipy.special, name)(x.astype(np.float64)).astype(np.float32)
        got = np.asarray(getattr(S, name)(pto.tensor(x)))
        tiny = np.abs(want) < 1e-37  # subnormal results
        np.testing.assert_allclose(got[~tiny], want[~tiny], rtol=2e-6, err_msg=name)
    edges = np.array([0.0, np.inf, -np.inf, np.nan], np.float32)
    np.testing.assert_array_equal(np.asarray(S.exp1(edges)), [np.inf, 0.0, np.nan, np.nan])
    np.testing.assert_array_equal(np.asarray(S.expi(edges)), [-np.inf, np.inf, 0.0, np.nan])
    y = np.array([0.5, 1.0, 2.0, 10.0, 3.0], np.float32)
    assert_matches(S.exp1(y), jax.scipy.special.exp1(y), 8)
    assert_matches(S.expi(y - 4), jax.scipy.special.expi(y - 4), 8)
    # the derivatives: -exp(-x)/x and exp(x)/x
    g1 = np.asarray(pto.grad(lambda v: S.exp1(v).sum())(pto.tensor(y)))
    np.testing.assert_allclose(g1, -np.exp(-y) / y, rtol=1e-4)
    g2 = np.asarray(pto.grad(lambda v: S.expi(v).sum())(pto.tensor(y * 5 - 2)))
    z = y * 5 - 2
    np.testing.assert_allclose(g2, np.exp(z) / z, rtol=1e-4)
