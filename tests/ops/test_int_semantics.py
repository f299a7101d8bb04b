"""Integer semantics equal JAX's: float -> int casts, integer pow, integer sums and means,
argmax ties, wrapping arithmetic. Each case also states the expected numbers, so that a change
on either side is noticed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxref import FLOATS, INTS, assert_matches

import pypto as pto

I32_MAX, I32_MIN = 2**31 - 1, -(2**31)


# --- float -> int casts: truncation toward zero, saturation, NaN -> 0 ---------------------

_TRUNC = [1.7, -1.7, 2.5, -2.5, 0.5, -0.5, -0.0, 0.0, 98.7, -98.7]
_TRUNC_WANT = [1, -1, 2, -2, 0, 0, 0, 0, 98, -98]  # (98.7 is 98.5 in bfloat16)


@pytest.mark.parametrize("src", FLOATS, ids=str)
@pytest.mark.parametrize("dst", INTS, ids=str)
def test_float_to_int_truncates_toward_zero(src: pto.DType, dst: pto.DType) -> None:
    x = np.array(_TRUNC, np.float32).astype(src.np)
    got = pto.cast(pto.tensor(x), dst)
    assert_matches(got, jax.lax.convert_element_type(x, dst.np))
    np.testing.assert_array_equal(got.numpy(), np.array(_TRUNC_WANT, dst.np))


@pytest.mark.parametrize("src", FLOATS, ids=str)
def test_float_to_int32_saturates_and_nan_is_zero(src: pto.DType) -> None:
    vals = [np.inf, -np.inf, 1e10, -1e10, 3e9, -3e9, 2.0**31, -(2.0**31), 65504.0, np.nan]
    with np.errstate(over="ignore"):  # float16 overflows to inf on purpose
        x = np.array(vals, np.float32).astype(src.np)
    got = pto.cast(pto.tensor(x), pto.int32)
    assert_matches(got, jax.lax.convert_element_type(x, np.int32))
    # (float16 overflows to inf beyond 65504; bfloat16 rounds 65504 to 65536)
    want = [I32_MAX, I32_MIN] * 4 + [65536 if src is pto.bfloat16 else 65504, 0]
    np.testing.assert_array_equal(got.numpy(), np.array(want, np.int32))


@pytest.mark.parametrize("src", FLOATS, ids=str)
def test_float_to_int8_saturates(src: pto.DType) -> None:
    vals = [127.9, 128.0, 300.0, -128.9, -129.0, -300.0, np.inf, -np.inf, np.nan, 126.5]
    x = np.array(vals, np.float32).astype(src.np)
    got = pto.cast(pto.tensor(x), pto.int8)
    assert_matches(got, jax.lax.convert_element_type(x, np.int8))
    # (bfloat16 rounds 127.9 to 128, 126.5 to 126 and -128.9 to -129)
    want = [127, 127, 127, -128, -128, -128, 127, -128, 0, 126]
    np.testing.assert_array_equal(got.numpy(), np.array(want, np.int8))


@pytest.mark.parametrize("src", FLOATS, ids=str)
def test_float_to_bool_is_nonzero(src: pto.DType) -> None:
    x = np.array([0.0, -0.0, 1e-3, -2.0, np.nan, np.inf], np.float32).astype(src.np)
    got = pto.cast(pto.tensor(x), pto.bool_)
    assert_matches(got, jnp.asarray(x).astype(bool))
    assert got.numpy().tolist() == [False, False, True, True, True, True]


def test_int_to_int_wraps_and_bool_converts() -> None:
    x = np.array([300, -129, 127, 128, 255, 256, I32_MAX, I32_MIN], np.int32)
    got = pto.cast(pto.tensor(x), pto.int8)
    assert_matches(got, jax.lax.convert_element_type(x, np.int8))
    assert got.numpy().tolist() == [44, 127, 127, -128, -1, 0, -1, 0]
    b = np.array([True, False])
    for d in (pto.int8, pto.int32, pto.float16, pto.bfloat16):
        assert_matches(pto.tensor(b).astype(d), jnp.asarray(b).astype(d.np))


def test_int_to_float_rounds_like_jax() -> None:
    # int32 -> float32 rounds to nearest even; float16 overflows to inf beyond 65519.
    x = np.array([2**24 + 1, 2**24 + 3, I32_MAX, I32_MIN, 65519, 65520, -70000, 257], np.int32)
    for d in FLOATS:
        assert_matches(pto.cast(pto.tensor(x), d), jax.lax.convert_element_type(x, d.np))


# --- integer pow ------------------------------------------------------------------------


@pytest.mark.parametrize("d", INTS, ids=str)
def test_integer_pow_with_nonnegative_exponents(d: pto.DType) -> None:
    base, exp = np.meshgrid(np.arange(-4, 5), np.arange(0, 8), indexing="ij")
    if d is pto.int32:
        base, exp = (
            np.concatenate([base, [[7, 10, -3]]], None),
            np.concatenate([exp, [[11, 10, 19]]], None),
        )
    b, e = base.astype(d.np), exp.astype(d.np)
    got = pto.pow(pto.tensor(b), pto.tensor(e))
    assert_matches(got, jnp.power(b, e))
    # Python's exact powers, wrapped to the dtype's width (0 ** 0 == 1)
    bits = d.itemsize * 8
    want = [
        (int(x) ** int(y) + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
        for x, y in zip(b.flat, e.flat)
    ]
    np.testing.assert_array_equal(got.numpy().reshape(-1), np.array(want, d.np))
    # the operator and Python-int exponents (JAX: lax.integer_pow)
    for k in range(6):
        assert_matches(pto.tensor(b) ** k, jnp.power(b, k), what=f"x ** {k}")
        assert_matches(pto.pow(pto.tensor(b), k), jnp.power(b, k), what=f"pow(x, {k})")
    assert_matches(2 ** pto.tensor(e), jnp.power(2, e), what="2 ** x")


@pytest.mark.parametrize("d", INTS, ids=str)
def test_integer_pow_refuses_negative_exponents(d: pto.DType) -> None:
    # jnp.power gives meaningless numbers there (e.g. 3 ** -2 == 703701817 in int32).
    with pytest.raises(pto.DTypeError, match="negative exponent"):
        pto.pow(pto.tensor(np.array([2, 3], d.np)), pto.tensor(np.array([1, -2], d.np)))
    with pytest.raises(pto.DTypeError):
        pto.tensor(np.array([2, 3], d.np)) ** -1


# --- integer and bool sums, means -----------------------------------------------------------


@pytest.mark.parametrize("d", [pto.int8, pto.bool_, pto.int32], ids=str)
def test_integer_sums_accumulate_in_int32(d: pto.DType) -> None:
    x = np.full((50, 40), 100 if d is pto.int8 else 1, d.np)  # 200000 overflows int8/int16
    tx = pto.tensor(x)
    for axis, keepdims in [(None, False), (0, False), (1, True), ((0, 1), True), ((), False)]:
        got = pto.sum(tx, axis, keepdims)
        assert got.dtype is pto.int32
        assert_matches(got, jnp.sum(x, axis=axis, keepdims=keepdims), what=f"sum {axis}")
    assert int(tx.sum()) == (200000 if d is pto.int8 else 2000)
    assert_matches(tx.sum(0), jnp.sum(x, 0))


def test_int32_sum_wraps_like_jax() -> None:
    x = np.array([I32_MAX, 1, 5], np.int32)
    assert_matches(pto.sum(pto.tensor(x)), jnp.sum(x))
    assert int(pto.sum(pto.tensor(x))) == I32_MIN + 5


@pytest.mark.parametrize("d", [pto.int8, pto.int32, pto.bool_], ids=str)
def test_mean_of_integers_is_float32(d: pto.DType) -> None:
    x = np.array([[1, 2, 2], [0, 1, 1]], d.np)
    for axis in (None, 0, -1, (0, 1)):
        got = pto.mean(pto.tensor(x), axis)
        assert got.dtype is pto.float32
        assert_matches(got, jnp.mean(x, axis=axis), what=f"mean {axis}")
    assert float(pto.mean(pto.tensor(x))) == pytest.approx(np.mean(x.astype(np.float64)))
    # No integer overflow on the way (the sum is taken in float32).
    big = np.array([I32_MAX, I32_MAX, I32_MAX], np.int32)
    assert_matches(pto.mean(pto.tensor(big)), jnp.mean(big))


# --- argmax: first maximum, NaN is maximal -----------------------------------------------


@pytest.mark.parametrize("d", [pto.float32, pto.float16, pto.bfloat16, pto.int32, pto.int8])
def test_argmax_takes_the_first_of_tied_maxima(d: pto.DType) -> None:
    x = np.array([[1, 3, 3, 2], [5, 3, 5, 5], [0, -1, 5, 4], [-7, -7, -8, 5]], d.np)
    for axis, keepdims in [(None, False), (0, False), (1, False), (-1, True), (None, True)]:
        got = pto.argmax(pto.tensor(x), axis, keepdims)
        assert_matches(got, jnp.argmax(x, axis=axis, keepdims=keepdims), what=f"axis {axis}")
    assert pto.argmax(pto.tensor(x), 1).numpy().tolist() == [1, 0, 2, 3]
    assert pto.argmax(pto.tensor(x), 0).numpy().tolist() == [1, 0, 1, 1]
    assert int(pto.tensor(x).argmax()) == 4


def test_argmax_of_bools_and_with_nan() -> None:
    b = np.array([[False, True, True], [False, False, False]])
    assert_matches(pto.argmax(pto.tensor(b), 1), jnp.argmax(b, 1))
    assert pto.argmax(pto.tensor(b), 1).numpy().tolist() == [1, 0]
    for d in FLOATS:
        x = np.array([1.0, np.nan, 7.0, np.nan, np.inf], np.float32).astype(d.np)
        assert_matches(pto.argmax(pto.tensor(x)), jnp.argmax(x))
        assert int(pto.argmax(pto.tensor(x))) == 1
        y = np.array([-np.inf, -np.inf], np.float32).astype(d.np)
        assert int(pto.argmax(pto.tensor(y))) == int(jnp.argmax(y)) == 0


# --- wrapping arithmetic and integer division ----------------------------------------------


@pytest.mark.parametrize("d", INTS, ids=str)
def test_integer_arithmetic_wraps_like_jax(d: pto.DType) -> None:
    info = np.iinfo(d.np)
    x = np.array([info.max, info.min, -1, 0, 100], d.np)
    y = np.array([1, -1, info.min, info.max, 3], d.np)
    for pfn, jfn in [(pto.add, jnp.add), (pto.sub, jnp.subtract), (pto.mul, jnp.multiply)]:
        with np.errstate(over="ignore"):
            assert_matches(pfn(pto.tensor(x), pto.tensor(y)), jfn(x, y), what=pfn.__name__)
    assert_matches(-pto.tensor(x), jnp.negative(x))
    assert_matches(abs(pto.tensor(x)), jnp.abs(x))
    assert int(abs(pto.tensor(x))[1]) == info.min  # |min| wraps to min, in JAX too


@pytest.mark.parametrize("d", [*INTS, pto.bool_], ids=str)
def test_integer_true_division_gives_float32(d: pto.DType) -> None:
    x = np.array([7, -7, 0, 1, 0], d.np) if d is not pto.bool_ else np.array([1, 0, 1, 0, 1], bool)
    y = np.array([2, 2, 0, 0, 3], d.np) if d is not pto.bool_ else np.array([1, 1, 0, 0, 1], bool)
    got = pto.tensor(x) / pto.tensor(y)
    assert got.dtype is pto.float32
    assert_matches(got, jnp.true_divide(x, y))  # 0 / 0 is NaN, 1 / 0 is inf
    assert_matches(pto.tensor(x) / 2, jnp.true_divide(x, 2))
