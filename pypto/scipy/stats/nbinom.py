"""The negative binomial distribution (``jax.scipy.stats.nbinom``).

>>> import pypto as pto
>>> from pypto.scipy.stats import nbinom
>>> nbinom.pmf(pto.tensor([0.0, 1.0]), 2.0, 0.5).numpy()
array([0.24999988, 0.24999988], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, lgamma, xlogy
from pypto.scipy.stats._common import args

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """``log Γ(y + n) - log Γ(n) - log Γ(y + 1) + n log p + y log(1 - p)`` at
    ``y = k - loc``; ``-inf`` below ``loc``."""
    k, n, p, loc = args("nbinom.logpmf", k, n, p, loc)
    y = api.sub(k, loc)
    comb = api.sub(api.sub(lgamma(api.add(y, n)), lgamma(n)), lgamma(api.add(y, 1.0)))
    lin = api.add(xlogy(n, p), xlogy(y, api.sub(1.0, p)))
    return api.where(api.less(k, loc), -math.inf, api.add(comb, lin))


def pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """``exp(logpmf(k, n, p, loc))``."""
    return api.exp(logpmf(k, n, p, loc))
