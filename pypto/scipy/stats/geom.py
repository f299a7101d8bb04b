"""The geometric distribution on 1, 2, ... (``jax.scipy.stats.geom``).

>>> import pypto as pto
>>> from pypto.scipy.stats import geom
>>> geom.pmf(pto.tensor([1.0, 2.0, 0.0]), 0.5).numpy()
array([0.5 , 0.25, 0.  ], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.ops import api, xlog1py
from pypto.scipy.stats._common import args

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """``(x - 1) log(1 - p) + log p`` at ``x = k - loc``; ``-inf`` up to 0."""
    k, p, loc = args("geom.logpmf", k, p, loc)
    x = api.sub(k, loc)
    logp = api.add(xlog1py(api.sub(x, 1.0), api.neg(p)), api.log(p))
    return api.where(api.less_equal(x, 0.0), -math.inf, logp)


def pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """``exp(logpmf(k, p, loc))``."""
    return api.exp(logpmf(k, p, loc))
