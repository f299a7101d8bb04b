"""The gamma distribution (``jax.scipy.stats.gamma``): its density (the CDF needs the
incomplete gamma function, which pypto does not have yet).

>>> import pypto as pto
>>> from pypto.scipy.stats import gamma
>>> gamma.logpdf(pto.tensor([0.5, 2.0]), 2.0).numpy()
array([-1.1931477, -1.3068533], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, lgamma, xlogy
from pypto.scipy.stats._common import args

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``(a - 1) log y - y - gammaln(a) - log(scale)`` with ``y = (x - loc)/scale``, ``-inf``
    below ``loc``."""
    x, a, loc, scale = args("gamma.logpdf", x, a, loc, scale)
    ok = api.greater_equal(x, loc)
    y = api.where(ok, api.div(api.sub(x, loc), scale), 1.0)
    lin = api.sub(xlogy(api.sub(a, 1.0), y), y)
    return api.where(ok, api.sub(lin, api.add(lgamma(a), api.log(scale))), -math.inf)


def pdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, a, loc, scale))``."""
    return api.exp(logpdf(x, a, loc, scale))
