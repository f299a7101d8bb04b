"""The right-skewed Gumbel distribution (``jax.scipy.stats.gumbel_r``).

>>> import pypto as pto
>>> from pypto.scipy.stats import gumbel_r
>>> gumbel_r.cdf(pto.tensor([0.0, 1.0])).numpy()
array([0.36787942, 0.69220066], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite, log1mexp, xlogy
from pypto.scipy.stats._common import args, standardized

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(scale) - z - exp(-z)``; NaN for ``scale <= 0``."""
    z, scale, ok = standardized("gumbel_r.logpdf", x, loc, scale)
    logp = api.add(xlogy(-1.0, scale), api.neg(api.add(z, api.exp(api.neg(z)))))
    return api.where(ok, logp, math.nan)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, loc, scale))``."""
    return api.exp(logpdf(x, loc, scale))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-exp(-z)``."""
    z, scale, ok = standardized("gumbel_r.logcdf", x, loc, scale)
    return api.where(ok, api.neg(api.exp(api.neg(z))), math.nan)


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(-exp(-z))``."""
    return api.exp(logcdf(x, loc, scale))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(1 - exp(-exp(-z)))`` (:func:`pto.log1mexp`)."""
    z, scale, ok = standardized("gumbel_r.logsf", x, loc, scale)
    return api.where(ok, log1mexp(api.exp(api.neg(z))), math.nan)


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - exp(-exp(-z))``."""
    z, scale, ok = standardized("gumbel_r.sf", x, loc, scale)
    return api.where(ok, api.sub(1.0, api.exp(api.neg(api.exp(api.neg(z))))), math.nan)


def ppf(p: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc - scale · log(-log p)``; NaN outside ``(0, 1)``."""
    p, loc, scale = args("gumbel_r.ppf", p, loc, scale)
    ok = composite.logical_and(api.greater(p, 0.0), api.less(p, 1.0))
    q = api.sub(loc, api.mul(scale, api.log(xlogy(-1.0, p))))
    return api.where(ok, q, math.nan)
