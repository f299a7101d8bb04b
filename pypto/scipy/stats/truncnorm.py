"""The normal distribution truncated to ``[a, b]`` (standardized bounds), as
``jax.scipy.stats.truncnorm``.

>>> import pypto as pto
>>> from pypto.scipy.stats import truncnorm
>>> truncnorm.cdf(pto.tensor([-1.0, 0.0, 0.5]), -1.0, 1.0).numpy()
array([0.        , 0.5       , 0.78045315], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pypto.ops import api, composite, log_ndtr, logsumexp, ndtr
from pypto.scipy.stats import norm
from pypto.scipy.stats._common import args

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def _log_diff(x: Any, y: Any) -> Any:
    """``log(eˣ - eʸ)``, as a logsumexp with the weights 1 and -1 (as JAX computes it: -inf
    when both are -inf)."""
    one = api.broadcast_to(api.asvalue(np.ones((), x.dtype.np)), tuple(x.shape))
    w = composite.stack([one, api.neg(one)], 0)
    return logsumexp(composite.stack([x, y], 0), 0, b=w)


def _log_mass(a: Any, b: Any) -> Any:
    """``log(Φ(b) - Φ(a))``: in a tail from the log-CDFs of the tail it lies in (the right
    tail mirrored), in the middle as ``log1p(-Φ(a) - Φ(-b))``, which does not cancel."""
    left = api.less_equal(b, 0.0)
    right = api.greater(a, 0.0)
    central = composite.logical_not(composite.logical_or(left, right))
    a_tail = api.where(right, api.neg(b), a)
    b_tail = api.where(right, api.neg(a), b)
    tail = _log_diff(log_ndtr(b_tail), log_ndtr(a_tail))
    mid = composite.log1p(api.sub(api.neg(ndtr(a)), ndtr(api.neg(b))))
    return api.where(central, mid, tail)


def logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``norm.logpdf(x, loc, scale) - log(Φ(b) - Φ(a))`` inside ``[a, b]`` (in standard
    units), ``-inf`` outside, NaN for ``a >= b``."""
    x, a, b, loc, scale = args("truncnorm.logpdf", x, a, b, loc, scale)
    val = api.sub(norm.logpdf(x, loc, scale), _log_mass(a, b))
    z = api.div(api.sub(x, loc), scale)
    val = api.where(composite.logical_or(api.less(z, a), api.greater(z, b)), -math.inf, val)
    return api.where(api.greater_equal(a, b), math.nan, val)


def pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logpdf(x, a, b, loc, scale))``."""
    return api.exp(logpdf(x, a, b, loc, scale))


def logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(Φ(z) - Φ(a)) - log(Φ(b) - Φ(a))``; near 1 as ``log1p(-sf)``."""
    x, a, b, loc, scale = args("truncnorm.logcdf", x, a, b, loc, scale)
    shape = tuple(api.add(api.add(x, a), b).shape)
    x, a, b = (api.broadcast_to(v, shape) for v in (x, a, b))
    z = api.div(api.sub(x, loc), scale)
    mass = _log_mass(a, b)
    lcdf = api.sub(_log_mass(a, z), mass)
    lsf = api.sub(_log_mass(z, b), mass)
    out = api.where(
        api.greater_equal(z, b),
        0.0,
        api.where(
            api.less_equal(z, a),
            -math.inf,
            api.where(
                api.greater(lcdf, -0.1),
                composite.log1p(api.neg(api.exp(lsf))),
                api.where(api.greater(z, a), lcdf, 0.0),
            ),
        ),
    )
    return api.where(api.greater_equal(a, b), math.nan, out)


def cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logcdf(x, a, b, loc, scale))``."""
    return api.exp(logcdf(x, a, b, loc, scale))


def logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``logcdf(-x, -b, -a, -loc, scale)``."""
    x, a, b, loc, scale = args("truncnorm.logsf", x, a, b, loc, scale)
    return logcdf(api.neg(x), api.neg(b), api.neg(a), api.neg(loc), scale)


def sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(logsf(x, a, b, loc, scale))``."""
    return api.exp(logsf(x, a, b, loc, scale))
