"""The chi-squared distribution (``jax.scipy.stats.chi2``): its density (the CDF needs the
incomplete gamma function, which pypto does not have yet).

>>> import pypto as pto
>>> from pypto.scipy.stats import chi2
>>> chi2.pdf(pto.tensor([1.0, 2.0]), 2.0).numpy()
array([0.30326518, 0.18393964], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, lgamma
from pypto.scipy.stats._common import args

__all__ = ["logpdf", "pdf"]


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
