"""Inverse trigonometric and hyperbolic functions as composites: ``arctan``, ``arctan2``,
``arcsin``, ``arccos``, ``arcsinh``, ``arccosh``, ``arctanh`` (and numpy 2's names ``atan``,
``atan2``, ``asin``, ``acos``, ``asinh``, ``acosh``, ``atanh``).

The vector unit has no arctangent, so ``arctan`` is Cephes' single-precision one: the argument
reduced to ``[0, tan(π/8)]`` by ``π/2 - atan(1/t)`` and ``π/4 + atan((t-1)/(t+1))``, then an odd
polynomial of degree 9 (about 1 ulp in float32). The others are built on it and on ``log1p``
with the formulas that keep their digits: ``arctan2`` divides the smaller magnitude by the
larger (so nothing overflows and its gradient is finite off the origin), ``arcsin`` is
``arctan2(x, √((1-x)(1+x)))``. Each branch of a ``where`` sees only inputs it can take, so no
branch makes a NaN in another's gradient. float16 and bfloat16 run in float32, rounded once.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

from pypto.ops import api, composite
from pypto.ops.composite import _composite
from pypto.ops.numpy_lib import _narrow, _wide, signbit

_TAN_3PI_8 = 2.414213562373095
_TAN_PI_8 = 0.4142135623730950
_ATAN_POLY = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)
_BIG = 2.0**28  # beyond it sqrt(x² ± 1) is |x| in float32: asinh and acosh are log(2|x|)


def _atan_abs(t: Any) -> Any:
    """``atan(t)`` for float32 ``t ≥ 0`` (or NaN): Cephes' reduction and polynomial."""
    big = api.greater(t, _TAN_3PI_8)
    mid = api.greater(t, _TAN_PI_8)
    inv = api.neg(api.div(1.0, api.where(big, t, 1.0)))
    shifted = api.div(api.sub(t, 1.0), api.add(t, 1.0))
    z = api.where(big, inv, api.where(mid, shifted, t))
    base = api.where(big, math.pi / 2, api.where(mid, math.pi / 4, 0.0))
    z2 = api.mul(z, z)
    c0, c1, c2, c3 = _ATAN_POLY
    poly = api.add(api.mul(api.add(api.mul(api.add(api.mul(z2, c0), c1), z2), c2), z2), c3)
    return api.add(base, api.add(api.mul(api.mul(poly, z2), z), z))


def _with_sign(r: Any, neg: Any) -> Any:
    """``r`` (not negative) with the sign set where ``neg``: an odd function's result."""
    return api.where(neg, api.neg(r), r)


@_composite("arctan", "inverse tangent, elementwise", jnp.arctan)
def arctan(x: Any) -> Any:
    """The inverse tangent, in ``(-π/2, π/2)``: Cephes' ``atanf`` (about 1 ulp in float32).

    >>> import pypto as pto
    >>> [f"{v:.6f}" for v in pto.arctan(pto.tensor([1.0, -1e9, 0.5])).numpy()]
    ['0.785398', '-1.570796', '0.463648']
    """
    (v,), d = _wide("arctan", x)
    return _narrow(_with_sign(_atan_abs(api.abs(v)), signbit(v)), d)


@_composite(
    "arctan2", "the angle of the point (x, y): arctan(y / x) in the right quadrant", jnp.arctan2
)
def arctan2(y: Any, x: Any) -> Any:
    """The angle of ``(x, y)`` in ``[-π, π]``, as ``jnp.arctan2``, IEEE's special cases
    included: signed zeros pick the side (``arctan2(±0, -0) = ±π``), infinities give the
    multiples of π/4.

    The arctangent of ``min(|x|, |y|) / max(|x|, |y|)`` (at most 1, so no overflow and no
    division by zero off the origin) is reflected into the octant: ``π/2 - a`` when ``|y| >
    |x|``, ``π - a`` when ``x`` is negative (its sign bit), negated with ``y``'s sign bit.

    >>> import pypto as pto
    >>> y, x = pto.tensor([1.0, 1.0, -0.0]), pto.tensor([-1.0, 0.0, -1.0])
    >>> [f"{v:.6f}" for v in pto.arctan2(y, x).numpy()]
    ['2.356194', '1.570796', '-3.141593']
    """
    (yv, xv), d = _wide("arctan2", y, x)
    ay, ax = api.abs(yv), api.abs(xv)
    hi, lo = api.maximum(ay, ax), api.minimum(ay, ax)
    both_inf = composite.logical_and(composite.isinf(ay), composite.isinf(ax))
    safe_hi = api.where(composite.logical_or(api.equal(hi, 0.0), both_inf), 1.0, hi)
    safe_lo = api.where(both_inf, 1.0, lo)
    a = _atan_abs(api.div(safe_lo, safe_hi))
    a = api.where(api.greater(ay, ax), api.sub(math.pi / 2, a), a)
    a = api.where(signbit(xv), api.sub(math.pi, a), a)
    r = _with_sign(a, signbit(yv))
    nan = composite.logical_or(composite.isnan(xv), composite.isnan(yv))
    return _narrow(api.where(nan, math.nan, r), d)


def _root_1mx2(v: Any) -> Any:
    """``√((1 - x)(1 + x))``: ``√(1 - x²)`` without the cancellation near ``|x| = 1``."""
    return api.sqrt(api.mul(api.sub(1.0, v), api.add(1.0, v)))


@_composite("arcsin", "inverse sine, elementwise", jnp.arcsin)
def arcsin(x: Any) -> Any:
    """The inverse sine, ``arctan2(x, √((1-x)(1+x)))``: NaN outside ``[-1, 1]``.

    >>> import pypto as pto
    >>> [f"{v:.6f}" for v in pto.arcsin(pto.tensor([0.5, -1.0])).numpy()]
    ['0.523599', '-1.570796']
    """
    (v,), d = _wide("arcsin", x)
    return _narrow(arctan2(v, _root_1mx2(v)), d)


@_composite("arccos", "inverse cosine, elementwise", jnp.arccos)
def arccos(x: Any) -> Any:
    """The inverse cosine, ``arctan2(√((1-x)(1+x)), x)``: NaN outside ``[-1, 1]``.

    >>> import pypto as pto
    >>> [f"{v:.6f}" for v in pto.arccos(pto.tensor([0.5, -1.0])).numpy()]
    ['1.047198', '3.141593']
    """
    (v,), d = _wide("arccos", x)
    return _narrow(arctan2(_root_1mx2(v), v), d)


@_composite("arcsinh", "inverse hyperbolic sine, elementwise", jnp.arcsinh)
def arcsinh(x: Any) -> Any:
    """The inverse hyperbolic sine: ``log1p(t + t²/(1 + √(1 + t²)))`` of ``t = |x|`` (no
    cancellation near 0), ``log(2t)`` beyond 2²⁸ where ``t²`` would lose ``1``, with x's sign.

    >>> import pypto as pto
    >>> [f"{v:.6g}" for v in pto.arcsinh(pto.tensor([1e-8, -2.0, 1e30])).numpy()]
    ['1e-08', '-1.44364', '69.7707']
    """
    (v,), d = _wide("arcsinh", x)
    t = api.abs(v)
    far = api.greater(t, _BIG)
    tn = api.where(far, 0.0, t)
    t2 = api.mul(tn, tn)
    near = composite.log1p(api.add(tn, api.div(t2, api.add(1.0, api.sqrt(api.add(1.0, t2))))))
    big = api.add(api.log(api.where(far, t, 1.0)), math.log(2.0))
    return _narrow(_with_sign(api.where(far, big, near), signbit(v)), d)


@_composite("arccosh", "inverse hyperbolic cosine, elementwise", jnp.arccosh)
def arccosh(x: Any) -> Any:
    """The inverse hyperbolic cosine: ``log1p(y + √(2y + y²))`` with ``y = x - 1`` (accurate
    near 1), ``log(2x)`` beyond 2²⁸; NaN below 1.

    >>> import pypto as pto
    >>> [f"{v:.6g}" for v in pto.arccosh(pto.tensor([1.0, 2.0, 0.5])).numpy()]
    ['0', '1.31696', 'nan']
    """
    (v,), d = _wide("arccosh", x)
    far = api.greater(v, _BIG)
    y = api.sub(api.where(far, 2.0, v), 1.0)
    near = composite.log1p(api.add(y, api.sqrt(api.add(api.mul(y, 2.0), api.mul(y, y)))))
    big = api.add(api.log(api.where(far, v, 1.0)), math.log(2.0))
    return _narrow(api.where(far, big, near), d)


@_composite("arctanh", "inverse hyperbolic tangent, elementwise", jnp.arctanh)
def arctanh(x: Any) -> Any:
    """The inverse hyperbolic tangent, ``log1p(2t / (1 - t)) / 2`` of ``t = |x|`` with x's
    sign: ±inf at ±1, NaN beyond.

    >>> import pypto as pto
    >>> [f"{v:.6g}" for v in pto.arctanh(pto.tensor([0.5, -1e-7, 1.0])).numpy()]
    ['0.549306', '-1e-07', 'inf']
    """
    (v,), d = _wide("arctanh", x)
    t = api.abs(v)
    r = api.mul(composite.log1p(api.div(api.mul(t, 2.0), api.sub(1.0, t))), 0.5)
    return _narrow(_with_sign(r, signbit(v)), d)
