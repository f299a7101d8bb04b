"""The Pareto distribution (``jax.scipy.stats.pareto``).

>>> import pypto as pto
>>> from pypto.scipy.stats import pareto
>>> pareto.cdf(pto.tensor([0.5, 2.0]), 2.0).numpy()
array([0.  , 0.75], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite
from pypto.scipy.stats._common import args, outside_unit

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _scaled(name: str, x: Any, b: Any, loc: Any, scale: Any) -> tuple[Any, ...]:
    x, b, loc, scale = args(name, x, b, loc, scale)
    return x, b, loc, scale, api.div(api.sub(x, loc), scale), api.less(x, api.add(loc, scale))


def logpdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(scale/b) - (b + 1) log z`` from ``loc + scale`` on, ``-inf`` below."""
    x, b, loc, scale, z, below = _scaled("pareto.logpdf", x, b, loc, scale)
    logp = api.neg(api.add(api.log(api.div(scale, b)), api.mul(api.add(b, 1.0), api.log(z))))
    return api.where(below, -math.inf, logp)


def pdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, b, loc, scale))``."""
    return api.exp(logpdf(x, b, loc, scale))


def cdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - z^-b``, 0 below ``loc + scale``."""
    x, b, loc, scale, z, below = _scaled("pareto.cdf", x, b, loc, scale)
    return api.where(below, 0.0, api.sub(1.0, api.pow(z, api.neg(b))))


def logcdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log1p(-z^-b)``, ``-inf`` below ``loc + scale``."""
    x, b, loc, scale, z, below = _scaled("pareto.logcdf", x, b, loc, scale)
    return api.where(below, -math.inf, composite.log1p(api.neg(api.pow(z, api.neg(b)))))


def logsf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-b log z``, 0 below ``loc + scale``."""
    x, b, loc, scale, z, below = _scaled("pareto.logsf", x, b, loc, scale)
    return api.where(below, 0.0, api.neg(api.mul(b, api.log(z))))


def sf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logsf(x, b, loc, scale))``."""
    return api.exp(logsf(x, b, loc, scale))


def ppf(q: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale · (1 - q)^(-1/b)``; NaN outside ``[0, 1]``."""
    q, b, loc, scale = args("pareto.ppf", q, b, loc, scale)
    val = api.add(loc, api.mul(scale, api.pow(api.sub(1.0, q), api.neg(api.div(1.0, b)))))
    bad = outside_unit(q)
    return api.where(bad, math.nan, val)
