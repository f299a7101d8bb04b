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
