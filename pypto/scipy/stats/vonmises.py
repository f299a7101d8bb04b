"""The von Mises distribution on the circle (``jax.scipy.stats.vonmises``).

>>> import pypto as pto
>>> from pypto.scipy.stats import vonmises
>>> vonmises.pdf(pto.tensor([0.0, 3.0]), 2.0).numpy()
array([0.5158854 , 0.00963979], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, i0e
from pypto.scipy.stats._common import args

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, kappa: Any) -> Any:
    """``κ (cos x - 1) - log(2π i0e(κ))`` (the scaled Bessel function: no overflow for
    large ``κ``); NaN for ``κ <= 0``."""
    x, kappa = args("vonmises.logpdf", x, kappa)
    logp = api.sub(
        api.mul(kappa, api.sub(api.cos(x), 1.0)), api.log(api.mul(i0e(kappa), 2 * math.pi))
    )
    return api.where(api.greater(kappa, 0.0), logp, math.nan)


def pdf(x: Any, kappa: Any) -> Any:
    """``exp(logpdf(x, kappa))``."""
    return api.exp(logpdf(x, kappa))
