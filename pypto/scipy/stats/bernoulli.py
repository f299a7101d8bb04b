"""The Bernoulli distribution (``jax.scipy.stats.bernoulli``).

>>> import pypto as pto
>>> from pypto.scipy.stats import bernoulli
>>> bernoulli.pmf(pto.tensor([0.0, 1.0, 2.0]), 0.25).numpy()
array([0.75, 0.25, 0.  ], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite, xlog1py, xlogy
from pypto.scipy.stats._common import args, outside_unit

__all__ = ["cdf", "logpmf", "pmf", "ppf"]


def logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """``x log p + (1 - x) log(1 - p)`` at ``x = k - loc``; ``-inf`` outside ``[0, 1]``."""
    k, p, loc = args("bernoulli.logpmf", k, p, loc)
    x = api.sub(k, loc)
    logp = api.add(xlogy(x, p), xlog1py(api.sub(1.0, x), api.neg(p)))
    out = composite.logical_or(api.less(x, 0.0), api.greater(x, 1.0))
    return api.where(out, -math.inf, logp)


def pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """``exp(logpmf(k, p, loc))``."""
    return api.exp(logpmf(k, p, loc))


def _bad_p(k: Any, p: Any) -> Any:
    """NaN in ``k``, or ``p`` NaN or outside ``[0, 1]``."""
    return composite.logical_or(composite.isnan(k), outside_unit(p))


def cdf(k: Any, p: Any) -> Any:
    """0 below 0, ``1 - p`` on ``[0, 1)``, 1 from 1; NaN for NaN or ``p`` outside ``[0, 1]``."""
    k, p = args("bernoulli.cdf", k, p)
    mid = api.where(api.less(k, 1.0), api.sub(1.0, p), 1.0)
    return api.where(_bad_p(k, p), math.nan, api.where(api.less(k, 0.0), 0.0, mid))


def ppf(q: Any, p: Any) -> Any:
    """0 for ``q <= 1 - p``, 1 above; NaN for NaN or ``p``, ``q`` outside ``[0, 1]``."""
    q, p = args("bernoulli.ppf", q, p)
    bad = composite.logical_or(outside_unit(q), outside_unit(p))
    return api.where(bad, math.nan, api.where(api.less_equal(q, api.sub(1.0, p)), 0.0, 1.0))
