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

import numpy as np

from pypto.core.errors import DTypeError, ShapeError
from pypto.ops import (
    api,
    composite,
    digamma,
    entr,
    erf,
    erfc,
    i0,
    i0e,
    i1e,
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
from pypto.ops.activations import _ERFC, _horner
from pypto.ops.numpy_lib import _narrow, _wide, trunc
from pypto.ops.special import bernoulli_numbers

gammaln = lgamma

__all__ = [
    "bernoulli",
    "bessel_jn",
    "beta",
    "betainc",
    "betaln",
    "boxcox",
    "boxcox1p",
    "comb",
    "dawsn",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp1",
    "expi",
    "expit",
    "expn",
    "factorial",
    "fresnel",
    "gamma",
    "gammainc",
    "gammaincc",
    "gammaln",
    "gammasgn",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "kl_div",
    "log_ndtr",
    "log_softmax",
    "loggamma",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "ndtri",
    "owens_t",
    "poch",
    "polygamma",
    "rel_entr",
    "sici",
    "softmax",
    "spence",
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
            "exact=True is not supported",
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


# ---------------------------------------------------------------- incomplete gamma
# The regularized incomplete gamma functions P(a, x) and Q(a, x) = 1 - P, after Cephes'
# igam/igamc (DiDonato and Morris's regions; Temme's uniform expansion near the transition for
# large a), with fixed term counts so that they unroll into elementwise ops: P's series where
# x < a (or x <= 1), Q's continued fraction where x > a and x > 1, Q's own series where x is
# small and P near 1, and Temme's expansion for a > 20 within 30% of x = a, where the series
# and the fraction would need about √a terms.
_IGAM_SERIES = 64  # P's series: x/(a+n) <= 1.3 a/(a+n) (x = a+1 for a <= 20) falls below 1e-8
_IGAM_CF_DEPTH = 64  # Q's continued fraction from x > max(a, 1), evaluated from this depth
_IGAMC_SERIES = 20  # Q's series for x <= 1.1: 1.1^n / n! falls below 1e-18
_TEMME_A = 20.0
_TEMME_MU = 0.3
# Temme's c₀(η) = 1/μ - 1/η and c₁(η) = 1/η³ - 1/μ³ - 1/μ² - 1/(12μ) (μ = x/a - 1, η²/2 =
# μ - log1p(μ)), which cancel near η = 0, as polynomials in η on [-0.36, 0.30] (|μ| < 0.3;
# Chebyshev fits of the closed forms at 50 digits, within 1e-14), constant term first
_TEMME_C0 = (
    -0.33333333333333653,
    0.08333333333345906,
    -0.014814814813313135,
    0.001157407388595349,
    0.000352733568341344,
    -0.00017875439570647642,
    3.9195996383715945e-05,
    -2.1964014130536737e-06,
    -1.894660452853845e-06,
    8.834421089487991e-07,
)
_TEMME_C1 = (
    -0.001851851851848936,
    -0.0034722222223375564,
    0.0026455026441809227,
    -0.0009902263198625506,
    0.0002057614173163997,
    -4.0259494424345156e-07,
    -1.8101341286372767e-05,
    7.660152683917956e-06,
    -1.5792800234955699e-06,
    -5.6435772482502905e-08,
)


def _log1pmx_near(mu: Any) -> Any:
    """``log1p(μ) - μ`` for ``|μ| <= 0.3`` without cancellation: ``log1p(μ) = 2 atanh(u)``
    with ``u = μ/(2+μ)``, and ``μ - 2u = u μ`` exactly."""
    u = api.div(mu, api.add(mu, 2.0))
    u2 = api.mul(u, u)
    acc: Any = 1.0 / 15
    for k in (13, 11, 9, 7, 5, 3):
        acc = api.add(api.mul(acc, u2), 1.0 / k)
    return api.sub(api.mul(api.mul(api.mul(u, u2), 2.0), acc), api.mul(u, mu))


def _log1pmx(t: Any, ratio: Any) -> Any:
    """``log1p(t) - t`` for ``t >= -1`` given ``ratio = 1 + t`` as well (a quotient, exact to
    its rounding): the series of :func:`_log1pmx_near` for ``|t| < 0.3``, ``log(ratio) - t``
    below ``t = -0.5`` (``1 + t`` would lose ``ratio``'s low bits), else ``log1p(t) - t``."""
    near = api.less(api.abs(t), _TEMME_MU)
    tiny = api.less(t, -0.5)
    mid = api.where(near, 1.0, t)
    far = api.sub(api.where(tiny, api.log(ratio), composite.log1p(api.where(tiny, 0.0, mid))), mid)
    return api.where(near, _log1pmx_near(api.where(near, t, 0.0)), far)


def _igam_log_factor(a: Any, x: Any) -> Any:
    """``log(xᵃ e⁻ˣ / Γ(a))``. From ``a = 8`` up it is ``a (log1p(μ) - μ) + ½ log(a/2π)``
    minus Stirling's remainder (``μ = x/a - 1``), so the two large terms of ``a log x - x -
    gammaln(a)`` do not cancel."""
    naive = api.sub(api.sub(api.mul(a, api.log(x)), x), lgamma(a))
    big = api.greater_equal(a, 8.0)
    ab = api.where(big, a, 8.0)
    l1 = _log1pmx(api.div(api.sub(x, ab), ab), api.div(x, ab))
    stirling = api.add(api.mul(ab, l1), api.mul(api.log(api.div(ab, 2 * math.pi)), 0.5))
    return api.where(big, api.sub(stirling, _stirling_rest(ab)), naive)


def _igam_series(a: Any, x: Any, log_f: Any) -> Any:
    """``P = xᵃ e⁻ˣ / Γ(a + 1) · Σ xⁿ / ((a + 1) ⋯ (a + n))``, the sum nested from its
    smallest terms, ``1 + r₁(1 + r₂(1 + ⋯))`` with ``rₙ = x/(a + n)``, so that each rounding
    is relative to what is summed so far."""
    total: Any = 1.0
    for n in range(_IGAM_SERIES - 1, 0, -1):
        total = api.add(api.mul(total, api.div(x, api.add(a, float(n)))), 1.0)
    return api.mul(api.exp(api.sub(log_f, api.log(a))), total)


def _igamc_fraction(a: Any, x: Any, log_f: Any) -> Any:
    """``Q = xᵃ e⁻ˣ / Γ(a) / (x + 1 - a - 1(1 - a)/(x + 3 - a - 2(2 - a)/(x + 5 - a - ⋯)))``,
    evaluated from a fixed depth."""
    f = api.sub(api.add(x, float(2 * _IGAM_CF_DEPTH + 1)), a)
    for k in range(_IGAM_CF_DEPTH, 0, -1):
        num = api.mul(api.sub(float(k), a), float(k))
        f = api.sub(api.sub(api.add(x, float(2 * k - 1)), a), api.div(num, f))
    return api.div(api.exp(log_f), f)


# ζ(2) … ζ(13): log Γ(1 + a) = -(Euler's constant) a + Σₖ (-1)ᵏ ζ(k) aᵏ / k
_ZETAS = (
    1.6449340668482264,
    1.2020569031595942,
    1.0823232337111381,
    1.03692775514337,
    1.0173430619844492,
    1.008349277381923,
    1.0040773561979444,
    1.0020083928260821,
    1.000994575127818,
    1.0004941886041194,
    1.000246086553308,
    1.0001227133475785,
)


def _lgamma1p(a: Any) -> Any:
    """``log Γ(1 + a)``: below 0.2 its Taylor series (within 1e-9; ``gammaln(1 + a)`` there
    is a difference of terms near 1 that keeps only its absolute precision), else
    ``gammaln``."""
    small = api.less(api.abs(a), 0.2)
    u = api.where(small, a, 0.0)
    acc: Any = 0.0
    for k in range(len(_ZETAS) + 1, 1, -1):
        acc = api.mul(api.add(acc, (-1) ** k * _ZETAS[k - 2] / k), u)
    series = api.mul(api.sub(acc, _EULER), u)
    return api.where(small, series, lgamma(api.add(api.where(small, 1.0, a), 1.0)))


def _igamc_series(a: Any, x: Any) -> Any:
    """``Q`` for small ``x`` where ``P`` is near 1: ``-expm1(a log x - gammaln(a + 1))``
    minus ``xᵃ / Γ(a) · Σ (-x)ⁿ / (n! (a + n))``."""
    fac: Any = 1.0
    total: Any = 0.0
    for n in range(1, _IGAMC_SERIES):
        fac = api.mul(fac, api.div(api.neg(x), float(n)))
        total = api.add(total, api.div(fac, api.add(a, float(n))))
    ax = api.mul(a, api.log(x))
    head = api.neg(composite.expm1(api.sub(ax, _lgamma1p(a))))
    return api.sub(head, api.mul(api.exp(api.sub(ax, lgamma(a))), total))


def _igam_temme(a: Any, x: Any) -> tuple[Any, Any]:
    """``(P, Q)`` by Temme's uniform expansion with two terms (``|x/a - 1| < 0.3``):
    ``Q = ½ erfc(η √(a/2)) + e^(-aη²/2) / √(2πa) · (c₀(η) + c₁(η)/a)``, and ``P`` the same
    with ``-η`` and the sum subtracted."""
    mu = api.div(api.sub(x, a), a)
    l1 = _log1pmx_near(mu)
    eta = api.mul(api.sqrt(api.mul(l1, -2.0)), api.where(api.less(mu, 0.0), -1.0, 1.0))
    z = api.mul(eta, api.sqrt(api.mul(a, 0.5)))
    r = api.add(_horner(eta, _TEMME_C0), api.div(_horner(eta, _TEMME_C1), a))
    r = api.mul(api.div(api.exp(api.mul(a, l1)), api.sqrt(api.mul(a, 2 * math.pi))), r)
    return api.sub(api.mul(erfc(api.neg(z)), 0.5), r), api.add(api.mul(erfc(z), 0.5), r)


def _igam(a: Any, x: Any) -> tuple[Any, Any]:
    """``(P, Q)`` for ``0 < a < inf`` and ``0 < x < inf``: each region's method, every one fed
    only its own region's inputs (so the others' NaN do not reach a gradient)."""
    log_f = _igam_log_factor(a, x)
    temme = composite.logical_and(
        api.greater(a, _TEMME_A), api.less(api.abs(api.div(api.sub(x, a), a)), _TEMME_MU)
    )
    fraction = composite.logical_and(api.greater(x, 1.0), api.greater(x, a))
    # Q's own series where x <= 1.1 and P is near 1 (Cephes' test)
    xq = api.where(api.less_equal(x, 1.1), x, 1.0)
    qs = composite.logical_and(
        api.less_equal(x, 1.1),
        api.where(
            api.less_equal(x, 0.5),
            api.greater_equal(api.div(-0.4, api.log(api.minimum(xq, 0.5))), a),
            api.greater_equal(api.mul(xq, 1.1), a),
        ),
    )
    series = composite.logical_not(composite.logical_or(temme, composite.logical_or(fraction, qs)))
    p_s = _igam_series(api.where(series, a, 1.0), api.where(series, x, 0.5), log_f)
    q_f = _igamc_fraction(api.where(fraction, a, 1.0), api.where(fraction, x, 2.0), log_f)
    q_q = _igamc_series(api.where(qs, a, 0.5), api.where(qs, x, 0.5))
    p_t, q_t = _igam_temme(api.where(temme, a, 100.0), api.where(temme, x, 100.0))
    p = api.where(
        temme, p_t, api.where(fraction, api.sub(1.0, q_f), api.where(qs, api.sub(1.0, q_q), p_s))
    )
    q = api.where(temme, q_t, api.where(fraction, q_f, api.where(qs, q_q, api.sub(1.0, p_s))))
    return p, q


def _igam_both(name: str, a: Any, x: Any) -> tuple[Any, Any, Any]:
    """``(P, Q)`` with JAX's values off the interior: NaN for a negative or NaN argument or
    ``a = inf``; at ``a = 0`` ``P = 1`` (NaN at ``x = 0``); at ``x = 0`` ``P = 0``; at
    ``x = inf`` ``P = 1``; and the dtype to round to."""
    (u, v), d = _wide(name, a, x)
    bad = composite.logical_or(
        composite.logical_or(api.less(u, 0.0), api.less(v, 0.0)),
        composite.logical_or(
            composite.logical_or(composite.isnan(u), composite.isnan(v)), composite.isposinf(u)
        ),
    )
    zero_a, zero_x, inf_x = api.equal(u, 0.0), api.equal(v, 0.0), composite.isposinf(v)
    edge = composite.logical_or(
        composite.logical_or(bad, zero_a), composite.logical_or(zero_x, inf_x)
    )
    inside = composite.logical_not(edge)
    p, q = _igam(api.where(inside, u, 1.0), api.where(inside, v, 1.0))
    p_edge = api.where(zero_a, api.where(zero_x, math.nan, 1.0), api.where(zero_x, 0.0, 1.0))
    p = api.where(bad, math.nan, api.where(inside, p, p_edge))
    q = api.where(bad, math.nan, api.where(inside, q, api.sub(1.0, p_edge)))
    return p, q, d


def gammainc(a: Any, x: Any) -> Any:
    """The regularized lower incomplete gamma function ``P(a, x) = ∫₀ˣ tᵃ⁻¹ e⁻ᵗ dt / Γ(a)``, as
    ``jax.scipy.special.gammainc``: NaN for negative ``a`` or ``x``, 1 at ``a = 0`` (for
    ``x > 0``). Computed in float32 by region — the series of ``P``, the continued fraction
    of ``Q = 1 - P``, ``Q``'s series for small ``x``, and Temme's uniform expansion for
    ``a > 20`` near ``x = a`` — so it stays accurate for large ``a``, where JAX's float32
    result drifts (``gammainc(1e5, 1e5)``: 0.50042, JAX 0.4585). Differentiable in both
    arguments.

    >>> import pypto as pto
    >>> gammainc(pto.tensor([1.0, 3.0, 100.0]), pto.tensor([1.0, 2.0, 100.0])).numpy()
    array([0.6321203 , 0.32332343, 0.5132988 ], dtype=float32)
    """
    p, _, d = _igam_both("gammainc", a, x)
    return _narrow(p, d)


def gammaincc(a: Any, x: Any) -> Any:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``, as
    ``jax.scipy.special.gammaincc``, computed directly in each region (not as ``1 - P``), so
    its small values keep their precision: see :func:`gammainc`.

    >>> import pypto as pto
    >>> gammaincc(pto.tensor([1.0, 3.0, 2.0]), pto.tensor([1.0, 2.0, 30.0])).numpy()
    array([3.6787969e-01, 6.7667657e-01, 2.9008631e-12], dtype=float32)
    """
    _, q, d = _igam_both("gammaincc", a, x)
    return _narrow(q, d)


# ---------------------------------------------------------------- incomplete beta
_IBETA_DEPTH = 128  # levels of the continued fraction, evaluated from the deepest


def _ibeta_log_factor(a: Any, b: Any, x: Any, y: Any) -> Any:
    """``log(xᵃ yᵇ / (a B(a, b)))`` with ``y = 1 - x``. With ``a`` and ``b`` from 8 up, around
    the mean ``x₀ = a/(a + b)``: ``a log1pmx(δ/x₀) + b log1pmx(-δ/y₀)`` (``δ = x - x₀``; the
    linear terms cancel) plus ``½ log(ab / 2π(a + b))`` and the Stirling remainders, so the
    large logarithms of the naive sum never meet."""
    # each logarithm from whichever of x and 1 - x is the smaller (the exact one)
    lx = api.where(api.less(x, 0.5), api.log(x), composite.log1p(api.neg(y)))
    ly = api.where(api.less(y, 0.5), api.log(y), composite.log1p(api.neg(x)))
    # log(a B(a, b)) = log(Γ(a + 1) Γ(b) / Γ(a + b)): for a <= b as gammaln(1 + a) plus
    # gammaln(b) - gammaln(a + b), so that a tiny a's log a and gammaln(a) (both about
    # -log a) never meet
    lo, hi = api.minimum(a, b), api.maximum(a, b)
    log_ab = api.where(
        api.less_equal(a, b),
        api.add(_lgamma1p(a), _lgamma_diff(lo, hi)),
        api.add(api.log(a), betaln(a, b)),
    )
    naive = api.sub(api.add(api.mul(a, lx), api.mul(b, ly)), log_ab)
    big = composite.logical_and(api.greater_equal(a, 8.0), api.greater_equal(b, 8.0))
    ab, bb = api.where(big, a, 8.0), api.where(big, b, 8.0)
    n = api.add(ab, bb)
    x0, y0 = api.div(ab, n), api.div(bb, n)
    # x - x₀ as (x b - y a)/(a + b): x₀'s own rounding would shift it by an ulp of x₀
    d = api.div(api.sub(api.mul(x, bb), api.mul(y, ab)), n)
    la = _log1pmx(api.div(d, x0), api.div(x, x0))
    lb = _log1pmx(api.div(api.neg(d), y0), api.div(y, y0))
    rest = api.sub(api.add(_stirling_rest(ab), _stirling_rest(bb)), _stirling_rest(n))
    half = api.mul(api.log(api.div(api.mul(ab, bb), api.mul(n, 2 * math.pi))), 0.5)
    big_f = api.sub(api.add(api.add(api.mul(ab, la), api.mul(bb, lb)), half), rest)
    return api.where(big, api.sub(big_f, api.log(ab)), naive)


def _ibeta_fraction(a: Any, b: Any, x: Any, y: Any) -> Any:
    """``I_x(a, b) = xᵃ yᵇ / (a B(a, b)) / (1 + d₁/(1 + d₂/(1 + ⋯)))`` for ``x`` below the
    mean, where the fraction converges: ``d₂ₘ₊₁ = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))``,
    ``d₂ₘ = m (b - m) x / ((a + 2m - 1)(a + 2m))``. Near the mean the top level
    ``1 + d₁/(1 + e)`` is small (``d₁`` near -1): it is taken as ``(e + (1 + d₁)) / (1 + e)``
    with ``1 + d₁ = ((a + 1) y - (b - 1) x) / (a + 1)``, so that no 1 is subtracted from a
    value near 1 (a thousandfold loss at ``a = 6872, b = 54``)."""
    t: Any = 1.0
    e: Any = 0.0
    s = api.add(a, b)
    for m in range(_IBETA_DEPTH, 0, -1):
        am = api.add(a, float(2 * m))
        # as ratios of like sizes, so that no product overflows for large a and b
        odd = api.mul(
            api.mul(
                api.div(api.add(a, float(m)), am), api.div(api.add(s, float(m)), api.add(am, 1.0))
            ),
            x,
        )
        t = api.sub(1.0, api.div(odd, t))  # level 2m + 1
        even = api.mul(
            api.mul(api.div(api.sub(b, float(m)), api.sub(am, 1.0)), api.div(float(m), am)), x
        )
        e = api.div(even, t)
        t = api.add(e, 1.0)  # level 2m
    a1 = api.add(a, 1.0)
    top = api.div(api.sub(api.mul(a1, y), api.mul(api.sub(b, 1.0), x)), a1)
    t = api.div(api.add(e, top), t)  # level 1
    return api.div(api.exp(_ibeta_log_factor(a, b, x, y)), t)


_IBETA_TEMME_S = 2000.0  # a + b from which Temme's expansion replaces the fraction
_IBETA_TEMME_MIN = 20.0  # ... when a and b are both at least this


def _log1p_cubic(u: Any, ratio: Any) -> Any:
    """``log1p(u) - u + u²/2`` for ``u >= -1`` given ``ratio = 1 + u`` as well: its series
    ``u³/3 - u⁴/4 + …`` for ``|u| < 0.3`` (where ``log1p(u) - u`` is about ``-u²/2``, so
    adding ``u²/2`` would cancel), else :func:`_log1pmx` plus ``u²/2``."""
    near = api.less(api.abs(u), _TEMME_MU)
    un = api.where(near, u, 0.0)
    acc: Any = 0.0
    for k in range(16, 2, -1):  # Σ (-1)^(k+1) u^k / k, k = 3 … 16, nested
        acc = api.mul(api.add(acc, (-1.0) ** (k + 1) / k), un)
    series = api.mul(api.mul(acc, un), un)
    uf = api.where(near, 0.5, u)
    direct = api.add(_log1pmx(uf, api.where(near, 1.5, ratio)), api.mul(api.mul(uf, uf), 0.5))
    return api.where(near, series, direct)


def _ibeta_temme(a: Any, b: Any, x: Any, y: Any) -> Any:
    """``I_x(a, b)`` for large ``a`` and ``b`` by Temme's uniform expansion, one term:
    ``½ erfc(-η √(s/2)) + e^(-sη²/2) / √(2πs) · c₀`` with ``s = a + b``, ``x₀ = a/s``,
    ``-η²/2 = x₀ log(x/x₀) + y₀ log(y/y₀)`` and ``c₀ = 1/η - √(x₀y₀)/(x - x₀)`` (within 2e-9 of
    float64 from ``s = 2000``). Both of ``c₀``'s terms grow as ``x`` nears ``x₀``, so it is
    taken as ``r / ((1 + √(1 - r)) η)`` with ``η² = t²(1 - r)``, ``t = (x - x₀)/√(x₀y₀)``,
    and ``r t²/2 = x₀ M(δ/x₀) + y₀ M(-δ/y₀)``, ``M(u) = log1p(u) - u + u²/2`` (no
    cancellation)."""
    s = api.add(a, b)
    x0, y0 = api.div(a, s), api.div(b, s)
    d = api.div(api.sub(api.mul(x, b), api.mul(y, a)), s)  # x - x₀ (see _ibeta_log_factor)
    r0 = api.sqrt(api.mul(x0, y0))
    t = api.div(d, r0)
    # x₀ log(x/x₀) + y₀ log(y/y₀) = -t²/2 + x₀ M(δ/x₀) + y₀ M(-δ/y₀)
    cubic = api.add(
        api.mul(x0, _log1p_cubic(api.div(d, x0), api.div(x, x0))),
        api.mul(y0, _log1p_cubic(api.div(api.neg(d), y0), api.div(y, y0))),
    )
    t2 = api.mul(t, t)
    zero = api.equal(t2, 0.0)
    rho = api.div(api.mul(cubic, 2.0), api.where(zero, 1.0, t2))
    # within 30% of x₀ on both sides, through r; farther out (where r nears 1 and would round
    # past it) η from the logarithms themselves, and c₀'s two terms differ enough
    near = composite.logical_and(
        api.less(api.abs(api.div(d, x0)), _TEMME_MU), api.less(api.abs(api.div(d, y0)), _TEMME_MU)
    )
    root = api.sqrt(api.sub(1.0, api.where(near, rho, 0.0)))
    eta_near = api.mul(t, root)
    h = api.add(api.mul(x0, api.log(api.div(x, x0))), api.mul(y0, api.log(api.div(y, y0))))
    sign = api.where(api.less(d, 0.0), -1.0, 1.0)
    eta_far = api.mul(api.sqrt(api.mul(api.minimum(h, 0.0), -2.0)), sign)
    eta = api.where(near, eta_near, eta_far)
    safe = api.where(zero, 1.0, eta)
    c0 = api.where(
        near,
        api.div(rho, api.mul(api.add(root, 1.0), safe)),
        api.sub(api.div(1.0, safe), api.div(1.0, api.where(zero, 1.0, t))),
    )
    # at x = x₀ exactly: c₀'s limit, (y₀ - x₀)/(3√(x₀y₀))
    c0 = api.where(zero, api.div(api.sub(y0, x0), api.mul(r0, 3.0)), c0)
    lead = api.mul(erfc(api.neg(api.mul(eta, api.sqrt(api.mul(s, 0.5))))), 0.5)
    r = api.div(
        api.exp(api.mul(api.mul(api.mul(eta, eta), s), -0.5)), api.sqrt(api.mul(s, 2 * math.pi))
    )
    return api.add(lead, api.mul(r, c0))


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularized incomplete beta function ``I_x(a, b) = ∫₀ˣ tᵃ⁻¹ (1 - t)ᵇ⁻¹ dt / B(a, b)``,
    as ``jax.scipy.special.betainc``, with JAX's values at the edges (NaN for negative or NaN
    arguments, ``x`` outside ``[0, 1]``, ``a = b = 0`` or ``a = b = inf``). Its continued
    fraction below the mean ``(a + 1)/(a + b + 2)`` and ``1 - I_{1-x}(b, a)`` above, computed in
    float32 from a fixed depth; the factor ``xᵃ (1 - x)ᵇ / B(a, b)`` around the mean from
    Stirling's formula for large ``a`` and ``b``; Temme's uniform expansion once ``a + b``
    reaches 2000 with both at least 20 (where the fraction would need ``√(a + b)`` levels).
    Differentiable in all three arguments (JAX's only in ``x``).

    >>> import pypto as pto
    >>> betainc(pto.tensor([1.0, 2.0, 50.0]), pto.tensor([1.0, 3.0, 60.0]),
    ...         pto.tensor([0.5, 0.5, 0.45])).numpy()
    array([0.49999976, 0.6875    , 0.46423528], dtype=float32)
    """
    (u, v, w), d = _wide("betainc", a, b, x)
    nan = composite.logical_or(
        composite.logical_or(
            composite.logical_or(composite.isnan(u), composite.isnan(v)),
            composite.logical_or(composite.isnan(w), api.less(w, 0.0)),
        ),
        composite.logical_or(
            composite.logical_or(api.less(u, 0.0), api.less(v, 0.0)), api.greater(w, 1.0)
        ),
    )
    zero_u, zero_v = api.equal(u, 0.0), api.equal(v, 0.0)
    inf_u, inf_v = composite.isposinf(u), composite.isposinf(v)
    nan = composite.logical_or(
        nan,
        composite.logical_or(
            composite.logical_and(zero_u, zero_v), composite.logical_and(inf_u, inf_v)
        ),
    )
    # the edges: 0 at x = 0 and 1 at x = 1; a = 0 or b = inf puts all the mass at 0, b = 0
    # or a = inf at 1
    at0 = composite.logical_or(zero_u, inf_v)
    at1 = composite.logical_or(zero_v, inf_u)
    x0, x1 = api.equal(w, 0.0), api.equal(w, 1.0)
    edge_value = api.where(x0, 0.0, api.where(x1, 1.0, api.where(at0, 1.0, 0.0)))
    edge = composite.logical_or(
        composite.logical_or(nan, composite.logical_or(x0, x1)), composite.logical_or(at0, at1)
    )
    inside = composite.logical_not(edge)
    ua, va, wa = api.where(inside, u, 1.0), api.where(inside, v, 1.0), api.where(inside, w, 0.5)
    flip = api.greater(wa, api.div(api.add(ua, 1.0), api.add(api.add(ua, va), 2.0)))
    p, q = api.where(flip, va, ua), api.where(flip, ua, va)
    xs, ys = api.where(flip, api.sub(1.0, wa), wa), api.where(flip, wa, api.sub(1.0, wa))
    r = _ibeta_fraction(p, q, xs, ys)
    r = api.where(flip, api.sub(1.0, r), r)
    # large a and b: Temme's expansion, where the fraction would need about √(a + b) levels
    temme = composite.logical_and(
        api.greater_equal(api.add(ua, va), _IBETA_TEMME_S),
        api.greater_equal(api.minimum(ua, va), _IBETA_TEMME_MIN),
    )
    r_t = _ibeta_temme(api.where(temme, ua, 1e3), api.where(temme, va, 1e3), wa, api.sub(1.0, wa))
    # (rounding can take either form a hair outside [0, 1])
    r = api.minimum(api.maximum(api.where(temme, r_t, r), 0.0), 1.0)
    return _narrow(api.where(nan, math.nan, api.where(inside, r, edge_value)), d)


# Dawson's integral between its series (|x| < 1) and its asymptotic expansion (|x| > 10):
# Rybicki's sampling sum F(x) ≈ π^(-1/2) Σ_{n odd} e^(-(x - nh)²)/n, taken around the even
# multiple of h nearest x (its error is about e^(-(π/2h)²): 1e-12 with h = 0.3, in eight pairs)
_DAWSN_SERIES = 14  # below 1: the 14th term is 2¹⁴/29!! < 1e-13
_DAWSN_H = 0.3
_DAWSN_PAIRS = 8


def dawsn(x: Any) -> Any:
    """Dawson's integral ``F(x) = e^(-x²) ∫₀ˣ e^(t²) dt``, as ``jax.scipy.special.dawsn``: its
    series ``x (1 - 2x²/3 (1 - 2x²/5 (1 - ⋯)))`` below 1, ``1/(2x) Σ (2k - 1)!!/(2x²)ᵏ``
    above 10, and Rybicki's sampling sum between. Odd (-0 at -0); ±0 at ±inf, NaN at NaN.

    >>> import pypto as pto
    >>> dawsn(pto.tensor([0.1, 1.0, 3.0, 100.0])).numpy()
    array([0.09933599, 0.5380796 , 0.17827103, 0.00500025], dtype=float32)
    """
    (v,), d = _wide("dawsn", x)
    a = api.abs(v)
    small = api.less(a, 1.0)
    big = api.greater(a, 10.0)
    xs = api.where(small, a, 0.0)
    x2 = api.mul(xs, xs)
    # Σ (-2x²)ᵏ / (2k + 1)!!, nested: 1 - 2x²/3 (1 - 2x²/5 (1 - ⋯))
    acc0: Any = 1.0
    for k in range(_DAWSN_SERIES, 0, -1):
        acc0 = api.sub(1.0, api.mul(api.mul(x2, 2.0 / (2 * k + 1)), acc0))
    series = api.mul(xs, acc0)
    # above 10: 1/(2x) (1 + 1/(2x²) + 3/(4x⁴) + 15/(8x⁶) + 105/(16x⁸) + 945/(32x¹⁰))
    xb = api.where(composite.logical_and(big, composite.isfinite(a)), a, 20.0)
    w = api.div(0.5, api.mul(xb, xb))
    acc: Any = 1.0
    for k in range(5, 0, -1):  # nested: 1 + (2k-1) w (1 + ...)
        acc = api.add(api.mul(api.mul(acc, w), float(2 * k - 1)), 1.0)
    asym = api.div(acc, api.mul(xb, 2.0))
    # between: about the even multiple n₀h of h nearest x, with x = n₀h + p
    mid = composite.logical_not(composite.logical_or(small, big))
    xm = api.where(mid, a, 1.0)
    n0 = api.mul(composite.round(api.div(xm, 2 * _DAWSN_H)), 2.0)
    p = api.sub(xm, api.mul(n0, _DAWSN_H))
    total: Any = 0.0
    for i in range(_DAWSN_PAIRS):  # the terms n = ±(2i + 1), each its own exponential
        n = float(2 * i + 1)
        up = api.exp(api.neg(composite.square(api.sub(p, n * _DAWSN_H))))
        down = api.exp(api.neg(composite.square(api.add(p, n * _DAWSN_H))))
        pair = api.add(api.div(up, api.add(n0, n)), api.div(down, api.sub(n0, n)))
        total = api.add(total, pair)
    rybicki = api.mul(total, 1 / math.sqrt(math.pi))
    r = api.where(small, series, api.where(big, asym, rybicki))
    r = api.where(composite.isinf(a), 0.0, r)
    return _narrow(api.where(signbit(v), api.neg(r), api.where(composite.isnan(v), math.nan, r)), d)


_SICI_SWITCH = 4.0  # series below, the continued fraction of E₁(it) above
_SICI_SERIES = 14  # at t = 4 the 14th terms are below 1e-12
_SICI_DEPTH = 48


def sici(x: Any) -> tuple[Any, Any]:
    """The sine and cosine integrals ``Si(x) = ∫₀ˣ sin t / t dt`` and
    ``Ci(x) = C + log|x| + ∫₀^|x| (cos t - 1)/t dt`` (``C`` Euler's constant), as
    ``jax.scipy.special.sici``: their
    power series up to ``|x| = 4``, and above ``Ci(t) = -Re E₁(it)``, ``Si(t) = π/2 + Im
    E₁(it)`` with ``E₁``'s continued fraction ``e⁻ᶻ/(z + 1 - 1/(z + 3 - 4/(z + 5 - ⋯)))``
    evaluated in complex arithmetic at ``z = it`` from a fixed depth. ``Si`` is odd and
    ``Ci`` even (``Ci(x)`` for ``x < 0`` is the real part, as JAX's); ``Ci(0) = -inf``,
    ``Ci(-inf)`` NaN, as JAX's.

    >>> import pypto as pto
    >>> si, ci = sici(pto.tensor([0.5, 4.0, 20.0]))
    >>> si.numpy()
    array([0.4931074, 1.758203 , 1.5482417], dtype=float32)
    >>> ci.numpy()
    array([-0.17778407, -0.14098167,  0.04441982], dtype=float32)
    """
    (v,), d = _wide("sici", x)
    t = api.abs(v)
    small = api.less_equal(t, _SICI_SWITCH)
    ts = api.where(small, t, 1.0)
    t2 = api.mul(ts, ts)
    # Si: Σ (-1)ᵏ t²ᵏ⁺¹ / ((2k + 1)(2k + 1)!), Ci: C + log t + Σ (-1)ᵏ t²ᵏ / (2k (2k)!),
    # both nested in t² from their last terms
    si_acc: Any = 0.0
    ci_acc: Any = 0.0
    for k in range(_SICI_SERIES, 0, -1):
        si_acc = api.mul(api.sub(1.0 / math.factorial(2 * k + 1) / (2 * k + 1), si_acc), t2)
        ci_acc = api.mul(api.sub(1.0 / math.factorial(2 * k) / (2 * k), ci_acc), t2)
    si_small = api.mul(api.sub(1.0, si_acc), ts)
    ci_small = api.sub(api.add(api.log(ts), _EULER), ci_acc)
    # above 4: E₁(it) = e^(-it) / f, f evaluated from the deepest level in (re, im) pairs
    tb = api.where(composite.logical_or(small, composite.isinf(t)), 2 * _SICI_SWITCH, t)
    fr: Any = float(2 * _SICI_DEPTH + 1)
    fi: Any = tb
    for k in range(_SICI_DEPTH, 0, -1):
        q = api.div(float(k * k), api.add(api.mul(fr, fr), api.mul(fi, fi)))
        fr = api.sub(float(2 * k - 1), api.mul(q, fr))
        fi = api.add(tb, api.mul(q, fi))
    # (cos t - i sin t) / (fr + i fi)
    c, sn = api.cos(tb), api.sin(tb)
    den = api.add(api.mul(fr, fr), api.mul(fi, fi))
    er = api.div(api.sub(api.mul(c, fr), api.mul(sn, fi)), den)
    ei = api.div(api.neg(api.add(api.mul(sn, fr), api.mul(c, fi))), den)
    si_big = api.add(ei, math.pi / 2)
    ci_big = api.neg(er)
    si = api.where(small, si_small, api.where(composite.isinf(t), math.pi / 2, si_big))
    ci = api.where(small, ci_small, api.where(composite.isinf(t), 0.0, ci_big))
    ci = api.where(api.equal(t, 0.0), -math.inf, ci)
    si = api.where(signbit(v), api.neg(si), si)
    nan = composite.isnan(v)
    ci = api.where(composite.logical_or(nan, composite.isneginf(v)), math.nan, ci)
    si = api.where(nan, math.nan, si)
    return _narrow(si, d), _narrow(ci, d)


_SPENCE_TERMS = 30  # Li₂'s series Σ uᵏ/k² for |u| <= ½: 0.5³⁰/900 is below 1e-12


def _li2_small(u: Any) -> Any:
    """``Li₂(u) = Σₖ uᵏ / k²`` for ``|u| <= ½``, nested from its last term."""
    acc: Any = 0.0
    for k in range(_SPENCE_TERMS, 0, -1):
        acc = api.mul(api.add(acc, 1.0 / (k * k)), u)
    return acc


def spence(x: Any) -> Any:
    """Spence's function ``∫₁ˣ log t / (1 - t) dt = Li₂(1 - x)`` for ``x >= 0``, as
    ``jax.scipy.special.spence`` (NaN below 0 and at ``inf``, as JAX's). Every ``x`` is taken
    to the dilogarithm's series with ``|u| <= ½``: directly on ``[½, 3/2]``, through Euler's
    reflection below ½, Landen's identity on ``(3/2, 2]``, and the inversion and Landen's
    identity above 2. Differentiable: its derivative is ``log x / (1 - x)`` (JAX's is NaN).

    >>> import pypto as pto
    >>> spence(pto.tensor([0.0, 0.5, 1.0, 2.0, 1e10])).numpy()
    array([   1.644934 ,    0.5822405,    0.       ,   -0.822467 ,
           -266.7398   ], dtype=float32)
    """
    (v,), d = _wide("spence", x)
    pi2_6 = math.pi**2 / 6
    mid = composite.logical_and(api.greater_equal(v, 0.5), api.less_equal(v, 1.5))
    low = api.less(v, 0.5)
    high = api.greater(v, 2.0)
    # [½, 3/2]: the series in u = 1 - x
    r_mid = _li2_small(api.sub(1.0, api.where(mid, v, 1.0)))
    # (0, ½): Li₂(1 - x) = π²/6 - log(x) log(1 - x) - Li₂(x)
    vl = api.where(composite.logical_and(low, api.greater(v, 0.0)), v, 0.25)
    r_low = api.sub(
        api.sub(pi2_6, api.mul(api.log(vl), composite.log1p(api.neg(vl)))), _li2_small(vl)
    )
    # (3/2, 2]: Landen, Li₂(1 - x) = -Li₂((x - 1)/x) - ½ log² x
    vm = api.where(composite.logical_or(mid, composite.logical_or(low, high)), 1.75, v)
    lm = api.log(vm)
    r_land = api.sub(
        api.neg(_li2_small(api.div(api.sub(vm, 1.0), vm))), api.mul(api.mul(lm, lm), 0.5)
    )
    # (2, inf): the inversion, then Landen: -π²/6 - ½ log²(x - 1) + Li₂(1/x) + ½ log²(x/(x - 1))
    vh = api.where(composite.logical_and(high, composite.isfinite(v)), v, 4.0)
    l1 = api.log(api.sub(vh, 1.0))
    l2 = api.log(api.div(vh, api.sub(vh, 1.0)))
    r_high = api.add(
        api.sub(api.mul(api.mul(l1, l1), -0.5), pi2_6),
        api.add(_li2_small(api.div(1.0, vh)), api.mul(api.mul(l2, l2), 0.5)),
    )
    r = api.where(mid, r_mid, api.where(low, r_low, api.where(high, r_high, r_land)))
    r = api.where(api.equal(v, 0.0), pi2_6, r)
    bad = composite.logical_or(
        composite.logical_or(api.less(v, 0.0), composite.isnan(v)), composite.isposinf(v)
    )
    return _narrow(api.where(bad, math.nan, r), d)


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
    return api.add(lgamma(lo), _lgamma_diff(lo, hi))


def _lgamma_diff(lo: Any, hi: Any) -> Any:
    """``gammaln(hi) - gammaln(lo + hi)`` for ``lo <= hi``: from ``hi = 8`` up by Stirling's
    formula term by term, ``-(lo + hi - ½) log1p(lo/hi) - lo (log hi - 1)`` plus the
    difference of the remainders, so that it does not cancel for large ``hi``."""
    small = api.sub(lgamma(hi), lgamma(api.add(lo, hi)))
    big = api.where(api.less(hi, 8.0), 8.0, hi)  # each branch sees only its own inputs
    log1p_ab = composite.log1p(api.div(lo, big))
    diff = api.sub(
        api.sub(_stirling_rest(big), _stirling_rest(api.add(lo, big))),
        api.add(
            api.mul(api.sub(api.add(lo, big), 0.5), log1p_ab),
            api.mul(lo, api.sub(api.log(big), 1.0)),
        ),
    )
    return api.where(api.less(hi, 8.0), small, diff)


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


def poch(z: Any, m: Any) -> Any:
    """The Pochhammer symbol ``(z)ₘ = Γ(z + m) / Γ(z)``, 1 for ``m = 0``, as
    ``jax.scipy.special.poch``.

    >>> import pypto as pto
    >>> poch(pto.tensor([3.0, 0.5]), pto.tensor([2.0, 0.0])).numpy().round(4)
    array([12.,  1.], dtype=float32)
    """
    u, v = api.promote("poch", (z, m), inexact=True)
    return api.where(api.equal(v, 0.0), 1.0, api.div(gamma(api.add(u, v)), gamma(u)))


def comb(n: Any, k: Any, *, repetition: bool = False) -> Any:
    """The binomial coefficient ``n! / (k! (n - k)!)`` through ``gammaln``, 0 outside
    ``0 <= k <= n``; with ``repetition``, ``comb(n + k - 1, k)`` (1 for ``k = 0``), as
    ``jax.scipy.special.comb``.

    >>> import pypto as pto
    >>> comb(pto.tensor([5.0, 10.0, 3.0]), pto.tensor([2.0, 3.0, 4.0])).numpy().round(3)
    array([ 10., 120.,   0.], dtype=float32)
    """
    u, v = api.promote("comb", (n, k), inexact=True)
    if repetition:
        first = composite.logical_and(api.equal(v, 0.0), api.greater_equal(u, 0.0))
        return api.where(first, 1.0, comb(api.sub(api.add(u, v), 1.0), v))
    ok = composite.logical_and(
        composite.logical_and(api.less_equal(v, u), api.greater_equal(u, 0.0)),
        api.greater_equal(v, 0.0),
    )
    us, vs = api.where(ok, u, 0.0), api.where(ok, v, 0.0)
    logc = api.sub(
        api.sub(lgamma(api.add(us, 1.0)), lgamma(api.add(vs, 1.0))),
        lgamma(api.add(api.sub(us, vs), 1.0)),
    )
    return api.where(ok, api.exp(logc), 0.0)


def loggamma(x: Any) -> Any:
    """``log Γ(x)`` for positive ``x``, NaN elsewhere (real arguments), as
    ``jax.scipy.special.loggamma``.

    >>> import pypto as pto
    >>> loggamma(pto.tensor([5.0, -0.5])).numpy()
    array([3.1780548,       nan], dtype=float32)
    """
    (v,) = api.promote("loggamma", (x,), inexact=True)
    return api.where(api.greater(v, 0.0), lgamma(v), math.nan)


def _boxcox(name: str, x: Any, lmbda: Any, log: Any) -> Any:
    u, lam = api.promote(name, (x, lmbda), inexact=True)
    zero = api.equal(lam, 0.0)
    lx = log(u)
    safe = api.where(zero, 1.0, lam)
    return api.where(zero, lx, api.div(composite.expm1(api.mul(safe, lx)), safe))


def boxcox(x: Any, lmbda: Any) -> Any:
    """The Box-Cox transform ``(x^λ - 1) / λ`` (``expm1(λ log x) / λ``), ``log x`` at
    ``λ = 0``, as ``jax.scipy.special.boxcox``.

    >>> import pypto as pto
    >>> boxcox(pto.tensor([1.0, 4.0]), pto.tensor([0.5, 0.0])).numpy()
    array([0.       , 1.3862944], dtype=float32)
    """
    return _boxcox("boxcox", x, lmbda, api.log)


def boxcox1p(x: Any, lmbda: Any) -> Any:
    """``boxcox(1 + x, λ)`` without the rounding of ``1 + x``, as
    ``jax.scipy.special.boxcox1p``.

    >>> import pypto as pto
    >>> boxcox1p(pto.tensor([1e-8, 3.0]), pto.tensor([0.5, 0.0])).numpy()
    array([9.9999999e-09, 1.3862944e+00], dtype=float32)
    """
    return _boxcox("boxcox1p", x, lmbda, composite.log1p)


def erfcx(x: Any) -> Any:
    """The scaled complementary error function ``exp(x²) erfc(x)`` (real ``x``), as
    ``jax.scipy.special.erfcx``. For ``x >= 0`` the ``exp(-x²)`` of ``erfc``'s formula is
    left out rather than computed and divided away, so it is finite (``1/(x√π)``) however
    large ``x`` is; below 0 it is ``2 exp(x²) - erfcx(-x)``, which overflows with ``exp(x²)``.

    >>> import pypto as pto
    >>> erfcx(pto.tensor([0.0, 1.0, 1e4])).numpy()
    array([1.0000000e+00, 4.2758363e-01, 5.6418954e-05], dtype=float32)
    """
    (v,), d = _wide("erfcx", x)
    z = api.abs(v)
    t = api.div(1.0, api.add(api.mul(z, 0.5), 1.0))
    pos = api.mul(t, api.exp(_horner(t, _ERFC)))
    neg = api.sub(api.mul(api.exp(api.mul(v, v)), 2.0), pos)
    return _narrow(api.where(api.less(v, 0.0), neg, pos), d)


def bernoulli(n: int) -> Any:
    """The Bernoulli numbers ``B₀ … Bₙ`` (``B₁ = -½``), as ``jax.scipy.special.bernoulli``:
    computed exactly as fractions and rounded once to float32.

    >>> bernoulli(6).numpy()
    array([ 1.        , -0.5       ,  0.16666667,  0.        , -0.03333334,  0.        ,
            0.02380952], dtype=float32)
    """
    n = operator.index(n)
    if n < 0:
        raise ShapeError(f"n must be a non-negative integer, got {n}", op="bernoulli")
    out = bernoulli_numbers(n)  # B₁ = +½ there; scipy's is -½
    if n >= 1:
        out[1] = -out[1]
    return api.asvalue(np.array([float(b) for b in out], np.float32))


def i1(x: Any) -> Any:
    """The modified Bessel function of order 1, ``I₁(x) = exp(|x|) i1e(x)``, as
    ``jax.scipy.special.i1``; the exponential in two halves, so it is finite wherever ``I₁``
    is (JAX's overflows from 88.7 and is NaN at ±inf, where this is ±inf).

    >>> import pypto as pto
    >>> i1(pto.tensor([0.0, 1.0, -2.0])).numpy()
    array([ 0.       ,  0.565159 , -1.5906371], dtype=float32)
    """
    (v,), d = _wide("i1", x)
    half = api.exp(api.mul(api.abs(v), 0.5))
    r = api.mul(api.mul(i1e(v), half), half)
    return _narrow(api.where(composite.isinf(v), v, r), d)


_EULER = 0.57721566490153286061
_E1_CF_DEPTH = 30  # the continued fraction from x = 1 up: 1e-10 there at this depth
_EI_SERIES = 100  # Ei's series up to x = 40: its terms fall below float32's precision by then
_EI_SWITCH = 40.0


def _e1_positive(x: Any) -> Any:
    """``E₁(x)`` for ``x > 0``: its series below 1, the continued fraction
    ``e⁻ˣ / (x + 1 - 1/(x + 3 - 4/(x + 5 - …)))`` evaluated from a fixed depth above."""
    small = api.less(x, 1.0)
    xs = api.where(small, x, 0.5)
    term = api.neg(xs)  # (-x)ᵏ / k!, k = 1
    total = term
    for k in range(2, 20):
        term = api.mul(term, api.div(api.neg(xs), float(k)))
        total = api.add(total, api.div(term, float(k)))
    near = api.sub(api.neg(api.add(api.log(xs), _EULER)), total)
    return api.where(small, near, _en_fraction(1.0, api.where(small, 1.0, x)))


def _en_fraction(n: Any, x: Any) -> Any:
    """``Eₙ(x)`` for ``x >= 1`` from its continued fraction
    ``e⁻ˣ / (x + n - 1·n/(x + n + 2 - 2(n+1)/(x + n + 4 - …)))`` evaluated from a fixed depth
    (it converges faster as ``n`` grows). ``n`` a Python float (E₁: ``n = 1``) stays in the
    constants."""
    const = isinstance(n, float)
    xn = x if const else api.add(x, n)
    f = api.add(xn, float(2 * _E1_CF_DEPTH) + (n if const else 0.0))
    for k in range(_E1_CF_DEPTH, 0, -1):
        grow = k * (n + k - 1) if const else api.mul(api.add(n, float(k - 1)), float(k))
        base = api.add(xn, float(2 * k - 2) + (n if const else 0.0))
        f = api.sub(base, api.div(grow, f))
    return api.div(api.exp(api.neg(x)), f)


def exp1(x: Any) -> Any:
    """The exponential integral ``E₁(x) = ∫₁^∞ e^(-xt)/t dt`` for real ``x``: its series
    below 1 and its continued fraction above; ``inf`` at 0, NaN below. As
    ``jax.scipy.special.exp1``.

    >>> import pypto as pto
    >>> exp1(pto.tensor([0.5, 1.0, 10.0])).numpy()
    array([5.5977362e-01, 2.1938393e-01, 4.1569683e-06], dtype=float32)
    """
    (v,), d = _wide("exp1", x)
    pos = api.greater(v, 0.0)
    r = _e1_positive(api.where(pos, v, 1.0))
    r = api.where(composite.isposinf(v), 0.0, r)
    return _narrow(api.where(pos, r, api.where(api.equal(v, 0.0), math.inf, math.nan)), d)


def expi(x: Any) -> Any:
    """The exponential integral ``Ei(x)``, the principal value of ``∫₋∞ˣ eᵗ/t dt``: its
    series ``log x + Σ xᵏ/(k·k!)`` plus Euler's constant up to 40, its asymptotic
    expansion above, and ``-E₁(-x)`` below 0; ``-inf`` at 0. As ``jax.scipy.special.expi``.

    >>> import pypto as pto
    >>> expi(pto.tensor([-1.0, 0.5, 5.0])).numpy()
    array([-0.21938393,  0.45421994, 40.185276  ], dtype=float32)
    """
    (v,), d = _wide("expi", x)
    pos = api.greater(v, 0.0)
    xs = api.where(pos, api.minimum(v, _EI_SWITCH), 1.0)
    term = xs  # xᵏ / k!, k = 1
    total = term
    for k in range(2, _EI_SERIES):
        term = api.mul(term, api.div(xs, float(k)))
        total = api.add(total, api.div(term, float(k)))
    series = api.add(api.add(api.log(xs), _EULER), total)
    # above 40: eˣ/x Σ k!/xᵏ (its terms fall to 3e-11 by k = 12), eˣ in two halves so that it
    # stays finite as long as Ei is
    xb = api.where(api.greater(v, _EI_SWITCH), v, 2 * _EI_SWITCH)
    inv = api.div(1.0, xb)
    acc: Any = 1.0
    for k in range(12, 0, -1):
        acc = api.add(api.mul(api.mul(acc, inv), float(k)), 1.0)
    half = api.exp(api.mul(xb, 0.5))
    asym = api.mul(api.mul(api.mul(half, inv), acc), half)
    positive = api.where(api.greater(v, _EI_SWITCH), asym, series)
    negative = api.neg(
        _e1_positive(api.where(pos, 1.0, api.where(api.less(v, 0.0), api.neg(v), 1.0)))
    )
    out = api.where(pos, positive, api.where(api.equal(v, 0.0), -math.inf, negative))
    out = api.where(composite.isneginf(v), 0.0, api.where(composite.isposinf(v), math.inf, out))
    return _narrow(api.where(composite.isnan(v), math.nan, out), d)


_EN_SERIES = 14  # terms of Eₙ's series up to x = 1: the last is below 1/14! ≈ 1e-11
_EN_SWITCH = 1.0


def _expn_positive(n: Any, x: Any) -> Any:
    """``Eₙ(x)`` for integer ``n ≥ 2`` and ``x > 0``. Up to ``x = _EN_SWITCH`` the series
    ``(-x)ⁿ⁻¹/(n-1)! (ψ(n) - log x) - Σₖ≠ₙ₋₁ (-x)ᵏ / ((k - n + 1) k!)``; above,
    :func:`_en_fraction`. Where the series has the
    term ``k = n - 1``, its ``(-x)ᵏ/k!`` and ``ψ(n)`` (the harmonic number ``H(n-1)`` less
    Euler's constant) come from the series' own products and sums (``lgamma`` and
    ``digamma`` are ≈5e-7 off at small integers); above, from ``lgamma`` and ``digamma``,
    whose terms are then small."""
    small = api.less_equal(x, _EN_SWITCH)
    xs = api.where(small, x, 0.5)
    m = api.sub(n, 1.0)  # the term k = n - 1 is the logarithmic one
    total: Any = 0.0
    term: Any = 1.0  # (-x)ᵏ / k!
    harmonic = 0.0  # H(k)
    power: Any = 0.0  # (-x)ⁿ⁻¹ / (n-1)!, while n - 1 is one of the k
    psi: Any = 0.0  # ψ(n), likewise
    for k in range(_EN_SERIES):
        if k:
            term = api.mul(term, api.div(api.neg(xs), float(k)))
            harmonic += 1.0 / k
        den = api.sub(float(k), m)
        at = api.equal(den, 0.0)
        total = api.add(total, api.where(at, 0.0, api.div(term, api.where(at, 1.0, den))))
        power = api.where(at, term, power)
        psi = api.where(at, harmonic - _EULER, psi)
    late = api.greater_equal(m, float(_EN_SERIES))
    ml = api.where(late, m, float(_EN_SERIES))
    odd = api.sub(ml, api.mul(composite.floor(api.mul(ml, 0.5)), 2.0))
    far_power = api.mul(
        api.sub(1.0, api.mul(odd, 2.0)),
        api.exp(api.sub(api.mul(ml, api.log(xs)), lgamma(api.add(ml, 1.0)))),
    )
    power = api.where(late, far_power, power)
    psi = api.where(late, digamma(api.add(ml, 1.0)), psi)
    near = api.sub(api.mul(power, api.sub(psi, api.log(xs))), total)
    return api.where(small, near, _en_fraction(n, api.where(small, 2.0, x)))


def expn(n: Any, x: Any) -> Any:
    """The generalized exponential integral ``Eₙ(x) = ∫₁^∞ e^(-xt)/tⁿ dt`` of integer order
    ``n ≥ 0``, as ``jax.scipy.special.expn`` (``scipy.special.expn``): ``n`` is truncated
    toward zero, as scipy truncates its integer order; NaN for negative ``n`` or ``x``;
    ``inf`` at ``x = 0`` for ``n ≤ 1`` and ``1/(n - 1)`` above. ``E₀(x) = e⁻ˣ/x``, ``E₁`` is
    :func:`exp1`; from ``n = 2`` the series up to ``x = 1`` and the continued fraction
    above. Differentiable in ``x`` (``-Eₙ₋₁``); ``n``'s cotangent is zero, as JAX's.

    Differences from JAX (docs/numerics.md): JAX's ``Eₙ(0)`` is ``1/n`` (``1/(n - 1)`` is
    right), its non-integer orders give NaN up to ``x = 1`` and ``E_p`` of the real order
    above, and it is not NaN for a negative order above ``x = 1``.

    >>> import pypto as pto
    >>> expn(pto.tensor([0.0, 1.0, 2.0, 5.0]), pto.tensor([1.0, 1.0, 0.5, 3.0])).numpy()
    array([0.36787942, 0.21938393, 0.32664382, 0.00669798], dtype=float32)
    """
    (nv, v), d = _wide("expn", n, x)
    nv = api.stop_gradient(trunc(nv))
    bad = composite.logical_or(
        composite.logical_or(api.less(nv, 0.0), api.less(v, 0.0)),
        composite.logical_or(composite.isnan(nv), composite.isnan(v)),
    )
    pos = api.greater(v, 0.0)
    xs = api.where(pos, v, 1.0)
    high = api.greater_equal(nv, 2.0)
    r = _expn_positive(api.where(high, nv, 2.0), api.where(composite.isposinf(xs), 1.0, xs))
    r = api.where(
        high, r, api.where(api.equal(nv, 1.0), _e1_positive(xs), api.div(api.exp(api.neg(xs)), xs))
    )
    zero = api.where(high, api.div(1.0, api.sub(api.where(high, nv, 2.0), 1.0)), math.inf)
    out = api.where(pos, api.where(composite.isposinf(v), 0.0, r), zero)
    return _narrow(api.where(bad, math.nan, out), d)


_FRESNEL_SWITCH = 1.0  # the power series below, the continued fraction above
_FRESNEL_SERIES = 10  # terms of the series up to 1: the last is below 1e-12
_FRESNEL_DEPTH = 30  # the continued fraction's levels: 8e-9 at x = 1, 1e-14 by x = 2
_FRESNEL_HALF = 2.0**24  # from here x is an even integer: x² is a multiple of 4


def _quarter_turns(x: Any) -> Any:
    """``x² mod 4`` for ``x >= 0``, so that ``sin(π x²/2)`` keeps its precision for large
    ``x``: ``x`` splits into two halves of 12 bits (Veltkamp), whose products are exact in
    float32, and each product is reduced mod 4 before the sum. 0 from 2²⁴, where ``x`` is
    an even integer."""
    big = api.greater_equal(x, _FRESNEL_HALF)
    xs = api.where(big, 0.0, x)
    c = api.mul(xs, 4097.0)
    hi = api.sub(c, api.sub(c, xs))
    lo = api.sub(xs, hi)
    r = api.add(
        api.add(api.fmod(api.mul(hi, hi), 4.0), api.fmod(api.mul(api.mul(hi, lo), 2.0), 4.0)),
        api.mul(lo, lo),
    )
    return api.fmod(r, 4.0)


def fresnel(x: Any) -> tuple[Any, Any]:
    """The Fresnel integrals ``S(x) = ∫₀ˣ sin(πt²/2) dt`` and ``C(x) = ∫₀ˣ cos(πt²/2) dt``,
    as ``jax.scipy.special.fresnel``: their power series up to ``|x| = 1``; above, from
    ``C + iS = (1 + i)/2 · erf(√π (1 - i) x / 2)`` with ``erfc``'s continued fraction
    ``√π e^(z²) erfc(z) = 2z/(2z² + 1 - 1·2/(2z² + 5 - 3·4/(2z² + 9 - …)))`` evaluated in
    complex arithmetic (pairs of float32) from a fixed depth, and the phase ``π x²/2``
    taken from ``x² mod 4`` exactly (:func:`_quarter_turns`), so large ``x`` keep float32's
    precision. Both odd; ±0.5 at ±inf. Differentiable: ``S' = sin(πx²/2)``,
    ``C' = cos(πx²/2)``.

    >>> import pypto as pto
    >>> s, c = fresnel(pto.tensor([0.5, 2.0, 10.0]))
    >>> s.numpy()
    array([0.06473243, 0.34341568, 0.46817   ], dtype=float32)
    >>> c.numpy()
    array([0.49234423, 0.4882534 , 0.49989867], dtype=float32)
    """
    (v,), d = _wide("fresnel", x)
    t = api.abs(v)
    small = api.less_equal(t, _FRESNEL_SWITCH)
    ts = api.where(small, t, 0.5)
    t4 = api.mul(api.mul(ts, ts), api.mul(ts, ts))
    # S = x³ Σ (-1)ⁿ (π/2)²ⁿ⁺¹ x⁴ⁿ / ((2n+1)! (4n+3)), C = x Σ (-1)ⁿ (π/2)²ⁿ x⁴ⁿ / ((2n)! (4n+1))
    s_acc: Any = 0.0
    c_acc: Any = 0.0
    for n in range(_FRESNEL_SERIES - 1, -1, -1):
        sign = -1.0 if n % 2 else 1.0
        s_acc = api.add(
            api.mul(s_acc, t4),
            sign * (math.pi / 2) ** (2 * n + 1) / math.factorial(2 * n + 1) / (4 * n + 3),
        )
        c_acc = api.add(
            api.mul(c_acc, t4),
            sign * (math.pi / 2) ** (2 * n) / math.factorial(2 * n) / (4 * n + 1),
        )
    s_small = api.mul(api.mul(api.mul(s_acc, ts), ts), ts)
    c_small = api.mul(c_acc, ts)
    # above 1: with 2z² = -iπx², f = 2z² + 1 - 1·2/(2z² + 5 - …) in (re, im) pairs
    far = api.greater_equal(t, _FRESNEL_HALF)
    tb = api.where(composite.logical_or(small, far), 2.0, t)
    ai = api.mul(api.mul(tb, tb), -math.pi)
    fr: Any = float(4 * _FRESNEL_DEPTH + 1)
    fi: Any = ai
    for k in range(_FRESNEL_DEPTH, 0, -1):
        q = api.div(float((2 * k - 1) * 2 * k), api.add(api.mul(fr, fr), api.mul(fi, fi)))
        fr = api.sub(float(4 * k - 3), api.mul(q, fr))
        fi = api.add(ai, api.mul(q, fi))
    # M = e^(iπx²/2) · 2z / (f √π), 2z = √π x (1 - i): M = e^(iθ) x (1 - i) / f
    den = api.add(api.mul(fr, fr), api.mul(fi, fi))
    kr = api.div(api.mul(tb, api.sub(fr, fi)), den)  # x (1 - i) / f
    ki = api.div(api.neg(api.mul(tb, api.add(fr, fi))), den)
    theta = api.mul(_quarter_turns(tb), math.pi / 2)
    cs, sn = api.cos(theta), api.sin(theta)
    mr = api.sub(api.mul(cs, kr), api.mul(sn, ki))
    mi = api.add(api.mul(cs, ki), api.mul(sn, kr))
    # C + iS = (1 + i)/2 · (1 - M)
    c_big = api.mul(api.add(api.sub(1.0, mr), mi), 0.5)
    s_big = api.mul(api.sub(api.sub(1.0, mr), mi), 0.5)
    s_out = api.where(small, s_small, api.where(far, 0.5, s_big))
    c_out = api.where(small, c_small, api.where(far, 0.5, c_big))
    neg = api.less(v, 0.0)
    s_out = api.where(neg, api.neg(s_out), s_out)
    c_out = api.where(neg, api.neg(c_out), c_out)
    nan = composite.isnan(v)
    return _narrow(api.where(nan, math.nan, s_out), d), _narrow(api.where(nan, math.nan, c_out), d)


_JN_SERIES = 12  # terms of Jₙ's power series up to |z| = 2: 1/(12!)² is below 1e-17
_JN_SWITCH = 2.0  # the series up to here, Miller's recurrence above
_JN_HANKEL = 12.0  # Hankel's expansion of J₀ and J₁ from here (and Miller's below)
_JN_HANKEL_TERMS = 12  # its terms at 12: the last is about 2e-9
_JN_RESCALE = 1e15  # Miller's recurrence rescales its values past this


def _hankel_j01(t: Any) -> tuple[Any, Any]:
    """``J₀(t)`` and ``J₁(t)`` for ``t >= 12`` from Hankel's expansion
    ``√(2/(πt)) (P cos χ - Q sin χ)``, ``χ = t - (n/2 + 1/4)π`` (order ``n``), with
    ``cos χ`` and ``sin χ`` from ``cos t`` and ``sin t`` (``t`` itself is exact; ``t - π/4``
    would round)."""
    inv = api.div(1.0, t)
    out = []
    c, sn = api.cos(t), api.sin(t)
    for nu in (0, 1):
        mu = 4.0 * nu * nu
        a = [1.0]  # aₖ = (μ - 1²)(μ - 3²)…(μ - (2k-1)²) / (k! 8ᵏ)
        for k in range(1, _JN_HANKEL_TERMS):
            a.append(a[-1] * (mu - (2 * k - 1) ** 2) / (k * 8.0))
        # P = Σ (-1)ᵏ a₂ₖ t⁻²ᵏ, Q = Σ (-1)ᵏ a₂ₖ₊₁ t⁻²ᵏ⁻¹, nested in t⁻²
        p: Any = 0.0
        q: Any = 0.0
        inv2 = api.mul(inv, inv)
        for k in range((_JN_HANKEL_TERMS - 1) // 2, -1, -1):
            sign = -1.0 if k % 2 else 1.0
            p = api.add(api.mul(p, inv2), sign * a[2 * k])
            if 2 * k + 1 < _JN_HANKEL_TERMS:
                q = api.add(api.mul(q, inv2), sign * a[2 * k + 1])
        q = api.mul(q, inv)
        # cos χ, sin χ: χ = t - π/4 (J₀), t - 3π/4 (J₁)
        if nu == 0:
            cx, sx = api.add(c, sn), api.sub(sn, c)
        else:
            cx, sx = api.sub(sn, c), api.neg(api.add(sn, c))
        amp = api.sqrt(api.div(1.0 / math.pi, t))  # √(2/(πt)) / √2
        out.append(api.mul(amp, api.sub(api.mul(p, cx), api.mul(q, sx))))
    return out[0], out[1]


def bessel_jn(z: Any, *, v: int, n_iter: int = 50) -> Any:
    """The Bessel functions of the first kind ``J₀(z) … J_v(z)`` of real ``z``, as
    ``jax.scipy.special.bessel_jn``: an array of shape ``(v + 1, *z.shape)``. Up to
    ``|z| = 2`` each order's power series; up to ``max(v, 12)`` Miller's backward recurrence
    from an order far enough above (rescaled as it grows), normalized by
    ``J₀ + 2 Σ J₂ₖ = 1`` up to 12 and by Hankel's ``J₀`` or ``J₁`` above; beyond, Hankel's
    expansion of ``J₀`` and ``J₁`` and the upward recurrence, stable there since every order
    is below ``|z|``. ``J_n(-z) = (-1)ⁿ J_n(z)``; 0 at ±inf. ``n_iter`` is accepted for
    JAX's signature: the start of Miller's recurrence is chosen from ``v`` instead (in
    float32 JAX's default of 50 is NaN below about ``z = 4`` and 1e-5 off from 38).

    >>> import pypto as pto
    >>> bessel_jn(pto.tensor([0.5, 5.0, 30.0]), v=2).numpy()
    array([[ 0.9384698 , -0.17759681, -0.08636799],
           [ 0.24226846, -0.3275791 , -0.11875106],
           [ 0.03060402,  0.04656517,  0.07845125]], dtype=float32)
    """
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
        raise DTypeError(
            f"bessel_jn: the order v must be a non-negative int, got {v!r}",
            op="bessel_jn",
            hint="pass v=3 for J₀ … J₃",
        )
    del n_iter  # (the recurrence's start depends on v, see above)
    v = int(v)
    (w,), d = _wide("bessel_jn", z)
    t = api.abs(w)
    # |z| <= 2: Jₙ = Σₖ (-1)ᵏ (t/2)²ᵏ⁺ⁿ / (k! (n + k)!), nested in (t/2)²
    low = api.less_equal(t, _JN_SWITCH)
    ts = api.where(low, t, 1.0)
    h = api.mul(ts, 0.5)
    h2 = api.mul(h, h)
    series = []
    hn: Any = 1.0  # (t/2)ⁿ
    for n in range(v + 1):
        acc: Any = 0.0
        for k in range(_JN_SERIES - 1, -1, -1):
            sign = -1.0 if k % 2 else 1.0
            acc = api.add(api.mul(acc, h2), sign / (math.factorial(k) * math.factorial(n + k)))
        series.append(api.mul(acc, hn))
        hn = api.mul(hn, h)
    # Miller: f_{k-1} = (2k/t) f_k - f_{k+1} from f_{M+1} = 0, f_M = 1
    top = max(v, int(_JN_HANKEL))
    start = top + 20 + 3 * math.ceil(top ** (1 / 3))
    tm = api.where(low, 2 * _JN_SWITCH, api.minimum(t, float(top)))
    inv = api.div(1.0, tm)
    f1: Any = api.mul(tm, 0.0)
    f0: Any = api.add(f1, 1.0)
    total: Any = f1  # 2 Σ f₂ₖ, k >= 1
    shifts: Any = f1  # rescalings so far
    kept: dict[int, tuple[Any, Any]] = {}  # order -> (f, rescalings when it was kept)
    for k in range(start, 0, -1):
        if k <= v:
            kept[k] = (f0, shifts)
        if k % 2 == 0:
            total = api.add(total, api.mul(f0, 2.0))
        fm = api.sub(api.mul(api.mul(inv, 2.0 * k), f0), f1)
        big = api.greater(api.abs(fm), _JN_RESCALE)
        sc = api.where(big, 1.0 / _JN_RESCALE, 1.0)
        fm, f0, total = api.mul(fm, sc), api.mul(f0, sc), api.mul(total, sc)
        shifts = api.add(shifts, api.where(big, 1.0, 0.0))
        f1, f0 = f0, fm
    kept[0] = (f0, shifts)
    # values kept before the last rescalings, in the final units
    raw = [
        api.mul(f, api.exp(api.mul(api.sub(shifts, at), -math.log(_JN_RESCALE))))
        for f, at in (kept[n] for n in range(v + 1))
    ]
    tb = api.where(api.greater(t, _JN_HANKEL), t, 2 * _JN_HANKEL)
    tb = api.where(composite.isinf(tb), 2 * _JN_HANKEL, tb)
    j0, j1 = _hankel_j01(tb)
    # the normalization: the sum rule up to 12, above J₀ or J₁, whichever is larger
    by_sum = api.div(1.0, api.add(raw[0], total))
    if v:
        use0 = api.greater_equal(api.abs(j0), api.abs(j1))
        by_j = api.where(use0, api.div(j0, raw[0]), api.div(j1, raw[1]))
    else:
        by_j = api.div(j0, raw[0])
    norm = api.where(api.greater(tm, _JN_HANKEL), by_j, by_sum)
    miller = [api.mul(r, norm) for r in raw]
    # beyond max(v, 12): J₀, J₁ and Jₙ₊₁ = (2n/t) Jₙ - Jₙ₋₁
    upward = [j0, j1]
    tinv = api.div(1.0, tb)
    for n in range(1, v):
        upward.append(api.sub(api.mul(api.mul(tinv, 2.0 * n), upward[n]), upward[n - 1]))
    out = []
    for n in range(v + 1):
        r = api.where(
            low,
            series[n],
            api.where(api.less_equal(t, float(top)), miller[n], upward[n]),
        )
        r = api.where(composite.isinf(t), 0.0, r)
        if n % 2:
            r = api.where(api.less(w, 0.0), api.neg(r), r)
        out.append(api.where(composite.isnan(w), math.nan, r))
    return _narrow(composite.stack(out, axis=0), d)


_OWENS_NODES = 24  # Gauss-Legendre nodes over the integral's range
_OWENS_SPAN = 8.0  # the range stops at h·x = 8: beyond, e^(-h²x²/2) is below 1e-14


def _owens_small(h: Any, a: Any) -> Any:
    """``T(h, a)`` for ``h >= 0`` and ``0 <= a <= 1``: ``∫₀ᵃ e^(-h²(1+x²)/2)/(1+x²) dx / 2π``
    by Gauss-Legendre over ``[0, min(a, 8/h)]`` (the integrand's scale is ``1/h``; past
    ``h·x = 8`` it has fallen by e⁻³²)."""
    b = api.minimum(a, api.div(_OWENS_SPAN, api.maximum(h, 1e-30)))
    nodes, weights = np.polynomial.legendre.leggauss(_OWENS_NODES)
    h2 = api.mul(api.mul(h, h), -0.5)
    acc: Any = 0.0
    for xi, wi in zip(nodes.tolist(), weights.tolist(), strict=True):
        x = api.mul(b, (1.0 + xi) / 2)
        one = api.add(api.mul(x, x), 1.0)
        acc = api.add(acc, api.div(api.mul(api.exp(api.mul(h2, one)), wi), one))
    return api.mul(acc, api.mul(b, 0.25 / math.pi))


def owens_t(h: Any, a: Any) -> Any:
    """Owen's T function ``T(h, a) = ∫₀ᵃ e^(-h²(1+x²)/2)/(1+x²) dx / 2π``, as
    ``jax.scipy.special.owens_t``: even in ``h``, odd in ``a``. For ``|a| <= 1`` the integral
    by Gauss-Legendre quadrature over ``[0, min(|a|, 8/|h|)]`` (24 nodes); above, Owen's
    identity ``T(h, a) = Q(h)/2 + Q(ah)/2 - Q(h) Q(ah) - T(ah, 1/a)`` with the upper normal
    tails ``Q`` (no cancellation as ``h`` grows). ``T(h, ±inf) = ±Q(|h|)/2``, and
    ``T(0, ±inf) = ±1/4`` (JAX's is NaN there). Differentiable in both arguments.

    >>> import pypto as pto
    >>> owens_t(pto.tensor([0.0, 1.0, 2.0, 5.0]), pto.tensor([1.0, 1.0, 3.0, 0.3])).numpy()
    array([1.2500000e-01, 6.6741891e-02, 1.1375064e-02, 1.2609124e-07],
          dtype=float32)
    """
    (hv, av), d = _wide("owens_t", h, a)
    t = api.abs(hv)
    s = api.abs(av)
    big = api.greater(s, 1.0)
    inv = api.div(1.0, api.where(big, s, 2.0))  # 1/a for a > 1, 0 at inf
    small = _owens_small(t, api.where(big, 1.0, s))
    # a > 1: T(h, a) = Q(h)/2 + Q(ah)/2 - Q(h) Q(ah) - T(ah, 1/a)
    ah = api.mul(t, api.where(big, s, 1.0))
    ah = api.where(composite.isnan(ah), 0.0, ah)  # h = 0 at a = inf
    qh = ndtr(api.neg(t))
    qah = ndtr(api.neg(ah))
    mirror = _owens_small(ah, inv)
    large = api.sub(api.add(api.mul(qh, 0.5), api.mul(qah, 0.5)), api.add(api.mul(qh, qah), mirror))
    out = api.where(big, large, small)
    out = api.where(signbit(av), api.neg(out), out)
    nan = composite.logical_or(composite.isnan(hv), composite.isnan(av))
    return _narrow(api.where(nan, math.nan, out), d)
