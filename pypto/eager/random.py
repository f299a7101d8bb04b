"""Deterministic random tensors: the same seed gives the same values on every machine.

Two kinds of first argument. An integer seed draws on the host from numpy's Philox stream
(``pto.random.normal(0, (2, 3))``: quick test data). A key — ``pto.random.key(seed)``, or a
JAX key — gives ``jax.random``'s own samples, with its ``split`` and ``fold_in``, computed
by pypto's integer ops (:mod:`pypto.ops.prng`), so they trace and compile under
``pto.jit`` too.

>>> import pypto as pto
>>> a = pto.random.normal(0, (2, 3))
>>> b = pto.random.normal(0, (2, 3))
>>> bool((a == b).numpy().all())
True
>>> k1, k2 = pto.random.split(pto.random.key(0))
>>> pto.random.bernoulli(k1, 0.5, (4,)).numpy()
array([False,  True,  True,  True])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import DTypeError
from pypto.eager.tensor import _shape, _wrap
from pypto.ops import api, prng
from pypto.ops.prng import (
    PRNGKey,
    ball,
    bernoulli,
    beta,
    binomial,
    bits,
    categorical,
    cauchy,
    chisquare,
    choice,
    clone,
    dirichlet,
    double_sided_maxwell,
    exponential,
    f,
    fold_in,
    gamma,
    generalized_normal,
    geometric,
    gumbel,
    key,
    key_data,
    key_impl,
    laplace,
    loggamma,
    logistic,
    lognormal,
    maxwell,
    multinomial,
    multivariate_normal,
    orthogonal,
    pareto,
    permutation,
    poisson,
    rademacher,
    randint,
    rayleigh,
    split,
    t,
    triangular,
    truncated_normal,
    wald,
    weibull_min,
    wrap_key_data,
)

__all__ = [
    "PRNGKey",
    "ball",
    "bernoulli",
    "beta",
    "binomial",
    "bits",
    "categorical",
    "cauchy",
    "chisquare",
    "choice",
    "clone",
    "dirichlet",
    "double_sided_maxwell",
    "exponential",
    "f",
    "fold_in",
    "gamma",
    "generalized_normal",
    "geometric",
    "gumbel",
    "key",
    "key_data",
    "key_impl",
    "laplace",
    "loggamma",
    "logistic",
    "lognormal",
    "maxwell",
    "multinomial",
    "multivariate_normal",
    "normal",
    "orthogonal",
    "pareto",
    "permutation",
    "poisson",
    "rademacher",
    "randint",
    "rayleigh",
    "split",
    "t",
    "triangular",
    "truncated_normal",
    "uniform",
    "wald",
    "weibull_min",
    "wrap_key_data",
]


def _is_seed(x: Any) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def _rng(seed: int) -> np.random.Generator:
    # Philox is a counter-based generator: its stream depends only on the seed.
    return np.random.Generator(np.random.Philox(seed))


def _float(dtype: Any, op: str) -> dt.DType:
    d = dt.dtype(dtype)
    if not d.is_floating:
        raise DTypeError(f"random values need a float dtype, got {d}", op=op)
    return d


def normal(
    seed: Any, shape: Any = (), dtype: Any = dt.float32, mean: float = 0.0, std: float = 1.0
) -> Any:
    """Samples of a normal distribution N(mean, std²), rounded to ``dtype``: from an integer
    seed's Philox stream, or from a key as ``jax.random.normal`` (then scaled by ``std`` and
    shifted by ``mean`` in ``dtype``)."""
    if not _is_seed(seed):
        z = prng.normal(seed, shape, dtype)
        return z if (mean, std) == (0.0, 1.0) else api.add(api.mul(z, std), mean)
    d = _float(dtype, "random.normal")
    a = _rng(seed).standard_normal(_shape(shape), dtype=np.float32) * std + mean
    return _wrap(np.asarray(a, np.float32).astype(d.np))


def uniform(
    seed: Any, shape: Any = (), dtype: Any = dt.float32, minval: Any = 0.0, maxval: Any = 1.0
) -> Any:
    """Samples of a uniform distribution on [minval, maxval), rounded to ``dtype``: from an
    integer seed's Philox stream, or from a key as ``jax.random.uniform``."""
    if not _is_seed(seed):
        return prng.uniform(seed, shape, dtype, minval, maxval)
    d = _float(dtype, "random.uniform")
    a = _rng(seed).random(_shape(shape), dtype=np.float32) * (maxval - minval) + minval
    return _wrap(np.asarray(a, np.float32).astype(d.np))
