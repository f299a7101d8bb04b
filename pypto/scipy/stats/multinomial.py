"""The multinomial distribution (``jax.scipy.stats.multinomial``): counts on the last axis.

>>> import pypto as pto
>>> from pypto.scipy.stats import multinomial
>>> multinomial.pmf(pto.tensor([1, 1]), 2, pto.tensor([0.5, 0.5])).numpy()
array(0.49999976, dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.core.errors import DTypeError
from pypto.ops import api, lgamma, xlogy
from pypto.ops.api import promote

__all__ = ["logpmf", "pmf"]


def logpmf(x: Any, n: Any, p: Any) -> Any:
    """``gammaln(n + 1) + Σ (xᵢ log pᵢ - gammaln(xᵢ + 1))`` over the last axis; ``-inf``
    unless the counts add up to ``n``. ``x`` and ``n`` must be integers, as in JAX."""
    pv: Any = promote("multinomial.logpmf", (p,), inexact=True)[0]
    xv: Any
    xv, nv = promote("multinomial.logpmf", (x, n))
    if xv.dtype.is_floating:
        raise DTypeError(
            f"x and n must be integers, got {xv.dtype}",
            op="multinomial.logpmf",
            hint="pass the counts as an integer tensor",
        )
    xf, nf = api.cast(xv, pv.dtype), api.cast(nv, pv.dtype)
    terms = api.sub(xlogy(xf, pv), lgamma(api.add(xf, 1.0)))
    logp = api.add(lgamma(api.add(nf, 1.0)), api.sum(terms, -1))
    # as JAX: the sum over all of x, not per row
    return api.where(api.equal(api.sum(xf), nf), logp, -math.inf)


def pmf(x: Any, n: Any, p: Any) -> Any:
    """``exp(logpmf(x, n, p))``."""
    return api.exp(logpmf(x, n, p))
