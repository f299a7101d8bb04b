"""The logistic distribution (``jax.scipy.stats.logistic``).

>>> import pypto as pto
>>> from pypto.scipy.stats import logistic
>>> logistic.ppf(pto.tensor([0.5, 0.75])).numpy()
array([0.       , 1.0986123], dtype=float32)
"""

from __future__ import annotations

from typing import Any

from pypto.ops import api, logaddexp, logit
from pypto.scipy.stats._common import args

__all__ = ["cdf", "isf", "logpdf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-2 logaddexp(z/2, -z/2) - log(scale)`` with ``z = (x - loc)/scale``: no overflow
    in either tail."""
    x, loc, scale = args("logistic.logpdf", x, loc, scale)
    half = api.div(api.div(api.sub(x, loc), scale), 2.0)
    return api.sub(api.mul(logaddexp(half, api.neg(half)), -2.0), api.log(scale))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, loc, scale))``."""
    return api.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``sigmoid((x - loc)/scale)``."""
    x, loc, scale = args("logistic.cdf", x, loc, scale)
    return api.sigmoid(api.div(api.sub(x, loc), scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``sigmoid(-(x - loc)/scale)``."""
    x, loc, scale = args("logistic.sf", x, loc, scale)
    return api.sigmoid(api.neg(api.div(api.sub(x, loc), scale)))


def ppf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale · logit(q)``."""
    x, loc, scale = args("logistic.ppf", x, loc, scale)
    return api.add(api.mul(logit(x), scale), loc)


def isf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc - scale · logit(q)``."""
    x, loc, scale = args("logistic.isf", x, loc, scale)
    return api.add(api.mul(api.neg(logit(x)), scale), loc)
