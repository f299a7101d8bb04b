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
from pypto.ops.numpy_lib import _narrow, _wide
from pypto.ops.special import bernoulli_numbers

gammaln = lgamma

__all__ = [
    "bernoulli",
    "beta",
    "betaln",
    "boxcox",
    "boxcox1p",
    "comb",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp1",
    "expi",
    "expit",
    "factorial",
    "gamma",
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
    "poch",
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
    xb = api.where(small, 1.0, x)
    f = api.add(xb, float(2 * _E1_CF_DEPTH + 1))
    for k in range(_E1_CF_DEPTH, 0, -1):
        f = api.sub(api.add(xb, float(2 * k - 1)), api.div(float(k * k), f))
    far = api.div(api.exp(api.neg(xb)), f)
    return api.where(small, near, far)


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
