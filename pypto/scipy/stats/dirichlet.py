"""The Dirichlet distribution (``jax.scipy.stats.dirichlet``): ``x``'s first axis holds the
components, as in JAX and scipy.

>>> import pypto as pto
>>> from pypto.scipy.stats import dirichlet
>>> dirichlet.pdf(pto.tensor([0.2, 0.3, 0.5]), pto.tensor([1.0, 2.0, 3.0])).numpy().round(4)
np.float32(4.5)
"""

from __future__ import annotations

import math
from typing import Any

from pypto.core.errors import ShapeError
from pypto.ops import all as all_
from pypto.ops import api, composite, lgamma, xlogy
from pypto.ops.api import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, alpha: Any) -> Any:
    """``Σ (αᵢ - 1) log xᵢ - (Σ gammaln(αᵢ) - gammaln(Σ αᵢ))`` over the first axis,
    ``-inf`` off the simplex (a component not positive, or a sum 1e-6 away from 1). With one
    component fewer than ``alpha``, the last is ``1 - Σ x``."""
    x, alpha = promote("dirichlet.logpdf", (x, alpha), inexact=True)
    if len(alpha.shape) != 1:
        raise ShapeError(
            f"alpha must be one-dimensional, got shape {tuple(alpha.shape)}",
            op="dirichlet.logpdf",
        )
    k = alpha.shape[0]
    if not x.shape or x.shape[0] not in (k, k - 1):
        raise ShapeError(
            f"x of shape {tuple(x.shape)} needs {k} or {k - 1} components "
            f"on its first axis for alpha of shape {tuple(alpha.shape)}",
            op="dirichlet.logpdf",
        )
    if x.shape[0] != k:
        x = api.concat([x, api.sub(1.0, api.sum(x, 0, True))], 0)
    norm_term = api.sub(api.sum(lgamma(alpha)), lgamma(api.sum(alpha)))
    a = api.reshape(alpha, (k,) + (1,) * (len(x.shape) - 1))
    logp = api.sub(api.sum(xlogy(api.sub(a, 1.0), x), 0), norm_term)
    simplex = composite.logical_and(
        all_(api.greater(x, 0.0), 0), api.less(api.abs(api.sub(api.sum(x, 0), 1.0)), 1e-6)
    )
    return api.where(simplex, logp, -math.inf)


def pdf(x: Any, alpha: Any) -> Any:
    """``exp(logpdf(x, alpha))``."""
    return api.exp(logpdf(x, alpha))
