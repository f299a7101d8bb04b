"""Special functions of ``jax.scipy.special`` and ``jax.lax``, as composites over the core ops.

``lgamma`` and ``digamma`` are Lanczos' approximation (g = 7, nine terms, the coefficients of
Godfrey's table that XLA uses too) with the reflection formula below 1/2; ``digamma`` is the
derivative of that approximation, so ``grad(lgamma)`` is ``digamma`` up to rounding, as in
JAX. ``erf_inv`` is Giles' single-precision polynomial in ``w = -log(1 - x²)`` (as XLA's), and
``ndtri`` evaluates the same polynomials from ``p`` itself, so the tails keep their digits
(``2p - 1`` would round them away). ``log_ndtr`` takes the logarithm of ``erfc``'s formula
term by term, so it stays finite far into the lower tail, where ``ndtr`` underflows.
``zeta`` is the Hurwitz zeta by Euler-Maclaurin summation, and ``polygamma`` of order ``n >= 1``
is ``(-1)ⁿ⁺¹ n! ζ(n + 1, x)``.

The transcendental ones run in float32 and are rounded once (float16 and bfloat16 in, the same
dtype out; integers and bools give float32); ``xlogy``, ``entr`` and their relatives compute
op by op in the operands' dtype, as JAX's do. All are built from ops the vector unit has, so
they fuse and compile for the NPU like any other elementwise chain. Gradients come from the
decomposition: each branch sees only inputs valid for it (``where`` in front of a pole), so
an unused branch never sends a NaN back. ``ndtri``'s far tail takes Newton steps, so there
the gradient is that of the steps, which equals the true derivative to float32 precision.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import jax
import jax.numpy as jnp

from pypto import dtypes as dt
from pypto.core.errors import DTypeError
from pypto.ops import api, composite
from pypto.ops.activations import _ERFC, _erfc32, _horner
from pypto.ops.composite import _composite
from pypto.ops.numpy_lib import _narrow, _wide, i0e_series

# Lanczos' approximation, g = 7: Γ(z + 1) = √(2π) (z + g + ½)^(z + ½) e^-(z + g + ½) A(z),
# A(z) = c₀ + Σᵢ cᵢ / (z + i)
_G = 7.0
_C0 = 0.99999999999980993227684700473478
_LANCZOS = (
    676.520368121885098567009190444019,
    -1259.13921672240287047156078755283,
    771.3234287776530788486528258894,
    -176.61502916214059906584551354,
    12.507343278686904814458936853,
    -0.13857109526572011689554707,
    9.984369578019570859563e-6,
    1.50563273514931155834e-7,
)
_LOG_G_HALF = math.log(_G + 0.5)
_SQRT2 = math.sqrt(2.0)
_NDTRI_TAIL_W = 14.5  # p ≈ 1.3e-7: Giles' polynomials are fitted up to float32's w ≈ 16
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011): single precision,
# in w = -log(1 - x²), below and above w = 5; highest power first
_ERFINV_LOW = (
    2.81022636e-08,
    3.43273939e-07,
    -3.5233877e-06,
    -4.39150654e-06,
    0.00021858087,
    -0.00125372503,
    -0.00417768164,
    0.246640727,
    1.50140941,
)
_ERFINV_HIGH = (
    -0.000200214257,
    0.000100950558,
    0.00134934322,
    -0.00367342844,
    0.00573950773,
    -0.0076224613,
    0.00943887047,
    1.00167406,
    2.83297682,
)


def _in_float32(fn: Any) -> Any:
    """JAX's ``fn``, which takes float32 and float64 only, on any real dtype: evaluated in
    float32 and rounded once to the promoted dtype (integers and bools give float32)."""

    def ref(x: Any) -> Any:
        x = jnp.asarray(x)
        d = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32
        return fn(x.astype(jnp.float32)).astype(d)

    ref.__name__ = fn.__name__
    return ref


def _poly(v: Any, coefs: tuple[float, ...]) -> Any:
    """Horner's rule, highest power first."""
    return _horner(v, coefs[::-1])


def _reflected(v: Any) -> tuple[Any, Any]:
    """``x < ½`` and ``z``: ``x - 1`` where the series applies itself, ``-x`` (that is,
    ``(1 - x) - 1``) where the reflection formula takes it to ``1 - x``."""
    reflect = api.less(v, 0.5)
    return reflect, api.where(reflect, api.neg(v), api.sub(v, 1.0))


def _log_t(z: Any) -> tuple[Any, Any]:
    """``t = z + g + ½`` and ``log t``, the latter as ``log(g + ½) + log1p(z / (g + ½))``
    (accurate where ``z`` is small)."""
    t = api.add(z, _G + 0.5)
    return t, api.add(composite.log1p(api.div(z, _G + 0.5)), _LOG_G_HALF)


def _sin_pi_reduced(v: Any) -> Any:
    """``|sin(πx)|`` from ``x``'s distance to the nearest integer: exact zeros at integers
    and no loss of digits for large ``|x|``."""
    a = api.abs(v)
    frac = api.sub(a, composite.floor(a))
    r = api.where(api.greater(frac, 0.5), api.sub(1.0, frac), frac)
    return api.sin(api.mul(r, math.pi))


def _lgamma32(v: Any) -> Any:
    reflect, z = _reflected(v)
    inf = composite.isinf(v)
    z = api.where(inf, 1.0, z)  # ±inf: +inf below, without inf/inf on the way
    a = _C0
    for i, c in enumerate(_LANCZOS):
        a = api.add(api.div(c, api.add(z, float(i + 1))), a)
    t, log_t = _log_t(z)
    # (z + ½) log t - t, as XLA writes it: (z + ½ - t / log t) log t
    log_y = api.add(
        api.add(api.mul(api.sub(api.add(z, 0.5), api.div(t, log_t)), log_t), _HALF_LOG_2PI),
        api.log(a),
    )
    # lgamma(x) = log π - log|sin πx| - lgamma(1 - x); only reflected inputs reach the sine
    # (elsewhere its zeros at the integers would send NaN back through the logarithm)
    log_sin = api.log(_sin_pi_reduced(api.where(reflect, v, 0.5)))
    pole = composite.isinf(log_sin)  # 0, -1, -2, ...: +inf
    refl = api.sub(api.sub(math.log(math.pi), api.where(pole, 0.0, log_sin)), log_y)
    out = api.where(reflect, api.where(pole, math.inf, refl), log_y)
    return api.where(inf, math.inf, out)


@_composite(
    "lgamma", "log|Γ(x)|, elementwise (jax.lax.lgamma, scipy's gammaln)", jax.scipy.special.gammaln
)
def lgamma(x: Any) -> Any:
    """``log|Γ(x)|``: Lanczos' approximation, reflected below ½ (``jax.lax.lgamma``,
    ``pto.scipy.special.gammaln``). ``+inf`` at 0, the negative integers and ±inf; integers
    give float32.

    >>> import pypto as pto
    >>> pto.lgamma(pto.tensor([0.5, 1.0, 5.0, -0.5])).numpy().round(5)
    array([0.57237, 0.     , 3.17805, 1.26551], dtype=float32)
    """
    (v,), d = _wide("lgamma", x)
    return _narrow(_lgamma32(v), d)


def _digamma32(v: Any) -> Any:
    reflect, z = _reflected(v)
    num, den = 0.0, _C0
    for i, c in enumerate(_LANCZOS):
        zi = api.add(z, float(i + 1))
        q = api.div(c, zi)
        den = api.add(q, den)
        num = api.sub(num, api.div(q, zi))
    t, log_t = _log_t(z)
    y = api.sub(api.add(log_t, api.div(num, den)), api.div(_G, t))
    # ψ(x) = ψ(1 - x) - π cot(πx), with x reduced to [-½, ½) (cot has period 1); only the
    # reflected inputs reach the cotangent, whose poles would send NaN back
    r = api.where(reflect, v, 0.25)
    r = api.sub(r, composite.floor(api.add(r, 0.5)))
    pr = api.mul(r, math.pi)
    refl = api.sub(y, api.div(api.mul(api.cos(pr), math.pi), api.sin(pr)))
    out = api.where(reflect, refl, y)
    pole = composite.logical_and(api.less_equal(v, 0.0), api.equal(v, composite.floor(v)))
    return api.where(pole, math.nan, out)


@_composite("digamma", "ψ(x) = d/dx log Γ(x), elementwise", jax.scipy.special.digamma)
def digamma(x: Any) -> Any:
    """The digamma function ``ψ(x) = Γ'(x)/Γ(x)``: the derivative of :func:`lgamma`'s
    approximation, reflected below ½ (``jax.lax.digamma``, ``pto.scipy.special.digamma``).
    NaN at 0 and the negative integers, as JAX's.

    >>> import pypto as pto
    >>> pto.digamma(pto.tensor([1.0, 2.0, 0.5])).numpy().round(5)
    array([-0.57722,  0.42278, -1.96351], dtype=float32)
    """
    (v,), d = _wide("digamma", x)
    return _narrow(_digamma32(v), d)


def _erfinv_w(x: Any, w: Any) -> Any:
    """``erf⁻¹(x)`` given ``w = -log(1 - x²)`` (computed by the caller as accurately as it
    can): Giles' polynomials, each fed only the ``w`` of its own range."""
    low = api.less(w, 5.0)
    p_low = _poly(api.sub(api.where(low, w, 2.5), 2.5), _ERFINV_LOW)
    p_high = _poly(api.sub(api.sqrt(api.where(low, 9.0, w)), 3.0), _ERFINV_HIGH)
    return api.mul(api.where(low, p_low, p_high), x)


@_composite("erf_inv", "the inverse error function, elementwise", jax.scipy.special.erfinv)
def erf_inv(x: Any) -> Any:
    """The inverse of :func:`pto.erf` on ``(-1, 1)``: Giles' single-precision polynomials in
    ``w = -log(1 - x²)`` (``jax.lax.erf_inv``, ``pto.scipy.special.erfinv``). ``±inf`` at
    ±1, NaN outside ``[-1, 1]``.

    >>> import pypto as pto
    >>> pto.erf_inv(pto.tensor([0.0, 0.5, -0.9])).numpy().round(5)
    array([ 0.     ,  0.47694, -1.16309], dtype=float32)
    """
    (v,), d = _wide("erf_inv", x)
    edge = api.equal(api.abs(v), 1.0)
    vs = api.where(edge, 0.0, v)  # at ±1 the logarithm's pole would send NaN back
    w = api.neg(composite.log1p(api.neg(api.mul(vs, vs))))
    ends = api.where(api.greater(v, 0.0), math.inf, -math.inf)
    out = api.where(edge, ends, _erfinv_w(vs, w))
    return _narrow(out, d)


@_composite(
    "ndtri",
    "the inverse of the standard normal CDF, elementwise",
    _in_float32(jax.scipy.special.ndtri),
)
def ndtri(p: Any) -> Any:
    """The quantile function of the standard normal distribution, ``√2 erf⁻¹(2p - 1)``
    (``jax.scipy.special.ndtri``). Giles' polynomials take ``1 - (2p - 1)² = 4p(1 - p)``
    formed from ``p`` itself; below ``p ≈ 1.3e-7``, beyond their range, an asymptotic guess
    refined by two Newton steps on :func:`log_ndtr` keeps the far tail accurate:
    ``ndtri(1e-30)`` is ``-11.464``. ``-inf`` at 0, ``inf`` at 1, NaN outside ``[0, 1]``.

    >>> import pypto as pto
    >>> pto.ndtri(pto.tensor([0.5, 0.975, 1e-30])).numpy().round(4)
    array([  0.   ,   1.96 , -11.464], dtype=float32)
    """
    (v,), d = _wide("ndtri", p)
    edge = composite.logical_or(api.less_equal(v, 0.0), api.greater_equal(v, 1.0))
    vs = api.where(edge, 0.5, v)
    w = api.neg(api.log(api.mul(api.mul(vs, api.sub(1.0, vs)), 4.0)))
    # the polynomials serve the upper side to float32's largest p < 1 (w ≈ 15.2)
    tail = composite.logical_and(api.greater(w, _NDTRI_TAIL_W), api.less(vs, 0.5))
    body = api.mul(_erfinv_w(api.sub(api.mul(vs, 2.0), 1.0), api.where(tail, 1.0, w)), _SQRT2)
    # the tail: log Φ(x) ≈ -x²/2 - log(√(2π)|x|) solved once for x² from L = -log p, then
    # Newton steps on f(x) = log Φ(x) + L, whose derivative is φ(x)/Φ(x)
    big_l = api.neg(api.log(api.where(tail, vs, 1e-10)))
    x = api.neg(api.sqrt(api.sub(api.mul(big_l, 2.0), api.log(api.mul(big_l, 4 * math.pi)))))
    for _ in range(2):  # the guess is within 1%: two steps reach float32's precision
        lx = log_ndtr(x)
        step = api.exp(api.add(api.add(lx, api.mul(api.mul(x, x), 0.5)), _HALF_LOG_2PI))
        x = api.sub(x, api.mul(api.add(lx, big_l), step))
    ends = api.where(api.equal(v, 0.0), -math.inf, api.where(api.equal(v, 1.0), math.inf, math.nan))
    return _narrow(api.where(edge, ends, api.where(tail, x, body)), d)


@_composite("ndtr", "the standard normal CDF, elementwise", _in_float32(jax.scipy.special.ndtr))
def ndtr(x: Any) -> Any:
    """The standard normal distribution function ``Φ(x) = erfc(-x/√2) / 2``
    (``jax.scipy.special.ndtr``): accurate in relative terms in the lower tail, where
    ``(1 + erf(x/√2)) / 2`` would cancel.

    >>> import pypto as pto
    >>> pto.ndtr(pto.tensor([0.0, 1.96, -10.0])).numpy()
    array([5.0000000e-01, 9.7500211e-01, 7.6198505e-24], dtype=float32)
    """
    (v,), d = _wide("ndtr", x)
    return _narrow(api.mul(_erfc32(api.mul(v, -1 / _SQRT2)), 0.5), d)


@_composite(
    "log_ndtr",
    "log of the standard normal CDF, elementwise",
    _in_float32(jax.scipy.special.log_ndtr),
)
def log_ndtr(x: Any) -> Any:
    """``log Φ(x)`` (``jax.scipy.special.log_ndtr``), finite far into the lower tail: below 0
    it is the logarithm of ``erfc``'s formula taken term by term,
    ``log(t/2) - z² + P(t)`` with ``z = -x/√2``; above, ``log1p(-Φ(-x))``.

    >>> import pypto as pto
    >>> pto.log_ndtr(pto.tensor([0.0, -20.0, 3.0])).numpy()
    array([-6.9314718e-01, -2.0391716e+02, -1.3508105e-03], dtype=float32)
    """
    (v,), d = _wide("log_ndtr", x)
    neg = api.less(v, 0.0)
    z = api.mul(api.where(neg, v, -1.0), -1 / _SQRT2)  # z > 0 on the lower side
    t = api.div(1.0, api.add(api.mul(z, 0.5), 1.0))
    lower = api.add(api.log(api.mul(t, 0.5)), api.sub(_horner(t, _ERFC), api.mul(z, z)))
    upper = composite.log1p(api.neg(ndtr(api.neg(api.where(neg, 0.0, v)))))
    return _narrow(api.where(neg, lower, upper), d)


# Euler-Maclaurin for the Hurwitz zeta: the first _ZETA_N terms summed, the rest as the
# integral plus B₂ⱼ/(2j)! corrections, j = 1..12 (the Bernoulli numbers B₂ … B₂₄)
_ZETA_N = 9


def bernoulli_numbers(n: int) -> list[Fraction]:
    """``B₀ … Bₙ`` exactly, by the Akiyama-Tanigawa algorithm (its ``B₁`` is ``+½``)."""
    row: list[Fraction] = []
    out: list[Fraction] = []
    for m in range(n + 1):
        row.append(Fraction(1, m + 1))
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
        out.append(row[0])
    return out


_ZETA_B = tuple(
    float(b / math.factorial(2 * j + 2)) for j, b in enumerate(bernoulli_numbers(24)[2::2])
)
# a negative q is first shifted by up to this many terms (q + k < 0 for an integer s)
_ZETA_NEG = 16
_MAX_FACTORIAL = 34  # the largest n with n! finite in float32


def _pow_neg(base: Any, s: Any) -> Any:
    """``base^-s`` for ``base > 0`` (``pow``, not ``exp(-s log base)``, which would multiply
    the logarithm's rounding by ``s``)."""
    return api.pow(base, api.neg(s))


def _zeta32(s: Any, q: Any) -> Any:
    qint = api.equal(q, composite.floor(q))
    sint = api.equal(s, composite.floor(s))
    neg = api.less(q, 0.0)
    # q < 0 (s an integer): the terms (q + k)^-s of negative q + k one by one, their sign
    # (-1)^s, until q + m >= 0; then the series from q + m
    m = api.where(neg, api.minimum(composite.ceil(api.neg(q)), float(_ZETA_NEG)), 0.0)
    odd = api.not_equal(composite.remainder(s, 2.0), 0.0)
    total: Any = 0.0
    for k in range(_ZETA_NEG):
        here = api.less(float(k), m)
        base = api.where(here, api.abs(api.add(q, float(k))), 1.0)
        term = _pow_neg(base, s)
        total = api.add(total, api.where(here, api.where(odd, api.neg(term), term), 0.0))
    q0 = api.add(q, m)
    # q + m = 0 (a pole), NaN or inf: decided below
    q0 = api.where(composite.logical_and(api.greater(q0, 0.0), composite.isfinite(q0)), q0, 1.0)
    for k in range(_ZETA_N):
        total = api.add(total, _pow_neg(api.add(q0, float(k)), s))
    a = api.add(q0, float(_ZETA_N))
    a_s = _pow_neg(a, s)
    sm1 = api.sub(s, 1.0)
    total = api.add(total, api.div(api.mul(a, a_s), api.where(api.equal(sm1, 0.0), 1.0, sm1)))
    total = api.add(total, api.mul(a_s, 0.5))
    t = api.div(api.mul(s, a_s), a)  # s(s+1)…(s+2j-2) a^(-s-2j+1), j = 1
    inv_a2 = api.div(1.0, api.mul(a, a))
    for j, b in enumerate(_ZETA_B):
        if j:
            rise = api.mul(api.add(s, float(2 * j - 1)), api.add(s, float(2 * j)))
            t = api.mul(api.mul(t, rise), inv_a2)
        total = api.add(total, api.mul(t, b))
    pole = composite.logical_or(
        api.equal(s, 1.0), composite.logical_and(api.less_equal(q, 0.0), qint)
    )
    undefined = composite.logical_or(
        api.less(s, 1.0),
        composite.logical_or(
            composite.logical_and(neg, composite.logical_not(sint)),
            api.less(q, float(-_ZETA_NEG)),
        ),
    )
    undefined = composite.logical_or(
        undefined, composite.logical_or(composite.isnan(q), composite.isnan(s))
    )
    total = api.where(composite.isposinf(q), 0.0, total)  # every term vanishes
    out = api.where(undefined, math.nan, api.where(pole, math.inf, total))
    return api.where(api.equal(s, 1.0), math.inf, out)  # whatever q is, as JAX and scipy


@_composite("zeta", "the Hurwitz zeta function Σₖ (q + k)^-s", jax.scipy.special.zeta)
def zeta(s: Any, q: Any) -> Any:
    """The Hurwitz zeta function ``ζ(s, q) = Σₖ₌₀^∞ (q + k)^-s`` (``jax.scipy.special.zeta``,
    ``jax.lax.zeta``): the first 9 terms, then Euler-Maclaurin's integral and 12 Bernoulli
    corrections, in float32 and rounded once. ``inf`` at ``s = 1`` and for ``q`` 0 or a
    negative integer, 0 for ``q = inf`` (JAX gives NaN there), NaN for ``s < 1``. A negative
    ``q`` needs an integer ``s`` (NaN otherwise, as in JAX) and is summed term by term up to
    ``q + 16 >= 0``; below -16 it is NaN. There pypto is exact where JAX's shifted series is
    not: ``ζ(2, -8.75)`` is 19.1, the trigamma, where JAX gives -250.9.

    >>> import pypto as pto
    >>> pto.zeta(pto.tensor([2.0, 3.0, 2.0]), pto.tensor([1.0, 1.0, -0.5])).numpy()
    array([1.644934 , 1.2020569, 8.934802 ], dtype=float32)
    """
    (sv, qv), d = _wide("zeta", s, q)
    return _narrow(_zeta32(sv, qv), d)


@_composite("polygamma", "ψ⁽ⁿ⁾(x), the n-th derivative of digamma", jax.scipy.special.polygamma)
def polygamma(n: Any, x: Any) -> Any:
    """The polygamma function ``ψ⁽ⁿ⁾(x)``, the ``n``-th derivative of :func:`digamma`
    (``jax.scipy.special.polygamma``, ``jax.lax.polygamma``): ``digamma`` for ``n = 0``, and
    ``(-1)ⁿ⁺¹ n! ζ(n + 1, x)`` above (see :func:`zeta`, also for negative ``x``, where pypto's
    values are the true ones and JAX's are not). ``n`` must be of an integer dtype, as in
    JAX; a negative ``n`` gives NaN.

    >>> import pypto as pto
    >>> pto.polygamma(1, pto.tensor([1.0, 0.5, -8.75])).numpy()
    array([ 1.644934 ,  4.9348025, 19.631207 ], dtype=float32)
    """
    nv = api.asvalue(n, "polygamma")
    if nv.dtype.is_floating:  # type: ignore[attr-defined]
        raise DTypeError(
            f"n must be of an integer dtype, got {nv.dtype}",  # type: ignore[attr-defined]
            op="polygamma",
            hint="pass n as a Python int or an integer tensor (n.astype(pto.int32))",
        )
    (xv,), d = _wide("polygamma", x)
    nf = api.cast(nv, dt.float32)
    n1 = api.add(nf, 1.0)
    sign = api.where(api.equal(composite.remainder(nf, 2.0), 0.0), -1.0, 1.0)  # (-1)^(n+1)
    # n! as a product of the integers (exp(lgamma(n + 1)) would be 5e-7 off at n = 1); past
    # 34! float32 overflows
    fact: Any = 1.0
    for k in range(2, _MAX_FACTORIAL + 1):
        fact = api.mul(fact, api.where(api.less(nf, float(k)), 1.0, float(k)))
    fact = api.where(api.greater(nf, float(_MAX_FACTORIAL)), math.inf, fact)
    higher = api.mul(api.mul(sign, fact), _zeta32(n1, xv))
    out = api.where(api.equal(nf, 0.0), _digamma32(xv), higher)
    return _narrow(api.where(api.less(nf, 0.0), math.nan, out), d)


@_composite("xlogy", "x·log(y), 0 where x is 0", jax.scipy.special.xlogy)
def xlogy(x: Any, y: Any) -> Any:
    """``x · log(y)``, and 0 wherever ``x`` is 0 and ``y`` is not NaN (even for ``y`` 0), as
    ``jax.scipy.special.xlogy``; broadcasting, integers give float32. The gradient is JAX's:
    ``log(y)`` for ``x`` and ``x / y`` for ``y``, also where ``x`` is 0.

    >>> import pypto as pto
    >>> pto.xlogy(pto.tensor([0.0, 2.0]), pto.tensor([0.0, 3.0])).numpy()
    array([0.       , 2.1972246], dtype=float32)
    """
    u, v = api.promote("xlogy", (x, y), inexact=True)
    return _xlog(u, v, api.log)


@_composite("xlog1py", "x·log1p(y), 0 where x is 0", jax.scipy.special.xlog1py)
def xlog1py(x: Any, y: Any) -> Any:
    """``x · log1p(y)``, and 0 wherever ``x`` is 0 and ``y`` is not NaN, as
    ``jax.scipy.special.xlog1py``.

    >>> import pypto as pto
    >>> pto.xlog1py(pto.tensor([0.0, 2.0]), pto.tensor([-1.0, 1e-8])).numpy()
    array([0.e+00, 2.e-08], dtype=float32)
    """
    u, v = api.promote("xlog1py", (x, y), inexact=True)
    return _xlog(u, v, composite.log1p)


def _xlog(u: Any, v: Any, log: Any) -> Any:
    """``u · log(v)`` and 0 where ``u`` is 0 and ``v`` is not NaN, op by op in the operands'
    dtype as JAX computes it. The product is ``u · L`` with ``L = log(v)``, so the derivatives
    are JAX's (``L`` for ``u``, ``u·log'(v)`` for ``v``); where ``u`` is 0 and ``L`` is not
    finite, ``v`` is taken at log's zero instead, so the product is 0 and no NaN comes back
    through the logarithm."""
    finite = composite.logical_or(composite.isfinite(log(v)), composite.isnan(v))
    bad = composite.logical_and(api.equal(u, 0.0), composite.logical_not(finite))
    return api.mul(u, log(api.where(bad, 1.0 if log is api.log else 0.0, v)))


@_composite("logit", "log(p / (1 - p)), the inverse of sigmoid", jax.scipy.special.logit)
def logit(p: Any) -> Any:
    """The log-odds ``log(p / (1 - p))``, the inverse of :func:`pto.sigmoid`
    (``jax.scipy.special.logit``).

    >>> import pypto as pto
    >>> pto.logit(pto.tensor([0.5, 0.75])).numpy()
    array([0.       , 1.0986123], dtype=float32)
    """
    (v,) = api.promote("logit", (p,), inexact=True)
    return api.log(api.div(v, api.sub(1.0, v)))


@_composite("entr", "-x·log(x), elementwise (0 at 0, -inf below)", jax.scipy.special.entr)
def entr(x: Any) -> Any:
    """The elementwise entropy ``-x log x`` (``jax.scipy.special.entr``): 0 at 0, ``-inf``
    for negative ``x``.

    >>> import pypto as pto
    >>> pto.entr(pto.tensor([0.0, 0.5, -1.0])).numpy()
    array([-0.       ,  0.3465736,       -inf], dtype=float32)
    """
    (v,) = api.promote("entr", (x,), inexact=True)
    return api.where(api.less(v, 0.0), -math.inf, api.neg(_xlog(v, v, api.log)))


@_composite("rel_entr", "x·log(x/y), elementwise (relative entropy)", jax.scipy.special.rel_entr)
def rel_entr(x: Any, y: Any) -> Any:
    """``x log x - x log y`` for positive ``x`` and ``y``, 0 for ``x = 0 ≤ y``, ``inf``
    otherwise (``jax.scipy.special.rel_entr``); its sum is the Kullback-Leibler divergence.

    >>> import pypto as pto
    >>> pto.rel_entr(pto.tensor([0.5, 0.0, 1.0]), pto.tensor([0.25, 1.0, -1.0])).numpy()
    array([0.3465736, 0.       ,       inf], dtype=float32)
    """
    u, v = api.promote("rel_entr", (x, y), inexact=True)
    ok = composite.logical_and(api.greater(u, 0.0), api.greater(v, 0.0))
    us, vs = api.where(ok, u, 1.0), api.where(ok, v, 1.0)
    body = api.sub(_xlog(us, us, api.log), _xlog(us, vs, api.log))
    edge = composite.logical_and(api.equal(u, 0.0), api.greater_equal(v, 0.0))
    return api.where(ok, body, api.cast(api.where(edge, 0.0, math.inf), body.dtype))


@_composite("kl_div", "x·log(x/y) - x + y, elementwise", jax.scipy.special.kl_div)
def kl_div(x: Any, y: Any) -> Any:
    """``rel_entr(x, y) - x + y``: ``x log(x / y) - x + y`` for positive ``x`` and ``y``,
    ``y`` for ``x = 0 ≤ y``, ``inf`` otherwise (``jax.scipy.special.kl_div``).

    >>> import pypto as pto
    >>> pto.kl_div(pto.tensor([0.5, 0.0]), pto.tensor([0.25, 2.0])).numpy()
    array([0.09657359, 2.        ], dtype=float32)
    """
    u, v = api.promote("kl_div", (x, y), inexact=True)
    return api.add(api.sub(rel_entr(u, v), u), v)


@_composite("i0e", "exp(-|x|)·I₀(x), elementwise", jax.scipy.special.i0e)
def i0e(x: Any) -> Any:
    """The exponentially scaled modified Bessel function ``exp(-|x|) I₀(x)``
    (``jax.scipy.special.i0e``, ``jax.lax.bessel_i0e``): :func:`pto.i0`'s Chebyshev series
    without the exponential, finite for every finite ``x`` and 0 at ±inf.

    >>> import pypto as pto
    >>> pto.i0e(pto.tensor([0.0, 1.0, 100.0])).numpy()
    array([1.        , 0.46575963, 0.03994438], dtype=float32)
    """
    (v,), d = _wide("i0e", x)
    a = api.abs(v)
    r = api.where(api.equal(a, 0.0), 1.0, i0e_series(a))
    return _narrow(api.where(composite.isinf(a), 0.0, r), d)


# I₁: its power series up to |x| = _I1_SWITCH (positive terms, no cancellation), and Hankel's
# asymptotic expansion above: I₁(x) ~ eˣ/√(2πx) Σₖ (-1)ᵏ aₖ x⁻ᵏ, aₖ = aₖ₋₁ (4 - (2k-1)²)/(8k)
_I1_SWITCH = 20.0
_I1_TERMS = 40  # the series' terms at 20 fall below float32's precision by k = 35
_I1_ASYMPTOTIC: tuple[float, ...] = tuple(
    float((-1) ** k * math.prod(Fraction(4 - (2 * j - 1) ** 2, 8 * j) for j in range(1, k + 1)))
    for k in range(8)
)


def _i1e32(v: Any) -> Any:
    """``exp(-|x|) I₁(x)`` in float32."""
    a = api.abs(v)
    small = api.less_equal(a, _I1_SWITCH)
    xs = api.where(small, a, 1.0)
    h2 = api.mul(api.mul(xs, xs), 0.25)
    term = api.mul(xs, 0.5)
    total = term
    for k in range(_I1_TERMS - 1):
        term = api.mul(term, api.div(h2, float((k + 1) * (k + 2))))
        total = api.add(total, term)
    near = api.mul(total, api.exp(api.neg(xs)))
    big = api.where(small, _I1_SWITCH, a)
    inv = api.div(1.0, big)
    far = _horner(inv, _I1_ASYMPTOTIC)
    far = api.div(far, api.sqrt(api.mul(big, 2 * math.pi)))
    r = api.where(small, near, far)
    r = api.where(composite.isinf(a), 0.0, r)
    return api.mul(composite.sign(v), r)


@_composite("i1e", "exp(-|x|)·I₁(x), elementwise", jax.scipy.special.i1e)
def i1e(x: Any) -> Any:
    """The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I₁(x)``
    (``jax.scipy.special.i1e``, ``jax.lax.bessel_i1e``): its power series up to
    ``|x| = 20`` and Hankel's asymptotic expansion above, in float32 and rounded once. Odd,
    0 at 0 and at ±inf.

    >>> import pypto as pto
    >>> pto.i1e(pto.tensor([0.0, 1.0, -5.0, 100.0])).numpy()
    array([ 0.        ,  0.20791039, -0.16397224,  0.03974415], dtype=float32)
    """
    (v,), d = _wide("i1e", x)
    return _narrow(_i1e32(v), d)
