"""The beta distribution (``jax.scipy.stats.beta``): its density (the CDF needs the
incomplete beta function, which pypto does not have yet).

>>> import pypto as pto
>>> from pypto.scipy.stats import beta
>>> beta.pdf(pto.tensor([0.25, 0.5]), 2.0, 2.0).numpy()
array([1.1249999, 1.4999999], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, composite, xlog1py, xlogy
from pypto.scipy.special import betaln
from pypto.scipy.stats._common import args

__all__ = ["logpdf", "pdf"]


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
