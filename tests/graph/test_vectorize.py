"""``pto.vectorize``, ``pto.apply_along_axis``, ``pto.apply_over_axes`` and
``pto.piecewise`` against ``jax.numpy``'s: values, gradients, staged and on the simulated
NPU."""

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


def _xlogx(lib: Any) -> Any:
    return lambda v: v * lib.log(v)


@pytest.mark.parametrize(
    ("conds", "funcs"),
    [
        (lambda x: [x < -1, x > 1], lambda lib: [lambda v: v + 1, lambda v: v - 1, 0.0]),
        (lambda x: [x < 0, x >= 0], lambda lib: [0.5, lambda v: v * v]),
        (lambda x: [x > -3, x > 0], lambda lib: [lambda v: -v, lambda v: v * 3]),  # last wins
        (lambda x: np.array([False, True, False]), lambda lib: [lambda v: v, 2.0, lambda v: -v]),
        # log where it is not chosen: NaN there, in neither the value nor the gradient
        (lambda x: [x > 0], lambda lib: [_xlogx(lib), lambda v: v * 2]),
    ],
    ids=["default last", "constants", "last wins", "one per call", "guarded"],
)
def test_piecewise_matches_jax(conds: Any, funcs: Any) -> None:
    x = np.array([[-4.0, -2.0, -0.5, 0.0], [0.5, 1.0, 2.0, 5.0]], np.float32)

    def f(lib: Any, v: Any) -> Any:
        return lib.piecewise(v, conds(v), funcs(lib))

    want = jnp.piecewise(x, conds(x), funcs(jnp))
    _close(pto.piecewise(pto.tensor(x), conds(pto.tensor(x)), funcs(pto)), want)
    _close(pto.jit(lambda v: f(pto, v), backend="interpret")(x), want)
    _close(pto.jit(lambda v: f(pto, v), machine="tiny")(x), want)
    want_g = jax.grad(lambda v: f(jnp, v).sum())(x)
    assert np.isfinite(np.asarray(want_g)).all()
    _close(pto.grad(lambda v: f(pto, v).sum())(pto.tensor(x)), want_g)


def test_piecewise_keeps_the_dtype_and_names_a_count_mismatch() -> None:
    x = np.arange(-3, 4, dtype=np.int32)
    got = pto.piecewise(pto.tensor(x), [x < 0], [lambda v: v * 0.5, 7.9])
    assert got.dtype is pto.int32
    _close(got, jnp.piecewise(x, [x < 0], [lambda v: v * 0.5, 7.9]))
    with pytest.raises(pto.ShapeError, match="2 conditions and 4 functions") as e:
        pto.piecewise(pto.tensor(x), [x < 0, x > 1], [1, 2, 3, 4])
    assert "give 2 functions, or 3 with a default last" in str(e.value.hint)
