"""``pto.linalg``: the linear algebra of ``jax.numpy.linalg`` that pypto computes.

The decompositions are ops of the table (:mod:`pypto.ops.solvers`, :mod:`pypto.ops.spectral`).
The functions written here combine them: ``pinv`` (with the pseudo-inverse's own derivative,
as JAX's), ``cond``, ``matrix_norm``, ``vector_norm``, ``multi_dot``, ``tensorinv`` and
``tensorsolve``.

>>> import pypto as pto
>>> float(pto.linalg.norm(pto.ones((2, 2))))
2.0
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import ShapeError
from pypto.graph.custom_vjp import custom_vjp
from pypto.ops import (
    api,
    cross,
    diagonal,
    matmul,
    matrix_transpose,
    norm,
    outer,
    tensordot,
    trace,
    vecdot,
)
from pypto.ops.composite import any as _any
from pypto.ops.composite import (
    expand_dims,
    isnan,
    logical_and,
    logical_not,
    moveaxis,
    swapaxes,
)
from pypto.ops.solvers import (
    QRResult,
    _matrices,
    cholesky,
    det,
    inv,
    matrix_power,
    qr,
    slogdet,
    solve,
)
from pypto.ops.spectral import (
    EighResult,
    SVDResult,
    _jacobi_svd,
    eigh,
    eigvalsh,
    lstsq,
    matrix_rank,
    svd,
    svdvals,
)

__all__ = [
    "EighResult",
    "QRResult",
    "SVDResult",
    "cholesky",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "inv",
    "lstsq",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "multi_dot",
    "norm",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
    "tensorinv",
    "tensorsolve",
    "trace",
    "vecdot",
    "vector_norm",
]


def _t(x: Any) -> Any:
    return swapaxes(x, -1, -2)


def _pinv_values(a: Any, rtol: Any) -> Any:
    """The pseudo-inverse of float32 ``a`` ``[..., m, n]`` (``m, n > 0``): singular values at
    or below ``rtol`` ``[...]`` times the largest count as zero."""
    # (the thin SVD as the rotations leave it: U's columns for zero singular values are zero
    # instead of completed, and the pseudo-inverse multiplies them by 0 anyway)
    u, s, vh, bad = _jacobi_svd(a)
    cut = api.mul(expand_dims(rtol, -1), api.getitem(s, (Ellipsis, slice(0, 1))))
    s = api.where(api.greater(s, cut), s, math.inf)
    return api.where(bad, math.nan, matmul(_t(vh), api.div(_t(u), expand_dims(s, -1))))


# The SVD's own derivative is undefined where singular values repeat (an orthogonal matrix),
# the pseudo-inverse's is not: Golub and Pereyra's formula, as JAX's rule uses.
_pinv = custom_vjp(_pinv_values)


def _pinv_fwd(a: Any, rtol: Any) -> tuple[Any, tuple[Any, Any]]:
    p = _pinv_values(a, rtol)
    return p, (a, p)


def _pinv_bwd(res: tuple[Any, Any], g: Any) -> tuple[Any, None]:
    a, p = res
    m, n = a.shape[-2:]
    pt, gt = _t(p), _t(g)
    eye_m, eye_n = np.eye(m, dtype=np.float32), np.eye(n, dtype=np.float32)
    # ā = -Pᵀ G Pᵀ + (I - A P) Gᵀ P Pᵀ + Pᵀ P Gᵀ (I - P A)
    ga = api.neg(matmul(matmul(pt, g), pt))
    ga = api.add(ga, matmul(matmul(api.sub(eye_m, matmul(a, p)), gt), matmul(p, pt)))
    ga = api.add(ga, matmul(matmul(matmul(pt, p), gt), api.sub(eye_n, matmul(p, a))))
    return ga, None


_pinv.defvjp(_pinv_fwd, _pinv_bwd)


def pinv(a: Any, rtol: Any = None, hermitian: bool = False, *, rcond: Any = None) -> Any:
    """The Moore-Penrose pseudo-inverse of ``a`` ``[..., m, n]`` (``[..., n, m]``), as
    ``jnp.linalg.pinv``: from :func:`svd`, singular values at or below ``rtol`` times the
    largest taken as zero; ``rtol`` (or its alias ``rcond``; a number or one per matrix)
    defaults to ``10·max(m, n)·eps``, JAX's choice. ``hermitian`` uses ``(a + aᵀ) / 2`` (JAX
    reads its singular values off :func:`eigh`; the values are the same). The gradient is the
    pseudo-inverse's own (Golub and Pereyra), defined also where singular values repeat.

    >>> import pypto as pto
    >>> pto.linalg.pinv(pto.tensor([[1.0, 2.0], [2.0, 4.0]])).numpy().round(4)
    array([[0.04, 0.08],
           [0.08, 0.16]], dtype=float32)
    """
    if rcond is not None:
        if rtol is not None:
            raise ShapeError("only one of rtol and rcond may be given", op="pinv")
        rtol = rcond
    w, d = _matrices("pinv", a)
    *batch, m, n = w.shape
    if m == 0 or n == 0:
        return api.cast(api.broadcast_to(api.asvalue(np.float32(0)), (*batch, n, m)), d)
    if hermitian:
        w = api.mul(api.add(w, _t(w)), 0.5)
    if rtol is None:
        rtol = 10.0 * max(m, n) * float(np.finfo(d.np).eps)
    tol = api.broadcast_to(api.cast(api.asvalue(rtol, "pinv"), dt.float32), tuple(batch))
    p = _pinv(w, tol)
    return p if d is dt.float32 else api.cast(p, d)


def cond(x: Any, p: Any = None) -> Any:
    """The condition number of ``x`` ``[..., m, n]`` in the norm ``p``, as
    ``jnp.linalg.cond``: ``None`` or ``2`` the ratio of the largest to the smallest singular
    value, ``-2`` its inverse; otherwise (square ``x``) ``norm(x, p)·norm(inv(x), p)`` for
    ``p`` in ``1, -1, inf, -inf, "fro"``. A NaN from a singular matrix (not from a NaN in
    ``x``) becomes inf, except for ``p`` None and 2, as in JAX.

    >>> import pypto as pto
    >>> pto.linalg.cond(pto.tensor([[1.0, 2.0], [2.0, 1.0]])).item()
    3.0
    """
    v = api.asvalue(x, "cond")
    shape = tuple(v.shape)  # type: ignore[attr-defined]
    if len(shape) < 2 or 0 in shape[-2:]:
        raise ShapeError(
            f"needs non-empty matrices in the last two axes, got {api._aval(v)}", op="cond"
        )
    if p is None or p == 2 or p == -2:
        s = svdvals(v)
        big, small = (api.getitem(s, (Ellipsis, i)) for i in (0, -1))
        if p != -2:
            return api.div(big, small)
        r = api.div(small, big)
    else:
        if shape[-1] != shape[-2]:
            raise ShapeError(
                f"p={p!r} needs square matrices, got {api._aval(v)}",
                op="cond",
                hint="p None, 2 and -2 take any shape",
            )
        r = api.mul(norm(v, p, (-2, -1)), norm(inv(v), p, (-2, -1)))
    clean = logical_not(_any(isnan(v), (-2, -1)))
    return api.where(logical_and(isnan(r), clean), math.inf, r)


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    """The norm ``ord`` of the matrices in the last two axes of ``x``, as
    ``jnp.linalg.matrix_norm``: :func:`norm` over ``(-2, -1)``.

    >>> import pypto as pto
    >>> pto.linalg.matrix_norm(pto.tensor([[3.0, 0.0], [0.0, 4.0]]), ord=2).item()
    4.0
    """
    return norm(x, ord, (-2, -1), keepdims)


def vector_norm(
    x: Any, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False, ord: Any = 2
) -> Any:
    """The vector norm ``ord`` of ``x`` over ``axis`` (all axes when None, any number of them
    otherwise), as ``jnp.linalg.vector_norm``: 2 (or None) Euclidean, 1, ±inf the largest or
    smallest magnitude, 0 the count of nonzeros, any other p ``sum(|x|^p)^(1/p)``.

    >>> import pypto as pto
    >>> pto.linalg.vector_norm(pto.ones((2, 2, 2)), axis=(0, 2)).numpy()
    array([2., 2.], dtype=float32)
    """
    (v,) = api.promote("vector_norm", (x,), inexact=True)
    axes = None if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    a = api.abs(v)
    if ord is None or ord == 2:
        return api.sqrt(api.sum(api.mul(v, v), axes, keepdims))
    if ord == math.inf:
        return api.max(a, axes, keepdims)
    if ord == -math.inf:
        return api.min(a, axes, keepdims)
    if ord == 0:
        return api.sum(api.cast(api.not_equal(v, 0.0), v.dtype), axes, keepdims)  # type: ignore[attr-defined]
    if ord == 1:
        return api.sum(a, axes, keepdims)
    if isinstance(ord, str):
        raise ShapeError(f"ord={ord!r} is not a vector norm", op="vector_norm")
    return api.pow(api.sum(api.pow(a, float(ord)), axes, keepdims), 1.0 / float(ord))


def _chain_order(dims: list[int]) -> list[list[int]]:
    """The cheapest parenthesisation of matrices ``dims[i]`` by ``dims[i + 1]``: for each ``i <
    j``, the split ``k`` of ``i..j`` into ``(i..k)(k+1..j)`` (the classic dynamic program)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for span in range(1, n):
        for i in range(n - span):
            j = i + span
            cost[i][j] = math.inf  # type: ignore[call-overload]
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(arrays: Sequence[Any], *, precision: Any = None) -> Any:
    """The product of a chain of matrices in the order with the fewest multiplications, as
    ``jnp.linalg.multi_dot``: the first and last may be 1-d (a row and a column vector),
    the others are 2-d. ``precision`` is accepted for JAX's signature; products accumulate as
    :func:`matmul` does.

    >>> import pypto as pto
    >>> pto.linalg.multi_dot([pto.ones(3), pto.ones((3, 4)), pto.ones(4)]).item()
    12.0
    """
    del precision
    arrs = [api.asvalue(a, "multi_dot") for a in arrays]
    shapes = [tuple(a.shape) for a in arrs]  # type: ignore[attr-defined]
    if len(arrs) < 2:
        raise ShapeError(f"needs at least two arrays, got {len(arrs)}", op="multi_dot")
    if not (
        len(shapes[0]) in (1, 2)
        and len(shapes[-1]) in (1, 2)
        and all(len(s) == 2 for s in shapes[1:-1])
    ):
        raise ShapeError(
            f"the arrays must be 2-d, the first and last 1-d or 2-d, got shapes {shapes}",
            op="multi_dot",
        )
    first_vec, last_vec = len(shapes[0]) == 1, len(shapes[-1]) == 1
    if first_vec:
        arrs[0] = api.reshape(arrs[0], (1, shapes[0][0]))
    if last_vec:
        arrs[-1] = api.reshape(arrs[-1], (shapes[-1][0], 1))
    mats = [tuple(a.shape) for a in arrs]  # type: ignore[attr-defined]
    if any(p[1] != q[0] for p, q in itertools.pairwise(mats)):
        raise ShapeError(
            f"each array's last dimension must equal the next one's first, got shapes {shapes}",
            op="multi_dot",
        )
    split = _chain_order([mats[0][0], *(s[1] for s in mats)])

    def product(i: int, j: int) -> Any:
        if i == j:
            return arrs[i]
        k = split[i][j]
        return matmul(product(i, k), product(k + 1, j))

    out = product(0, len(arrs) - 1)
    keep = tuple(s for s, drop in zip(out.shape, (first_vec, last_vec), strict=True) if not drop)
    return api.reshape(out, keep)


def tensorinv(a: Any, ind: int = 2) -> Any:
    """The inverse of ``a`` with respect to :func:`tensordot` over its first ``ind`` axes, as
    ``jnp.linalg.tensorinv``: ``a`` reshaped to a square matrix, inverted, reshaped to
    ``a.shape[ind:] + a.shape[:ind]``.

    >>> import pypto as pto
    >>> pto.linalg.tensorinv(pto.eye(4).reshape(4, 2, 2), ind=1).shape
    (2, 2, 4)
    """
    v = api.asvalue(a, "tensorinv")
    if not isinstance(ind, int) or ind <= 0:
        raise ShapeError(f"ind must be a positive integer, got {ind!r}", op="tensorinv")
    head, tail = tuple(v.shape[:ind]), tuple(v.shape[ind:])  # type: ignore[attr-defined]
    if math.prod(head) != math.prod(tail):
        raise ShapeError(
            f"the first {ind} axes of {api._aval(v)} must hold as many elements as the rest",
            op="tensorinv",
        )
    return api.reshape(inv(api.reshape(v, (math.prod(head), math.prod(tail)))), (*tail, *head))


def tensorsolve(a: Any, b: Any, axes: Sequence[int] | None = None) -> Any:
    """The ``x`` with ``tensordot(a, x, x.ndim) == b``, as ``jnp.linalg.tensorsolve``:
    ``axes`` of ``a`` are moved to the end first; ``a`` is then reshaped to a square matrix.

    >>> import pypto as pto
    >>> a = pto.eye(6).reshape(6, 2, 3)
    >>> pto.linalg.tensorsolve(a, pto.ones(6)).shape
    (2, 3)
    """
    av, bv = api.asvalue(a, "tensorsolve"), api.asvalue(b, "tensorsolve")
    if axes is not None:
        nd = len(av.shape)  # type: ignore[attr-defined]
        av = moveaxis(av, tuple(axes), tuple(range(nd - len(axes), nd)))
    bshape = tuple(bv.shape)  # type: ignore[attr-defined]
    out = tuple(av.shape[len(bshape) :])  # type: ignore[attr-defined]
    if tuple(av.shape[: len(bshape)]) != bshape or math.prod(bshape) != math.prod(out):  # type: ignore[attr-defined]
        raise ShapeError(
            f"a's leading axes must be b's shape and hold as many elements as the rest, got "
            f"{api._aval(av)} and {api._aval(bv)}",
            op="tensorsolve",
        )
    x = solve(api.reshape(av, (math.prod(bshape), math.prod(out))), api.reshape(bv, (-1,)))
    return api.reshape(x, out)
