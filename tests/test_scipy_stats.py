"""``pto.scipy.stats``: every function of every distribution against ``jax.scipy.stats`` on
random arguments with their edges (outside the support, NaN, the ends of ``[0, 1]``), the
log-densities' gradients against ``jax.grad``, and a few under ``pto.jit`` on the NPU."""

from __future__ import annotations

import inspect
import types
import zlib
from typing import Any

import jax
import numpy as np
import pytest

import pypto as pto
from pypto.core.errors import ShapeError
from tests.ops.jaxref import assert_matches

ST = pto.scipy.stats
# the multivariate ones take vectors: tested on their own below
MULTI = ("multivariate_normal", "dirichlet", "multinomial")
DISTS = [d for d in ST.__all__ if isinstance(getattr(ST, d), types.ModuleType)]
FUNCS = [(d, f) for d in DISTS if d not in MULTI for f in getattr(ST, d).__all__]


def _arg(name: str, fname: str, pos: int, rng: np.random.Generator, n: int) -> np.ndarray:
    """Values for the argument ``name`` of ``fname``: the point (x, k or a probability), then
    the location, scale and shape parameters, each with its edges."""
    if pos == 0 and fname in ("ppf", "isf"):
        v = rng.uniform(0, 1, n)
        v[:5] = [0.0, 1.0, -0.1, 1.1, np.nan]
    elif pos == 0 and name == "k":
        v = rng.integers(-1, 7, n).astype(float)
        v[:3] = [2.5, -1.0, np.nan]
    elif pos == 0:
        v = rng.uniform(-3, 6, n)
        v[:4] = [np.nan, np.inf, -np.inf, 0.0]
    elif name == "loc":
        v = rng.normal(0, 1, n)
    elif name == "p":
        v = rng.uniform(0.05, 0.95, n)
    else:  # scale, a, b, df, mu
        v = rng.uniform(0.3, 4.0, n)
    return v.astype(np.float32)


def _args(dist: str, fname: str, seed: int, n: int = 64) -> list[np.ndarray]:
    params = list(inspect.signature(getattr(getattr(jax.scipy.stats, dist), fname)).parameters)
    rng = np.random.default_rng(seed)
    return [_arg(p, fname, i, rng, n) for i, p in enumerate(params)]


@pytest.mark.parametrize(("dist", "fname"), FUNCS, ids=[f"{d}.{f}" for d, f in FUNCS])
def test_matches_jax(dist: str, fname: str) -> None:
    args = _args(dist, fname, zlib.crc32(f"{dist}/{fname}".encode()))  # stable across runs
    got = getattr(getattr(ST, dist), fname)(*(pto.tensor(a) for a in args))
    want = getattr(getattr(jax.scipy.stats, dist), fname)(*args)
    assert_matches(got, want, 16, what=f"{dist}.{fname}")


def test_every_distribution_has_jaxs_functions() -> None:
    assert set(ST.__all__) - set(DISTS) == {"ModeResult", "gaussian_kde", "mode", "rankdata", "sem"}
    for dist in DISTS:
        ours, theirs = getattr(ST, dist), getattr(jax.scipy.stats, dist)
        assert set(ours.__all__) <= set(dir(theirs)), dist
    # the distribution functions over the incomplete gamma and beta functions
    for dist in ("gamma", "chi2", "beta"):
        assert {"cdf", "sf", "logcdf", "logsf"} <= set(getattr(ST, dist).__all__), dist
    assert "cdf" in ST.poisson.__all__ and "cdf" in ST.gennorm.__all__


# JAX cannot differentiate the Gumbel densities (xlogy(-1, scale): an integer's float0
# tangent): see test_gumbel_gradients_are_the_derivatives
LOGDENSITIES = [
    (d, f) for d, f in FUNCS if f in ("logpdf", "logpmf") and not d.startswith("gumbel")
]


def _inside(dist: str, a: dict[str, np.ndarray]) -> np.ndarray:
    """A point inside the support of ``dist`` with the parameters ``a``."""
    x, loc, scale = a.get("x", a.get("k")), a.get("loc", 0.0), a.get("scale", 1.0)
    if dist in ("expon", "gamma", "chi2"):
        return loc + np.abs(x) + np.float32(0.1) * scale
    if dist == "uniform":
        return loc + np.float32(0.5) * scale
    if dist == "pareto":
        return loc + np.float32(1.5) * scale
    if dist == "beta":
        return loc + scale * np.linspace(0.1, 0.9, x.size, dtype=np.float32)
    return x  # the whole line, or a mass function's k (not differentiated)


@pytest.mark.parametrize(("dist", "fname"), LOGDENSITIES, ids=[f"{d}.{f}" for d, f in LOGDENSITIES])
def test_log_density_gradients_match_jax(dist: str, fname: str) -> None:
    jf = getattr(getattr(jax.scipy.stats, dist), fname)
    names = list(inspect.signature(jf).parameters)
    named = dict(zip(names, (a[8:16] for a in _args(dist, fname, 7)), strict=True))
    named[names[0]] = _inside(dist, named)
    args = [named[n] for n in names]
    # every float argument at once (a mass function's k is a count)
    argnums = tuple(range(fname == "logpmf", len(args)))
    f = getattr(getattr(ST, dist), fname)
    got = pto.grad(lambda *a: f(*a).sum(), argnums)(*(pto.tensor(a) for a in args))
    want = jax.grad(lambda *a: jf(*a).sum(), argnums)(*args)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_matches(g, w, 16, what=f"{dist}.{fname} d/d {names[argnums[i]]}")


def test_gumbel_gradients_are_the_derivatives() -> None:
    x = np.linspace(-2, 3, 7, dtype=np.float32)
    loc, scale = np.float32(0.3), np.float32(1.7)
    z = (x - loc) / scale
    for dist, want in (
        (ST.gumbel_r, (np.exp(-z) - 1) / scale),  # d/dx of -log s - z - exp(-z)
        (ST.gumbel_l, (1 - np.exp(z)) / scale),  # d/dx of -log s + z - exp(z)
    ):
        got = pto.grad(lambda v, d=dist: d.logpdf(v, loc, scale).sum())(pto.tensor(x))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_multivariate_normal_matches_jax() -> None:
    rng = np.random.default_rng(3)
    m = rng.normal(size=(4, 4))
    cov = (m @ m.T + 4 * np.eye(4)).astype(np.float32)
    x = rng.normal(size=(5, 4)).astype(np.float32)
    mean = rng.normal(size=4).astype(np.float32)
    mvn, jmvn = ST.multivariate_normal, jax.scipy.stats.multivariate_normal
    assert_matches(mvn.logpdf(x, mean, cov), jmvn.logpdf(x, mean, cov), 16)
    assert_matches(mvn.pdf(x, mean, cov), jmvn.pdf(x, mean, cov), 16)
    assert_matches(mvn.logpdf(x, mean, 2.0), jmvn.logpdf(x, mean, 2.0), 16)  # isotropic
    assert_matches(mvn.logpdf(x[:, 0], 0.5, 2.0), jmvn.logpdf(x[:, 0], 0.5, 2.0), 4)  # 1-d
    got = pto.grad(lambda c: mvn.logpdf(x, mean, c).sum())(pto.tensor(cov))
    want = jax.grad(lambda c: jmvn.logpdf(x, mean, c).sum())(cov)
    assert_matches(got, want, 64)
    with pytest.raises(ShapeError, match=r"\[\.\.\., 4, 4\] covariance"):
        mvn.logpdf(x, mean, cov[:3, :3])


@pytest.mark.parametrize("backend", ["interpret", "npu"])
def test_densities_compile(backend: str) -> None:
    x = np.linspace(-2, 3, 24, dtype=np.float32).reshape(4, 6)

    def f(v: Any) -> Any:
        return (
            ST.norm.logcdf(v, 0.5, 2.0)
            + ST.t.logpdf(v, 3.0)
            + ST.gamma.logpdf(pto.abs(v) + 0.1, 2.5)
            + ST.logistic.logpdf(v)
        )

    got = pto.jit(f, backend=backend, machine="tiny")(pto.tensor(x))
    st = jax.scipy.stats
    want = (
        st.norm.logcdf(x, 0.5, 2.0)
        + st.t.logpdf(x, 3.0)
        + st.gamma.logpdf(np.abs(x) + 0.1, 2.5)
        + st.logistic.logpdf(x)
    )
    assert_matches(got, want, 16)


def test_dirichlet_and_multinomial_match_jax() -> None:
    rng = np.random.default_rng(4)
    alpha = np.array([0.5, 2.0, 3.5], np.float32)
    x = rng.dirichlet(alpha, 6).T.astype(np.float32)  # components on the first axis
    x[:, 0] = [0.5, 0.6, -0.1]  # off the simplex
    d, jd = ST.dirichlet, jax.scipy.stats.dirichlet
    assert_matches(d.logpdf(x, alpha), jd.logpdf(x, alpha), 16)
    assert_matches(d.pdf(x[:2], alpha), jd.pdf(x[:2], alpha), 16)  # the last one implied
    got = pto.grad(lambda a: d.logpdf(x[:, 1:], a).sum())(pto.tensor(alpha))
    want = jax.grad(lambda a: jd.logpdf(x[:, 1:], a).sum())(alpha)
    assert_matches(got, want, 16)
    with pytest.raises(ShapeError, match="3 or 2 components"):
        d.logpdf(x[:1], alpha)
    counts = np.array([[2, 0, 3], [1, 1, 3]], np.int32)
    p = np.array([0.2, 0.3, 0.5], np.float32)
    m, jm = ST.multinomial, jax.scipy.stats.multinomial
    for n in (5, 10):
        assert_matches(m.logpmf(counts[0], n, p), jm.logpmf(counts[0], n, p), 16)
        assert_matches(m.pmf(counts, n, p), jm.pmf(counts, n, p), 16)
    got = pto.grad(lambda q: m.logpmf(counts[0], 5, q))(pto.tensor(p))
    assert_matches(got, jax.grad(lambda q: jm.logpmf(counts[0], 5, q))(p), 4)
    with pytest.raises(pto.DTypeError, match="must be integers"):
        m.logpmf(counts.astype(np.float32), 5, p)


def test_truncnorm_in_every_case_of_its_mass_matches_jax() -> None:
    x = np.linspace(-4, 4, 17, dtype=np.float32)
    tn, jtn = ST.truncnorm, jax.scipy.stats.truncnorm
    # left tail, right tail, the middle, far out, and a >= b
    for a, b in ((-3.0, -1.0), (0.5, 2.0), (-1.0, 1.5), (-30.0, -20.0), (1.0, 1.0)):
        for f in tn.__all__:
            got = getattr(tn, f)(x, a, b, 0.2, 1.3)
            assert_matches(got, getattr(jtn, f)(x, a, b, 0.2, 1.3), 64, what=f"{f} {a} {b}")


@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
def test_rankdata_matches_jax(method: str) -> None:
    rng = np.random.default_rng(8)
    a = rng.integers(0, 4, (5, 6)).astype(np.float32)  # many ties
    for axis in (None, 0, 1, -1):
        got = ST.rankdata(a, method, axis=axis)
        assert_matches(got, jax.scipy.stats.rankdata(a, method, axis=axis), what=f"{axis}")
    a[2, 3] = np.nan  # its row (or everything) is NaN
    for axis in (None, 1):
        got = ST.rankdata(a, method, axis=axis)
        assert_matches(got, jax.scipy.stats.rankdata(a, method, axis=axis), what=f"{axis}")
    ints = rng.integers(-3, 3, 9).astype(np.int32)
    assert_matches(ST.rankdata(ints, method), jax.scipy.stats.rankdata(ints, method))
    staged = pto.jit(lambda v: ST.rankdata(v, method, axis=1), backend="npu", machine="tiny")
    assert_matches(staged(pto.tensor(a[:, :4])), jax.scipy.stats.rankdata(a[:, :4], method, axis=1))


def test_mode_and_sem_match_jax() -> None:
    rng = np.random.default_rng(9)
    b = rng.integers(0, 3, (7, 4)).astype(np.int32)
    for axis in (None, 0, 1, -1):
        for keepdims in (False, True):
            got, want = (
                ST.mode(b, axis, keepdims=keepdims),
                jax.scipy.stats.mode(b, axis, keepdims=keepdims),
            )
            assert_matches(got.mode, want.mode, what=f"mode {axis} {keepdims}")
            assert_matches(got.count, want.count, what=f"count {axis} {keepdims}")
    c = np.array([1.0, np.nan, np.nan, 2.0, 1.0, np.nan], np.float32)  # NaNs count as one
    got, want = ST.mode(c), jax.scipy.stats.mode(c)
    assert_matches(got.mode, want.mode)
    assert_matches(got.count, want.count)
    a = rng.normal(size=(5, 6)).astype(np.float32)
    a[2, 3] = np.nan
    for axis in (None, 0, 1):
        assert_matches(ST.sem(a, axis), jax.scipy.stats.sem(a, axis), 8)
        omit = ST.sem(a, axis, nan_policy="omit")
        assert_matches(omit, jax.scipy.stats.sem(a, axis, nan_policy="omit"), 8)
    with pytest.raises(ShapeError, match="nan_policy 'raise'"):
        ST.sem(a, nan_policy="raise")
    with pytest.raises(ShapeError, match="unknown method 'mean'"):
        ST.rankdata(a, "mean")


@pytest.mark.parametrize("d", [1, 2, 3])
def test_gaussian_kde_matches_jax(d: int) -> None:
    rng = np.random.default_rng(d)
    data = rng.normal(size=(d, 40)).astype(np.float32)
    w = rng.uniform(0.5, 2, 40).astype(np.float32)
    pts = (rng.normal(size=(d, 7)) * 2).astype(np.float32)
    jkde = jax.scipy.stats.gaussian_kde
    for bw in (None, "silverman", 0.4):
        for weights in (None, w):
            k, jk = ST.gaussian_kde(data, bw, weights), jkde(data, bw, weights)
            for f in ("evaluate", "logpdf", "pdf"):
                assert_matches(getattr(k, f)(pts), getattr(jk, f)(pts), 16, what=f"{f} {bw}")
            mean, cov = np.full(d, 0.3, np.float32), np.eye(d, dtype=np.float32)
            assert_matches(k.integrate_gaussian(mean, cov), jk.integrate_gaussian(mean, cov), 16)
            other = data[:, :10] + 1
            assert_matches(
                k.integrate_kde(ST.gaussian_kde(other)), jk.integrate_kde(jkde(other)), 16
            )
            if d == 1:
                assert_matches(k.integrate_box_1d(-0.5, 1.0), jk.integrate_box_1d(-0.5, 1.0), 16)

    # one broadcast difference per pair of points, not a loop: the graph does not grow with
    # the number of points of the smaller estimate
    def kde_product(a: Any, b: Any) -> Any:
        return ST.gaussian_kde(a).integrate_kde(ST.gaussian_kde(b))

    sizes = {len(pto.jit(kde_product).lower(data, data[:, :n] + 1).tensor_ir.eqns) for n in (5, 20)}
    assert len(sizes) == 1, sizes
    # far from the data the log-density is a logsumexp, not log(0)
    far = np.full((d, 1), 50.0, np.float32)
    assert_matches(ST.gaussian_kde(data).logpdf(far), jkde(data).logpdf(far), 16)
    # resampling: a datum by its weight plus the kernel's noise (pypto's seeds, not JAX's)
    sample = ST.gaussian_kde(data, weights=w).resample(3, (4000,))
    assert sample.shape == (d, 4000)
    wn = w / w.sum()
    mean = (data * wn).sum(1)
    np.testing.assert_allclose(np.asarray(sample).mean(1), mean, atol=0.1)
    with pytest.raises(ShapeError, match="points have dimension"):
        ST.gaussian_kde(data).evaluate(np.zeros((d + 1, 2), np.float32))


def test_poisson_entropy_keeps_its_precision_at_both_ends() -> None:
    """Against 30-digit values: the sum's ``log k!`` are exact constants (JAX's float32 is
    4.8e-7 off at μ = 1e-30, from ``gammaln(1)``), and the asymptotic series from μ = 50."""
    mu = np.array([1e-30, 1e-5, 0.5, 10.0, 49.9, 50.0, 100.0], np.float32)
    want = [7.0077548e-29, 1.251292893e-4, 0.9276374675, 2.561409935, 3.37226185, 3.373266261]
    want.append(3.720686072)
    got = np.asarray(ST.poisson.entropy(pto.tensor(mu)))
    np.testing.assert_allclose(got, want, rtol=3e-6)
    x = np.array([0.5, 3.0, 20.0, 80.0], np.float32)
    g = pto.grad(lambda m: ST.poisson.entropy(m).sum())(pto.tensor(x))
    w = jax.grad(lambda m: jax.scipy.stats.poisson.entropy(m).sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=5e-4)
