"""``pto.scipy.special``: jax.scipy.special's names, and the functions written over the ops
(``gamma``, ``gammasgn``, ``factorial``, ``multigammaln``) against JAX, eager and under jit."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import pypto as pto
from pypto.core.errors import DTypeError
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


def test_factorial_exact_is_refused() -> None:
    with pytest.raises(DTypeError, match="exact=True"):
        S.factorial(pto.tensor([3.0]), exact=True)
