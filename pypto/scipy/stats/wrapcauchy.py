"""The wrapped Cauchy distribution on ``[0, 2π]`` (``jax.scipy.stats.wrapcauchy``).

>>> import pypto as pto
>>> from pypto.scipy.stats import wrapcauchy
>>> wrapcauchy.pdf(pto.tensor([0.0, 3.0]), 0.5).numpy()
array([0.47746485, 0.05328866], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite
from pypto.scipy.stats._common import args

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, c: Any) -> Any:
    """``log(1 - c²) - log 2π - log(1 + c² - 2c cos x)`` on ``[0, 2π]``, ``-inf`` outside;
    NaN unless ``0 < c < 1``."""
    x, c = args("wrapcauchy.logpdf", x, c)
    c2 = api.mul(c, c)
    den = api.sub(api.add(c2, 1.0), api.mul(api.mul(c, 2.0), api.cos(x)))
    logp = api.sub(api.sub(api.log(api.sub(1.0, c2)), math.log(2 * math.pi)), api.log(den))
    inside = composite.logical_and(api.greater_equal(x, 0.0), api.less_equal(x, 2 * math.pi))
    valid = composite.logical_and(api.greater(c, 0.0), api.less(c, 1.0))
    return api.where(valid, api.where(inside, logp, -math.inf), math.nan)


def pdf(x: Any, c: Any) -> Any:
    """``exp(logpdf(x, c))``."""
    return api.exp(logpdf(x, c))
