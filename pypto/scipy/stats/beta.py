"""The beta distribution (``jax.scipy.stats.beta``): its density, and its distribution and
survival functions through the regularized incomplete beta function
(:func:`pypto.scipy.special.betainc`).

>>> import pypto as pto
>>> from pypto.scipy.stats import beta
>>> beta.pdf(pto.tensor([0.25, 0.5]), 2.0, 2.0).numpy()
array([1.1249999, 1.4999999], dtype=float32)
>>> beta.cdf(pto.tensor([0.25, 0.5]), 2.0, 2.0).numpy()
array([0.15625001, 0.49999997], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite, xlog1py, xlogy
from pypto.scipy.special import betainc, betaln
from pypto.scipy.stats._common import args

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``(a - 1) log y + (b - 1) log(1 - y) - betaln(a, b) - log(scale)`` on
    ``[loc, loc + scale]``, ``-inf`` outside, NaN for a non-positive ``a``, ``b`` or
    ``scale``."""
    x, a, b, loc, scale = args("beta.logpdf", x, a, b, loc, scale)
    y = api.div(api.sub(x, loc), scale)
    lin = api.add(xlogy(api.sub(a, 1.0), y), xlog1py(api.sub(b, 1.0), api.neg(y)))
    logp = api.sub(api.add(api.neg(betaln(a, b)), lin), api.log(scale))
    outside = composite.logical_or(api.greater(x, api.add(loc, scale)), api.less(x, loc))
    result = api.where(outside, -math.inf, logp)
    bad = composite.logical_or(
        composite.logical_or(api.less_equal(a, 0.0), api.less_equal(b, 0.0)),
        api.less_equal(scale, 0.0),
    )
    return api.where(bad, math.nan, result)


def pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, a, b, loc, scale))``."""
    return api.exp(logpdf(x, a, b, loc, scale))


def _unit(name: str, x: Any, a: Any, b: Any, loc: Any, scale: Any) -> tuple[Any, Any, Any]:
    """``a``, ``b`` and ``(x - loc)/scale`` clamped to ``[0, 1]``."""
    x, a, b, loc, scale = args(name, x, a, b, loc, scale)
    return a, b, api.minimum(api.maximum(api.div(api.sub(x, loc), scale), 0.0), 1.0)


def cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``betainc(a, b, y)`` with ``y = (x - loc)/scale`` clamped to ``[0, 1]``."""
    return betainc(*_unit("beta.cdf", x, a, b, loc, scale))


def sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``betainc(b, a, 1 - y)`` with ``y`` clamped to ``[0, 1]``."""
    a, b, y = _unit("beta.sf", x, a, b, loc, scale)
    return betainc(b, a, api.sub(1.0, y))


def logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(cdf(x, a, b, loc, scale))``."""
    return api.log(cdf(x, a, b, loc, scale))


def logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(sf(x, a, b, loc, scale))``."""
    return api.log(sf(x, a, b, loc, scale))
