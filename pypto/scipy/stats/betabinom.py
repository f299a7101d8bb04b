"""The beta-binomial distribution (``jax.scipy.stats.betabinom``).

>>> import pypto as pto
>>> from pypto.scipy.stats import betabinom
>>> betabinom.pmf(pto.tensor([0.0, 1.0, 2.0]), 2.0, 1.0, 1.0).numpy().round(4)
array([0.3333, 0.3333, 0.3333], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite
from pypto.scipy.special import betaln
from pypto.scipy.stats._common import args

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, a: Any, b: Any, loc: Any = 0) -> Any:
    """``-log1p(n) - betaln(n - y + 1, y + 1) + betaln(y + a, n - y + b) - betaln(a, b)``
    at ``y = floor(k) - loc``; ``-inf`` outside the support, NaN for ``n < 0`` or a
    non-positive ``a`` or ``b``."""
    k, n, a, b, loc = args("betabinom.logpmf", k, n, a, b, loc)
    y = api.sub(composite.floor(k), loc)
    n_y = api.sub(n, y)
    comb = api.neg(api.add(composite.log1p(n), betaln(api.add(n_y, 1.0), api.add(y, 1.0))))
    betas = api.sub(betaln(api.add(y, a), api.add(n_y, b)), betaln(a, b))
    logp = api.add(comb, betas)
    logp = api.where(composite.logical_and(api.equal(y, 0.0), api.equal(n, 0.0)), 0.0, logp)
    off = composite.logical_or(
        composite.logical_or(api.less(y, api.neg(loc)), api.greater(y, n)),
        api.less_equal(api.add(y, a), 0.0),
    )
    logp = api.where(off, -math.inf, logp)
    bad = composite.logical_or(
        composite.logical_or(api.less(n, 0.0), api.less_equal(a, 0.0)), api.less_equal(b, 0.0)
    )
    return api.where(bad, math.nan, logp)


def pmf(k: Any, n: Any, a: Any, b: Any, loc: Any = 0) -> Any:
    """``exp(logpmf(k, n, a, b, loc))``."""
    return api.exp(logpmf(k, n, a, b, loc))
