"""More of numpy's array library, as composites over the core ops: elementwise math (``log2``,
``sinh``, ``logaddexp``, ``hypot``, …), NaN-ignoring and other reductions (``nansum``,
``nanmax``, ``ptp``, ``average``, …), rearrangements (``roll``, ``repeat``, ``tile``, ``diff``,
the stacks, ``rot90``, ``meshgrid``, …) and tests (``isclose``, ``allclose``).

Each is checked against its ``jax.numpy`` namesake (tests/ops/test_ops_vs_jax.py) and compiled
for the NPU like any composite: its parts fuse where they can. Where a formula is chosen for
accuracy or for its gradient, the docstring says why.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core import dispatch
from pypto.core.errors import DTypeError, ShapeError, TraceError
from pypto.ops import api, composite, rules
from pypto.ops.composite import _composite
from pypto.ops.indexing import _concrete
from pypto.ops.table import OPS

_LN2 = math.log(2.0)

# ---------------------------------------------------------------------------------------------
# Elementwise math


def _inexact(op: str, *xs: Any) -> list[Any]:
    return api.promote(op, xs, inexact=True)


def _wide(op: str, *xs: Any) -> tuple[list[Any], dt.DType]:
    """The operands promoted to a float dtype, then widened to float32, and that dtype: a
    formula of several steps runs in float32 and is rounded once (float16 would round every
    step, as the eager decomposition does op by op)."""
    vs = _inexact(op, *xs)
    d = vs[0].dtype
    return ([api.cast(v, dt.float32) for v in vs] if d is not dt.float32 else vs), d


def _narrow(v: Any, d: dt.DType) -> Any:
    return v if d is dt.float32 else api.cast(v, d)


@_composite("log2", "base-2 logarithm, elementwise", jnp.log2)
def log2(x: Any) -> Any:
    """The base-2 logarithm, ``log(x) / log(2)`` (as JAX computes it: powers of two are exact).

    >>> import pypto as pto
    >>> pto.log2(pto.tensor([1.0, 8.0, 0.5])).numpy()
    array([ 0.,  3., -1.], dtype=float32)
    """
    (v,), d = _wide("log2", x)
    return _narrow(api.div(api.log(v), _LN2), d)


@_composite("log10", "base-10 logarithm, elementwise", jnp.log10)
def log10(x: Any) -> Any:
    """The base-10 logarithm, ``log(x) / log(10)``.

    >>> import pypto as pto
    >>> pto.log10(pto.tensor([1.0, 100.0])).numpy()
    array([0., 2.], dtype=float32)
    """
    (v,), d = _wide("log10", x)
    return _narrow(api.div(api.log(v), math.log(10.0)), d)


@_composite("exp2", "2 to the power x, elementwise", jnp.exp2)
def exp2(x: Any) -> Any:
    """``2 ** x``: a power of a constant base, exact at integers.

    >>> import pypto as pto
    >>> pto.exp2(pto.tensor([3.0, -1.0, 0.5])).numpy()
    array([8.       , 0.5      , 1.4142135], dtype=float32)
    """
    (v,), d = _wide("exp2", x)
    return _narrow(api.pow(2.0, v), d)


@_composite("sinh", "hyperbolic sine, elementwise", jnp.sinh)
def sinh(x: Any) -> Any:
    """The hyperbolic sine, accurate near 0 and up to its overflow.

    Below 1 in magnitude it is ``(u + u / (u + 1)) / 2`` with ``u = expm1(x)`` (no cancellation);
    above, ``exp(x - ln 2) - exp(-x - ln 2)``, which stays finite as far as sinh does (``exp(x) /
    2`` would overflow first). Each branch sees only its own inputs, so neither makes a NaN in
    the other's gradient.

    >>> import pypto as pto
    >>> [f"{v:.6g}" for v in pto.sinh(pto.tensor([1e-6, -2.0])).numpy()]
    ['1e-06', '-3.62686']
    """
    (v,), d = _wide("sinh", x)
    small = api.less(api.abs(v), 1.0)
    u = composite.expm1(api.where(small, v, 0.0))
    near = api.mul(api.add(u, api.div(u, api.add(u, 1.0))), 0.5)
    xl = api.where(small, 1.0, v)
    far = api.sub(api.exp(api.sub(xl, _LN2)), api.exp(api.sub(api.neg(xl), _LN2)))
    return _narrow(api.where(small, near, far), d)


@_composite("cosh", "hyperbolic cosine, elementwise", jnp.cosh)
def cosh(x: Any) -> Any:
    """The hyperbolic cosine, ``exp(x - ln 2) + exp(-x - ln 2)`` (finite as far as cosh is).

    >>> import pypto as pto
    >>> [f"{v:.6g}" for v in pto.cosh(pto.tensor([0.0, 2.0])).numpy()]
    ['1', '3.7622']
    """
    (v,), d = _wide("cosh", x)
    return _narrow(api.add(api.exp(api.sub(v, _LN2)), api.exp(api.sub(api.neg(v), _LN2))), d)


@_composite("tan", "tangent, elementwise", jnp.tan)
def tan(x: Any) -> Any:
    """The tangent, ``sin(x) / cos(x)`` (each within an ulp, so the ratio is within about
    two, near the poles too).

    >>> import pypto as pto
    >>> pto.tan(pto.tensor([0.0, 1.0])).numpy().round(5)
    array([0.     , 1.55741], dtype=float32)
    """
    (v,), d = _wide("tan", x)
    return _narrow(api.div(api.sin(v), api.cos(v)), d)


@_composite("logaddexp", "log(exp(a) + exp(b)) without overflow, elementwise", jnp.logaddexp)
def logaddexp(a: Any, b: Any) -> Any:
    """``log(exp(a) + exp(b))``, as ``max + log1p(exp(min - max))``: no overflow, and at
    ``a == b`` each side gets half the gradient (as JAX's sigmoid rule gives). Two infinities of
    one sign give that infinity; a NaN gives NaN.

    >>> import pypto as pto
    >>> [f"{v:.7g}" for v in pto.logaddexp(pto.tensor([0.0, 1e3]), pto.tensor([0.0, 1e3])).numpy()]
    ['0.6931472', '1000.693']
    """
    (u, v), d = _wide("logaddexp", a, b)
    hi, lo = api.maximum(u, v), api.minimum(u, v)
    gap = api.sub(lo, hi)  # NaN for two equal infinities, or a NaN operand
    nan = composite.isnan(gap)
    r = api.add(hi, composite.log1p(api.exp(api.where(nan, 0.0, gap))))
    return _narrow(api.where(nan, api.add(u, v), r), d)


@_composite("logaddexp2", "log2(2**a + 2**b) without overflow, elementwise", jnp.logaddexp2)
def logaddexp2(a: Any, b: Any) -> Any:
    """``log2(2**a + 2**b)``: :func:`logaddexp` in base 2.

    >>> import pypto as pto
    >>> pto.logaddexp2(pto.tensor(3.0), pto.tensor(3.0)).numpy()
    array(4., dtype=float32)
    """
    (u, v), d = _wide("logaddexp2", a, b)
    return _narrow(api.div(logaddexp(api.mul(u, _LN2), api.mul(v, _LN2)), _LN2), d)


@_composite("hypot", "sqrt(a² + b²) without overflow, elementwise", jnp.hypot)
def hypot(a: Any, b: Any) -> Any:
    """``sqrt(a² + b²)``, as ``hi · sqrt(1 + (lo / hi)²)`` on the magnitudes: no overflow or
    underflow in the squares; an infinity gives inf even beside a NaN (IEEE's hypot).

    >>> import pypto as pto
    >>> pto.hypot(pto.tensor([3.0, 3e30]), pto.tensor([4.0, 4e30])).numpy()
    array([5.e+00, 5.e+30], dtype=float32)
    """
    (u, v), d = _wide("hypot", a, b)
    u, v = api.abs(u), api.abs(v)
    hi, lo = api.maximum(u, v), api.minimum(u, v)
    zero = api.equal(hi, 0.0)
    r = api.div(lo, api.where(zero, 1.0, hi))
    out = api.mul(hi, api.sqrt(api.add(api.mul(r, r), 1.0)))
    inf = composite.logical_or(composite.isinf(u), composite.isinf(v))
    return _narrow(api.where(inf, math.inf, out), d)


@_composite("trunc", "x rounded toward zero, elementwise", jnp.trunc, differentiable=False)
def trunc(x: Any) -> Any:
    """``x`` rounded toward zero (``ceil`` below 0, ``floor`` above; integers unchanged).

    >>> import pypto as pto
    >>> pto.trunc(pto.tensor([-1.7, 1.7])).numpy()
    array([-1.,  1.], dtype=float32)
    """
    v = api.asvalue(x, "trunc")
    if not v.dtype.is_floating:  # type: ignore[attr-defined]
        return v
    return api.where(api.less(v, 0.0), composite.ceil(v), composite.floor(v))


def _nan_aware(op: str, a: Any, b: Any) -> Any:
    u, v = api.promote(op, (a, b))
    m = (api.maximum if op == "fmax" else api.minimum)(u, v)
    if not u.dtype.is_floating:  # type: ignore[attr-defined]
        return m
    return api.where(composite.isnan(v), u, api.where(composite.isnan(u), v, m))


@_composite("fmax", "elementwise maximum that ignores NaN", jnp.fmax)
def fmax(a: Any, b: Any) -> Any:
    """The elementwise maximum, taking the other operand where one is NaN (NaN only where
    both are).

    >>> import pypto as pto
    >>> pto.fmax(pto.tensor([1.0, float("nan")]), pto.tensor([float("nan"), 2.0])).numpy()
    array([1., 2.], dtype=float32)
    """
    return _nan_aware("fmax", a, b)


@_composite("fmin", "elementwise minimum that ignores NaN", jnp.fmin)
def fmin(a: Any, b: Any) -> Any:
    """The elementwise minimum, taking the other operand where one is NaN."""
    return _nan_aware("fmin", a, b)


@_composite("deg2rad", "degrees to radians, elementwise", jnp.deg2rad)
def deg2rad(x: Any) -> Any:
    """Degrees to radians, ``x · π / 180`` (``pto.radians`` is the same function).

    >>> import pypto as pto
    >>> pto.deg2rad(pto.tensor(180.0)).numpy()
    array(3.1415927, dtype=float32)
    """
    (v,) = _inexact("deg2rad", x)
    return api.mul(v, math.pi / 180.0)


@_composite("rad2deg", "radians to degrees, elementwise", jnp.rad2deg)
def rad2deg(x: Any) -> Any:
    """Radians to degrees, ``x · 180 / π`` (``pto.degrees`` is the same function)."""
    (v,) = _inexact("rad2deg", x)
    return api.mul(v, 180.0 / math.pi)


def _signbit_jax(x: Any) -> Any:
    return jnp.signbit(x)


@_composite(
    "signbit", "whether the sign bit is set (-0.0 and -NaN too)", _signbit_jax, differentiable=False
)
def signbit(x: Any) -> Any:
    """Whether each element's sign bit is set, as ``jnp.signbit``: true for ``-0.0`` and a
    NaN with its sign bit set, where ``x < 0`` is false. Floats are read through
    :func:`~pypto.bitcast_convert_type` (float16 and bfloat16 widened to float32 first, which
    keeps the sign); integers compare with 0.

    >>> import pypto as pto
    >>> pto.signbit(pto.tensor([-0.0, 0.0, -2.0, float("nan")])).numpy()
    array([ True, False,  True, False])
    """
    v = api.asvalue(x, "signbit")
    d = v.dtype  # type: ignore[attr-defined]
    if d is dt.bool_:
        return api.broadcast_to(api.asvalue(np.zeros((), bool)), tuple(v.shape))  # type: ignore[attr-defined]
    if d.is_integer:
        return api.less(v, 0)
    wide = v if d is dt.float32 else api.cast(v, dt.float32)
    return api.less(api.bitcast_convert_type(wide, dt.int32), 0)


@_composite("copysign", "the magnitude of x with the sign of y, elementwise", jnp.copysign)
def copysign(x: Any, y: Any) -> Any:
    """``|x|`` with the sign bit of ``y`` (``-0.0`` and NaNs count by their sign bit), as
    ``jnp.copysign``: ``where(signbit(y), -|x|, |x|)``. The gradient is ``±1`` through ``x``
    and none through ``y``.

    >>> import pypto as pto
    >>> pto.copysign(pto.tensor([1.0, 2.0, 3.0]), pto.tensor([-0.0, 1.0, -5.0])).numpy()
    array([-1.,  2., -3.], dtype=float32)
    """
    u, v = _inexact("copysign", x, y)
    m = api.abs(u)
    return api.where(signbit(v), api.neg(m), m)


def int_bits(op: str, x: Any) -> Any:
    """``x`` as a value, checked to be an integer tensor (the bit functions' operand)."""
    v = api.asvalue(x, op)
    if not v.dtype.is_integer or v.dtype is dt.bool_:  # type: ignore[attr-defined]
        raise DTypeError(
            f"works on the bits of integers, got {api._aval(v)}",
            op=op,
            hint="cast with .astype(pto.int32) (bools: .astype(pto.int8))",
        )
    return v


def _repeat_byte(byte: int, width: int) -> int:
    """``byte`` repeated over ``width`` bits: ``0x55`` gives ``0x55555555`` for 32."""
    return int.from_bytes(bytes([byte]) * (width // 8), "little")


def popcount(v: Any) -> Any:
    """The number of 1 bits of each element of integer ``v`` (two's complement), in ``v``'s
    dtype: the parallel count — bit pairs, then nibbles, then bytes, then the bytes summed —
    with shifts, masks and sums that wrap as the machine's do. Every mask leaves the sign bit
    clear, so the arithmetic shifts need no logical ones."""
    n = 8 * v.dtype.itemsize
    v = api.sub(v, api.bitwise_and(api.right_shift(v, 1), _repeat_byte(0x55, n)))
    m2 = _repeat_byte(0x33, n)
    v = api.add(api.bitwise_and(v, m2), api.bitwise_and(api.right_shift(v, 2), m2))
    v = api.bitwise_and(api.add(v, api.right_shift(v, 4)), _repeat_byte(0x0F, n))
    k = 8
    while k < n:  # each byte holds its count (<= 8): sum them into the lowest
        v = api.add(v, api.right_shift(v, k))
        k *= 2
    return api.bitwise_and(v, (1 << n.bit_length()) - 1)


def _bitwise_count_jax(x: Any) -> Any:
    return jnp.bitwise_count(x).astype(jnp.int8)


@_composite(
    "bitwise_count",
    "the number of 1 bits in |x|, elementwise (integers), as int8",
    _bitwise_count_jax,
    differentiable=False,
)
def bitwise_count(x: Any) -> Any:
    """The number of 1 bits in the absolute value of each element, as ``jnp.bitwise_count``,
    counted in parallel over bit pairs, nibbles and bytes (a handful of vector ops whatever
    the width). JAX gives ``uint8``; pypto has no unsigned dtypes, so the counts (at most 32)
    come as ``int8``. ``|-2³¹|`` wraps to itself and counts 1, as in JAX.

    >>> import pypto as pto
    >>> pto.bitwise_count(pto.tensor([0, 7, -8, 2**31 - 1])).numpy()
    array([ 0,  3,  1, 31], dtype=int8)
    """
    return api.cast(popcount(api.abs(int_bits("bitwise_count", x))), dt.int8)


def _frexp32(w: Any) -> tuple[Any, Any]:
    """frexp of float32 ``w`` through its bits: (mantissa in [0.5, 1), int32 exponent);
    subnormals scaled up by 2^23 first; 0, ±inf and NaN give themselves and 0."""
    sub = api.less(api.abs(w), float(np.finfo(np.float32).tiny))
    scaled = api.where(sub, api.mul(w, float(2**23)), w)
    e0 = api.where(sub, -23, 0)
    bits = api.bitcast_convert_type(scaled, dt.int32)
    e = api.add(e0, api.sub(api.bitwise_and(api.right_shift(bits, 23), 255), 126))
    bits = api.bitwise_or(api.bitwise_and(bits, ~(255 << 23)), 126 << 23)
    m = api.bitcast_convert_type(bits, dt.float32)
    # bits carry no derivative, and m = w·2^-e does: add a term that is exactly zero and has it
    # (2^-e in two factors: it exceeds float32's range for subnormal w)
    zero = api.sub(w, api.stop_gradient(w))
    for f in (api.minimum(api.neg(e), 127), api.maximum(api.sub(api.neg(e), 127), 0)):
        zero = api.mul(zero, api.stop_gradient(_pow2(f)))
    m = api.add(m, zero)
    special = composite.logical_or(composite.logical_not(composite.isfinite(w)), api.equal(w, 0.0))
    return api.where(special, w, m), api.where(special, 0, e)


def _frexp_jax(x: Any) -> Any:
    return jnp.frexp(x)


@_composite(
    "frexp",
    "mantissa in [0.5, 1) and int32 exponent: x = m * 2**e",
    _frexp_jax,
)
def frexp(x: Any) -> Any:
    """``(m, e)`` with ``x = m · 2**e``, ``|m|`` in [0.5, 1) and ``e`` int32, as
    ``jnp.frexp``: read from the float's bits (float16 and bfloat16 through float32, which
    holds them exactly, subnormals included); 0, ±inf and NaN give themselves and 0.

    >>> import pypto as pto
    >>> m, e = pto.frexp(pto.tensor([8.0, -0.375, 0.0]))
    >>> m.numpy(), e.numpy()
    (array([ 0.5 , -0.75,  0.  ], dtype=float32), array([ 4, -1,  0], dtype=int32))
    """
    (v,) = _inexact("frexp", x)
    d = v.dtype
    m, e = _frexp32(v if d is dt.float32 else api.cast(v, dt.float32))
    return _narrow(m, d), e


def _pow2(e: Any) -> Any:
    """2**e exactly in float32 for int32 ``e``: from the bits of a normal or subnormal power,
    0 below 2^-149 and inf above 2^127."""
    normal = api.bitcast_convert_type(
        api.left_shift(api.add(composite.clip(e, -126, 127), 127), 23), dt.float32
    )
    tiny = api.bitcast_convert_type(
        api.left_shift(1, composite.clip(api.add(e, 149), 0, 22)), dt.float32
    )
    out = api.where(api.less(e, -126), tiny, normal)
    out = api.where(api.less(e, -149), 0.0, out)
    return api.where(api.greater(e, 127), math.inf, out)


def _ldexp_jax(x1: Any, x2: Any) -> Any:
    return jnp.ldexp(x1, x2)


@_composite("ldexp", "x1 * 2**x2 for integer x2, without overflow on the way", _ldexp_jax)
def ldexp(x1: Any, x2: Any) -> Any:
    """``x1 · 2**x2`` for integer ``x2``, as ``jnp.ldexp``: ``x1``'s exponent is split off
    first (:func:`frexp`) so that a small ``x1`` times a large power stays finite, and the
    power of two is built from its bits, so the result is rounded once; 0 and ±inf stay.

    >>> import pypto as pto
    >>> pto.ldexp(pto.tensor([0.75, 1e-30]), pto.tensor([3, 200])).numpy()
    array([6.000000e+00, 1.606938e+30], dtype=float32)
    """
    (v,) = _inexact("ldexp", x1)
    n = api.asvalue(x2, "ldexp")
    if not n.dtype.is_integer:  # type: ignore[attr-defined]
        raise DTypeError(
            f"the exponents must be integers, got {api._aval(n)}",
            op="ldexp",
            hint="cast them with .astype(pto.int32)",
        )
    d = v.dtype
    w = v if d is dt.float32 else api.cast(v, dt.float32)
    m, e = _frexp32(w)
    e = api.add(e, api.cast(n, dt.int32))
    # (the exponent may overshoot by one and the result still be finite)
    up = api.greater(e, 0)
    m = api.where(up, api.mul(m, 2.0), m)
    e = api.where(up, api.sub(e, 1), e)
    out = api.mul(m, _pow2(e))
    keep = composite.logical_or(composite.isinf(w), api.equal(w, 0.0))
    return _narrow(api.where(keep, w, out), d)


# (significand bits, frexp's exponent of the smallest normal) of each float dtype
_FLOAT_BITS = {dt.float32: (24, -125), dt.float16: (11, -13), dt.bfloat16: (8, -125)}


def _next_toward(w: Any, t: Any, d: dt.DType) -> Any:
    """The next value of dtype ``d`` after ``w`` towards ``t`` (both float32 holding values of
    ``d``), exactly: ``w`` plus or minus one unit in its last place, from its exponent
    (:func:`_frexp32`, :func:`_pow2`); one binade down when ``w`` is a power of two moving
    towards 0, never below the subnormal step; the largest finite value from an infinity."""
    p, emin = _FLOAT_BITS[d]
    m, e = _frexp32(w)
    up = api.greater(t, w)
    away = api.where(api.greater(w, 0.0), up, composite.logical_not(up))  # from zero
    down_binade = composite.logical_and(composite.logical_not(away), api.equal(api.abs(m), 0.5))
    step = _pow2(api.sub(api.maximum(api.sub(e, api.where(down_binade, 1, 0)), emin), p))
    r = api.where(up, api.add(w, step), api.sub(w, step))
    r = api.where(api.equal(r, 0.0), api.mul(w, 0.0), r)  # (from ∓tiny to 0: a zero of w's sign)
    tiny = float(2.0 ** (emin - p))
    r = api.where(api.equal(w, 0.0), api.where(up, tiny, -tiny), r)
    big = float(np.finfo(d.np).max)
    r = api.where(composite.isinf(w), api.where(api.greater(w, 0.0), big, -big), r)
    r = api.where(api.equal(w, t), t, r)  # (nextafter(0.0, -0.0) is -0.0)
    return api.where(composite.logical_or(composite.isnan(w), composite.isnan(t)), math.nan, r)


def _nextafter_jax(x1: Any, x2: Any) -> Any:
    return jnp.nextafter(x1, x2)


@_composite(
    "nextafter",
    "the next representable float after x1 towards x2, elementwise",
    _nextafter_jax,
    differentiable=False,
)
def nextafter(x1: Any, x2: Any) -> Any:
    """The next value of the promoted float dtype after ``x1`` in the direction of ``x2``, as
    ``jnp.nextafter``: ``x1`` one unit in the last place up or down (subnormals included;
    the largest finite value after an infinity, ``x2`` itself where they are equal, NaN
    where either is NaN). float16 and bfloat16 step in their own precision, computed exactly
    in float32.

    >>> import pypto as pto
    >>> pto.nextafter(pto.tensor([1.0, 1.0, 0.0]), pto.tensor([2.0, 0.0, -1.0])).numpy()
    array([ 1.0000001e+00,  9.9999994e-01, -1.4012985e-45], dtype=float32)
    """
    u, v = _inexact("nextafter", x1, x2)
    d = u.dtype
    if d not in _FLOAT_BITS:
        raise DTypeError(f"nextafter of {d}: not a float dtype pypto has", op="nextafter")
    if d is dt.float32:
        return _next_toward(u, v, d)
    return api.cast(_next_toward(api.cast(u, dt.float32), api.cast(v, dt.float32), d), d)


@_composite(
    "spacing",
    "the distance from x to the next float away from zero, elementwise",
    jnp.spacing,
    differentiable=False,
)
def spacing(x: Any) -> Any:
    """``nextafter(x, ±inf) - x`` (away from zero, so negative for negative ``x``; NaN at
    infinities), as ``jnp.spacing``, which for float16 steps towards ``+inf`` whatever the
    sign, as numpy does there.

    >>> import pypto as pto
    >>> pto.spacing(pto.tensor([1.0, -4.0, 0.0])).numpy()
    array([ 1.1920929e-07, -4.7683716e-07,  1.4012985e-45], dtype=float32)
    """
    (v,) = _inexact("spacing", x)
    d = v.dtype
    w = v if d is dt.float32 else api.cast(v, dt.float32)
    # (towards +inf for float16, as JAX's spacing)
    to = math.inf if d is dt.float16 else copysign(math.inf, w)
    nxt = _next_toward(w, to, d)
    if d is not dt.float32:  # the next value in d first: past float16's largest it is inf
        nxt = api.cast(api.cast(nxt, d), dt.float32)
    r = api.sub(nxt, w)
    if d is not dt.float16:  # (a flushed step: JAX's spacing gives the subnormal step there)
        step = float(2.0 ** (_FLOAT_BITS[d][1] - _FLOAT_BITS[d][0]))
        r = api.where(api.equal(r, 0.0), copysign(step, w), r)
    return _narrow(r, d)


@_composite("float_power", "x1 ** x2 in a float dtype, elementwise", jnp.float_power)
def float_power(x1: Any, x2: Any) -> Any:
    """``x1 ** x2`` after promoting both to a float dtype (integers to float32), as
    ``jnp.float_power``: ``float_power(2, -1)`` is 0.5 where integer ``power`` refuses it.

    >>> import pypto as pto
    >>> pto.float_power(pto.tensor([2, 4]), -1).numpy()
    array([0.5 , 0.25], dtype=float32)
    """
    u, v = _inexact("float_power", x1, x2)
    return api.pow(u, v)


@_composite("rint", "nearest integer, halves to even, in a float dtype", jnp.rint)
def rint(x: Any) -> Any:
    """The nearest integer with halves to the even one, as ``jnp.rint``: :func:`round` for
    floats; integers and bools become float32 (as JAX's rint), unchanged in value.

    >>> import pypto as pto
    >>> pto.rint(pto.tensor([0.5, 1.5, -2.5, 2.6])).numpy()
    array([ 0.,  2., -2.,  3.], dtype=float32)
    """
    v = api.asvalue(x, "rint")
    if not v.dtype.is_floating:  # type: ignore[attr-defined]
        return api.cast(v, dt.float32)
    return composite.round(v)


# Chebyshev coefficients of exp(-x)·I0(x) (Cephes' i0.c): on [0, 8] in x/2 - 2, above 8 in
# 32/x - 2 (times 1/√x)
_I0E_SMALL = (
    -4.41534164647933937950e-18,
    3.33079451882223809783e-17,
    -2.43127984654795469359e-16,
    1.71539128555513303061e-15,
    -1.16853328779934516808e-14,
    7.67618549860493561688e-14,
    -4.85644678311192946090e-13,
    2.95505266312963983461e-12,
    -1.72682629144155570723e-11,
    9.67580903537323691224e-11,
    -5.18979560163526290666e-10,
    2.65982372468238665035e-9,
    -1.30002500998624804212e-8,
    6.04699502254191894932e-8,
    -2.67079385394061173391e-7,
    1.11738753912010371815e-6,
    -4.41673835845875056359e-6,
    1.64484480707288970893e-5,
    -5.75419501008210370398e-5,
    1.88502885095841655729e-4,
    -5.76375574538582365885e-4,
    1.63947561694133579842e-3,
    -4.32430999505057594430e-3,
    1.05464603945949983183e-2,
    -2.37374148058994688156e-2,
    4.93052842396707084878e-2,
    -9.49010970480476444210e-2,
    1.71620901522208775349e-1,
    -3.04682672343198398683e-1,
    6.76795274409476084995e-1,
)
_I0E_LARGE = (
    -7.23318048787475395456e-18,
    -4.83050448594418207126e-18,
    4.46562142029675999901e-17,
    3.46122286769746109310e-17,
    -2.82762398051658348494e-16,
    -3.42548561967721913462e-16,
    1.77256013305652638360e-15,
    3.81168066935262242075e-15,
    -9.55484669882830764870e-15,
    -4.15056934728722208663e-14,
    1.54008621752140982691e-14,
    3.85277838274214270114e-13,
    7.18012445138366623367e-13,
    -1.79417853150680611778e-12,
    -1.32158118404477131188e-11,
    -3.14991652796324136454e-11,
    1.18891471078464383424e-11,
    4.94060238822496958910e-10,
    3.39623202570838634515e-9,
    2.26666899049817806459e-8,
    2.04891858946906374183e-7,
    2.89137052083475648297e-6,
    6.88975834691682398426e-5,
    3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)


def _chebyshev(t: Any, coeffs: Sequence[float]) -> Any:
    """``Σ' c_k T_k(t/2)`` by Clenshaw's recurrence (Cephes' ``chbevl`` convention)."""
    b0, b1, b2 = api.mul(t, 0.0), api.mul(t, 0.0), api.mul(t, 0.0)
    for c in coeffs:
        b2, b1 = b1, b0
        b0 = api.add(api.sub(api.mul(t, b1), b2), c)
    return api.mul(api.sub(b0, b2), 0.5)


def i0e_series(a: Any) -> Any:
    """``exp(-a)·I₀(a)`` for ``a = |x|``: Cephes' Chebyshev series on ``[0, 8]`` and above."""
    small = api.less_equal(a, 8.0)
    # each series only where it applies (no 32/0), chosen with where: a minimum's gradient
    # would be halved at the tie |x| = 8
    big = api.where(small, 8.0, a)
    near = _chebyshev(api.sub(api.mul(api.where(small, a, 8.0), 0.5), 2.0), _I0E_SMALL)
    far = api.div(_chebyshev(api.sub(api.div(32.0, big), 2.0), _I0E_LARGE), api.sqrt(big))
    return api.where(small, near, far)


@_composite("i0", "the modified Bessel function of the first kind, order 0", jnp.i0)
def i0(x: Any) -> Any:
    """``I₀(x)``, as ``jnp.i0``: ``exp(|x|)`` times Chebyshev series of ``exp(-|x|)·I₀(|x|)``
    on ``[0, 8]`` and above (Cephes' coefficients), in float32 and rounded once; integers
    give float32. Even, 1 at 0, ``inf`` at ±inf and past float32's range (which JAX reaches
    early, from |x| = 88.7, and where it gives NaN at ±inf).

    >>> import pypto as pto
    >>> pto.i0(pto.tensor([0.0, 1.0, -2.0])).numpy()
    array([1.       , 1.2660658, 2.2795854], dtype=float32)
    """
    (v,), d = _wide("i0", x)
    a = api.abs(v)
    # e^|x| in two halves: finite wherever I₀ is (|x| up to ~91.9 in float32, where e^|x|
    # alone overflows past 88.7), and inf at ±inf (where JAX's product is inf·0 = NaN)
    half = api.exp(api.mul(a, 0.5))
    r = api.mul(api.mul(i0e_series(a), half), half)
    r = api.where(api.equal(a, 0.0), 1.0, r)  # (the series' float32 sum is 1 ulp low there)
    return _narrow(api.where(composite.isinf(a), math.inf, r), d)


# Complex numbers' parts, for the real dtypes pypto has (numpy's and JAX's answers for them)


@_composite("positive", "+x, elementwise (a copy)", jnp.positive)
def positive(x: Any) -> Any:
    """``+x``: the values themselves, as ``jnp.positive``.

    >>> import pypto as pto
    >>> pto.positive(pto.tensor([1.0, -2.0])).numpy()
    array([ 1., -2.], dtype=float32)
    """
    return api.asvalue(x, "positive")


@_composite("real", "the real part: x itself for real dtypes", jnp.real)
def real(x: Any) -> Any:
    """The real part of ``x``: ``x`` itself, as ``jnp.real`` gives for real dtypes (pypto
    has no complex dtype).

    >>> import pypto as pto
    >>> pto.real(pto.tensor([1.5, -2.0])).numpy()
    array([ 1.5, -2. ], dtype=float32)
    """
    return api.asvalue(x, "real")


@_composite("imag", "the imaginary part: zeros for real dtypes", jnp.imag)
def imag(x: Any) -> Any:
    """The imaginary part of ``x``: zeros of its shape and dtype, as ``jnp.imag`` gives for
    real dtypes.

    >>> import pypto as pto
    >>> pto.imag(pto.tensor([1.5, -2.0])).numpy()
    array([0., 0.], dtype=float32)
    """
    v = api.asvalue(x, "imag")
    return api.broadcast_to(api.asvalue(np.zeros((), v.dtype.np)), tuple(v.shape))  # type: ignore[attr-defined]


def _angle_jax(z: Any, deg: bool = False) -> Any:
    return jnp.angle(z, deg)


@_composite("angle", "the complex argument: π for negative reals, 0 otherwise", _angle_jax)
def angle(z: Any, deg: bool = False) -> Any:
    """The argument of ``z`` in radians (degrees with ``deg``), as ``jnp.angle``: for real
    dtypes ``arctan2(0, z)``: π for negative numbers and -0.0, 0 otherwise, NaN for NaN;
    integers and bools give float32.

    >>> import pypto as pto
    >>> pto.angle(pto.tensor([-2.0, 0.0, 3.0]), deg=True).numpy()
    array([180.,   0.,   0.], dtype=float32)
    """
    from pypto.ops.trig import arctan2  # (trig builds on this module)

    (v,) = api.promote("angle", (z,), inexact=True)
    zero = api.broadcast_to(api.asvalue(np.zeros((), v.dtype.np)), tuple(v.shape))  # type: ignore[attr-defined]
    a = arctan2(zero, v)
    return rad2deg(a) if rules.flag("angle", "deg", deg) else a


@_composite("conj", "the complex conjugate: x itself for real dtypes", jnp.conj)
def conj(x: Any) -> Any:
    """The complex conjugate of ``x``: ``x`` itself for real dtypes, as ``jnp.conj``
    (``conjugate`` is the same function).

    >>> import pypto as pto
    >>> pto.conj(pto.tensor([1.5, -2.0])).numpy()
    array([ 1.5, -2. ], dtype=float32)
    """
    return api.asvalue(x, "conj")


conjugate = conj


@_composite(
    "iscomplex",
    "whether each element has a nonzero imaginary part",
    jnp.iscomplex,
    differentiable=False,
)
def iscomplex(x: Any) -> Any:
    """False everywhere for real dtypes, as ``jnp.iscomplex``.

    >>> import pypto as pto
    >>> pto.iscomplex(pto.tensor([1.0])).numpy()
    array([False])
    """
    v = api.asvalue(x, "iscomplex")
    return api.broadcast_to(api.asvalue(np.zeros((), bool)), tuple(v.shape))  # type: ignore[attr-defined]


@_composite(
    "isreal", "whether each element's imaginary part is zero", jnp.isreal, differentiable=False
)
def isreal(x: Any) -> Any:
    """True everywhere for real dtypes, as ``jnp.isreal``.

    >>> import pypto as pto
    >>> pto.isreal(pto.tensor([1.0])).numpy()
    array([ True])
    """
    v = api.asvalue(x, "isreal")
    return api.broadcast_to(api.asvalue(np.ones((), bool)), tuple(v.shape))  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------
# Windows: known from their length, so computed in float64 and rounded once to float32


def _window(op: str, m: Any, f: Callable[[np.ndarray, int], np.ndarray]) -> Any:
    n = rules.integer(op, "M", m)
    if n < 1:
        return api.asvalue(np.zeros(0, np.float32))
    if n == 1:
        return api.asvalue(np.ones(1, np.float32))
    return api.asvalue(f(np.arange(n, dtype=np.float64), n).astype(np.float32))


def bartlett(M: int) -> Any:
    """The triangular window of ``M`` points, as ``jnp.bartlett``.

    >>> import pypto as pto
    >>> pto.bartlett(5).numpy()
    array([0. , 0.5, 1. , 0.5, 0. ], dtype=float32)
    """
    return _window("bartlett", M, lambda k, n: 1 - np.abs(2 * k / (n - 1) - 1))


def hanning(M: int) -> Any:
    """The Hann window of ``M`` points, as ``jnp.hanning``.

    >>> import pypto as pto
    >>> pto.hanning(3).numpy()
    array([0., 1., 0.], dtype=float32)
    """
    return _window("hanning", M, lambda k, n: 0.5 - 0.5 * np.cos(2 * np.pi * k / (n - 1)))


def hamming(M: int) -> Any:
    """The Hamming window of ``M`` points, as ``jnp.hamming``.

    >>> import pypto as pto
    >>> pto.hamming(3).numpy()
    array([0.08, 1.  , 0.08], dtype=float32)
    """
    return _window("hamming", M, lambda k, n: 0.54 - 0.46 * np.cos(2 * np.pi * k / (n - 1)))


def blackman(M: int) -> Any:
    """The Blackman window of ``M`` points, as ``jnp.blackman``.

    >>> import pypto as pto
    >>> pto.blackman(5).numpy()[1:4]
    array([0.34, 1.  , 0.34], dtype=float32)
    """

    def f(k: np.ndarray, n: int) -> np.ndarray:
        t = 2 * np.pi * k / (n - 1)
        return 0.42 - 0.5 * np.cos(t) + 0.08 * np.cos(2 * t)

    return _window("blackman", M, f)


def kaiser(M: int, beta: Any) -> Any:
    """The Kaiser window of ``M`` points with shape ``beta``, as ``jnp.kaiser``:
    ``i0(beta·√(1 - (2k/(M-1) - 1)²)) / i0(beta)``. A number ``beta`` is computed in float64
    and rounded once; a tensor (traced, say) goes through :func:`i0`.

    >>> import pypto as pto
    >>> pto.kaiser(3, 5.0).numpy()
    array([0.03671089, 1.        , 0.03671089], dtype=float32)
    """
    if isinstance(beta, int | float | np.number) and not isinstance(beta, bool):
        b = float(beta)
        return _window(
            "kaiser", M, lambda k, n: np.i0(b * np.sqrt(1 - (2 * k / (n - 1) - 1) ** 2)) / np.i0(b)
        )
    n = rules.integer("kaiser", "M", M)
    (bv,) = _inexact("kaiser", beta)
    if n <= 1:
        return api.cast(api.asvalue(np.ones(max(n, 0), np.float32)), bv.dtype)
    t = 1 - (2 * np.arange(n, dtype=np.float64) / (n - 1) - 1) ** 2
    r = api.mul(bv, api.asvalue(np.sqrt(np.maximum(t, 0)).astype(bv.dtype.np)))
    return api.div(i0(r), i0(bv))


@_composite("heaviside", "step function: 0 below 0, 1 above, h2 at 0", jnp.heaviside)
def heaviside(x1: Any, x2: Any) -> Any:
    """The Heaviside step: 0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where ``x1 == 0`` (NaN
    where ``x1`` is NaN).

    >>> import pypto as pto
    >>> pto.heaviside(pto.tensor([-2.0, 0.0, 3.0]), 0.5).numpy()
    array([0. , 0.5, 1. ], dtype=float32)
    """
    u, v = _inexact("heaviside", x1, x2)
    at0 = api.where(api.equal(u, 0.0), v, u)  # a NaN x1 stays NaN
    return api.where(api.less(u, 0.0), 0.0, api.where(api.greater(u, 0.0), 1.0, at0))


@_composite(
    "isclose",
    "|a - b| <= atol + rtol·|b|, elementwise (infinities equal only to themselves)",
    jnp.isclose,
    differentiable=False,
)
def isclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Any:
    """Whether ``|a - b| <= atol + rtol·|b|`` elementwise, as bool, in the operands' promoted
    float dtype (the tolerances rounded to it, as JAX does); an infinity is close only to the
    same infinity, a NaN to nothing (to a NaN with ``equal_nan``).

    >>> import pypto as pto
    >>> pto.isclose(pto.tensor([1.0, 1.1, float("inf")]), 1.0000001).numpy()
    array([ True, False, False])
    """
    u, v = _inexact("isclose", a, b)
    d = u.dtype
    rt = float(np.asarray(rtol, d.np))
    at = float(np.asarray(atol, d.np))
    near = api.less_equal(api.abs(api.sub(u, v)), api.add(api.mul(api.abs(v), rt), at))
    ui, vi = composite.isinf(u), composite.isinf(v)
    same_inf = composite.logical_and(composite.logical_and(ui, vi), api.equal(u, v))
    out = api.where(composite.logical_or(ui, vi), same_inf, near)
    if equal_nan:
        both = composite.logical_and(composite.isnan(u), composite.isnan(v))
        out = composite.logical_or(out, both)
    return out


@_composite(
    "allclose",
    "whether isclose holds everywhere (a 0-d bool)",
    jnp.allclose,
    differentiable=False,
)
def allclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Any:
    """Whether :func:`isclose` holds for every element pair, as a 0-d bool tensor.

    >>> import pypto as pto
    >>> bool(pto.allclose(pto.tensor([1.0, 2.0]), pto.tensor([1.0, 2.000001])))
    True
    """
    return composite.all(isclose(a, b, rtol, atol, equal_nan))


# ---------------------------------------------------------------------------------------------
# Reductions


@_composite(
    "count_nonzero",
    "how many elements are nonzero, over axes (int32)",
    jnp.count_nonzero,
    differentiable=False,
)
def count_nonzero(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """How many elements over ``axis`` (all axes when None) are nonzero, int32 (NaN counts).

    >>> import pypto as pto
    >>> pto.count_nonzero(pto.tensor([[0, 1], [2, 3]]), axis=1).numpy()
    array([1, 2], dtype=int32)
    """
    v = api.asvalue(x, "count_nonzero")
    return api.sum(api.not_equal(v, False if v.dtype is dt.bool_ else 0), axis, keepdims)  # type: ignore[attr-defined]


def _ptp_jax(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return jnp.ptp(x, axis=axis, keepdims=keepdims)


@_composite("ptp", "max - min over axes (peak to peak)", _ptp_jax)
def ptp(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """The range ``max - min`` over ``axis`` (all axes when None).

    >>> import pypto as pto
    >>> int(pto.ptp(pto.tensor([4, 9, 2])))
    7
    """
    v = api.asvalue(x, "ptp")
    return api.sub(api.max(v, axis, keepdims), api.min(v, axis, keepdims))


@_composite("average", "weighted mean over axes", jnp.average)
def average(
    x: Any,
    axis: int | Sequence[int] | None = None,
    weights: Any = None,
    returned: bool = False,
    keepdims: bool = False,
) -> Any:
    """The mean of ``x`` over ``axis`` weighted by ``weights`` (of ``x``'s shape, or 1-d along a
    single ``axis``): ``sum(x·w) / sum(w)``; with ``returned``, also ``sum(w)`` (broadcast to
    the result's shape). Without weights it is :func:`pto.mean`.

    >>> import pypto as pto
    >>> float(pto.average(pto.tensor([1.0, 2.0, 4.0]), weights=pto.tensor([3.0, 1.0, 0.0])))
    1.25
    """
    v = api.asvalue(x, "average")
    if weights is None:
        (v,) = _inexact("average", v)
        avg = composite.mean(v, axis, keepdims)
        if not returned:
            return avg
        axes = rules.normalize_axes("average", axis, api._aval(v))
        count = math.prod(v.shape[a] for a in axes)
        return avg, api.broadcast_to(api.asvalue(np.asarray(count, avg.dtype.np)), avg.shape)
    u, w = _inexact("average", v, weights)
    if tuple(w.shape) != tuple(u.shape):
        if axis is None or not isinstance(axis, int) or len(w.shape) != 1:
            raise ShapeError(
                f"weights of shape {tuple(w.shape)} differ from the tensor's "
                f"{tuple(u.shape)}: 1-d weights need one int axis",
                op="average",
                hint="pass weights of the tensor's shape, or 1-d weights with axis=<int>",
            )
        a = composite._axis("average", u, axis)
        if w.shape[0] != u.shape[a]:
            raise ShapeError(
                f"{w.shape[0]} weights for axis {axis} of length {u.shape[a]}",
                op="average",
            )
        shape = [1] * len(u.shape)
        shape[a] = u.shape[a]
        w = api.broadcast_to(api.reshape(w, tuple(shape)), u.shape)
    total = api.sum(w, axis, keepdims)
    avg = api.div(api.sum(api.mul(u, w), axis, keepdims), total)
    return (avg, api.broadcast_to(total, avg.shape)) if returned else avg


def _cov_jax(
    m: Any,
    y: Any = None,
    rowvar: bool = True,
    bias: bool = False,
    ddof: int | None = None,
    fweights: Any = None,
    aweights: Any = None,
    dtype: Any = None,
) -> Any:
    return jnp.cov(m, y, rowvar, bias, ddof, fweights, aweights, dtype=dtype)


def _sample_weights(name: str, w: Any, n: int, integer: bool) -> Any:
    """``fweights`` or ``aweights`` checked (1-d, one per sample; ``integer`` for frequencies),
    made non-negative as JAX makes them (numpy refuses negative ones)."""
    v = api.asvalue(w, "cov")
    if len(v.shape) != 1 or v.shape[0] != n:  # type: ignore[attr-defined]
        raise ShapeError(
            f"{name} must be 1-d with one weight per sample ({n}), got {api._aval(v)}", op="cov"
        )
    if integer and not v.dtype.is_integer:  # type: ignore[attr-defined]
        raise DTypeError(
            f"fweights must be integers (frequencies), got {api._aval(v)}",
            op="cov",
            hint="pass real-valued weights as aweights",
        )
    return api.abs(v)


@_composite("cov", "the covariance matrix of variables (rows) over samples", _cov_jax)
def cov(
    m: Any,
    y: Any = None,
    rowvar: bool = True,
    bias: bool = False,
    ddof: int | None = None,
    fweights: Any = None,
    aweights: Any = None,
    dtype: Any = None,
) -> Any:
    """The covariance of the variables in the rows of ``m`` (columns with ``rowvar=False``;
    ``y`` adds more), over the samples along the other axis, as ``jnp.cov``: the centred
    data times its transpose on the cube, divided by ``n - ddof`` (``ddof`` 1, or 0 with
    ``bias``); ``fweights`` (integer frequencies) and ``aweights`` weight the samples as
    numpy's do. One variable gives a 0-d result.

    >>> import pypto as pto
    >>> pto.cov(pto.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).numpy()
    array([[ 1., -1.],
           [-1.,  1.]], dtype=float32)
    """
    vs = _inexact("cov", m) if y is None else _inexact("cov", m, y)
    for v, what in zip(vs, ("m", "y"), strict=False):
        if len(v.shape) > 2:
            raise ShapeError(f"{what} has more than 2 dimensions: {api._aval(v)}", op="cov")
    mv = vs[0]
    if dtype is not None:
        d = dt.dtype(dtype)
        if not d.is_floating:
            raise DTypeError(f"dtype must be a float dtype, got {d}", op="cov")
    x = atleast_2d(mv)
    if not rowvar and len(mv.shape) != 1:
        x = api.transpose(x)
    if x.shape[0] == 0:
        return api.asvalue(np.zeros((0, 0), np.float32))
    if y is not None:
        yv = atleast_2d(vs[1])
        if not rowvar and yv.shape[0] != 1:
            yv = api.transpose(yv)
        x = api.concat([x, yv], 0)
    k, n = x.shape
    if n == 0:
        return api.asvalue(np.full(() if k == 1 else (k, k), np.nan, x.dtype.np))
    if ddof is None:
        ddof = 0 if bias else 1
    ddof = rules.integer("cov", "ddof", ddof)
    w = None if fweights is None else _sample_weights("fweights", fweights, n, True)
    aw = None if aweights is None else _sample_weights("aweights", aweights, n, False)
    if aw is not None:
        w = aw if w is None else api.mul(w, aw)
    if dtype is not None:
        x = api.cast(x, dt.dtype(dtype))
        w = None if w is None else api.cast(w, dt.dtype(dtype))
    avg, w_sum = average(x, 1, w, returned=True)
    w_sum = api.getitem(w_sum, 0)
    if w is None:
        f: Any = n - ddof
    elif ddof == 0:
        f = w_sum
    elif aw is None:
        f = api.sub(w_sum, ddof)
    else:
        f = api.sub(w_sum, api.div(api.mul(api.sum(api.mul(w, aw)), ddof), w_sum))
    x = api.sub(x, api.reshape(avg, (k, 1)))
    xt = api.transpose(x if w is None else api.mul(x, w))
    return composite.squeeze(api.div(api.matmul(x, xt), f))


def _corrcoef_jax(x: Any, y: Any = None, rowvar: bool = True, dtype: Any = None) -> Any:
    return jnp.corrcoef(x, y, rowvar, dtype=dtype)


@_composite("corrcoef", "Pearson correlation coefficients of variables (rows)", _corrcoef_jax)
def corrcoef(x: Any, y: Any = None, rowvar: bool = True, dtype: Any = None) -> Any:
    """The correlation coefficients of the variables in the rows of ``x`` (see :func:`cov`),
    as ``jnp.corrcoef``: the covariance divided by both standard deviations, clipped to
    ``[-1, 1]``. One variable gives ``c / c`` (1, or NaN for a constant one).

    >>> import pypto as pto
    >>> pto.corrcoef(pto.tensor([[0.0, 1.0, 2.0], [4.0, 2.0, 0.0]])).numpy()
    array([[ 1., -1.],
           [-1.,  1.]], dtype=float32)
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if not len(c.shape):
        return api.div(c, c)
    s = api.sqrt(diag(c))
    c = api.div(api.div(c, api.reshape(s, (-1, 1))), api.reshape(s, (1, -1)))
    return composite.clip(c, -1.0, 1.0)


def _nan_reduction(name: str, doc: str, jax_fn: Any, **kw: Any) -> Any:
    def ref(x: Any, axis: Any = None, keepdims: bool = False, **more: Any) -> Any:
        return jax_fn(x, axis=axis, keepdims=keepdims, **more)

    return _composite(name, doc, ref, **kw)


def _floats(v: Any) -> bool:
    return bool(v.dtype.is_floating)


def _without_nan(v: Any, fill: float) -> Any:
    """``v`` with its NaNs replaced by ``fill`` (integers and bools have none)."""
    return api.where(composite.isnan(v), fill, v) if _floats(v) else v


@_nan_reduction("nansum", "sum over axes, NaN counted as 0", jnp.nansum)
def nansum(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    *,
    dtype: Any = None,
    out: Any = None,
    initial: Any = None,
    where: Any = None,
) -> Any:
    """:func:`pto.sum` with NaN counted as 0, with its keywords (``dtype``, ``initial``,
    ``where``, ``out=None``).

    >>> import pypto as pto
    >>> float(pto.nansum(pto.tensor([1.0, float("nan"), 2.0])))
    3.0
    >>> float(pto.nansum(pto.tensor([1.0, float("nan"), 2.0]), where=pto.tensor([1, 1, 0])))
    1.0
    """
    v = _without_nan(api.asvalue(x, "nansum"), 0.0)
    return api.sum(v, axis, keepdims, dtype=dtype, out=out, initial=initial, where=where)


@_nan_reduction("nanprod", "product over axes, NaN counted as 1", jnp.nanprod)
def nanprod(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    *,
    dtype: Any = None,
    out: Any = None,
    initial: Any = None,
    where: Any = None,
) -> Any:
    """:func:`pto.prod` with NaN counted as 1, with its keywords."""
    v = _without_nan(api.asvalue(x, "nanprod"), 1.0)
    return composite.prod(v, axis, keepdims, dtype=dtype, out=out, initial=initial, where=where)


@_nan_reduction("nanmean", "mean over axes of the elements that are not NaN", jnp.nanmean)
def nanmean(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    *,
    dtype: Any = None,
    out: Any = None,
    where: Any = None,
) -> Any:
    """The mean of the elements that are not NaN (NaN where all are); integers in float32.
    :func:`pto.mean`'s keywords: ``dtype``, ``where`` (only the selected elements count)
    and ``out=None``.

    >>> import pypto as pto
    >>> float(pto.nanmean(pto.tensor([1.0, float("nan"), 2.0])))
    1.5
    """
    v = api.asvalue(x, "nanmean")
    if not _floats(v):  # nothing to skip: the mean (as jnp.nanmean)
        return composite.mean(v, axis, keepdims, dtype=dtype, out=out, where=where)
    axes = rules.normalize_axes("nanmean", axis, api._aval(v))
    d = v.dtype  # type: ignore[attr-defined]
    res = d if dtype is None else dt.dtype(dtype, op="nanmean")
    if res is dt.bool_:
        raise DTypeError(
            f"dtype=bool for the mean of {api._aval(v)}: a mean is a number",
            op="nanmean",
            hint="pass a numeric dtype, or use pto.any / pto.all",
        )
    nan = composite.isnan(v)
    f = api.where(nan, 0.0, v)
    if not res.is_floating:
        f = api.cast(f, res)  # as jnp.nanmean: the sum of integers, truncated at the end
    # in float32 and rounded once, as jnp.nanmean computes float16 and bfloat16
    f = api.reduction_keywords("nanmean", api.cast(f, dt.float32), out=out, mask=where, fill=0.0)
    ok = api.reduction_keywords(
        "nanmean", api.cast(composite.logical_not(nan), dt.float32), mask=where, fill=0.0
    )
    m = api.div(api.sum(f, axes, keepdims), api.sum(ok, axes, keepdims))
    return api.cast(m, res)


def _nan_extreme(
    name: str, x: Any, axis: Any, keepdims: bool, out: Any, initial: Any, where: Any
) -> Any:
    v = api.asvalue(x, name)
    big = name == "nanmax"
    red = api.max if big else api.min
    if not _floats(v):
        return red(v, axis, keepdims, out=out, initial=initial, where=where)
    nan = composite.isnan(v)
    skip = api.where(nan, -math.inf if big else math.inf, v)
    r = red(skip, axis, keepdims, out=out, initial=initial, where=where)
    if initial is not None:  # the initial value stands for a row of NaNs (as JAX)
        return r
    return api.where(composite.all(nan, axis, keepdims), math.nan, r)


@_nan_reduction("nanmax", "maximum over axes, ignoring NaN (NaN where all are)", jnp.nanmax)
def nanmax(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    *,
    out: Any = None,
    initial: Any = None,
    where: Any = None,
) -> Any:
    """The maximum of the elements that are not NaN; NaN where every one is (``initial``
    where one is given). :func:`pto.max`'s keywords: ``initial``, ``where`` (needs
    ``initial``) and ``out=None``.

    >>> import pypto as pto
    >>> float(pto.nanmax(pto.tensor([1.0, float("nan"), 2.0])))
    2.0
    """
    return _nan_extreme("nanmax", x, axis, keepdims, out, initial, where)


@_nan_reduction("nanmin", "minimum over axes, ignoring NaN (NaN where all are)", jnp.nanmin)
def nanmin(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    *,
    out: Any = None,
    initial: Any = None,
    where: Any = None,
) -> Any:
    """The minimum of the elements that are not NaN; NaN where every one is (``initial``
    where one is given), with :func:`nanmax`'s keywords."""
    return _nan_extreme("nanmin", x, axis, keepdims, out, initial, where)


def _nan_arg(name: str, x: Any, axis: Any, keepdims: bool) -> Any:
    v = api.asvalue(x, name)
    arg = api.argmax if name == "nanargmax" else composite.argmin
    if not _floats(v):
        return arg(v, axis, keepdims)
    nan = composite.isnan(v)
    r = arg(api.where(nan, -math.inf if name == "nanargmax" else math.inf, v), axis, keepdims)
    return api.where(composite.all(nan, axis, keepdims), -1, r)


def _nanarg_jax(fn: Any) -> Any:
    def ref(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return fn(x, axis=axis, keepdims=keepdims)

    return ref


@_composite(
    "nanargmax",
    "index of the first maximum ignoring NaN (-1 where all are NaN), int32",
    _nanarg_jax(jnp.nanargmax),
    differentiable=False,
)
def nanargmax(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    """The index of the first maximum among the elements that are not NaN, int32; -1 where
    every one is NaN (as JAX; numpy raises).

    >>> import pypto as pto
    >>> int(pto.nanargmax(pto.tensor([1.0, float("nan"), 2.0])))
    2
    """
    return _nan_arg("nanargmax", x, axis, keepdims)


@_composite(
    "nanargmin",
    "index of the first minimum ignoring NaN (-1 where all are NaN), int32",
    _nanarg_jax(jnp.nanargmin),
    differentiable=False,
)
def nanargmin(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
    """The index of the first minimum among the elements that are not NaN, int32; -1 where
    every one is NaN."""
    return _nan_arg("nanargmin", x, axis, keepdims)


def _nanvar_jax(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0, **kw: Any) -> Any:
    return jnp.nanvar(x, axis=axis, keepdims=keepdims, ddof=ddof, **kw)


def _nanstd_jax(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0, **kw: Any) -> Any:
    return jnp.nanstd(x, axis=axis, keepdims=keepdims, ddof=ddof, **kw)


@_composite("nanvar", "variance over axes of the elements that are not NaN", _nanvar_jax)
def nanvar(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    ddof: int = 0,
    *,
    dtype: Any = None,
    out: Any = None,
    where: Any = None,
    mean: Any = None,
) -> Any:
    """The variance of the elements that are not NaN, divided by their count ``- ddof`` (NaN
    where that is not positive); integers in float32. :func:`pto.var`'s keywords: ``dtype``,
    ``where``, ``mean`` and ``out=None``.

    >>> import pypto as pto
    >>> float(pto.nanvar(pto.tensor([1.0, float("nan"), 3.0])))
    1.0
    """
    return composite.variance(
        "nanvar",
        x,
        axis,
        keepdims,
        ddof,
        None,
        dtype=dtype,
        out=out,
        where=where,
        given_mean=mean,
        skip_nan=True,
    )


@_composite("nanstd", "standard deviation over axes ignoring NaN", _nanstd_jax)
def nanstd(
    x: Any,
    axis: int | Sequence[int] | None = None,
    keepdims: bool = False,
    ddof: int = 0,
    *,
    dtype: Any = None,
    out: Any = None,
    where: Any = None,
    mean: Any = None,
) -> Any:
    """``sqrt(nanvar(x, axis, keepdims, ddof))``, with :func:`nanvar`'s keywords."""
    return api.sqrt(nanvar(x, axis, keepdims, ddof, dtype=dtype, out=out, where=where, mean=mean))


def _nanquantile_jax(
    x: Any, q: Any, axis: Any = None, method: str = "linear", keepdims: bool = False
) -> Any:
    return jnp.nanquantile(
        x, jnp.asarray(q, jnp.float32), axis=axis, method=method, keepdims=keepdims
    )


@_composite(
    "nanquantile", "the q-th quantiles over axes of the elements that are not NaN", _nanquantile_jax
)
def nanquantile(
    x: Any,
    q: Any,
    axis: int | Sequence[int] | None = None,
    method: str = "linear",
    keepdims: bool = False,
) -> Any:
    """:func:`~pypto.quantile` of the elements that are not NaN (NaN where all are), as
    ``jnp.nanquantile``.

    NaN sorts to the end of each row, so a row's quantile sits at ``q·(count - 1)`` with
    ``count`` its number of non-NaN elements: the positions differ from row to row and are
    read with ``take_along_axis`` from the sorted rows.

    >>> import pypto as pto
    >>> nan = float("nan")
    >>> pto.nanquantile(pto.tensor([[1.0, nan, 3.0, 2.0], [nan] * 4]), 0.5, axis=1).numpy()
    array([ 2., nan], dtype=float32)
    """
    return composite.quantiles("nanquantile", x, q, axis, method, keepdims, skip_nan=True)


def _nanmedian_jax(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    return jnp.nanmedian(x, axis=axis, keepdims=keepdims)


@_composite("nanmedian", "the median over axes of the elements that are not NaN", _nanmedian_jax)
def nanmedian(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """The median of the elements that are not NaN: :func:`nanquantile` at 0.5, the midpoint
    of the two middle ones (``jnp.nanmedian``).

    >>> import pypto as pto
    >>> float(pto.nanmedian(pto.tensor([4.0, float("nan"), 1.0, 2.0])))
    2.0
    """
    return composite.quantiles("nanmedian", x, 0.5, axis, "midpoint", keepdims, skip_nan=True)


def _nanpercentile_jax(
    x: Any, q: Any, axis: Any = None, method: str = "linear", keepdims: bool = False
) -> Any:
    return jnp.nanpercentile(
        x, jnp.asarray(q, jnp.float32), axis=axis, method=method, keepdims=keepdims
    )


@_composite("nanpercentile", "the q-th percentiles over axes ignoring NaN", _nanpercentile_jax)
def nanpercentile(
    x: Any,
    q: Any,
    axis: int | Sequence[int] | None = None,
    method: str = "linear",
    keepdims: bool = False,
) -> Any:
    """:func:`nanquantile` with ``q`` in percent (``q / 100`` in float32, as
    ``jnp.nanpercentile``).

    >>> import pypto as pto
    >>> float(pto.nanpercentile(pto.tensor([1.0, float("nan"), 5.0]), 25))
    2.0
    """
    qs = composite._static_q("nanpercentile", q)
    fraction = qs / np.float32(100) if isinstance(qs, np.ndarray) else api.div(qs, 100.0)
    return composite.quantiles("nanpercentile", x, fraction, axis, method, keepdims, skip_nan=True)


def _nancumsum_jax(x: Any, axis: Any = None, dtype: Any = None) -> Any:
    return jnp.nancumsum(x, axis, None if dtype is None else jnp.dtype(dtype))


def _nancumprod_jax(x: Any, axis: Any = None, dtype: Any = None) -> Any:
    return jnp.nancumprod(x, axis, None if dtype is None else jnp.dtype(dtype))


@_composite("nancumsum", "running sums along an axis, NaN counted as 0", _nancumsum_jax)
def nancumsum(x: Any, axis: int | None = None, dtype: Any = None) -> Any:
    """:func:`pto.cumsum` with NaN counted as 0 (``dtype``: of the result, as numpy's).

    >>> import pypto as pto
    >>> pto.nancumsum(pto.tensor([1.0, float("nan"), 2.0])).numpy()
    array([1., 1., 3.], dtype=float32)
    """
    v = _without_nan(api.asvalue(x, "nancumsum"), 0.0)
    return composite.cumsum(v, axis, dtype=dtype)


@_composite("nancumprod", "running products along an axis, NaN counted as 1", _nancumprod_jax)
def nancumprod(x: Any, axis: int | None = None, dtype: Any = None) -> Any:
    """:func:`pto.cumprod` with NaN counted as 1 (``dtype``: of the result)."""
    v = _without_nan(api.asvalue(x, "nancumprod"), 1.0)
    return composite.cumprod(v, axis, dtype=dtype)


# ---------------------------------------------------------------------------------------------
# Rearrangements


def _static_ints(op: str, name: str, v: Any) -> tuple[int, ...]:
    """``v`` (an int or a sequence of ints) as a tuple, or a clear error for a tensor."""
    if isinstance(v, int | np.integer):
        return (rules.integer(op, name, v),)
    if isinstance(v, Sequence) and not isinstance(v, str):
        return tuple(rules.integer(op, name, i) for i in v)
    raise ShapeError(
        f"{name} must be an int or a sequence of ints, got {type(v).__name__}",
        op=op,
        hint="shapes are static here: pass Python ints",
    )


def _cross_jax(
    a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None
) -> Any:
    return jnp.cross(a, b, axisa=axisa, axisb=axisb, axisc=axisc, axis=axis)


@_composite("cross", "cross products of 3-vectors (or 2-vectors) along an axis", _cross_jax)
def cross(
    a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None
) -> Any:
    """The cross product of the vectors along ``axisa`` of ``a`` and ``axisb`` of ``b`` (of
    length 3, or 2 with a zero third component), the other axes broadcast, the result's
    components along ``axisc`` (``axis`` sets all three), as ``jnp.cross``; two 2-vectors give
    the scalar z component.

    >>> import pypto as pto
    >>> pto.cross(pto.tensor([1.0, 0.0, 0.0]), pto.tensor([0.0, 1.0, 0.0])).numpy()
    array([0., 0., 1.], dtype=float32)
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    u, v = api.promote("cross", (a, b))
    u, v = composite.moveaxis(u, axisa, -1), composite.moveaxis(v, axisb, -1)
    if u.shape[-1] not in (2, 3) or v.shape[-1] not in (2, 3):
        raise ShapeError(
            f"vectors of length 2 or 3 only, got {api._aval(u)} and {api._aval(v)} along the "
            "axes of the components",
            op="cross",
            hint="pick the axes holding the components with axisa/axisb (or axis)",
        )

    def parts(w: Any) -> list[Any]:
        c = [api.getitem(w, (Ellipsis, i)) for i in range(w.shape[-1])]
        zero = api.asvalue(np.zeros((), w.dtype.np))  # +0, as JAX's zeros_like
        return c if len(c) == 3 else [*c, api.broadcast_to(zero, tuple(c[0].shape))]

    (a0, a1, a2), (b0, b1, b2) = parts(u), parts(v)
    if u.shape[-1] == 2 and v.shape[-1] == 2:
        return api.sub(api.mul(a0, b1), api.mul(a1, b0))
    c = [
        api.sub(api.mul(a1, b2), api.mul(a2, b1)),
        api.sub(api.mul(a2, b0), api.mul(a0, b2)),
        api.sub(api.mul(a0, b1), api.mul(a1, b0)),
    ]
    return composite.moveaxis(composite.stack(c, 0), 0, axisc)


@_composite("kron", "the Kronecker product", jnp.kron)
def kron(a: Any, b: Any) -> Any:
    """The Kronecker product, as ``jnp.kron``: every element of ``a`` times a whole copy of
    ``b``, laid out in blocks (the shorter shape padded with leading 1s).

    >>> import pypto as pto
    >>> pto.kron(pto.tensor([1, 10]), pto.tensor([1, 2, 3])).numpy()
    array([ 1,  2,  3, 10, 20, 30], dtype=int32)
    """
    u, v = api.promote("kron", (a, b))
    nd = max(len(u.shape), len(v.shape))  # type: ignore[attr-defined]
    sa = (1,) * (nd - len(u.shape)) + tuple(u.shape)  # type: ignore[attr-defined]
    sb = (1,) * (nd - len(v.shape)) + tuple(v.shape)  # type: ignore[attr-defined]
    wa = api.reshape(u, tuple(d for s in sa for d in (s, 1)))  # a's axes at even places
    wb = api.reshape(v, tuple(d for s in sb for d in (1, s)))  # b's at odd ones
    return api.reshape(api.mul(wa, wb), tuple(p * q for p, q in zip(sa, sb, strict=True)))


@_composite("roll", "elements shifted along axes, wrapping around", jnp.roll)
def roll(x: Any, shift: int | Sequence[int], axis: int | Sequence[int] | None = None) -> Any:
    """``x`` with its elements shifted by ``shift`` along ``axis`` (of the flattened tensor when
    None, its shape kept), those pushed off one end coming back at the other: two slices
    joined. Several shifts and axes pair up (numpy's broadcasting of the two).

    >>> import pypto as pto
    >>> pto.roll(pto.arange(5), 2).numpy()
    array([3, 4, 0, 1, 2], dtype=int32)
    >>> pto.roll(pto.arange(6).reshape(2, 3), -1, axis=1).numpy()
    array([[1, 2, 0],
           [4, 5, 3]], dtype=int32)
    """
    v = api.asvalue(x, "roll")
    shifts = _static_ints("roll", "shift", shift)
    if axis is None:
        shape = tuple(v.shape)  # type: ignore[attr-defined]
        flat = roll(api.reshape(v, (-1,)), sum(shifts), 0)
        return api.reshape(flat, shape)
    axes = _static_ints("roll", "axis", axis)
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
        raise ShapeError(
            f"{len(shifts)} shifts for {len(axes)} axes", op="roll", hint="pass one shift per axis"
        )
    n = max(len(shifts), len(axes))
    total: dict[int, int] = {}
    for s, a in zip(shifts * (n // len(shifts)), axes * (n // len(axes)), strict=True):
        a = composite._axis("roll", v, a)
        total[a] = total.get(a, 0) + s
    for a, s in total.items():
        size = v.shape[a]  # type: ignore[attr-defined]
        if size == 0 or s % size == 0:
            continue
        cut = size - s % size
        head = tuple(slice(cut, None) if i == a else slice(None) for i in range(len(v.shape)))  # type: ignore[attr-defined]
        tail = tuple(slice(None, cut) if i == a else slice(None) for i in range(len(v.shape)))  # type: ignore[attr-defined]
        v = api.concat([api.getitem(v, head), api.getitem(v, tail)], a)
    return v


_PAD_STATS = ("maximum", "minimum", "mean", "median")
_PAD_MODES = (
    "constant",
    "edge",
    "reflect",
    "symmetric",
    "wrap",
    "linear_ramp",
    "empty",
    *_PAD_STATS,
)
# the keywords each mode reads (numpy refuses the others, as JAX does)
_PAD_KEYWORDS = {
    "stat_length": _PAD_STATS,
    "end_values": ("linear_ramp",),
    "reflect_type": ("reflect", "symmetric"),
}


def _pad_jax(
    x: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0, **kw: Any
) -> Any:
    if mode == "constant":
        return jnp.pad(x, pad_width, mode, constant_values=constant_values)
    return jnp.pad(x, pad_width, mode, **{k: v for k, v in kw.items() if v is not None})


def _widths(op: str, what: str, v: Any, nd: int, integer: bool = True) -> np.ndarray:
    """numpy's per-axis (before, after) pairs: a number, one pair, or one pair per axis."""
    try:
        a = np.asarray(v, dtype=np.int64 if integer else None)
        if a.dtype == object:
            raise ValueError
        return np.broadcast_to(a, (nd, 2))
    except (ValueError, TypeError):
        raise ShapeError(
            f"{what} {v!r:.60} does not give (before, after) for each of {nd} axes",
            op=op,
            hint="a number, a pair, or one pair per axis: ((1, 2), (0, 0))",
        ) from None


@_composite("pad", "padded along each axis: numpy's modes (constant, edge, reflect, ...)", _pad_jax)
def pad(
    x: Any,
    pad_width: Any,
    mode: str = "constant",
    constant_values: Any = 0,
    *,
    stat_length: Any = None,
    end_values: Any = None,
    reflect_type: str | None = None,
) -> Any:
    """``x`` padded by ``pad_width`` (``(before, after)`` per axis, numpy's forms), as
    ``jnp.pad``, in numpy's modes:

    * ``"constant"`` (``constant_values``, a number or pairs per axis), ``"empty"`` (zeros,
      as JAX's), ``"edge"`` (the border element repeated);
    * ``"reflect"`` and ``"symmetric"``: mirrored without and with the border, again and
      again where the pad is longer than the axis; ``reflect_type="odd"`` mirrors through
      the border value (``2·edge - x``);
    * ``"wrap"``: the axis repeated periodically;
    * ``"linear_ramp"``: from ``end_values`` (default 0) towards the border, as
      ``jnp.linspace`` without its endpoint;
    * ``"maximum"``, ``"minimum"``, ``"mean"``, ``"median"``: the statistic of the
      ``stat_length`` elements at each end (all of the axis by default), rounded for
      integers.

    Axes are padded in order, each from the result so far. The sides are slices, flips,
    broadcasts and small reductions joined by ``concat``.

    >>> import pypto as pto
    >>> pto.pad(pto.tensor([1, 2, 3]), (2, 1), "reflect").numpy()
    array([3, 2, 1, 2, 3, 2], dtype=int32)
    >>> pto.pad(pto.tensor([[1.0]]), 1, constant_values=9.0).numpy()
    array([[9., 9., 9.],
           [9., 1., 9.],
           [9., 9., 9.]], dtype=float32)
    >>> pto.pad(pto.tensor([1.0, 2.0, 6.0]), 2, "mean", stat_length=2).numpy()
    array([1.5, 1.5, 1. , 2. , 6. , 4. , 4. ], dtype=float32)
    >>> pto.pad(pto.tensor([4.0, 5.0]), (2, 0), "linear_ramp").numpy()
    array([0., 2., 4., 5.], dtype=float32)
    """
    v = api.asvalue(x, "pad")
    nd = len(v.shape)  # type: ignore[attr-defined]
    if not isinstance(mode, str) or mode not in _PAD_MODES:
        raise ShapeError(
            f"mode {mode!r} is not one of {_PAD_MODES}",
            op="pad",
            hint="pad with a function (numpy's callable mode) by concatenating its results",
        )
    given = {"stat_length": stat_length, "end_values": end_values, "reflect_type": reflect_type}
    for key, val in given.items():
        if val is not None and mode not in _PAD_KEYWORDS[key]:
            raise ShapeError(
                f"{key} does not apply to mode {mode!r}",
                op="pad",
                hint=f"{key} is read by mode {' or '.join(map(repr, _PAD_KEYWORDS[key]))}",
            )
    if reflect_type not in (None, "even", "odd"):
        raise ShapeError(f"reflect_type {reflect_type!r} is not 'even' or 'odd'", op="pad")
    if reflect_type == "odd" and v.dtype is dt.bool_:  # type: ignore[attr-defined]
        raise DTypeError(
            f"reflect_type='odd' of {api._aval(v)}: 2·edge - x is not a bool",
            op="pad",
            hint="cast to an integer dtype first, or use reflect_type='even'",
        )
    if nd == 0:
        return v
    widths = _widths("pad", "pad_width", pad_width, nd)
    if (widths < 0).any():
        raise ShapeError(f"negative pad_width {pad_width!r} for {api._aval(v)}", op="pad")
    values = _widths("pad", "constant_values", constant_values, nd, integer=False)
    ends = _widths("pad", "end_values", 0 if end_values is None else end_values, nd, False)
    lengths = None if stat_length is None else _widths("pad", "stat_length", stat_length, nd)
    if lengths is not None and (lengths <= 0).any():
        raise ShapeError(
            f"stat_length {stat_length!r} has a length of 0 or less: no value to pad with",
            op="pad",
            hint="give each end at least one element, or stat_length=None for the whole axis",
        )
    if mode == "empty":
        mode, values = "constant", np.zeros((nd, 2))
    for ax in range(nd):
        before, after = (int(w) for w in widths[ax])
        if not before and not after:
            continue
        n = v.shape[ax]  # type: ignore[attr-defined]
        if n == 0 and mode != "constant":
            raise ShapeError(
                f"mode {mode!r} cannot pad axis {ax} of {api._aval(v)}: it is empty",
                op="pad",
                hint="pad an empty axis with mode='constant'",
            )
        if mode == "wrap":
            v = _wrap(v, ax, before, after)
        elif mode in ("reflect", "symmetric"):
            v = _mirror(v, ax, before, after, mode == "reflect", reflect_type == "odd")
        else:
            sides = []
            for i, k in ((0, before), (1, after)):
                if mode == "constant":
                    sides.append(_fill(v, ax, k, values[ax][i]))
                elif mode == "edge":
                    sides.append(_edge(v, ax, k, i))
                elif mode == "linear_ramp":
                    sides.append(_ramp(v, ax, k, i, ends[ax][i]))
                else:
                    m = n if lengths is None else min(int(lengths[ax][i]), n)
                    sides.append(_stat(v, ax, k, i, m, mode))
            parts = [sides[0]] if before else []
            v = api.concat([*parts, v, *([sides[1]] if after else [])], ax)
    return v


def _ramp(v: Any, ax: int, k: int, side: int, end: Any) -> Any:
    """``k`` values from ``end`` towards the border element, as ``jnp.linspace(end, border,
    k, endpoint=False)`` (flipped after the axis): ``end·(1 - t) + border·t``, ``t = j/k``,
    in float32, floored for integers."""
    d = v.dtype
    border = _along(v, ax, 0, 1) if side == 0 else _along(v, ax, -1, None)
    work = d if d.is_floating else dt.float32
    shape = [1] * len(v.shape)
    shape[ax] = k
    j = np.arange(k, dtype=np.float32) / np.float32(max(k, 1))
    t = api.asvalue(j.reshape(shape).astype(work.np))
    one_minus = api.sub(1.0, t)
    start = api.cast(api.asvalue(np.asarray(end)), work)
    if k == 1:  # linspace's one point is its start itself (a NaN or inf border is not read)
        r = api.broadcast_to(start, tuple(border.shape))
    else:
        r = api.add(api.mul(start, one_minus), api.mul(api.cast(border, work), t))
    if not d.is_floating and d is not dt.bool_:
        r = composite.floor(r)  # (a bool is the truth of the value, as JAX converts it)
    r = api.cast(r, d)
    return r if side == 0 else composite.flip(r, ax)


def _stat(v: Any, ax: int, k: int, side: int, m: int, mode: str) -> Any:
    """``k`` copies of the statistic of the ``m`` elements at one end of axis ``ax``."""
    part = _along(v, ax, 0, m) if side == 0 else _along(v, ax, -m, None)
    fn = {
        "maximum": api.max,
        "minimum": api.min,
        "mean": composite.mean,
        "median": composite.median,
    }[mode]
    s = fn(part, ax, True)
    d = v.dtype
    if not d.is_floating and d is not dt.bool_ and s.dtype.is_floating:
        s = composite.round(s)  # (as JAX: integers round their mean and median)
    shape = list(v.shape)
    shape[ax] = k
    return api.broadcast_to(api.cast(s, d), tuple(shape))


def _along(v: Any, ax: int, start: int | None, stop: int | None, step: int = 1) -> Any:
    key: list[Any] = [slice(None)] * len(v.shape)
    key[ax] = slice(start, stop, step)
    return api.getitem(v, tuple(key))


def _fill(v: Any, ax: int, k: int, value: Any) -> Any:
    shape = list(v.shape)
    shape[ax] = k
    scalar = api.asvalue(np.asarray(value).astype(v.dtype.np))
    return api.broadcast_to(scalar, tuple(shape))


def _edge(v: Any, ax: int, k: int, side: int) -> Any:
    shape = list(v.shape)
    shape[ax] = k
    border = _along(v, ax, 0, 1) if side == 0 else _along(v, ax, -1, None)
    return api.broadcast_to(border, tuple(shape))


def _wrap(v: Any, ax: int, before: int, after: int) -> Any:
    """The axis repeated: whole copies, and the remainders cut from its ends (JAX's order)."""
    n = v.shape[ax]
    left, lrem = divmod(before, n)
    right, rrem = divmod(after, n)
    parts = [_along(v, ax, n - lrem, n)] if lrem else []
    parts += [v] * (left + right + 1)
    if rrem:
        parts.append(_along(v, ax, 0, rrem))
    return api.concat(parts, ax) if len(parts) > 1 else v


def _mirror(v: Any, ax: int, before: int, after: int, reflect: bool, odd: bool = False) -> Any:
    """Mirrored pieces of at most the axis' length (less the border for ``reflect``), added
    one after another, each cut from the array padded so far (as JAX and numpy do); ``odd``
    mirrors each piece through the border value too (``2·edge - piece``)."""
    n = v.shape[ax]
    offset = 1 if reflect and n > 1 else 0
    for left, todo in ((True, before), (False, after)):
        while todo > 0:
            k = min(todo, n - offset)
            todo -= k
            if left:
                piece = _along(v, ax, offset + k - 1, offset - 1 if offset else None, -1)
            else:
                m = v.shape[ax]
                stop = m - 1 - offset - k
                piece = _along(v, ax, m - 1 - offset, stop if stop >= 0 else None, -1)
            if odd:
                edge = _along(v, ax, 0, 1) if left else _along(v, ax, -1, None)
                piece = api.sub(api.mul(edge, 2), piece)
            v = api.concat([piece, v] if left else [v, piece], ax)
    return v


def _static_pad_value(pv: Any, d: dt.DType) -> bool | int | float | None:
    """A padding value known now, as the ``lax_pad`` primitive's ``value`` for dtype ``d``
    (None: traced, not a scalar, or not exactly representable by an int or bool dtype)."""
    if not isinstance(pv, bool | int | float | np.generic | np.ndarray):
        return None
    a = np.asarray(pv)
    if a.ndim or a.dtype.kind not in "biuf":
        return None
    if d.is_floating:
        return float(a)
    if a.dtype.kind == "f" and not float(a).is_integer():
        return None
    if d is dt.bool_:
        return bool(a) if a in (0, 1) else None
    info = np.iinfo(d.np)
    n = int(a)
    return n if info.min <= n <= info.max else None


def lax_pad(operand: Any, padding_value: Any, padding_config: Sequence[Sequence[int]]) -> Any:
    """``jax.lax.pad``: ``(low, high, interior)`` per axis, filled with ``padding_value``;
    negative ``low``/``high`` crop.

    >>> import pypto as pto
    >>> pto.lax.pad(pto.tensor([1, 2, 3]), -1, [(1, -1, 1)]).numpy()
    array([-1,  1, -1,  2, -1], dtype=int32)
    """
    v = api.asvalue(operand, "lax.pad")
    nd = len(v.shape)  # type: ignore[attr-defined]
    cfg = [tuple(int(c) for c in p) for p in padding_config]
    if len(cfg) != nd or any(len(c) != 3 for c in cfg):
        raise ShapeError(
            f"padding_config {padding_config!r:.60} needs (low, high, interior) for each of the "
            f"{nd} axes of {api._aval(v)}",
            op="lax.pad",
        )
    if any(c[2] < 0 for c in cfg):
        raise ShapeError(f"negative interior padding in {cfg}", op="lax.pad")
    grow: dict[str, Any] = {"config": tuple((max(lo, 0), max(hi, 0), mid) for lo, hi, mid in cfg)}
    value = _static_pad_value(padding_value, v.dtype)  # type: ignore[attr-defined]
    if value is not None:
        # a constant: the pad fills with it (one op); 0 is the primitive's default
        if value != 0 or np.signbit(value):
            grow["value"] = value
        out = dispatch.bind(OPS["lax_pad"], (v,), grow)
    else:
        # a traced value (or one the dtype cannot hold): zeros, then a select of the value
        out = dispatch.bind(OPS["lax_pad"], (v,), grow)
        fill = api.cast(api.asvalue(padding_value, "lax.pad"), v.dtype)  # type: ignore[attr-defined]
        true = api.broadcast_to(api.asvalue(np.True_), tuple(v.shape))  # type: ignore[attr-defined]
        out = api.where(dispatch.bind(OPS["lax_pad"], (true,), grow), out, fill)
    crop = tuple(slice(-lo if lo < 0 else 0, hi if hi < 0 else None) for lo, hi, _ in cfg)
    return api.getitem(out, crop)


def _repeat_jax(x: Any, repeats: Any, axis: Any = None) -> Any:
    return jnp.repeat(x, np.asarray(repeats), axis)


@_composite("repeat", "each element repeated along an axis", _repeat_jax)
def repeat(x: Any, repeats: int | Sequence[int], axis: int | None = None) -> Any:
    """Each element of ``x`` repeated ``repeats`` times along ``axis`` (of the flattened tensor
    when None): one count for all, or one per element. A single count is a broadcast and a
    reshape; several are a gather by a static index.

    >>> import pypto as pto
    >>> pto.repeat(pto.tensor([1, 2]), 2).numpy()
    array([1, 1, 2, 2], dtype=int32)
    >>> pto.repeat(pto.tensor([[1, 2], [3, 4]]), [1, 2], axis=0).numpy()
    array([[1, 2],
           [3, 4],
           [3, 4]], dtype=int32)
    """
    v = api.asvalue(x, "repeat")
    reps = _static_ints("repeat", "repeats", repeats)
    if any(r < 0 for r in reps):
        raise ShapeError(f"negative repeats {list(reps)}", op="repeat")
    if axis is None:
        v, a = api.reshape(v, (-1,)), 0
    else:
        a = composite._axis("repeat", v, axis)
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    n = shape[a]
    if len(reps) == 1:
        r = reps[0]
        wide = api.reshape(v, (*shape[: a + 1], 1, *shape[a + 1 :]))
        wide = api.broadcast_to(wide, (*shape[: a + 1], r, *shape[a + 1 :]))
        return api.reshape(wide, (*shape[:a], n * r, *shape[a + 1 :]))
    if len(reps) != n:
        raise ShapeError(
            f"{len(reps)} repeats for axis {a} of length {n}",
            op="repeat",
            hint="pass one count, or one per element along the axis",
        )
    idx = np.repeat(np.arange(n, dtype=np.int32), reps)
    return api.take(v, idx, a)


@_composite("tile", "the tensor repeated as a whole along each axis", jnp.tile)
def tile(x: Any, reps: int | Sequence[int]) -> Any:
    """``x`` repeated ``reps[i]`` times along axis ``i`` (``reps`` padded with leading 1s to
    ``x``'s rank, or ``x`` with leading size-1 axes to ``reps``'s length): a broadcast and a
    reshape.

    >>> import pypto as pto
    >>> pto.tile(pto.tensor([1, 2]), (2, 2)).numpy()
    array([[1, 2, 1, 2],
           [1, 2, 1, 2]], dtype=int32)
    """
    v = api.asvalue(x, "tile")
    r = _static_ints("tile", "reps", reps)
    if any(k < 0 for k in r):
        raise ShapeError(f"negative reps {list(r)}", op="tile")
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    nd = max(len(shape), len(r))
    shape = (1,) * (nd - len(shape)) + shape
    r = (1,) * (nd - len(r)) + r
    inter = tuple(d for s in shape for d in (1, s))
    wide = api.broadcast_to(
        api.reshape(v, inter), tuple(d for k, s in zip(r, shape, strict=True) for d in (k, s))
    )
    return api.reshape(wide, tuple(k * s for k, s in zip(r, shape, strict=True)))


def _gradient_jax(f: Any, *varargs: Any, axis: Any = None, edge_order: Any = None) -> Any:
    return jnp.gradient(f, *varargs, axis=axis, edge_order=edge_order)


def _along_axis(v: Any, a: int, lo: int | None, hi: int | None) -> Any:
    return api.getitem(v, (slice(None),) * a + (slice(lo, hi),))


def _weighted3(w: Sequence[Any], f: Sequence[Any]) -> Any:
    return api.add(api.add(api.mul(w[0], f[0]), api.mul(w[1], f[1])), api.mul(w[2], f[2]))


def _gradient_axis(v: Any, h: Any, a: int, second: bool) -> Any:
    """The differences of ``v`` along axis ``a`` with spacing ``h`` (a scalar, or the 1-d
    coordinates): centred inside, one-sided of first (or, ``second``, second) order at the
    two ends, numpy's formulas."""

    def s(lo: int | None, hi: int | None) -> Any:
        return _along_axis(v, a, lo, hi)

    if len(getattr(h, "shape", ())) == 0:
        inner = api.div(api.mul(api.sub(s(2, None), s(None, -2)), 0.5), h)
        if second:
            first = api.div(_weighted3((-1.5, 2.0, -0.5), (s(0, 1), s(1, 2), s(2, 3))), h)
            last = api.div(_weighted3((0.5, -2.0, 1.5), (s(-3, -2), s(-2, -1), s(-1, None))), h)
        else:
            first = api.div(api.sub(s(1, 2), s(0, 1)), h)
            last = api.div(api.sub(s(-1, None), s(-2, -1)), h)
        return api.concat([first, inner, last], a)
    shape = [1] * len(v.shape)
    shape[a] = h.shape[0]
    x = api.reshape(h, tuple(shape))

    def c(lo: int | None, hi: int | None) -> Any:
        return _along_axis(x, a, lo, hi)

    d1, d2 = api.sub(c(1, -1), c(0, -2)), api.sub(c(2, None), c(1, -1))
    both = api.add(d1, d2)
    w = (
        api.div(api.neg(d2), api.mul(d1, both)),
        api.div(api.sub(d2, d1), api.mul(d1, d2)),
        api.div(d1, api.mul(d2, both)),
    )
    inner = _weighted3(w, (s(0, -2), s(1, -1), s(2, None)))
    if second:
        e1, e2 = api.sub(c(1, 2), c(0, 1)), api.sub(c(2, 3), c(1, 2))
        eb = api.add(e1, e2)
        w = (
            api.div(api.neg(api.add(api.mul(e1, 2.0), e2)), api.mul(e1, eb)),
            api.div(eb, api.mul(e1, e2)),
            api.div(api.neg(e1), api.mul(e2, eb)),
        )
        first = _weighted3(w, (s(0, 1), s(1, 2), s(2, 3)))
        e1, e2 = api.sub(c(-2, -1), c(-3, -2)), api.sub(c(-1, None), c(-2, -1))
        eb = api.add(e1, e2)
        w = (
            api.div(e2, api.mul(e1, eb)),
            api.div(api.neg(eb), api.mul(e1, e2)),
            api.div(api.add(api.mul(e2, 2.0), e1), api.mul(e2, eb)),
        )
        last = _weighted3(w, (s(-3, -2), s(-2, -1), s(-1, None)))
    else:
        first = api.div(api.sub(s(1, 2), s(0, 1)), api.sub(c(1, 2), c(0, 1)))
        last = api.div(api.sub(s(-1, None), s(-2, -1)), api.sub(c(-1, None), c(-2, -1)))
    return api.concat([first, inner, last], a)


@_composite("gradient", "numerical derivatives by central differences", _gradient_jax)
def gradient(
    f: Any, *varargs: Any, axis: int | Sequence[int] | None = None, edge_order: int | None = None
) -> Any:
    """The derivative of the samples ``f`` along each axis (``axis``: all by default), as
    ``jnp.gradient``: central differences inside and one-sided ones at the ends; spacing 1,
    or ``varargs`` — one scalar for every axis, or one per axis, each a scalar step or the
    1-d coordinates. One axis gives a tensor, several a list. ``edge_order=2`` takes the
    ends to second order, as numpy does (JAX has only the first).

    >>> import pypto as pto
    >>> pto.gradient(pto.tensor([1.0, 4.0, 9.0, 16.0])).numpy()
    array([3., 4., 6., 7.], dtype=float32)
    >>> pto.gradient(pto.tensor([1.0, 4.0, 9.0, 16.0]), edge_order=2).numpy()
    array([2., 4., 6., 8.], dtype=float32)
    """
    v, *hs = _inexact("gradient", f, *varargs)
    nd = len(v.shape)
    if edge_order not in (None, 1, 2):
        raise ShapeError(f"edge_order must be 1 or 2, got {edge_order!r}", op="gradient")
    axes = (
        tuple(range(nd))
        if axis is None
        else tuple(
            composite._axis("gradient", v, a)
            for a in (axis if isinstance(axis, Sequence) else (axis,))
        )
    )
    if not axes:
        return []
    need = 3 if edge_order == 2 else 2
    if min(v.shape[a] for a in axes) < need:
        raise ShapeError(
            f"gradient of {api._aval(v)} along axes {axes}: at least {need} samples are needed "
            f"along each (edge_order={edge_order})",
            op="gradient",
        )
    if not hs:
        hs = [1.0] * len(axes)
    elif len(hs) == 1:
        hs = hs * len(axes)
    elif len(hs) != len(axes):
        raise ShapeError(
            f"{len(hs)} spacings for {len(axes)} axes: give one for all or one per axis",
            op="gradient",
        )
    for h, a in zip(hs, axes, strict=True):
        hshape: tuple[int, ...] = tuple(getattr(h, "shape", ()))
        if len(hshape) > 1 or (len(hshape) == 1 and hshape[0] != v.shape[a]):
            raise ShapeError(
                f"a spacing must be a scalar or the {v.shape[a]} coordinates of axis {a}, "
                f"got {api._aval(h)}",
                op="gradient",
            )
    out = [_gradient_axis(v, h, a, edge_order == 2) for h, a in zip(hs, axes, strict=True)]
    return out[0] if len(out) == 1 else out


def _unwrap_jax(p: Any, discont: Any = None, axis: int = -1, period: Any = 2 * np.pi) -> Any:
    return jnp.unwrap(p, discont, axis, period)


@_composite("unwrap", "phases unwrapped: jumps above discont taken modulo period", _unwrap_jax)
def unwrap(p: Any, discont: Any = None, axis: int = -1, period: Any = 2 * np.pi) -> Any:
    """``p`` along ``axis`` with each jump larger than ``discont`` (``period / 2`` by
    default) replaced by its equivalent modulo ``period``, as ``jnp.unwrap``: the corrections
    are summed along the axis (a scan).

    >>> import pypto as pto
    >>> pto.unwrap(pto.tensor([0.0, 3.0, 6.5, 0.5]), period=6.0).numpy()
    array([0. , 3. , 0.5, 0.5], dtype=float32)
    """
    v: Any
    v, per = api.promote("unwrap", (p, period))
    a = composite._axis("unwrap", v, axis)
    if not v.shape[a]:
        return v
    half = composite.floor_divide(per, 2) if v.dtype.is_integer else api.div(per, 2)
    if discont is None:
        discont = api.div(per, 2)
    dd = diff(v, axis=a)
    ddmod = api.sub(composite.remainder(api.add(dd, half), per), half)
    ddmod = api.where(
        composite.logical_and(api.equal(ddmod, api.neg(half)), api.greater(dd, 0)), half, ddmod
    )
    fix = api.where(api.less(api.abs(dd), discont), 0, api.sub(ddmod, dd))
    rest = api.add(_along_axis(v, a, 1, None), composite.cumsum(fix, a))
    return api.concat([_along_axis(v, a, 0, 1), rest], a)


@_composite("diff", "n-th differences along an axis", jnp.diff)
def diff(x: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """The ``n``-th differences along ``axis``, ``x[i+1] - x[i]`` applied ``n`` times, after
    joining ``prepend`` and ``append`` (scalars are broadcast to one slice); bools differ by
    ``!=``, as in numpy and JAX.

    >>> import pypto as pto
    >>> pto.diff(pto.tensor([1, 4, 9, 16]), 2).numpy()
    array([2, 2], dtype=int32)
    """
    v = api.asvalue(x, "diff")
    n = rules.integer("diff", "n", n)
    if n < 0:
        raise ShapeError(f"order n must be non-negative, got {n}", op="diff")
    if len(v.shape) == 0:  # type: ignore[attr-defined]
        raise ShapeError("diff of a 0-d tensor", op="diff", hint="it needs at least one axis")
    a = composite._axis("diff", v, axis)
    if n == 0:  # the input as it is, prepend and append unused (as numpy)
        return v
    parts: list[Any] = []
    for extra in (prepend, append):
        if extra is None:
            parts.append(None)
            continue
        # a Python scalar is weak (it takes the tensor's dtype), as in JAX
        e = api.promote("diff", (v, extra))[1] if dt.weak_kind(extra) is not None else extra
        e = api.asvalue(e, "diff")
        if len(e.shape) == 0:  # type: ignore[attr-defined]
            shape = list(v.shape)  # type: ignore[attr-defined]
            shape[a] = 1
            e = api.broadcast_to(e, tuple(shape))
        parts.append(e)
    joined = [p for p in (parts[0], v, parts[1]) if p is not None]
    if len(joined) > 1:
        v = api.concat(api.promote("diff", joined), a)
    nd = len(v.shape)  # type: ignore[attr-defined]
    for _ in range(n):
        m = v.shape[a]  # type: ignore[attr-defined]
        hi = tuple(slice(1, None) if i == a else slice(None) for i in range(nd))
        lo = tuple(slice(None, max(m - 1, 0)) if i == a else slice(None) for i in range(nd))
        u, w = api.getitem(v, hi), api.getitem(v, lo)
        v = api.not_equal(u, w) if v.dtype is dt.bool_ else api.sub(u, w)  # type: ignore[attr-defined]
    return v


def _kth(op: str, v: Any, kth: Any, axis: int) -> tuple[Any, int, int]:
    """``v`` with ``axis`` last, and ``kth`` checked and made non-negative."""
    a = composite._axis(op, v, axis)
    n = v.shape[a]
    k = rules.integer(op, "kth", kth)
    if not -n <= k < n:
        raise ShapeError(f"kth={k} is out of range for an axis of {n} ({api._aval(v)})", op=op)
    return composite.swapaxes(v, a, -1), k % n, a


def _partition_jax(a: Any, kth: int, axis: int = -1) -> Any:
    return jnp.partition(a, kth, axis)


@_composite("partition", "the kth element in place, smaller ones before it", _partition_jax)
def partition(a: Any, kth: int, axis: int = -1) -> Any:
    """``a`` along ``axis`` rearranged so that its ``kth`` element is the one a sort would
    put there, with no larger element before it and no smaller one after, as
    ``jnp.partition``: the ``kth + 1`` smallest ascending, then the rest descending (two
    :func:`top_k`, JAX's order).

    >>> import pypto as pto
    >>> pto.partition(pto.tensor([5, 1, 4, 2, 3]), 1).numpy()
    array([1, 2, 5, 4, 3], dtype=int32)
    """
    v, k, ax = _kth("partition", api.asvalue(a, "partition"), kth, axis)
    bottom = api.neg(composite.top_k(api.neg(v), k + 1)[0])
    top = composite.top_k(v, v.shape[-1] - k - 1)[0]
    return composite.swapaxes(api.concat([bottom, top], -1), -1, ax)


def _argpartition_jax(a: Any, kth: int, axis: int = -1) -> Any:
    return jnp.argpartition(a, kth, axis)


@_composite(
    "argpartition",
    "indices that partition the tensor around its kth element",
    _argpartition_jax,
    differentiable=False,
)
def argpartition(a: Any, kth: int, axis: int = -1) -> Any:
    """The indices along ``axis`` that would :func:`partition` ``a``, as
    ``jnp.argpartition``: those of the ``kth + 1`` smallest (ascending, ties lowest index
    first), then every other index in increasing order.

    >>> import pypto as pto
    >>> pto.argpartition(pto.tensor([5, 1, 4, 2, 3]), 1).numpy()
    array([1, 3, 0, 2, 4], dtype=int32)
    """
    v, k, ax = _kth("argpartition", api.asvalue(a, "argpartition"), kth, axis)
    n = v.shape[-1]
    bottom = composite.top_k(api.neg(v), k + 1)[1]
    # the rest in increasing order: a top_k of 0 at the bottom's places and 1 elsewhere
    # (ties go lowest index first)
    iota = api.asvalue(np.arange(n, dtype=np.int32).reshape(n, 1))
    taken = composite.any(api.equal(composite.expand_dims(bottom, -2), iota), -1)
    top = composite.top_k(api.where(taken, 0.0, 1.0), n - k - 1)[1]
    return composite.swapaxes(api.concat([bottom, top], -1), -1, ax)


def _resize_jax(a: Any, new_shape: Any) -> Any:
    return jnp.resize(a, new_shape)


@_composite("resize", "the elements repeated (or cut) to fill a new shape", _resize_jax)
def resize(a: Any, new_shape: int | Sequence[int]) -> Any:
    """A tensor of ``new_shape`` filled with ``a``'s elements in row-major order, repeated
    as often as needed (zeros when ``a`` is empty), as ``jnp.resize``.

    >>> import pypto as pto
    >>> pto.resize(pto.tensor([1, 2, 3]), (2, 4)).numpy()
    array([[1, 2, 3, 1],
           [2, 3, 1, 2]], dtype=int32)
    """
    v = api.reshape(api.asvalue(a, "resize"), (-1,))
    shape = tuple(
        rules.integer("resize", "new_shape", s)
        for s in (new_shape if isinstance(new_shape, Sequence) else (new_shape,))
    )
    if shape and min(shape) < 0:
        raise ShapeError(f"new_shape {shape} has a negative length", op="resize")
    size, n = math.prod(shape), v.shape[0]
    if not n or not size:
        return api.asvalue(np.zeros(shape, v.dtype.np))
    v = tile(v, -(-size // n))
    return api.reshape(api.getitem(v, slice(0, size)), shape)


def _rollaxis_jax(a: Any, axis: int, start: int = 0) -> Any:
    return jnp.rollaxis(a, axis, start)


@_composite("rollaxis", "one axis moved to before position start", _rollaxis_jax)
def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """``a`` with ``axis`` moved to just before ``start`` (numpy's older
    :func:`moveaxis`), as ``jnp.rollaxis``.

    >>> import pypto as pto
    >>> pto.rollaxis(pto.ones((2, 3, 4)), 2).shape
    (4, 2, 3)
    """
    v = api.asvalue(a, "rollaxis")
    nd = len(v.shape)  # type: ignore[attr-defined]
    ax = composite._axis("rollaxis", v, axis)
    start = rules.integer("rollaxis", "start", start)
    if not -nd <= start <= nd:
        raise ShapeError(f"start={start} must be in [{-nd}, {nd}]", op="rollaxis")
    start = start + nd if start < 0 else start
    return composite.moveaxis(v, ax, start - 1 if start > ax else start)


def _array_equal_jax(a1: Any, a2: Any, equal_nan: bool = False) -> Any:
    return jnp.array_equal(a1, a2, equal_nan)


@_composite(
    "array_equal",
    "whether two tensors have one shape and equal elements",
    _array_equal_jax,
    differentiable=False,
)
def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Any:
    """A 0-d bool: the same shape and equal elements (NaNs equal with ``equal_nan``), as
    ``jnp.array_equal``; different shapes are simply False.

    >>> import pypto as pto
    >>> bool(pto.array_equal(pto.tensor([1.0, 2.0]), [1, 2]))
    True
    """
    u, v = api.asvalue(a1, "array_equal"), api.asvalue(a2, "array_equal")
    if tuple(u.shape) != tuple(v.shape):  # type: ignore[attr-defined]
        return api.asvalue(np.asarray(False))
    eq = api.equal(u, v)
    if equal_nan:
        both = composite.logical_and(composite.isnan(u), composite.isnan(v))
        eq = composite.logical_or(eq, both)
    return composite.all(eq)


@_composite(
    "array_equiv",
    "whether two tensors are equal after broadcasting",
    jnp.array_equiv,
    differentiable=False,
)
def array_equiv(a1: Any, a2: Any) -> Any:
    """A 0-d bool: whether the two broadcast to one shape with equal elements, as
    ``jnp.array_equiv`` (False when they do not broadcast).

    >>> import pypto as pto
    >>> bool(pto.array_equiv(pto.tensor([[1, 2], [1, 2]]), [1, 2]))
    True
    """
    u, v = api.asvalue(a1, "array_equiv"), api.asvalue(a2, "array_equiv")
    try:
        np.broadcast_shapes(tuple(u.shape), tuple(v.shape))  # type: ignore[attr-defined]
    except ValueError:
        return api.asvalue(np.asarray(False))
    return composite.all(api.equal(u, v))


def trim_zeros(filt: Any, trim: str = "fb", axis: int | Sequence[int] | None = None) -> Any:
    """``filt`` without its leading (``"f"`` in ``trim``) and trailing (``"b"``) zeros, as
    ``jnp.trim_zeros``: along each of ``axis`` (all axes by default), the slices that are
    zero throughout. The length depends on the values, so it needs them: eagerly, not under
    ``jit`` (as in JAX).

    >>> import pypto as pto
    >>> pto.trim_zeros(pto.tensor([0, 0, 1, 0, 2, 0])).numpy()
    array([1, 0, 2], dtype=int32)
    """
    v = api.asvalue(filt, "trim_zeros")
    if not isinstance(trim, str) or not set(trim.lower()) <= {"f", "b"}:
        raise ShapeError(
            f"trim must be a string of 'f' and 'b', got {trim!r}",
            op="trim_zeros",
            hint="'f' trims the front, 'b' the back, 'fb' both",
        )
    c = _concrete(v)
    if c is None:
        raise TraceError(
            f"the shape of trim_zeros' result depends on the values of {api._aval(v)}, and "
            "shapes are static when tracing",
            op="trim_zeros",
            hint="trim eagerly, or slice with positions you know",
        )
    nd = c.ndim
    if nd == 0:
        raise ShapeError("trim_zeros of a 0-d tensor: it trims along axes", op="trim_zeros")
    given = range(nd) if axis is None else axis if isinstance(axis, Sequence) else (axis,)
    axes = {rules.normalize_axis("trim_zeros", a, nd) for a in given}
    nonzero_at = c != 0
    key: list[slice] = []
    for a in range(nd):
        if a not in axes:
            key.append(slice(None))
            continue
        hit = np.flatnonzero(nonzero_at.any(axis=tuple(i for i in range(nd) if i != a)))
        if not hit.size:  # all zeros: nothing is left along this axis
            key.append(slice(0, 0))
            continue
        lo = int(hit[0]) if "f" in trim.lower() else 0
        hi = int(hit[-1]) + 1 if "b" in trim.lower() else c.shape[a]
        key.append(slice(lo, hi))
    return api.getitem(v, tuple(key))


def mask_indices(
    n: int, mask_func: Callable[[Any, int], Any], k: int = 0, *, size: int | None = None
) -> tuple[Any, Any]:
    """The row and column indices where ``mask_func(ones((n, n)), k)`` is nonzero (say
    :func:`triu` or :func:`tril`), as ``jnp.mask_indices``: known from ``n`` and ``k``
    alone, so computed eagerly, inside ``jit`` too; ``size`` pads as :func:`nonzero`'s.

    >>> import pypto as pto
    >>> rows, cols = pto.mask_indices(3, pto.triu, 1)
    >>> rows.numpy(), cols.numpy()
    (array([0, 0, 1], dtype=int32), array([1, 2, 2], dtype=int32))
    """
    from pypto.ops.setops import nonzero

    n = rules.integer("mask_indices", "n", n)
    with dispatch.pushed(dispatch.eager_trace()):  # a function of n and k alone
        mask = mask_func(api.asvalue(np.ones((n, n), np.int32)), k)
        out = nonzero(api.asvalue(np.asarray(mask)), size=size)
    return out[0], out[1]


# ---------------------------------------------------------------------------------------------
# numpy's questions about arrays, answered from their static shape and dtype


def ndim(a: Any) -> int:
    """The number of axes of ``a`` (a tensor, a numpy array or a Python number), as
    ``jnp.ndim``.

    >>> import pypto as pto
    >>> pto.ndim(pto.ones((2, 3))), pto.ndim(1.5)
    (2, 0)
    """
    return len(shape(a))


def shape(a: Any) -> tuple[int, ...]:
    """The shape of ``a`` (a tensor, a numpy array or a Python number), as ``jnp.shape``.

    >>> import pypto as pto
    >>> pto.shape(pto.ones((2, 3)))
    (2, 3)
    """
    s = getattr(a, "shape", None)
    return tuple(s) if s is not None else tuple(np.shape(a))


def size(a: Any, axis: int | None = None) -> int:
    """The number of elements of ``a`` (along ``axis`` when given), as ``jnp.size``.

    >>> import pypto as pto
    >>> pto.size(pto.ones((2, 3))), pto.size(pto.ones((2, 3)), 1)
    (6, 3)
    """
    s = shape(a)
    if axis is None:
        return math.prod(s)
    return s[rules.normalize_axis("size", axis, len(s))]


def isscalar(element: Any) -> bool:
    """Whether ``element`` is a scalar: a Python or numpy number, or a 0-d tensor, as
    ``jnp.isscalar`` (which counts 0-d arrays as scalars, where numpy does not).

    >>> import pypto as pto
    >>> pto.isscalar(2.0), pto.isscalar(pto.tensor(2.0)), pto.isscalar(pto.ones(2))
    (True, True, False)
    """
    if isinstance(element, bool | int | float | np.generic):
        return not isinstance(element, np.str_ | np.bytes_)
    s = getattr(element, "shape", None)
    return s is not None and hasattr(element, "dtype") and len(s) == 0


def iscomplexobj(x: Any) -> bool:
    """False: pypto has no complex dtype (``jnp.iscomplexobj`` of a real array).

    >>> import pypto as pto
    >>> pto.iscomplexobj(pto.ones(2))
    False
    """
    return bool(np.iscomplexobj(x)) if isinstance(x, np.ndarray | complex) else False


def isrealobj(x: Any) -> bool:
    """True for every tensor: pypto has no complex dtype (``jnp.isrealobj``).

    >>> import pypto as pto
    >>> pto.isrealobj(pto.ones(2))
    True
    """
    return not iscomplexobj(x)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape that ``shapes`` broadcast to, as ``jnp.broadcast_shapes``; a
    ``ShapeError`` names them when they do not.

    >>> import pypto as pto
    >>> pto.broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
    try:
        return tuple(np.broadcast_shapes(*(tuple(s) for s in shapes)))
    except ValueError:
        raise ShapeError(
            "shapes " + ", ".join(str(tuple(s)) for s in shapes) + " do not broadcast",
            op="broadcast_shapes",
            hint="each axis, aligned from the right, must be equal or 1",
        ) from None


@_composite("ravel", "the elements as a 1-d tensor, in row-major order", jnp.ravel)
def ravel(x: Any) -> Any:
    """The elements as a 1-d tensor, in row-major order (``x.reshape(-1)``).

    >>> import pypto as pto
    >>> pto.ravel(pto.ones((2, 3))).shape
    (6,)
    """
    return api.reshape(api.asvalue(x, "ravel"), (-1,))


def _at_least(op: str, nd: int, xs: tuple[Any, ...]) -> Any:
    out = []
    for x in xs:
        v = api.asvalue(x, op)
        s = tuple(v.shape)  # type: ignore[attr-defined]
        if len(s) < nd:
            if nd == 3 and len(s) == 2:
                s = (*s, 1)
            elif nd == 3 and len(s) == 1:
                s = (1, *s, 1)
            else:
                s = (1,) * (nd - len(s)) + s
            v = api.reshape(v, s)
        out.append(v)
    return out[0] if len(out) == 1 else out


@_composite("atleast_1d", "tensors with at least one axis", jnp.atleast_1d)
def atleast_1d(*xs: Any) -> Any:
    """Each tensor with at least one axis (a 0-d one becomes shape ``(1,)``); one tensor for
    one argument, a list for several.

    >>> import pypto as pto
    >>> pto.atleast_1d(pto.tensor(3.0)).shape
    (1,)
    """
    return _at_least("atleast_1d", 1, xs)


@_composite("atleast_2d", "tensors with at least two axes", jnp.atleast_2d)
def atleast_2d(*xs: Any) -> Any:
    """Each tensor with at least two axes, size-1 axes added in front.

    >>> import pypto as pto
    >>> pto.atleast_2d(pto.ones(3)).shape
    (1, 3)
    """
    return _at_least("atleast_2d", 2, xs)


@_composite("atleast_3d", "tensors with at least three axes", jnp.atleast_3d)
def atleast_3d(*xs: Any) -> Any:
    """Each tensor with at least three axes: ``(n,)`` becomes ``(1, n, 1)`` and ``(m, n)``
    becomes ``(m, n, 1)``, as numpy's.

    >>> import pypto as pto
    >>> pto.atleast_3d(pto.ones((2, 3))).shape
    (2, 3, 1)
    """
    return _at_least("atleast_3d", 3, xs)


def _listed(op: str, xs: Any) -> list[Any]:
    shape = getattr(xs, "shape", None)
    if shape is not None and len(shape) >= 1:  # a tensor is the sequence of its slices (numpy)
        v = api.asvalue(xs, op)
        return [api.getitem(v, i) for i in range(shape[0])]
    if isinstance(xs, str) or not isinstance(xs, Sequence) or not xs:
        raise ShapeError(
            f"needs a non-empty sequence of tensors, got {type(xs).__name__}",
            op=op,
            hint=f"pto.{op}([a, b])",
        )
    return list(xs)


@_composite("hstack", "tensors joined along axis 1 (axis 0 for 1-d ones)", jnp.hstack)
def hstack(xs: Sequence[Any]) -> Any:
    """Tensors joined horizontally: along axis 1, or axis 0 when they are 1-d (0-d ones count as
    1-d).

    >>> import pypto as pto
    >>> pto.hstack([pto.tensor([1, 2]), pto.tensor([3])]).numpy()
    array([1, 2, 3], dtype=int32)
    """
    vs = [_at_least("hstack", 1, (x,)) for x in _listed("hstack", xs)]
    return api.concat(vs, 0 if len(vs[0].shape) == 1 else 1)


@_composite("vstack", "tensors joined along axis 0 (1-d ones as rows)", jnp.vstack)
def vstack(xs: Sequence[Any]) -> Any:
    """Tensors joined vertically, each taken as at least 2-d (a 1-d one is a row).

    >>> import pypto as pto
    >>> pto.vstack([pto.tensor([1, 2]), pto.tensor([3, 4])]).numpy()
    array([[1, 2],
           [3, 4]], dtype=int32)
    """
    return api.concat([_at_least("vstack", 2, (x,)) for x in _listed("vstack", xs)], 0)


@_composite("dstack", "tensors joined along axis 2 (depth)", jnp.dstack)
def dstack(xs: Sequence[Any]) -> Any:
    """Tensors joined along the third axis, each taken as at least 3-d (see
    :func:`atleast_3d`)."""
    return api.concat([_at_least("dstack", 3, (x,)) for x in _listed("dstack", xs)], 2)


@_composite(
    "column_stack", "1-d tensors as columns (2-d ones as they are), joined", jnp.column_stack
)
def column_stack(xs: Sequence[Any]) -> Any:
    """Tensors joined as columns: a 1-d tensor becomes one column, a 2-d one is joined as it
    is.

    >>> import pypto as pto
    >>> pto.column_stack([pto.tensor([1, 2]), pto.tensor([3, 4])]).numpy()
    array([[1, 3],
           [2, 4]], dtype=int32)
    """
    vs = []
    for x in _listed("column_stack", xs):
        v = api.asvalue(x, "column_stack")
        if len(v.shape) < 2:  # type: ignore[attr-defined]
            v = api.reshape(v, (-1, 1))
        vs.append(v)
    return api.concat(vs, 1)


@_composite("append", "values joined at the end (flattened when axis is None)", jnp.append)
def append(arr: Any, values: Any, axis: int | None = None) -> Any:
    """``values`` joined after ``arr`` along ``axis``; both flattened when ``axis`` is None.

    >>> import pypto as pto
    >>> pto.append(pto.tensor([[1, 2]]), pto.tensor([3])).numpy()
    array([1, 2, 3], dtype=int32)
    """
    if axis is None:
        return api.concat([ravel(arr), ravel(values)], 0)
    return api.concat([arr, values], axis)


@_composite("flipud", "the order of rows reversed (axis 0)", jnp.flipud)
def flipud(x: Any) -> Any:
    """``x`` reversed along axis 0.

    >>> import pypto as pto
    >>> pto.flipud(pto.tensor([[1, 2], [3, 4]])).numpy()
    array([[3, 4],
           [1, 2]], dtype=int32)
    """
    v = api.asvalue(x, "flipud")
    if len(v.shape) < 1:  # type: ignore[attr-defined]
        raise ShapeError("flipud needs at least one axis", op="flipud")
    return composite.flip(v, 0)


@_composite("fliplr", "the order of columns reversed (axis 1)", jnp.fliplr)
def fliplr(x: Any) -> Any:
    """``x`` reversed along axis 1 (it needs two axes)."""
    v = api.asvalue(x, "fliplr")
    if len(v.shape) < 2:  # type: ignore[attr-defined]
        raise ShapeError(
            f"fliplr needs at least two axes, got {api._aval(v)}",
            op="fliplr",
            hint="pto.flip(x) reverses a 1-d tensor",
        )
    return composite.flip(v, 1)


@_composite("rot90", "rotation by 90° k times in the plane of two axes", jnp.rot90)
def rot90(x: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Any:
    """``x`` rotated by 90° ``k`` times, from the first of ``axes`` towards the second (a flip
    and a transpose, as numpy's).

    >>> import pypto as pto
    >>> pto.rot90(pto.tensor([[1, 2], [3, 4]])).numpy()
    array([[2, 4],
           [1, 3]], dtype=int32)
    """
    v = api.asvalue(x, "rot90")
    k = rules.integer("rot90", "k", k) % 4
    a0, a1 = (composite._axis("rot90", v, a) for a in _static_ints("rot90", "axes", axes))
    if len(_static_ints("rot90", "axes", axes)) != 2 or a0 == a1:
        raise ShapeError(f"axes must be two different axes, got {axes}", op="rot90")
    if k == 0:
        return v
    if k == 2:
        return composite.flip(v, (a0, a1))
    perm = list(range(len(v.shape)))  # type: ignore[attr-defined]
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return api.transpose(composite.flip(v, a1), tuple(perm))
    return composite.flip(api.transpose(v, tuple(perm)), a1)


@_composite("meshgrid", "coordinate tensors from 1-d coordinate vectors", jnp.meshgrid)
def meshgrid(*xs: Any, indexing: str = "xy") -> list[Any]:
    """One tensor per 1-d input, each broadcast over the others' axes: Cartesian (``"xy"``,
    the first two axes swapped) or matrix (``"ij"``) indexing.

    >>> import pypto as pto
    >>> gx, gy = pto.meshgrid(pto.tensor([1, 2, 3]), pto.tensor([10, 20]))
    >>> gx.shape, gy.numpy()[:, 0].tolist()
    ((2, 3), [10, 20])
    """
    if indexing not in ("xy", "ij"):
        raise ShapeError(f"indexing must be 'xy' or 'ij', got {indexing!r}", op="meshgrid")
    vs = [api.asvalue(x, "meshgrid") for x in xs]
    for v in vs:
        if len(v.shape) != 1:  # type: ignore[attr-defined]
            raise ShapeError(
                f"meshgrid takes 1-d coordinate vectors, got {api._aval(v)}",
                op="meshgrid",
                hint="flatten them with pto.ravel",
            )
    sizes = [v.shape[0] for v in vs]  # type: ignore[attr-defined]
    if indexing == "xy" and len(vs) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, v in enumerate(vs):
        pos = i
        if indexing == "xy" and len(vs) >= 2 and i < 2:
            pos = 1 - i
        shape = [1] * len(vs)
        shape[pos] = sizes[pos]
        out.append(api.broadcast_to(api.reshape(v, tuple(shape)), tuple(sizes)))
    return out


# ---------------------------------------------------------------------------------------------
# Norms (``pto.linalg.norm``)


_SVD_ORDS = (2, -2, "nuc")


@_composite("norm", "vector and matrix norms (numpy.linalg.norm)", jnp.linalg.norm)
def norm(
    x: Any, ord: Any = None, axis: int | tuple[int, int] | None = None, keepdims: bool = False
) -> Any:
    """``numpy.linalg.norm``: over one axis a vector norm (``ord`` None or 2: Euclidean; 1;
    ±inf: the largest or smallest magnitude; 0: the count of nonzeros; any other p:
    ``sum(|x|^p)^(1/p)``), over two a matrix norm (None or ``"fro"``: Frobenius; 1 and -1: the
    largest and smallest column sum of magnitudes; ±inf: of row sums). ``axis=None`` takes
    every axis with ``ord=None`` (the Frobenius norm of any shape), else the one or two axes
    of a 1-d or 2-d ``x``. The matrix norms ``2``, ``-2`` (the largest and smallest singular
    value) and ``"nuc"`` (their sum) come from :func:`pto.linalg.svdvals`.

    >>> import pypto as pto
    >>> float(pto.linalg.norm(pto.tensor([3.0, 4.0])))
    5.0
    >>> pto.linalg.norm(pto.tensor([[1.0, -2.0], [3.0, 4.0]]), 1).numpy()
    array(6., dtype=float32)
    """
    (v,) = _inexact("norm", x)
    nd = len(v.shape)
    if axis is None:
        if ord is None:
            return api.sqrt(api.sum(api.mul(v, v), None, keepdims))
        if nd not in (1, 2):
            raise ShapeError(
                f"ord={ord!r} with axis=None needs a 1-d or 2-d tensor, got {api._aval(v)}",
                op="norm",
                hint="name the axis (or two) to take the norm over",
            )
        axes: tuple[int, ...] = tuple(range(nd))
    else:
        axes = tuple(composite._axis("norm", v, a) for a in _static_ints("norm", "axis", axis))
    a = api.abs(v)
    if len(axes) == 1:
        if isinstance(ord, str):
            raise ShapeError(f"ord={ord!r} is a matrix norm; one axis was given", op="norm")
        p = 2.0 if ord is None else float(ord)
        if p == math.inf:
            return api.max(a, axes, keepdims)
        if p == -math.inf:
            return api.min(a, axes, keepdims)
        if p == 0:
            return api.sum(api.cast(api.not_equal(v, 0.0), v.dtype), axes, keepdims)
        if p == 1:
            return api.sum(a, axes, keepdims)
        if p == 2:
            return api.sqrt(api.sum(api.mul(v, v), axes, keepdims))
        return api.pow(api.sum(api.pow(a, p), axes, keepdims), 1.0 / p)
    if len(axes) != 2 or axes[0] == axes[1]:
        raise ShapeError(f"axis must name one axis or two different ones, got {axis!r}", op="norm")
    r, c = axes
    if ord is None or ord == "fro":
        return api.sqrt(api.sum(api.mul(v, v), axes, keepdims))
    if ord in _SVD_ORDS:  # from the singular values of the two axes moved last
        from pypto.ops.spectral import svd  # (spectral builds on this module)

        rest = [i for i in range(nd) if i not in axes]
        s = svd(api.transpose(v, (*rest, r, c)), compute_uv=False)
        if s.shape[-1] == 0 and ord == -2:
            raise ShapeError(
                f"ord=-2 of empty matrices {api._aval(v)}: the smallest of no singular values",
                op="norm",
            )
        if ord == "nuc" or s.shape[-1] == 0:  # (ord=2 of an empty matrix is 0, as in JAX)
            ext = api.sum(s, -1)
        else:
            ext = api.getitem(s, (Ellipsis, 0 if ord == 2 else -1))
        if keepdims:
            return api.reshape(ext, tuple(1 if i in axes else n for i, n in enumerate(v.shape)))
        return ext
    if ord in (1, -1):  # column sums: over the row axis, then the extreme over columns
        sums, over = api.sum(a, (r,), True), (c,)
    elif ord in (math.inf, -math.inf):
        sums, over = api.sum(a, (c,), True), (r,)
    else:
        raise ShapeError(f"invalid matrix norm ord={ord!r}", op="norm")
    ext = api.max(sums, over, True) if ord in (1, math.inf) else api.min(sums, over, True)
    if keepdims:
        return ext
    return api.reshape(ext, tuple(s for i, s in enumerate(ext.shape) if i not in axes))


# ---------------------------------------------------------------------------------------------
# Building, splitting and choosing


def _diag_jax(v: Any, k: int = 0) -> Any:
    return jnp.diag(v, k)


@_composite("diag", "a diagonal matrix from a vector, or a matrix's diagonal", _diag_jax)
def diag(v: Any, k: int = 0) -> Any:
    """For a 1-d ``v``, the square matrix with ``v`` on diagonal ``k`` (zeros elsewhere); for a
    2-d one, its diagonal ``k`` (:func:`~pypto.diagonal`), as ``jnp.diag``.

    >>> import pypto as pto
    >>> pto.diag(pto.tensor([1, 2]), 1).numpy()
    array([[0, 1, 0],
           [0, 0, 2],
           [0, 0, 0]], dtype=int32)
    """
    x = api.asvalue(v, "diag")
    k = rules.integer("diag", "k", k)
    if len(x.shape) == 2:  # type: ignore[attr-defined]
        return composite.diagonal(x, k)
    if len(x.shape) != 1:  # type: ignore[attr-defined]
        raise ShapeError(
            f"needs a 1-d or 2-d tensor, got {api._aval(x)}",
            op="diag",
            hint="for the diagonals of a stack of matrices use pto.diagonal(x, k, -2, -1)",
        )
    n = x.shape[0] + abs(k)  # type: ignore[attr-defined]
    zero = api.asvalue(np.zeros((), x.dtype.np))  # type: ignore[attr-defined]
    if k:
        x = api.concat([x, api.broadcast_to(zero, (abs(k),))], 0)
    # row i holds v[i] (k ≥ 0), column j holds v[j] (k < 0): a broadcast, kept on the diagonal
    vals = api.broadcast_to(api.reshape(x, (n, 1) if k >= 0 else (1, n)), (n, n))
    return api.where(np.eye(n, k=k, dtype=bool), vals, zero)


@_composite("diagflat", "a diagonal matrix from the flattened input", jnp.diagflat)
def diagflat(v: Any, k: int = 0) -> Any:
    """``diag(ravel(v), k)``, as ``jnp.diagflat``.

    >>> import pypto as pto
    >>> pto.diagflat(pto.tensor([[1.0, 2.0]])).numpy()
    array([[1., 0.],
           [0., 2.]], dtype=float32)
    """
    x = api.asvalue(v, "diagflat")
    return diag(api.reshape(x, (math.prod(x.shape),)), k)  # type: ignore[attr-defined]


def _array_split_jax(x: Any, indices_or_sections: Any, axis: int = 0) -> Any:
    return jnp.array_split(x, indices_or_sections, axis)


@_composite("array_split", "slices along an axis, sections of nearly equal size", _array_split_jax)
def array_split(x: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Any]:
    """:func:`~pypto.split` that also takes a number of sections that does not divide the
    axis: the first ``n % sections`` pieces are one longer, as ``jnp.array_split``.

    >>> import pypto as pto
    >>> [t.numpy().tolist() for t in pto.array_split(pto.arange(5), 3)]
    [[0, 1], [2, 3], [4]]
    """
    v = api.asvalue(x, "array_split")
    if not isinstance(indices_or_sections, int):
        return composite.split(v, indices_or_sections, axis)
    k = indices_or_sections
    if k <= 0:
        raise ShapeError(f"the number of sections must be positive, got {k}", op="array_split")
    a = rules.normalize_axis("array_split", axis, len(v.shape), api._aval(v))  # type: ignore[attr-defined]
    n = v.shape[a]  # type: ignore[attr-defined]
    size, extra = divmod(n, k)
    cuts = list(itertools.accumulate([size + 1] * extra + [size] * (k - extra)))[:-1]
    return composite.split(v, cuts, a)


def _hvd_split(op: str, axis: int, least: int) -> Any:
    def jax_impl(x: Any, indices_or_sections: Any) -> Any:
        return getattr(jnp, op)(x, indices_or_sections)

    def fn(x: Any, indices_or_sections: int | Sequence[int]) -> list[Any]:
        v = api.asvalue(x, op)
        nd = len(v.shape)  # type: ignore[attr-defined]
        if nd < least:
            raise ShapeError(
                f"needs at least {least} axes, got {api._aval(v)}", op=op, hint="use pto.split"
            )
        return composite.split(v, indices_or_sections, 0 if op == "hsplit" and nd == 1 else axis)

    one_d = " (axis 0 for a 1-d tensor)" if op == "hsplit" else ""
    fn.__doc__ = f"``split(x, indices_or_sections, axis={axis})``{one_d}, as ``jnp.{op}``."
    fn.__module__ = __name__
    return _composite(op, f"split along axis {axis}{one_d}", jax_impl)(fn)


hsplit = _hvd_split("hsplit", 1, 1)
vsplit = _hvd_split("vsplit", 0, 2)
dsplit = _hvd_split("dsplit", 2, 3)


def _unstack_jax(x: Any, axis: int = 0) -> Any:
    return jnp.unstack(x, axis=axis)


@_composite("unstack", "the slices along an axis, as a tuple", _unstack_jax)
def unstack(x: Any, axis: int = 0) -> tuple[Any, ...]:
    """The slices of ``x`` along ``axis``, as ``jnp.unstack`` (the inverse of ``stack``).

    >>> import pypto as pto
    >>> [t.numpy().tolist() for t in pto.unstack(pto.tensor([[1, 2], [3, 4]]), 1)]
    [[1, 3], [2, 4]]
    """
    v = api.asvalue(x, "unstack")
    nd = len(v.shape)  # type: ignore[attr-defined]
    if nd == 0:
        raise ShapeError("a scalar has no axis to unstack", op="unstack")
    a = rules.normalize_axis("unstack", axis, nd, api._aval(v))
    return tuple(api.getitem(v, (slice(None),) * a + (i,)) for i in range(v.shape[a]))  # type: ignore[attr-defined]


def _broadcast_arrays_jax(*xs: Any) -> Any:
    return tuple(jnp.broadcast_arrays(*xs))


@_composite("broadcast_arrays", "the operands broadcast to one shape", _broadcast_arrays_jax)
def broadcast_arrays(*xs: Any) -> tuple[Any, ...]:
    """Every operand broadcast to their common shape (each keeps its dtype), as
    ``jnp.broadcast_arrays``.

    >>> import pypto as pto
    >>> [t.shape for t in pto.broadcast_arrays(pto.ones((2, 1)), pto.ones(3))]
    [(2, 3), (2, 3)]
    """
    vs = [api.asvalue(x, "broadcast_arrays") for x in xs]
    try:
        shape = np.broadcast_shapes(*(tuple(v.shape) for v in vs))  # type: ignore[attr-defined]
    except ValueError:
        raise ShapeError(
            f"{', '.join(str(api._aval(v)) for v in vs)} do not broadcast together",
            op="broadcast_arrays",
        ) from None
    return tuple(api.broadcast_to(v, shape) for v in vs)


def _select_jax(condlist: Any, choicelist: Any, default: Any = 0) -> Any:
    return jnp.select(condlist, choicelist, default)


@_composite("select", "from the first true condition's choice, elementwise", _select_jax)
def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """Each element from the choice of the first condition that holds there (``default`` where
    none does), as ``jnp.select``.

    >>> import pypto as pto
    >>> x = pto.arange(5)
    >>> pto.select([x < 2, x > 3], [x, x * 10], -1).numpy()
    array([ 0,  1, -1, -1, 40], dtype=int32)
    """
    if len(condlist) != len(choicelist):
        raise ShapeError(
            f"{len(condlist)} conditions but {len(choicelist)} choices",
            op="select",
            hint="one choice per condition",
        )
    if not condlist:
        raise ShapeError("needs at least one condition", op="select")
    out = default
    for cond, choice in zip(reversed(condlist), reversed(choicelist), strict=True):
        c = api.asvalue(cond, "select")
        if c.dtype is not dt.bool_:  # type: ignore[attr-defined]
            raise ShapeError(f"conditions must be bool, got {api._aval(c)}", op="select")
        out = api.where(c, choice, out)
    shape = np.broadcast_shapes(*(tuple(api.asvalue(t).shape) for t in (*condlist, *choicelist)))  # type: ignore[attr-defined]
    return api.broadcast_to(out, shape)


def _isin_jax(element: Any, test_elements: Any, invert: bool = False) -> Any:
    return jnp.isin(element, test_elements, invert=invert)


@_composite(
    "isin", "whether each element is among the test elements", _isin_jax, differentiable=False
)
def isin(element: Any, test_elements: Any, invert: bool = False) -> Any:
    """Whether each element equals one of ``test_elements`` (any shape), as ``jnp.isin``
    (``invert``: whether it equals none).

    >>> import pypto as pto
    >>> pto.isin(pto.tensor([1, 2, 3]), pto.tensor([3, 1])).numpy()
    array([ True, False,  True])
    """
    e = api.asvalue(element, "isin")
    t = api.asvalue(test_elements, "isin")
    flat = api.reshape(t, (math.prod(t.shape),))  # type: ignore[attr-defined]
    hit = composite.any(api.equal(composite.expand_dims(e, -1), flat), -1)
    return composite.logical_not(hit) if rules.flag("isin", "invert", invert) else hit


def _cumulative(op: str, x: Any, axis: int | None, dtype: Any, include_initial: bool) -> Any:
    v = api.asvalue(x, op)
    nd = len(v.shape)  # type: ignore[attr-defined]
    if axis is None:
        if nd > 1:
            raise ShapeError(
                f"axis is required for {api._aval(v)}: {nd} axes",
                op=op,
                hint="pass axis=...; numpy 2 no longer flattens",
            )
        axis = 0
    if nd == 0:
        raise ShapeError("needs at least one axis", op=op)
    if op == "cumulative_sum" and dtype is None and v.dtype in (dt.int8, dt.bool_):  # type: ignore[attr-defined]
        dtype = dt.int32  # JAX sums small integers in the default int (its products not)
    run = composite.cumsum if op == "cumulative_sum" else composite.cumprod
    out = run(v, axis, dtype=dtype)
    if not rules.flag(op, "include_initial", include_initial):
        return out
    a = rules.normalize_axis(op, axis, nd, api._aval(v))
    shape = list(out.shape)
    shape[a] = 1
    first = np.asarray(0 if op == "cumulative_sum" else 1, out.dtype.np)
    return api.concat([api.broadcast_to(api.asvalue(first), tuple(shape)), out], a)


def _cumulative_sum_jax(
    x: Any, axis: int | None = None, dtype: Any = None, include_initial: bool = False
) -> Any:
    return jnp.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)


def _cumulative_prod_jax(
    x: Any, axis: int | None = None, dtype: Any = None, include_initial: bool = False
) -> Any:
    return jnp.cumulative_prod(x, axis=axis, dtype=dtype, include_initial=include_initial)


@_composite("cumulative_sum", "running sums (numpy 2: with include_initial)", _cumulative_sum_jax)
def cumulative_sum(
    x: Any, axis: int | None = None, dtype: Any = None, include_initial: bool = False
) -> Any:
    """numpy 2's running sums: :func:`~pypto.cumsum` along ``axis`` (required beyond 1-d),
    with a leading 0 when ``include_initial``.

    >>> import pypto as pto
    >>> pto.cumulative_sum(pto.tensor([1, 2, 3]), include_initial=True).numpy()
    array([0, 1, 3, 6], dtype=int32)
    """
    return _cumulative("cumulative_sum", x, axis, dtype, include_initial)


@_composite(
    "cumulative_prod", "running products (numpy 2: with include_initial)", _cumulative_prod_jax
)
def cumulative_prod(
    x: Any, axis: int | None = None, dtype: Any = None, include_initial: bool = False
) -> Any:
    """numpy 2's running products: :func:`~pypto.cumprod` along ``axis`` (required beyond
    1-d), with a leading 1 when ``include_initial``.

    >>> import pypto as pto
    >>> pto.cumulative_prod(pto.tensor([2, 3, 4])).numpy()
    array([ 2,  6, 24], dtype=int32)
    """
    return _cumulative("cumulative_prod", x, axis, dtype, include_initial)
