"""The chi-squared distribution (``jax.scipy.stats.chi2``): its density, and its
distribution and survival functions through the regularized incomplete gamma functions
(:func:`pypto.scipy.special.gammainc`).

>>> import pypto as pto
>>> from pypto.scipy.stats import chi2
>>> chi2.pdf(pto.tensor([1.0, 2.0]), 2.0).numpy()
array([0.30326518, 0.18393964], dtype=float32)
>>> chi2.sf(pto.tensor([3.84146]), 1.0).numpy()  # 3.84146: the 5% point of one degree
array([0.04999995], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, lgamma
from pypto.scipy.special import gammainc, gammaincc
from pypto.scipy.stats._common import args

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``(df/2 - 1) log y - y/2 - gammaln(df/2) - df log(2)/2 - log(scale)``,
    ``y = (x - loc)/scale``; ``-inf`` below ``loc``."""
    x, df, loc, scale = args("chi2.logpdf", x, df, loc, scale)
    y = api.div(api.sub(x, loc), scale)
    half = api.div(df, 2.0)
    kernel = api.sub(api.mul(api.sub(half, 1.0), api.log(y)), api.div(y, 2.0))
    const = api.neg(api.add(lgamma(half), api.div(api.mul(df, math.log(2.0)), 2.0)))
    logp = api.add(api.sub(const, api.log(scale)), kernel)
    return api.where(api.less(x, loc), -math.inf, logp)


def pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, df, loc, scale))``."""
    return api.exp(logpdf(x, df, loc, scale))


def _half(name: str, x: Any, df: Any, loc: Any, scale: Any) -> tuple[Any, Any]:
    """``df/2`` and ``(x - loc)/(2 scale)`` clamped to ``[0, inf]``."""
    x, df, loc, scale = args(name, x, df, loc, scale)
    y = api.div(api.sub(x, loc), api.mul(scale, 2.0))
    return api.div(df, 2.0), api.minimum(api.maximum(y, 0.0), math.inf)


def cdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammainc(df/2, y/2)`` with ``y = (x - loc)/scale`` clamped to ``[0, inf]``."""
    return gammainc(*_half("chi2.cdf", x, df, loc, scale))


def sf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammaincc(df/2, y/2)`` with ``y = (x - loc)/scale`` clamped to ``[0, inf]``."""
    return gammaincc(*_half("chi2.sf", x, df, loc, scale))


def logcdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(cdf(x, df, loc, scale))``."""
    return api.log(cdf(x, df, loc, scale))


def logsf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(sf(x, df, loc, scale))``."""
    return api.log(sf(x, df, loc, scale))
