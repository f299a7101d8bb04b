"""``pto.scipy.special``: ``jax.scipy.special``'s functions under their names.

The functions themselves are pypto's ops (``gammaln`` is :func:`pto.lgamma`, ``erfinv`` is
:func:`pto.erf_inv`, ``expit`` is :func:`pto.sigmoid`; see :mod:`pypto.ops.special`), so they
trace, differentiate and compile for the NPU like any other. ``gamma``, ``gammasgn``,
``factorial`` and ``multigammaln`` are written here over them, as JAX writes them.

>>> import pypto as pto
>>> from pypto.scipy import special
>>> special.gamma(pto.tensor([5.0, 0.5, -1.5])).numpy()
array([24.000023 ,  1.7724544,  2.3632708], dtype=float32)
"""

from __future__ import annotations

import math
import operator
from typing import Any

from pypto.core.errors import DTypeError
from pypto.ops import (
    api,
    composite,
    digamma,
    entr,
    erf,
    erfc,
    i0,
    i0e,
    kl_div,
    lgamma,
    log_ndtr,
    log_softmax,
    logit,
    logsumexp,
    ndtr,
    ndtri,
    polygamma,
    rel_entr,
    signbit,
    softmax,
    xlog1py,
    xlogy,
    zeta,
)
from pypto.ops import erf_inv as erfinv
from pypto.ops import sigmoid as expit

gammaln = lgamma

__all__ = [
    "beta",
    "betaln",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfinv",
    "expit",
    "factorial",
    "gamma",
    "gammaln",
    "gammasgn",
    "i0",
    "i0e",
    "kl_div",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "rel_entr",
    "softmax",
    "xlog1py",
    "xlogy",
    "zeta",
]


def gammasgn(x: Any) -> Any:
    """The sign of ``Γ(x)``: 1 for positive ``x`` (and +0), -1 on the negative intervals of
    odd floor (and -0), NaN at the negative integers and NaN, as ``jax.scipy.special.gammasgn``.

    >>> import pypto as pto
    >>> gammasgn(pto.tensor([2.5, -0.5, -1.5, -2.0])).numpy()
    array([ 1., -1.,  1., nan], dtype=float32)
    """
    (v,) = api.promote("gammasgn", (x,), inexact=True)
    fl = composite.floor(v)
    neg = api.less(v, 0.0)
    nan = composite.logical_or(composite.logical_and(neg, api.equal(v, fl)), composite.isnan(v))
    odd = api.not_equal(composite.remainder(fl, 2.0), 0.0)
    minus = composite.logical_or(
        composite.logical_and(neg, odd),
        composite.logical_and(api.equal(v, 0.0), signbit(v)),
    )
    return api.where(nan, math.nan, api.where(minus, -1.0, 1.0))


def gamma(x: Any) -> Any:
    """``Γ(x) = gammasgn(x) · exp(gammaln(x))``, as ``jax.scipy.special.gamma`` (real ``x``).

    >>> import pypto as pto
    >>> gamma(pto.tensor([1.0, 4.0])).numpy()  # exp(gammaln(x)), as JAX's: a few ulps off
    array([1.0000005, 6.0000052], dtype=float32)
    """
    (v,) = api.promote("gamma", (x,), inexact=True)
    return api.mul(gammasgn(v), api.exp(lgamma(v)))


def factorial(n: Any, exact: bool = False) -> Any:
    """``n! = Γ(n + 1)`` for ``n >= 0`` and 0 below, as ``jax.scipy.special.factorial``
    (which has no ``exact=True`` either).

    >>> import pypto as pto
    >>> factorial(pto.tensor([0.0, 5.0, -1.0])).numpy().round(3)
    array([  1., 120.,   0.], dtype=float32)
    """
    if exact:
        raise DTypeError(
            "factorial: exact=True is not supported",
            op="factorial",
            hint="use exact=False (float results, as jax.scipy.special.factorial)",
        )
    (v,) = api.promote("factorial", (n,), inexact=True)
    return api.where(api.less(v, 0.0), 0.0, api.exp(lgamma(api.add(v, 1.0))))


def multigammaln(a: Any, d: int) -> Any:
    """The log of the multivariate gamma function of dimension ``d``,
    ``d(d-1)/4 · log π + Σⱼ gammaln(a - j/2)``, as ``jax.scipy.special.multigammaln``.

    >>> import pypto as pto
    >>> round(float(multigammaln(pto.tensor(3.0), 2)), 5)
    1.5502
    """
    d = operator.index(d)
    (v,) = api.promote("multigammaln", (a,), inexact=True)
    total: Any = 0.0
    for j in range(d):
        total = api.add(total, lgamma(api.sub(v, j / 2)))
    return api.add(total, 0.25 * d * (d - 1) * math.log(math.pi))


# Stirling's series of log Γ(x) - ((x - ½) log x - x + ½ log 2π): B₂ₖ / (2k (2k - 1) x^(2k-1))
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360)


def _stirling_rest(x: Any) -> Any:
    """The remainder of Stirling's formula for ``x >= 8``: under 1e-2, to float32's precision
    with six terms."""
    inv2 = api.div(1.0, api.mul(x, x))
    acc: Any = _STIRLING[-1]
    for c in _STIRLING[-2::-1]:
        acc = api.add(api.mul(acc, inv2), c)
    return api.div(acc, x)


def betaln(a: Any, b: Any) -> Any:
    """``log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)``, as
    ``jax.scipy.special.betaln``. With ``b`` the larger, from ``b = 8`` up the difference
    ``gammaln(b) - gammaln(a + b)`` is taken from Stirling's formula term by term,
    ``-(a + b - ½) log1p(a/b) - a (log b - 1)`` plus the difference of the remainders, so it
    does not cancel for large arguments.

    >>> import pypto as pto
    >>> betaln(pto.tensor([2.0, 1e6]), pto.tensor([3.0, 1e6])).numpy()
    array([-2.4849067e+00, -1.3863000e+06], dtype=float32)
    """
    u, v = api.promote("betaln", (a, b), inexact=True)
    lo, hi = api.minimum(u, v), api.maximum(u, v)
    small = api.add(lgamma(lo), api.sub(lgamma(hi), lgamma(api.add(lo, hi))))
    big = api.where(api.less(hi, 8.0), 8.0, hi)  # each branch sees only its own inputs
    log1p_ab = composite.log1p(api.div(lo, big))
    diff = api.sub(
        api.sub(_stirling_rest(big), _stirling_rest(api.add(lo, big))),
        api.add(
            api.mul(api.sub(api.add(lo, big), 0.5), log1p_ab),
            api.mul(lo, api.sub(api.log(big), 1.0)),
        ),
    )
    large = api.add(lgamma(lo), diff)
    return api.where(api.less(hi, 8.0), small, large)


def beta(a: Any, b: Any) -> Any:
    """``B(a, b) = Γ(a) Γ(b) / Γ(a + b)``, as ``jax.scipy.special.beta``: the signs of the
    three gammas times ``exp(betaln(a, b))``.

    >>> import pypto as pto
    >>> beta(pto.tensor([2.0, 0.5]), pto.tensor([3.0, 0.5])).numpy()
    array([0.08333334, 3.1415935 ], dtype=float32)
    """
    u, v = api.promote("beta", (a, b), inexact=True)
    sign = api.mul(api.mul(gammasgn(u), gammasgn(v)), gammasgn(api.add(u, v)))
    return api.mul(sign, api.exp(betaln(u, v)))
