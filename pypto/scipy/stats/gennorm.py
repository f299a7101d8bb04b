"""The generalized normal distribution (``jax.scipy.stats.gennorm``): its density (the CDF
needs the incomplete gamma function, which pypto does not have yet).

>>> import pypto as pto
>>> from pypto.scipy.stats import gennorm
>>> gennorm.pdf(pto.tensor([0.0, 1.0]), 2.0).numpy()
array([0.5641894 , 0.20755365], dtype=float32)
"""

from __future__ import annotations

from typing import Any

from pypto.ops import api, lgamma
from pypto.scipy.stats._common import args

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, beta: Any) -> Any:
    """``log(β/2) - gammaln(1/β) - |x|^β``."""
    x, beta = args("gennorm.logpdf", x, beta)
    norm_term = api.sub(api.log(api.mul(beta, 0.5)), lgamma(api.div(1.0, beta)))
    return api.sub(norm_term, api.pow(api.abs(x), beta))


def pdf(x: Any, beta: Any) -> Any:
    """``exp(logpdf(x, beta))``."""
    return api.exp(logpdf(x, beta))
