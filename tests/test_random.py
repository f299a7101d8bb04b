"""``pto.random`` with keys against ``jax.random``: the same keys, bits and integer samples
bit for bit, the same floats in [0, 1), and the samplers built on them within tolerance —
eagerly, under ``jit`` with a traced key, and on the simulated NPU."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import pypto as pto
from tests.ops.jaxref import assert_matches

R = pto.random
KEY, JKEY = R.key(0), jax.random.PRNGKey(0)
LOGITS = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
P = np.array([0.1, 0.2, 0.3, 0.4], np.float32)


def _bits(k: Any) -> np.ndarray:
    return np.asarray(k).view(np.uint32)


def test_keys_split_fold_in_and_bits_equal_jax() -> None:
    for seed in (0, 7, -1, 2**31 - 1, 2**31, 2**32 + 5, -(2**31)):
        np.testing.assert_array_equal(_bits(R.key(seed)), np.asarray(jax.random.PRNGKey(seed)))
    np.testing.assert_array_equal(_bits(R.split(KEY)), np.asarray(jax.random.split(JKEY)))
    np.testing.assert_array_equal(
        _bits(R.split(KEY, (2, 3))), np.asarray(jax.random.split(JKEY, (2, 3)))
    )
    for data in (0, 12345, 2**32 - 3):
        np.testing.assert_array_equal(
            _bits(R.fold_in(KEY, data)), np.asarray(jax.random.fold_in(JKEY, data))
        )
    np.testing.assert_array_equal(
        _bits(R.bits(KEY, (5, 7))), np.asarray(jax.random.bits(JKEY, (5, 7)))
    )
    np.testing.assert_array_equal(
        np.asarray(R.bits(KEY, (9,), np.uint8)).view(np.uint8),
        np.asarray(jax.random.bits(JKEY, (9,), jnp.uint8)),
    )
    # JAX keys of either kind are accepted as they are
    typed = jax.random.key(3)
    np.testing.assert_array_equal(
        np.asarray(R.uniform(typed, (4,))), np.asarray(jax.random.uniform(typed, (4,)))
    )
    np.testing.assert_array_equal(
        np.asarray(R.uniform(jax.random.PRNGKey(3), (4,))), np.asarray(R.uniform(R.key(3), (4,)))
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=str)
def test_uniform_and_normal_equal_jax(dtype: Any) -> None:
    k, jk = R.fold_in(KEY, 5), jax.random.fold_in(JKEY, 5)
    np.testing.assert_array_equal(
        np.asarray(R.uniform(k, (1000,), dtype)), np.asarray(jax.random.uniform(jk, (1000,), dtype))
    )
    # a scaled range: JAX's CPU build fuses the multiply-add, pypto rounds twice
    assert_matches(
        R.uniform(k, (20, 30), dtype, -2.0, 3.0), jax.random.uniform(jk, (20, 30), dtype, -2.0, 3.0)
    )
    assert_matches(R.normal(k, (500,), dtype), jax.random.normal(jk, (500,), dtype), 4)
    assert_matches(
        R.normal(k, (3,), dtype, mean=2.0, std=0.5), jax.random.normal(jk, (3,), dtype) * 0.5 + 2, 4
    )


@pytest.mark.parametrize(
    ("lo", "hi", "dtype"),
    [
        (0, 10, np.int32),
        (-5, 3, np.int32),
        (-(2**31), 2**31 - 1, np.int32),  # a span past 2^31: unsigned remainders
        (-7, 2**31 - 1, np.int32),
        (3, 3, np.int32),
        (-100, 200, np.int8),  # clipped to int8's range, sampled in int32
        (0, 256, np.int8),
        (5, -2, np.int8),
        (np.array([[-3], [0], [10]], np.int32), np.array([5, 9, 100, 2**30], np.int32), np.int32),
    ],
)
def test_randint_equals_jax(lo: Any, hi: Any, dtype: Any) -> None:
    shape = (3, 4) if isinstance(lo, np.ndarray) else (2000,)
    got = R.randint(KEY, shape, lo, hi, dtype)
    assert_matches(got, jax.random.randint(JKEY, shape, lo, hi, dtype))


def test_discrete_samplers_equal_jax() -> None:
    cases: list[tuple[Any, Any]] = [
        (R.bernoulli(KEY, 0.3, (100,)), jax.random.bernoulli(JKEY, 0.3, (100,))),
        (R.bernoulli(KEY, P), jax.random.bernoulli(JKEY, P)),
        # two uniforms, for probabilities below float32's resolution
        (
            R.bernoulli(KEY, np.float32([1e-9, 3e-8, 0.4]), (500, 3), mode="high"),
            jax.random.bernoulli(JKEY, np.float32([1e-9, 3e-8, 0.4]), (500, 3), mode="high"),
        ),
        (
            R.categorical(KEY, LOGITS, mode="high"),
            jax.random.categorical(JKEY, LOGITS, mode="high"),
        ),
        (R.rademacher(KEY, (50,)), jax.random.rademacher(JKEY, (50,))),
        (R.categorical(KEY, LOGITS), jax.random.categorical(JKEY, LOGITS)),
        (
            R.categorical(KEY, LOGITS, axis=0, shape=(3, 6)),
            jax.random.categorical(JKEY, LOGITS, axis=0, shape=(3, 6)),
        ),
        (
            R.categorical(KEY, LOGITS, shape=(3, 4), replace=False),
            jax.random.categorical(JKEY, LOGITS, shape=(3, 4), replace=False),
        ),
        (R.permutation(KEY, 20), jax.random.permutation(JKEY, 20)),
        (R.permutation(KEY, LOGITS, 1), jax.random.permutation(JKEY, LOGITS, 1)),
        (
            R.permutation(KEY, LOGITS, 1, independent=True),
            jax.random.permutation(JKEY, LOGITS, 1, independent=True),
        ),
        # past about 1,600 elements the shuffle sorts twice
        (R.permutation(KEY, np.arange(3000)), jax.random.permutation(JKEY, np.arange(3000))),
        (R.choice(KEY, 10, (7,)), jax.random.choice(JKEY, 10, (7,))),
        (
            R.choice(KEY, LOGITS, (2,), replace=False, axis=1),
            jax.random.choice(JKEY, LOGITS, (2,), replace=False, axis=1),
        ),
        (R.choice(KEY, 4, (20,), p=P), jax.random.choice(JKEY, 4, (20,), p=P)),
        (
            R.choice(KEY, 4, (3,), replace=False, p=P),
            jax.random.choice(JKEY, 4, (3,), replace=False, p=P),
        ),
    ]
    for i, (got, want) in enumerate(cases):
        assert_matches(got, want, what=f"case {i}")


MEANS = np.array([0.5, 1.0, 3.0], np.float32)
CONTINUOUS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    (n, (), {"shape": (500,)})
    for n in ("gumbel", "exponential", "laplace", "logistic", "cauchy", "lognormal", "maxwell")
] + [
    ("double_sided_maxwell", (np.float32(1.0), np.array([2.0, 3.0], np.float32)), {"shape": (5,)}),
    ("gumbel", (), {"shape": (500,), "mode": "high"}),
    ("gumbel", (), {"shape": (100,), "dtype": np.float16, "mode": "high"}),
    ("gumbel", (), {"shape": (2000,), "mode": "highest"}),
    ("gumbel", (), {"shape": (100,), "dtype": np.float16, "mode": "highest"}),
    ("weibull_min", (2.0, 1.5), {"shape": (300,)}),
    ("pareto", (np.array([1.0, 3.0], np.float32),), {}),
    ("rayleigh", (2.0,), {"shape": (300,)}),
    ("wald", (MEANS,), {"shape": (100, 3)}),
    ("triangular", (-1.0, 0.5, 2.0), {"shape": (300,)}),
    ("geometric", (np.array([0.1, 0.3, 0.9], np.float32),), {"shape": (50, 3)}),
]


@pytest.mark.parametrize(("name", "args", "kw"), CONTINUOUS, ids=[c[0] for c in CONTINUOUS])
def test_continuous_samplers_equal_jax(name: str, args: tuple[Any, ...], kw: dict) -> None:
    got = getattr(R, name)(KEY, *args, **kw)
    assert_matches(got, getattr(jax.random, name)(JKEY, *args, **kw), 8, what=name)


GAMMAS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("gamma", (np.random.default_rng(1).uniform(0.05, 6, (40, 25)).astype(np.float32),), {}),
    ("gamma", (np.array([0.5, 3.0], np.float32),), {"shape": (4, 2), "dtype": ml_dtypes.bfloat16}),
    ("gamma", (2.0,), {"shape": (10,), "dtype": np.float16}),
    ("loggamma", (np.array([0.01, 0.3, 1.0, 2.5, 100.0], np.float32),), {}),
    ("beta", (0.5, np.array([1.0, 2.0, 7.0], np.float32)), {"shape": (50, 3)}),
    ("dirichlet", (np.array([0.5, 1.0, 3.0], np.float32),), {"shape": (20,)}),
    ("chisquare", (3.0,), {"shape": (100,)}),
    ("t", (np.array([1.0, 5.0], np.float32),), {"shape": (50, 2)}),
    ("f", (3.0, 7.0), {"shape": (100,)}),
    ("generalized_normal", (1.5,), {"shape": (100,)}),
]


@pytest.mark.parametrize(("name", "args", "kw"), GAMMAS, ids=[g[0] for g in GAMMAS])
def test_gamma_and_its_family_equal_jax(name: str, args: tuple[Any, ...], kw: dict) -> None:
    """Marsaglia and Tsang's loops unrolled over every element: JAX's keys, proposals and
    acceptances, so the same draws (to the tolerance of the functions applied)."""
    got = getattr(R, name)(KEY, *args, **kw)
    assert_matches(got, getattr(jax.random, name)(JKEY, *args, **kw), 8, what=name)


def test_gamma_traces_under_jit() -> None:
    a = np.array([0.5, 2.0, 9.0], np.float32)
    got = pto.jit(lambda k, x: R.gamma(k, x), backend="interpret")(KEY, a)
    assert_matches(got, jax.random.gamma(JKEY, a), 8)


def test_gamma_samplers_differentiate_in_their_shapes_as_jax() -> None:
    """The implicit gradient: the sample held at its quantile as the shape moves."""
    a = np.array([0.5, 1.5, 3.0, 10.0], np.float32)
    w = np.arange(1.0, 5.0, dtype=np.float32)
    for name, extra in (("gamma", ()), ("loggamma", ()), ("beta", (2.0,))):

        def ours(x: Any, name: str = name, extra: tuple = extra) -> Any:
            return (getattr(R, name)(KEY, x, *extra) * w).sum()

        def theirs(x: Any, name: str = name, extra: tuple = extra) -> Any:
            return (getattr(jax.random, name)(JKEY, x, *extra) * w).sum()

        want = jax.grad(theirs)(a)
        assert_matches(pto.grad(ours)(a), want, 16, what=name)
        if name == "gamma":
            got = pto.jit(pto.grad(ours), backend="interpret")(a)
            assert_matches(got, want, 16, what="jit grad gamma")


RATES = np.array([0.0, 0.5, 3.0, 9.99, 10.0, 12.0, 50.0, 1e3, np.inf, np.nan, -1.0], np.float32)
TRIALS = np.array([0, 3, 10, 21, 100, 1000, 1e6, np.inf, -1, np.nan, 5, 5, 7.7], np.float32)
PROBS = np.array([0.3, 0.5, 0.9, 0.49, 0.11, 0.5, 0.3, 0.3, 0.3, 0.3, 0.0, 1.0, np.nan], np.float32)


def test_poisson_and_binomial_equal_jax() -> None:
    """JAX's loops over the whole shape, both methods of each, and its edge values: the same
    integers (binomial's as floats, NaN and infinity included)."""
    rng = np.random.default_rng(4)
    rates = np.concatenate([rng.uniform(0, 10, 300), rng.uniform(10, 1000, 300)])
    trials = np.floor(10 ** rng.uniform(0, 5, 500)).astype(np.float32)
    probs = rng.uniform(0, 1, 500).astype(np.float32)
    cases: list[tuple[Any, Any]] = [
        (R.poisson(KEY, RATES, (5, 11)), jax.random.poisson(JKEY, RATES, (5, 11))),
        (R.poisson(KEY, rates), jax.random.poisson(JKEY, rates)),
        (R.poisson(KEY, 4.0, (40,), np.int8), jax.random.poisson(JKEY, 4.0, (40,), jnp.int8)),
        (
            R.binomial(KEY, TRIALS, PROBS, (4, 13)),
            jax.random.binomial(JKEY, TRIALS, PROBS, (4, 13)),
        ),
        (R.binomial(KEY, trials, probs), jax.random.binomial(JKEY, trials, probs)),
        (R.binomial(KEY, 12, 0.25, (30,)), jax.random.binomial(JKEY, 12, 0.25, (30,))),
    ]
    for i, (got, want) in enumerate(cases):
        assert_matches(got, want, what=f"case {i}")


def test_poisson_at_large_rates_is_jax_but_for_rounding() -> None:
    """Above a rate of about 1e4 the rejection test compares sums of size ``lam·log(lam)``
    in float32, where the last bit of ``log`` and ``lgamma`` decides (pypto's and XLA's
    differ there): nearly every sample is JAX's, and the rest are draws of the same law."""
    lam = np.float32(10 ** np.random.default_rng(5).uniform(4, 6, 2000))
    got, want = np.asarray(R.poisson(KEY, lam)), np.asarray(jax.random.poisson(JKEY, lam))
    assert (got == want).mean() > 0.98
    z = (got - lam) / np.sqrt(lam)
    assert abs(z.mean()) < 0.1 and 0.9 < z.std() < 1.1


def test_poisson_and_binomial_trace_under_jit_and_map_with_vmap() -> None:
    """Traced, the loops run a fixed count, each round kept only while JAX's would run (its
    rejection samplers take every accepted proposal, an element's second too)."""
    rates = RATES[:8]
    f = pto.jit(lambda k, lam: R.poisson(k, lam, (6, 8)), backend="interpret")
    assert_matches(f(KEY, rates), jax.random.poisson(JKEY, rates, (6, 8)), what="poisson")
    g = pto.jit(lambda k, n, p: R.binomial(k, n, p), backend="interpret")
    want = jax.random.binomial(JKEY, TRIALS, PROBS)
    assert_matches(g(KEY, TRIALS, PROBS), want, what="binomial")
    keys, jkeys = R.split(KEY, 3), jax.random.split(JKEY, 3)
    got = pto.vmap(lambda k: R.poisson(k, np.float32([2.0, 30.0]), (2,)))(keys)
    assert_matches(
        got, jax.vmap(lambda k: jax.random.poisson(k, np.float32([2.0, 30.0]), (2,)))(jkeys)
    )


def test_multinomial_equals_jax() -> None:
    """Category by category a binomial of the trials left: JAX's counts, for batches of
    distributions, categories of probability 0, a sample shape, and traced."""
    rng = np.random.default_rng(6)
    p = rng.random((5, 6)).astype(np.float32)
    p[1, 2] = p[3, 0] = 0.0
    p /= p.sum(-1, keepdims=True)
    n = np.array([0, 1, 17, 150, 3000], np.float32)
    assert_matches(R.multinomial(KEY, n, p), jax.random.multinomial(JKEY, n, p), what="batch")
    kw = dict(shape=(4, 3), dtype=pto.bfloat16)
    got = R.multinomial(KEY, 50, P[:3] / P[:3].sum(), **kw)
    want = jax.random.multinomial(JKEY, 50, P[:3] / P[:3].sum(), shape=(4, 3), dtype=jnp.bfloat16)
    assert_matches(got, want, what="shape")
    f = pto.jit(lambda k, n, p: R.multinomial(k, n, p), backend="interpret")
    assert_matches(f(KEY, n, p), jax.random.multinomial(JKEY, n, p), what="jit")
    with pytest.raises(pto.ShapeError, match=r"random\.multinomial: p needs an axis"):
        R.multinomial(KEY, 3, np.float32(1.0))
    with pytest.raises(pto.ShapeError, match=r"\(3,\) do not broadcast to the sample shape"):
        R.multinomial(KEY, 3, P[:3], shape=(2, 4))


COV = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
LINALG: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("multivariate_normal", (np.arange(3.0, dtype=np.float32), COV), {"shape": (50,)}),
    (
        "multivariate_normal",
        (np.zeros((2, 3), np.float32), np.stack([COV, 2 * COV])),
        {"shape": (5, 2)},
    ),
    ("orthogonal", (4,), {"shape": (3,)}),
    ("orthogonal", (5,), {"m": 2}),
    ("orthogonal", (2,), {"shape": (2,), "m": 6}),
    ("ball", (3,), {"shape": (100,)}),
    ("ball", (4, 1.0), {"shape": (20,)}),
    ("ball", (2, 3.5), {"shape": (20,)}),
]


@pytest.mark.parametrize(("name", "args", "kw"), LINALG, ids=[c[0] for c in LINALG])
def test_samplers_built_on_linear_algebra_equal_jax(
    name: str, args: tuple[Any, ...], kw: dict
) -> None:
    got = getattr(R, name)(KEY, *args, **kw)
    assert_matches(got, getattr(jax.random, name)(JKEY, *args, **kw), 16, what=name)


@pytest.mark.parametrize("method", ["eigh", "svd"])
def test_multivariate_normal_by_eigh_and_svd_uses_jax_normals(method: str) -> None:
    """The factor from ``eigh`` or ``svd`` is unique up to its columns' signs, which LAPACK
    and pypto may choose differently: the samples are ``mean + F z`` with JAX's normals ``z``
    and a factor ``F`` with ``F Fᵀ = cov``."""
    mean = np.array([1.0, -2.0, 0.5], np.float32)
    x = np.asarray(R.multivariate_normal(KEY, mean, COV, (40,), method=method))
    if method == "eigh":
        w, v = (np.asarray(t) for t in pto.linalg.eigh(COV))
        factor = v * np.sqrt(w)[None, :]
    else:
        u, sv, _ = (np.asarray(t) for t in pto.linalg.svd(COV))
        factor = u * np.sqrt(sv)[None, :]
    np.testing.assert_allclose(factor @ factor.T, COV, rtol=1e-5, atol=1e-5)
    z = np.linalg.solve(factor.astype(np.float64), (x - mean).T.astype(np.float64)).T
    np.testing.assert_allclose(z, np.asarray(jax.random.normal(JKEY, (40, 3))), atol=2e-5)


def test_new_samplers_name_bad_arguments() -> None:
    with pytest.raises(pto.DTypeError, match=r"random\.poisson: samples integers"):
        R.poisson(KEY, 3.0, (2,), pto.float32)
    with pytest.raises(pto.ShapeError, match=r"random\.poisson: .*\(3,\) do not broadcast"):
        R.poisson(KEY, np.ones(3, np.float32), (2,))
    with pytest.raises(
        pto.ShapeError, match=r"random\.binomial: .*\(3,\), \(2,\) do not broadcast"
    ):
        R.binomial(KEY, np.ones(3, np.float32), np.full(2, 0.5, np.float32))
    with pytest.raises(pto.DTypeError, match=r"random\.binomial: samples floats"):
        R.binomial(KEY, 3, 0.5, (2,), pto.int32)
    with pytest.raises(pto.ShapeError, match=r"mean \[\.\.\., n\] and cov \[\.\.\., n, n\]"):
        R.multivariate_normal(KEY, np.zeros(3, np.float32), np.eye(2, dtype=np.float32))
    with pytest.raises(pto.ShapeError, match="method='qr' is not one of"):
        R.multivariate_normal(
            KEY, np.zeros(2, np.float32), np.eye(2, dtype=np.float32), method="qr"
        )
    with pytest.raises(pto.ShapeError, match=r"random\.orthogonal: n must be a non-negative"):
        R.orthogonal(KEY, -2)
    with pytest.raises(pto.ShapeError, match=r"random\.ball: p must be a Python number"):
        R.ball(KEY, 3, p="2")
    with pytest.raises(pto.ShapeError, match=r"mode 'top': random\.gumbel takes one of"):
        R.gumbel(KEY, (2,), mode="top")
    with pytest.raises(pto.ShapeError, match=r"random\.bernoulli takes one of 'low', 'high'\n"):
        R.bernoulli(KEY, 0.5, (2,), mode="highest")


def test_gumbel_highest_turns_64_fixed_point_bits_into_the_truncated_float32() -> None:
    # the far tail that mode="highest" is for: fractions down to 2^-64, both halves' edges
    from pypto.ops.prng import _fixed64_to_f32

    pats = [(0, 1), (0, 0x7FFFFFFF), (0, -1), (1, 0), (0x00FFFFFF, -1), (0x7FFFFFFF, -1)]
    pats += [(0x12345, 0x6789ABC), (-1, -1), (-(2**31), 0), (0, 0x100)]
    hi = np.array([p[0] for p in pats], np.int32)
    lo = np.array([p[1] for p in pats], np.int32)
    got = np.asarray(_fixed64_to_f32(pto.tensor(hi), pto.tensor(lo)))
    for g, h, lw in zip(got, hi, lo, strict=True):
        v = (int(h) % 2**32) << 32 | int(lw) % 2**32
        p = v.bit_length()
        m = v >> (p - 24) if p > 24 else v << (24 - p)  # 24 significant bits, truncated
        assert g == np.float32(m * 2.0 ** (p - 24 - 64)), (hex(v), g)
    # and the samples on the NPU
    got = pto.jit(lambda k: R.gumbel(k, (64,), mode="highest"), machine="tiny")(KEY)
    assert_matches(got, jax.random.gumbel(JKEY, (64,), mode="highest"))


def test_truncated_normal_stays_inside_and_equals_jax() -> None:
    got = R.truncated_normal(KEY, -1.0, 2.0, (500,))
    assert_matches(got, jax.random.truncated_normal(JKEY, -1.0, 2.0, (500,)), 8)
    a = np.asarray(got)
    assert (a > -1.0).all() and (a < 2.0).all()


def test_a_traced_key_compiles_and_runs_on_the_npu() -> None:
    """The hash as integer ops on the vector cores: the same bits as JAX."""

    def f(k: Any) -> Any:
        k1, k2 = R.split(k)
        return R.uniform(k1, (8, 16)), R.randint(k2, (8, 16), -5, 50), R.normal(k2, (4, 8))

    j1, j2 = jax.random.split(JKEY)
    want = (
        jax.random.uniform(j1, (8, 16)),
        jax.random.randint(j2, (8, 16), -5, 50),
        jax.random.normal(j2, (4, 8)),
    )
    for backend in ({"backend": "interpret"}, {"machine": "tiny"}):
        got = pto.jit(f, **backend)(KEY)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_matches(g, w, 4, what=f"{backend} out[{i}]")
    traced_seed = pto.jit(lambda s: R.key(s), backend="interpret")(np.int32(9))
    np.testing.assert_array_equal(_bits(traced_seed), np.asarray(jax.random.PRNGKey(9)))
    folded = pto.jit(lambda k, d: R.fold_in(k, d), backend="interpret")(KEY, np.int32(4))
    np.testing.assert_array_equal(_bits(folded), np.asarray(jax.random.fold_in(JKEY, 4)))


def test_the_looping_samplers_compile_and_run_on_the_npu() -> None:
    """Gamma's unrolled proposals and poisson's rounds (each gated by a reduction over the
    whole shape) as NPU programs: JAX's draws."""
    a = np.linspace(0.3, 4.0, 16).astype(np.float32)
    got = pto.jit(lambda k, x: R.gamma(k, x), machine="tiny")(KEY, a)
    assert_matches(got, jax.random.gamma(JKEY, a), 8, what="gamma")
    lam = np.array([0.5, 3.0, 9.0, 12.0, 50.0, 1e3, 0.0, 7.0], np.float32)
    got = pto.jit(lambda k, x: R.poisson(k, x, (2, 8)), machine="tiny")(KEY, lam)
    assert_matches(got, jax.random.poisson(JKEY, lam, (2, 8)), what="poisson")


def test_a_batch_of_keys_maps_with_vmap() -> None:
    keys, jkeys = R.split(KEY, 3), jax.random.split(JKEY, 3)
    got = pto.vmap(lambda k: R.uniform(k, (5,)))(keys)
    assert_matches(got, jax.vmap(lambda k: jax.random.uniform(k, (5,)))(jkeys))


def test_seeds_keep_their_philox_stream_and_bad_keys_are_named() -> None:
    a = R.normal(0, (2, 3))
    assert np.array_equal(np.asarray(a), np.asarray(R.normal(0, (2, 3))))  # the seed path
    with pytest.raises(pto.ShapeError, match=r"random.uniform: needs one key, int32\[2\]"):
        R.uniform(R.split(KEY, 3), (2,))
    with pytest.raises(pto.DTypeError, match=r"random\.randint: samples integers"):
        R.randint(KEY, (2,), 0, 5, pto.float32)
    with pytest.raises(pto.DTypeError, match=r"random\.uniform: samples floats"):
        R.uniform(KEY, (2,), pto.int32)
    with pytest.raises(pto.ShapeError, match="3 samples without replacement from 2"):
        R.categorical(KEY, LOGITS[:, :2], axis=1, shape=(3, 4), replace=False)
    with pytest.raises(pto.DTypeError, match="bits of uint16"):
        R.bits(KEY, (2,), np.uint16)


def test_key_impl_wrap_key_data_and_clone_as_jax() -> None:
    jk = jax.random.key(11)
    assert R.key_impl(jk) == R.key_impl(KEY) == str(jax.random.key_impl(jk)) == "threefry2x32"
    assert R.key_impl(R.split(KEY, (2, 3))) == "threefry2x32"  # a batch of keys
    wrapped = R.wrap_key_data(jax.random.key_data(jk))  # JAX's uint32 words, bits kept
    assert_matches(R.normal(wrapped, (64,)), jax.random.normal(jk, (64,)))
    assert_matches(
        R.uniform(R.clone(wrapped), (8,)), jax.random.uniform(jax.random.clone(jk), (8,))
    )
    jitted = pto.jit(lambda d: R.gumbel(R.wrap_key_data(d), (5,)), machine="tiny")
    assert_matches(jitted(np.asarray(jax.random.key_data(jk))), jax.random.gumbel(jk, (5,)))
    with pytest.raises(pto.ShapeError, match=r"random\.wrap_key_data: keys are int32\[\.\.\., 2\]"):
        R.wrap_key_data(np.zeros(3, np.int32))
    with pytest.raises(pto.ShapeError, match="impl 'rbg': pypto's keys are threefry2x32's"):
        R.wrap_key_data(np.zeros(2, np.uint32), impl="rbg")
