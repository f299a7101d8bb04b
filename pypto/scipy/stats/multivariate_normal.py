"""The multivariate normal distribution (``jax.scipy.stats.multivariate_normal``).

>>> import pypto as pto
>>> from pypto.scipy.stats import multivariate_normal
>>> cov = pto.tensor([[2.0, 0.5], [0.5, 1.0]])
>>> round(float(multivariate_normal.logpdf(pto.tensor([1.0, -1.0]), pto.zeros(2), cov)), 5)
-3.26054
"""

from __future__ import annotations

import math
from typing import Any

from pypto.core.errors import ShapeError
from pypto.ops import api, cholesky, composite, einsum, solve
from pypto.ops.api import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, mean: Any, cov: Any, allow_singular: None = None) -> Any:
    """``-½ yᵀy - n/2 log 2π - Σ log diag(L)`` with ``cov = L Lᵀ`` (Cholesky) and
    ``y = L⁻¹(x - mean)``; a scalar ``mean`` or ``cov`` is the one-dimensional or isotropic
    case, as in JAX. ``x`` and ``mean`` broadcast over leading axes."""
    if allow_singular is not None:
        raise ShapeError(
            "allow_singular is not supported",
            op="multivariate_normal.logpdf",
            hint="leave allow_singular=None (JAX does not support it either)",
        )
    x, mean, cov = promote("multivariate_normal.logpdf", (x, mean, cov), inexact=True)
    log2pi = math.log(2 * math.pi)
    if not mean.shape:
        quad = api.div(composite.square(api.sub(x, mean)), cov)
        return api.sub(api.mul(quad, -0.5), api.mul(api.add(api.log(cov), log2pi), 0.5))
    n = mean.shape[-1]
    y = api.sub(x, mean)
    if not cov.shape:
        quad = api.div(einsum("...i,...i->...", y, y), cov)
        return api.sub(api.mul(quad, -0.5), api.mul(api.add(api.log(cov), log2pi), n / 2))
    if len(cov.shape) < 2 or tuple(cov.shape[-2:]) != (n, n):
        raise ShapeError(
            f"cov of shape {tuple(cov.shape)} does not fit a mean of {n} dimensions",
            op="multivariate_normal.logpdf",
            hint=f"pass a [..., {n}, {n}] covariance",
        )
    chol = cholesky(cov)
    z = solve(chol, composite.expand_dims(y, -1))[..., 0]
    logdet = api.sum(api.log(composite.diagonal(chol, 0, -2, -1)), -1)
    quad = einsum("...i,...i->...", z, z)
    return api.sub(api.sub(api.mul(quad, -0.5), n / 2 * log2pi), logdet)


def pdf(x: Any, mean: Any, cov: Any) -> Any:
    """``exp(logpdf(x, mean, cov))``."""
    return api.exp(logpdf(x, mean, cov))
