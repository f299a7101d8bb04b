"""The Poisson distribution (``jax.scipy.stats.poisson``): its mass function, its
distribution function through the regularized upper incomplete gamma function
(:func:`pypto.scipy.special.gammaincc`), and its entropy.

>>> import pypto as pto
>>> from pypto.scipy.stats import poisson
>>> poisson.pmf(pto.tensor([0.0, 2.0, 2.5]), 2.0).numpy()
array([0.1353352, 0.2706704, 0.       ], dtype=float32)
>>> poisson.cdf(pto.tensor([0.0, 2.0, 2.5]), 2.0).numpy()
array([0.1353352, 0.6766766, 0.6766766], dtype=float32)
>>> poisson.entropy(pto.tensor([0.5, 10.0, 100.0])).numpy()
array([0.92763746, 2.5614107 , 3.720686  ], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite, lgamma, xlogy
from pypto.ops.numpy_lib import broadcast_shapes
from pypto.scipy.special import gammaincc
from pypto.scipy.stats._common import args

__all__ = ["cdf", "entropy", "logpmf", "pmf"]

_ENTROPY_SUM = 50.0  # μ below which the entropy is summed term by term
_ENTROPY_TERMS = 130  # k = 0 … 129: past μ + 11√μ at μ = 50, where the terms are below 1e-20
_LOG_FACTORIALS = tuple(math.lgamma(k + 1.0) for k in range(_ENTROPY_TERMS))


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


def entropy(mu: Any, loc: Any = 0) -> Any:
    """``-Σₖ pₖ log pₖ``: summed over ``k < 130`` below ``μ = 50`` (the ``log k!`` exact
    constants, not ``gammaln``'s, so small ``μ`` keep their relative precision), and
    ``½ log(2πeμ) - 1/(12μ) - 1/(24μ²) - 19/(360μ³)`` above (within 2e-8 there). 0 at
    ``μ = 0``, NaN below (0 at ``-inf``, as JAX); ``loc`` only broadcasts (the entropy does
    not move with it)."""
    mu, loc = args("poisson.entropy", mu, loc)
    small = api.less(mu, _ENTROPY_SUM)
    inside = composite.logical_and(small, api.greater(mu, 0.0))
    ms = api.where(inside, mu, 1.0)
    log_mu = api.log(ms)
    acc: Any = 0.0
    for k, lf in enumerate(_LOG_FACTORIALS):
        lp = api.sub(api.sub(api.mul(log_mu, float(k)), ms), lf)
        acc = api.add(acc, api.mul(api.exp(lp), lp))
    mb = api.where(small, _ENTROPY_SUM, mu)
    inv = api.div(1.0, mb)
    tail = api.mul(inv, api.add(api.mul(inv, api.add(api.mul(inv, 19 / 360), 1 / 24)), 1 / 12))
    asym = api.sub(api.mul(api.log(api.mul(mb, 2 * math.pi * math.e)), 0.5), tail)
    h = api.where(small, api.neg(acc), asym)
    # 0 at μ = 0, NaN below (but at -inf, where JAX's sum gives -0)
    below = api.where(composite.isneginf(mu), 0.0, math.nan)
    h = api.where(api.equal(mu, 0.0), 0.0, api.where(api.less(mu, 0.0), below, h))
    shape = broadcast_shapes(tuple(mu.shape), tuple(loc.shape))
    return api.broadcast_to(h, shape)
