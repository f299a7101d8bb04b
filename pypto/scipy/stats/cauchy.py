"""The Cauchy distribution (``jax.scipy.stats.cauchy``).

>>> import pypto as pto
>>> from pypto.scipy.stats import cauchy
>>> cauchy.cdf(pto.tensor([-1.0, 0.0, 1.0])).numpy()
array([0.25, 0.5 , 0.75], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, arctan, composite, tan
from pypto.scipy.stats._common import args

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(π scale) - log1p(z²)``, ``z = (x - loc)/scale``."""
    x, loc, scale = args("cauchy.logpdf", x, loc, scale)
    z = api.div(api.sub(x, loc), scale)
    return api.neg(api.add(api.log(api.mul(scale, math.pi)), composite.log1p(api.mul(z, z))))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, loc, scale))``."""
    return api.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``½ + arctan(z)/π``."""
    x, loc, scale = args("cauchy.cdf", x, loc, scale)
    z = api.div(api.sub(x, loc), scale)
    return api.add(api.mul(arctan(z), 1 / math.pi), 0.5)


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(cdf(x, loc, scale))``."""
    return api.log(cdf(x, loc, scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``cdf(-x, -loc, scale)``."""
    x, loc, scale = args("cauchy.sf", x, loc, scale)
    return cdf(api.neg(x), api.neg(loc), scale)


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``logcdf(-x, -loc, scale)``."""
    x, loc, scale = args("cauchy.logsf", x, loc, scale)
    return logcdf(api.neg(x), api.neg(loc), scale)


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale · tan(π q - π/2)``."""
    q, loc, scale = args("cauchy.ppf", q, loc, scale)
    return api.add(api.mul(tan(api.sub(api.mul(q, math.pi), math.pi / 2)), scale), loc)


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale · tan(π/2 - π q)``."""
    q, loc, scale = args("cauchy.isf", q, loc, scale)
    return api.add(api.mul(tan(api.sub(math.pi / 2, api.mul(q, math.pi))), scale), loc)
