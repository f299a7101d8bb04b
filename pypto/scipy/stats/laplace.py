"""The Laplace distribution (``jax.scipy.stats.laplace``).

>>> import pypto as pto
>>> from pypto.scipy.stats import laplace
>>> laplace.cdf(pto.tensor([-1.0, 0.0, 1.0])).numpy()
array([0.18393971, 0.5       , 0.8160603 ], dtype=float32)
"""

from __future__ import annotations

from typing import Any

from pypto.ops import api
from pypto.scipy.stats._common import args

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-|x - loc|/scale - log(2 scale)``."""
    x, loc, scale = args("laplace.logpdf", x, loc, scale)
    lin = api.div(api.abs(api.sub(x, loc)), scale)
    return api.neg(api.add(lin, api.log(api.mul(scale, 2.0))))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, loc, scale))``."""
    return api.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(z)/2`` up to ``z = (x - loc)/scale = 0``, ``1 - exp(-z)/2`` above."""
    x, loc, scale = args("laplace.cdf", x, loc, scale)
    z = api.div(api.sub(x, loc), scale)
    low = api.mul(api.exp(z), 0.5)
    high = api.sub(1.0, api.mul(api.exp(api.neg(z)), 0.5))
    return api.where(api.less_equal(z, 0.0), low, high)
