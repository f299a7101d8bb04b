"""Symmetric eigenvalues and singular values by Jacobi rotations, as composites: ``eigh``,
``eigvalsh``, ``svd`` and ``svdvals`` of ``jax.numpy.linalg``, and ``lstsq`` and
``matrix_rank``, built on the SVD (``pinv`` and ``cond`` are in :mod:`pypto.linalg`). All work
on the last two axes, batched over the others, in float32 (float16 and bfloat16 are computed
in float32 and rounded once, where JAX's LAPACK refuses them; integers give float32).

Both decompositions are cyclic Jacobi methods in the parallel (round-robin) order: each round
rotates ``n // 2`` disjoint pairs of indices at once, so a round is a few small matmuls (gather
the pairs' entries, build the block rotation ``J``, apply it), and ``n - 1`` rounds (``n``
for odd ``n``) make a sweep in which every pair is rotated once. ``eigh`` applies ``Jᵀ A J``
(two-sided); ``svd`` applies ``G J`` to the columns (one-sided, Hestenes), with the pairs'
entries read from ``GᵀG``. Each rotation is the one that zeroes its pair's off-diagonal entry
with the smaller angle (|θ| ≤ π/4), written without a division by that entry, so it has a
gradient everywhere. The matrix size is static and the number of sweeps fixed: ⌈log₂ n⌉ + 2,
one or two more than random, clustered and graded spectra needed to reach float32 accuracy
(4 at ``n = 8``, 6 at ``n = 32``, 7 at ``n = 64``). So the graph grows with ``n`` (about
``sweeps · n`` rounds of ~20 ops): like the eliminations of :mod:`pypto.ops.solvers`, these
suit the small matrices used inside a model. Gradients go through the rotations and agree with
JAX's rules wherever the decomposition is unique (distinct eigenvalues or singular values);
where it is not, JAX's rules give inf or NaN and these give finite values.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import ShapeError, TraceError
from pypto.ops import api, composite, numpy_lib, rules
from pypto.ops.composite import _composite
from pypto.ops.index_tricks import vander
from pypto.ops.indexing import _concrete
from pypto.ops.numpy_lib import _narrow
from pypto.ops.solvers import _at, _col, _matrices, _row, _square, inv, qr


class EighResult(NamedTuple):
    """What :func:`eigh` returns (JAX's named tuple)."""

    eigenvalues: Any
    eigenvectors: Any


class SVDResult(NamedTuple):
    """What :func:`svd` returns (JAX's named tuple)."""

    U: Any
    S: Any
    Vh: Any


@functools.cache
def _rounds(n: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The round-robin order of the pairs of ``range(n)``: for each round, the one-hot
    ``[n², 3k]`` matrix that gathers its ``k`` pairs' entries ``(a_pp, a_qq, a_pq)`` from a
    flattened matrix, and the ``[2k, n²]`` one that scatters ``(c - 1, s)`` into ``J - I``."""
    m = n + n % 2  # an odd n plays against a dummy, which sits one pair out each round
    players = list(range(m))
    out = []
    for _ in range(m - 1):
        pairs = [
            (min(a, b), max(a, b))
            for a, b in zip(players[: m // 2], reversed(players[m // 2 :]), strict=True)
            if a < n and b < n
        ]
        players = [players[0], players[-1], *players[1:-1]]
        if not pairs:
            continue
        k = len(pairs)
        p, q, r = np.array(pairs)[:, 0], np.array(pairs)[:, 1], np.arange(k)
        gather = np.zeros((n * n, 3 * k), np.float32)
        gather[p * n + p, r] = gather[q * n + q, k + r] = gather[p * n + q, 2 * k + r] = 1
        build = np.zeros((2 * k, n * n), np.float32)
        build[r, p * n + p] = build[r, q * n + q] = build[k + r, p * n + q] = 1
        build[k + r, q * n + p] = -1
        out.append((gather, build))
    return tuple(out)


def _sweeps(n: int) -> int:
    return max(1, math.ceil(math.log2(max(n, 1)))) + 2


def _rotation(app: Any, aqq: Any, apq: Any) -> tuple[Any, Any]:
    """``(c, s)`` of the rotation that zeroes ``a_pq`` in ``Jᵀ A J`` with the smaller angle:
    ``t = tan θ = sign(d)·2a_pq / (|d| + √(d² + 4a_pq²))``, ``d = a_qq - a_pp``
    (Golub and Van Loan's ``sym.schur2`` with both sides multiplied by ``2|a_pq|``); no
    rotation where ``d`` and ``a_pq`` are both zero."""
    d = api.sub(aqq, app)
    r2 = api.add(api.mul(d, d), api.mul(api.mul(apq, apq), 4.0))
    flat = api.equal(r2, 0.0)
    r = api.where(flat, 0.0, api.sqrt(api.where(flat, 1.0, r2)))  # no √ of 0 to differentiate
    den = api.add(api.abs(d), r)
    t = api.div(
        api.mul(api.where(api.less(d, 0.0), -2.0, 2.0), apq),
        api.where(api.equal(den, 0.0), 1.0, den),
    )
    c = api.rsqrt(api.add(api.mul(t, t), 1.0))
    return c, api.mul(t, c)


def _jacobi(a: Any, one_sided: bool) -> tuple[Any, Any]:
    """Cyclic Jacobi on ``a`` ``[..., m, n]`` (float32): two-sided (``a`` symmetric, ``m = n``)
    gives ``(Jᵀ·a·J, J)``, one-sided gives ``(a·J, J)`` with orthogonal columns, ``J`` the
    product of every rotation."""
    *batch, _, n = a.shape
    batch = tuple(batch)
    eye = np.eye(n, dtype=np.float32)
    v = api.broadcast_to(api.asvalue(eye), (*batch, n, n))
    for _ in range(_sweeps(n)):
        for gather, build in _rounds(n):
            k = gather.shape[1] // 3
            sym = api.matmul(composite.swapaxes(a, -1, -2), a) if one_sided else a
            e = api.matmul(api.reshape(sym, (*batch, n * n)), gather)  # [..., 3k]
            c, s = _rotation(
                _at(e, slice(0, k)), _at(e, slice(k, 2 * k)), _at(e, slice(2 * k, None))
            )
            cs = api.concat([api.sub(c, 1.0), s], -1)
            j = api.add(api.reshape(api.matmul(cs, build), (*batch, n, n)), eye)
            a = api.matmul(a, j)
            if not one_sided:
                a = api.matmul(composite.swapaxes(j, -1, -2), a)
            v = api.matmul(v, j)
    return a, v


def _scaled(a: Any) -> tuple[Any, Any]:
    """``a`` divided by the power of two nearest its largest magnitude (exactly), and that
    exponent ``[..., 1, 1]``: the rotations square the entries, which must neither overflow
    nor underflow."""
    big = api.max(api.abs(a), (-2, -1), True)
    _, e = numpy_lib.frexp(big)
    return numpy_lib.ldexp(a, api.neg(e)), e


def _sort(values: Any, *vectors: Any, descending: bool) -> list[Any]:
    """``values`` ``[..., k]`` sorted, and the columns of each of ``vectors`` ``[..., m, k]``
    in the same order."""
    order = composite.argsort(api.neg(values) if descending else values, -1, stable=True)
    return [
        composite.take_along_axis(values, order, -1),
        *(composite.take_along_axis(x, _row(order), -1) for x in vectors),
    ]


def _eigh_jax(a: Any, UPLO: str | None = None, symmetrize_input: bool = True) -> Any:
    return jnp.linalg.eigh(a, UPLO=UPLO, symmetrize_input=symmetrize_input)


def _symmetric(op: str, a: Any, UPLO: str | None, symmetrize_input: bool) -> tuple[Any, dt.DType]:
    if UPLO not in (None, "L", "U"):
        raise ShapeError(f"UPLO must be None, 'L' or 'U', got {UPLO!r}", op=op)
    v, d = _square(op, a)
    t = composite.swapaxes(v, -1, -2)
    if symmetrize_input:
        return api.mul(api.add(v, t), 0.5), d
    n = v.shape[-1]
    low = np.tri(n, dtype=bool) if UPLO != "U" else np.tri(n, dtype=bool).T
    return api.where(low, v, t), d  # the named triangle, mirrored


@_composite(
    "eigh", "eigenvalues and eigenvectors of symmetric matrices (Jacobi rotations)", _eigh_jax
)
def eigh(a: Any, UPLO: str | None = None, symmetrize_input: bool = True) -> Any:
    """The eigenvalues (ascending) and orthonormal eigenvectors (columns) of the symmetric
    matrices ``a`` ``[..., n, n]``, as ``jnp.linalg.eigh``: an :class:`EighResult`
    ``(eigenvalues, eigenvectors)``. ``symmetrize_input`` uses ``(a + aᵀ) / 2``; without it,
    the triangle ``UPLO`` names (``"L"``, the default, or ``"U"``). Each eigenvector's sign is
    the one the rotations give (LAPACK's is not specified either): compare ``v`` up to the sign
    of each column.

    >>> import pypto as pto
    >>> w, v = pto.linalg.eigh(pto.tensor([[2.0, 1.0], [1.0, 2.0]]))
    >>> w.numpy().round(5)
    array([1., 3.], dtype=float32)
    >>> abs(v.numpy()).round(4)
    array([[0.7071, 0.7071],
           [0.7071, 0.7071]], dtype=float32)
    """
    s, d = _symmetric("eigh", a, UPLO, symmetrize_input)
    if s.shape[-1] == 0:
        return EighResult(_narrow(api.reshape(s, s.shape[:-1]), d), _narrow(s, d))
    s, e = _scaled(s)
    diag, v = _jacobi(s, one_sided=False)
    w = numpy_lib.ldexp(composite.diagonal(diag, 0, -2, -1), api.reshape(e, e.shape[:-1]))
    w, v = _sort(w, v, descending=False)
    return EighResult(_narrow(w, d), _narrow(v, d))


def _eigvalsh_jax(a: Any, UPLO: str | None = "L", symmetrize_input: bool = True) -> Any:
    return jnp.linalg.eigvalsh(a, UPLO=UPLO, symmetrize_input=symmetrize_input)


@_composite("eigvalsh", "eigenvalues of symmetric matrices", _eigvalsh_jax)
def eigvalsh(a: Any, UPLO: str | None = "L", symmetrize_input: bool = True) -> Any:
    """The eigenvalues of :func:`eigh`, ascending, as ``jnp.linalg.eigvalsh``.

    >>> import pypto as pto
    >>> pto.linalg.eigvalsh(pto.tensor([[2.0, 0.0], [0.0, -1.0]])).numpy()
    array([-1.,  2.], dtype=float32)
    """
    return eigh(a, UPLO, symmetrize_input)[0]


def _svd_jax(
    a: Any,
    full_matrices: bool = True,
    compute_uv: bool = True,
    hermitian: bool = False,
    subset_by_index: Any = None,
) -> Any:
    return jnp.linalg.svd(a, full_matrices, compute_uv, hermitian, subset_by_index)


def _orthonormal(u: Any, full: bool) -> Any:
    """Columns ``u`` ``[..., m, k]`` that are orthonormal or zero (a zero singular value), made
    orthonormal and, when ``full``, completed to ``[..., m, m]``: the QR of ``[u | I]`` keeps
    each nonzero column (up to the sign its ``R`` gives back) and fills the rest."""
    *batch, m, k = u.shape
    eye = api.broadcast_to(api.asvalue(np.eye(m, dtype=np.float32)), (*batch, m, m))
    q, r = qr(api.concat([u, eye], -1))
    sign = api.where(api.less(composite.diagonal(r, 0, -2, -1), 0.0), -1.0, 1.0)  # [..., m]
    q = api.mul(q, _row(sign))
    return q if full else _at(q, slice(None), slice(0, k))


@_composite("svd", "singular value decomposition (one-sided Jacobi rotations)", _svd_jax)
def svd(
    a: Any,
    full_matrices: bool = True,
    compute_uv: bool = True,
    hermitian: bool = False,
    subset_by_index: Any = None,
) -> Any:
    """The singular values (descending) of ``a`` ``[..., m, n]`` and, with ``compute_uv``, the
    singular vectors: an :class:`SVDResult` ``(U, S, Vh)`` with ``a = U·diag(S)·Vh``, as
    ``jnp.linalg.svd``; ``U`` is ``[..., m, m]`` and ``Vh`` ``[..., n, n]`` with
    ``full_matrices``, else ``[..., m, k]`` and ``[..., k, n]`` (``k = min(m, n)``).
    ``hermitian`` takes them from :func:`eigh` of the symmetric ``a``. A pair of singular
    vectors has the sign the rotations give (LAPACK's is not specified either); columns for
    zero singular values, and the completion of a full ``U`` or ``Vh``, are some orthonormal
    basis of their space.

    >>> import pypto as pto
    >>> pto.linalg.svd(pto.tensor([[3.0, 0.0], [4.0, 5.0]]), compute_uv=False).numpy().round(4)
    array([6.7082, 2.2361], dtype=float32)
    >>> a = pto.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> u, s, vh = pto.linalg.svd(a, full_matrices=False)
    >>> float(abs((u * s[None]) @ vh - a).max()) < 1e-5
    True
    """
    if subset_by_index is not None:
        raise ShapeError(
            f"subset_by_index={subset_by_index!r} is not supported (JAX has it on TPU only)",
            op="svd",
            hint="compute every singular value and slice them",
        )
    v0, d = _matrices("svd", a)
    *batch, m, n = v0.shape
    batch = tuple(batch)
    k = min(m, n)
    if hermitian:
        w, vec = eigh(v0)
        flip = api.where(api.less(w, 0.0), -1.0, 1.0)
        s, vec_s, signed = _sort(api.abs(w), vec, api.mul(vec, _row(flip)), descending=True)
        if not compute_uv:
            return _narrow(s, d)
        return SVDResult(
            _narrow(vec_s, d), _narrow(s, d), _narrow(composite.swapaxes(signed, -1, -2), d)
        )
    if k == 0:
        s = api.reshape(api.asvalue(np.zeros(0, np.float32)), (0,))
        s = api.broadcast_to(s, (*batch, 0))
        if not compute_uv:
            return _narrow(s, d)
        ud = m if full_matrices else 0
        vd = n if full_matrices else 0
        u = api.broadcast_to(api.asvalue(np.eye(m, ud, dtype=np.float32)), (*batch, m, ud))
        vh = api.broadcast_to(api.asvalue(np.eye(vd, n, dtype=np.float32)), (*batch, vd, n))
        return SVDResult(_narrow(u, d), _narrow(s, d), _narrow(vh, d))
    u, s_out, vh, bad = _jacobi_svd(v0)
    if not compute_uv:
        return _narrow(s_out, d)
    # the columns of U made orthonormal (zero singular values give zero columns) and completed;
    # for a wide matrix those are the rows of Vh
    wide = m < n
    t = functools.partial(composite.swapaxes, axis1=-1, axis2=-2)
    if wide:
        vh = t(_orthonormal(t(vh), full_matrices))
    else:
        u = _orthonormal(u, full_matrices)
    u, vh = (api.where(bad, math.nan, x) for x in (u, vh))
    return SVDResult(_narrow(u, d), _narrow(s_out, d), _narrow(vh, d))


def _jacobi_svd(v0: Any) -> tuple[Any, Any, Any, Any]:
    """The thin SVD of float32 ``v0`` ``[..., m, n]`` (``k = min(m, n) > 0``) by one-sided
    Jacobi: ``(U [..., m, k], s [..., k], Vh [..., k, n], bad [..., 1, 1])``, where the side
    that came from the columns (``U``, or ``Vh``'s rows for a wide matrix) is ``G / s``: zero
    for a zero singular value, not yet completed to an orthonormal basis (a pseudo-inverse
    multiplies those by 0 anyway); ``bad`` marks matrices with an infinity or NaN, whose
    singular values are NaN, as LAPACK's."""
    *batch, m, n = v0.shape
    wide = m < n  # decompose aᵀ = V·S·Uᵀ: the rotations act on the fewer columns
    t = functools.partial(composite.swapaxes, axis1=-1, axis2=-2)
    g, e = _scaled(t(v0) if wide else v0)
    g, v = _jacobi(g, one_sided=True)
    ss = api.sum(api.mul(g, g), -2)  # [..., k]: each column's squared norm
    zero = api.equal(ss, 0.0)
    norms = api.where(zero, 0.0, api.sqrt(api.where(zero, 1.0, ss)))
    s, v, g = _sort(norms, v, g, descending=True)
    cols = api.div(g, _row(api.where(api.equal(s, 0.0), 1.0, s)))
    s = numpy_lib.ldexp(s, api.reshape(e, e.shape[:-1]))
    bad = composite.logical_not(composite.all(composite.isfinite(v0), (-2, -1), True))
    s = api.where(api.reshape(bad, (*batch, 1)), math.nan, s)
    return (v, s, t(cols), bad) if wide else (cols, s, t(v), bad)


def _svdvals_jax(x: Any) -> Any:
    return jnp.linalg.svdvals(x)


@_composite("svdvals", "singular values, descending", _svdvals_jax)
def svdvals(x: Any) -> Any:
    """The singular values of ``x`` ``[..., m, n]``, descending: :func:`svd` without the
    vectors, as ``jnp.linalg.svdvals``.

    >>> import pypto as pto
    >>> pto.linalg.svdvals(pto.tensor([[0.0, 2.0], [-3.0, 0.0]])).numpy()
    array([3., 2.], dtype=float32)
    """
    return svd(x, compute_uv=False)


def _eps(d: dt.DType) -> float:
    return float(np.finfo(d.np).eps)


def _matrix_rank_jax(M: Any, rtol: Any = None, hermitian: bool = False, tol: Any = None) -> Any:
    return jnp.linalg.matrix_rank(M, rtol, hermitian=hermitian, tol=tol)


@_composite("matrix_rank", "the number of singular values above a tolerance", _matrix_rank_jax)
def matrix_rank(M: Any, rtol: Any = None, hermitian: bool = False, tol: Any = None) -> Any:
    """The rank of the matrices ``M`` ``[..., m, n]`` (int32): the count of singular values
    above ``max(m, n)·eps·s_max`` (``eps`` of ``M``'s float dtype), as
    ``jnp.linalg.matrix_rank``; a given ``rtol`` (or its alias ``tol``; a number or one per
    matrix) is compared with the singular values directly, as JAX does. A 0-d or 1-d ``M`` has
    rank 1 if any element is nonzero.

    >>> import pypto as pto
    >>> pto.linalg.matrix_rank(pto.tensor([[1.0, 2.0], [2.0, 4.0]])).item()
    1
    """
    if tol is not None:
        if rtol is not None:
            raise ShapeError("only one of rtol and tol may be given", op="matrix_rank")
        rtol = tol
    v = api.asvalue(M, "matrix_rank")
    d = v.dtype if v.dtype.is_floating else dt.float32  # type: ignore[attr-defined]
    if len(v.shape) < 2:  # type: ignore[attr-defined]
        return api.cast(composite.any(api.not_equal(v, 0)), dt.int32)
    s = svd(v, compute_uv=False, hermitian=hermitian)
    m, n = v.shape[-2:]  # type: ignore[attr-defined]
    if rtol is None:
        cut = api.mul(api.max(s, -1, True), max(m, n) * _eps(d))
    else:
        cut = _col(api.cast(api.asvalue(rtol, "matrix_rank"), s.dtype))
    return api.sum(api.cast(api.greater(s, cut), dt.int32), -1)


def _lstsq_jax(a: Any, b: Any, rcond: Any = None, numpy_resid: bool = False) -> Any:
    return jnp.linalg.lstsq(a, b, rcond, numpy_resid=numpy_resid)


@_composite("lstsq", "least-squares solution of a x = b (through the SVD)", _lstsq_jax)
def lstsq(a: Any, b: Any, rcond: float | None = None, numpy_resid: bool = False) -> Any:
    """The ``x`` that minimises ``‖b - a·x‖₂`` for ``a`` ``[m, n]`` and ``b`` ``[m]`` or
    ``[m, k]``, the one of least norm when several do, as ``jnp.linalg.lstsq``: the tuple
    ``(x, residuals, rank, s)`` — the squared residual norms per column of ``b``, the rank
    (int32: the count of nonzero singular values of at least ``rcond·s_max``; ``rcond`` is a
    number, ``eps·max(m, n)`` by default) and the singular values of ``a``. With
    ``numpy_resid`` the residuals are empty when the rank is below ``n`` or ``m ≤ n``, as
    numpy's; that shape depends on the values, so it is eager only.

    >>> import pypto as pto
    >>> a = pto.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
    >>> x, res, rank, s = pto.linalg.lstsq(a, pto.tensor([1.0, 2.0, 2.0]))
    >>> x.numpy().round(4), rank.item()
    (array([1.1667, 0.5   ], dtype=float32), 2)
    """
    av, bv = api.promote("lstsq", (a, b), inexact=True)
    if len(av.shape) != 2 or len(bv.shape) not in (1, 2) or av.shape[0] != bv.shape[0]:  # type: ignore[attr-defined]
        raise ShapeError(
            f"needs a [m, n] and b [m] or [m, k], got {api._aval(av)} and {api._aval(bv)}",
            op="lstsq",
            hint="solve stacks of systems with pto.vmap",
        )
    d = av.dtype  # type: ignore[attr-defined]
    m, n = av.shape  # type: ignore[attr-defined]
    vec = len(bv.shape) == 1  # type: ignore[attr-defined]
    a32 = api.cast(av, dt.float32) if d is not dt.float32 else av
    b32 = api.cast(bv, dt.float32) if d is not dt.float32 else bv
    if vec:
        b32 = _col(b32)
    k = min(m, n)
    if k == 0:
        x = api.broadcast_to(api.asvalue(np.zeros((), np.float32)), (n, b32.shape[-1]))  # type: ignore[union-attr]
        s = api.broadcast_to(api.asvalue(np.zeros((), np.float32)), (0,))
        rank = api.asvalue(np.int32(0))
    else:
        eps = _eps(d)
        cut = eps * max(m, n) if rcond is None else (eps if rcond < 0 else float(rcond))
        u, s, vh, _ = _jacobi_svd(a32)  # (U's columns for zero values are never used)
        keep = composite.logical_and(
            api.greater(s, 0.0), api.greater_equal(s, api.mul(_at(s, slice(0, 1)), cut))
        )
        rank = api.sum(api.cast(keep, dt.int32), -1)
        inv_s = api.where(keep, api.div(1.0, api.where(keep, s, 1.0)), 0.0)
        utb = api.matmul(composite.swapaxes(u, -1, -2), b32)
        x = api.matmul(composite.swapaxes(vh, -1, -2), api.mul(_col(inv_s), utb))
    r = api.sub(b32, api.matmul(a32, x))
    resid = api.sum(api.mul(r, r), 0)
    if numpy_resid:
        concrete = _concrete(rank)
        if concrete is None:
            raise TraceError(
                "numpy_resid=True gives residuals whose shape depends on the rank, which is "
                "traced here",
                op="lstsq",
                hint="use numpy_resid=False (the residuals of every column), or call it eagerly",
            )
        if int(concrete) < n or m <= n:
            resid = api.broadcast_to(api.asvalue(np.zeros((), np.float32)), (0,))
    if vec:
        x = api.reshape(x, (n,))
    return _narrow(x, d), _narrow(resid, d), rank, _narrow(s, d)


def _polyfit_jax(
    x: Any, y: Any, deg: int, rcond: Any = None, full: bool = False, w: Any = None, cov: Any = False
) -> Any:
    return jnp.polyfit(x, y, deg, rcond, full, w, cov)


@_composite(
    "polyfit",
    "least-squares polynomial coefficients (lstsq of the scaled Vandermonde)",
    _polyfit_jax,
)
def polyfit(
    x: Any, y: Any, deg: int, rcond: Any = None, full: bool = False, w: Any = None, cov: Any = False
) -> Any:
    """The coefficients (highest degree first) of the degree-``deg`` polynomial closest to
    the points ``(x, y)`` in least squares (``y`` one column of values per fit), as
    ``jnp.polyfit``: the Vandermonde matrix, weighted by ``w`` and with its columns scaled
    to unit norm as numpy does, solved by :func:`lstsq` (the least-norm fit when the points
    do not determine the polynomial; singular values below ``rcond`` times the largest, by
    default ``len(x)·eps``, count as zero). ``full=True`` returns ``(coefficients,
    residuals, rank, singular values, rcond)``; ``cov=True`` (or ``"unscaled"``) returns the
    coefficients and their covariance.

    >>> import pypto as pto
    >>> c = pto.polyfit(pto.tensor([0.0, 1.0, 2.0, 3.0]), pto.tensor([1.0, 3.0, 5.0, 7.0]), 1)
    >>> c.numpy().round(5)
    array([2., 1.], dtype=float32)
    """
    deg = rules.integer("polyfit", "deg", deg)
    if deg < 0:
        raise ShapeError(f"deg must be >= 0, got {deg}", op="polyfit")
    xv, yv = api.promote("polyfit", (x, y), inexact=True)
    if len(xv.shape) != 1 or not xv.shape[0]:  # type: ignore[attr-defined]
        raise ShapeError(f"x must be a non-empty 1-d tensor, got {api._aval(xv)}", op="polyfit")
    m, order = xv.shape[0], deg + 1  # type: ignore[attr-defined]
    if len(yv.shape) not in (1, 2) or yv.shape[0] != m:  # type: ignore[attr-defined]
        raise ShapeError(
            f"y must be [{m}] or [{m}, k] to match x {api._aval(xv)}, got {api._aval(yv)}",
            op="polyfit",
        )
    d = xv.dtype  # type: ignore[attr-defined]
    cut = m * _eps(d) if rcond is None else float(rcond)
    lhs = vander(api.cast(xv, dt.float32), order)
    rhs = api.cast(yv, dt.float32)
    if w is not None:
        (wv,) = api.promote("polyfit", (w,), inexact=True)
        if tuple(wv.shape) != (m,):  # type: ignore[attr-defined]
            raise ShapeError(f"w must be [{m}], got {api._aval(wv)}", op="polyfit")
        wv = _col(api.cast(wv, dt.float32))
        lhs = api.mul(lhs, wv)
        rhs = api.mul(rhs, wv if len(rhs.shape) == 2 else composite.squeeze(wv, -1))
    scale = api.sqrt(api.sum(api.mul(lhs, lhs), 0))
    lhs = api.div(lhs, _row(scale))
    c, resids, rank, s = lstsq(lhs, rhs, cut)
    vector = len(rhs.shape) == 1
    c = api.div(c, scale if vector else _col(scale))
    if full:
        return (
            _narrow(c, d),
            _narrow(resids, d),
            rank,
            _narrow(s, d),
            api.asvalue(np.float32(cut)),
        )
    if not cov:
        return _narrow(c, d)
    base = api.div(
        inv(api.matmul(composite.swapaxes(lhs, 0, 1), lhs)), api.mul(_col(scale), _row(scale))
    )
    if cov == "unscaled":
        fac: Any = api.asvalue(np.ones(1, np.float32))  # (2-d y: [order, order, 1], as JAX)
    else:
        if m <= order:
            raise ShapeError(
                "the number of data points must exceed order to scale the covariance matrix",
                op="polyfit",
                hint='pass more points, or cov="unscaled"',
            )
        fac = api.div(resids, m - order)
    covm = api.mul(base, fac) if vector else api.mul(_col(base), _row(_row(fac)))
    return _narrow(c, d), _narrow(covm, d)
