"""Reductions over any axes on the NPU path: equal to the interpreter within the tolerance
table for float sums, exactly for max/min/argmax and integer sums."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

import pypto as pto
from pypto.core.tolerance import tolerance

from .conftest import DTYPES, npu_and_interpret, sample

SHAPES = [(7,), (4, 6), (3, 5, 7), (2, 3, 4, 5), (1, 7, 1), (13, 1000)]
PRIME = 100003  # too long for one row in UB, and no divisor to split it by
# every dtype on the small machine; two of them on the full chip (48 vector cores)
CASES = [(d, "tiny") for d in DTYPES] + [("f16", "ascend910b"), ("i8", "ascend910b")]


def assert_close(fn: Any, x: Any, k: int, machine: str) -> None:
    got, want = npu_and_interpret(fn, x, machine=machine)
    assert got.shape == want.shape and got.dtype == want.dtype
    d = pto.tensor(want).dtype
    if d.is_floating:
        rtol, atol = tolerance(d, k)
        scale = float(np.max(np.abs(np.asarray(x).astype(np.float32)), initial=1.0))
        np.testing.assert_allclose(
            got.astype(np.float32), want.astype(np.float32), rtol=rtol, atol=atol * scale * k
        )
    else:
        np.testing.assert_array_equal(got, want)


def _axes_sets(n: int) -> list[tuple[int, ...]]:
    out = [c for r in range(1, n + 1) for c in itertools.combinations(range(n), r)]
    return out if n <= 3 else [*out[::3], tuple(range(n))]


@pytest.mark.parametrize(("dtype", "machine"), CASES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_reductions_over_axes(shape: tuple[int, ...], dtype: str, machine: str) -> None:
    x = sample(shape, DTYPES[dtype])
    for axes in _axes_sets(len(shape)):
        k = math.prod(shape[a] for a in axes)
        for op in ("sum", "max", "min"):
            f = getattr(pto, op)
            assert_close(lambda x, f=f, a=axes: f(x, axis=a), x, k, machine)
        assert_close(lambda x, a=axes: pto.sum(x, axis=a, keepdims=True), x, k, machine)
    assert_close(lambda x: pto.max(x, keepdims=True), x, 1, machine)


@pytest.mark.parametrize(("dtype", "machine"), CASES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_argmax_over_axes(shape: tuple[int, ...], dtype: str, machine: str) -> None:
    x = sample(shape, DTYPES[dtype])
    for a in range(len(shape)):
        assert_close(lambda x, a=a: pto.argmax(x, axis=a), x, 1, machine)
        assert_close(lambda x, a=a: pto.argmax(x, axis=a, keepdims=True), x, 1, machine)
    assert_close(lambda x: pto.argmax(x), x, 1, machine)


@pytest.mark.parametrize("dtype", ["f32", "f16", "i8", "bool"])
def test_long_rows_and_many_rows(dtype: str) -> None:
    # rows too long for UB are reduced in two steps; few columns over many rows use every
    # core with partials combined by a second kernel
    d = DTYPES[dtype]
    x = sample((40, 1000), d)
    assert_close(lambda x: pto.sum(x), x, 40000, "tiny")
    assert_close(lambda x: pto.max(x), x, 1, "tiny")
    assert_close(lambda x: pto.argmax(x), x, 1, "tiny")
    y = sample((3000, 8), d)
    assert_close(lambda x: pto.sum(x, axis=0), y, 3000, "ascend910b")
    assert_close(lambda x: pto.min(x, axis=0), y, 1, "ascend910b")


def test_nan_propagates_and_argmax_finds_the_first_nan() -> None:
    x = np.array(sample((40, 1000), pto.float32))
    x[3, 7] = x[20, 1] = np.nan
    t = pto.tensor(x)
    for f in (
        lambda x: pto.argmax(x),
        lambda x: pto.argmax(x, axis=0),
        lambda x: pto.max(x, axis=0),
        lambda x: pto.min(x, axis=(0, 1)),
    ):
        got, want = npu_and_interpret(f, t)
        np.testing.assert_array_equal(got, want)


def test_zero_size_and_scalars() -> None:
    s = pto.tensor(np.float16(1.5))
    for f in (lambda x: pto.sum(x), lambda x: pto.max(x), lambda x: pto.argmax(x)):
        got, want = npu_and_interpret(f, s)
        np.testing.assert_array_equal(got, want)
    e = pto.zeros((0, 4), pto.int8)
    got, want = npu_and_interpret(lambda x: pto.sum(x, axis=0), e)
    np.testing.assert_array_equal(got, want)


def test_mean_and_column_sum_in_a_graph() -> None:
    x = sample((6, 5, 7), pto.bfloat16)
    assert_close(lambda x: pto.mean(x, axis=(0, 2)) * 2 + x.sum(1).max(), x, 42, "tiny")


def test_column_reduction_of_rows_laid_out_narrower_than_a_tile() -> None:
    """Softmax over the first axis of ``[64, 130, 130]``: its exponentials are laid out in
    rows of 130, and a window of that layout holds whole rows of the ``[64, 16900]`` view,
    which do not fit a tile (the column sum asked UB for 202,848 bytes); the reduction copies
    them into ``[64, 16900]`` rows first and takes column tiles that fit."""
    x = sample((64, 130, 130), pto.float32)
    assert_close(lambda x: pto.softmax(x, axis=0), x, 64, "tiny")


# sizes with no divisor that fits UB: 3·p, p, 4·p (p prime)
PRIME_SHAPES = [(3, PRIME), (1, PRIME), (2, 2, 30011)]
PRIME_CASES = [(d, "tiny") for d in ("f32", "f16", "bf16", "i8", "bool")] + [
    ("f32", "ascend910b"),
    ("bf16", "ascend910b"),
]


@pytest.mark.parametrize(("dtype", "machine"), PRIME_CASES)
@pytest.mark.parametrize("shape", PRIME_SHAPES, ids=str)
def test_all_axes_reductions_over_a_prime_size(
    shape: tuple[int, ...], dtype: str, machine: str
) -> None:
    """Rows of a divisor too wide for UB, or whole rows, are walked in column chunks; their
    partials (float32 for float sums) are reduced after."""
    d = DTYPES[dtype]
    x = sample(shape, d)
    n = math.prod(shape)
    for op in ("sum", "max", "min"):
        f = getattr(pto, op)
        assert_close(lambda x, f=f: f(x), x, n, machine)
    assert_close(lambda x: pto.argmax(x), x, 1, machine)
    if d.is_floating:
        assert_close(lambda x: pto.mean(x), x, n, machine)


def test_argmax_over_a_long_prime_leading_axis() -> None:
    """argmax over axis 0 of [p, 3]: the axis is moved last, then walked in chunks; ties
    (small integers) keep the first index."""
    x = sample((PRIME, 3), pto.int8)
    assert_close(lambda x: pto.argmax(x, axis=0), x, 1, "tiny")
    y = np.array(sample((PRIME, 2), pto.float16))
    y[[7, PRIME - 1], 0] = np.nan
    y[[5, 90000], 1] = 9.0
    got, want = npu_and_interpret(lambda x: pto.argmax(x, axis=0), pto.tensor(y))
    assert got.tolist() == want.tolist() == [7, 5]
