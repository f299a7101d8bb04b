"""The functions of ``pto.linalg`` that are not ops of the table (they combine them): ``pinv``,
``cond``, ``matrix_norm``, ``vector_norm``, ``multi_dot``, ``tensorinv`` and ``tensorsolve``,
against ``jax.numpy.linalg``; and the errors and corner cases of the Jacobi decompositions
(the ops themselves are drawn in test_ops_vs_jax.py)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto
from pypto.graph.tracer import Spec, trace
from pypto.ops.table import AVal

_RNG = np.random.default_rng(20261206)


def _normal(*shape: int) -> np.ndarray:
    return _RNG.standard_normal(shape).astype(np.float32)


def _close(got: Any, want: Any, rtol: float = 2e-5, atol: float = 2e-5) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
    np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol, atol)


@pytest.mark.parametrize(
    ("shape", "kw"),
    [
        ((3, 3), {}),
        ((4, 2), {}),
        ((2, 5), {"rtol": 0.1}),
        ((2, 3, 3), {"hermitian": True}),
        ((0, 3), {}),
        ((3, 3), {"rcond": 1e-3}),
    ],
)
def test_pinv_matches_jax(shape: tuple[int, ...], kw: dict[str, Any]) -> None:
    a = _normal(*shape)
    _close(pto.linalg.pinv(a, **kw), jnp.linalg.pinv(a, **kw))


def test_pinv_of_a_rank_deficient_matrix_and_of_float16() -> None:
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], np.float32)
    _close(pto.linalg.pinv(a), jnp.linalg.pinv(a))
    h = _normal(3, 2).astype(np.float16)
    want = jnp.linalg.pinv(h.astype(np.float32)).astype(np.float16)  # JAX refuses float16
    _close(pto.linalg.pinv(h), want, 2e-3, 2e-3)
    _close(pto.linalg.pinv(np.eye(3, dtype=np.int32)), jnp.linalg.pinv(np.eye(3, dtype=np.int32)))


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, np.inf, -np.inf, "fro"])
def test_cond_matches_jax(p: Any) -> None:
    a = _normal(2, 3, 3) + 2 * np.eye(3, dtype=np.float32)
    _close(pto.linalg.cond(a, p), jnp.linalg.cond(a, p), 1e-4)
    if p in (None, 2, -2):
        b = _normal(3, 5)
        _close(pto.linalg.cond(b, p), jnp.linalg.cond(b, p), 1e-4)


def test_cond_of_a_singular_matrix_is_inf_and_a_nan_stays() -> None:
    singular = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    for p in (1, np.inf, "fro"):
        assert pto.linalg.cond(singular, p).item() == np.inf == float(jnp.linalg.cond(singular, p))
    nan = np.array([[np.nan, 1.0], [1.0, 2.0]], np.float32)
    assert np.isnan(pto.linalg.cond(nan, 1).item()) and np.isnan(jnp.linalg.cond(nan, 1))


@pytest.mark.parametrize("ord_", ["fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norm_matches_jax(ord_: Any) -> None:
    a = _normal(2, 3, 4)
    for keep in (False, True):
        got = pto.linalg.matrix_norm(a, keepdims=keep, ord=ord_)
        _close(got, jnp.linalg.matrix_norm(a, keepdims=keep, ord=ord_), 1e-5)


@pytest.mark.parametrize("ord_", [2, None, 1, 0, 3, 0.5, np.inf, -np.inf])
def test_vector_norm_matches_jax(ord_: Any) -> None:
    a = _normal(2, 3, 4)
    a[0, 1, 2] = 0.0
    for axis in (None, 1, (0, 2), (-1, 0, 1)):
        for keep in (False, True):
            got = pto.linalg.vector_norm(a, axis=axis, keepdims=keep, ord=ord_)
            want = jnp.linalg.vector_norm(a, axis=axis, keepdims=keep, ord=ord_)
            _close(got, want, 1e-5)
    # integers give float32 for every ord, as numpy's (JAX keeps int32 for 1, inf and any
    # other p but 2 and 0: its 3-norm of these is the integer 1)
    ints = np.arange(-3, 3, dtype=np.int32)
    want = np.float32(np.linalg.vector_norm(ints, ord=ord_))
    _close(pto.linalg.vector_norm(ints, ord=ord_), want)


def test_multi_dot_matches_jax_in_the_cheapest_order() -> None:
    for shapes in ([(3,), (3, 4)], [(3, 4), (4,)], [(5,), (5, 2), (2, 6), (6,)], [(2, 3)] * 1):
        arrays = [_normal(*s) for s in shapes] + ([_normal(3, 2)] if len(shapes) == 1 else [])
        _close(pto.linalg.multi_dot(arrays), jnp.linalg.multi_dot(arrays), 1e-5)
    # (A B) C costs 10·100·5 + 10·5·50 multiplications, A (B C) 100·5·50 + 10·100·50
    specs = [Spec(AVal(s, pto.float32)) for s in ((10, 100), (100, 5), (5, 50))]
    func, _, _ = trace(lambda a, b, c: pto.linalg.multi_dot([a, b, c]), specs)
    products = [tuple(tuple(x.aval.shape) for x in e.inputs) for e in func.eqns if e.op == "matmul"]
    assert products == [((10, 100), (100, 5)), ((10, 5), (5, 50))]


def test_tensorinv_and_tensorsolve_match_jax() -> None:
    a = _normal(6, 2, 3) + np.eye(6, dtype=np.float32).reshape(6, 2, 3) * 3
    _close(pto.linalg.tensorinv(a, 1), jnp.linalg.tensorinv(a, 1), 1e-5)
    b = _normal(2, 3, 6) + np.eye(6, dtype=np.float32).reshape(2, 3, 6) * 3
    for axes in (None, (0, 1)):
        _close(
            pto.linalg.tensorsolve(
                b, np.ones((6,), np.float32) if axes else np.ones((2, 3), np.float32), axes
            ),
            jnp.linalg.tensorsolve(
                b, np.ones((6,), np.float32) if axes else np.ones((2, 3), np.float32), axes
            ),
            1e-5,
        )


def test_decompositions_of_infinities_and_nans_are_nan() -> None:
    """An inf or NaN anywhere makes the whole SVD NaN, as JAX's (even a single column, whose
    norm alone would be inf); the eigenvalues of a matrix with an inf are NaN too."""
    col = np.array([[np.inf], [1.0]], np.float32)
    assert np.isnan(pto.linalg.svdvals(col).numpy()).all()
    u, s, vh = pto.linalg.svd(np.array([[np.nan, 0.0], [0.0, 1.0]], np.float32))
    assert all(np.isnan(x.numpy()).all() for x in (u, s, vh))
    w = pto.linalg.eigvalsh(np.array([[np.inf, 0.0], [0.0, 1.0]], np.float32)).numpy()
    assert (
        np.isnan(w).all()
        and np.isnan(jnp.linalg.eigvalsh(np.array([[np.inf, 0.0], [0.0, 1.0]]))).all()
    )


def test_decompositions_batch_jit_and_vmap_alike() -> None:
    """Batch dimensions, vmap and jit give the same eigenvalues (the rotations are ordinary
    ops, so vmap batches them natively)."""
    a = _normal(3, 4, 4)
    a = a + np.swapaxes(a, -1, -2)
    want = np.asarray(jnp.linalg.eigvalsh(a))
    _close(pto.linalg.eigvalsh(a), want, 1e-5, 1e-5)
    _close(pto.vmap(pto.linalg.eigvalsh)(pto.tensor(a)), want, 1e-5, 1e-5)
    _close(pto.jit(pto.linalg.eigvalsh, backend="interpret")(pto.tensor(a)), want, 1e-5, 1e-5)
    s = pto.jit(lambda x: pto.linalg.svd(x, compute_uv=False), backend="interpret")(pto.tensor(a))
    _close(s, jnp.linalg.svd(a, compute_uv=False), 1e-5, 1e-5)


def test_spectral_errors_name_the_problem() -> None:
    with pytest.raises(pto.ShapeError, match="eigh: needs square matrices"):
        pto.linalg.eigh(pto.ones((2, 3)))
    with pytest.raises(pto.ShapeError, match="UPLO must be None, 'L' or 'U'"):
        pto.linalg.eigh(pto.ones((2, 2)), "X")
    with pytest.raises(pto.ShapeError, match="subset_by_index"):
        pto.linalg.svd(pto.ones((2, 2)), subset_by_index=(0, 1))
    with pytest.raises(pto.ShapeError, match="svd: needs matrices"):
        pto.linalg.svd(pto.ones(3))
    with pytest.raises(pto.ShapeError, match=r"lstsq: needs a \[m, n\] and b"):
        pto.linalg.lstsq(pto.ones((3, 2)), pto.ones(2))
    with pytest.raises(pto.ShapeError, match="only one of rtol and tol"):
        pto.linalg.matrix_rank(pto.ones((2, 2)), 0.1, tol=0.1)
    with pytest.raises(pto.ShapeError, match="only one of rtol and rcond"):
        pto.linalg.pinv(pto.ones((2, 2)), 0.1, rcond=0.1)
    with pytest.raises(pto.ShapeError, match="p=1 needs square matrices"):
        pto.linalg.cond(pto.ones((2, 3)), 1)
    with pytest.raises(pto.ShapeError, match="multi_dot: each array's last dimension"):
        pto.linalg.multi_dot([pto.ones((2, 3)), pto.ones((2, 3))])
    with pytest.raises(pto.ShapeError, match="tensorinv: the first 1 axes"):
        pto.linalg.tensorinv(pto.ones((2, 3)), 1)
    with pytest.raises(pto.TraceError, match="numpy_resid=True"):
        pto.jit(lambda a, b: pto.linalg.lstsq(a, b, numpy_resid=True), backend="interpret")(
            pto.ones((3, 2)), pto.ones(3)
        )
    # the residuals numpy's way, eagerly: empty for a square system
    got = pto.linalg.lstsq(np.eye(2, dtype=np.float32), np.ones(2, np.float32), numpy_resid=True)
    want = jnp.linalg.lstsq(np.eye(2, dtype=np.float32), np.ones(2, np.float32), numpy_resid=True)
    assert got[1].shape == want[1].shape == (0,)


def test_matrix_rank_of_vectors_and_numbers() -> None:
    for v in (np.zeros(3, np.float32), np.array([0.0, 2.0], np.float32), np.float32(0.0)):
        got = pto.linalg.matrix_rank(v)
        assert got.dtype == pto.int32 and got.item() == int(jnp.linalg.matrix_rank(v))


def test_linalg_jax_names_are_all_there() -> None:
    """Every name of ``jax.numpy.linalg`` but the general (complex) eigenproblem."""
    missing = {n for n in dir(jnp.linalg) if not n.startswith("_") and not hasattr(pto.linalg, n)}
    assert missing == {"eig", "eigvals"}, missing
