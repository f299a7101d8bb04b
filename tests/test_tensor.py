"""The eager Tensor: creation, conversion, the operator surface, displays and immutability."""

from __future__ import annotations

import pickle
from typing import Any

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import pypto as pto


@pytest.mark.parametrize(
    ("data", "dtype"),
    [
        ([1.0, 2.0], pto.float32),
        ([1, 2], pto.int32),
        ([True, False], pto.bool_),
        (np.arange(3, dtype=np.float64), pto.float32),
        (np.arange(3, dtype=np.int64), pto.int32),
        (np.ones(2, np.float16), pto.float16),
        (np.ones(2, ml_dtypes.bfloat16), pto.bfloat16),
        (np.ones(2, np.int8), pto.int8),
        (2.5, pto.float32),
        (3, pto.int32),
    ],
)
def test_tensor_default_dtypes_match_jax(data: object, dtype: pto.DType) -> None:
    t = pto.tensor(data)
    assert t.dtype is dtype
    assert np.dtype(jnp.asarray(data).dtype) == dtype.np


def test_tensor_copies_its_input_and_views_are_read_only() -> None:
    a = np.arange(4, dtype=np.float32)
    t = pto.tensor(a)
    a[0] = 99
    assert t.numpy()[0] == 0
    view = np.asarray(t)
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0] = 1
    copy = t.numpy()
    copy[1] = 7
    assert np.asarray(t)[1] == 1


def test_tensor_with_dtype_and_from_tensor() -> None:
    t = pto.tensor([1.7, -1.2], dtype="bf16")
    assert t.dtype is pto.bfloat16
    u = pto.tensor(t, dtype=pto.float32)
    assert u.dtype is pto.float32 and u.shape == (2,)


def test_creation_functions() -> None:
    assert pto.zeros((2, 3)).numpy().tolist() == [[0.0] * 3] * 2
    assert pto.ones(4, pto.int8).dtype is pto.int8
    assert pto.full((2,), 7).dtype is pto.int32
    assert pto.full((2,), 7.0, pto.float16).numpy().tolist() == [7.0, 7.0]
    x = pto.tensor([[1, 2], [3, 4]], dtype=pto.float16)
    assert pto.zeros_like(x).dtype is pto.float16 and pto.zeros_like(x).shape == (2, 2)
    assert pto.ones_like(x, pto.int32).dtype is pto.int32
    assert pto.arange(5).numpy().tolist() == [0, 1, 2, 3, 4]
    assert pto.arange(1, 2, 0.25).dtype is pto.float32
    assert pto.arange(1, 2, 0.25).shape == (4,)
    assert pto.arange(6, dtype=pto.bfloat16).dtype is pto.bfloat16


@pytest.mark.parametrize("dtype", [None, pto.float32, pto.float16, pto.bfloat16, pto.int32])
def test_eye_linspace_and_full_like_follow_jax(dtype: Any) -> None:
    jd = None if dtype is None else dtype.np
    for n, m, k in ((3, None, 0), (2, 4, 1), (4, 2, -1), (0, 3, 0), (3, 3, 5)):
        got, want = pto.eye(n, m, k, dtype), np.asarray(jnp.eye(n, m, k, dtype=jd))
        assert got.dtype.np == want.dtype and np.array_equal(got.numpy(), want), (n, m, k)
    for args in ((0, 10, 5), (-3, 2, 4), (0.1, 0.7, 13), (2, 3, 1), (0, 1, 0)):
        for endpoint in (True, False):
            got = pto.linspace(*args, endpoint=endpoint, dtype=dtype)
            want = np.asarray(jnp.linspace(*args, endpoint=endpoint, dtype=jd))
            assert got.dtype.np == want.dtype and got.shape == want.shape
            if got.dtype.is_integer:  # the floor of each value, as JAX
                assert np.array_equal(got.numpy(), want), args
            else:  # rounded once from float64; JAX rounds in the dtype, off by an ulp or two
                tol = float(np.finfo(want.dtype).eps) * 4 * max(abs(args[0]), abs(args[1]), 1)
                np.testing.assert_allclose(got.numpy().astype(np.float64), want, 0, tol)
    x = pto.zeros((2, 3), pto.int8)
    assert (
        pto.full_like(x, 5).dtype is pto.int8
        and pto.full_like(x, 5).numpy().tolist() == [[5] * 3] * 2
    )
    got = pto.full_like(x, 1.5, dtype)
    want = np.asarray(jnp.full_like(np.zeros((2, 3), np.int8), 1.5, dtype=jd))
    assert got.dtype.np == want.dtype and np.array_equal(got.numpy(), want)


@pytest.mark.parametrize("dtype", [None, pto.float32, pto.float16, pto.bfloat16, pto.int32])
def test_logspace_geomspace_identity_and_empty_follow_jax(dtype: Any) -> None:
    jd = None if dtype is None else dtype.np
    cases = {
        "logspace": ((0, 3, 4), (-2, 2, 9), (1, 2, 5, False, 2.0), (0.5, 1.5, 3, True, 3.0)),
        "geomspace": ((1, 1000, 4), (-1, -256, 9), (2, 3, 7, False), (0.1, 10, 5)),
    }
    for name, arg_sets in cases.items():
        for args in arg_sets:
            got = getattr(pto, name)(*args, dtype=dtype)
            want = np.asarray(getattr(jnp, name)(*args, dtype=jd))
            assert got.dtype.np == want.dtype and got.shape == want.shape, (name, args)
            # rounded once from float64; JAX computes in the dtype, a few ulp off (an
            # integer dtype then truncates its 99.99 where float64 has 100)
            eps = float(ml_dtypes.finfo(want.dtype).eps) if got.dtype.is_floating else 0.02
            np.testing.assert_allclose(
                got.numpy().astype(np.float64), want.astype(np.float64), 8 * eps, err_msg=name
            )
    got = pto.identity(3, dtype)
    assert got.dtype.np == np.asarray(jnp.identity(3, jd)).dtype
    assert np.array_equal(got.numpy(), np.asarray(jnp.identity(3, jd)))
    e = pto.empty((2, 3), dtype)
    assert e.shape == (2, 3) and e.dtype.np == np.asarray(jnp.empty((2, 3), jd)).dtype
    x = np.array([1.5, -2.5, 300.0], np.float32)
    if dtype is not None:
        assert np.array_equal(pto.astype(x, dtype).numpy(), np.asarray(jnp.astype(x, jd)))
    with pytest.raises(pto.ShapeError, match="nonzero and of one sign"):
        pto.geomspace(-1, 10, 3)


def test_random_is_deterministic_and_distributed() -> None:
    a = pto.random.normal(3, (1000,))
    b = pto.random.normal(3, (1000,))
    c = pto.random.normal(4, (1000,))
    assert np.array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(a.numpy(), c.numpy())
    assert abs(float(a.mean())) < 0.15 and 0.85 < float(a.numpy().std()) < 1.15
    u = pto.random.uniform(0, (2000,), pto.bfloat16, minval=-2.0, maxval=2.0)
    assert u.dtype is pto.bfloat16
    assert float(u.min()) >= -2.0 and float(u.max()) <= 2.0
    with pytest.raises(pto.DTypeError, match="float dtype"):
        pto.random.normal(0, (2,), pto.int32)


def test_properties() -> None:
    x = pto.zeros((2, 3, 4), pto.float16)
    assert (x.shape, x.ndim, x.size, x.dtype) == ((2, 3, 4), 3, 24, pto.float16)
    assert len(x) == 2
    assert [t.shape for t in x] == [(3, 4), (3, 4)]
    assert x.T.shape == (4, 3, 2)
    assert x.transpose(1, 0, 2).shape == (3, 2, 4)
    assert x.transpose((2, 1, 0)).shape == (4, 3, 2)
    assert x.reshape(6, 4).shape == (6, 4)
    assert x.reshape((-1,)).shape == (24,)
    assert x.astype(pto.int8).dtype is pto.int8

    # numpy's reshaping and reducing methods, eagerly and on a tracer (pto.jit)
    def methods(t: Any) -> tuple[Any, ...]:
        return (t.flatten(), t.ravel(), t.squeeze(), t.squeeze(0), t.clip(1, 4), t.argmin(-1),
                t.argmin(), t.any(), t.all(), t.all(1), t.var(), t.std(ddof=1))  # fmt: skip

    y = pto.tensor(np.arange(6.0, dtype=np.float32).reshape(1, 2, 3))
    a = np.arange(6.0, dtype=np.float32).reshape(1, 2, 3)
    want = (a.ravel(), a.ravel(), a[0], a[0], a.clip(1, 4), a.argmin(-1), a.argmin(),
            a.any(), a.all(), a.all(1), a.var(), a.std(ddof=1))  # fmt: skip
    for got in (methods(y), pto.jit(methods, backend="interpret")(y)):
        for g, w in zip(got, want, strict=True):
            assert g.shape == np.shape(w)
            np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=1e-6)


def test_numpy_operands_on_either_side() -> None:
    x = pto.tensor([1.0, 2.0])
    left = np.array([10.0, 20.0]) + x
    assert isinstance(left, pto.Tensor) and left.numpy().tolist() == [11.0, 22.0]
    assert isinstance(np.float32(2) * x, pto.Tensor)
    assert (2 - x).numpy().tolist() == [1.0, 0.0]
    assert (1 / x).numpy().tolist() == [1.0, 0.5]
    assert (2**x).numpy().tolist() == [2.0, 4.0]
    assert (np.eye(2, dtype=np.float32) @ x).numpy().tolist() == [1.0, 2.0]
    assert (-x).numpy().tolist() == [-1.0, -2.0]
    assert abs(-x).numpy().tolist() == [1.0, 2.0]
    assert (x == 1.0).dtype is pto.bool_ and (x != 1.0).numpy().tolist() == [False, True]
    assert (x <= 2).numpy().tolist() == [True, True] and (x < 2).numpy().tolist() == [True, False]
    assert (x > 1).numpy().tolist() == [False, True] and (x >= 2).numpy().tolist() == [False, True]


def test_scalar_conversions() -> None:
    assert float(pto.tensor([2.5])) == 2.5
    assert int(pto.tensor(7)) == 7
    assert bool(pto.tensor(True))
    assert pto.tensor([[3]]).item() == 3
    assert [10, 20, 30][pto.tensor(1)] == 20
    with pytest.raises(TypeError):
        [1, 2][pto.tensor(1.0)]
    with pytest.raises(TypeError):
        len(pto.tensor(1.0))


def test_tensors_are_immutable_like_jax_arrays() -> None:
    x = pto.zeros((2, 3))
    with pytest.raises(TypeError, match=r"tensors are immutable: .* f32\[2,3\]; .*x.at\[key\].set"):
        x[0, 1] = 1.0
    with pytest.raises(TypeError, match="immutable"):
        pto.jit(lambda t: t.__setitem__(0, 1.0), backend="interpret")(x)


def test_tensors_are_unhashable_like_jax_arrays() -> None:
    with pytest.raises(TypeError):
        hash(pto.tensor(1.0))


def test_repr_shows_values_and_dtype() -> None:
    r = repr(pto.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=pto.bfloat16))
    assert r.startswith("Tensor([[1, 2],") or r.startswith("Tensor([[1., 2.],")
    assert r.endswith("dtype=bfloat16)")
    big = repr(pto.zeros((100, 100)))
    assert "..." in big and len(big) < 1000


def test_html_repr_has_shape_dtype_stats_and_preview() -> None:
    x = pto.tensor(np.arange(200, dtype=np.float32).reshape(4, 50))
    h = x._repr_html_()
    assert "f32[4,50]" in h and "min 0" in h and "max 199" in h and "…" in h
    assert h.count("<tr>") == 4
    nan = pto.tensor([1.0, float("nan")])._repr_html_()
    assert "1 NaN" in nan
    assert "i32[]" in pto.tensor(3)._repr_html_()


def test_zero_size_and_zero_d() -> None:
    e = pto.zeros((0, 3))
    assert (e + 1).shape == (0, 3)
    assert e.sum(axis=0).numpy().tolist() == [0.0, 0.0, 0.0]
    s = pto.tensor(2.0)
    assert (s * s).shape == () and float(s * s) == 4.0


def test_dtype_pickles_and_names() -> None:
    for d in (pto.float32, pto.float16, pto.bfloat16, pto.int32, pto.int8, pto.bool_):
        assert pickle.loads(pickle.dumps(d)) is d
        assert pto.dtypes.dtype(d.name) is d and pto.dtypes.dtype(d.short) is d
        assert d.itemsize == d.np.itemsize
    assert (pto.float32.name, pto.bfloat16.short, pto.bool_.itemsize) == ("float32", "bf16", 1)
