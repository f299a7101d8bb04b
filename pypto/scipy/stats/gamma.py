"""The gamma distribution (``jax.scipy.stats.gamma``): its density, and its distribution
and survival functions through the regularized incomplete gamma functions
(:func:`pypto.scipy.special.gammainc`).

>>> import pypto as pto
>>> from pypto.scipy.stats import gamma
>>> gamma.logpdf(pto.tensor([0.5, 2.0]), 2.0).numpy()
array([-1.1931477, -1.3068533], dtype=float32)
>>> gamma.cdf(pto.tensor([0.5, 2.0]), 2.0).numpy()
array([0.09020397, 0.59399384], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, lgamma, xlogy
from pypto.scipy.special import gammainc, gammaincc
from pypto.scipy.stats._common import args

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``(a - 1) log y - y - gammaln(a) - log(scale)`` with ``y = (x - loc)/scale``, ``-inf``
    below ``loc``."""
    x, a, loc, scale = args("gamma.logpdf", x, a, loc, scale)
    ok = api.greater_equal(x, loc)
    y = api.where(ok, api.div(api.sub(x, loc), scale), 1.0)
    lin = api.sub(xlogy(api.sub(a, 1.0), y), y)
    return api.where(ok, api.sub(lin, api.add(lgamma(a), api.log(scale))), -math.inf)


def pdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, a, loc, scale))``."""
    return api.exp(logpdf(x, a, loc, scale))


def cdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammainc(a, y)`` with ``y = (x - loc)/scale`` clamped to ``[0, inf]``."""
    x, a, loc, scale = args("gamma.cdf", x, a, loc, scale)
    y = api.minimum(api.maximum(api.div(api.sub(x, loc), scale), 0.0), math.inf)
    return gammainc(a, y)


def sf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammaincc(a, y)`` with ``y = (x - loc)/scale``, 1 below ``loc``."""
    x, a, loc, scale = args("gamma.sf", x, a, loc, scale)
    y = api.div(api.sub(x, loc), scale)
    below = api.less(y, 0.0)
    return api.where(below, 1.0, gammaincc(a, api.where(below, 0.0, y)))


def logcdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(cdf(x, a, loc, scale))``."""
    return api.log(cdf(x, a, loc, scale))


def logsf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(sf(x, a, loc, scale))``."""
    return api.log(sf(x, a, loc, scale))
