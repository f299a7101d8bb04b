"""The normal distribution (``jax.scipy.stats.norm``).

>>> import pypto as pto
>>> from pypto.scipy.stats import norm
>>> norm.logpdf(pto.tensor([0.0, 1.0])).numpy()
array([-0.9189386, -1.4189386], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite, log_ndtr, ndtr, ndtri
from pypto.scipy.stats._common import args

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-((x - loc)²/scale² + log(2π scale²)) / 2``."""
    x, loc, scale = args("norm.logpdf", x, loc, scale)
    var = api.mul(scale, scale)
    norm_term = api.log(api.mul(var, 2 * math.pi))
    quad = api.div(composite.square(api.sub(x, loc)), var)
    return api.div(api.add(norm_term, quad), -2.0)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, loc, scale))``."""
    return api.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``Φ((x - loc) / scale)`` (:func:`pto.ndtr`)."""
    x, loc, scale = args("norm.cdf", x, loc, scale)
    return ndtr(api.div(api.sub(x, loc), scale))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log Φ((x - loc) / scale)`` (:func:`pto.log_ndtr`), finite far into the lower tail."""
    x, loc, scale = args("norm.logcdf", x, loc, scale)
    return log_ndtr(api.div(api.sub(x, loc), scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The survival function ``1 - cdf``, as ``cdf(-x, -loc, scale)``."""
    x, loc, scale = args("norm.sf", x, loc, scale)
    return cdf(api.neg(x), api.neg(loc), scale)


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log sf``, as ``logcdf(-x, -loc, scale)``."""
    x, loc, scale = args("norm.logsf", x, loc, scale)
    return logcdf(api.neg(x), api.neg(loc), scale)


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The quantile function ``loc + scale · Φ⁻¹(q)`` (:func:`pto.ndtri`)."""
    q, loc, scale = args("norm.ppf", q, loc, scale)
    return api.add(api.mul(ndtri(q), scale), loc)


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The inverse survival function, ``ppf(1 - q)``."""
    (q,) = args("norm.isf", q)
    return ppf(api.sub(1.0, q), loc, scale)
