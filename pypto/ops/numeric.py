"""numpy's numerical helpers as composites: elementwise (``fabs``, ``cbrt``, ``sinc``,
``divmod``, ``modf``), products (``vdot``, ``vecdot``, ``matvec``, ``vecmat``,
``matrix_transpose``), polynomials (``polyval``, ``polyadd``, ``polysub``, ``polymul``,
``polydiv``, ``polyder``, ``polyint``, ``poly``), signals (``convolve``, ``correlate``,
``trapezoid``) and lookups (``interp``, ``digitize``, ``bincount``).

Each is checked against its ``jax.numpy`` namesake (tests/ops/test_ops_vs_jax.py), and
compiles for the NPU like any composite. Products go through ``matmul``, so float16 and
bfloat16 accumulate in float32 and round once, as JAX's dots do; a convolution is one gather
of the signal's windows (static indices) and one ``matmul``.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import DTypeError, ShapeError, TraceError
from pypto.ops import api, composite, rules
from pypto.ops.composite import _composite
from pypto.ops.indexing import IndexUpdateRef, _concrete
from pypto.ops.numpy_lib import _inexact, _narrow, _wide, trunc
from pypto.ops.table import Value

# ---------------------------------------------------------------------------------------------
# Elementwise


@_composite("fabs", "absolute value as a float, elementwise", jnp.fabs)
def fabs(x: Any) -> Any:
    """``|x|`` in a float dtype (integers become float32), as ``jnp.fabs``.

    >>> import pypto as pto
    >>> pto.fabs(pto.tensor([-2, 3])).numpy()
    array([2., 3.], dtype=float32)
    """
    (v,) = _inexact("fabs", x)
    return api.abs(v)


@_composite("cbrt", "cube root, elementwise (real, odd)", jnp.cbrt)
def cbrt(x: Any) -> Any:
    """The real cube root: ``|x|^(1/3)`` with x's sign, refined by one Newton step (so perfect
    cubes come out exact: 1/3 is not a float).

    >>> import pypto as pto
    >>> pto.cbrt(pto.tensor([27.0, -8.0, 0.001])).numpy()
    array([ 3. , -2. ,  0.1], dtype=float32)
    """
    (v,), d = _wide("cbrt", x)
    t = api.abs(v)
    finite = composite.logical_and(api.greater(t, 0.0), composite.isfinite(t))
    ts = api.where(finite, t, 1.0)  # the step divides by y²: only where y is a positive number
    y = api.pow(ts, 1.0 / 3.0)
    y = api.sub(y, api.div(api.sub(api.mul(api.mul(y, y), y), ts), api.mul(api.mul(y, y), 3.0)))
    r = api.where(finite, y, t)
    return _narrow(api.where(api.less(v, 0.0), api.neg(r), api.where(finite, r, v)), d)


@_composite("sinc", "sin(πx) / (πx), 1 at 0, elementwise", jnp.sinc)
def sinc(x: Any) -> Any:
    """The normalized sinc, ``sin(πx) / (πx)`` and 1 at 0 (its gradient there is 0).

    >>> import pypto as pto
    >>> [f"{v:.6f}" for v in pto.sinc(pto.tensor([0.0, 0.5, 1.0])).numpy()]
    ['1.000000', '0.636620', '-0.000000']
    """
    (v,), d = _wide("sinc", x)
    zero = api.equal(v, 0.0)
    px = api.mul(api.where(zero, 1.0, v), math.pi)
    return _narrow(api.where(zero, 1.0, api.div(api.sin(px), px)), d)


def _divmod_jax(x: Any, y: Any) -> Any:
    return tuple(jnp.divmod(x, y))


@_composite("divmod", "(x // y, x % y), elementwise", _divmod_jax, differentiable=False)
def divmod(x: Any, y: Any) -> tuple[Any, Any]:
    """``(floor_divide(x, y), remainder(x, y))``, as ``jnp.divmod``.

    >>> import pypto as pto
    >>> [t.numpy().tolist() for t in pto.divmod(pto.tensor([7, -7]), 2)]
    [[3, -4], [1, 1]]
    """
    return composite.floor_divide(x, y), composite.remainder(x, y)


def _modf_jax(x: Any) -> Any:
    return tuple(jnp.modf(x))


@_composite("modf", "(fractional part, integral part), elementwise", _modf_jax)
def modf(x: Any) -> tuple[Any, Any]:
    """``(x - trunc(x), trunc(x))``, both with x's sign (``modf(-0.5) = (-0.5, -0.0)``), as
    ``jnp.modf``; integers become float32.

    >>> import pypto as pto
    >>> [t.numpy().tolist() for t in pto.modf(pto.tensor([2.5, -0.75]))]
    [[0.5, -0.75], [2.0, -0.0]]
    """
    (v,) = _inexact("modf", x)
    whole = trunc(v)
    return api.sub(v, whole), whole


# ---------------------------------------------------------------------------------------------
# Products


def _vdot_jax(a: Any, b: Any) -> Any:
    return jnp.vdot(a, b)


@_composite("vdot", "the dot product of the flattened operands", _vdot_jax)
def vdot(a: Any, b: Any) -> Any:
    """``sum(ravel(a) * ravel(b))`` as one ``matmul`` of vectors, as ``jnp.vdot``.

    >>> import pypto as pto
    >>> float(pto.vdot(pto.tensor([[1.0, 2.0], [3.0, 4.0]]), pto.ones((2, 2))))
    10.0
    """
    u, v = api.promote("vdot", (a, b))
    nu, nv = math.prod(u.shape), math.prod(v.shape)  # type: ignore[attr-defined]
    if nu != nv:
        raise ShapeError(
            f"{api._aval(u)} and {api._aval(v)} have {nu} and {nv} elements",
            op="vdot",
            hint="vdot pairs the flattened operands element by element",
        )
    return api.matmul(api.reshape(u, (nu,)), api.reshape(v, (nv,)))


def _vecdot_jax(x1: Any, x2: Any, axis: int = -1) -> Any:
    return jnp.vecdot(x1, x2, axis=axis)


@_composite("vecdot", "dot products along an axis, the other axes broadcast", _vecdot_jax)
def vecdot(x1: Any, x2: Any, axis: int = -1) -> Any:
    """The dot products of the vectors along ``axis`` (the other axes broadcast), as
    ``jnp.vecdot``: a batched ``matmul`` of rows by columns.

    >>> import pypto as pto
    >>> pto.vecdot(pto.tensor([[1.0, 2.0], [3.0, 4.0]]), pto.tensor([1.0, 1.0])).numpy()
    array([3., 7.], dtype=float32)
    """
    u, v = api.promote("vecdot", (x1, x2))
    u = composite.moveaxis(u, axis, -1)
    v = composite.moveaxis(v, axis, -1)
    if u.shape[-1] != v.shape[-1]:
        raise ShapeError(
            f"{api._aval(u)} and {api._aval(v)} differ in the length of the vectors along "
            f"axis {axis}",
            op="vecdot",
        )
    r = api.matmul(composite.expand_dims(u, -2), composite.expand_dims(v, -1))
    return api.reshape(r, tuple(r.shape[:-2]))


@_composite("matvec", "matrix-vector products, batched", jnp.matvec)
def matvec(x1: Any, x2: Any) -> Any:
    """``x1 [..., m, n]`` times the vectors ``x2 [..., n]``, as ``jnp.matvec``.

    >>> import pypto as pto
    >>> pto.matvec(pto.tensor([[1.0, 2.0], [3.0, 4.0]]), pto.tensor([1.0, 0.0])).numpy()
    array([1., 3.], dtype=float32)
    """
    u, v = api.promote("matvec", (x1, x2))
    r = api.matmul(u, composite.expand_dims(v, -1))
    return api.reshape(r, tuple(r.shape[:-1]))


@_composite("vecmat", "vector-matrix products, batched", jnp.vecmat)
def vecmat(x1: Any, x2: Any) -> Any:
    """The vectors ``x1 [..., n]`` times ``x2 [..., n, m]``, as ``jnp.vecmat``.

    >>> import pypto as pto
    >>> pto.vecmat(pto.tensor([1.0, 0.0]), pto.tensor([[1.0, 2.0], [3.0, 4.0]])).numpy()
    array([1., 2.], dtype=float32)
    """
    u, v = api.promote("vecmat", (x1, x2))
    r = api.matmul(composite.expand_dims(u, -2), v)
    return api.reshape(r, (*r.shape[:-2], r.shape[-1]))


@_composite("matrix_transpose", "the last two axes swapped", jnp.matrix_transpose)
def matrix_transpose(x: Any) -> Any:
    """``x`` with its last two axes swapped (``x.mT``), as ``jnp.matrix_transpose``.

    >>> import pypto as pto
    >>> pto.matrix_transpose(pto.ones((2, 3, 4))).shape
    (2, 4, 3)
    """
    v = api.asvalue(x, "matrix_transpose")
    if len(v.shape) < 2:  # type: ignore[attr-defined]
        raise ShapeError(
            f"needs at least 2 axes, got {api._aval(v)}",
            op="matrix_transpose",
            hint="for a vector there is nothing to transpose",
        )
    return composite.swapaxes(v, -1, -2)


# ---------------------------------------------------------------------------------------------
# Polynomials and signals


@_composite("polyval", "a polynomial evaluated at x (Horner's rule)", jnp.polyval)
def polyval(p: Any, x: Any) -> Any:
    """``p[0]·x^(n-1) + … + p[n-1]`` by Horner's rule, as ``jnp.polyval`` (``p`` a 1-d tensor
    of coefficients, highest degree first).

    >>> import pypto as pto
    >>> pto.polyval(pto.tensor([1.0, 0.0, -2.0]), pto.tensor([2.0, 3.0])).numpy()
    array([2., 7.], dtype=float32)
    """
    c, v = api.promote("polyval", (p, x))
    if len(c.shape) != 1:  # type: ignore[attr-defined]
        raise ShapeError(f"coefficients must be 1-d, got {api._aval(c)}", op="polyval")
    y = api.mul(v, 0)
    for i in range(c.shape[0]):  # type: ignore[attr-defined]
        y = api.add(api.mul(y, v), api.getitem(c, i))
    return y


def _convolve_jax(a: Any, v: Any, mode: str = "full") -> Any:
    return jnp.convolve(a, v, mode)


def _correlate_jax(a: Any, v: Any, mode: str = "valid") -> Any:
    return jnp.correlate(a, v, mode)


def _slide(op: str, a: Any, v: Any, mode: str) -> Any:
    """``out[k] = Σ_j xp[k + j] y[j]`` (a cross-correlation) over the zero-padded ``xp``, as
    JAX sets it up: the longer operand slides, ``convolve`` flips the other, and ``correlate``
    reverses its output when it swapped them. The windows of ``xp`` are one gather at static
    indices; the sums one ``matmul``."""
    x, y = _inexact(op, a, v)
    if len(x.shape) != 1 or len(y.shape) != 1:
        raise ShapeError(f"needs 1-d operands, got {api._aval(x)} and {api._aval(y)}", op=op)
    n, m = x.shape[0], y.shape[0]
    if n == 0 or m == 0:
        raise ShapeError(f"inputs cannot be empty, got {api._aval(x)} and {api._aval(y)}", op=op)
    if mode not in ("full", "same", "valid"):
        raise ShapeError(f"mode {mode!r} is not one of ('full', 'same', 'valid')", op=op)
    reverse = op == "correlate" and n < m
    if n < m:
        x, y, n, m = y, x, m, n
    if op == "convolve":
        y = composite.flip(y, 0)
    lo, hi = {"valid": (0, 0), "same": (m // 2, m - m // 2 - 1), "full": (m - 1, m - 1)}[mode]
    length = n + lo + hi - m + 1

    def zeros(k: int) -> list[Any]:
        z = api.asvalue(np.zeros((), x.dtype.np))
        return [api.broadcast_to(z, (k,))] if k else []

    xp = api.concat([*zeros(lo), x, *zeros(hi)], 0) if lo or hi else x
    idx = np.arange(length, dtype=np.int32)[:, None] + np.arange(m, dtype=np.int32)[None, :]
    r = api.matmul(api.take(xp, idx, 0), y)  # [length, m] @ [m]
    return composite.flip(r, 0) if reverse else r


@_composite("convolve", "the discrete convolution of two 1-d tensors", _convolve_jax)
def convolve(a: Any, v: Any, mode: str = "full") -> Any:
    """``Σ_j a[j] v[k - j]``, as ``jnp.convolve``: ``mode`` ``"full"`` (every overlap),
    ``"same"`` (``a``'s length, centred) or ``"valid"`` (full overlaps only).

    >>> import pypto as pto
    >>> pto.convolve(pto.tensor([1.0, 2.0, 3.0]), pto.tensor([0.0, 1.0, 0.5])).numpy()
    array([0. , 1. , 2.5, 4. , 1.5], dtype=float32)
    """
    return _slide("convolve", a, v, mode)


@_composite("correlate", "the cross-correlation of two 1-d tensors", _correlate_jax)
def correlate(a: Any, v: Any, mode: str = "valid") -> Any:
    """``Σ_j a[k + j] v[j]``, as ``jnp.correlate`` (``mode`` as :func:`convolve`'s, default
    ``"valid"``).

    >>> import pypto as pto
    >>> pto.correlate(pto.tensor([1.0, 2.0, 3.0]), pto.tensor([0.0, 1.0, 0.5])).numpy()
    array([3.5], dtype=float32)
    """
    return _slide("correlate", a, v, mode)


def _at(v: Any, key: slice) -> Any:
    return api.getitem(v, (Ellipsis, key))


def _trapezoid_jax(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Any:
    return jnp.trapezoid(y, x, dx, axis)


@_composite("trapezoid", "the integral of y by the trapezoidal rule", _trapezoid_jax)
def trapezoid(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Any:
    """``Σ (x[i+1] - x[i]) (y[i] + y[i+1]) / 2`` along ``axis`` (spacing ``dx`` without ``x``),
    as ``jnp.trapezoid``.

    >>> import pypto as pto
    >>> float(pto.trapezoid(pto.tensor([1.0, 2.0, 3.0]), dx=0.5))
    2.0
    """
    if x is None:
        (yv,) = _inexact("trapezoid", y)
        yv = composite.moveaxis(yv, axis, -1)
        step: Any = dx
    else:  # y and x promoted together, as JAX does
        yv, xv = _inexact("trapezoid", y, x)
        yv = composite.moveaxis(yv, axis, -1)
        if len(xv.shape) > 1:
            xv = composite.moveaxis(xv, axis, -1)
        step = api.sub(_at(xv, slice(1, None)), _at(xv, slice(None, -1)))
    pairs = api.add(_at(yv, slice(1, None)), _at(yv, slice(None, -1)))
    return api.mul(api.sum(api.mul(step, pairs), -1), 0.5)


def _poly1d(op: str, vs: Sequence[Any], names: Sequence[str]) -> None:
    for v, n in zip(vs, names, strict=True):
        if len(v.shape) != 1:
            raise ShapeError(
                f"{n} must be a 1-d tensor of coefficients (highest degree first), "
                f"got {api._aval(v)}",
                op=op,
            )


def _order(op: str, what: str, m: Any) -> int:
    n = rules.integer(op, what, m)
    if n < 0:
        raise ShapeError(f"{what} must be >= 0, got {n}", op=op)
    return n


def _consts(c: np.ndarray, d: dt.DType) -> Any:
    """Exact small integers computed in numpy, as a constant of the polynomial's dtype."""
    return api.asvalue(c.astype(d.np))


def _trim_front(op: str, v: Any) -> Any:
    """``v`` without its leading zeros (one kept when all are zero, as JAX keeps the
    polynomial 0): a length that depends on the values, so only where they are known."""
    c = _concrete(v)
    if c is None:
        raise TraceError(
            f"trimming leading zeros of {api._aval(v)} gives a length that depends on its "
            "values, and shapes are static when tracing",
            op=op,
            hint="leave trim_leading_zeros=False under jit (JAX cannot trim there either)",
        )
    nz = np.flatnonzero(c)
    start = int(nz[0]) if nz.size else c.shape[0] - 1 if c.shape[0] else 0
    return api.getitem(v, slice(start, None))


def _add_aligned(a: Any, b: Any) -> Any:
    """``a + b`` with the shorter one's coefficients aligned to the end (the constant terms)."""
    if b.shape[0] > a.shape[0]:
        a, b = b, a
    if not b.shape[0]:
        return a
    return IndexUpdateRef(a, slice(a.shape[0] - b.shape[0], None)).add(b)


@_composite("polyadd", "the sum of two polynomials", jnp.polyadd)
def polyadd(a1: Any, a2: Any) -> Any:
    """The coefficients of ``a1 + a2`` (1-d, highest degree first: the shorter one is aligned
    to the constant terms), as ``jnp.polyadd``; integers stay integers.

    >>> import pypto as pto
    >>> pto.polyadd(pto.tensor([1, 2, 3]), pto.tensor([10, 20])).numpy()
    array([ 1, 12, 23], dtype=int32)
    """
    a, b = api.promote("polyadd", (a1, a2))
    _poly1d("polyadd", (a, b), ("a1", "a2"))
    return _add_aligned(a, b)


@_composite("polysub", "the difference of two polynomials", jnp.polysub)
def polysub(a1: Any, a2: Any) -> Any:
    """The coefficients of ``a1 - a2`` (aligned as :func:`polyadd`'s), as ``jnp.polysub``.

    >>> import pypto as pto
    >>> pto.polysub(pto.tensor([1.0, 2.0]), pto.tensor([1.0, 0.5, 1.0])).numpy()
    array([-1. ,  0.5,  1. ], dtype=float32)
    """
    a, b = api.promote("polysub", (a1, a2))
    _poly1d("polysub", (a, b), ("a1", "a2"))
    if b.dtype is dt.bool_:  # type: ignore[attr-defined]
        raise DTypeError(
            f"bool coefficients {api._aval(a)} and {api._aval(b)}: negation is not "
            "defined for bools",
            op="polysub",
            hint="cast them to an integer or float dtype first",
        )
    return _add_aligned(a, api.neg(b))


def _polymul_jax(a1: Any, a2: Any, *, trim_leading_zeros: bool = False) -> Any:
    return jnp.polymul(a1, a2, trim_leading_zeros=trim_leading_zeros)


@_composite("polymul", "the product of two polynomials", _polymul_jax)
def polymul(a1: Any, a2: Any, *, trim_leading_zeros: bool = False) -> Any:
    """The coefficients of ``a1 · a2``: their full convolution (a float dtype), as
    ``jnp.polymul``. ``trim_leading_zeros`` drops the operands' leading zeros first, which
    needs their values (eagerly, as in JAX, which refuses it under ``jit``).

    >>> import pypto as pto
    >>> pto.polymul(pto.tensor([1.0, 2.0]), pto.tensor([1.0, -2.0])).numpy()
    array([ 1.,  0., -4.], dtype=float32)
    """
    a, b = _inexact("polymul", a1, a2)
    _poly1d("polymul", (a, b), ("a1", "a2"))
    if trim_leading_zeros and (a.shape[0] > 1 or b.shape[0] > 1):
        a, b = _trim_front("polymul", a), _trim_front("polymul", b)
    zero = api.asvalue(np.zeros(1, a.dtype.np))
    return _slide("convolve", a if a.shape[0] else zero, b if b.shape[0] else zero, "full")


def _polyder_jax(p: Any, m: int = 1) -> Any:
    return jnp.polyder(p, m)


@_composite("polyder", "the m-th derivative of a polynomial", _polyder_jax)
def polyder(p: Any, m: int = 1) -> Any:
    """The coefficients of the ``m``-th derivative of ``p`` (a float dtype), as
    ``jnp.polyder``: ``p[i]`` times the falling factorial of its power.

    >>> import pypto as pto
    >>> pto.polyder(pto.tensor([1.0, 1.0, 1.0, 1.0]), 2).numpy()
    array([6., 2.], dtype=float32)
    """
    (v,) = _inexact("polyder", p)
    _poly1d("polyder", (v,), ("p",))
    m = _order("polyder", "m", m)
    n = v.shape[0]
    if m == 0:
        return v
    if m >= n:
        return api.getitem(v, slice(0, 0))
    power = np.arange(n - 1, m - 1, -1, dtype=np.float64)  # of each coefficient kept
    coeff = np.prod(power[None, :] - np.arange(m)[:, None], axis=0)
    return api.mul(api.getitem(v, slice(0, n - m)), _consts(coeff, v.dtype))


def _polyint_jax(p: Any, m: int = 1, k: Any = None) -> Any:
    return jnp.polyint(p, m, k)


@_composite("polyint", "the m-th antiderivative of a polynomial", _polyint_jax)
def polyint(p: Any, m: int = 1, k: Any = None) -> Any:
    """The coefficients of the ``m``-th antiderivative of ``p`` (a float dtype), as
    ``jnp.polyint``: the integration constants ``k`` (a scalar, or one per integration, the
    first integration's first; 0 when not given) come after ``p``, and every coefficient is
    divided by the rising factorial of its new power.

    >>> import pypto as pto
    >>> pto.polyint(pto.tensor([3.0, 2.0, 1.0]), k=5.0).numpy()
    array([1., 1., 1., 5.], dtype=float32)
    """
    v, c = _inexact("polyint", p, 0 if k is None else k)
    _poly1d("polyint", (v,), ("p",))
    m = _order("polyint", "m", m)
    if len(c.shape) > 1 or (len(c.shape) == 1 and c.shape[0] not in (1, m)):
        raise ShapeError(
            f"k must be a scalar or a 1-d tensor of 1 or m={m} constants, got {api._aval(c)}",
            op="polyint",
        )
    if m == 0:
        return v
    ks = api.broadcast_to(api.reshape(c, (-1,)) if len(c.shape) else c, (m,))
    grid = np.arange(v.shape[0] + m, dtype=np.float64)[None, :] - np.arange(m)[:, None]
    coeff = np.maximum(grid, 1).prod(axis=0)[::-1]
    return api.div(api.concat([v, ks], 0), _consts(coeff, v.dtype))


def _polydiv_jax(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> Any:
    return jnp.polydiv(u, v, trim_leading_zeros=trim_leading_zeros)


@_composite("polydiv", "the quotient and remainder of two polynomials", _polydiv_jax)
def polydiv(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> Any:
    """``(q, r)`` with ``u = q·v + r`` (float dtypes), as ``jnp.polydiv``: long division,
    one step per coefficient of ``q``. ``r`` keeps ``u``'s length (its leading places are
    the zeros the division leaves, up to rounding); ``trim_leading_zeros`` drops those below
    √eps, which needs the values (eagerly, as in JAX).

    >>> import pypto as pto
    >>> q, r = pto.polydiv(pto.tensor([1.0, 0.0, -1.0]), pto.tensor([1.0, 1.0]))
    >>> q.numpy(), r.numpy()
    (array([ 1., -1.], dtype=float32), array([0., 0., 0.], dtype=float32))
    """
    a, b = _inexact("polydiv", u, v)
    _poly1d("polydiv", (a, b), ("u", "v"))
    m, n = a.shape[0] - 1, b.shape[0] - 1
    if n < 0:
        raise ShapeError(f"the divisor v is empty, got {api._aval(b)}", op="polydiv")
    scale = api.div(1.0, api.getitem(b, 0))
    qs = []
    for k in range(m - n + 1):
        d = api.mul(scale, api.getitem(a, k))
        qs.append(d)
        a = IndexUpdateRef(a, slice(k, k + n + 1)).add(api.mul(api.neg(d), b))
    q = composite.stack(qs, 0) if qs else api.asvalue(np.zeros(1, a.dtype.np))
    if trim_leading_zeros:
        c = _concrete(a)
        if c is None:
            _trim_front("polydiv", a)  # raises the TraceError
        assert c is not None
        tol = math.sqrt(float(np.finfo(a.dtype.np).eps))
        big = np.flatnonzero(np.abs(c.astype(np.float64)) > tol)
        a = api.getitem(a, slice(int(big[0]) if big.size else c.shape[0], None))
    return q, a


@_composite("poly", "the coefficients of the polynomial with the given roots", jnp.poly)
def poly(seq_of_zeros: Any) -> Any:
    """The coefficients of ``(x - z₀)(x - z₁)…``, highest degree first and leading 1, as
    ``jnp.poly`` for a 1-d sequence of roots (a float dtype; no roots: the 0-d 1). A square
    matrix's characteristic polynomial needs a general matrix's (complex) eigenvalues, which
    pypto does not compute (:func:`pto.linalg.eigh` is for symmetric matrices).

    >>> import pypto as pto
    >>> pto.poly(pto.tensor([1.0, 2.0])).numpy()
    array([ 1., -3.,  2.], dtype=float32)
    """
    (z,) = _inexact("poly", seq_of_zeros)
    if len(z.shape) == 0:
        z = api.reshape(z, (1,))
    if len(z.shape) != 1:
        square = len(z.shape) == 2 and z.shape[0] == z.shape[1]
        raise ShapeError(
            f"the roots must be 1-d, got {api._aval(z)}"
            + (
                ": a matrix's characteristic polynomial needs eigvals (complex), not built"
                if square
                else ""
            ),
            op="poly",
            hint="pass the roots as a 1-d tensor",
        )
    d = z.dtype
    if not z.shape[0]:
        return api.asvalue(np.ones((), d.np))
    a = api.asvalue(np.ones(1, d.np))
    zero = api.asvalue(np.zeros(1, d.np))
    for k in range(z.shape[0]):
        # a·(x - z_k): each coefficient minus z_k times the one before it
        a = api.sub(api.concat([a, zero], 0), api.mul(api.getitem(z, k), api.concat([zero, a], 0)))
    return a


# ---------------------------------------------------------------------------------------------
# Lookups


def _interp_jax(
    x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None
) -> Any:
    return jnp.interp(x, xp, fp, left, right, period)


@_composite("interp", "piecewise-linear interpolation at x of the points (xp, fp)", _interp_jax)
def interp(
    x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None
) -> Any:
    """The piecewise-linear function through ``(xp, fp)`` (``xp`` increasing) at ``x``, as
    ``jnp.interp``: ``left``/``right`` (default ``fp[0]``/``fp[-1]``) outside ``xp``'s range,
    or ``"extrapolate"`` to continue the first or last segment. With ``period`` the points
    repeat with that period (``xp`` in any order; ``left`` and ``right`` are not used).

    >>> import pypto as pto
    >>> xp, fp = pto.tensor([0.0, 1.0, 3.0]), pto.tensor([0.0, 10.0, 30.0])
    >>> pto.interp(pto.tensor([0.5, 2.5, 9.0]), xp, fp).numpy()
    array([ 5., 25., 30.], dtype=float32)
    >>> pto.interp(pto.tensor([-1.0, 4.5]), xp, fp, period=4.0).numpy()
    array([30.,  5.], dtype=float32)
    """
    for side, v in (("left", left), ("right", right)):
        if isinstance(v, str) and v != "extrapolate":
            raise ShapeError(
                f"the only string {side}= takes is 'extrapolate', got {v!r}",
                op="interp",
                hint=f"pass {side}='extrapolate', a value, or None (fp's end value)",
            )
    xv, xpv, fpv = _inexact("interp", x, xp, fp)
    if len(xpv.shape) != 1 or tuple(xpv.shape) != tuple(fpv.shape) or not xpv.shape[0]:
        raise ShapeError(
            f"xp {api._aval(xpv)} and fp {api._aval(fpv)} must be 1-d, of one nonzero length",
            op="interp",
        )
    if period is not None:
        # a Python number stays weakly typed (float16 points stay float16)
        pv: Any = abs(period) if isinstance(period, int | float) else api.asvalue(period, "interp")
        if not isinstance(pv, int | float):
            if len(pv.shape):
                raise ShapeError(
                    f"period must be a scalar, got shape {tuple(pv.shape)}",
                    op="interp",
                )
            pv = api.abs(pv)
        xv, xpv = composite.remainder(xv, pv), composite.remainder(xpv, pv)
        order = composite.argsort(xpv)
        xpv, fpv = api.take(xpv, order, 0), api.take(fpv, order, 0)
        # one point beyond each end, from the other end: the segment that wraps around
        xpv = api.concat([api.sub(xpv[-1:], pv), xpv, api.add(xpv[:1], pv)], 0)
        fpv = api.concat([fpv[-1:], fpv, fpv[:1]], 0)
    n = xpv.shape[0]
    # as JAX: with one point i is 0 and i - 1 reads it from the end
    i = composite.clip(composite.searchsorted(xpv, xv, "right"), 1, n - 1)
    lo = api.sub(i, 1)
    x0, x1 = api.take(xpv, lo, 0), api.take(xpv, i, 0)
    f0, f1 = api.take(fpv, lo, 0), api.take(fpv, i, 0)
    dx = api.sub(x1, x0)
    eps = float(np.spacing(dt.finfo(xpv.dtype).eps))
    flat = api.less_equal(api.abs(dx), eps)
    f = api.where(
        flat,
        f0,
        api.add(f0, api.mul(api.div(api.sub(xv, x0), api.where(flat, 1.0, dx)), api.sub(f1, f0))),
    )
    if period is not None:
        return f
    first, last = api.getitem(fpv, 0), api.getitem(fpv, -1)
    if left != "extrapolate":
        f = api.where(api.less(xv, api.getitem(xpv, 0)), first if left is None else left, f)
    if right != "extrapolate":
        f = api.where(api.greater(xv, api.getitem(xpv, -1)), last if right is None else right, f)
    return f


def _digitize_jax(x: Any, bins: Any, right: bool = False) -> Any:
    return jnp.digitize(x, bins, right)


@_composite("digitize", "the index of the bin each x falls in", _digitize_jax, differentiable=False)
def digitize(x: Any, bins: Any, right: bool = False) -> Any:
    """The index of the bin of each ``x`` in the monotonic ``bins`` (increasing or
    decreasing), as ``jnp.digitize``: ``right`` closes the bins on the right.

    >>> import pypto as pto
    >>> pto.digitize(pto.tensor([0.5, 1.0, 4.0]), pto.tensor([0.0, 1.0, 2.0])).numpy()
    array([1, 2, 3], dtype=int32)
    """
    b = api.asvalue(bins, "digitize")
    if len(b.shape) != 1:  # type: ignore[attr-defined]
        raise ShapeError(f"bins must be 1-d, got {api._aval(b)}", op="digitize")
    n = b.shape[0]  # type: ignore[attr-defined]
    if n == 0:
        return api.mul(api.cast(api.asvalue(x, "digitize"), dt.int32), 0)
    side = "left" if right else "right"
    up = composite.searchsorted(b, x, side)
    down = api.sub(n, composite.searchsorted(composite.flip(b, 0), x, side))
    return api.where(api.greater_equal(api.getitem(b, -1), api.getitem(b, 0)), up, down)


def _bincount_jax(
    x: Any, weights: Any = None, minlength: int = 0, *, length: int | None = None
) -> Any:
    return jnp.bincount(x, weights, minlength, length=length)


@_composite(
    "bincount", "the count (or weight sum) of each value of a 1-d int tensor", _bincount_jax
)
def bincount(x: Any, weights: Any = None, minlength: int = 0, *, length: int | None = None) -> Any:
    """How often each value ``0 .. length-1`` occurs in the 1-d integer ``x`` (``weights``:
    their sums), as ``jnp.bincount``: ``length`` is required when ``x`` is traced (the output's
    size must be static); eagerly it defaults to ``max(x) + 1`` (at least ``minlength``).
    Values outside ``[0, length)`` count nowhere.

    >>> import pypto as pto
    >>> pto.bincount(pto.tensor([0, 1, 1, 3])).numpy()
    array([1, 2, 0, 1], dtype=int32)
    """
    v = api.asvalue(x, "bincount")
    if v.dtype is dt.bool_:  # type: ignore[attr-defined]
        v = api.cast(v, dt.int32)
    if len(v.shape) != 1 or not v.dtype.is_integer:  # type: ignore[attr-defined]
        raise ShapeError(
            f"needs a 1-d integer tensor, got {api._aval(v)}",
            op="bincount",
            hint="cast values with .astype(pto.int32)",
        )
    if length is None:
        try:
            a = np.asarray(v)
        except Exception:
            raise ShapeError(
                f"length is needed for a traced {api._aval(v)}: the output's size must be "
                "known when tracing",
                op="bincount",
                hint="pass length=... (jnp.bincount needs it under jit too)",
            ) from None
        length = max(int(minlength), int(max(0, a.max())) + 1 if a.size else 0)
    # negative values count at 0 and values from length on nowhere, as JAX's scatter does
    at = api.maximum(api.cast(v, dt.int32), 0)
    hit = api.equal(composite.expand_dims(at, -1), np.arange(length, dtype=np.int32))  # [n, L]
    if weights is None:
        return api.sum(api.cast(hit, dt.int32), 0)
    w = api.asvalue(weights, "bincount")
    if tuple(w.shape) != tuple(v.shape):  # type: ignore[attr-defined]
        raise ShapeError(f"weights {api._aval(w)} must match x {api._aval(v)}", op="bincount")
    zero = np.zeros((), w.dtype.np)  # type: ignore[attr-defined]
    total = api.sum(api.where(hit, composite.expand_dims(w, -1), zero), 0)
    # int8 wraps and bool becomes any, as JAX's scatter-add in the weights' dtype does
    return api.cast(total, w.dtype)  # type: ignore[attr-defined]


def _edges(op: str, v: Any, bins: Any, range: Any) -> Any:
    """``jnp.histogram_bin_edges``: given edges as they are, or ``bins`` equal bins over
    ``range`` (the data's min and max; widened by 0.5 each way when they are equal) by JAX's
    linspace formula, ``lo·(1 - t) + hi·t``."""
    d = v.dtype
    if isinstance(bins, Value) or np.ndim(bins) == 1:
        b = api.asvalue(bins, op)
        if len(b.shape) != 1:  # type: ignore[attr-defined]
            raise ShapeError(f"bin edges must be 1-d, got {api._aval(b)}", op=op)
        return api.cast(b, d)
    nb = rules.integer(op, "bins", bins)
    if nb < 1:
        raise ShapeError(f"bins must be >= 1, got {nb}", op=op)
    if range is None:
        lo, hi = api.min(v), api.max(v)
    else:
        r = api.cast(api.asvalue(range, op), d)
        if tuple(r.shape) != (2,):
            raise ShapeError(
                f"range must be None or (low, high), got {api._aval(r)}",
                op=op,
                hint="range=(lo, hi)",
            )
        lo, hi = api.getitem(r, 0), api.getitem(r, 1)
    same = api.equal(api.sub(hi, lo), 0)
    lo, hi = api.where(same, api.sub(lo, 0.5), lo), api.where(same, api.add(hi, 0.5), hi)
    t = api.cast(api.asvalue(np.arange(nb, dtype=np.float32) / np.float32(nb)), d)
    inner = api.add(api.mul(lo, api.sub(1.0, t)), api.mul(hi, t))
    return api.concat([inner, api.reshape(hi, (1,))], 0)


def _bin_of(edges: Any, v: Any) -> Any:
    """Each value's bin, 1-based: ``i`` for ``edges[i-1] <= v < edges[i]``, the last bin
    holding its right edge too; 0 below the edges, ``len(edges)`` above them and for NaN."""
    k = edges.shape[0]
    at = composite.searchsorted(edges, v, side="right")
    return api.where(api.equal(v, api.getitem(edges, -1)), k - 1, at)


def _histogram_bin_edges_jax(a: Any, bins: Any = 10, range: Any = None, weights: Any = None) -> Any:
    return jnp.histogram_bin_edges(a, bins, range, weights)


@_composite(
    "histogram_bin_edges",
    "the edges of histogram's bins",
    _histogram_bin_edges_jax,
    differentiable=False,
)
def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None, weights: Any = None) -> Any:
    """The ``bins + 1`` edges that :func:`histogram` uses, as ``jnp.histogram_bin_edges``.

    >>> import pypto as pto
    >>> pto.histogram_bin_edges(pto.tensor([0.0, 1.0, 4.0]), bins=4).numpy()
    array([0., 1., 2., 3., 4.], dtype=float32)
    """
    (v,) = _inexact("histogram_bin_edges", a)
    return _edges("histogram_bin_edges", v, bins, range)


def _histogram_jax(
    a: Any, bins: Any = 10, range: Any = None, weights: Any = None, density: Any = None
) -> Any:
    return jnp.histogram(a, bins, range, weights, density)


@_composite("histogram", "counts of the values in bins, and the bins' edges", _histogram_jax)
def histogram(
    a: Any, bins: Any = 10, range: Any = None, weights: Any = None, density: bool | None = None
) -> Any:
    """``(counts, edges)``, as ``jnp.histogram``: ``bins`` equal bins over ``range`` (the
    data's min and max when None) or the given edges; each bin holds its left edge, the last
    also its right; values outside, and NaN, count nowhere. ``weights`` (``a``'s shape) weigh
    each value; ``density`` divides by the bins' widths and the total.

    The counts are a scatter-add at each value's bin (``searchsorted`` of the edges): one
    one-hot matmul.

    >>> import pypto as pto
    >>> counts, edges = pto.histogram(pto.tensor([0.0, 1.0, 1.5, 4.0]), bins=4)
    >>> counts.numpy(), edges.numpy()
    (array([1., 2., 0., 1.], dtype=float32), array([0., 1., 2., 3., 4.], dtype=float32))
    """
    if weights is None:
        (v,) = _inexact("histogram", a)
        w = api.broadcast_to(api.asvalue(np.ones((), v.dtype.np)), v.shape)
    else:
        v, w = _inexact("histogram", a, weights)
        if tuple(v.shape) != tuple(w.shape):
            raise ShapeError(
                f"weights {api._aval(w)} must have the values' shape {api._aval(v)}",
                op="histogram",
            )
    edges = _edges("histogram", v, bins, range)
    k = edges.shape[0]
    flat = api.reshape(v, (-1,))
    at = _bin_of(edges, flat)
    zeros = api.asvalue(np.zeros(k, w.dtype.np))
    counts = api.getitem(IndexUpdateRef(zeros, at).add(api.reshape(w, (-1,))), slice(1, None))
    if density:
        widths = api.sub(api.getitem(edges, slice(1, None)), api.getitem(edges, slice(0, -1)))
        counts = api.div(api.div(counts, widths), api.sum(counts))
    return counts, edges


def _histogramdd_jax(
    sample: Any, bins: Any = 10, range: Any = None, weights: Any = None, density: Any = None
) -> Any:
    return jnp.histogramdd(sample, bins, range, weights, density)


@_composite(
    "histogramdd",
    "counts of D-dimensional samples in a grid of bins, and the edges",
    _histogramdd_jax,
)
def histogramdd(
    sample: Any,
    bins: Any = 10,
    range: Sequence[Any] | None = None,
    weights: Any = None,
    density: bool | None = None,
) -> Any:
    """``(counts, [edges per dimension])`` of the ``[N, D]`` samples, as
    ``jnp.histogramdd``: ``bins`` an int, or one int or array of edges per dimension;
    ``range`` one ``(lo, hi)`` or None per dimension; each bin as :func:`histogram`'s (the
    last holds its right edge; values outside count nowhere). The counts are int32, or in
    the samples' dtype with ``weights`` or ``density`` (divided by the total and each bin's
    volume).

    >>> import pypto as pto
    >>> h, edges = pto.histogramdd(pto.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.2]]), bins=2)
    >>> h.numpy()
    array([[1, 0],
           [1, 1]], dtype=int32)
    """
    if weights is None:
        (v,) = _inexact("histogramdd", sample)
    else:
        v, w = _inexact("histogramdd", sample, weights)
    if len(v.shape) != 2:
        raise ShapeError(f"sample must be [N, D], got {api._aval(v)}", op="histogramdd")
    n, d = v.shape
    if weights is not None and tuple(w.shape) != (n,):
        raise ShapeError(
            f"weights {api._aval(w)}: one weight per sample ({n}) is needed", op="histogramdd"
        )
    if range is not None and (
        len(range) != d or builtins.any(r is not None and np.shape(r) != (2,) for r in range)
    ):
        raise ShapeError(
            f"range must be {d} pairs (lo, hi) or Nones, got {range!r}", op="histogramdd"
        )
    per = list(bins) if isinstance(bins, Sequence) and not isinstance(bins, str) else [bins] * d
    if len(per) != d:
        raise ShapeError(f"{len(per)} bins for {d} dimensions", op="histogramdd")
    edges, flat = [], None
    sizes = []
    for i, b in enumerate(per):
        col = api.getitem(v, (slice(None), i))
        e = _edges("histogramdd", col, b, None if range is None else range[i])
        k = e.shape[0]
        at = _bin_of(e, col)
        flat = at if flat is None else api.add(api.mul(flat, k + 1), at)
        edges.append(e)
        sizes.append(k + 1)
    assert flat is not None
    hist = bincount(flat, weights, length=math.prod(sizes))
    hist = api.getitem(api.reshape(hist, tuple(sizes)), (slice(1, -1),) * d)
    if density:
        hist = api.cast(hist, v.dtype)
        hist = api.div(hist, api.sum(hist))
        for i, e in enumerate(edges):
            shape = [1] * d
            shape[i] = e.shape[0] - 1
            width = api.sub(api.getitem(e, slice(1, None)), api.getitem(e, slice(0, -1)))
            hist = api.div(hist, api.reshape(width, tuple(shape)))
    return hist, edges


def _histogram2d_jax(
    x: Any, y: Any, bins: Any = 10, range: Any = None, weights: Any = None, density: Any = None
) -> Any:
    return jnp.histogram2d(x, y, bins, range, weights, density)


@_composite(
    "histogram2d", "counts of (x, y) pairs in a grid of bins, and the edges", _histogram2d_jax
)
def histogram2d(
    x: Any,
    y: Any,
    bins: Any = 10,
    range: Sequence[Any] | None = None,
    weights: Any = None,
    density: bool | None = None,
) -> Any:
    """``(counts, x_edges, y_edges)`` of the pairs ``(x[i], y[i])``, as
    ``jnp.histogram2d``: :func:`histogramdd` of the two columns (``bins`` an int, a pair, or
    one array of edges for both).

    >>> import pypto as pto
    >>> h, xe, ye = pto.histogram2d(pto.tensor([0.0, 1.0, 1.0]), pto.tensor([0.0, 1.0, 0.2]), 2)
    >>> h.numpy().tolist(), xe.numpy().tolist()
    ([[1, 0], [1, 1]], [0.0, 0.5, 1.0])
    """
    u, w = api.promote("histogram2d", (x, y))
    shape = tuple(getattr(bins, "shape", ()))
    count = len(bins) if isinstance(bins, Sequence) else shape[0] if shape else 1
    if count not in (1, 2):  # one array of edges for both
        bins = [bins, bins]
    sample = composite.stack([u, w], 1)
    hist, edges = histogramdd(sample, bins, range, weights, density)
    return hist, edges[0], edges[1]


__all__: Sequence[str] = [
    "bincount",
    "cbrt",
    "convolve",
    "correlate",
    "digitize",
    "divmod",
    "fabs",
    "histogram",
    "histogram2d",
    "histogram_bin_edges",
    "histogramdd",
    "interp",
    "matrix_transpose",
    "matvec",
    "modf",
    "poly",
    "polyadd",
    "polyder",
    "polydiv",
    "polyint",
    "polymul",
    "polysub",
    "polyval",
    "sinc",
    "trapezoid",
    "vdot",
    "vecdot",
    "vecmat",
]
