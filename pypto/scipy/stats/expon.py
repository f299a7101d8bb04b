"""The exponential distribution (``jax.scipy.stats.expon``).

>>> import pypto as pto
>>> from pypto.scipy.stats import expon
>>> expon.cdf(pto.tensor([-1.0, 0.0, 1.0])).numpy()
array([ 0.       , -0.       ,  0.6321206], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite
from pypto.scipy.stats._common import args, outside_unit

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-(x - loc)/scale - log(scale)`` from ``loc`` on, ``-inf`` below."""
    x, loc, scale = args("expon.logpdf", x, loc, scale)
    logp = api.neg(api.add(api.div(api.sub(x, loc), scale), api.log(scale)))
    return api.where(api.less(x, loc), -math.inf, logp)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, loc, scale))``."""
    return api.exp(logpdf(x, loc, scale))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-(x - loc)/scale``, 0 below ``loc``."""
    x, loc, scale = args("expon.logsf", x, loc, scale)
    z = api.div(api.sub(loc, x), scale)
    return api.where(api.less(x, loc), 0.0, z)


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logsf(x, loc, scale))``."""
    return api.exp(logsf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-expm1(-(x - loc)/scale)``, 0 below ``loc``."""
    x, loc, scale = args("expon.cdf", x, loc, scale)
    z = api.div(api.sub(loc, x), scale)
    return api.where(api.less(x, loc), 0.0, api.neg(composite.expm1(z)))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log1p(-sf(x, loc, scale))``."""
    return composite.log1p(api.neg(sf(x, loc, scale)))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc - scale · log1p(-q)``; NaN outside ``[0, 1]``."""
    q, loc, scale = args("expon.ppf", q, loc, scale)
    bad = outside_unit(q)
    return api.where(bad, math.nan, api.sub(loc, api.mul(scale, composite.log1p(api.neg(q)))))
