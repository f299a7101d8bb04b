"""The generalized normal distribution (``jax.scipy.stats.gennorm``): its density, and its
distribution function through the regularized incomplete gamma function
(:func:`pypto.scipy.special.gammainc`).

>>> import pypto as pto
>>> from pypto.scipy.stats import gennorm
>>> gennorm.pdf(pto.tensor([0.0, 1.0]), 2.0).numpy()
array([0.5641894 , 0.20755365], dtype=float32)
>>> gennorm.cdf(pto.tensor([-1.0, 0.0, 1.0]), 2.0).numpy()  # β = 2: the normal of variance ½
array([0.07864976, 0.5       , 0.92135024], dtype=float32)
"""

from __future__ import annotations

from typing import Any

from pypto.ops import api, composite, lgamma
from pypto.scipy.special import gammainc
from pypto.scipy.stats._common import args

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x: Any, beta: Any) -> Any:
    """``log(β/2) - gammaln(1/β) - |x|^β``."""
    x, beta = args("gennorm.logpdf", x, beta)
    norm_term = api.sub(api.log(api.mul(beta, 0.5)), lgamma(api.div(1.0, beta)))
    return api.sub(norm_term, api.pow(api.abs(x), beta))


def pdf(x: Any, beta: Any) -> Any:
    """``exp(logpdf(x, beta))``."""
    return api.exp(logpdf(x, beta))


def cdf(x: Any, beta: Any) -> Any:
    """``½ (1 + sign(x) gammainc(1/β, |x|^β))``."""
    x, beta = args("gennorm.cdf", x, beta)
    half = api.mul(composite.sign(x), gammainc(api.div(1.0, beta), api.pow(api.abs(x), beta)))
    return api.mul(api.add(half, 1.0), 0.5)
