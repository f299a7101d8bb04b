"""The binomial distribution (``jax.scipy.stats.binom``).

>>> import pypto as pto
>>> from pypto.scipy.stats import binom
>>> binom.pmf(pto.tensor([0.0, 1.0, 2.0]), 2.0, 0.5).numpy()
array([0.24999988, 0.49999976, 0.24999988], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite, lgamma, xlog1py, xlogy
from pypto.scipy.stats._common import args

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """``log C(n, y) + y log p + (n - y) log(1 - p)`` at ``y = k - loc``; ``-inf`` outside
    ``[0, n]`` (``k`` itself need not be an integer, as in JAX)."""
    k, n, p, loc = args("binom.logpmf", k, n, p, loc)
    y = api.sub(k, loc)
    comb = api.sub(
        lgamma(api.add(n, 1.0)),
        api.add(lgamma(api.add(y, 1.0)), lgamma(api.add(api.sub(n, y), 1.0))),
    )
    lin = api.add(xlogy(y, p), xlog1py(api.sub(n, y), api.neg(p)))
    logp = api.add(comb, lin)
    certain = composite.logical_or(
        composite.logical_and(api.equal(y, 0.0), api.equal(n, 0.0)), api.equal(lin, 0.0)
    )
    logp = api.where(certain, 0.0, logp)
    inside = composite.logical_and(
        api.greater_equal(k, loc), api.less(k, api.add(api.add(loc, n), 1.0))
    )
    return api.where(inside, logp, -math.inf)


def pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """``exp(logpmf(k, n, p, loc))``."""
    return api.exp(logpmf(k, n, p, loc))
