"""Student's t distribution (``jax.scipy.stats.t``).

>>> import pypto as pto
>>> from pypto.scipy.stats import t
>>> t.pdf(pto.tensor([0.0, 1.0]), 3.0).numpy()
array([0.36755264, 0.20674834], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite, lgamma
from pypto.scipy.stats._common import args

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammaln((df+1)/2) - gammaln(df/2) - log(π df scale²)/2 - (df+1)/2 · log1p(z²/df)``."""
    x, df, loc, scale = args("t.logpdf", x, df, loc, scale)
    z = api.div(api.sub(x, loc), scale)
    half = api.div(df, 2.0)
    half1 = api.add(half, 0.5)
    tmp = api.div(api.log(api.mul(api.mul(api.mul(scale, scale), math.pi), df)), 2.0)
    norm_term = api.sub(api.add(lgamma(half), tmp), lgamma(half1))
    quad = api.div(api.mul(z, z), df)
    return api.neg(api.add(norm_term, api.mul(half1, composite.log1p(quad))))


def pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, df, loc, scale))``."""
    return api.exp(logpdf(x, df, loc, scale))
