"""Layout ops and basic indexing against numpy and JAX: the same array indexed, gathered, split,
reshaped, transposed and broadcast alike; and the ways they refuse bad requests.

Layout ops move elements without arithmetic, so results must be *equal*, in every dtype.
"""

from __future__ import annotations

from typing import Any

import hypothesis.extra.numpy as hnp
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from jaxref import DTYPES, as_input, assert_matches, jax_layout, shapes, values

import pypto as pto

Draw = st.DataObject


def _same(out: Any, want: np.ndarray, what: str = "") -> None:
    assert isinstance(out, pto.Tensor), what
    assert out.shape == want.shape, (what, out.shape, want.shape)
    assert out.dtype.np == want.dtype, (what, out.dtype, want.dtype)
    np.testing.assert_array_equal(np.asarray(out), want, err_msg=what)


# --- basic indexing ------------------------------------------------------------------------


@settings(max_examples=60)
@given(data=st.data())
def test_chained_basic_indexing_matches_numpy(data: Draw) -> None:
    """Index, then index the result again (a view of a view), with ints, slices (negative
    steps included), None and Ellipsis."""
    d = data.draw(st.sampled_from(DTYPES), label="dtype")
    shape = data.draw(shapes(max_dims=4), label="shape")
    a = values(data, d, shape)
    x = as_input(data, a, allow_numpy=False)
    k1 = data.draw(hnp.basic_indices(shape, allow_newaxis=True), label="key 1")
    y, b = x[k1], a[k1]
    _same(y, b, f"x[{k1}]")
    k2 = data.draw(hnp.basic_indices(b.shape, allow_newaxis=True), label="key 2")
    _same(y[k2], b[k2], f"x[{k1}][{k2}]")


def test_indexing_edge_cases_match_numpy_and_jax() -> None:
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    x = pto.tensor(a)
    keys: list[Any] = [
        (),
        ...,
        (None,),
        (..., None),
        (None, ..., None, 1),
        -1,
        (-1, -1, -1),
        (slice(None, None, -1),),
        (slice(None, None, -2), slice(5, -10, -1)),
        (slice(10, 20),),  # empty, out of range
        (slice(3, 1),),  # empty, reversed bounds
        (0, ..., slice(-1, None)),
        (np.int64(1), np.int8(-2)),
        (slice(-100, 100, 3), 1, None, slice(None, None, -3)),
    ]
    for k in keys:
        _same(x[k], a[k], f"x[{k}]")
        assert_matches(x[k], jax_layout(lambda u, k=k: u[k], a), what=f"x[{k}]")


def test_indexing_refuses_what_is_not_basic() -> None:
    x = pto.arange(12).reshape(3, 4)
    with pytest.raises(pto.BoundsError):
        x[3]  # numpy raises too; JAX would clamp
    with pytest.raises(pto.BoundsError):
        x[0, -5]
    with pytest.raises(pto.ShapeError):
        x[0, 0, 0]  # too many indices
    with pytest.raises(pto.ShapeError):
        x[..., 0, ...]
    for k in (1.0, True, "0"):
        with pytest.raises(pto.ShapeError):
            x[k]
    with pytest.raises(pto.ShapeError, match="a boolean mask index of i32\\[3,4\\]") as e:
        x[x > 3]  # (a data-dependent shape)
    assert "pto.where(mask, x, 0)" in str(e.value.hint)
    with pytest.raises(pto.BoundsError, match="index 5 is out of range for axis 1 of size 4"):
        x[:, [5]]


@settings(max_examples=80)
@given(data=st.data())
def test_one_integer_array_among_basic_indices_matches_numpy(data: Draw) -> None:
    """An integer array (list, numpy array or tensor; negative entries wrap) at any place of
    a basic index: a take along that axis, its axes where numpy puts them (first, when a
    slice, None or Ellipsis separates the array from the key's ints)."""
    d = data.draw(st.sampled_from(DTYPES), label="dtype")
    shape = data.draw(shapes(min_dims=1, max_dims=4, min_side=1), label="shape")
    a = values(data, d, shape)
    x = as_input(data, a, allow_numpy=False)
    basic = data.draw(hnp.basic_indices(shape, allow_newaxis=True), label="basic")
    key = list(basic) if isinstance(basic, tuple) else [basic]
    real = [j for j, k in enumerate(key) if k is not None and k is not Ellipsis]
    # the array replaces one real entry, or goes after the last (a trailing full axis)
    spots = real + ([len(key)] if len(real) < len(shape) and Ellipsis not in key else [])
    assume(spots)
    j = data.draw(st.sampled_from(spots), label="spot")
    axis = sum(1 for k in key[:j] if k is not None and k is not Ellipsis)
    if Ellipsis in key[:j]:
        axis += len(shape) - len(real)
    n = shape[axis]
    idx = np.asarray(
        data.draw(
            hnp.arrays(np.int32, hnp.array_shapes(max_dims=2), elements=st.integers(-n, n - 1))
        )
    )
    kind = data.draw(st.sampled_from(["list", "numpy", "tensor"]), label="kind")
    index = {"list": idx.tolist(), "numpy": idx, "tensor": pto.tensor(idx)}[kind]
    k_np, k_pto = (*key[:j], idx, *key[j + 1 :]), (*key[:j], index, *key[j + 1 :])
    _same(x[k_pto], a[k_np], f"x[{k_np}]")
    staged = pto.jit(lambda t: t[k_pto], backend="interpret")
    _same(staged(x), a[k_np], f"staged x[{k_np}]")


# --- take -------------------------------------------------------------------------------


def test_take_with_negative_indices() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = pto.tensor(a)
    for idx, axis in [
        ([-1, 0, -3], 0),
        ([[-1, -4], [3, 0]], 1),
        ([-12, 11, -1], None),
        ([-2], -1),
        (-1, 0),  # a 0-d index drops the axis
    ]:
        i = np.asarray(idx, np.int32)
        for index in (pto.tensor(i), i, pto.tensor(i.astype(np.int8))):
            out = pto.take(x, index, axis)
            _same(out, np.take(a, i, axis=axis), f"take {idx} axis={axis}")
            assert_matches(out, jnp.take(a, i, axis=axis))


def test_take_refuses_out_of_range_and_non_integer_indices() -> None:
    x = pto.arange(6).reshape(2, 3)
    for idx, axis in [([3], 1), ([-4], 1), ([2], 0), ([6], None), ([-7], None)]:
        with pytest.raises(pto.BoundsError):  # (numpy raises; JAX would fill or clamp)
            pto.take(x, pto.tensor(idx), axis)
    with pytest.raises(pto.DTypeError):
        pto.take(x, pto.tensor([0.0]), 0)
    with pytest.raises(pto.ShapeError):
        pto.take(x, pto.tensor([0]), 2)


# --- split, concat --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "how",
    [3, 1, 6, [2, 4], [0, 6], [], [4, 2], [-2], [1, -1], [-10, 3], [7], [2, 2, 9], [-4, -5, 3]],
    ids=str,
)
def test_split_matches_numpy(how: Any) -> None:
    # numpy's rules for split points (those of slice bounds); jnp.split refuses negative and
    # unsorted points, so for those numpy is the reference.
    a = np.arange(12, dtype=np.int8).reshape(6, 2)
    for axis in (0, -2):
        out = pto.split(pto.tensor(a), how, axis)
        want = np.split(a, how, axis)
        assert len(out) == len(want)
        for o, w in zip(out, want, strict=True):
            _same(o, w, f"split {how}")
    if isinstance(how, int) or (how == sorted(how) and all(0 <= h <= 6 for h in how)):
        for o, w in zip(pto.split(pto.tensor(a), how), jnp.split(a, how), strict=True):
            assert_matches(o, w)


def test_split_refuses_unequal_sections() -> None:
    with pytest.raises(pto.ShapeError):
        pto.split(pto.arange(7), 2)
    with pytest.raises(pto.ShapeError):
        pto.split(pto.arange(6), 0)
    with pytest.raises(pto.ShapeError):
        pto.split(pto.arange(6), 2, axis=1)


def test_concat() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((2, 1), np.float16)
    for xs, axis in [([a, a], 0), ([a, b], 1), ([a[:, :0], a], -1), ([a], 0), ((a, a, a), -2)]:
        out = pto.concat([pto.tensor(x) for x in xs], axis)
        assert_matches(out, jnp.concatenate(xs, axis=axis))
    with pytest.raises(pto.ShapeError):
        pto.concat([pto.tensor(a), pto.tensor(b)], 0)
    with pytest.raises(pto.ShapeError):
        pto.concat([pto.tensor(1.0), pto.tensor(2.0)])
    with pytest.raises(pto.ShapeError):
        pto.concat([])


# --- reshape, transpose, broadcast_to, expand_dims, squeeze ----------------------------------


def test_reshape_with_minus_one() -> None:
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    x = pto.tensor(a)[:, ::-1]  # a view
    b = a[:, ::-1]
    for new in [(-1,), (4, -1), (-1, 2, 3), (2, -1, 1, 4), (24, -1), (1, -1, 1)]:
        _same(x.reshape(new), b.reshape(new), f"reshape {new}")
        _same(pto.reshape(x, new), np.asarray(jnp.reshape(b, new)), f"reshape {new}")
    _same(pto.reshape(pto.zeros((0, 3)), (-1, 3)), np.zeros((0, 3), np.float32))
    for bad in [(-1, -1), (5, -1), (7,), (0, -1), (-2, 12)]:
        with pytest.raises(pto.ShapeError):
            x.reshape(bad)


def test_transpose_and_T() -> None:
    a = np.arange(24, dtype=np.int8).reshape(2, 3, 4)
    x = pto.tensor(a)
    for perm in [(2, 0, 1), (-1, -3, -2), (0, 1, 2), None]:
        _same(pto.transpose(x, perm), np.transpose(a, perm), f"perm {perm}")
    _same(x.T, a.T)
    _same(x.transpose(1, 0, 2), a.transpose(1, 0, 2))
    _same(pto.tensor(a[0, 0]).T, a[0, 0].T)  # 1-d: unchanged
    _same(pto.tensor(np.float32(3)).T, np.asarray(np.float32(3)))  # 0-d
    for bad in [(0, 1), (0, 0, 1), (0, 1, 3)]:
        with pytest.raises(pto.ShapeError):
            pto.transpose(x, bad)


def test_broadcast_to_and_its_errors() -> None:
    a = np.arange(3, dtype=np.float16).reshape(3, 1)
    x = pto.tensor(a)
    for shape in [(3, 1), (3, 4), (2, 3, 0), (1, 3, 5), (0, 3, 1)]:
        assert_matches(pto.broadcast_to(x, shape), jnp.broadcast_to(a, shape))
    for bad in [(4, 1), (3,), (2, 2, 1)]:
        with pytest.raises(pto.ShapeError):
            pto.broadcast_to(x, bad)
        with pytest.raises(ValueError):
            jnp.broadcast_to(a, bad)


def test_expand_dims_and_squeeze() -> None:
    a = (np.arange(6) % 2 == 0).reshape(1, 2, 1, 3)
    x = pto.tensor(a)
    for axis in [0, -1, (0, 2), (-1, 0), (1, 3, 5)]:
        assert_matches(pto.expand_dims(x, axis), jnp.expand_dims(a, axis))
    for sq in [None, 0, 2, (0, 2), (-2,), (-4, -2)]:
        assert_matches(pto.squeeze(x, sq), jnp.squeeze(a, sq))
    for bad_axis in [(0, 0), 7]:
        with pytest.raises(pto.ShapeError):
            pto.expand_dims(x, bad_axis)
    with pytest.raises(pto.ShapeError):
        pto.squeeze(x, 1)  # size 2
