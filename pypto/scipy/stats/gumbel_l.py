"""The left-skewed Gumbel distribution (``jax.scipy.stats.gumbel_l``).

>>> import pypto as pto
>>> from pypto.scipy.stats import gumbel_l
>>> gumbel_l.cdf(pto.tensor([0.0, -1.0])).numpy()
array([0.63212067, 0.30779934], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite, xlog1py, xlogy
from pypto.scipy.stats._common import args, standardized

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(scale) + z - exp(z)``; NaN for ``scale <= 0``."""
    z, scale, ok = standardized("gumbel_l.logpdf", x, loc, scale)
    logp = api.add(xlogy(-1.0, scale), api.sub(z, api.exp(z)))
    return api.where(ok, logp, math.nan)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, loc, scale))``."""
    return api.exp(logpdf(x, loc, scale))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(-expm1(-exp(z)))``."""
    z, scale, ok = standardized("gumbel_l.logcdf", x, loc, scale)
    return api.where(ok, api.log(api.neg(composite.expm1(api.neg(api.exp(z))))), math.nan)


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logcdf(x, loc, scale))``."""
    return api.exp(logcdf(x, loc, scale))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-exp(z)``."""
    z, scale, ok = standardized("gumbel_l.logsf", x, loc, scale)
    return api.where(ok, api.neg(api.exp(z)), math.nan)


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logsf(x, loc, scale))``."""
    return api.exp(logsf(x, loc, scale))


def ppf(p: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale · log(-log1p(-p))``; NaN outside ``(0, 1)``."""
    p, loc, scale = args("gumbel_l.ppf", p, loc, scale)
    ok = composite.logical_and(api.greater(p, 0.0), api.less(p, 1.0))
    q = api.add(loc, api.mul(scale, api.log(xlog1py(-1.0, api.neg(p)))))
    return api.where(ok, q, math.nan)
