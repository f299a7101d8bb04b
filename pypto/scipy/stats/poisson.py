"""The Poisson distribution (``jax.scipy.stats.poisson``): its mass function, and its
distribution function through the regularized upper incomplete gamma function
(:func:`pypto.scipy.special.gammaincc`).

>>> import pypto as pto
>>> from pypto.scipy.stats import poisson
>>> poisson.pmf(pto.tensor([0.0, 2.0, 2.5]), 2.0).numpy()
array([0.1353352, 0.2706704, 0.       ], dtype=float32)
>>> poisson.cdf(pto.tensor([0.0, 2.0, 2.5]), 2.0).numpy()
array([0.1353352, 0.6766766, 0.6766766], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite, lgamma, xlogy
from pypto.scipy.special import gammaincc
from pypto.scipy.stats._common import args

__all__ = ["cdf", "logpmf", "pmf"]


def logpmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """``k log μ - gammaln(k + 1) - μ`` at ``k - loc``; ``-inf`` below 0 and off the
    integers."""
    k, mu, loc = args("poisson.logpmf", k, mu, loc)
    x = api.sub(k, loc)
    logp = api.sub(api.sub(xlogy(x, mu), lgamma(api.add(x, 1.0))), mu)
    off = composite.logical_or(api.less(x, 0.0), api.not_equal(composite.round(k), k))
    return api.where(off, -math.inf, logp)


def pmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """``exp(logpmf(k, mu, loc))``."""
    return api.exp(logpmf(k, mu, loc))


def cdf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """``gammaincc(floor(k - loc) + 1, μ)``: the probability of at most ``k - loc`` events;
    0 below 0."""
    k, mu, loc = args("poisson.cdf", k, mu, loc)
    x = api.sub(k, loc)
    below = api.less(x, 0.0)
    p = gammaincc(composite.floor(api.add(api.where(below, 0.0, x), 1.0)), mu)
    return api.where(below, 0.0, p)
