"""Dense linear algebra by elimination, as composites: ``solve``, ``inv``, ``det``,
``slogdet``, ``cholesky``, ``qr`` and ``matrix_power`` of ``jax.numpy.linalg``, on the last two
axes, batched over the others.

The matrix size ``n`` is static, so each elimination is unrolled into ``n`` steps of ordinary
ops on the shrinking trailing block (a pivot chosen by ``argmax``, a row swap by ``where``, a
rank-one update): it traces, differentiates, batches and compiles like any composite, and its
graph grows with ``n`` (about 20 ops per step), which suits the small matrices these are used
on inside a model. LU uses partial pivoting as LAPACK's ``getrf`` (the first row of largest
magnitude), so pivots and signs agree with JAX. float16 and bfloat16 are computed in float32
and rounded once (JAX refuses them for LU-based functions); integers give float32.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import ShapeError
from pypto.ops import api, composite, rules
from pypto.ops.composite import _composite
from pypto.ops.numpy_lib import _narrow


def _matrices(op: str, a: Any, square: bool = False) -> tuple[Any, dt.DType]:
    """``a`` as a float32 value of shape ``[..., m, n]`` (``m = n`` when ``square``), and the
    dtype of the result (``a``'s float dtype; float32 for integers)."""
    v = api.asvalue(a, op)
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    if len(shape) < 2 or (square and shape[-1] != shape[-2]):
        what, want = ("square matrices", "n, n") if square else ("matrices", "m, n")
        raise ShapeError(
            f"needs {what} in the last two axes, got {api._aval(v)}",
            op=op,
            hint=f"pass an array of shape [..., {want}]",
        )
    d = v.dtype  # type: ignore[attr-defined]
    out = d if d.is_floating else dt.float32
    return (v if d is dt.float32 else api.cast(v, dt.float32)), out


def _square(op: str, a: Any) -> tuple[Any, dt.DType]:
    return _matrices(op, a, square=True)


def _at(x: Any, *key: Any) -> Any:
    return api.getitem(x, (Ellipsis, *key))


def _row(x: Any) -> Any:
    """``x`` ``[..., m]`` as one row, ``[..., 1, m]``."""
    return composite.expand_dims(x, -2)


def _col(x: Any) -> Any:
    """``x`` ``[..., m]`` as one column, ``[..., m, 1]``."""
    return composite.expand_dims(x, -1)


def _eliminate(a: Any, b: Any | None) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """Gaussian elimination with partial pivoting of ``a`` ``[..., n, n]`` (float32), applied
    alongside to ``b`` ``[..., n, m]`` when given (same batch shape).

    Returns, for each step ``k``: the row of ``U`` (``[..., n - k]``, its first element the
    pivot), the row of ``L⁻¹Pb`` (``[..., m]``), the pivot, and whether rows were swapped.
    """
    n = a.shape[-1]
    rows: list[Any] = []
    rhs: list[Any] = []
    pivots: list[Any] = []
    swaps: list[Any] = []
    s, r = a, b
    for k in range(n):
        p = api.argmax(api.abs(_at(s, slice(None), 0)), -1, True)  # [..., 1]: first largest
        hit = _col(api.equal(np.arange(n - k, dtype=np.int32), p))  # [..., m, 1]: its row

        def pivot_row(x: Any, hit: Any = hit) -> tuple[Any, Any]:
            """The pivot's row of ``x``, and ``x`` with row 0 copied to the pivot's place (the
            pivot row itself moves up: it is returned, and row 0 is dropped next)."""
            top = _row(_at(x, 0, slice(None)))
            return api.sum(api.where(hit, x, 0.0), (x.ndim - 2,)), api.where(hit, top, x)

        prow, s = pivot_row(s)
        piv = _at(prow, 0)
        rows.append(prow)
        pivots.append(piv)
        swaps.append(api.not_equal(composite.squeeze(p, -1), 0))
        # a zero pivot means a zero column: nothing to eliminate (getrf skips it too)
        safe = api.where(api.equal(piv, 0.0), 1.0, piv)
        mult = _col(api.div(_at(s, slice(1, None), 0), _col(safe)))  # [..., m - 1, 1]
        if r is not None:
            brow, r = pivot_row(r)
            rhs.append(brow)
            r = api.sub(_at(r, slice(1, None), slice(None)), api.mul(mult, _row(brow)))
        s = api.sub(
            _at(s, slice(1, None), slice(1, None)), api.mul(mult, _row(_at(prow, slice(1, None))))
        )
    return rows, rhs, pivots, swaps


def _back(rows: list[Any], rhs: list[Any]) -> Any:
    """``U⁻¹y`` by back substitution: ``x_k = (y_k - U[k, k+1:] · x[k+1:]) / U[k, k]``, the
    solutions stacked into ``[..., n, m]``."""
    xs: list[Any] = []
    for k in reversed(range(len(rows))):
        u, y = rows[k], rhs[k]
        if xs:
            tail = composite.stack(xs[::-1], -2)  # x[k+1:], [..., n-k-1, m]
            y = api.sub(y, api.sum(api.mul(_col(_at(u, slice(1, None))), tail), (tail.ndim - 2,)))
        xs.append(api.div(y, _col(_at(u, 0))))
    return composite.stack(xs[::-1], -2)


@_composite("solve", "the solution x of a @ x = b (LU with partial pivoting)", jnp.linalg.solve)
def solve(a: Any, b: Any) -> Any:
    """The solution ``x`` of ``a @ x = b``, as ``jnp.linalg.solve``: ``a`` is ``[..., n, n]``
    and ``b`` a vector ``[n]`` or matrices ``[..., n, m]`` (numpy 2's rule: only a 1-d ``b`` is
    a vector), batch axes broadcast. Gaussian elimination with partial pivoting, then back
    substitution; a singular ``a`` gives inf or NaN, as LAPACK's.

    >>> import pypto as pto
    >>> pto.linalg.solve(pto.tensor([[2.0, 1.0], [1.0, 3.0]]), pto.tensor([3.0, 5.0])).numpy()
    array([0.8, 1.4], dtype=float32)
    """
    av, bv = api.promote("solve", (a, b), inexact=True)
    d = av.dtype  # type: ignore[attr-defined]
    af, _ = _square("solve", av)
    n = af.shape[-1]
    vector = len(bv.shape) == 1  # type: ignore[attr-defined]
    bshape = tuple(bv.shape)  # type: ignore[attr-defined]
    if (bshape[0] if vector else (bshape[-2] if len(bshape) >= 2 else -1)) != n:
        raise ShapeError(
            f"b {api._aval(bv)} does not match a {api._aval(av)}: b needs {n} rows",
            op="solve",
            hint="b is [n] (one vector) or [..., n, m] (m right-hand sides as columns); for a "
            "batch of vectors use solve(a, b[..., None])[..., 0]",
        )
    bf: Any = bv if bv.dtype is dt.float32 else api.cast(bv, dt.float32)  # type: ignore[attr-defined]
    if vector:
        bf = _col(bf)
    try:
        batch = np.broadcast_shapes(tuple(af.shape[:-2]), tuple(bf.shape[:-2]))
    except ValueError:
        raise ShapeError(
            f"the batch axes of a {api._aval(av)} and b {api._aval(bv)} do not broadcast",
            op="solve",
        ) from None
    af = api.broadcast_to(af, (*batch, n, n))
    bf = api.broadcast_to(bf, (*batch, n, bf.shape[-1]))
    rows, rhs, _, _ = _eliminate(af, bf)
    x = _back(rows, rhs) if n else bf
    if vector:
        x = composite.squeeze(x, -1)
    return _narrow(x, d)


def _eye(n: int, batch: tuple[int, ...]) -> Any:
    return api.broadcast_to(api.asvalue(np.eye(n, dtype=np.float32)), (*batch, n, n))


@_composite("inv", "the inverse of square matrices", jnp.linalg.inv)
def inv(a: Any) -> Any:
    """The inverse of ``a`` ``[..., n, n]``: ``solve(a, I)``, as ``jnp.linalg.inv``.

    >>> import pypto as pto
    >>> pto.linalg.inv(pto.tensor([[2.0, 0.0], [1.0, 4.0]])).numpy()
    array([[ 0.5  ,  0.   ],
           [-0.125,  0.25 ]], dtype=float32)
    """
    af, d = _square("inv", a)
    n = af.shape[-1]
    rows, rhs, _, _ = _eliminate(af, _eye(n, tuple(af.shape[:-2])))
    return _narrow(_back(rows, rhs) if n else af, d)


def _entry(a: Any, i: int, j: int) -> Any:
    return _at(a, i, j)


@_composite("det", "the determinant of square matrices", jnp.linalg.det)
def det(a: Any) -> Any:
    """The determinant of ``a`` ``[..., n, n]``, as ``jnp.linalg.det``: the cofactor formulas
    for 2x2 and 3x3 (JAX's, term for term), else the product of the LU pivots with the sign of
    the row swaps.

    >>> import pypto as pto
    >>> float(pto.linalg.det(pto.tensor([[1.0, 2.0], [3.0, 4.0]])))
    -2.0
    """
    af, d = _square("det", a)
    n = af.shape[-1]
    e = [[_entry(af, i, j) for j in range(n)] for i in range(n)] if n <= 3 else []
    if n == 0:
        r = api.broadcast_to(api.asvalue(np.float32(1)), tuple(af.shape[:-2]))
    elif n == 1:
        r = e[0][0]
    elif n == 2:
        r = api.sub(api.mul(e[0][0], e[1][1]), api.mul(e[0][1], e[1][0]))
    elif n == 3:
        terms = [
            ((0, 0), (1, 1), (2, 2)),
            ((0, 1), (1, 2), (2, 0)),
            ((0, 2), (1, 0), (2, 1)),
            ((0, 2), (1, 1), (2, 0)),
            ((0, 0), (1, 2), (2, 1)),
            ((0, 1), (1, 0), (2, 2)),
        ]
        prods = [api.mul(api.mul(e[p][q], e[s][t]), e[u][v]) for (p, q), (s, t), (u, v) in terms]
        r = api.sub(
            api.sub(api.sub(api.add(api.add(prods[0], prods[1]), prods[2]), prods[3]), prods[4]),
            prods[5],
        )
    else:
        _, _, pivots, swaps = _eliminate(af, None)
        r = pivots[0]
        for p in pivots[1:]:
            r = api.mul(r, p)
        for s in swaps:
            r = api.where(s, api.neg(r), r)
    return _narrow(r, d)


def _slogdet_jax(a: Any) -> Any:
    return tuple(jnp.linalg.slogdet(a))


@_composite("slogdet", "the sign and log-magnitude of determinants", _slogdet_jax)
def slogdet(a: Any) -> tuple[Any, Any]:
    """``(sign, logabsdet)`` of the determinant of ``a`` ``[..., n, n]``, as
    ``jnp.linalg.slogdet``: from the LU pivots, so a determinant far beyond float32's range
    keeps its logarithm; ``(0, -inf)`` for a singular matrix.

    >>> import pypto as pto
    >>> sign, logdet = pto.linalg.slogdet(pto.tensor([[1e30, 0.0], [0.0, -1e30]]))
    >>> float(sign), round(float(logdet), 2)
    (-1.0, 138.16)
    """
    af, d = _square("slogdet", a)
    batch = tuple(af.shape[:-2])
    one = api.broadcast_to(api.asvalue(np.float32(1)), batch)
    sign, total = one, api.mul(one, 0.0)
    _, _, pivots, swaps = _eliminate(af, None)
    zero = api.mul(one, 0.0) if not pivots else None
    for p, s in zip(pivots, swaps, strict=True):
        flip = api.not_equal(s, api.less(p, 0.0))  # a swap or a negative pivot, not both
        sign = api.where(flip, api.neg(sign), sign)
        total = api.add(total, api.log(api.abs(p)))
        zero = api.equal(p, 0.0) if zero is None else composite.logical_or(zero, api.equal(p, 0.0))
    if pivots:
        sign = api.where(zero, 0.0, sign)
        total = api.where(zero, -math.inf, total)
    return _narrow(sign, d), _narrow(total, d)


def _cholesky_jax(a: Any, upper: bool = False, symmetrize_input: bool = True) -> Any:
    return jnp.linalg.cholesky(a, upper=upper, symmetrize_input=symmetrize_input)


@_composite(
    "cholesky", "the Cholesky factor of symmetric positive-definite matrices", _cholesky_jax
)
def cholesky(a: Any, upper: bool = False, symmetrize_input: bool = True) -> Any:
    """The lower-triangular ``L`` with ``L @ L.T == a`` (``upper=True``: ``L.T``), as
    ``jnp.linalg.cholesky``: ``a`` is first symmetrized as ``(a + a.T) / 2`` (unless
    ``symmetrize_input=False``: then its lower triangle is read), and a matrix that is not
    positive definite gives NaN everywhere, as JAX's.

    >>> import pypto as pto
    >>> pto.linalg.cholesky(pto.tensor([[4.0, 2.0], [2.0, 5.0]])).numpy()
    array([[2., 0.],
           [1., 2.]], dtype=float32)
    """
    upper = rules.flag("cholesky", "upper", upper)
    sym = rules.flag("cholesky", "symmetrize_input", symmetrize_input)
    af, d = _square("cholesky", a)
    n = af.shape[-1]
    batch = tuple(af.shape[:-2])
    if sym:
        af = api.mul(api.add(af, composite.swapaxes(af, -1, -2)), 0.5)
    cols, s = [], af
    for k in range(n):  # the right-looking column algorithm on the trailing block
        root = api.sqrt(_at(s, 0, 0))
        c = api.div(_at(s, slice(1, None), 0), _col(root))  # [..., n - k - 1]
        parts = [api.broadcast_to(api.asvalue(np.zeros(k, np.float32)), (*batch, k)), _col(root), c]
        cols.append(api.concat(parts, -1))
        s = api.sub(_at(s, slice(1, None), slice(1, None)), api.mul(_col(c), _row(c)))
    if not n:
        return _narrow(af, d)
    lower = composite.stack(cols, -1)
    bad = composite.any(composite.isnan(lower), (-2, -1), True)
    r = api.where(composite.logical_and(bad, np.tri(n, dtype=bool)), math.nan, lower)
    return _narrow(composite.swapaxes(r, -1, -2) if upper else r, d)


class QRResult(NamedTuple):
    """What :func:`qr` returns (JAX's named tuple)."""

    Q: Any
    R: Any


def _qr_jax(a: Any, mode: str = "reduced") -> Any:
    return jnp.linalg.qr(a, mode=mode)


@_composite("qr", "the QR factorization of matrices (Householder reflections)", _qr_jax)
def qr(a: Any, mode: str = "reduced") -> Any:
    """``Q`` with orthonormal columns and upper-triangular ``R`` with ``Q @ R == a``, as
    ``jnp.linalg.qr``: ``mode`` ``"reduced"`` (``Q`` ``[..., m, k]``, ``R`` ``[..., k, n]``,
    ``k = min(m, n)``), ``"complete"`` (``Q`` square) or ``"r"`` (``R`` alone). Householder
    reflections as LAPACK's ``geqrf`` makes them (each ``R[j, j]`` has the opposite sign of
    the column's leading element), so the signs agree with JAX's.

    >>> import pypto as pto
    >>> q, r = pto.linalg.qr(pto.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> r.numpy().round(4)
    array([[-5. , -2.2],
           [ 0. ,  0.4]], dtype=float32)
    >>> float(abs((q @ r).numpy() - [[3.0, 1.0], [4.0, 2.0]]).max()) < 1e-6
    True
    """
    if mode not in ("reduced", "complete", "r"):
        raise ShapeError(
            f"mode={mode!r} is not one of 'reduced', 'complete', 'r'",
            op="qr",
            hint="'raw' (LAPACK's packed reflectors) is not provided",
        )
    v0 = api.asvalue(a, "qr")
    if len(v0.shape) < 2:  # type: ignore[attr-defined]
        raise ShapeError(f"needs matrices in the last two axes, got {api._aval(v0)}", op="qr")
    d = v0.dtype if v0.dtype.is_floating else dt.float32  # type: ignore[attr-defined]
    s: Any = v0 if v0.dtype is dt.float32 else api.cast(v0, dt.float32)  # type: ignore[attr-defined]
    *batch, m, n = s.shape
    batch = tuple(batch)
    k = min(m, n)
    rows: list[Any] = []  # R's rows, each from its diagonal on
    reflectors: list[tuple[Any, Any]] = []  # (v with v[0] = 1, tau)
    for j in range(k):
        x = _at(s, slice(None), 0)  # [..., m - j]
        alpha = _at(x, 0)
        rest = _at(x, slice(1, None))
        xnorm = api.sqrt(api.sum(api.mul(rest, rest), -1))
        # LAPACK's dlarfg: beta = -sign(alpha)·‖x‖; no reflection where x[1:] is zero
        plain = api.equal(xnorm, 0.0)
        norm = api.sqrt(api.add(api.mul(alpha, alpha), api.mul(xnorm, xnorm)))
        beta = api.where(plain, alpha, api.where(api.less(alpha, 0.0), norm, api.neg(norm)))
        safe = api.where(plain, 1.0, api.sub(alpha, beta))
        tau = api.where(plain, 0.0, api.div(api.sub(beta, alpha), api.where(plain, 1.0, beta)))
        v = api.concat(
            [
                api.broadcast_to(api.asvalue(np.ones(1, np.float32)), (*batch, 1)),
                api.where(_col(plain), 0.0, api.div(rest, _col(safe))),
            ],
            -1,
        )
        reflectors.append((v, tau))
        trail = _at(s, slice(None), slice(1, None))  # [..., m - j, n - j - 1]
        if n - j - 1:
            # H·trail = trail - tau·v·(vᵀ·trail)
            w = api.sum(api.mul(_col(v), trail), (trail.ndim - 2,))  # [..., n - j - 1]
            trail = api.sub(trail, api.mul(_col(api.mul(v, _col(tau))), _row(w)))
            rows.append(api.concat([_col(beta), _at(trail, 0, slice(None))], -1))
        else:
            rows.append(_col(beta))
        s = _at(trail, slice(1, None), slice(None))
    ks = m if mode == "complete" else k

    def padded(row: Any, j: int) -> Any:
        return api.concat(
            [api.broadcast_to(api.asvalue(np.zeros(j, np.float32)), (*batch, j)), row], -1
        )

    r_rows = [padded(rows[j], j) for j in range(k)]
    r_rows += [api.broadcast_to(api.asvalue(np.zeros(n, np.float32)), (*batch, n))] * (
        (m - k) if mode == "complete" else 0
    )
    r = (
        composite.stack(r_rows, -2)
        if r_rows
        else api.broadcast_to(api.asvalue(np.zeros((0, n), np.float32)), (*batch, 0, n))
    )
    if mode == "r":
        return _narrow(r, d)
    # Q = H_0 ··· H_{k-1} applied to the first ks columns of the identity, back to front
    q = api.broadcast_to(api.asvalue(np.eye(m, ks, dtype=np.float32)), (*batch, m, ks))
    for j in reversed(range(k)):
        v, tau = reflectors[j]
        head, tail = _at(q, slice(0, j), slice(None)), _at(q, slice(j, None), slice(None))
        w = api.sum(api.mul(_col(v), tail), (tail.ndim - 2,))
        tail = api.sub(tail, api.mul(_col(api.mul(v, _col(tau))), _row(w)))
        q = api.concat([head, tail], -2) if j else tail
    return QRResult(_narrow(q, d), _narrow(r, d))


def _matrix_power_jax(a: Any, n: int) -> Any:
    return jnp.linalg.matrix_power(a, n)


@_composite("matrix_power", "a square matrix raised to an integer power", _matrix_power_jax)
def matrix_power(a: Any, n: int) -> Any:
    """``a`` ``[..., m, m]`` to the integer power ``n`` by repeated squaring (JAX's order of
    products); ``n = 0`` gives the identity and a negative ``n`` the power of the inverse.

    >>> import pypto as pto
    >>> pto.linalg.matrix_power(pto.tensor([[1, 1], [1, 0]]), 10).numpy()
    array([[89, 55],
           [55, 34]], dtype=int32)
    """
    n = rules.integer("matrix_power", "n", n)
    v = api.asvalue(a, "matrix_power")
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ShapeError(
            f"needs square matrices in the last two axes, got {api._aval(v)}",
            op="matrix_power",
            hint="pass an array of shape [..., m, m]",
        )
    if n == 0:
        eye = np.eye(shape[-1], dtype=v.dtype.np)  # type: ignore[attr-defined]
        return api.broadcast_to(api.asvalue(eye), shape)
    if n < 0:
        v, n = inv(v), -n
    if n == 3:
        return api.matmul(api.matmul(v, v), v)
    z = result = None
    while n > 0:
        z = v if z is None else api.matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else api.matmul(result, z)
    return result
