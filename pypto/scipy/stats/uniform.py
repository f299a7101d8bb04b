"""The uniform distribution on ``[loc, loc + scale]`` (``jax.scipy.stats.uniform``).

>>> import pypto as pto
>>> from pypto.scipy.stats import uniform
>>> uniform.cdf(pto.tensor([-1.0, 0.25, 2.0])).numpy()
array([0.  , 0.25, 1.  ], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite
from pypto.scipy.stats._common import args, outside_unit

__all__ = ["cdf", "logpdf", "pdf", "ppf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(scale)`` inside, ``-inf`` outside."""
    x, loc, scale = args("uniform.logpdf", x, loc, scale)
    out = composite.logical_or(api.greater(x, api.add(loc, scale)), api.less(x, loc))
    return api.where(out, -math.inf, api.neg(api.log(scale)))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, loc, scale))``."""
    return api.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """0 below ``loc``, 1 above ``loc + scale``, ``(x - loc)/scale`` between (NaN for NaN)."""
    x, loc, scale = args("uniform.cdf", x, loc, scale)
    hi = api.add(loc, scale)
    inside = composite.logical_and(api.greater_equal(x, loc), api.less_equal(x, hi))
    z = api.div(api.sub(x, loc), scale)
    # jnp.select's default is 0: a NaN x meets no condition
    return api.where(
        api.less(x, loc), 0.0, api.where(api.greater(x, hi), 1.0, api.where(inside, z, 0.0))
    )


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale · q``; NaN outside ``[0, 1]``."""
    q, loc, scale = args("uniform.ppf", q, loc, scale)
    bad = outside_unit(q)
    return api.where(bad, math.nan, api.add(loc, api.mul(scale, q)))
