"""``pto.vectorize``, ``pto.apply_along_axis`` and ``pto.apply_over_axes`` against
``jax.numpy``'s: values, gradients, staged and on the simulated NPU."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto

RNG = np.random.default_rng(0)
A = RNG.normal(size=(4, 3)).astype(np.float32)
B = RNG.normal(size=(3,)).astype(np.float32)
C = RNG.normal(size=(2, 3, 4)).astype(np.float32)


def _close(got: Any, want: Any) -> None:
    gs = got if isinstance(got, tuple) else (got,)
    ws = want if isinstance(want, tuple) else (want,)
    assert len(gs) == len(ws)
    for g, w in zip(gs, ws, strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("fn", "kw", "args"),
    [
        (lambda x, y: (x * y).sum(), {"signature": "(n),(n)->()"}, (A, B)),
        (lambda x, y: x * 2 + y, {}, (A, B)),
        (lambda x, k: x**k, {"excluded": {1}}, (A, 2)),
        (lambda x: (x.max(), x.min()), {"signature": "(n)->(),()"}, (C,)),
        (lambda m, v: m @ v, {"signature": "(m,n),(n)->(m)"}, (C[:, :, :3], B)),
    ],
    ids=["dot", "elementwise", "excluded", "two outputs", "matvec"],
)
def test_vectorize_matches_jax(fn: Any, kw: dict[str, Any], args: tuple[Any, ...]) -> None:
    want = jnp.vectorize(fn, **kw)(*args)
    tensors = [pto.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    _close(pto.vectorize(fn, **kw)(*tensors), want)
    mapped = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

    def staged(*ts: Any) -> Any:
        call = list(args)
        for i, t in zip(mapped, ts, strict=True):
            call[i] = t
        return pto.vectorize(fn, **kw)(*call)

    _close(pto.jit(staged, backend="interpret")(*[tensors[i] for i in mapped]), want)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_apply_along_axis_matches_jax(axis: int) -> None:
    for fn, jfn in [
        (lambda r: r * r.sum(), lambda r: r * r.sum()),
        (lambda r: r.max(), lambda r: r.max()),
        (lambda r: pto.outer(r, r), lambda r: jnp.outer(r, r)),
    ]:
        _close(pto.apply_along_axis(fn, axis, pto.tensor(C)), jnp.apply_along_axis(jfn, axis, C))


def test_apply_over_axes_matches_jax() -> None:
    for axes in ([0, 2], [1], [-1, 0]):
        _close(
            pto.apply_over_axes(pto.sum, pto.tensor(C), axes), jnp.apply_over_axes(jnp.sum, C, axes)
        )
    with pytest.raises(pto.ShapeError, match="keep the axes or remove that one"):
        pto.apply_over_axes(lambda x, a: x.sum(), pto.tensor(C), [0])


def test_gradients_and_the_npu() -> None:
    def f(x: Any) -> Any:
        return pto.apply_along_axis(lambda r: (r * pto.softmax(r)).sum(), 1, x).sum()

    def jf(x: Any) -> Any:
        return jnp.apply_along_axis(lambda r: (r * jax.nn.softmax(r)).sum(), 1, x).sum()

    _close(pto.grad(f)(pto.tensor(A)), jax.grad(jf)(A))
    dot = pto.vectorize(lambda x, y: (x * y).sum(), signature="(n),(n)->()")
    got = pto.jit(lambda x, y: dot(x, y) * 2, machine="tiny")(pto.tensor(A), pto.tensor(B))
    _close(got, (A @ B) * 2)


def test_vectorize_errors_name_the_mismatch() -> None:
    dot = pto.vectorize(lambda x, y: (x * y).sum(), signature="(n),(n)->()")
    with pytest.raises(pto.ShapeError, match="core dimension 'n' is 3 and 4") as e:
        dot(pto.tensor(A), pto.ones(4))
    assert "test_vectorize.py" in str(e.value)
    with pytest.raises(pto.ShapeError, match="not a generalized ufunc signature"):
        pto.vectorize(lambda x: x, signature="n->()")
    with pytest.raises(pto.ShapeError, match=r"the loop axes \[4\], \[2\] do not broadcast"):
        pto.vectorize(lambda x, y: x + y)(pto.tensor(A[:, 0]), pto.ones(2))
