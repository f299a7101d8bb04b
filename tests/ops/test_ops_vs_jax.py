"""Every op of the table, in eager mode, equals JAX within the tolerance table (DESIGN §6).

``CASES`` holds one case per op in ``pypto.ops.table.OPS`` (a new op without a case fails
``test_every_op_has_a_case``). A case draws operands — shapes with broadcasting, size-0 and
size-1 dims, 0-d tensors, and views (slices and transposes of bigger tensors, numpy views) —
runs the public API (functions, operators and methods) and compares with the op's JAX
reference: shapes and dtypes exactly, values within ``tolerance(dtype, k)``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import hypothesis.extra.numpy as _hnp
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxref import (
    BOOL,
    DTYPES,
    FLOATS,
    INTS,
    MAX_SIDE,
    NUMERIC,
    SPECIALS,
    Member,
    as_input,
    assert_matches,
    broadcast_shapes,
    jax_elementwise,
    jax_layout,
    jitted,
    name_of,
    operands,
    rng,
    shapes,
    values,
)

import pypto as pto
from pypto.core import dispatch
from pypto.core.tolerance import tolerance
from pypto.ops.scan import MONOIDS
from pypto.ops.table import OPS
from pypto.tile.examples import rms_norm_matmul

Draw = st.DataObject
# jax.nn.softmax of integers casts its -inf initial value to the integer dtype (JAX's own).
pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered in cast:RuntimeWarning:jax"
)


@dataclass(frozen=True)
class Case:
    fn: Callable[[Draw, pto.DType, str], None]
    dtypes: tuple[pto.DType, ...]
    group: str  # which test runs it (the groups differ in how costly JAX references are)


CASES: dict[str, Case] = {}


def case(*names: str, dtypes: tuple[pto.DType, ...], group: str) -> Any:
    def deco(fn: Callable[[Draw, pto.DType, str], None]) -> Callable[[Draw, pto.DType, str], None]:
        for n in names:
            assert n not in CASES, n
            CASES[n] = Case(fn, dtypes, group)
        return fn

    return deco


def ref(name: str) -> Callable[..., Any]:
    """The op's JAX reference from the table."""
    f = OPS[name].jax_impl
    assert f is not None, name
    return f


def _bucket(n: int) -> int:
    """A padded size for n <= 64 (few sizes: few compiled JAX kernels)."""
    return next(b for b in (4, 16, 64, 256) if n <= b)


# One JAX kernel per operand signature computes a whole family (see jaxref.Member).
_UNARY_OPS = ("exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "sin", "cos")
UNARY = tuple(
    (n, ref(n)) for n in (*_UNARY_OPS, "neg", "abs", "stop_gradient", "relu", "gelu", "silu")
)
_BINARY_OPS = ("add", "sub", "mul", "div", "maximum", "minimum")
_CMP = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
BINARY = tuple((n, ref(n)) for n in (*_BINARY_OPS, *_CMP))  # pow: see _binary
CASTS = tuple((d.name, functools.partial(ref("cast"), dtype=d)) for d in DTYPES)

# ---------------------------------------------------------------------------------------------
# Elementwise: unary math

# op -> (lo, hi) of float inputs, (lo, hi) of integer inputs, extra specials
_UNARY: dict[str, tuple[tuple[float, float], tuple[int, int] | None, tuple[float, ...]]] = {
    # |x| <= 10 keeps exp finite in float16 (max 65504); inf/nan/0 still sprinkled in.
    "exp": ((-10.0, 10.0), (-10, 10), ()),
    "log": ((0.0, 100.0), (0, 100), (-1.0,)),
    "sqrt": ((0.0, 100.0), (0, 100), (-1.0,)),
    "rsqrt": ((0.01, 100.0), None, (-1.0,)),
    "reciprocal": ((-10.0, 10.0), (-10, 10), ()),
    "tanh": ((-10.0, 10.0), (-10, 10), ()),
    "sigmoid": ((-20.0, 20.0), None, ()),
    "sin": ((-10.0, 10.0), (-10, 10), ()),
    "cos": ((-10.0, 10.0), (-10, 10), ()),
    "neg": ((-100.0, 100.0), (-(2**31), 2**31 - 1), ()),  # ints: the whole range (wraps)
    "abs": ((-100.0, 100.0), (-(2**31), 2**31 - 1), ()),
    "stop_gradient": ((-100.0, 100.0), (-(2**31), 2**31 - 1), ()),  # the value, every dtype
}
# jnp rejects rsqrt/sigmoid of integers; neg and abs keep the dtype and reject bool here.
_UNARY_DTYPES = {"rsqrt": FLOATS, "sigmoid": FLOATS, "neg": NUMERIC, "abs": NUMERIC}


def _unary(data: Draw, dtype: pto.DType, name: str) -> None:
    (lo, hi), ints, extra = _UNARY[name]
    a = values(data, dtype, data.draw(shapes()), lo, hi, ints=ints, specials=SPECIALS + extra)
    (x,) = operands(data, [a])
    form = data.draw(st.sampled_from(["function", "operator"]), label="form")
    if not isinstance(x, pto.Tensor):  # a numpy view: the function form
        out = getattr(pto, name)(x)
    elif form == "operator" and name == "neg":
        out = -x
    elif form == "operator" and name == "abs":
        out = abs(x)
    else:
        out = getattr(pto, name)(x)
    assert_matches(out, jax_elementwise(Member(UNARY, name), a), what=name)


for _name in _UNARY:
    case(_name, dtypes=_UNARY_DTYPES.get(_name, DTYPES), group="elementwise")(_unary)


# ---------------------------------------------------------------------------------------------
# Elementwise: binary arithmetic and comparisons

_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
    "pow": lambda x, y: x**y,
    "equal": lambda x, y: x == y,
    "not_equal": lambda x, y: x != y,
    "less": lambda x, y: x < y,
    "less_equal": lambda x, y: x <= y,
    "greater": lambda x, y: x > y,
    "greater_equal": lambda x, y: x >= y,
}


def _scalar(data: Draw, dtype: pto.DType, name: str) -> bool | int | float:
    """A weak Python scalar that is valid with a ``dtype`` tensor for ``name``."""
    if name == "pow":
        return data.draw(
            st.sampled_from([0, 1, 2, 3] + ([0.5, 2.0, -1.5] if dtype in FLOATS else []))
        )
    choices: list[bool | int | float] = [True, False, 2, -3, 0, 2.5, -0.75, 100.0]
    if name == "sub":
        choices = [c for c in choices if not isinstance(c, bool)] if dtype is BOOL else choices
    return data.draw(st.sampled_from(choices), label="scalar")


def _binary(data: Draw, dtype: pto.DType, name: str) -> None:
    sx, sy = data.draw(broadcast_shapes(2), label="shapes")
    if name == "pow":
        if dtype.is_floating:
            a = values(data, dtype, sx, -4.0, 4.0, specials=SPECIALS)
            b = values(data, dtype, sy, -3.0, 3.0, specials=(0.0, np.nan))
        else:  # integer pow: non-negative exponents only (negative ones are an error)
            a = values(data, dtype, sx, ints=(-5, 5))
            b = values(data, dtype, sy, ints=(0, 5))
    else:
        lo, hi = (-100.0, 100.0)
        ints = (-(2**31), 2**31 - 1) if name in ("add", "sub", "mul") else (-20, 20)
        a = values(data, dtype, sx, lo, hi, ints=ints, specials=SPECIALS)
        b = values(data, dtype, sy, lo, hi, ints=ints, specials=SPECIALS)
    side = data.draw(st.sampled_from(["none", "none", "right", "left"]), label="scalar side")
    jf: Any = ref(name) if name == "pow" else Member(BINARY, name)

    def jref(*args: Any) -> np.ndarray:
        if name == "div" and dtype is BOOL:
            # XLA on CPU miscompiles float(False) / float(False) to 0 instead of NaN when the
            # divisor is a scalar (it folds the bool -> float conversion into a select). JAX
            # promotes bools to float32 for true division: the reference divides those floats.
            args = tuple(
                u.astype(np.float32) if isinstance(u, np.ndarray) else float(u) for u in args
            )
        return jax_elementwise(jf, *args, static_scalars=name == "pow")

    if side == "none":
        x, y = operands(data, [a, b])
        expected = jref(a, b)
    elif side == "right":
        s = _scalar(data, dtype, name)
        x, y = as_input(data, a, allow_numpy=False), s
        expected = jref(a, s)
    else:
        if name == "pow" and not dtype.is_floating:
            a = values(data, dtype, sx, ints=(0, 5))  # the tensor is now the exponent
        s = _scalar(data, dtype, name)
        x, y = s, as_input(data, a, allow_numpy=False)
        expected = jref(s, a)
    use_op = name in _OPERATORS and data.draw(st.booleans(), label="operator")
    if use_op and (isinstance(x, pto.Tensor) or isinstance(y, pto.Tensor)):
        out = _OPERATORS[name](x, y)
    else:
        out = getattr(pto, name)(x, y)
    assert_matches(out, expected, what=f"{name}({type(x).__name__}, {type(y).__name__})")


for _name, _dts in {
    "add": DTYPES,
    "sub": NUMERIC,  # jnp.subtract rejects bool
    "mul": DTYPES,
    "div": DTYPES,  # true division: integers and bools give float32
    "pow": NUMERIC,
    "maximum": DTYPES,
    "minimum": DTYPES,
    **{c: DTYPES for c in _CMP},
}.items():
    case(_name, dtypes=_dts, group="elementwise")(_binary)


_EDGES = np.array([0, 1, -1, 2**31 - 1, -(2**31), 7, -7])


def _divisible(data: Draw, dtype: pto.DType, shape: tuple[int, ...]) -> np.ndarray:
    """Operands of a division: integers over the whole range with zeros, -1 and the extremes
    sprinkled in (x // 0, -2³¹ // -1); floats with signed zeros, infinities and NaN."""
    if not dtype.is_integer:
        return values(data, dtype, shape, -50.0, 50.0, specials=SPECIALS)
    a = values(data, dtype, shape, ints=(-(2**31), 2**31 - 1))
    if data.draw(st.booleans(), label="small"):
        a = values(data, dtype, shape, ints=(-12, 12))
    g = rng(data)
    edges = _EDGES.astype(np.int64).clip(np.iinfo(dtype.np).min, np.iinfo(dtype.np).max)
    pick = g.choice(edges, size=shape).astype(dtype.np)
    return np.where(g.random(shape) < 0.3, pick, a).astype(dtype.np)


@case("fmod", "remainder", "floor_divide", dtypes=NUMERIC, group="elementwise")
def _division(data: Draw, dtype: pto.DType, name: str) -> None:
    sx, sy = data.draw(broadcast_shapes(2), label="shapes")
    a, b = _divisible(data, dtype, sx), _divisible(data, dtype, sy)
    op = {"remainder": lambda x, y: x % y, "floor_divide": lambda x, y: x // y}.get(name)
    if data.draw(st.booleans(), label="scalar divisor"):
        s = data.draw(st.sampled_from([3, -2, 0, 1] + ([2.5, -0.75] if dtype in FLOATS else [])))
        x, y = as_input(data, a, allow_numpy=False), s
        expected = jitted(lambda u: ref(name)(u, s))(a)
    else:
        x, y = operands(data, [a, b])
        expected = jitted(ref(name))(a, b)
    tensors = isinstance(x, pto.Tensor) or isinstance(y, pto.Tensor)
    if op is not None and tensors and data.draw(st.booleans(), label="operator"):
        out = op(x, y)
    else:
        out = getattr(pto, name)(x, y)
    assert_matches(out, expected, what=f"{name}({type(x).__name__}, {type(y).__name__})")


_BIT_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "bitwise_and": lambda x, y: x & y,
    "bitwise_or": lambda x, y: x | y,
    "bitwise_xor": lambda x, y: x ^ y,
    "left_shift": lambda x, y: x << y,
    "right_shift": lambda x, y: x >> y,
}


@case(*_BIT_OPERATORS, "bitwise_not", dtypes=INTS, group="elementwise")
def _bits(data: Draw, dtype: pto.DType, name: str) -> None:
    sx, sy = data.draw(broadcast_shapes(2), label="shapes")
    a = _divisible(data, dtype, sx)
    if name == "bitwise_not":
        (x,) = operands(data, [a])
        out = ~x if isinstance(x, pto.Tensor) and data.draw(st.booleans()) else pto.bitwise_not(x)
        assert_matches(out, jitted(ref(name))(a), what=name)
        return
    shifts = name.endswith("shift")
    # shift amounts around the width (negative and too large ones have JAX's meaning)
    b = values(data, dtype, sy, ints=(-3, 40)) if shifts else _divisible(data, dtype, sy)
    if data.draw(st.booleans(), label="scalar"):
        k = data.draw(st.sampled_from([0, 1, 3, 7] if shifts else [0, -1, 5, 96]))
        x, y, expected = (
            as_input(data, a, allow_numpy=False),
            k,
            jitted(lambda u: ref(name)(u, k))(a),
        )
    else:
        (x, y), expected = operands(data, [a, b]), jitted(ref(name))(a, b)
    if isinstance(x, pto.Tensor) and data.draw(st.booleans(), label="operator"):
        out = _BIT_OPERATORS[name](x, y)
    else:
        out = getattr(pto, name)(x, y)
    assert_matches(out, expected, what=f"{name}({type(x).__name__}, {type(y).__name__})")


@case("where", dtypes=DTYPES, group="elementwise")
def _where(data: Draw, dtype: pto.DType, name: str) -> None:
    sc, sx, sy = data.draw(broadcast_shapes(3), label="shapes")
    # A non-bool condition means cond != 0, as in jnp.where.
    cdt = data.draw(st.sampled_from([BOOL, BOOL, pto.int32, pto.float32]), label="cond dtype")
    c = values(data, cdt, sc, -1.0, 1.0, ints=(-1, 1), discrete=True)
    a = values(data, dtype, sx, specials=SPECIALS)
    b = values(data, dtype, sy, specials=SPECIALS)
    if data.draw(st.booleans(), label="scalar branch"):
        s = data.draw(st.sampled_from([True, 3, -1.5]))
        cond, x = operands(data, [c, a])
        out = pto.where(cond, x, s)
        expected = jax_elementwise(jnp.where, c, a, s)
    else:
        cond, x, y = operands(data, [c, a, b])
        out = pto.where(cond, x, y)
        expected = jax_elementwise(ref("where") if cdt is BOOL else jnp.where, c, a, b)
    assert_matches(out, expected, what="where")


# Functions that move, pick or build elements whatever their values are: one dtype of each
# kind (a wide and a narrow float, a narrow integer, bool) covers them.
LAYOUT_DTYPES = (pto.float32, pto.bfloat16, pto.int8, pto.bool_)

_PARTNER = {
    pto.float32: pto.int32,
    pto.int32: pto.float32,
    pto.float16: pto.bfloat16,
    pto.bfloat16: pto.float16,
}


@case("bitcast_convert_type", dtypes=DTYPES, group="elementwise")
def _bitcast(data: Draw, dtype: pto.DType, name: str) -> None:
    neg_nan = float(np.copysign(np.nan, -1.0))
    a = values(data, dtype, data.draw(shapes()), -1e4, 1e4, specials=(*SPECIALS, neg_nan))
    (x,) = operands(data, [a])
    if dtype not in _PARTNER:  # no dtype of the same size: a clear refusal
        with pytest.raises(pto.DTypeError, match="same element size"):
            pto.bitcast_convert_type(x, pto.float32)
        return
    target = _PARTNER[dtype]
    out = x.view(target) if isinstance(x, pto.Tensor) else pto.bitcast_convert_type(x, target)
    want = np.asarray(jitted(ref(name), ("dtype",))(a, dtype=target))
    assert out.dtype is target and out.shape == want.shape
    # the bits themselves: NaN payloads and -0.0 included
    np.testing.assert_array_equal(np.asarray(out).view(dtype.np), want.view(dtype.np))


@case("cast", dtypes=DTYPES, group="elementwise")
def _cast(data: Draw, dtype: pto.DType, name: str) -> None:
    target = data.draw(st.sampled_from(DTYPES), label="target")
    # Float -> int: truncation toward zero, saturation out of range, NaN -> 0 (as XLA does).
    big = data.draw(st.sampled_from([10.0, 300.0, 7e4, 3e9]), label="range")
    a = values(data, dtype, data.draw(shapes()), -big, big, specials=SPECIALS)
    (x,) = operands(data, [a])
    form = data.draw(st.sampled_from(["cast", "astype", "name"]), label="form")
    if form == "astype" and isinstance(x, pto.Tensor):
        out = x.astype(target)
    elif form == "name":
        out = pto.cast(x, target.name)
    else:
        out = pto.cast(x, target)
    assert_matches(out, jax_elementwise(Member(CASTS, target.name), a), what="cast")


# ---------------------------------------------------------------------------------------------
# Composite elementwise ops (the bucketed reference applies: they act elementwise)


@case("relu", "gelu", dtypes=DTYPES, group="elementwise")
@case("silu", dtypes=FLOATS, group="elementwise")  # jax.nn.silu rejects integers
def _activation(data: Draw, dtype: pto.DType, name: str) -> None:
    a = values(data, dtype, data.draw(shapes()), -6.0, 6.0, ints=(-50, 50), specials=SPECIALS)
    (x,) = operands(data, [a])
    assert_matches(getattr(pto, name)(x), jax_elementwise(Member(UNARY, name), a), what=name)


@case("logical_and", "logical_or", "logical_xor", dtypes=DTYPES, group="elementwise")
def _logical(data: Draw, dtype: pto.DType, name: str) -> None:
    sx, sy = data.draw(broadcast_shapes(2), label="shapes")
    # nonzero is True: zeros, signed zeros and NaN among the values
    a = values(data, dtype, sx, -1.0, 1.0, ints=(-1, 1), discrete=True, specials=SPECIALS)
    other = data.draw(st.sampled_from([dtype, BOOL, pto.int32]), label="other dtype")
    b = values(data, other, sy, -1.0, 1.0, ints=(-1, 1), discrete=True, specials=SPECIALS)
    x, y = operands(data, [a, b])
    out = getattr(pto, name)(x, y)
    assert_matches(out, jax_elementwise(ref(name), a, b), what=name)


@case("logical_not", dtypes=DTYPES, group="elementwise")
def _logical_not(data: Draw, dtype: pto.DType, name: str) -> None:
    a = values(data, dtype, data.draw(shapes()), -1.0, 1.0, ints=(-1, 1), discrete=True)
    (x,) = operands(data, [a])
    assert_matches(pto.logical_not(x), jax_elementwise(ref(name), a), what=name)


@case("floor", "ceil", "round", dtypes=DTYPES, group="elementwise")
def _rounding(data: Draw, dtype: pto.DType, name: str) -> None:
    # halves and quarters (ties), small and huge values, signed zeros, NaN and ±inf
    scale = data.draw(st.sampled_from([1.0, 0.25, 4.0, 1e6]), label="scale")
    a = values(data, dtype, data.draw(shapes()), -40.0, 40.0, ints=(-50, 50), specials=SPECIALS)
    if dtype.is_floating:
        with np.errstate(over="ignore"):
            a = np.asarray(np.round(a.astype(np.float32) * 4) / 4 * scale).astype(dtype.np)
    (x,) = operands(data, [a])
    if name == "round" and dtype is BOOL:  # refused by both, as jnp.round refuses bools
        with pytest.raises(pto.DTypeError, match="round"):
            pto.round(x)
        with pytest.raises(ValueError):
            jnp.round(a)
        return
    out = getattr(pto, name)(x)
    want = np.asarray(jax_elementwise(ref(name), a))
    assert_matches(out, want, what=name)
    got = np.asarray(out)
    # exact, sign of zero included
    assert np.array_equal(got, want, equal_nan=True), (name, a, got, want)
    if dtype.is_floating:
        assert np.array_equal(np.signbit(got), np.signbit(want)), (name, a, got, want)


@case("clip", dtypes=NUMERIC, group="elementwise")
def _clip(data: Draw, dtype: pto.DType, name: str) -> None:
    sx, slo, shi = data.draw(broadcast_shapes(3), label="shapes")
    a = values(data, dtype, sx, -5.0, 5.0, specials=SPECIALS)
    kind = data.draw(st.sampled_from(["scalars", "tensors", "lo only", "hi only"]), label="bounds")
    if kind == "tensors":  # bounds may cross (lo > hi gives hi, as in jnp.clip)
        lo = values(data, dtype, slo, -3.0, 1.0)
        hi = values(data, dtype, shi, -1.0, 3.0)
        x, lt, ht = operands(data, [a, lo, hi])
        out = pto.clip(x, lt, ht)
        expected = jax_elementwise(ref("clip"), a, lo, hi)
    else:
        lo_s = None if kind == "hi only" else data.draw(st.sampled_from([-2, -1.5, 0]))
        hi_s = None if kind == "lo only" else data.draw(st.sampled_from([3, 2.5, 0]))
        (x,) = operands(data, [a])
        out = (
            pto.clip(x, lo_s, hi_s) if data.draw(st.booleans()) else pto.clip(x, min=lo_s, max=hi_s)
        )
        expected = jax_elementwise(ref("clip"), a, lo_s, hi_s)
    assert_matches(out, expected, what=f"clip ({kind})")


# ---------------------------------------------------------------------------------------------
# Reductions (bucketed: reduced axes moved last and padded with the reduction's identity)


def _axes(data: Draw, ndim: int, allow_tuple: bool = True) -> Any:
    """None, an int (possibly negative) or a tuple of distinct axes (any order, negative)."""
    choices = [st.none()]
    if ndim:
        choices.append(st.integers(-ndim, ndim - 1))
        if allow_tuple:
            choices.append(
                st.lists(st.integers(0, ndim - 1), unique=True).flatmap(
                    lambda ax: st.tuples(*(st.sampled_from([a, a - ndim]) for a in ax))
                )
            )
    return data.draw(st.one_of(*choices), label="axis")


def _norm_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    ax = (axis,) if isinstance(axis, int) else axis
    return tuple(sorted(a % ndim for a in ax))


def _pad_value(name: str, dtype: np.dtype[Any]) -> Any:
    if name in ("sum", "any"):
        return 0
    if name == "all":
        return 1
    low = name in ("max", "argmax")
    if dtype == np.bool_:
        return not low
    if dtype.kind == "i":
        info = np.iinfo(dtype)
        return info.min if low else info.max
    return -np.inf if low else np.inf


def _jax_reduce(name: str, a: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    """The table's JAX reduction of ``a`` over ``axis``, via a padded 2-d [kept, reduced] form.

    Padding after the data with the identity keeps sums, extremes and first-max indices.
    """
    axes = _norm_axes(axis, a.ndim)
    by_axis = name in ("argmax", "argmin", "any", "all")  # (composites and argmax: axis=)
    if by_axis:
        out = jax.eval_shape(lambda u: ref(name)(u, axis=axis, keepdims=keepdims), a)
    else:
        out = jax.eval_shape(lambda u: ref(name)(u, axes=axes, keepdims=keepdims), a)
    kept = [i for i in range(a.ndim) if i not in axes]
    outer = math.prod(a.shape[i] for i in kept)
    inner = math.prod(a.shape[i] for i in axes)
    buf = np.full((_bucket(outer), _bucket(inner)), _pad_value(name, a.dtype), a.dtype)
    buf[:outer, :inner] = np.transpose(a, kept + list(axes)).reshape(outer, inner)
    if by_axis:
        r = ref(name)(buf, axis=1, keepdims=False)
    else:
        r = ref(name)(buf, axes=(1,), keepdims=False)
    r = np.asarray(r)
    assert r.dtype == out.dtype, (r.dtype, out)
    return r[:outer].reshape(out.shape)


def _call_reduction(data: Draw, name: str, x: Any, axis: Any, keepdims: bool) -> Any:
    form = data.draw(st.sampled_from(["function", "method", "keyword"]), label="form")
    if form == "method" and isinstance(x, pto.Tensor):
        return getattr(x, name)(axis, keepdims)
    if form == "keyword":
        return getattr(pto, name)(x, axis=axis, keepdims=keepdims)
    return getattr(pto, name)(x, axis, keepdims)


@case("sum", "max", "min", dtypes=DTYPES, group="reduce")
def _reduce(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    # Integer sums wrap in int32 in both; small integers keep float sums away from cancellation.
    a = values(
        data, dtype, shape, -10.0, 10.0, ints=(-100, 100), specials=(np.nan, np.inf, -np.inf)
    )
    (x,) = operands(data, [a])
    axis = _axes(data, len(shape))
    keepdims = data.draw(st.booleans(), label="keepdims")
    axes = _norm_axes(axis, len(shape))
    if name != "sum" and any(shape[i] == 0 for i in axes):
        # No identity: both refuse (pypto with a ShapeError, JAX with a ValueError).
        with pytest.raises(pto.ShapeError):
            _call_reduction(data, name, x, axis, keepdims)
        with pytest.raises(ValueError):
            jnp.max(a, axis=axis) if name == "max" else jnp.min(a, axis=axis)
        return
    k = math.prod(shape[i] for i in axes)
    out = _call_reduction(data, name, x, axis, keepdims)
    assert_matches(out, _jax_reduce(name, a, axis, keepdims), k, what=f"{name} axis={axis}")


@case("argmax", "argmin", dtypes=DTYPES, group="reduce")
def _argmax(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    # discrete values make ties; the first extreme wins, and NaN counts as the extreme. The
    # integer range's ends: argmin's order reversal must not overflow
    ends = [(-3, 3), (-(2**31), 2**31 - 1)] if dtype is pto.int32 else [(-3, 3)]
    ints = data.draw(st.sampled_from(ends), label="ints")
    a = values(data, dtype, shape, -3.0, 3.0, ints=ints, specials=(np.nan, -np.inf, np.inf))
    (x,) = operands(data, [a])
    axis = _axes(data, len(shape), allow_tuple=False)
    keepdims = data.draw(st.booleans(), label="keepdims")
    empty = a.size == 0 if axis is None else shape[axis] == 0
    if empty:
        with pytest.raises(pto.ShapeError):
            _call_reduction(data, name, x, axis, keepdims)
        with pytest.raises(ValueError):
            getattr(jnp, name)(a, axis=axis)
        return
    out = _call_reduction(data, name, x, axis, keepdims)
    assert_matches(out, _jax_reduce(name, a, axis, keepdims), what=f"{name} axis={axis}")


@case("any", "all", dtypes=DTYPES, group="reduce")
def _any_all(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    a = values(data, dtype, shape, -1.0, 1.0, ints=(-1, 1), discrete=True, specials=(np.nan,))
    (x,) = operands(data, [a])
    axis = _axes(data, len(shape))
    keepdims = data.draw(st.booleans(), label="keepdims")
    out = _call_reduction(data, name, x, axis, keepdims)  # (empty axes: False and True)
    assert_matches(out, _jax_reduce(name, a, axis, keepdims), what=f"{name} axis={axis}")


# ---------------------------------------------------------------------------------------------
# Layout ops (reference: JAX moves an iota of source positions; see jaxref)


def _factor_shape(data: Draw, size: int) -> tuple[int, ...]:
    """A random shape with ``size`` elements (0 to 4 dims)."""
    if size == 0:
        dims = data.draw(st.lists(st.integers(0, 3), min_size=0, max_size=3))
        pos = data.draw(st.integers(0, len(dims)))
        return (*dims[:pos], 0, *dims[pos:])
    factors = []
    n = size
    p = 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    nd = data.draw(st.integers(1, 4), label="ndim")
    dims = [1] * nd
    for f in factors:
        dims[data.draw(st.integers(0, nd - 1))] *= f
    if size == 1 and data.draw(st.booleans()):
        return ()
    return tuple(dims)


@case("reshape", dtypes=DTYPES, group="layout")
def _reshape(data: Draw, dtype: pto.DType, name: str) -> None:
    a = values(data, dtype, data.draw(shapes()), specials=SPECIALS)
    (x,) = operands(data, [a])
    new = list(_factor_shape(data, a.size))
    if new and math.prod(d for d in new) > 0 and data.draw(st.booleans(), label="-1"):
        new[data.draw(st.integers(0, len(new) - 1))] = -1
    form = data.draw(st.sampled_from(["function", "method", "varargs"]), label="form")
    if form == "method" and isinstance(x, pto.Tensor):
        out = x.reshape(tuple(new))
    elif form == "varargs" and isinstance(x, pto.Tensor) and new:
        out = x.reshape(*new)
    else:
        out = pto.reshape(x, tuple(new))
    assert_matches(out, jax_layout(lambda u: jnp.reshape(u, tuple(new)), a), what=f"reshape {new}")


@case("transpose", dtypes=DTYPES, group="layout")
def _transpose(data: Draw, dtype: pto.DType, name: str) -> None:
    a = values(data, dtype, data.draw(shapes()), specials=SPECIALS)
    (x,) = operands(data, [a])
    nd = a.ndim
    perm = data.draw(st.none() | st.permutations(range(nd)).map(tuple), label="perm")
    if perm is not None and data.draw(st.booleans(), label="negative axes"):
        perm = tuple(p - nd for p in perm)
    form = data.draw(st.sampled_from(["function", "method", ".T"]), label="form")
    if isinstance(x, pto.Tensor) and form == ".T" and perm is None:
        out = x.T
    elif isinstance(x, pto.Tensor) and form == "method":
        out = x.transpose() if perm is None else x.transpose(*perm)
    else:
        out = pto.transpose(x, perm)
    assert_matches(out, jax_layout(lambda u: jnp.transpose(u, perm), a), what=f"transpose {perm}")


@case("broadcast_to", dtypes=DTYPES, group="layout")
def _broadcast_to(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes())
    a = values(data, dtype, shape, specials=SPECIALS)
    (x,) = operands(data, [a])
    lead = data.draw(st.lists(st.integers(0, 3), max_size=2), label="leading dims")
    target = (*lead, *(data.draw(st.integers(0, 3)) if s == 1 else s for s in shape))
    out = pto.broadcast_to(x, target)
    expected = jax_layout(lambda u: jnp.broadcast_to(u, target), a)
    assert_matches(out, expected, what=f"broadcast_to {target}")


@case("concat", dtypes=DTYPES, group="layout")
def _concat(data: Draw, dtype: pto.DType, name: str) -> None:
    base = data.draw(shapes(min_dims=1), label="shape")
    nd = len(base)
    axis = data.draw(st.integers(-nd, nd - 1), label="axis")
    n = data.draw(st.integers(1, 3), label="count")
    arrays = []
    for i in range(n):
        s = list(base)
        s[axis] = data.draw(st.integers(0, 3))
        # Sometimes a second dtype joins, and the result is promoted (as jnp.concatenate).
        d = dtype if i == 0 or data.draw(st.integers(0, 3)) else data.draw(st.sampled_from(DTYPES))
        arrays.append(values(data, d, s, -8.0, 8.0, ints=(-8, 8), discrete=d is not dtype))
    xs = operands(data, arrays)
    out = pto.concat(xs, axis) if data.draw(st.booleans()) else pto.concat(tuple(xs), axis=axis)
    expected = jax_layout(lambda *us: jnp.concatenate(us, axis=axis), *arrays)
    assert_matches(out, expected, what=f"concat axis={axis} of {[x.dtype for x in arrays]}")


@case("slice", dtypes=DTYPES, group="layout")
def _slice(data: Draw, dtype: pto.DType, name: str) -> None:
    import hypothesis.extra.numpy as hnp

    shape = data.draw(shapes(), label="shape")
    a = values(data, dtype, shape, specials=SPECIALS)
    x = as_input(data, a, allow_numpy=False)
    key = data.draw(hnp.basic_indices(shape, allow_newaxis=True), label="key")
    out = x[key]
    assert_matches(out, jax_layout(lambda u: u[key], a), what=f"x[{key}]")
    np.testing.assert_array_equal(np.asarray(out), a[key])  # and numpy agrees


@case("take", dtypes=DTYPES, group="layout")
def _take(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    a = values(data, dtype, shape, specials=SPECIALS)
    axis = _axes(data, len(shape), allow_tuple=False)
    n = a.size if axis is None else shape[axis]
    ishape = data.draw(shapes(max_dims=2), label="index shape")
    if n == 0:
        ishape = (*ishape[:-1], 0) if ishape else (0,)
    idt = data.draw(st.sampled_from([pto.int32, pto.int8]), label="index dtype")
    idx = values(data, idt, ishape, ints=(-n, n - 1) if n else (0, 0))  # negative ones wrap
    x, i = operands(data, [a, idx])
    out = pto.take(x, i) if axis is None else pto.take(x, i, axis)
    if n == 0:
        # jnp.take from an empty axis returns the input itself, whatever the index shape
        # (jax/_src/numpy/indexing.py, `_take`); numpy has the shape right.
        expected = np.take(a, idx, axis=axis)
    else:
        expected = jax_layout(lambda u, j: jnp.take(u, j, axis=axis), a, extra=(idx,))
    assert_matches(out, expected, what=f"take axis={axis}")
    np.testing.assert_array_equal(np.asarray(out), np.take(a, idx, axis=axis))


@case("expand_dims", dtypes=DTYPES, group="layout")
def _expand_dims(data: Draw, dtype: pto.DType, name: str) -> None:
    a = values(data, dtype, data.draw(shapes()), specials=SPECIALS)
    (x,) = operands(data, [a])
    n_new = data.draw(st.integers(1, 2), label="new dims")
    nd = a.ndim + n_new
    pos = data.draw(st.lists(st.integers(0, nd - 1), min_size=n_new, max_size=n_new, unique=True))
    ax = [data.draw(st.sampled_from([p, p - nd])) for p in pos]
    axis: int | tuple[int, ...] = ax[0] if n_new == 1 and data.draw(st.booleans()) else tuple(ax)
    out = pto.expand_dims(x, axis)
    assert_matches(out, jax_layout(lambda u: ref(name)(u, axis), a), what=f"expand_dims {axis}")


@case("squeeze", dtypes=DTYPES, group="layout")
def _squeeze(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(max_dims=4))
    a = values(data, dtype, shape, specials=SPECIALS)
    (x,) = operands(data, [a])
    ones = [i for i, s in enumerate(shape) if s == 1]
    axis: Any = None
    if ones and data.draw(st.booleans(), label="explicit axes"):
        chosen = data.draw(st.lists(st.sampled_from(ones), min_size=1, unique=True))
        axis = tuple(data.draw(st.sampled_from([c, c - len(shape)])) for c in chosen)
        if len(axis) == 1 and data.draw(st.booleans()):
            axis = axis[0]
    out = pto.squeeze(x) if axis is None else pto.squeeze(x, axis)
    assert_matches(out, jax_layout(lambda u: ref(name)(u, axis), a), what=f"squeeze {axis}")


@case("split", dtypes=DTYPES, group="layout")
def _split(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1))
    a = values(data, dtype, shape, specials=SPECIALS)
    (x,) = operands(data, [a])
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1), label="axis")
    n = shape[axis]
    how: int | list[int]
    if data.draw(st.booleans(), label="sections"):
        how = data.draw(st.sampled_from([k for k in range(1, 5) if n % k == 0]), label="k")
    else:  # sorted in-range split points (what jnp.split accepts)
        how = sorted(data.draw(st.lists(st.integers(0, n), max_size=3), label="indices"))
    out = pto.split(x, how, axis) if data.draw(st.booleans()) else pto.split(x, how, axis=axis)
    expected = jax_layout(lambda u: ref(name)(u, how, axis), a)
    assert isinstance(out, list) and len(out) == len(expected)
    for o, e in zip(out, expected, strict=True):
        assert_matches(o, e, what=f"split {how} axis={axis}")


@case("lax_pad", dtypes=DTYPES, group="layout")
def _pad(data: Draw, dtype: pto.DType, name: str) -> None:
    # An internal primitive (the transpose of slice, for autodiff): bound directly.
    a = values(data, dtype, data.draw(shapes()), specials=SPECIALS)
    x = as_input(data, a, allow_numpy=False)
    config = tuple(
        (data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2)))
        for _ in a.shape
    )
    # the padding value: the default 0, or a constant of the dtype (specials for floats)
    params: dict[str, Any] = {"config": config}
    if data.draw(st.booleans(), label="value"):
        if dtype.is_floating:
            params["value"] = data.draw(st.sampled_from([-np.inf, np.inf, np.nan, -0.0, 2.5]))
        elif dtype is pto.bool_:
            params["value"] = True
        else:
            params["value"] = data.draw(st.integers(-100, 100), label="int value")
    out = dispatch.bind(OPS[name], (x,), params)
    # JAX pads 1 + the source positions with zeros; 0 marks a padding element.
    iota = np.arange(1, a.size + 1, dtype=np.int32).reshape(a.shape)
    pos = np.asarray(jitted(ref(name), ("config",))(iota, config=config))
    fill = np.asarray(params.get("value", 0)).astype(a.dtype)
    expected = np.where(pos == 0, fill, np.append(fill, a.reshape(-1))[pos])
    assert_matches(out, expected, what=f"pad {params}")


@pto.custom_vjp
def _log1pexp(x):
    return pto.log(1.0 + pto.exp(x))


_log1pexp.defvjp(lambda x: (_log1pexp(x), x), lambda x, g: (g * pto.sigmoid(x),))
_log1pexp_ref = functools.partial(ref("custom_vjp_call"), fn=_log1pexp.name)


@case("custom_vjp_call", dtypes=FLOATS, group="elementwise")
def _custom_vjp_call(data: Draw, dtype: pto.DType, name: str) -> None:
    # Bound directly: eagerly a custom_vjp function just runs; traced, it is this equation.
    a = values(data, dtype, data.draw(shapes()), -5.0, 5.0, specials=SPECIALS)
    x = as_input(data, a, allow_numpy=False)
    out = dispatch.bind(OPS[name], (x,), {"fn": _log1pexp.name})
    assert_matches(out, jax_elementwise(_log1pexp_ref, a), what=name)


@case("optimization_barrier", dtypes=DTYPES, group="elementwise")
def _optimization_barrier(data: Draw, dtype: pto.DType, name: str) -> None:
    a = values(data, dtype, data.draw(shapes()), -100.0, 100.0, specials=SPECIALS)
    (x,) = operands(data, [a])
    out = pto.lax.optimization_barrier(x)
    assert_matches(out, jax_elementwise(ref(name), a), what=name)


@case("checkpoint_name", dtypes=DTYPES, group="elementwise")
def _checkpoint_name(data: Draw, dtype: pto.DType, name: str) -> None:
    a = values(data, dtype, data.draw(shapes()), -100.0, 100.0, specials=SPECIALS)
    (x,) = operands(data, [a])
    out = pto.checkpoint_name(x, "h")
    assert_matches(out, jax_elementwise(ref(name), a, name="h"), what=name)


@case("debug_print", dtypes=DTYPES, group="elementwise")
def _debug_print(data: Draw, dtype: pto.DType, name: str) -> None:
    # Bound directly (pto.debug.print prints at once eagerly): the text, and JAX's the same
    a = values(data, dtype, data.draw(shapes()), -5.0, 5.0)
    b = values(data, pto.int32, data.draw(shapes()), -9, 9)
    params = {"fmt": "a={} b={b}", "keys": ("b",), "id": 0}
    for run in (
        lambda: dispatch.bind(
            OPS[name], (as_input(data, a, False), as_input(data, b, False)), params
        ),
        lambda: (
            OPS[name].jax_impl(jnp.asarray(a), jnp.asarray(b), **params),
            jax.effects_barrier(),
        ),
    ):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            run()
        assert buf.getvalue() == f"a={np.asarray(a)} b={np.asarray(b)}\n", name


# ---------------------------------------------------------------------------------------------
# Ops whose JAX reference runs on the real shapes (one compiled kernel per shape)


@case("mean", "var", "std", dtypes=DTYPES, group="heavy")
def _moments(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    a = values(data, dtype, shape, -10.0, 10.0, ints=(-100, 100), specials=(np.nan, np.inf))
    (x,) = operands(data, [a])
    axis = _axes(data, len(shape))
    keepdims = data.draw(st.booleans(), label="keepdims")
    n = math.prod(shape[i] for i in _norm_axes(axis, len(shape)))
    # var and std: ddof too (NaN where it leaves no degree of freedom), and squares to sum
    more = {} if name == "mean" else {"ddof": data.draw(st.sampled_from([0, 0, 1, 2]))}
    k = n if name == "mean" else 2 * n + 2
    if isinstance(x, pto.Tensor) and data.draw(st.booleans(), label="method"):
        out = getattr(x, name)(axis, keepdims, *more.values())
    else:
        out = getattr(pto, name)(x, axis=axis, keepdims=keepdims, **more)
    expected = jitted(ref(name), ("axis", "keepdims", *more))(
        a, axis=axis, keepdims=keepdims, **more
    )
    assert_matches(out, expected, k, what=f"{name} axis={axis} {more}")


def _matmul_shapes(data: Draw) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    m, k, n = (data.draw(st.integers(0, 4), label=d) for d in "mkn")
    ba, bb = data.draw(broadcast_shapes(2), label="batch")
    if len(ba) > 2 or len(bb) > 2:
        ba, bb = ba[-2:], bb[-2:]
    left = data.draw(st.sampled_from(["vector", "matrix", "matrix"]))
    right = data.draw(st.sampled_from(["vector", "matrix", "matrix"]))
    sa = (k,) if left == "vector" else (*ba, m, k)
    sb = (k,) if right == "vector" else (*bb, k, n)
    return sa, sb, k


@case("kernel_call", dtypes=FLOATS, group="heavy")
def _kernel_call(data: Draw, dtype: pto.DType, name: str) -> None:
    m = data.draw(st.sampled_from([16, 48]), label="rows")
    x = values(data, dtype, (m, 64), -2.0, 2.0)
    g = values(data, dtype, (64,), -2.0, 2.0)
    w = values(data, dtype, (64, 32), -1.0, 1.0)
    tile = dict(bm=16, bn=32, bk=16)
    out = rms_norm_matmul(x, g, w, **tile)
    want = jitted(functools.partial(ref(name), kernel=rms_norm_matmul.name, **tile))(x, g, w)
    assert_matches(out, want, 128, what=f"rms_norm_matmul kernel on {dtype.name}[{m},64]")


@case("matmul", dtypes=NUMERIC, group="heavy")
def _matmul(data: Draw, dtype: pto.DType, name: str) -> None:
    sa, sb, k = _matmul_shapes(data)
    # int8 products wrap in both (JAX in int8, pypto accumulating in int32 then wrapping).
    a = values(data, dtype, sa, -1.0, 1.0, ints=(-128, 127))
    b = values(data, dtype, sb, -1.0, 1.0, ints=(-128, 127))
    x, y = operands(data, [a, b])
    use_op = data.draw(st.booleans(), label="@")
    tensor = isinstance(x, pto.Tensor) or isinstance(y, pto.Tensor)
    out = x @ y if use_op and tensor else pto.matmul(x, y)
    assert_matches(out, jitted(ref(name))(a, b), k, what=f"matmul {sa} @ {sb}")


def _jax_rows(
    fn: Callable[..., Any],
    a: np.ndarray,
    axis: int,
    pad: Any,
    arrays: dict[str, np.ndarray] | None = None,
    **params: Any,
) -> np.ndarray:
    """The JAX reference ``fn`` (acting along its last axis) of ``a`` along ``axis``, via a
    2-d [rows, n] form: rows padded to a bucket (with zeros, cut afterwards), and, unless
    ``pad`` is None, n too, with ``pad`` (-inf for softmax: exp(-inf - max) adds an exact 0).
    ``arrays`` are further keyword operands (weight, bias) and ``params`` static ones."""
    moved = np.moveaxis(a, axis, -1)
    rows, n = math.prod(moved.shape[:-1]), moved.shape[-1]
    buf = np.full(
        (_bucket(rows), n if pad is None else MAX_SIDE), 0 if pad is None else pad, a.dtype
    )
    buf[:rows, :n] = moved.reshape(rows, n)
    r = np.asarray(jitted(fn, tuple(params))(buf, **(arrays or {}), **params))
    return np.moveaxis(r[:rows, :n].reshape(moved.shape), -1, axis)


@case("softmax", "log_softmax", dtypes=NUMERIC, group="heavy")
def _softmax(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1), label="shape")
    # Large logits overflow exp unless shifted by the max (float16: exp(12) > 65504).
    r = data.draw(st.sampled_from([10.0, 10.0, 300.0]), label="range")
    a = values(data, dtype, shape, -r, r, ints=(-10, 10), specials=(-np.inf,))
    (x,) = operands(data, [a])
    if dtype.is_floating and data.draw(st.booleans(), label="where or axes"):
        # jax.nn's where (masked elements give 0 or -inf; a row of nothing too) and axes
        axes = _axes(data, len(shape))
        mask = _mask(data, shape)
        out = getattr(pto, name)(x, axes, where=mask)
        expected = ref(name)(a, axes, where=mask)
        n = math.prod(shape[i] for i in _norm_axes(axes, len(shape)))
        assert_matches(out, expected, n, what=f"{name} axis={axes} where={mask}")
        return
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    out = (
        getattr(pto, name)(x, axis)
        if data.draw(st.booleans())
        else getattr(pto, name)(x, axis=axis)
    )
    # jax.nn.softmax subtracts the max before converting integers to float: the int8 padding
    # must not wrap (values lie in [-10, 10]), and exp(-110) is 0 in float32 too.
    pad = -np.inf if dtype.is_floating else -100
    expected = _jax_rows(ref(name), a, axis, pad)
    assert_matches(out, expected, shape[axis], what=f"{name} axis={axis}")


@case("layer_norm", "rms_norm", dtypes=NUMERIC, group="heavy")
def _norm(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1, min_side=1), label="shape")
    a = values(data, dtype, shape, -5.0, 5.0, ints=(-5, 5))
    n = shape[-1]
    params: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for p in ("weight", "bias") if name == "layer_norm" else ("weight",):
        if data.draw(st.booleans(), label=p):
            arrays[p] = values(data, dtype, (n,), -2.0, 2.0, ints=(-2, 2))
    if data.draw(st.booleans(), label="eps"):
        params["eps"] = data.draw(st.sampled_from([1e-3, 0.1]))
    x, *rest = operands(data, [a, *arrays.values()])
    out = getattr(pto, name)(x, **dict(zip(arrays, rest, strict=True)), **params)
    # eps is passed traced (a weak float, as the Python float would be): fewer compiles
    expected = _jax_rows(ref(name), a, -1, None, {**arrays, **params})
    if name == "layer_norm":
        # A row of equal elements has x - mean = 0 up to the mean's rounding (XLA multiplies
        # by 1/n), which rsqrt(eps) then magnifies: those rows agree within that, not ulps.
        flat = a.astype(np.float32)
        same = np.all(flat == flat[..., :1], axis=-1)
        if same.any():
            got = np.array(out.numpy(), np.float32)
            w = (
                float(np.abs(arrays["weight"].astype(np.float32)).max())
                if arrays.get("weight") is not None
                else 1.0
            )
            eps = params.get("eps", 1e-5)
            ulp = float(np.finfo(np.float32).eps) * max(1.0, float(np.abs(flat).max()))
            atol = 4 * n * ulp / math.sqrt(eps) * w + tolerance(dtype, n)[1]
            np.testing.assert_allclose(got[same], np.asarray(expected, np.float32)[same], atol=atol)
            expected = np.array(expected)
            expected[same] = got[same].astype(expected.dtype)
    assert_matches(out, expected, n, what=f"{name} with {sorted(arrays)} {params}")


@case("scaled_dot_product_attention", dtypes=NUMERIC, group="heavy")
def _sdpa(data: Draw, dtype: pto.DType, name: str) -> None:
    batch = tuple(data.draw(st.lists(st.integers(1, 2), max_size=2), label="batch"))
    lq, lk, d, dv = (data.draw(st.integers(1, 4), label=s) for s in ("lq", "lk", "d", "dv"))
    q = values(data, dtype, (*batch, lq, d), -2.0, 2.0, ints=(-2, 2))
    k = values(data, dtype, (*batch, lk, d), -2.0, 2.0, ints=(-2, 2))
    v = values(data, dtype, (*batch, lk, dv), -2.0, 2.0, ints=(-2, 2))
    causal = data.draw(st.booleans(), label="causal")
    scale = data.draw(st.sampled_from([None, None, 0.3, 1.0]), label="scale")
    mask = None
    if data.draw(st.booleans(), label="mask"):
        # a shape that broadcasts *to* the logits' [..., Lq, Lk]: leading dims dropped, some 1
        full = (*batch, lq, lk)
        ms = tuple(1 if data.draw(st.booleans()) else s for s in full)
        ms = ms[data.draw(st.integers(0, len(ms)), label="mask dims dropped") :]
        mask = values(data, BOOL, ms)
    args = operands(data, [q, k, v] + ([] if mask is None else [mask]))
    out = pto.scaled_dot_product_attention(*args, causal=causal, scale=scale)
    expected = np.array(
        jitted(ref(name), ("causal", "scale"))(q, k, v, mask, causal=causal, scale=scale)
    )
    # A query that sees no key gets softmax over all -inf: NaN, as the reference gives op by
    # op. Jitted, XLA on CPU returns arbitrary values for such rows (for both JAX and jnp
    # references), so those rows are expected NaN here rather than taken from the kernel.
    visible = np.ones((*batch, lq, lk), bool)
    if causal:
        visible &= np.tril(visible)
    if mask is not None:
        visible &= np.broadcast_to(mask, visible.shape)
    expected[~visible.any(-1)] = np.nan
    what = f"sdpa causal={causal} scale={scale} mask={None if mask is None else mask.shape}"
    assert_matches(out, expected, d + lk, what=what)


@case("dot_product_attention", dtypes=FLOATS, group="library")
def _dot_product_attention(data: Draw, dtype: pto.DType, name: str) -> None:
    """jax.nn's layout, grouped heads, bias, every mask, sequence lengths and the residual
    against ``jax.nn.dot_product_attention`` itself (its float16 and bfloat16 logits stay in
    float32 where pypto's are rounded once: the tolerance counts the head dim and keys)."""
    b = data.draw(st.sampled_from([None, 1, 2]), label="batch")  # None: 3-d operands
    t, s, h = (data.draw(st.integers(1, 5), label=x) for x in ("T", "S", "H"))
    kh, g = data.draw(st.integers(1, 2), label="K"), data.draw(st.integers(1, 3), label="G")
    n = kh * g
    lead = () if b is None else (b,)
    q = values(data, dtype, (*lead, t, n, h), -2.0, 2.0)
    k = values(data, dtype, (*lead, s, kh, h), -2.0, 2.0)
    v = values(data, dtype, (*lead, s, kh, h), -2.0, 2.0)
    bb = 1 if b is None else b
    kw: dict[str, Any] = {}
    bias = mask = None
    if data.draw(st.booleans(), label="bias"):
        bshape = tuple(1 if data.draw(st.booleans()) else x for x in (bb, n, t, s))
        bias = values(data, dtype, bshape, -1.0, 1.0)
    if data.draw(st.booleans(), label="mask"):
        mshape = tuple(1 if data.draw(st.booleans()) else x for x in (bb, n, t, s))
        mask = values(data, BOOL, mshape)
    kw["is_causal"] = data.draw(st.booleans(), label="causal")
    kw["scale"] = data.draw(st.sampled_from([None, 0.3]), label="scale")
    if data.draw(st.booleans(), label="window"):
        kw["local_window_size"] = data.draw(
            st.sampled_from([0, 1, (2, 0), (0, 1)]), label="local_window_size"
        )
    if b is not None and data.draw(st.booleans(), label="lengths"):
        lengths = st.lists(st.integers(0, max(t, s)), min_size=b, max_size=b)
        kw["query_seq_lengths"] = np.array(data.draw(lengths), np.int32)
        kw["key_value_seq_lengths"] = np.array(data.draw(lengths), np.int32)
    kw["return_residual"] = data.draw(st.booleans(), label="residual")
    got = pto.dot_product_attention(*operands(data, [q, k, v]), bias, mask, **kw)
    want = ref(name)(q, k, v, bias, mask, **kw)
    what = f"dot_product_attention {q.shape} {k.shape} bias={bias is not None} {kw}"
    if kw["return_residual"]:
        assert_matches(got[0], want[0], h + s, what=what)
        assert_matches(got[1], want[1], h + s, what=what + " residual")
    else:
        assert_matches(got, want, h + s, what=what)


_CONV_LAYOUTS = {  # dimension_numbers per number of spatial axes (None: NC…/OI…/NC…)
    1: [None, ("NWC", "WIO", "NWC"), ("NCW", "WIO", "NWC")],
    2: [
        None,
        ("NHWC", "HWIO", "NHWC"),
        ("NCHW", "IOHW", "NHWC"),
        ((0, 3, 2, 1), (3, 2, 0, 1), (0, 1, 3, 2)),
    ],
}


@case("conv_general_dilated", dtypes=NUMERIC, group="library")
def _conv(data: Draw, dtype: pto.DType, name: str) -> None:
    """Every option of jax.lax.conv_general_dilated but batch groups, against it."""
    ns = data.draw(st.integers(1, 2), label="spatial axes")
    groups = data.draw(st.integers(1, 2), label="groups")
    n = data.draw(st.integers(1, 2), label="N")
    cg, og = (
        data.draw(st.integers(1, 3), label="C/groups"),
        data.draw(st.integers(1, 2), label="O/groups"),
    )
    space = [data.draw(st.integers(1, 7), label="size") for _ in range(ns)]
    kernel = [data.draw(st.integers(1, 3), label="kernel") for _ in range(ns)]
    small = (-3.0, 3.0)
    canon_x = values(data, dtype, (n, cg * groups, *space), *small, ints=(-3, 3))
    canon_w = values(data, dtype, (og * groups, cg, *kernel), *small, ints=(-3, 3))
    layout = data.draw(st.sampled_from(_CONV_LAYOUTS[ns]), label="layout")
    jlayout = layout
    if layout is not None and not isinstance(layout[0], str):  # the axes themselves
        jlayout, layout = (
            jax.lax.ConvDimensionNumbers(*layout),
            pto.lax.ConvDimensionNumbers(*layout),
        )
    dn = jax.lax.conv_dimension_numbers(canon_x.shape, canon_w.shape, jlayout)
    # the operands in the layout's own axis order
    x = np.transpose(canon_x, np.argsort(dn.lhs_spec))
    w = np.transpose(canon_w, np.argsort(dn.rhs_spec))
    strides = tuple(data.draw(st.integers(1, 3), label="stride") for _ in range(ns))
    kw: dict[str, Any] = {"dimension_numbers": layout, "feature_group_count": groups}
    if data.draw(st.booleans(), label="rhs dilation"):
        kw["rhs_dilation"] = tuple(data.draw(st.integers(1, 2)) for _ in range(ns))
    if data.draw(st.booleans(), label="lhs dilation"):
        kw["lhs_dilation"] = tuple(data.draw(st.integers(1, 2)) for _ in range(ns))
    pads = st.tuples(st.integers(-1, 3), st.integers(-1, 3))
    modes = st.sampled_from(["VALID", "SAME", "SAME_LOWER"])
    padding: Any = (
        tuple(data.draw(pads, label="pads") for _ in range(ns))
        if "lhs_dilation" in kw or data.draw(st.booleans(), label="explicit")
        else data.draw(modes, label="padding")
    )
    if dtype.is_floating and data.draw(st.booleans(), label="preferred"):
        kw["preferred_element_type"] = pto.float32
    jkw = {k: (v.np if isinstance(v, pto.DType) else v) for k, v in kw.items()}
    jkw["dimension_numbers"] = jlayout
    try:
        want = np.asarray(ref(name)(x, w, strides, padding, **jkw))
    except (ValueError, TypeError):  # a negative output size: JAX refuses it
        return
    out = pto.conv_general_dilated(*operands(data, [x, w]), strides, padding, **kw)
    assert_matches(
        out, want, cg * math.prod(kernel), what=f"conv {x.shape} {w.shape} {strides} {padding} {kw}"
    )


_WINDOW_FNS = {"add": jax.lax.add, "max": jax.lax.max, "min": jax.lax.min, "mul": jax.lax.mul}


@case("reduce_window", dtypes=NUMERIC, group="library")
def _reduce_window(data: Draw, dtype: pto.DType, name: str) -> None:
    """Pooling windows with strides, padding and both dilations; the computation given as
    jax.lax's function, pypto's or a lambda; the initial value the identity or not."""
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), label="shape")
    a = values(data, dtype, shape, -2.0, 2.0, ints=(-3, 3))
    (x,) = operands(data, [a])
    kind = data.draw(st.sampled_from(sorted(_WINDOW_FNS)), label="computation")
    window = tuple(data.draw(st.integers(1, 3), label="window") for _ in shape)
    strides = tuple(data.draw(st.integers(1, 2), label="stride") for _ in shape)
    kw: dict[str, Any] = {}
    if data.draw(st.booleans(), label="base dilation"):
        kw["base_dilation"] = tuple(data.draw(st.integers(1, 2)) for _ in shape)
    if data.draw(st.booleans(), label="window dilation"):
        kw["window_dilation"] = tuple(data.draw(st.integers(1, 2)) for _ in shape)
    padding: Any = data.draw(
        st.sampled_from(["VALID", "SAME", "SAME_LOWER", "pairs"]), label="padding"
    )
    if padding == "pairs":
        padding = tuple(
            (data.draw(st.integers(0, 2)), data.draw(st.integers(-1, 2))) for _ in shape
        )
    identity = {
        "add": 0,
        "mul": 1,
        "max": float(np.finfo(np.float32).min) if dtype.is_floating else -3,
        "min": float(np.finfo(np.float32).max) if dtype.is_floating else 3,
    }[kind]
    if dtype in (pto.float16, pto.bfloat16):
        identity = {"max": -60000.0, "min": 60000.0}.get(kind, identity)
    init = identity if data.draw(st.booleans(), label="identity") else 1
    how = data.draw(st.sampled_from(["jax", "pypto", "lambda"]), label="given as")
    pto_fns = {"add": pto.add, "max": pto.maximum, "min": pto.minimum, "mul": pto.multiply}
    fn: Any = {"jax": _WINDOW_FNS[kind], "pypto": pto_fns[kind]}.get(how)
    if fn is None:  # a function the op does not know: folded as given
        fn = lambda u, v, f=pto_fns[kind]: f(u, v)  # noqa: E731
    jinit = np.asarray(init).astype(a.dtype)
    try:
        want = jax.lax.reduce_window(a, jinit, _WINDOW_FNS[kind], window, strides, padding, **kw)
    except (ValueError, TypeError):  # a negative output size: JAX refuses it
        return
    out = pto.lax.reduce_window(x, init, fn, window, strides, padding, **kw)
    assert_matches(
        out, want, math.prod(window), what=f"reduce_window {kind} {window} {padding} {kw}"
    )


def test_conv_wrappers_match_jax() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 3, 6, 5)).astype(np.float32)
    w = rng.normal(size=(4, 3, 3, 2)).astype(np.float32)
    assert_matches(pto.lax.conv(x, w, (2, 1), "SAME"), jax.lax.conv(x, w, (2, 1), "SAME"), 18)
    got = pto.lax.conv_with_general_padding(x, w, (1, 2), ((2, 1), (0, 1)), (2, 1), (1, 2))
    want = jax.lax.conv_with_general_padding(x, w, (1, 2), ((2, 1), (0, 1)), (2, 1), (1, 2))
    assert_matches(got, want, 18)
    xt = rng.normal(size=(2, 5, 4, 3)).astype(np.float32)
    for kernel, kw in [
        ((3, 3, 3, 2), {"padding": "SAME"}),
        ((2, 3, 3, 2), {"padding": "VALID", "rhs_dilation": (2, 1)}),
        ((3, 3, 3, 2), {"padding": ((1, 2), (0, 1))}),
        ((3, 2, 3, 2), {"padding": ((1, 1), (0, 1)), "use_consistent_padding": True}),
        ((3, 3, 2, 3), {"padding": "SAME", "transpose_kernel": True}),
    ]:
        wt = rng.normal(size=kernel).astype(np.float32)
        got = pto.lax.conv_transpose(xt, wt, (2, 3), **kw)
        want = jax.lax.conv_transpose(xt, wt, (2, 3), **kw)
        assert_matches(got, want, 27, what=f"conv_transpose {kernel} {kw}")
    dn = pto.lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    assert tuple(dn) == tuple(
        jax.lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    )


def test_reduce_window_refuses_what_jax_refuses() -> None:
    x = np.ones((4, 5), np.float32)
    with pytest.raises(pto.ShapeError, match=r"window_dimensions \(2,\) is not 2 positive ints"):
        pto.lax.reduce_window(x, 0.0, pto.add, (2,))
    with pytest.raises(pto.ShapeError, match="init_value must be a scalar"):
        pto.lax.reduce_window(x, np.zeros(2, np.float32), pto.add, (2, 2))
    with pytest.raises(pto.ShapeError, match="computation must be a binary function"):
        pto.lax.reduce_window(x, 0.0, "max", (2, 2))


def test_conv_refuses_what_jax_refuses() -> None:
    x, w = np.ones((1, 4, 5, 5), np.float32), np.ones((2, 3, 3, 3), np.float32)
    with pytest.raises(pto.ShapeError, match=r"4 input features in 1 group\(s\) for a kernel of 3"):
        pto.lax.conv(x, w, (1, 1), "SAME")
    with pytest.raises(pto.ShapeError, match=r"window_strides .* is not 2 positive ints"):
        pto.lax.conv(x, w[:, :1], (0, 1), "SAME")
    with pytest.raises(pto.ShapeError, match="padding 'FULL' is not"):
        pto.lax.conv(x, np.ones((2, 4, 3, 3), np.float32), (1, 1), "FULL")
    with pytest.raises(pto.ShapeError, match="string padding with lhs_dilation"):
        pto.lax.conv_general_dilated(x, np.ones((2, 4, 3, 3), np.float32), (1, 1), "SAME", (2, 2))
    with pytest.raises(pto.ShapeError, match="batch_group_count=2 is not supported"):
        pto.lax.conv_general_dilated(
            x, np.ones((2, 4, 1, 1), np.float32), (1, 1), "SAME", batch_group_count=2
        )
    with pytest.raises(
        pto.ShapeError, match="'NHWC' must have 4 distinct letters with 'O' and 'I'"
    ):
        pto.lax.conv_general_dilated(
            x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "NHWC", "NCHW")
        )
    with pytest.raises(pto.DTypeError, match="convolution of bools"):
        pto.lax.conv(x > 0, w > 0, (1, 1), "SAME")


def test_dot_product_attention_refuses_what_jax_refuses() -> None:
    q, kv = np.zeros((2, 4, 6, 8), np.float32), np.zeros((2, 4, 4, 8), np.float32)
    with pytest.raises(pto.ShapeError, match=r"do not fit \[B, T, N, H\].*N a multiple of K"):
        pto.dot_product_attention(q, kv, kv)
    with pytest.raises(pto.ShapeError, match="must be 3-d or 4-d"):
        pto.dot_product_attention(q[0, 0], kv[0, 0], kv[0, 0])
    with pytest.raises(pto.ShapeError, match="implementation='cudnn' is not available"):
        pto.dot_product_attention(q, q, q, implementation="cudnn")
    with pytest.raises(pto.ShapeError, match=r"mask of shape .* has 3 heads for 6"):
        pto.dot_product_attention(q, q, q, mask=np.ones((2, 3, 4, 4), bool))
    with pytest.raises(pto.ShapeError, match=r"query_seq_lengths must be integers of shape \(2,\)"):
        pto.dot_product_attention(q, q, q, query_seq_lengths=np.array([1, 2, 3], np.int32))
    with pytest.raises(pto.ShapeError, match="local_window_size must be an int or a pair"):
        pto.dot_product_attention(q, q, q, local_window_size=(1, 2, 3))


# ---------------------------------------------------------------------------------------------
# numpy's everyday helpers


@case("square", dtypes=DTYPES, group="elementwise")
@case("sign", dtypes=NUMERIC, group="elementwise")  # jnp.sign rejects bool
def _square_sign(data: Draw, dtype: pto.DType, name: str) -> None:
    # integers over their whole range: squares wrap as JAX's do; signed zeros and NaN stay
    a = values(data, dtype, data.draw(shapes()), ints=(-(2**31), 2**31 - 1), specials=SPECIALS)
    (x,) = operands(data, [a])
    assert_matches(getattr(pto, name)(x), jax_elementwise(ref(name), a), what=name)


@case("swapaxes", "moveaxis", "flip", "stack", dtypes=DTYPES, group="layout")
def _rearrange(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1), label="shape")
    a = values(data, dtype, shape, specials=SPECIALS)
    nd = len(shape)
    axis = st.integers(-nd, nd - 1)
    if name == "stack":
        n = data.draw(st.integers(1, 3), label="count")
        arrays = [a, *(values(data, dtype, shape) for _ in range(n - 1))]
        ax = data.draw(st.integers(-nd - 1, nd), label="axis")
        out = pto.stack(operands(data, arrays), ax)
        expected = jax_layout(lambda *us: jnp.stack(us, ax), *arrays)
        assert_matches(out, expected, what=f"stack {n} axis={ax}")
        return
    (x,) = operands(data, [a])
    params: tuple[Any, ...]
    if name == "swapaxes":
        params = (data.draw(axis), data.draw(axis))
    elif name == "moveaxis":
        k = data.draw(st.integers(1, nd), label="moved")
        src = data.draw(st.permutations(range(nd)), label="source")[:k]
        dst = data.draw(st.permutations(range(-nd, 0)), label="destination")[:k]
        params = (src[0], dst[0]) if k == 1 and data.draw(st.booleans()) else (src, dst)
    else:
        params = (data.draw(st.none() | axis | st.just((0, -1)), label="axis"),)
        if params[0] == (0, -1) and nd == 1:
            params = (0,)
    method = name == "swapaxes" and isinstance(x, pto.Tensor) and data.draw(st.booleans())
    out = x.swapaxes(*params) if method else getattr(pto, name)(x, *params)
    assert_matches(out, jax_layout(lambda u: ref(name)(u, *params), a), what=f"{name}{params}")


@case("tril", "triu", dtypes=DTYPES, group="heavy")
def _triangle(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=2), label="shape")
    a = values(data, dtype, shape, specials=SPECIALS)
    (x,) = operands(data, [a])
    k = data.draw(st.integers(-3, 3), label="k")
    out = getattr(pto, name)(x, k) if k or data.draw(st.booleans()) else getattr(pto, name)(x)
    assert_matches(out, jitted(ref(name), ("k",))(a, k=k), what=f"{name} k={k}")


@case("scan", dtypes=(pto.float32, pto.int32), group="heavy")
def _scan(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1), label="shape")
    op = data.draw(st.sampled_from(MONOIDS), label="op")
    rev = data.draw(st.booleans(), label="reverse")
    # an internal primitive (the running reductions' core): bound directly; integers wrap over
    # their range; products of factors up to 1.5 stay finite
    lo, hi = (-1.5, 1.5) if op == "mul" else (-10.0, 10.0)
    specials = (np.nan, np.inf, -np.inf)
    a = values(data, dtype, shape, lo, hi, ints=(-(2**31), 2**31 - 1), specials=specials)
    x = as_input(data, a, allow_numpy=False)
    out = dispatch.bind(OPS[name], (x,), {"op": op, "reverse": rev})
    expect = jitted(ref(name), ("op", "reverse"))(a, op=op, reverse=rev)
    assert_matches(out, expect, shape[-1], what=f"scan op={op} reverse={rev}")


@case("scan_affine", dtypes=(pto.float32,), group="heavy")
def _scan_affine(data: Draw, dtype: pto.DType, name: str) -> None:
    # an internal primitive (the running reductions' gradients): h[i] = a[i]·h[i-1] + b[i]
    shape = data.draw(shapes(min_dims=1), label="shape")
    a = values(data, dtype, shape, -1.5, 1.5)
    b = values(data, dtype, shape)
    xa = as_input(data, a, allow_numpy=False)
    xb = as_input(data, b, allow_numpy=False)
    rev = data.draw(st.booleans(), label="reverse")
    out = dispatch.bind(OPS[name], (xa, xb), {"reverse": rev})
    expect = jitted(ref(name), ("reverse",))(a, b, reverse=rev)
    assert_matches(out, expect, shape[-1], what=f"scan_affine reverse={rev}")


@case("cumsum", "cumprod", "cummax", "cummin", dtypes=DTYPES, group="heavy")
def _running(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    # integers over their whole range (sums and products wrap, as in JAX); inf and NaN spread;
    # float factors up to 1.5 keep the products finite
    lo, hi = (-1.5, 1.5) if name == "cumprod" else (-10.0, 10.0)
    specials = (np.nan, np.inf, -np.inf)
    a = values(data, dtype, shape, lo, hi, ints=(-(2**31), 2**31 - 1), specials=specials)
    (x,) = operands(data, [a])
    nd = len(shape)
    axis = data.draw(st.none() | st.integers(-nd, nd - 1) if nd else st.none(), label="axis")
    reverse = data.draw(st.booleans(), label="reverse")
    method = name in ("cumsum", "cumprod") and isinstance(x, pto.Tensor) and not reverse
    # numpy's dtype: the operand converted first (a bool dtype: whether each is nonzero)
    to = None
    if name in ("cumsum", "cumprod") and data.draw(st.booleans(), label="with dtype"):
        to = data.draw(st.sampled_from([dtype, pto.float32, pto.int32, BOOL]), label="to")
    kw = {} if to is None else {"dtype": to}
    if axis is None and not reverse and data.draw(st.booleans()):
        out = getattr(pto, name)(x, **kw)
    elif method and data.draw(st.booleans(), label="method"):
        out = getattr(x, name)(axis, **kw)
    else:
        out = getattr(pto, name)(x, axis=axis, reverse=reverse, **kw)
    n = a.size if axis is None else shape[axis]
    jkw = {} if to is None else {"dtype": to.np}
    run = jitted(ref(name), ("axis", "reverse", *jkw))
    low = to or dtype
    if low in (pto.float16, pto.bfloat16):
        # pypto sums and multiplies them in float32, rounded once; JAX rounds every step, so
        # that a sum that cancels would differ by more than the result's own ulps
        wide = a.astype(low.np).astype(np.float32)
        expect = np.asarray(run(wide, axis=axis, reverse=reverse)).astype(low.np)
    else:
        expect = run(a, axis=axis, reverse=reverse, **jkw)
    assert_matches(out, expect, n, what=f"{name} axis={axis} reverse={reverse}")


_SORT_SPECIALS = (np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0)


@case("sort", "argsort", dtypes=DTYPES, group="heavy")
def _sort(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    # small integers make ties (stability); signed zeros and NaNs of both signs (JAX counts
    # them equal); integers over the whole range (two radix passes on the NPU)
    ints = data.draw(st.sampled_from([(-3, 3), (-(2**31), 2**31 - 1)]), label="ints")
    a = values(data, dtype, shape, -3.0, 3.0, ints=ints, specials=_SORT_SPECIALS)
    (x,) = operands(data, [a])
    nd = len(shape)
    axis = data.draw(st.none() | st.integers(-nd, nd - 1) if nd else st.none(), label="axis")
    desc = data.draw(st.booleans(), label="descending")
    if isinstance(x, pto.Tensor) and data.draw(st.booleans(), label="method"):
        out = getattr(x, name)(axis, descending=desc)
    else:
        out = getattr(pto, name)(x, axis=axis, descending=desc)
    want = jitted(ref(name), ("axis", "descending"))(a, axis=axis, descending=desc)
    assert_matches(out, want, what=f"{name} axis={axis} descending={desc}")


@case("top_k", dtypes=DTYPES, group="heavy")
def _top_k(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1), label="shape")
    ints = data.draw(st.sampled_from([(-3, 3), (-(2**31), 2**31 - 1)]), label="ints")
    a = values(data, dtype, shape, -3.0, 3.0, ints=ints, specials=_SORT_SPECIALS)
    (x,) = operands(data, [a])
    k = data.draw(st.integers(0, shape[-1]), label="k")
    vals, idx = pto.top_k(x, k)
    want_v, want_i = jitted(ref(name), ("k",))(a, k=k)
    assert_matches(idx, want_i, what=f"top_k k={k} indices")
    assert_matches(vals, want_v, what=f"top_k k={k} values")


@case(
    "quantile",
    "median",
    "percentile",
    "nanquantile",
    "nanmedian",
    "nanpercentile",
    dtypes=DTYPES,
    group="heavy",
)
def _quantile(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1), label="shape")
    if 0 in shape:
        shape = tuple(max(s, 1) for s in shape)
    nans = (np.nan,) * (3 if name.startswith("nan") else 1)  # rows of NaN alone, sometimes
    a = values(data, dtype, shape, -3.0, 3.0, ints=(-50, 50), specials=(*nans, np.inf, -0.0))
    x = as_input(data, a)
    nd = len(shape)
    axis = data.draw(
        st.none() | st.integers(-nd, nd - 1) | st.just(tuple(range(0, nd, 2))), label="axis"
    )
    keep = data.draw(st.booleans(), label="keepdims")
    if name.endswith("median"):
        out = getattr(pto, name)(x, axis, keepdims=keep)
        want = jitted(ref(name), ("axis", "keepdims"))(a, axis=axis, keepdims=keep)
    else:
        # percentiles compare linear interpolation only: JAX's compiled q / 100 may round one
        # ulp low, which moves a discrete method's result at an exact position
        methods = (
            ["linear"]
            if name.endswith("percentile")
            else ["linear", "lower", "higher", "midpoint", "nearest"]
        )
        method = data.draw(st.sampled_from(methods), label="method")
        scale = 100.0 if name.endswith("percentile") else 1.0
        # no subnormal q: XLA on CPU flushes them to 0, numpy (pypto's positions) does not
        qs = st.floats(0, 1, allow_subnormal=False, width=32)
        q = data.draw(qs | st.lists(qs, min_size=1, max_size=3), label="q")
        q = np.asarray(q, np.float32) * np.float32(scale)
        out = getattr(pto, name)(x, q, axis, method, keep)
        want = jitted(ref(name), ("axis", "method", "keepdims"))(
            a, q, axis=axis, method=method, keepdims=keep
        )
    # integers reach ±50: a linear interpolation between two of them cancels to a small result
    # whose rounding (XLA may fuse the multiply-add) is an ulp of 50, not of the result, so the
    # absolute floor scales with the data (k = 50² makes ATOL's √k factor 50)
    k = 2500 if dtype in INTS and not name.endswith("median") else 1
    assert_matches(out, want, k, what=f"{name} axis={axis} keepdims={keep}")


@case("lexsort", dtypes=DTYPES, group="heavy")
def _lexsort(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1), label="shape")
    nk = data.draw(st.integers(1, 3), label="keys")
    keys = [
        values(data, dtype, shape, -2.0, 2.0, ints=(-2, 2), specials=_SORT_SPECIALS)
        for _ in range(nk)
    ]
    nd = len(shape)
    axis = data.draw(st.integers(-nd, nd - 1), label="axis")
    ops = [as_input(data, k) for k in keys]
    out = pto.lexsort(ops if data.draw(st.booleans(), label="list") else tuple(ops), axis)
    want = jitted(ref(name), ("axis",))(tuple(keys), axis=axis)
    assert_matches(out, want, what=f"lexsort axis={axis}")


@case("searchsorted", dtypes=DTYPES, group="heavy")
def _searchsorted(data: Draw, dtype: pto.DType, name: str) -> None:
    n = data.draw(st.integers(0, 12), label="n")
    ints = data.draw(st.sampled_from([(-3, 3), (-(2**31), 2**31 - 1)]), label="ints")
    a = np.sort(values(data, dtype, (n,), -3.0, 3.0, ints=ints, specials=_SORT_SPECIALS))
    v = values(
        data,
        dtype,
        data.draw(shapes(), label="v shape"),
        -3.0,
        3.0,
        ints=ints,
        specials=_SORT_SPECIALS,
    )
    side = data.draw(st.sampled_from(["left", "right"]), label="side")
    sorter = None
    if data.draw(st.booleans(), label="sorter") and n:
        sorter = rng(data).permutation(n).astype(np.int32)
        a = a[np.argsort(sorter, kind="stable")]  # a[sorter] is sorted
    x, y = operands(data, [a, v])
    out = pto.searchsorted(x, y, side, sorter)
    want = jitted(ref(name), ("side",))(a, v, side=side, sorter=sorter)
    assert_matches(out, want, what=f"searchsorted side={side}")


@case("argsort_last", dtypes=(pto.float32, pto.float16, pto.bfloat16, pto.int32), group="heavy")
def _argsort_last(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1), label="shape")
    ints = data.draw(st.sampled_from([(-3, 3), (-(2**31), 2**31 - 1)]), label="ints")
    a = values(data, dtype, shape, -3.0, 3.0, ints=ints, specials=_SORT_SPECIALS)
    x = as_input(data, a, allow_numpy=False)
    order = data.draw(st.sampled_from(["ascending", "descending", "total"]), label="order")
    out = dispatch.bind(OPS[name], (x,), {"order": order})  # internal: sort's core
    assert_matches(out, jitted(ref(name), ("order",))(a, order=order), what=f"order={order}")


@case("gather_last", dtypes=DTYPES, group="heavy")
def _gather_last(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1), label="shape")
    a = values(data, dtype, shape, specials=(np.nan, np.inf))
    perm = data.draw(st.booleans(), label="perm")
    g = rng(data)
    if perm:  # sort's values: a permutation of each row
        idx = g.permuted(np.broadcast_to(np.arange(shape[-1]), shape), axis=-1)
    else:  # take_along_axis's core: any indices in range, repeated, another width
        k = data.draw(st.integers(0, 5), label="k")
        idx = g.integers(0, max(shape[-1], 1), (*shape[:-1], k if shape[-1] else 0))
    idx = idx.astype(np.int32)
    x, p = as_input(data, a, allow_numpy=False), pto.tensor(idx)
    out = dispatch.bind(OPS[name], (x, p), {"perm": perm})  # internal
    assert_matches(out, jitted(ref(name), ("perm",))(a, idx, perm=perm), what=f"perm={perm}")
    if idx.size:  # an index outside the row is refused eagerly
        bad = idx.copy()
        bad.flat[0] = shape[-1]
        with pytest.raises(pto.BoundsError, match="out of range for the taken axis"):
            dispatch.bind(OPS[name], (x, pto.tensor(bad)), {"perm": perm})


@case("take_along_axis", dtypes=DTYPES, group="heavy")
def _take_along_axis(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1), label="shape")
    a = values(data, dtype, shape, specials=(np.nan, np.inf))
    nd = len(shape)
    axis = data.draw(st.none() | st.integers(-nd, nd - 1), label="axis")
    n = a.size if axis is None else shape[axis]
    g = rng(data)
    if axis is None:
        ishape: tuple[int, ...] = (data.draw(st.integers(0, 6), label="k") if n else 0,)
    else:  # the other axes: equal, or 1 on either side (broadcast)
        ishape = tuple(
            (data.draw(st.integers(0, 5), label="k") if n else 0)
            if d == axis % nd
            else data.draw(st.sampled_from([s, 1]), label="b")
            for d, s in enumerate(shape)
        )
        if data.draw(st.booleans(), label="broadcast the tensor") and all(ishape):
            a = a[tuple(slice(0, 1) if d != axis % nd else slice(None) for d in range(nd))]
    idx = g.integers(-n, max(n, 1), ishape).astype(
        data.draw(st.sampled_from([np.int32, np.int8]), label="index dtype")
        if n < 128
        else np.int32
    )
    x = as_input(data, a, allow_numpy=False)
    out = pto.take_along_axis(x, pto.tensor(idx), axis=axis)
    want = jitted(ref(name), ("axis",))(a, idx, axis=axis)
    assert_matches(out, want, what=f"take_along_axis axis={axis}")


@case("prod", dtypes=DTYPES, group="heavy")
def _prod(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    # values near 1 keep long float products finite; integers over a wide range wrap in int32
    a = values(data, dtype, shape, 0.5, 1.5, ints=(-300, 300), specials=(np.nan, np.inf, 0.0))
    if dtype.is_floating and data.draw(st.booleans(), label="negate some"):
        a = np.where(np.arange(a.size).reshape(a.shape) % 3 == 0, -a, a).astype(a.dtype)
    (x,) = operands(data, [a])
    axis = _axes(data, len(shape))
    keepdims = data.draw(st.booleans(), label="keepdims")
    if isinstance(x, pto.Tensor) and data.draw(st.booleans(), label="method"):
        out = x.prod(axis, keepdims)
    else:
        out = pto.prod(x, axis=axis, keepdims=keepdims)
    n = math.prod(shape[i] for i in _norm_axes(axis, len(shape)))
    expected = jitted(ref(name), ("axis", "keepdims"))(a, axis=axis, keepdims=keepdims)
    assert_matches(out, expected, n + 1, what=f"prod axis={axis}")


@case("logsumexp", dtypes=DTYPES, group="heavy")
def _logsumexp(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    r = data.draw(st.sampled_from([10.0, 300.0]), label="range")  # 300: exp overflows unshifted
    a = values(data, dtype, shape, -r, r, ints=(-10, 10), specials=(-np.inf, np.inf, np.nan))
    (x,) = operands(data, [a])
    axis = _axes(data, len(shape))
    keepdims = data.draw(st.booleans(), label="keepdims")
    n = math.prod(shape[i] for i in _norm_axes(axis, len(shape)))
    if data.draw(st.booleans(), label="keywords"):  # JAX's b, where and return_sign
        kw: dict[str, Any] = {"return_sign": data.draw(st.booleans(), label="return_sign")}
        if data.draw(st.booleans(), label="b"):
            kw["b"] = values(data, pto.float32, shape[len(shape) // 2 :], -2.0, 2.0)
        if (m := _mask(data, shape)) is not None:
            kw["where"] = m
        out = pto.logsumexp(x, axis, keepdims, **kw)
        want = ref(name)(a, axis, keepdims, **kw)
        for o, w in zip(*((out, want) if kw["return_sign"] else ((out,), (want,))), strict=True):
            assert_matches(o, w, n + 2, what=f"logsumexp axis={axis} {sorted(kw)}")
        return
    out = (
        pto.logsumexp(x, axis, keepdims)
        if data.draw(st.booleans())
        else pto.logsumexp(x, axis=axis, keepdims=keepdims)
    )
    expected = jitted(ref(name), ("axis", "keepdims"))(a, axis=axis, keepdims=keepdims)
    assert_matches(out, expected, n + 1, what=f"logsumexp axis={axis}")


@case("one_hot", dtypes=(pto.int32, pto.int8), group="heavy")  # integer indices only
def _one_hot(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(max_dims=2), label="shape")
    n = data.draw(st.integers(0, 5), label="num_classes")
    a = values(data, dtype, shape, ints=(-2, 6))  # below, inside and above [0, n)
    (x,) = operands(data, [a])
    target = data.draw(st.sampled_from([None, pto.float32, pto.int32, pto.bfloat16]))
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)), label="axis")
    out = pto.one_hot(x, n, dtype=target, axis=axis)
    jd = None if target is None else target.np
    expected = jitted(ref(name), ("num_classes", "dtype", "axis"))(
        a, num_classes=n, dtype=jd, axis=axis
    )
    assert_matches(out, expected, what=f"one_hot {n} axis={axis} dtype={target}")


def _einsum_jax(spec: str) -> Callable[..., Any]:
    return jitted(functools.partial(jnp.einsum, spec))


@st.composite
def einsum_specs(draw: Any) -> tuple[str, list[tuple[int, ...]], int]:
    """A random ``jnp.einsum`` problem: (subscripts, operand shapes, the most terms one output
    element sums). Labels repeat within an operand (diagonals), broadcast from size 1 between
    operands, and ``...`` stands for up to two broadcast axes; the output is implicit or a
    permutation of some labels."""
    size = {c: draw(st.sampled_from([0, 1, 2, 3, 4]), label=c) for c in "abcde"}
    ell = draw(st.lists(st.integers(1, 3), max_size=2), label="...")
    use_ell = bool(ell) and draw(st.booleans(), label="uses ...")
    words, shapes, seen = [], [], []
    for _ in range(draw(st.integers(1, 3), label="operands")):
        labels = draw(st.lists(st.sampled_from("abcde"), max_size=3), label="labels")
        shape = [1 if draw(st.integers(0, 4)) == 0 else size[c] for c in labels]
        for i, c in enumerate(labels):  # a repeated label is a diagonal: one size for both
            shape[i] = shape[labels.index(c)]
        word = "".join(labels)
        if use_ell and draw(st.booleans(), label="this operand's ..."):
            k = draw(st.integers(0, len(ell)))
            at = draw(st.integers(0, len(labels)))
            part = [n if draw(st.booleans()) else 1 for n in ell[len(ell) - k :]]
            word = word[:at] + "..." + word[at:]
            shape = shape[:at] + part + shape[at:]
        words.append(word)
        shapes.append(tuple(shape))
        seen += labels
    spec = ",".join(words)
    if draw(st.booleans(), label="explicit"):
        out = draw(st.permutations(sorted(set(seen))), label="output")
        out = out[: draw(st.integers(0, len(out)))]
        dots = "..." if "..." in spec and draw(st.booleans()) else ""
        spec += "->" + dots + "".join(out)
        summed = set(seen) - set(out)
    else:
        summed = {c for c in seen if seen.count(c) > 1}
    return spec, shapes, math.prod(size[c] for c in summed) * len(words) + 1


@case("einsum", dtypes=DTYPES, group="heavy")
def _einsum(data: Draw, dtype: pto.DType, name: str) -> None:
    spec, shapes, k = data.draw(einsum_specs(), label="spec")
    arrays = [values(data, dtype, s, -2.0, 2.0, ints=(-128, 127)) for s in shapes]
    out = pto.einsum(spec, *operands(data, arrays))
    assert_matches(out, _einsum_jax(spec)(*arrays), k, what=f"einsum {spec!r} {shapes}")


@case("log1p", "expm1", "softplus", "elu", "leaky_relu", dtypes=DTYPES, group="elementwise")
def _near_zero(data: Draw, dtype: pto.DType, name: str) -> None:
    # magnitudes from 1e-30 (where log(1 + x) and exp(x) - 1 lose every digit) to 100 (where
    # exp overflows float16), with the specials and -1 (log1p's pole)
    scale = data.draw(st.sampled_from([1e-30, 1e-8, 1e-3, 1.0, 20.0]), label="scale")
    specials = (*SPECIALS, -1.0)
    a = values(data, dtype, data.draw(shapes()), -5 * scale, 5 * scale, specials=specials)
    (x,) = operands(data, [a])
    params: dict[str, float] = {}
    if name in ("elu", "leaky_relu") and data.draw(st.booleans(), label="param"):
        params = {
            "alpha" if name == "elu" else "negative_slope": data.draw(st.sampled_from([0.2, 2.0]))
        }
    out = getattr(pto, name)(x, **params)
    assert_matches(out, jax_elementwise(ref(name), a, **params), 2, what=f"{name} {params}")


@case("isnan", "isinf", "isfinite", "nan_to_num", dtypes=DTYPES, group="elementwise")
def _specials(data: Draw, dtype: pto.DType, name: str) -> None:
    a = values(data, dtype, data.draw(shapes()), ints=(-(2**31), 2**31 - 1), specials=SPECIALS)
    (x,) = operands(data, [a])
    params: dict[str, Any] = {}
    if name == "nan_to_num":
        params = {
            "nan": data.draw(st.sampled_from([0.0, -1.5, 7])),
            "posinf": data.draw(st.sampled_from([None, 100.0])),
            "neginf": data.draw(st.sampled_from([None, -3])),
        }
    out = getattr(pto, name)(x, **params)
    assert_matches(out, jax_elementwise(ref(name), a, **params), what=f"{name} {params}")


@case("tensordot", "dot", "inner", "outer", dtypes=NUMERIC, group="heavy")
def _products(data: Draw, dtype: pto.DType, name: str) -> None:
    sa = data.draw(shapes(max_dims=3), label="a")
    sb = list(data.draw(shapes(max_dims=3), label="b"))
    params: dict[str, Any] = {}
    # the paired axes take a's sizes
    if name == "tensordot":
        n = data.draw(st.integers(0, min(len(sa), len(sb))), label="axes")
        if n and data.draw(st.booleans(), label="as lists"):
            ax = data.draw(st.permutations(range(len(sa))), label="a axes")[:n]
            bx = data.draw(st.permutations(range(len(sb))), label="b axes")[:n]
            params = {"axes": (ax, [j - len(sb) if j % 2 else j for j in bx])}
        else:
            ax, bx = list(range(len(sa) - n, len(sa))), list(range(n))
            params = {"axes": n}
        for i, j in zip(ax, bx, strict=True):
            sb[j] = sa[i]
    elif name == "dot" and sa and sb:
        sb[max(len(sb) - 2, 0)] = sa[-1]
    elif name == "inner" and sa and sb:
        sb[-1] = sa[-1]
    a = values(data, dtype, sa, -2.0, 2.0, ints=(-128, 127))
    b = values(data, dtype, tuple(sb), -2.0, 2.0, ints=(-128, 127))
    x, y = operands(data, [a, b])
    out = getattr(pto, name)(x, y, **params)
    k = max([1, *sa, *sb]) ** 2
    want = jitted(functools.partial(ref(name), **params))(a, b)
    assert_matches(out, want, k, what=f"{name} {sa} {tuple(sb)} {params}")


@case("diagonal", "trace", dtypes=DTYPES, group="heavy")
def _diagonal(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=2), label="shape")
    a = values(data, dtype, shape, ints=(-100, 100), specials=SPECIALS)
    (x,) = operands(data, [a])
    nd = len(shape)
    a1, a2 = data.draw(st.permutations(range(-nd, 0)), label="axes")[:2]
    k = data.draw(st.integers(-4, 4), label="offset")
    out = getattr(pto, name)(x, k, a1, a2)
    want = jitted(ref(name), ("offset", "axis1", "axis2"))(a, offset=k, axis1=a1, axis2=a2)
    assert_matches(out, want, max(shape), what=f"{name} offset={k} axes=({a1}, {a2})")


# ---------------------------------------------------------------------------------------------
# numpy's library (pypto/ops/numpy_lib.py)

# op -> (lo, hi) of float inputs (integers: the same range), extra specials, tolerance factor
_MATH1: dict[str, tuple[float, float, tuple[float, ...], int]] = {
    "log2": (0.0, 100.0, (-1.0,), 2),
    "log10": (0.0, 100.0, (-1.0,), 2),
    "exp2": (-15.0, 15.0, (), 2),  # 2^15 is finite in float16
    "sinh": (-11.0, 11.0, (), 4),  # sinh(11) and cosh(11) are finite in float16
    "cosh": (-11.0, 11.0, (), 4),
    "tan": (-1.5, 1.5, (), 2),
    "arctan": (-50.0, 50.0, (1.0, -1.0), 4),
    "fabs": (-100.0, 100.0, (), 1),
    "cbrt": (-1000.0, 1000.0, (27.0, -8.0), 2),
    "sinc": (-5.0, 5.0, (1.0, 2.0), 4),
    "arcsin": (-1.2, 1.2, (1.0, -1.0), 4),
    "arccos": (-1.2, 1.2, (1.0, -1.0), 4),
    "arcsinh": (-1e4, 1e4, (), 4),
    "arccosh": (0.5, 1e4, (1.0,), 4),
    "arctanh": (-1.2, 1.2, (1.0, -1.0), 4),
    "trunc": (-100.0, 100.0, (), 1),
    "deg2rad": (-400.0, 400.0, (), 1),
    "rad2deg": (-400.0, 400.0, (), 1),
    "rint": (-100.0, 100.0, (0.5, 1.5, -2.5), 1),
    "i0": (-20.0, 20.0, (), 4),
}


@case(*_MATH1, dtypes=DTYPES, group="library")
def _math1(data: Draw, dtype: pto.DType, name: str) -> None:
    lo, hi, extra, k = _MATH1[name]
    # near 0 as well, where sinh's cancellation would show
    scale = data.draw(st.sampled_from([1e-6, 1e-2, 1.0]), label="scale")
    lo, hi = (lo, hi) if scale == 1.0 or lo >= 0 else (lo * scale, hi * scale)
    a = values(data, dtype, data.draw(shapes()), lo, hi, specials=SPECIALS + extra)
    (x,) = operands(data, [a])
    out = getattr(pto, name)(x)
    fn = ref(name)
    if dtype in (pto.float16, pto.bfloat16):
        # pypto computes these in float32 and rounds once; JAX's float16 formulas round their
        # constants first (jnp.exp2 on float16 is 0.3% off at 11.25), so the reference is
        # JAX's float32 result rounded
        fn = _rounded(ref(name))
    want = jax_elementwise(fn, a)
    if name == "i0":  # JAX's i0(±inf) is inf·0 = NaN; I₀ is inf there
        want = np.where(np.isinf(a.astype(np.float32)), np.inf, want).astype(want.dtype)
    assert_matches(out, want, k, what=name)


@case("float_power", dtypes=DTYPES, group="library")
def _float_power(data: Draw, dtype: pto.DType, name: str) -> None:
    sx, sy = data.draw(broadcast_shapes(2), label="shapes")
    a = values(data, dtype, sx, 0.0, 8.0, ints=(-4, 4), specials=SPECIALS)
    b = values(data, dtype, sy, -3.0, 3.0, ints=(-3, 3), specials=(0.0, 0.5, -1.0))
    x, y = operands(data, [a, b])
    if not isinstance(x, pto.Tensor) and not isinstance(y, pto.Tensor):
        x = pto.tensor(a)
    assert_matches(pto.float_power(x, y), jitted(ref(name))(a, b), 4, what=f"{sx} {sy}")


@functools.cache  # one function per reference, so that jitted() compiles it once
def _rounded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` computed on float32 operands, its result rounded to the first operand's dtype."""

    def wide(*args: Any, **params: Any) -> Any:
        d = jnp.result_type(args[0])
        out = fn(*(jnp.asarray(u).astype(jnp.float32) for u in args), **params)
        return jax.tree_util.tree_map(lambda r: r.astype(d), out)

    return wide


@case(
    "arctan2",
    "logaddexp",
    "logaddexp2",
    "hypot",
    "fmax",
    "fmin",
    "heaviside",
    dtypes=DTYPES,
    group="library",
)
def _math2(data: Draw, dtype: pto.DType, name: str) -> None:
    sx, sy = data.draw(broadcast_shapes(2), label="shapes")
    big = 1e30 if dtype is pto.float32 and name == "hypot" else 20.0  # squares would overflow
    # ties and zeros for these two; 1e30 magnitudes only as continuous values
    discrete = True if name in ("logaddexp", "heaviside") else (False if big > 20 else None)
    a = values(data, dtype, sx, -big, big, ints=(-20, 20), specials=SPECIALS, discrete=discrete)
    b = values(data, dtype, sy, -big, big, ints=(-20, 20), specials=SPECIALS, discrete=discrete)
    x, y = operands(data, [a, b])
    if not isinstance(x, pto.Tensor) and not isinstance(y, pto.Tensor):
        x = pto.tensor(a)
    out = getattr(pto, name)(x, y)
    fn = ref(name)
    if dtype in (pto.float16, pto.bfloat16) and name in (
        "logaddexp",
        "logaddexp2",
        "hypot",
        "arctan2",
    ):
        fn = _rounded(ref(name))  # computed in float32 and rounded once, as above
    assert_matches(out, jax_elementwise(fn, a, b), 4 if name == "arctan2" else 2, what=name)


def _bits(a: Any) -> np.ndarray:
    """The bit patterns of a float array (NaNs made one pattern), to compare exactly."""
    a = np.asarray(a)
    b = a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize]).copy()
    b[np.isnan(a.astype(np.float32))] = 0
    return b


@case("nextafter", "spacing", dtypes=DTYPES, group="library")
def _float_steps(data: Draw, dtype: pto.DType, name: str) -> None:
    ss = data.draw(broadcast_shapes(2 if name == "nextafter" else 1), label="shapes")
    d = dtype if dtype.is_floating else pto.float32
    fi = ml_dtypes.finfo(d.np)
    edges = (1.0, -2.0, 0.5, float(fi.tiny), -float(fi.tiny), float(fi.max), -float(fi.max))
    arrs = [values(data, dtype, s, -1e4, 1e4, ints=(-3, 3), specials=SPECIALS + edges) for s in ss]
    if name == "nextafter" and data.draw(st.booleans(), label="towards"):
        arrs[1] = arrs[0].copy()  # equal operands: x2 itself (the sign of a zero too)
    xs = operands(data, arrs)
    if not any(isinstance(t, pto.Tensor) for t in xs):
        xs[0] = pto.tensor(arrs[0])
    out, want = getattr(pto, name)(*xs), jitted(ref(name))(*arrs)
    assert out.dtype.name == str(want.dtype) and out.shape == want.shape, name
    # exactly: one unit in the last place is within any tolerance
    np.testing.assert_array_equal(_bits(out.numpy()), _bits(want), err_msg=f"{name} {ss}")


def test_nextafter_steps_from_subnormals_as_ieee_does() -> None:
    """numpy's answers; JAX on the CPU reads subnormal inputs as 0 in float32 and bfloat16
    (its nextafter(4e-45, -4e-45) is -4e-45)."""
    tiny = np.finfo(np.float32).smallest_subnormal
    x = np.array([tiny, 3 * tiny, -tiny, tiny, 0.0, -0.0, np.finfo(np.float32).tiny], np.float32)
    y = np.array([-tiny, -1.0, 1.0, 0.0, 1.0, -1.0, 0.0], np.float32)
    np.testing.assert_array_equal(
        _bits(pto.nextafter(pto.tensor(x), pto.tensor(y)).numpy()), _bits(np.nextafter(x, y))
    )
    f = pto.jit(pto.spacing, backend="interpret")
    np.testing.assert_array_equal(_bits(f(pto.tensor(x[1:3])).numpy()), _bits(np.spacing(x[1:3])))


@case(
    "isposinf",
    "isneginf",
    "positive",
    "real",
    "imag",
    "conj",
    "iscomplex",
    "isreal",
    "angle",
    dtypes=DTYPES,
    group="library",
)
def _real_parts(data: Draw, dtype: pto.DType, name: str) -> None:
    """The parts of a complex number, for real dtypes, and the signed infinity tests."""
    a = values(data, dtype, data.draw(shapes(), label="shape"), specials=SPECIALS)
    (x,) = operands(data, [a])
    out = getattr(pto, name)(x)
    assert_matches(out, jax_elementwise(ref(name), a), what=name)
    if name == "angle":
        # (through 1-d buffers: JAX's angle of a 0-d float16 is float32, of any other rank not)
        want = jax_elementwise(ref(name), a, deg=True)
        assert_matches(pto.angle(x, deg=True), want, what="angle deg")


def test_constants_types_and_machine_limits_are_jaxs() -> None:
    for name in ("pi", "e", "inf", "euler_gamma", "newaxis", "s_", "index_exp", "floating"):
        assert getattr(pto, name) is getattr(jnp, name) or getattr(pto, name) == getattr(jnp, name)
    assert np.isnan(pto.nan) and pto.bool is pto.bool_ and isinstance(pto.ones(2), pto.ndarray)
    assert pto.issubdtype(pto.bfloat16, pto.floating) and pto.issubdtype(pto.int8, pto.integer)
    assert pto.ones(3)[:, pto.newaxis].shape == (3, 1)
    for d in FLOATS:
        for x in (d, d.name, pto.ones(2, d), np.ones(2, d.np)):
            got, want = pto.finfo(x), jnp.finfo(d.np)
            assert (got.eps, got.max, got.tiny, got.bits) == (
                want.eps,
                want.max,
                want.tiny,
                want.bits,
            )
    for d in INTS:
        assert (pto.iinfo(d).min, pto.iinfo(d.name).max) == (
            jnp.iinfo(d.np).min,
            jnp.iinfo(d.np).max,
        )
    with pytest.raises(pto.DTypeError, match="finfo needs a float dtype, got int32"):
        pto.finfo(pto.int32)
    with pytest.raises(pto.DTypeError, match="iinfo needs an integer dtype"):
        pto.iinfo("float16")


def test_grids_and_slice_concatenation_match_jax() -> None:
    """``mgrid``, ``ogrid``, ``r_`` and ``c_``: shapes, dtypes and values as JAX's, also on
    tensors traced by jit."""

    def same(got: Any, want: Any, what: str) -> None:
        assert got.shape == want.shape and got.dtype.name == name_of(want), (what, got, want)
        np.testing.assert_array_equal(
            np.asarray(got.numpy(), np.float32), np.asarray(want, np.float32), what
        )

    for key in (
        (slice(0, 2), slice(0, 3)),
        (slice(0, 1, 5j),),
        (slice(-1, 1, 0.5), slice(3)),
        slice(4),
    ):
        same(pto.mgrid[key], jnp.mgrid[key], f"mgrid {key}")
        for g, w in zip(
            pto.ogrid[key] if isinstance(key, tuple) else [pto.ogrid[key]],
            jnp.ogrid[key] if isinstance(key, tuple) else [jnp.ogrid[key]],
            strict=True,
        ):
            same(g, w, f"ogrid {key}")
    h = np.array([1.0, 2.0], np.float16)
    keys = [
        (slice(0, 3), h),
        (h, 5.0),
        (1, 2, 3),
        (slice(0, 1, 4j),),
        ("0,2", [1, 2, 3], [4, 5, 6]),
        ("-1,2,0", [1, 2, 3], [4, 5, 6]),
        ("1,3,0", np.ones((2, 2)), np.ones((2, 2))),
        ("r", 1, 2),
        ("c", 1, 2),
        ("0,2,1", [1, 2, 3], [4, 5, 6]),
        ("0,3,-1", [1, 2], [4, 5]),
        (slice(1, 4, 2), 0.5),
        (True, False),
    ]
    for key in keys:
        ours = tuple(pto.tensor(k) if isinstance(k, np.ndarray) else k for k in key)
        same(pto.r_[ours], jnp.r_[key], f"r_ {key}")
    for key in (
        (np.arange(3), np.arange(3, 6)),
        (slice(1, 3), slice(4, 6)),
        (np.ones((2, 2)), slice(1, 3)),
    ):
        same(pto.c_[key], jnp.c_[key], f"c_ {key}")
    f = pto.jit(lambda a, b: pto.r_["0,2", a, b] * 2, backend="interpret")
    same(
        f(pto.arange(3.0), pto.ones(3)),
        jnp.r_["0,2", np.arange(3.0, dtype=np.float32), np.ones(3, np.float32)] * 2,
        "jit r_",
    )
    with pytest.raises(pto.ShapeError, match="could not understand the directive 'x'"):
        pto.r_["x", 1]
    with pytest.raises(pto.ShapeError, match="a string directive must come first"):
        pto.r_[1, "0"]
    with pytest.raises(pto.ShapeError, match=r"mgrid\[...\] takes slices"):
        pto.mgrid[3]


def test_array_helpers_match_jax() -> None:
    x = pto.ones((2, 3), pto.int8)
    for f in ("ndim", "shape", "size", "isscalar", "iscomplexobj", "isrealobj"):
        for v in (x, pto.tensor(2.0), 3, 2.5, np.ones((4, 1))):
            jv = jnp.asarray(np.asarray(v)) if isinstance(v, pto.Tensor) else v
            assert getattr(pto, f)(v) == getattr(jnp, f)(jv), (f, v)
    assert pto.size(x, -1) == 3 and pto.conjugate is pto.conj
    assert pto.broadcast_shapes((2, 1), (3,), ()) == jnp.broadcast_shapes((2, 1), (3,), ())
    with pytest.raises(pto.ShapeError, match=r"shapes \(2,\), \(3,\) do not broadcast"):
        pto.broadcast_shapes((2,), (3,))
    for d1 in DTYPES:
        for d2 in DTYPES:
            assert pto.can_cast(d1, d2) == jnp.can_cast(d1.np, d2.np), (d1, d2)
        for kind in (np.floating, np.integer, np.number, np.inexact, np.signedinteger, np.bool_):
            assert pto.issubdtype(d1, kind) == jnp.issubdtype(d1.np, kind), (d1, kind)
        for k in ("bool", "integral", "real floating", "numeric", "complex floating"):
            assert pto.isdtype(d1, k) == jnp.isdtype(d1.np, k), (d1, k)
    for n, k in ((3, 0), (3, 1), (4, -1)):
        a = np.ones((n, n + 1))
        for f in ("tril_indices_from", "triu_indices_from"):
            for g, w in zip(getattr(pto, f)(a, k), getattr(jnp, f)(a, k), strict=True):
                assert_matches(g, w, what=f)
    for g, w in zip(
        pto.diag_indices_from(np.ones((3, 3, 3))),
        jnp.diag_indices_from(np.ones((3, 3, 3))),
        strict=True,
    ):
        assert_matches(g, w, what="diag_indices_from")
    assert_matches(pto.array([[1, 2]], pto.int8), jnp.array([[1, 2]], jnp.int8))
    assert pto.asarray(x) is x and pto.asarray(x, pto.float32).dtype is pto.float32
    assert_matches(pto.copy(x), jnp.copy(np.asarray(x)))
    assert_matches(pto.empty_like(x, shape=(4,)), jnp.empty_like(np.asarray(x), shape=(4,)))
    # (JAX refuses fromiter: an iterator is not pure; numpy is the reference)
    assert_matches(pto.fromiter(range(5), pto.float16, 3), np.fromiter(range(5), np.float16, 3))
    got = pto.fromfunction(lambda i, j: i * 3 + j, (2, 3))
    assert_matches(got, jnp.fromfunction(lambda i, j: i * 3 + j, (2, 3)))
    for m in (0, 1, 2, 7):
        for f in ("bartlett", "blackman", "hamming", "hanning"):
            assert_matches(getattr(pto, f)(m), getattr(jnp, f)(m), 4, what=f"{f}({m})")
        for beta in (0.0, 5.0):
            assert_matches(pto.kaiser(m, beta), jnp.kaiser(m, beta), 8, what=f"kaiser({m})")
            staged = pto.jit(lambda b, m=m: pto.kaiser(m, b), backend="interpret")
            assert_matches(staged(pto.tensor(beta)), jnp.kaiser(m, beta), 8, what="traced beta")


@case("signbit", "copysign", dtypes=DTYPES, group="library")
def _signs(data: Draw, dtype: pto.DType, name: str) -> None:
    neg_nan = float(np.copysign(np.nan, -1.0))
    specials = (*SPECIALS, neg_nan)
    if name == "signbit":
        a = values(data, dtype, data.draw(shapes()), -5.0, 5.0, ints=(-3, 3), specials=specials)
        (x,) = operands(data, [a])
        assert_matches(pto.signbit(x), jitted(ref(name))(a), what="signbit")
        return
    sx, sy = data.draw(broadcast_shapes(2), label="shapes")
    a = values(data, dtype, sx, -5.0, 5.0, ints=(-3, 3), specials=specials)
    b = values(data, dtype, sy, -5.0, 5.0, ints=(-3, 3), specials=specials)
    x, y = operands(data, [a, b])
    if not isinstance(x, pto.Tensor) and not isinstance(y, pto.Tensor):
        x = pto.tensor(a)
    out, want = pto.copysign(x, y), jitted(ref(name))(a, b)
    assert_matches(out, want, what="copysign")
    sign = np.signbit(np.asarray(out).astype(np.float32))  # and the sign bits, NaN's too
    np.testing.assert_array_equal(sign, np.signbit(np.asarray(want).astype(np.float32)))


@case("bitwise_count", dtypes=INTS, group="library")
def _bitwise_count(data: Draw, dtype: pto.DType, name: str) -> None:
    info = np.iinfo(dtype.np)  # the whole range: the extremes' |x| wrap
    a = values(data, dtype, data.draw(shapes()), ints=(info.min, info.max))
    (x,) = operands(data, [a])
    assert_matches(pto.bitwise_count(x), jitted(ref(name))(a), what=name)


@case("isclose", "allclose", dtypes=DTYPES, group="library")
def _isclose(data: Draw, dtype: pto.DType, name: str) -> None:
    sx, sy = data.draw(broadcast_shapes(2), label="shapes")
    a = values(data, dtype, sx, -3.0, 3.0, ints=(-3, 3), specials=SPECIALS)
    # b: a nudged by amounts around the tolerance, or independent values
    b = values(data, dtype, sy, -3.0, 3.0, ints=(-3, 3), specials=SPECIALS)
    if sx == sy and data.draw(st.booleans(), label="nudge"):
        nudge = data.draw(st.sampled_from([1e-7, 1e-5, 1e-3]), label="by")
        b = (a.astype(np.float64) * (1 + nudge)).astype(a.dtype) if dtype.is_floating else a
    params = {
        "rtol": data.draw(st.sampled_from([1e-5, 1e-3, 0.0]), label="rtol"),
        "atol": data.draw(st.sampled_from([1e-8, 1e-3, 0.0]), label="atol"),
        "equal_nan": data.draw(st.booleans(), label="equal_nan"),
    }
    x, y = operands(data, [a, b])
    if not isinstance(x, pto.Tensor) and not isinstance(y, pto.Tensor):
        x = pto.tensor(a)
    out = getattr(pto, name)(x, y, **params)
    expect = jitted(ref(name), tuple(params))(a, b, **params)
    assert_matches(out, expect, what=f"{name} {params}")


_NAN_REDUCTIONS = ("nansum", "nanprod", "nanmean", "nanmax", "nanmin", "count_nonzero", "ptp")


@case(*_NAN_REDUCTIONS, "nanvar", "nanstd", dtypes=DTYPES, group="library")
def _nan_reduce(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    lo, hi = (0.5, 1.5) if name == "nanprod" else (-10.0, 10.0)
    specials = (np.nan, np.nan, np.inf, 0.0) if name != "ptp" else (np.nan, 0.0)
    a = values(data, dtype, shape, lo, hi, ints=(-100, 100), specials=specials)
    if dtype is BOOL and name in ("nanmean", "nanvar", "nanstd", "ptp"):
        a = a.astype(np.int32)  # numpy and JAX refuse some bool forms; ints exercise the same
    (x,) = operands(data, [a])
    axis = _axes(data, len(shape))
    keepdims = data.draw(st.booleans(), label="keepdims")
    axes = _norm_axes(axis, len(shape))
    n = math.prod(shape[i] for i in axes)
    if name in ("nanmax", "nanmin", "ptp") and n == 0:
        with pytest.raises(pto.ShapeError):
            getattr(pto, name)(x, axis=axis, keepdims=keepdims)
        return
    more = {"ddof": data.draw(st.sampled_from([0, 1]))} if name in ("nanvar", "nanstd") else {}
    out = getattr(pto, name)(x, axis=axis, keepdims=keepdims, **more)
    expect = jitted(ref(name), ("axis", "keepdims", *more))(a, axis=axis, keepdims=keepdims, **more)
    assert_matches(out, expect, 2 * n + 2, what=f"{name} axis={axis} {more}")


@case("nanargmax", "nanargmin", dtypes=DTYPES, group="library")
def _nan_arg(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_side=1), label="shape")
    a = values(data, dtype, shape, ints=(-5, 5), specials=(np.nan, np.nan, np.inf), discrete=True)
    (x,) = operands(data, [a])
    axis = _axes(data, len(shape), allow_tuple=False)
    keepdims = data.draw(st.booleans(), label="keepdims")
    out = getattr(pto, name)(x, axis=axis, keepdims=keepdims)
    expect = jitted(ref(name), ("axis", "keepdims"))(a, axis=axis, keepdims=keepdims)
    assert_matches(out, expect, what=f"{name} axis={axis}")


@case("average", dtypes=DTYPES, group="library")
def _average(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_side=1), label="shape")
    a = values(data, dtype, shape, ints=(-10, 10), specials=(np.nan,))
    nd = len(shape)
    form = data.draw(st.sampled_from(["none", "full", "1d"] if nd else ["none", "full"]))
    axis: Any = _axes(data, nd) if form != "1d" else data.draw(st.integers(-nd, nd - 1))
    params: dict[str, Any] = {"axis": axis, "returned": data.draw(st.booleans())}
    w = None
    if form != "none":
        wshape = shape if form == "full" else (shape[axis],)
        w = values(data, pto.float32, wshape, 0.5, 2.0)
    x = as_input(data, a, allow_numpy=False)
    out = pto.average(x, weights=None if w is None else pto.tensor(w), **params)
    expect = jitted(ref(name), ("axis", "returned"))(a, weights=w, **params)
    n = math.prod(shape)
    outs, exps = (out, expect) if params["returned"] else ((out,), (expect,))
    for o, e in zip(outs, exps, strict=True):
        assert_matches(o, e, 2 * n + 2, what=f"average {form} {params}")


@case("nancumsum", "nancumprod", dtypes=DTYPES, group="library")
def _nan_running(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    lo, hi = (0.5, 1.5) if name == "nancumprod" else (-10.0, 10.0)
    a = values(data, dtype, shape, lo, hi, ints=(-50, 50), specials=(np.nan, np.nan, np.inf))
    (x,) = operands(data, [a])
    nd = len(shape)
    axis = data.draw(st.none() | st.integers(-nd, nd - 1) if nd else st.none(), label="axis")
    n = a.size if axis is None else shape[axis]
    out = getattr(pto, name)(x, axis=axis)
    assert_matches(out, jitted(ref(name), ("axis",))(a, axis=axis), n + 1, what=f"{name} {axis}")


@case("diff", dtypes=DTYPES, group="library")
def _diff(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1), label="shape")
    a = values(data, dtype, shape, ints=(-(2**31), 2**31 - 1), specials=SPECIALS)
    (x,) = operands(data, [a])
    nd = len(shape)
    params: dict[str, Any] = {
        "n": data.draw(st.integers(0, 3), label="n"),
        "axis": data.draw(st.integers(-nd, nd - 1), label="axis"),
    }
    if dtype is not BOOL and data.draw(st.booleans(), label="prepend"):
        params["prepend"] = 2
    out = pto.diff(x, **params)
    expect = jitted(ref(name), tuple(params))(a, **params)
    assert_matches(out, expect, 2 ** params["n"], what=f"diff {params}")


def _moved(name: str, data: Draw, x: Any, nd: int, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """The extra arguments of a rearrangement ``name`` for a tensor of ``shape``."""
    if name == "roll":
        k = data.draw(st.integers(-7, 7), label="shift")
        if nd and data.draw(st.booleans(), label="axis"):
            return (k, data.draw(st.integers(-nd, nd - 1)))
        if nd >= 2 and data.draw(st.booleans(), label="pairs"):
            return ((k, 1), (0, -1))
        return (k,)
    if name == "repeat":
        if nd and data.draw(st.booleans(), label="each"):
            axis = data.draw(st.integers(-nd, nd - 1))
            reps = data.draw(
                st.lists(st.integers(0, 3), min_size=shape[axis], max_size=shape[axis])
            )
            return (tuple(reps), axis)
        return (data.draw(st.integers(0, 3), label="r"), None)
    if name == "tile":
        return (tuple(data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))),)
    if name == "rot90":
        return (data.draw(st.integers(-5, 5)), tuple(data.draw(st.permutations(range(nd)))[:2]))
    return ()


_REARRANGE = ("roll", "repeat", "tile", "ravel", "flipud", "fliplr", "rot90")


@case(*_REARRANGE, dtypes=DTYPES, group="library")
def _rearrange(data: Draw, dtype: pto.DType, name: str) -> None:
    min_dims = {"flipud": 1, "fliplr": 2, "rot90": 2}.get(name, 0)
    shape = data.draw(shapes(min_dims=min_dims), label="shape")
    a = values(data, dtype, shape, specials=SPECIALS)
    (x,) = operands(data, [a])
    extra = _moved(name, data, x, len(shape), shape)
    out = getattr(pto, name)(x, *extra)
    want = jax_layout(lambda u: ref(name)(u, *extra), a)
    assert_matches(out, want, what=f"{name}{extra}")


_STACKS = (
    "hstack",
    "vstack",
    "dstack",
    "column_stack",
    "append",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "meshgrid",
)


@case(*_STACKS, dtypes=DTYPES, group="library")
def _stacks(data: Draw, dtype: pto.DType, name: str) -> None:
    count = data.draw(st.integers(1, 3), label="count")
    nd = data.draw(st.integers(1 if name == "meshgrid" else 0, 1 if name == "meshgrid" else 3))
    if name == "column_stack":
        nd = min(nd, 2)
    base = list(data.draw(shapes(min_dims=nd, max_dims=nd, min_side=1), label="shape"))
    shapes_ = []
    for _ in range(count):  # the stacking axis differs between them, the others agree
        s = list(base)
        if name == "meshgrid":
            s = [data.draw(st.integers(0, 4))]
        elif name == "hstack" and nd >= 1:
            s[0 if nd == 1 else 1] = data.draw(st.integers(0, 4))
        elif name == "column_stack" and nd == 2:  # 1-d ones are columns: one length
            s[1] = data.draw(st.integers(0, 4))
        elif name == "vstack" and nd >= 2:
            s[0] = data.draw(st.integers(0, 4))
        elif name == "dstack" and nd >= 3:
            s[2] = data.draw(st.integers(0, 4))
        shapes_.append(tuple(s))
    arrays = [values(data, dtype, s, specials=SPECIALS) for s in shapes_]
    xs = operands(data, arrays, allow_numpy=False)
    if name in ("hstack", "vstack", "dstack", "column_stack"):
        out, fn = getattr(pto, name)(xs), lambda *u: ref(name)(list(u))
    elif name == "append":
        axis = None if nd == 0 or data.draw(st.booleans()) else data.draw(st.integers(0, nd - 1))
        if axis is not None:
            arrays = [arrays[0], values(data, dtype, base, specials=SPECIALS)]
            xs = [xs[0], pto.tensor(arrays[1])]
        else:
            arrays, xs = (arrays * 2)[:2], (xs * 2)[:2]
        out, fn = pto.append(xs[0], xs[1], axis), lambda u, v: ref(name)(u, v, axis)
    elif name == "meshgrid":
        indexing = data.draw(st.sampled_from(["xy", "ij"]))
        out = pto.meshgrid(*xs, indexing=indexing)
        fn = lambda *u: ref(name)(*u, indexing=indexing)  # noqa: E731
    else:
        out, fn = getattr(pto, name)(*xs), ref(name)
    want = jax_layout(fn, *arrays)
    outs, wants = (out, want) if isinstance(want, list) else ([out], [want])
    assert isinstance(outs, list) and len(outs) == len(wants), name
    for o, w in zip(outs, wants, strict=True):
        assert_matches(o, w, what=f"{name} {shapes_}")


_ACTIVATIONS = (
    "erf",
    "erfc",
    "relu6",
    "hard_sigmoid",
    "hard_silu",
    "hard_tanh",
    "log_sigmoid",
    "selu",
    "celu",
    "soft_sign",
    "mish",
    "squareplus",
    "sparse_plus",
    "sparse_sigmoid",
    "log1mexp",
)


# jax.nn refuses bools in some of them (a negation); pypto takes them as float32 in all
@case(*_ACTIVATIONS, dtypes=NUMERIC, group="library")
def _activation(data: Draw, dtype: pto.DType, name: str) -> None:
    # magnitudes from tiny (erf's Taylor sum) to 30 (erfc underflows, log_sigmoid is linear)
    scale = data.draw(st.sampled_from([1e-6, 0.5, 3.0, 30.0]), label="scale")
    a = values(data, dtype, data.draw(shapes()), -scale, scale, specials=SPECIALS)
    (x,) = operands(data, [a])
    params: dict[str, Any] = {}
    if name == "celu":
        params = {"alpha": data.draw(st.sampled_from([0.5, 2.0]))}
    elif name == "squareplus":
        params = {"b": data.draw(st.sampled_from([4, 0.25]))}
    out = getattr(pto, name)(x, **params)
    fn = ref(name)
    if dtype in (pto.float16, pto.bfloat16) and name in ("erf", "erfc", "log1mexp"):
        # erf, erfc: computed in float32 and rounded once. log1mexp: JAX's float16 expm1
        # drops digits of subnormals (-expm1(-x) for x = 5·2⁻²⁴ is 4·2⁻²⁴), pypto's keeps them
        fn = _rounded(ref(name))
    if name == "squareplus" and not dtype.is_floating:
        # jax.nn.squareplus squares integers in their own dtype (30² wraps in int8 and its
        # square root is NaN); pypto promotes to float32 first, as the other activations
        fn = _in_float32(ref(name))
    assert_matches(out, jax_elementwise(fn, a, **params), 4, what=f"{name} {params}")


def _in_float32(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` of its first argument converted to float32."""

    def f(a: Any, *args: Any, **kw: Any) -> Any:
        return fn(jnp.asarray(a, jnp.float32), *args, **kw)

    return f


def _mask(data: Draw, shape: tuple[int, ...]) -> np.ndarray | None:
    """None, or a bool mask of ``shape`` or of a suffix of it (it broadcasts)."""
    if not data.draw(st.booleans(), label="where"):
        return None
    mshape = shape[data.draw(st.integers(0, len(shape)), label="mask dims") :]
    return data.draw(_hnp.arrays(np.bool_, mshape), label="mask")


# name -> the range of its float inputs (each operand's), and k of the tolerance
_SPECIAL: dict[str, tuple[tuple[tuple[float, float], ...], int]] = {
    # lgamma and digamma cancel near their zeros (1, 2 and ψ's 1.46): the absolute floor
    "lgamma": (((-30.0, 30.0),), 4),
    "digamma": (((-30.0, 30.0),), 16),
    "erf_inv": (((-1.0, 1.0),), 4),
    "ndtri": (((0.0, 1.0),), 4),
    "ndtr": (((-12.0, 12.0),), 4),
    "log_ndtr": (((-40.0, 12.0),), 4),
    "xlogy": (((-3.0, 3.0), (0.0, 5.0)), 1),
    "xlog1py": (((-3.0, 3.0), (-1.0, 5.0)), 1),
    "logit": (((-0.2, 1.2),), 1),
    "entr": (((-1.0, 5.0),), 1),
    "rel_entr": (((-1.0, 3.0), (-1.0, 3.0)), 1),
    "kl_div": (((-1.0, 3.0), (-1.0, 3.0)), 1),
    "i0e": (((-50.0, 50.0),), 1),
    "i1e": (((-50.0, 50.0),), 1),
}


@case(*_SPECIAL, dtypes=NUMERIC, group="library")
def _special(data: Draw, dtype: pto.DType, name: str) -> None:
    ranges, k = _SPECIAL[name]
    shape = data.draw(shapes())
    arrays = [
        values(
            data, dtype, shape[data.draw(st.integers(0, len(shape))) :], lo, hi, specials=SPECIALS
        )
        for lo, hi in ranges
    ]
    if name == "ndtri" and dtype is pto.float32 and data.draw(st.booleans(), label="tail"):
        # the far tail, where the polynomials stop and the Newton steps take over
        exps = rng(data).uniform(0, 37, arrays[0].shape)
        arrays = [np.asarray(10.0**-exps, np.float32)]
    xs = operands(data, arrays)
    out = getattr(pto, name)(*xs)
    fn = ref(name)
    if name == "log_ndtr" and dtype is pto.float32:
        # JAX's float32 log_ndtr takes log(ndtr(x)) up to x = 5, which keeps few digits of
        # the tiny result above 3 (-9.1e-7 at 4.77 comes out -8.9e-7); pypto's log1p(-ndtr(-x))
        # keeps them: compared with JAX's float64 result instead
        want = _x64(fn, *arrays).astype(np.float32)
    else:
        want = jax_elementwise(fn, *arrays)
    assert_matches(out, want, k, what=name)


@case("zeta", "polygamma", dtypes=NUMERIC, group="library")
def _zeta(data: Draw, dtype: pto.DType, name: str) -> None:
    # q > 0, where JAX's series is right (below 0 see test_scipy.py); s from the pole at 1 up,
    # with the specials in q
    shape = data.draw(shapes())
    q = values(data, dtype, shape, 0.0, 20.0, ints=(0, 20), specials=(0.0, np.inf, np.nan))
    if name == "zeta":
        sv = values(data, dtype, shape[data.draw(st.integers(0, len(shape))) :], 1.0, 12.0)
        args = [sv, q]
    else:
        args = [np.asarray(rng(data).integers(0, 5, shape[len(shape) // 2 :]), np.int32), q]
    out = getattr(pto, name)(*operands(data, args))
    fn = ref(name)
    if dtype in (pto.float16, pto.bfloat16):
        fn = _rounded_last(fn)  # pypto computes in float32 and rounds once; JAX's float16 zeta
        # sums in float16
    want = jax_elementwise(fn, *args)
    # at q = 0 and q = inf JAX's values are inconsistent (NaN for some orders, inf for
    # others): scipy's float64 ones there, the limits (±inf at 0, 0 at inf)
    edge = np.broadcast_to((np.asarray(q) == 0) | np.isposinf(np.asarray(q)), want.shape)
    if name == "polygamma":  # digamma (n = 0) at 0 is NaN in JAX and pypto, -inf in scipy
        edge = edge & np.broadcast_to(np.asarray(args[0]) > 0, want.shape)
    if edge.any():
        exact = getattr(scipy.special, name)(*(np.asarray(a, np.float64) for a in args))
        want = np.where(edge, np.asarray(exact).astype(want.dtype), want)
    assert_matches(out, want, 16, what=name)


def _rounded_last(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its last operand in float32, the result rounded to that operand's dtype."""

    def wide(*args: Any) -> Any:
        d = jnp.result_type(args[-1])
        return fn(*args[:-1], jnp.asarray(args[-1]).astype(jnp.float32)).astype(d)

    return wide


def _x64(fn: Callable[..., Any], *arrays: np.ndarray) -> np.ndarray:
    """``fn`` evaluated by JAX in float64."""
    with jax.enable_x64():
        return np.asarray(fn(*(a.astype(np.float64) for a in arrays)))


@case("logmeanexp", dtypes=NUMERIC, group="library")
def _logmeanexp(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(), label="shape")
    a = values(data, dtype, shape, -20.0, 20.0, ints=(-20, 20), specials=(-np.inf, np.nan))
    (x,) = operands(data, [a])
    axis = _axes(data, len(shape))
    keepdims = data.draw(st.booleans(), label="keepdims")
    m = _mask(data, shape)
    out = pto.logmeanexp(x, axis, m, keepdims)
    n = math.prod(shape[i] for i in _norm_axes(axis, len(shape)))
    want = ref(name)(a, axis, m, keepdims)
    assert_matches(out, want, n + 2, what=f"logmeanexp axis={axis} mask={m is not None}")


@case("standardize", dtypes=FLOATS, group="library")
def _standardize(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1), label="shape")
    a = values(data, dtype, shape, -3.0, 3.0, specials=(np.nan,))
    (x,) = operands(data, [a])
    axis = _axes(data, len(shape))
    m = _mask(data, shape)
    # "fast" subtracts two means of squares: under a mask a column of one selected element
    # has a variance of rounding noise, which scales the unselected ones without bound
    algorithm = "stable" if m is not None else data.draw(st.sampled_from(["fast", "stable"]))
    out = pto.standardize(x, axis, where=m, algorithm=algorithm)
    want = ref(name)(a, axis, where=m, algorithm=algorithm)
    n = math.prod(shape[i] for i in _norm_axes(axis, len(shape)))
    assert_matches(out, want, 4 * n + 8, what=f"standardize axis={axis} {algorithm}")


@case("glu", dtypes=FLOATS, group="library")
def _glu(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = list(data.draw(shapes(min_dims=1), label="shape"))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    shape[axis] *= 2
    a = values(data, dtype, tuple(shape), specials=SPECIALS)
    (x,) = operands(data, [a])
    out = pto.glu(x, axis)
    assert_matches(out, jitted(ref(name), ("axis",))(a, axis=axis), 2, what=f"glu axis={axis}")


def test_exact_gelu_matches_jax() -> None:
    a = np.concatenate([np.linspace(-12, 12, 4001), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    for d in (np.float32, np.float16):
        x = a.astype(d)
        want = _rounded(functools.partial(jax.nn.gelu, approximate=False))(x)
        got = pto.gelu(pto.tensor(x), approximate=False)
        assert_matches(got, want, 4, what=f"exact gelu {d.__name__}")


def test_a_glu_of_an_odd_axis_is_a_clear_error() -> None:
    with pytest.raises(pto.ShapeError, match="glu splits axis -1 in halves, but its length is 3"):
        pto.glu(pto.ones((2, 3)))


@case("norm", dtypes=DTYPES, group="library")
def _norm(data: Draw, dtype: pto.DType, name: str) -> None:
    form = data.draw(st.sampled_from(["all", "vector", "matrix"]), label="form")
    shape = data.draw(shapes(min_dims=1 if form == "vector" else 2 if form == "matrix" else 0))
    if dtype is BOOL:
        dtype = pto.int8  # jnp.linalg.norm refuses bools
    a = values(data, dtype, shape, -5.0, 5.0, ints=(-5, 5), specials=(np.nan, np.inf, 0.0))
    (x,) = operands(data, [a])
    nd = len(shape)
    ords: list[Any]
    if form == "all":
        axis, ords = None, [None]
    elif form == "vector":
        axis, ords = data.draw(st.integers(-nd, nd - 1)), [None, 1, 2, 3, 0.5, 0, np.inf, -np.inf]
    else:
        axis = tuple(data.draw(st.permutations(range(nd)))[:2])
        ords = [None, "fro", 1, -1, np.inf, -np.inf, 2, -2, "nuc"]
    ord_ = data.draw(st.sampled_from(ords), label="ord")
    reduced = math.prod(shape[i] for i in (range(nd) if axis is None else np.atleast_1d(axis)))
    if ord_ == -2 and form == "matrix" and reduced == 0:
        return  # the smallest of no singular values: an error (test_norm_errors)
    if ord_ in (np.inf, -np.inf, 1, -1) and form == "matrix" and reduced == 0:
        return  # the extreme of no sums: JAX gives ±inf or 0 by its own identities
    if ord_ in (np.inf, -np.inf) and form == "vector" and shape[axis] == 0:
        return
    keepdims = data.draw(st.booleans(), label="keepdims")
    out = pto.linalg.norm(x, ord_, axis, keepdims)
    svd = ord_ in (2, -2, "nuc") and form == "matrix" and dtype in (pto.float16, pto.bfloat16)
    jref = _rounded(ref(name)) if svd else ref(name)  # (JAX's SVD refuses them)
    expect = jitted(jref, ("ord", "axis", "keepdims"))(a, ord=ord_, axis=axis, keepdims=keepdims)
    assert_matches(out, expect, 2 * reduced + 4, what=f"norm ord={ord_} axis={axis}")


def _conditioned(data: Draw, dtype: pto.DType, batch: tuple[int, ...], n: int) -> np.ndarray:
    """Matrices ``[*batch, n, n]`` of ``dtype`` far from singular whose rows come in a drawn
    order, so that elimination must pivot: a dominant diagonal, its rows permuted."""
    a = values(data, dtype, (*batch, n, n), -1.0, 1.0, ints=(-1, 1)).astype(np.float64)
    perm = data.draw(st.permutations(range(n)), label="rows")
    a = (a + 2.0 * n * np.eye(n))[..., perm, :]
    return a.astype(dtype.np)


@case("qr", dtypes=(pto.float32, pto.bfloat16, pto.int32), group="library")
def _qr(data: Draw, dtype: pto.DType, name: str) -> None:
    """Rectangular matrices of full rank (a dominant diagonal), so that every reflection, and
    so the signs of Q's columns, are determined; float16 and bfloat16 against JAX's float32
    result rounded (its LAPACK refuses them)."""
    batch = data.draw(shapes(max_dims=1, min_side=1), label="batch")
    m, n = data.draw(st.integers(1, 5), label="m"), data.draw(st.integers(1, 5), label="n")
    a = values(data, dtype, (*batch, m, n), -1.0, 1.0, ints=(-1, 1)).astype(np.float64)
    a = (a + 3.0 * np.eye(m, n)).astype(dtype.np)
    mode = data.draw(st.sampled_from(["reduced", "complete", "r"]), label="mode")
    jref = _rounded(ref(name)) if dtype is pto.bfloat16 else ref(name)
    (x,) = operands(data, [a])
    out, want = pto.linalg.qr(x, mode), jitted(jref, ("mode",))(a, mode=mode)
    outs, wants = (out, want) if mode != "r" else ((out,), (want,))
    if mode != "r":
        assert type(out).__name__ == "QRResult" and out._fields == ("Q", "R")
    for o, w in zip(outs, wants, strict=True):
        assert_matches(o, w, 8 * (m + n) + 4, what=f"qr {batch} {m}x{n} {mode}")


def _orthogonal(data: Draw, n: int) -> np.ndarray:
    """An orthogonal ``[n, n]`` float64 matrix: the Q of a drawn matrix."""
    g = values(data, pto.float32, (n, n), -1.0, 1.0).astype(np.float64)
    return np.linalg.qr(g + 3.0 * np.eye(n))[0]


def _spaced(data: Draw, k: int, lo: float) -> np.ndarray:
    """``k`` values from ``lo`` up, at least 0.5 apart, in a drawn order: eigen- and singular
    values far enough apart that each vector is determined up to its sign."""
    gaps = np.array([data.draw(st.floats(0.5, 1.5), label="gap") for _ in range(k)])
    return lo + np.cumsum(gaps)


def _aligned(ours: np.ndarray, want: np.ndarray) -> np.ndarray:
    """``ours`` with each column's sign flipped to agree with ``want``'s."""
    sign = np.sign(
        np.sum(ours.astype(np.float64) * np.asarray(want, np.float64), -2, keepdims=True)
    )
    return ours * np.where(sign == 0, 1, sign)


def _close(name: str, ours: Any, want: Any, dtype: pto.DType, k: int) -> None:
    rtol, atol = tolerance(dtype if dtype.is_floating else pto.float32, k)
    np.testing.assert_allclose(
        np.asarray(ours, np.float32), np.asarray(want, np.float32), rtol, atol, err_msg=name
    )


@case("eigh", "eigvalsh", dtypes=(pto.float32, pto.bfloat16, pto.int32), group="library")
def _eigh(data: Draw, dtype: pto.DType, name: str) -> None:
    """Symmetric matrices with eigenvalues 0.5 or more apart (integers: any symmetric matrix,
    eigenvalues alone), so each eigenvector is determined up to its sign; with
    ``symmetrize_input=False`` the upper or lower triangle alone is read."""
    batch = data.draw(shapes(max_dims=1, min_side=1), label="batch")
    n = data.draw(st.integers(1, 5), label="n")
    if dtype is pto.int32:
        a = values(data, dtype, (*batch, n, n), ints=(-4, 4))
        a = a + np.swapaxes(a, -1, -2)
    else:
        q = _orthogonal(data, n)
        w = _spaced(data, n, data.draw(st.floats(-3.0, 1.0), label="lo"))
        a = np.broadcast_to((q * w) @ q.T, (*batch, n, n)).astype(dtype.np)
    sym = data.draw(st.booleans(), label="symmetrize_input")
    uplo = data.draw(st.sampled_from([None, "L", "U"]), label="UPLO")
    if not sym:  # the other triangle is not read: garbage there
        junk = np.triu if uplo in (None, "L") else np.tril
        a = (a + junk(np.full((n, n), 7.0), 1 if uplo in (None, "L") else -1)).astype(a.dtype)
    (x,) = operands(data, [a])
    jref = _rounded(ref(name)) if dtype is pto.bfloat16 else ref(name)
    want = jitted(jref, ("UPLO", "symmetrize_input"))(a, UPLO=uplo, symmetrize_input=sym)
    out = getattr(pto.linalg, name)(x, uplo, symmetrize_input=sym)
    what = f"{name} {batch} n={n} UPLO={uplo} symmetrize={sym}"
    if name == "eigvalsh":
        assert_matches(out, want, 8 * n + 4, what=what)
        return
    assert type(out).__name__ == "EighResult" and out._fields == ("eigenvalues", "eigenvectors")
    assert_matches(out.eigenvalues, want[0], 8 * n + 4, what=what)
    assert out.eigenvectors.dtype == out.eigenvalues.dtype
    if dtype is not pto.int32:
        v = out.eigenvectors.numpy()
        _close(what, _aligned(v, want[1]), want[1], dtype, 8 * n + 4)


@case("svd", "svdvals", dtypes=(pto.float32, pto.bfloat16, pto.int32), group="library")
def _svd(data: Draw, dtype: pto.DType, name: str) -> None:
    """``U·diag(s)·Vᵀ`` with singular values 0.5 or more apart (integers: any matrix, values
    alone), tall, square and wide; the completion of a full ``U`` or ``Vh`` (any orthonormal
    basis of its space) is checked for orthonormality, the rest against JAX up to signs."""
    batch = data.draw(shapes(max_dims=1, min_side=1), label="batch")
    m, n = data.draw(st.integers(1, 5), label="m"), data.draw(st.integers(1, 5), label="n")
    k = min(m, n)
    if dtype is pto.int32:
        a = values(data, dtype, (*batch, m, n), ints=(-4, 4))
    else:
        s = _spaced(data, k, 0.0)[::-1]
        a = _orthogonal(data, m)[:, :k] * s @ _orthogonal(data, n)[:k]
        a = np.broadcast_to(a, (*batch, m, n)).astype(dtype.np)
    (x,) = operands(data, [a])
    jref = _rounded(ref(name)) if dtype is pto.bfloat16 else ref(name)
    what = f"{name} {batch} {m}x{n}"
    if name == "svdvals":
        assert_matches(pto.linalg.svdvals(x), jitted(jref, ())(a), 8 * (m + n) + 4, what=what)
        return
    full = data.draw(st.booleans(), label="full_matrices")
    uv = data.draw(st.booleans(), label="compute_uv") or dtype is not pto.int32
    want = jitted(jref, ("full_matrices", "compute_uv"))(a, full_matrices=full, compute_uv=uv)
    out = pto.linalg.svd(x, full, uv)
    tol = 8 * (m + n) + 4
    if not uv:
        assert_matches(out, want, tol, what=what)
        return
    assert type(out).__name__ == "SVDResult" and out._fields == ("U", "S", "Vh")
    assert_matches(out.S, want[1], tol, what=what)
    u, vh = out.U.numpy(), out.Vh.numpy()
    assert u.shape == want[0].shape and vh.shape == want[2].shape, what
    ua = _aligned(u[..., :k], want[0][..., :k])
    sign = np.sign(np.sum(ua * u[..., :k], -2))[..., :, None]  # the flips, as rows of Vh
    _close(what + " U", ua, want[0][..., :k], dtype, tol)
    _close(what + " Vh", vh[..., :k, :] * sign, want[2][..., :k, :], dtype, tol)
    for q in (u, np.swapaxes(vh, -1, -2)):
        gram = np.swapaxes(q, -1, -2).astype(np.float32) @ q.astype(np.float32)
        _close(
            what + " orthonormal",
            gram,
            np.broadcast_to(np.eye(q.shape[-1]), gram.shape),
            dtype,
            tol,
        )


@case("lstsq", dtypes=(pto.float32, pto.int32), group="library")
def _lstsq(data: Draw, dtype: pto.DType, name: str) -> None:
    """Tall, square and wide systems of full rank, or with a zero column (rank deficient: the
    least-norm solution), one right-hand side or several."""
    m, n = data.draw(st.integers(1, 5), label="m"), data.draw(st.integers(1, 5), label="n")
    k = min(m, n)
    if dtype is pto.int32:
        a = values(data, dtype, (m, n), ints=(-4, 4))
        a = a + (3 * np.eye(m, n)).astype(np.int32) * np.sign(a + 0.5).astype(np.int32)
    else:
        s = _spaced(data, k, 0.5)[::-1]
        a = (_orthogonal(data, m)[:, :k] * s @ _orthogonal(data, n)[:k]).astype(np.float32)
    if n > 1 and data.draw(st.booleans(), label="zero column"):
        a[:, data.draw(st.integers(0, n - 1), label="column")] = 0
    cols = data.draw(st.sampled_from([None, 1, 3]), label="columns")
    b = values(data, dtype, (m,) if cols is None else (m, cols), -2.0, 2.0, ints=(-3, 3))
    x, y = operands(data, [a, b])
    out = pto.linalg.lstsq(x, y)
    want = jitted(ref(name), ())(a, b)
    what = f"lstsq {m}x{n} b {b.shape}"
    assert isinstance(out, tuple) and len(out) == 4
    for o, w, part in zip(out, want, ("x", "residuals", "rank", "s"), strict=True):
        if part == "x":
            # a zero column's entry is exactly 0 in the least-norm solution; JAX's holds the
            # SVD's rounding, relative to the solution's size, not to that entry's
            rtol, _ = tolerance(pto.float32, 16 * (m + n))
            scale = max(1.0, float(np.abs(np.asarray(w)).max(initial=0.0)))
            assert o.shape == w.shape and o.dtype is pto.float32, what
            np.testing.assert_allclose(np.asarray(o), w, rtol, rtol * scale, err_msg=what)
            continue
        assert_matches(o, w, 16 * (m + n), what=f"{what} {part}")


@case("matrix_rank", dtypes=(pto.float32, pto.int32), group="library")
def _matrix_rank(data: Draw, dtype: pto.DType, name: str) -> None:
    """Products of ``[m, r]`` and ``[r, n]`` integer matrices (rank ``r`` or less, exactly
    representable), default and given tolerances, 1-d inputs."""
    batch = data.draw(shapes(max_dims=1, min_side=1), label="batch")
    m, n, r = (data.draw(st.integers(1, 5), label=w) for w in "mnr")
    if data.draw(st.booleans(), label="vector"):
        a = values(data, dtype, (n,), ints=(0, 1), discrete=True)
    else:
        left = values(data, pto.int32, (*batch, m, r), ints=(-2, 2))
        a = (left @ values(data, pto.int32, (r, n), ints=(-2, 2))).astype(dtype.np)
    rtol = data.draw(st.sampled_from([None, 0.5]), label="rtol")
    (x,) = operands(data, [a])
    want = jitted(ref(name), ())(a, rtol)
    assert_matches(pto.linalg.matrix_rank(x, rtol), want, what=f"matrix_rank {a.shape} {rtol}")


@case("polyfit", dtypes=(pto.float32, pto.int32), group="library")
def _polyfit(data: Draw, dtype: pto.DType, name: str) -> None:
    """Distinct abscissae, as many as the degree needs or fewer (the least-norm fit), one fit
    or several, weights, covariances and the full output (residuals, rank, singular values)."""
    deg = data.draw(st.integers(0, 3), label="deg")
    m = data.draw(st.integers(1, 8), label="points")
    if dtype is pto.int32:  # distinct integers
        x = (np.arange(m) - m // 2).astype(np.int32)
    else:
        x = (np.linspace(-2.0, 2.0, m) + values(data, dtype, (m,), -0.1, 0.1)).astype(np.float32)
    k = data.draw(st.sampled_from([None, 2]), label="fits")
    y = values(data, dtype, (m,) if k is None else (m, k), -5.0, 5.0, ints=(-5, 5))
    kw: dict[str, Any] = {}
    if data.draw(st.booleans(), label="w"):
        kw["w"] = values(data, pto.float32, (m,), 0.5, 2.0)
    extra = data.draw(st.sampled_from([False, True, "unscaled", "full"]), label="cov")
    if extra == "full":
        kw["full"] = True
    elif extra and (extra == "unscaled" or m > deg + 1) and m >= deg + 1:
        kw["cov"] = extra
    out = pto.polyfit(as_input(data, x), as_input(data, y), deg, **kw)
    # (JAX's polyfit of integers fails taking finfo of int32; pypto fits in float32)
    want = ref(name)(x.astype(np.float32), y.astype(np.float32), deg, **kw)
    outs, wants = (out, want) if kw.get("cov") or kw.get("full") else ((out,), (want,))
    for o, w in zip(outs, wants, strict=True):
        assert_matches(o, w, 64 * m, what=f"polyfit deg={deg} m={m} {kw}")


@case(
    "solve",
    "inv",
    "det",
    "slogdet",
    "cholesky",
    "matrix_power",
    dtypes=(pto.float32, pto.bfloat16, pto.int32),  # all of them eliminate in float32
    group="library",
)
def _solvers(data: Draw, dtype: pto.DType, name: str) -> None:
    if dtype is BOOL:
        dtype = pto.int8  # jnp.linalg refuses bools
    batch = data.draw(shapes(max_dims=1, min_side=1), label="batch")
    n = data.draw(st.integers(0 if name != "solve" else 1, 4), label="n")
    a = _conditioned(data, dtype, batch, n)
    low = dtype in (pto.float16, pto.bfloat16)
    jref = ref(name)
    if low and name != "matrix_power":  # JAX's LU refuses them: its float32 result, rounded
        jref = _rounded(jref)
    k = 4 * n * n + 4
    if name == "solve":
        vector = data.draw(st.booleans(), label="vector")
        m = data.draw(st.integers(1, 3), label="m")
        b = values(data, dtype, (n,) if vector else (n, m), -2.0, 2.0, ints=(-3, 3))
        x, y = operands(data, [a, b])
        out, want = pto.linalg.solve(x, y), jitted(jref)(a, b)
    elif name == "cholesky":
        w = a.astype(np.float64)
        spd = (w @ np.swapaxes(w, -1, -2) + n * np.eye(n)).astype(dtype.np)
        upper = data.draw(st.booleans(), label="upper")
        (x,) = operands(data, [spd])
        out, want = pto.linalg.cholesky(x, upper), jitted(jref, ("upper",))(spd, upper=upper)
    elif name == "matrix_power":
        p = data.draw(st.integers(-3, 5), label="power")
        if p < 0 and low:
            jref = _rounded(jref)
        if not dtype.is_integer:  # near the identity, so that powers stay small
            a = (a.astype(np.float64) / (2 * max(n, 1))).astype(dtype.np)
        (x,) = operands(data, [a])
        out, want = pto.linalg.matrix_power(x, p), jitted(jref, ("n",))(a, n=p)
        k = 16 * n + 4
    else:
        (x,) = operands(data, [a])
        out, want = getattr(pto.linalg, name)(x), jitted(jref)(a)
    if name == "slogdet":
        assert_matches(out[0], want[0], what=f"slogdet sign n={n}")
        out, want = out[1], want[1]
    assert_matches(out, want, k, what=f"{name} n={n} batch={batch}")


@case("pad", dtypes=LAYOUT_DTYPES, group="library")
def _np_pad(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), label="shape")
    a = values(data, dtype, shape, ints=(-9, 9), specials=SPECIALS)
    (x,) = operands(data, [a])
    modes = ["constant", "edge", "reflect", "symmetric", "wrap", "linear_ramp", "empty"]
    modes += ["maximum", "minimum", "mean", "median"]
    mode = data.draw(st.sampled_from(modes), label="mode")

    def pairs(side: Any, form: str) -> Any:
        """numpy's forms of per-axis (before, after) pairs."""
        return {
            "int": data.draw(side),
            "pair": (data.draw(side), data.draw(side)),
            "per-axis": tuple((data.draw(side), data.draw(side)) for _ in shape),
        }[form]

    form = data.draw(st.sampled_from(["int", "pair", "per-axis"]), label="form")
    width = pairs(st.integers(0, 7), form)  # often longer than the axis: reflected again
    more: dict[str, Any] = {}
    if mode == "constant" and data.draw(st.booleans(), label="values"):
        more["constant_values"] = data.draw(st.sampled_from([1, -2, ((1, 2),) * len(shape)]))
    if mode in ("maximum", "minimum", "mean", "median") and data.draw(st.booleans()):
        more["stat_length"] = pairs(st.integers(1, 4), form)  # (longer than the axis too)
    if mode == "linear_ramp" and data.draw(st.booleans(), label="end_values"):
        more["end_values"] = data.draw(st.sampled_from([3, (-2, 5), ((1, -4),) * len(shape)]))
    if mode in ("reflect", "symmetric") and dtype is not BOOL and data.draw(st.booleans()):
        more["reflect_type"] = "odd"
    out = pto.pad(x, width, mode, **more)
    want = jnp.pad(a, width, mode, **more)
    # a mean or median of float16 and bfloat16 is computed in float32 and rounded once
    k = max(shape) if mode in ("mean", "median", "linear_ramp") else 1
    if mode == "linear_ramp" and dtype.is_integer:
        # JAX floors a float32 ramp: where the exact ramp meets an integer, its own result
        # moves by one with the float error (the same call has given 0 and 1 for an exact 1)
        assert out.shape == want.shape and out.dtype.np == want.dtype, (out, want)
        diff = np.abs(out.numpy().astype(np.int32) - np.asarray(want).astype(np.int32))
        assert diff.max(initial=0) <= 1, f"pad {width} {mode} {more}: {out} != {want}"
        return
    assert_matches(out, want, k, what=f"pad {width} {mode} {more}")


def test_pad_refuses_what_numpy_refuses() -> None:
    x = pto.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(pto.ShapeError, match="stat_length does not apply to mode 'edge'"):
        pto.pad(x, 1, "edge", stat_length=2)
    with pytest.raises(pto.ShapeError, match=r"stat_length .* has a length of 0 or less"):
        pto.pad(x, 1, "mean", stat_length=(0, 2))
    with pytest.raises(pto.ShapeError, match="mode 'cyclic' is not one of"):
        pto.pad(x, 1, "cyclic")
    with pytest.raises(pto.ShapeError, match="reflect_type 'weird' is not 'even' or 'odd'"):
        pto.pad(x, 1, "reflect", reflect_type="weird")
    with pytest.raises(pto.DTypeError, match="2·edge - x is not a bool"):
        pto.pad(x > 2, 1, "symmetric", reflect_type="odd")


def test_lax_pad_matches_jax_with_interior_and_negative_padding() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for cfg, value in [
        ([(1, 2, 0), (0, 1, 1)], 0.0),
        ([(-1, 1, 1), (2, -3, 0)], -5.0),
        ([(0, 0, 2), (-1, -1, 0)], np.float32(7.5)),
    ]:
        got = pto.lax.pad(pto.tensor(a), value, cfg)
        want = jax.lax.pad(a, np.float32(value), cfg)
        assert_matches(got, want, what=f"lax.pad {cfg}")
    jitted_pad = pto.jit(lambda v, c: pto.lax.pad(v, c, [(1, -1, 1), (0, 2, 0)]), machine="tiny")
    want = jax.lax.pad(a, np.float32(3.0), [(1, -1, 1), (0, 2, 0)])
    assert_matches(jitted_pad(a, np.float32(3.0)), want, what="jit lax.pad, traced value")
    with pytest.raises(pto.ShapeError, match=r"pad: mode 'ramp' is not one of"):
        pto.pad(pto.tensor(a), 1, "ramp")
    with pytest.raises(pto.ShapeError, match=r"mode 'wrap' cannot pad axis 0 .* it is empty"):
        pto.pad(pto.zeros((0, 2)), 1, "wrap")
    with pytest.raises(pto.ShapeError, match=r"pad_width .* does not give \(before, after\)"):
        pto.pad(pto.tensor(a), ((1, 2, 3),))


@case("divmod", "modf", "matrix_transpose", dtypes=DTYPES, group="library")
def _split_results(data: Draw, dtype: pto.DType, name: str) -> None:
    if dtype is BOOL and name == "divmod":
        dtype = pto.int8  # JAX refuses to divide bools
    shape = data.draw(shapes(min_dims=2 if name == "matrix_transpose" else 0), label="shape")
    a = values(data, dtype, shape, -50.0, 50.0, ints=(-9, 9), specials=SPECIALS)
    if name == "divmod":
        b = values(data, dtype, shape, -5.0, 5.0, ints=(1, 4), specials=(0.0, np.inf))
        x, y = operands(data, [a, b])
        if not isinstance(x, pto.Tensor) and not isinstance(y, pto.Tensor):
            x = pto.tensor(a)
        out, want = pto.divmod(x, y), jitted(ref(name))(a, b)
    else:
        (x,) = operands(data, [a])
        out, want = getattr(pto, name)(x), jitted(ref(name))(a)
    if name == "matrix_transpose":
        out, want = (out,), (want,)
    for i, (o, w) in enumerate(zip(out, want, strict=True)):
        assert_matches(o, w, what=f"{name}[{i}]")
        if o.dtype.is_floating:  # the signs of zeros too (modf(-0.5) is (-0.5, -0.0))
            ok = np.isnan(np.asarray(w, np.float32)) | (
                np.signbit(np.asarray(o, np.float32)) == np.signbit(np.asarray(w, np.float32))
            )
            assert ok.all(), f"{name}[{i}] signs"


@case("vdot", "vecdot", "matvec", "vecmat", "polyval", "trapezoid", dtypes=DTYPES, group="library")
def _vector_products(data: Draw, dtype: pto.DType, name: str) -> None:
    if dtype is BOOL:
        dtype = pto.int8  # JAX's dots promote bools differently; int8 exercises the same path
    n = data.draw(st.integers(1, 6), label="n")
    batch = data.draw(shapes(max_dims=2, min_side=1), label="batch")
    if name == "vdot":
        sa = data.draw(shapes(min_side=1), label="shape")
        shapes_ = [sa, (math.prod(sa),)]
    elif name == "vecdot":
        shapes_ = [(*batch, n), (n,)]
    elif name == "matvec":
        shapes_ = [(*batch, 3, n), (n,)]
    elif name == "vecmat":
        shapes_ = [(n,), (*batch, n, 2)]
    elif name == "polyval":
        shapes_ = [(n,), batch]
    else:
        shapes_ = [(*batch, n + 1)]
    lo, hi = (-2.0, 2.0) if name == "polyval" else (-10.0, 10.0)
    arrs = [values(data, dtype, s, lo, hi, ints=(-3, 3)) for s in shapes_]
    xs = operands(data, arrs)
    if not any(isinstance(t, pto.Tensor) for t in xs):
        xs[0] = pto.tensor(arrs[0])
    more: dict[str, Any] = {}
    if name == "trapezoid" and data.draw(st.booleans(), label="x"):
        more["x"] = np.cumsum(np.abs(values(data, pto.float32, (n + 1,), 0.1, 2.0)))
    elif name == "trapezoid":
        more["dx"] = data.draw(st.sampled_from([1.0, 0.5]), label="dx")
    k = 2 * n + 2
    out, want = getattr(pto, name)(*xs, **more), jitted(ref(name))(*arrs, **more)
    assert_matches(out, want, k, what=f"{name} {[a.shape for a in arrs]}")


@case(
    "polyadd",
    "polysub",
    "polymul",
    "polydiv",
    "polyder",
    "polyint",
    "poly",
    dtypes=DTYPES,
    group="library",
)
def _polynomials(data: Draw, dtype: pto.DType, name: str) -> None:
    if dtype is BOOL and name in ("polyadd", "polysub", "poly"):
        dtype = pto.int8  # JAX adds or negates the coefficients, which bools refuse (as pypto)
    # (JAX's polyadd of an empty operand fails: see test_polyadd_of_an_empty_polynomial)
    n = data.draw(st.integers(0 if name == "poly" else 1, 6), label="n")
    m = data.draw(st.integers(0 if name == "polymul" else 1, 4), label="m")
    lo, hi = (-2.0, 2.0) if name == "poly" else (-5.0, 5.0)
    a = values(data, dtype, (n,), lo, hi, ints=(-3, 3))
    b = values(data, dtype, (m,), lo, hi, ints=(-3, 3))
    if name == "polydiv" and not dtype.is_floating:
        b[0] = 1  # an integer divisor's leading coefficient: never 0 (JAX divides by it)
    elif name == "polydiv":
        b[0] = np.where(np.abs(b[0].astype(np.float32)) < 0.5, 1, b[0]).astype(b.dtype)
    kw: dict[str, Any] = {}
    static: tuple[str, ...] = ()
    if name in ("polyadd", "polysub", "polymul", "polydiv"):
        arrs = [a, b]
        if name in ("polymul", "polydiv") and data.draw(st.booleans(), label="trim"):
            kw["trim_leading_zeros"] = True
            arrs[0][: data.draw(st.integers(0, n), label="zeros")] = 0
    else:
        arrs = [a]
        if name in ("polyder", "polyint"):
            kw["m"], static = data.draw(st.integers(0, 3), label="order"), ("m",)
        if name == "polyint" and data.draw(st.booleans(), label="k"):
            kw["k"] = values(data, pto.float32, (data.draw(st.sampled_from([1, kw["m"]])),))
    xs = operands(data, arrs)
    if not any(isinstance(t, pto.Tensor) for t in xs):
        xs[0] = pto.tensor(arrs[0])
    out = getattr(pto, name)(*xs, **kw)
    # (JAX cannot trim leading zeros under jit)
    fn = ref(name) if "trim_leading_zeros" in kw else jitted(ref(name), static)
    want = fn(*arrs, **kw)
    outs, wants = (out, want) if name == "polydiv" else ((out,), (want,))
    # polydiv's remainder cancels: its tolerance counts the terms that cancel into it
    k = 4 * (n + m + 2) if name in ("polydiv", "poly") else n + m + 2
    for i, (o, w) in enumerate(zip(outs, wants, strict=True)):
        assert_matches(o, w, k, what=f"{name}[{i}] {[x.shape for x in arrs]} {kw}")


def test_polyadd_of_an_empty_polynomial_is_the_other_one() -> None:
    """As numpy's (JAX's fails to broadcast the empty operand), and bools are refused."""
    a = np.array([1.0, -2.0, 3.0], np.float32)
    e = np.zeros(0, np.float32)
    for x, y in ((a, e), (e, a)):
        assert_matches(
            pto.polyadd(pto.tensor(x), pto.tensor(y)), np.polyadd(x, y).astype(np.float32)
        )
        assert_matches(
            pto.polysub(pto.tensor(x), pto.tensor(y)), np.polysub(x, y).astype(np.float32)
        )
    with pytest.raises(pto.DTypeError, match=r"(?s)polysub: bool coefficients.*hint: cast them"):
        pto.polysub(pto.tensor([True]), pto.tensor([False]))


@case("cov", "corrcoef", dtypes=DTYPES, group="library")
def _covariances(data: Draw, dtype: pto.DType, name: str) -> None:
    k = data.draw(st.integers(1, 4), label="variables")
    n = data.draw(st.integers(1, 7), label="samples")
    rowvar = data.draw(st.booleans(), label="rowvar")
    shape = ((k, n) if rowvar else (n, k)) if data.draw(st.booleans(), label="2-d") else (n,)
    a = values(data, dtype, shape, -5.0, 5.0, ints=(-3, 3))
    args: list[Any] = [a]
    if data.draw(st.booleans(), label="y"):
        args.append(values(data, dtype, (n,), -5.0, 5.0, ints=(-3, 3)))
    kw: dict[str, Any] = {"rowvar": rowvar}
    if name == "cov":
        kw["ddof"] = data.draw(st.sampled_from([None, 0, 2]), label="ddof")
        kw["bias"] = data.draw(st.booleans(), label="bias")
        # (weights on one sample leave 0/0, whose rounding decides between NaN and inf)
        if n > 1 and data.draw(st.booleans(), label="fweights"):
            kw["fweights"] = values(data, pto.int32, (n,), ints=(1, 3))
        if n > 1 and data.draw(st.booleans(), label="aweights"):
            kw["aweights"] = values(data, pto.float32, (n,), 0.1, 2.0)
    xs = operands(data, args)
    if not any(isinstance(t, pto.Tensor) for t in xs):
        xs[0] = pto.tensor(args[0])
    out = getattr(pto, name)(*xs, **kw)
    jargs = list(args)
    if len(args) == 2 and len(shape) == 2 and not rowvar:
        jargs[1] = args[1][None]  # (JAX fails on a 1-d y here; numpy and pypto take it as this)
    want = jitted(ref(name), tuple(k for k in ("rowvar", "ddof", "bias") if k in kw))(*jargs, **kw)
    assert_matches(out, want, 2 * n + 4, what=f"{name} {[x.shape for x in args]} {kw}")


def test_cov_refuses_what_numpy_refuses_with_the_fix() -> None:
    m = pto.ones((2, 5))
    with pytest.raises(pto.DTypeError, match=r"(?s)fweights must be integers.*hint: pass"):
        pto.cov(m, fweights=np.ones(5, np.float32))
    with pytest.raises(pto.ShapeError, match=r"aweights must be 1-d with one weight per sample"):
        pto.cov(m, aweights=np.ones(4, np.float32))
    with pytest.raises(pto.ShapeError, match=r"m has more than 2 dimensions"):
        pto.cov(pto.ones((2, 2, 2)))


@case("gradient", "unwrap", dtypes=DTYPES, group="library")
def _differences(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=2), label="shape")
    nd = len(shape)
    if name == "unwrap":
        if dtype is BOOL:
            dtype = pto.int8  # (JAX's unwrap subtracts bools)
        a = values(data, dtype, shape, -20.0, 20.0, ints=(-20, 20))
        kw: dict[str, Any] = {"axis": data.draw(st.integers(-nd, nd - 1), label="axis")}
        if data.draw(st.booleans(), label="discont"):
            kw["discont"] = data.draw(st.sampled_from([1.0, 4.0]), label="discont value")
        if data.draw(st.booleans(), label="period"):
            kw["period"] = data.draw(st.sampled_from([6.0, 10]), label="period value")
        x = as_input(data, a)
        out, want = pto.unwrap(x, **kw), ref(name)(a, **kw)
        what = f"unwrap {shape} {kw}"
        if not dtype.is_floating:
            assert_matches(out, want, what=what)
        else:  # x - k·period cancels: an ulp of the input's size, absolutely
            assert out.shape == want.shape and out.dtype.name == name_of(want), what
            rtol, atol = tolerance(dtype, 4 * shape[kw["axis"]])
            big = float(np.abs(a.astype(np.float32)).max(initial=0.0))
            np.testing.assert_allclose(
                np.asarray(out).astype(np.float32),
                np.asarray(want).astype(np.float32),
                rtol=rtol,
                atol=atol + float(ml_dtypes.finfo(dtype.np).eps) * big,
                err_msg=what,
            )
        return
    a = values(data, dtype, shape, -10.0, 10.0, ints=(-9, 9))
    axis = data.draw(st.sampled_from([None, *range(nd), tuple(range(nd))[::-1]]), label="axis")
    axes = range(nd) if axis is None else (axis,) if isinstance(axis, int) else axis
    spacing: list[Any] = []
    kind = data.draw(st.sampled_from(["none", "scalar", "each"]), label="spacing")
    if kind == "scalar":
        spacing = [0.5]
    elif kind == "each":  # a step or the coordinates, per axis
        for ax in axes:
            if data.draw(st.booleans(), label="coordinates"):
                spacing.append(np.cumsum(values(data, pto.float32, (shape[ax],), 0.5, 2.0)))
            else:
                spacing.append(2.0)
    x = as_input(data, a)
    out = pto.gradient(x, *spacing, axis=axis)
    want = jitted(ref(name), ("axis",))(a, *spacing, axis=axis)
    outs, wants = (out, want) if isinstance(want, list) else ([out], [want])
    assert len(outs) == len(wants)
    for o, w in zip(outs, wants, strict=True):
        assert_matches(o, w, 8, what=f"gradient {shape} axis={axis} {kind}")


def test_gradient_to_second_order_at_the_ends_is_numpys() -> None:
    """JAX has no ``edge_order=2``; numpy's is the reference, exact on a parabola."""
    rng = np.random.default_rng(5)
    f = rng.normal(size=(4, 6)).astype(np.float32)
    x = np.cumsum(rng.random(6) + 0.2).astype(np.float32)
    for spacing in ([], [0.5], [2.0, x]):
        got = pto.gradient(pto.tensor(f), *spacing, edge_order=2)
        want = np.gradient(f.astype(np.float64), *spacing, edge_order=2)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5)
    t = np.linspace(-1.0, 2.0, 7, dtype=np.float32)
    np.testing.assert_allclose(pto.gradient(t * t, t, edge_order=2).numpy(), 2 * t, atol=1e-5)
    with pytest.raises(pto.ShapeError, match="at least 3 samples"):
        pto.gradient(pto.ones(2), edge_order=2)
    with pytest.raises(pto.ShapeError, match="3 spacings for 2 axes"):
        pto.gradient(pto.ones((3, 3)), 1.0, 2.0, 3.0)


@case("partition", "argpartition", dtypes=NUMERIC, group="library")
def _partitions(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    n = shape[axis]
    kth = data.draw(st.integers(-n, n - 1), label="kth")
    # ties (small integers) and NaN: JAX's order for both, from its two top_k
    a = values(data, dtype, shape, -3.0, 3.0, ints=(-3, 3), discrete=True, specials=SPECIALS)
    out = getattr(pto, name)(as_input(data, a), kth, axis)
    want = jitted(ref(name), ("kth", "axis"))(a, kth=kth, axis=axis)
    assert_matches(out, want, what=f"{name} {shape} kth={kth} axis={axis}")


@case("resize", "rollaxis", "array_equal", "array_equiv", dtypes=DTYPES, group="library")
def _reshaping(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(max_dims=3), label="shape")
    a = values(data, dtype, shape, -3.0, 3.0, ints=(-3, 3), discrete=True, specials=SPECIALS)
    x = as_input(data, a)
    if name == "resize":
        new = data.draw(shapes(max_dims=3), label="new shape")
        out, want = pto.resize(x, new), ref(name)(a, new)
    elif name == "rollaxis":
        nd = max(len(shape), 1)
        if not shape:
            a = a.reshape(1)
            x = pto.tensor(a)
        axis = data.draw(st.integers(-nd, nd - 1), label="axis")
        start = data.draw(st.integers(-nd, nd), label="start")
        out, want = pto.rollaxis(x, axis, start), ref(name)(a, axis, start)
    else:
        kind = data.draw(st.sampled_from(["same", "changed", "other shape"]), label="other")
        b = a.copy()
        if kind == "changed" and b.size:
            b.reshape(-1)[data.draw(st.integers(0, b.size - 1), label="at")] = 1
        elif kind == "other shape":
            b = values(data, dtype, data.draw(shapes(max_dims=3), label="shape 2"), -3.0, 3.0)
        if name == "array_equal":
            eq_nan = data.draw(st.booleans(), label="equal_nan")
            out, want = pto.array_equal(x, b, eq_nan), ref(name)(a, b, eq_nan)
        else:
            out = pto.array_equiv(x, b)
            try:
                np.broadcast_shapes(a.shape, b.shape)
                want = ref(name)(a, b)
            except ValueError:  # (JAX's raises there; numpy's is False)
                want = np.array_equiv(a, b)
    assert_matches(out, want, what=f"{name} {shape}")


@case("convolve", "correlate", "interp", "digitize", "bincount", dtypes=DTYPES, group="library")
def _signals(data: Draw, dtype: pto.DType, name: str) -> None:
    n = data.draw(st.integers(1, 9), label="n")
    m = data.draw(st.integers(1, 9), label="m")
    if name in ("convolve", "correlate"):
        if dtype is BOOL:
            dtype = pto.int8
        a = values(data, dtype, (n,), -5.0, 5.0, ints=(-3, 3))
        b = values(data, dtype, (m,), -5.0, 5.0, ints=(-3, 3))
        mode = data.draw(st.sampled_from(["full", "same", "valid"]), label="mode")
        x, y = operands(data, [a, b])
        if not isinstance(x, pto.Tensor) and not isinstance(y, pto.Tensor):
            x = pto.tensor(a)
        out = getattr(pto, name)(x, y, mode)
        want = jitted(ref(name), ("mode",))(a, b, mode=mode)
        assert_matches(out, want, m + 1, what=f"{name} {n} {m} {mode}")
        return
    if name == "bincount":
        a = values(data, pto.int32, (n,), ints=(-2, 7))
        length = data.draw(st.sampled_from([None, 3, 8]), label="length")
        w = values(data, dtype, (n,), 0.0, 4.0, ints=(0, 3)) if dtype is not BOOL else None
        x = as_input(data, a)
        out = pto.bincount(x, w, length=length)
        want = ref(name)(a, w, length=length)
        assert_matches(out, want, n, what=f"bincount length={length} weights={w is not None}")
        return
    if dtype in (BOOL, pto.int8):
        dtype = pto.int32  # JAX's searchsorted on these casts; int32 exercises the same path
    xp = np.sort(values(data, dtype, (m,), -10.0, 10.0, ints=(-20, 20), discrete=True))
    if name == "digitize" and data.draw(st.booleans(), label="decreasing"):
        xp = xp[::-1].copy()
    xq = values(data, dtype, (n,), -12.0, 12.0, ints=(-25, 25), specials=(np.nan,))
    if name == "digitize":
        right = data.draw(st.booleans(), label="right")
        out = pto.digitize(as_input(data, xq), xp, right)
        assert_matches(out, jitted(ref(name), ("right",))(xq, xp, right=right), what="digitize")
        return
    fp = values(data, dtype, (m,), -10.0, 10.0, ints=(-9, 9))
    left = data.draw(st.sampled_from([None, -99.0, "extrapolate"]), label="left")
    right = data.draw(st.sampled_from([None, 7.0, "extrapolate"]), label="right")
    period = data.draw(st.sampled_from([None, 4.0, -7.5]), label="period")
    if period is not None:  # xp in any order, repeated with the period
        xp = data.draw(st.permutations(list(xp)), label="xp order")
        xp = np.asarray(xp, np.dtype(dtype.np))
    out = pto.interp(as_input(data, xq), xp, fp, left, right, period)
    # all three static: one jit of JAX's with 'left' static and another with 'right' static
    # share a cache entry, and the second then reads its arguments swapped
    want = jitted(ref(name), ("left", "right", "period"))(xq, xp, fp, left, right, period)
    assert_matches(out, want, 4, what=f"interp x={xq} xp={xp} fp={fp} {left} {right} {period}")


@case(
    "diag",
    "diagflat",
    "array_split",
    "hsplit",
    "vsplit",
    "dsplit",
    "unstack",
    "broadcast_arrays",
    "select",
    "isin",
    "cumulative_sum",
    "cumulative_prod",
    dtypes=LAYOUT_DTYPES,
    group="library",
)
def _arrays(data: Draw, dtype: pto.DType, name: str) -> None:
    least = {"vsplit": 2, "dsplit": 3, "select": 0, "isin": 0, "broadcast_arrays": 0}.get(name, 1)
    most = 2 if name == "diag" else 3
    shape = data.draw(shapes(min_dims=least, max_dims=max(most, least), min_side=1), label="shape")
    lo, hi = (0.5, 1.5) if name == "cumulative_prod" else (-9.0, 9.0)
    a = values(data, dtype, shape, lo, hi, ints=(-3, 3), specials=SPECIALS)
    (x,) = operands(data, [a])
    params: dict[str, Any] = {}
    args: list[Any] = [x]
    jargs: list[Any] = [a]
    if name in ("diag", "diagflat"):
        params["k"] = data.draw(st.integers(-2, 2), label="k")
    elif name in ("array_split", "hsplit", "vsplit", "dsplit"):
        ax = {"hsplit": 1 if len(shape) > 1 else 0, "vsplit": 0, "dsplit": 2}.get(name, 0)
        if name == "array_split" and data.draw(st.booleans(), label="last axis"):
            ax = params["axis"] = len(shape) - 1
        n = shape[ax]
        # sorted split points within the axis: JAX refuses others (numpy and pypto give empty
        # pieces)
        points = st.lists(st.integers(0, n), max_size=2).map(sorted)
        if name == "array_split":
            sec: Any = data.draw(st.integers(1, 4) | points)
        else:
            sec = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]) | points)
        args.append(sec)
        jargs.append(sec)
    elif name == "unstack":
        params["axis"] = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    elif name == "broadcast_arrays":
        other = values(data, dtype, (1,) * len(shape) + (1,), ints=(-3, 3))
        args.append(pto.tensor(other))
        jargs.append(other)
    elif name == "select":
        conds = [a > 0, a < -3] if dtype is not BOOL else [a, ~a]
        choices = [a, values(data, dtype, shape[-1:], ints=(-3, 3))]
        args, jargs = [conds, choices], [conds, choices]
        params["default"] = 1
    elif name == "isin":
        t = values(data, dtype, (4,), -9.0, 9.0, ints=(-3, 3), discrete=True)
        args.append(t)
        jargs.append(t)
        params["invert"] = data.draw(st.booleans(), label="invert")
    else:
        params["axis"] = (
            data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
            if len(shape) > 1
            else None
        )
        params["include_initial"] = data.draw(st.booleans(), label="initial")
    if name == "diag" and len(shape) == 2 and dtype is BOOL:
        return  # jnp.diag of a bool matrix works; pypto's diagonal too: covered by diagonal's case
    out = getattr(pto, name)(*args, **params)
    fn = ref(name)
    if name.startswith("cumulative") and dtype in (pto.float16, pto.bfloat16):
        fn = _rounded(fn)  # pypto accumulates in float32 and rounds once; JAX in the dtype
    want = fn(*jargs, **params)
    outs = list(out) if isinstance(out, list | tuple) else [out]
    wants = list(want) if isinstance(want, list | tuple) else [want]
    assert len(outs) == len(wants), f"{name}: {len(outs)} parts, JAX {len(wants)}"
    n_sum = max(shape) if shape else 1
    for i, (o, w) in enumerate(zip(outs, wants, strict=True)):
        assert_matches(o, w, n_sum, what=f"{name}[{i}] {params}")


@case("put", "put_along_axis", dtypes=LAYOUT_DTYPES, group="library")
def _puts(data: Draw, dtype: pto.DType, name: str) -> None:
    """Positions repeated and out of range (JAX's clamp, drop or wrap), static or tensors."""
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), label="shape")
    a = values(data, dtype, shape, ints=(-3, 3))
    x = as_input(data, a, allow_numpy=False)
    if name == "put":
        size = a.size
        ind = values(
            data, pto.int32, (data.draw(st.integers(1, 5), label="k"),), ints=(-size - 2, size + 1)
        )
        v = values(data, dtype, (data.draw(st.integers(1, 3), label="m"),), ints=(-3, 3))
        mode = data.draw(st.sampled_from([None, "clip", "wrap"]), label="mode")
        out = pto.put(x, as_input(data, ind), pto.tensor(v), mode, inplace=False)
        assert_matches(out, ref(name)(a, ind, v, mode), what=f"put {ind} {v} {mode}")
        return
    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]), label="axis")
    if axis is None:
        ishape: tuple[int, ...] = (data.draw(st.integers(1, 4), label="k"),)
        n = a.size
    else:
        ishape = tuple(
            data.draw(st.integers(1, 3), label="k")
            if d == axis % len(shape)
            else data.draw(st.sampled_from([1, s]))
            for d, s in enumerate(shape)
        )
        n = shape[axis]
    ind = values(data, pto.int32, ishape, ints=(-n, n - 1))
    v = values(data, dtype, _trailing(data, ishape), ints=(-3, 3))
    out = pto.put_along_axis(x, as_input(data, ind), pto.tensor(v), axis, inplace=False)
    assert_matches(out, ref(name)(a, ind, v, axis), what=f"put_along_axis {ind} {axis}")


def _trailing(data: Draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``shape``."""
    n = data.draw(st.integers(0, len(shape)), label="v dims")
    return tuple(1 if data.draw(st.booleans()) else s for s in shape[len(shape) - n :])


@case(
    "nonzero",
    "flatnonzero",
    "argwhere",
    "unique",
    "compress",
    "extract",
    dtypes=LAYOUT_DTYPES,
    group="library",
)
def _data_sized(data: Draw, dtype: pto.DType, name: str) -> None:
    """Results whose length depends on the values: eagerly without ``size`` (counted), and
    compiled with ``size`` below, at or above the count, padded with ``fill_value``."""
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), label="shape")
    a = values(data, dtype, shape, -2.0, 2.0, ints=(-1, 1), discrete=True, specials=SPECIALS)
    x = as_input(data, a, allow_numpy=False)
    sized = data.draw(st.booleans(), label="sized")
    params: dict[str, Any] = {}
    args: list[Any] = [x]
    jargs: list[Any] = [a]
    if name in ("compress", "extract"):
        if name == "compress":
            axis = data.draw(st.sampled_from([None, *range(len(shape))]), label="axis")
            n = a.size if axis is None else shape[axis]
            c = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
            params["axis"] = axis
        else:
            n = a.size
            c = a > 0
        args, jargs = [pto.tensor(c), x], [c, a]
        if sized:
            params["size"] = data.draw(st.integers(1, n), label="size")
            params["fill_value"] = 1
    else:
        if sized:
            params["size"] = data.draw(st.integers(0, a.size + 2), label="size")
            if data.draw(st.booleans(), label="fill"):
                params["fill_value"] = 1
        if name == "unique":
            for flag in ("return_index", "return_inverse", "return_counts"):
                params[flag] = data.draw(st.booleans(), label=flag)
    out = getattr(pto, name)(*args, **params)
    want = ref(name)(*jargs, **params)
    outs = list(out) if isinstance(out, tuple) else [out]
    wants = list(want) if isinstance(want, tuple) else [want]
    assert len(outs) == len(wants), f"{name}: {len(outs)} results, JAX {len(wants)}"
    if isinstance(want, tuple) and hasattr(want, "_fields"):  # the array API's named tuples
        assert type(out).__name__ == type(want).__name__.lstrip("_"), type(out)
        assert out._fields == want._fields, out._fields
    for o, w in zip(outs, wants, strict=True):
        assert_matches(o, w, what=f"{name} {params}")
    if sized:
        staged = pto.jit(lambda *t: getattr(pto, name)(*t, **params), backend="interpret")
        for o, w in zip(_as_list(staged(*[pto.tensor(j) for j in jargs])), wants, strict=True):
            assert_matches(o, w, what=f"staged {name} {params}")


# The array API's unique functions are unique with NaNs distinct: the dtypes that tell NaN
# handling and integers apart are enough (unique itself runs in every dtype above).
case(
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
    dtypes=(pto.float32, pto.int8),
    group="library",
)(_data_sized)


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple) else [out]


@case(
    "histogram",
    "histogram_bin_edges",
    dtypes=(pto.float32, pto.bfloat16, pto.int32),
    group="library",
)
def _histograms(data: Draw, dtype: pto.DType, name: str) -> None:
    n = data.draw(st.integers(1, 12), label="n")
    a = values(data, dtype, (n,), -3.0, 3.0, ints=(-3, 3), specials=(np.nan,))
    x = as_input(data, a)
    kind = data.draw(st.sampled_from(["count", "range", "edges"]), label="bins")
    params: dict[str, Any] = {}
    if kind == "edges":
        params["bins"] = np.sort(
            values(data, pto.float32, (data.draw(st.integers(2, 5)),), -3.0, 3.0)
        )
    else:
        params["bins"] = data.draw(st.integers(1, 6), label="count")
        if kind == "range":
            params["range"] = data.draw(st.sampled_from([(-1.0, 1.0), (0.0, 0.0), (-2.5, 4.0)]))
    if name == "histogram":
        if data.draw(st.booleans(), label="weights"):
            params["weights"] = values(data, pto.float32, (n,), 0.0, 2.0)
        params["density"] = data.draw(st.booleans(), label="density")
    out = getattr(pto, name)(x, **params)
    want = ref(name)(a, **params)
    for o, w in zip(_as_list(out), _as_list(want), strict=True):
        assert_matches(o, w, n + 2, what=f"{name} {params}")


@case("histogram2d", "histogramdd", dtypes=(pto.float32, pto.bfloat16, pto.int32), group="library")
def _histograms_nd(data: Draw, dtype: pto.DType, name: str) -> None:
    n = data.draw(st.integers(1, 12), label="n")
    d = 2 if name == "histogram2d" else data.draw(st.integers(1, 3), label="d")
    a = values(data, dtype, (n, d), -3.0, 3.0, ints=(-3, 3), specials=(np.nan,))
    per: list[Any] = []
    ranges: list[Any] = []
    for _ in range(d):
        kind = data.draw(st.sampled_from(["count", "range", "edges"]), label="bins")
        if kind == "edges":
            k = data.draw(st.integers(2, 5), label="edges")
            per.append(np.sort(values(data, pto.float32, (k,), -3.0, 3.0)))
        else:
            per.append(data.draw(st.integers(1, 4), label="count"))
        ranges.append((-1.0, 2.0) if kind == "range" else None)
    params: dict[str, Any] = {"bins": per}
    if all(isinstance(b, int) for b in per) and data.draw(st.booleans(), label="one count"):
        params["bins"] = per[0]
    if any(r is not None for r in ranges):
        params["range"] = ranges
    if data.draw(st.booleans(), label="weights"):
        params["weights"] = values(data, pto.float32, (n,), 0.0, 2.0)
    params["density"] = data.draw(st.booleans(), label="density")
    if name == "histogramdd":
        out = pto.histogramdd(as_input(data, a), **params)
        want = ref(name)(a, **params)
        outs, wants = [out[0], *out[1]], [want[0], *want[1]]
    else:
        x, y = operands(data, [a[:, 0].copy(), a[:, 1].copy()])
        outs = list(pto.histogram2d(x, y, **params))
        wants = list(ref(name)(a[:, 0], a[:, 1], **params))
    for o, w in zip(outs, wants, strict=True):
        assert_matches(o, w, n + 2, what=f"{name} {params}")


@case(
    "unravel_index",
    "ravel_multi_index",
    "choose",
    "fill_diagonal",
    "place",
    "delete",
    "insert",
    "ediff1d",
    "vander",
    dtypes=LAYOUT_DTYPES,
    group="library",
)
def _index_tricks(data: Draw, dtype: pto.DType, name: str) -> None:
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), label="shape")
    a = values(data, dtype, shape, -3.0, 3.0, ints=(-3, 3))
    x = as_input(data, a, allow_numpy=False)
    args: list[Any] = [x]
    jargs: list[Any] = [a]
    params: dict[str, Any] = {}
    n = a.size
    if name == "unravel_index":
        i = values(data, pto.int32, (data.draw(st.integers(0, 4)),), ints=(-n - 2, n + 1))
        args, jargs = [pto.tensor(i), shape], [i, shape]
    elif name == "ravel_multi_index":
        params["mode"] = data.draw(st.sampled_from(["raise", "wrap", "clip"]), label="mode")
        params["order"] = data.draw(st.sampled_from(["C", "F"]), label="order")
        lo = 0 if params["mode"] == "raise" else -4
        idx = tuple(
            values(data, pto.int32, (3,), ints=(lo, d - 1 if lo == 0 else d + 3)) for d in shape
        )
        args, jargs = [tuple(pto.tensor(i) for i in idx), shape], [idx, shape]
    elif name == "choose":
        params["mode"] = data.draw(st.sampled_from(["raise", "wrap", "clip"]), label="mode")
        lo, hi = (0, 1) if params["mode"] == "raise" else (-3, 4)
        pick = values(data, pto.int32, shape, ints=(lo, hi))
        other = values(data, dtype, shape[-1:], ints=(-3, 3))
        args, jargs = [pto.tensor(pick), [x, pto.tensor(other)]], [pick, [a, other]]
    elif name == "fill_diagonal":
        if len(shape) < 2 or (len(shape) > 2 and len(set(shape)) > 1):
            shape = (shape[0], shape[0] + 1)
            a = values(data, dtype, shape, ints=(-3, 3))
            args, jargs = [pto.tensor(a)], [a]
        val = values(data, dtype, data.draw(st.sampled_from([(), (1,), (2,)])), ints=(-3, 3))
        args.append(pto.tensor(val))
        jargs.append(val)
        params["inplace"] = False
    elif name == "place":
        mask = a != 0 if dtype is not BOOL else a
        vals = values(data, dtype, (data.draw(st.integers(1, 3)),), ints=(-3, 3))
        args, jargs = [x, pto.tensor(mask), pto.tensor(vals)], [a, mask, vals]
        params["inplace"] = False
    elif name in ("delete", "insert"):
        axis = data.draw(st.sampled_from([None, *range(len(shape))]), label="axis")
        m = n if axis is None else shape[axis]
        kind = data.draw(st.sampled_from(["int", "slice", "array"]), label="obj")
        lim = m - 1 if name == "delete" else m
        if kind == "int":
            obj: Any = data.draw(st.integers(-m, lim), label="at")
        elif kind == "slice":
            obj = slice(data.draw(st.integers(-m, m)), None, data.draw(st.sampled_from([1, 2, -1])))
        else:
            obj = np.asarray(data.draw(st.lists(st.integers(-m, lim), min_size=1, max_size=3)))
        args.append(obj)
        jargs.append(obj)
        if name == "insert":
            vals = values(data, dtype, data.draw(st.sampled_from([(), (1,)])), ints=(-3, 3))
            args.append(pto.tensor(vals))
            jargs.append(vals)
        params["axis"] = axis
    elif name == "ediff1d":
        if dtype is BOOL:
            return  # (JAX subtracts bools with lax.sub, which refuses them; so does pypto)
        params["to_begin"] = data.draw(st.sampled_from([None, 7, np.array([1, 2])]), label="begin")
        params["to_end"] = data.draw(st.sampled_from([None, -1]), label="end")
    else:
        if dtype is BOOL:
            dtype = pto.int8
        v = values(data, dtype, (shape[0],), -2.0, 2.0, ints=(-2, 2))
        args, jargs = [pto.tensor(v)], [v]
        params["N"] = data.draw(st.sampled_from([None, 0, 3]), label="N")
        params["increasing"] = data.draw(st.booleans(), label="increasing")
    out = getattr(pto, name)(*args, **params)
    want = ref(name)(*jargs, **params)
    for o, w in zip(_as_list(out), _as_list(want), strict=True):
        assert_matches(o, w, 4, what=f"{name} {params}")


@case("gcd", "lcm", dtypes=(pto.int32, pto.int8), group="library")
def _gcd_lcm(data: Draw, dtype: pto.DType, name: str) -> None:
    big = 2**31 - 1 if dtype is pto.int32 else 127
    # (not int8's -128: |-128| overflows, and JAX's gcd loop never ends on it)
    ints = st.integers(-big, big) | st.integers(-30, 30)
    shape = data.draw(shapes(max_dims=2), label="shape")
    a = np.asarray(
        data.draw(st.lists(ints, min_size=math.prod(shape), max_size=math.prod(shape))), dtype.np
    ).reshape(shape)
    b = np.asarray(
        data.draw(st.lists(ints, min_size=math.prod(shape[-1:]), max_size=math.prod(shape[-1:]))),
        dtype.np,
    )
    if name == "lcm":  # (a product past the dtype's range wraps differently in the two)
        m = 50 if dtype is pto.int32 else 10
        a, b = a % m, b % m
    x, y = operands(data, [a, b])
    assert_matches(getattr(pto, name)(x, y), ref(name)(a, b), what=f"{name} {a} {b}")


@case("frexp", "ldexp", dtypes=(pto.float32, pto.float16, pto.bfloat16, pto.int32), group="library")
def _exponents(data: Draw, dtype: pto.DType, name: str) -> None:
    """Normal-range values against JAX (its CPU backend flushes subnormals, so those are
    checked against numpy in test_frexp_and_ldexp_keep_subnormals)."""
    shape = data.draw(shapes(min_dims=1), label="shape")
    a = values(data, dtype, shape, -1e4, 1e4, ints=(-1000, 1000), specials=SPECIALS)
    if dtype.is_floating:
        tiny = float(
            np.finfo(np.float32).tiny if dtype is not pto.float16 else np.finfo(np.float16).tiny
        )
        a = np.where(np.abs(a.astype(np.float32)) < tiny, 0, a).astype(a.dtype)
    x = as_input(data, a, allow_numpy=False)
    if name == "frexp":
        outs, wants = pto.frexp(x), ref(name)(a)
    else:
        n = values(data, pto.int32, shape[-1:], ints=(-20, 20))
        outs, wants = (pto.ldexp(x, pto.tensor(n)),), (ref(name)(a, n),)
    for o, w in zip(_as_list(outs), _as_list(wants), strict=True):
        assert_matches(o, w, what=f"{name} {a}")


@case("setdiff1d", "union1d", "intersect1d", "setxor1d", dtypes=LAYOUT_DTYPES, group="library")
def _set_ops(data: Draw, dtype: pto.DType, name: str) -> None:
    """Repeats, NaN and padding; ``size`` from 1 (JAX's setdiff1d fails on size=0)."""
    a = values(
        data,
        dtype,
        (data.draw(st.integers(0, 6), label="n1"),),
        -3.0,
        3.0,
        ints=(-3, 3),
        discrete=True,
        specials=(np.nan,),
    )
    b = values(
        data,
        dtype,
        (data.draw(st.integers(0, 4), label="n2"),),
        -3.0,
        3.0,
        ints=(-3, 3),
        discrete=True,
        specials=(np.nan,) if name == "setxor1d" else (),
    )
    params: dict[str, Any] = {}
    if data.draw(st.booleans(), label="sized"):
        params["size"] = data.draw(st.integers(1, 8), label="size")
        if data.draw(st.booleans(), label="fill"):
            params["fill_value"] = 1
    args: list[Any] = [a, b]
    if name != "union1d" and data.draw(st.booleans(), label="assume_unique"):

        def distinct(v: np.ndarray) -> np.ndarray:
            v = v[~np.isnan(v.astype(np.float32))]  # NaN is never unique's equal
            return v[np.sort(np.unique(v, return_index=True)[1])]

        a = distinct(a)
        b = distinct(b) if name != "setdiff1d" else b
        args = [a, b, True]
    if name == "intersect1d" and data.draw(st.booleans(), label="return_indices"):
        args = [a, b, len(args) == 3, True]
    x = as_input(data, a, allow_numpy=False)
    out = getattr(pto, name)(x, *args[1:], **params)
    if name == "intersect1d" and "size" in params and (not a.size or not b.size):
        # nothing in common: JAX pads with the one value there is, gives no indices for two
        # empty arrays, and fails on indices into one
        k, fill = params["size"], params.get("fill_value", 0)
        want: Any = np.full(k, fill, a.dtype)
        if len(args) == 4:
            want = (want, np.full(k, a.size, np.int32), np.full(k, b.size, np.int32))
    elif (
        name == "setdiff1d" and "size" in params and a.size and np.isnan(a.astype(np.float32)).all()
    ):
        # NaNs are one value, as without size (JAX's sized form keeps one NaN per NaN here)
        want = np.full(params["size"], params.get("fill_value", 0), a.dtype)
        want[0] = np.nan
    else:
        want = ref(name)(*args, **params)
        if name in ("intersect1d", "setxor1d") and a.dtype == np.bool_:
            # JAX pads bools with an int fill_value into int32; pypto keeps bool
            if isinstance(want, tuple):
                want = (np.asarray(want[0]).astype(np.bool_), *want[1:])
            else:
                want = np.asarray(want).astype(np.bool_)
    for o, w in zip(_as_list(out), _as_list(want), strict=True):
        assert_matches(o, w, what=f"{name} {a} {b} {args[2:]} {params}")


@case("cross", "kron", dtypes=DTYPES, group="library")
def _cross_kron(data: Draw, dtype: pto.DType, name: str) -> None:
    if dtype is BOOL:
        dtype = pto.int8  # JAX's cross subtracts bools; kron's int8 products wrap alike
    if name == "kron":
        sa, sb = data.draw(shapes(max_dims=3), label="a"), data.draw(shapes(max_dims=3), label="b")
        a, b = (values(data, dtype, s, -5.0, 5.0, ints=(-9, 9)) for s in (sa, sb))
        x, y = operands(data, [a, b])
        assert_matches(pto.kron(x, y), jitted(ref(name))(a, b), what=f"kron {sa} {sb}")
        return
    sa, sb = data.draw(broadcast_shapes(2), label="shapes")
    la, lb = data.draw(st.sampled_from([(3, 3), (2, 3), (3, 2), (2, 2)]), label="lengths")
    ia = data.draw(st.integers(0, len(sa)), label="axisa")
    ib = data.draw(st.integers(0, len(sb)), label="axisb")
    a = values(data, dtype, (*sa[:ia], la, *sa[ia:]), -5.0, 5.0, ints=(-9, 9))
    b = values(data, dtype, (*sb[:ib], lb, *sb[ib:]), -5.0, 5.0, ints=(-9, 9))
    nd = max(len(sa), len(sb)) + 1
    ic = data.draw(st.integers(-nd, nd - 1), label="axisc") if (la, lb) != (2, 2) else -1
    x, y = operands(data, [a, b])
    params = {"axisa": ia, "axisb": ib, "axisc": ic}
    out = pto.cross(x, y, **params)
    assert_matches(out, jitted(ref(name), tuple(params))(a, b, **params), 3, what=f"cross {params}")


def test_arctan2_takes_ieee_special_cases_as_jax_does() -> None:
    """Signed zeros choose the side and infinities give multiples of π/4: every pair of
    specials, the sign of each result included."""
    sp = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, np.nan], np.float32)
    y, x = np.meshgrid(sp, sp)
    got = np.asarray(pto.arctan2(y, x))
    want = np.asarray(jnp.arctan2(y, x))
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_solvers_refuse_what_they_cannot_solve() -> None:
    with pytest.raises(pto.ShapeError, match=r"inv: needs square matrices .* f32\[2,3\]"):
        pto.linalg.inv(pto.ones((2, 3)))
    with pytest.raises(pto.ShapeError, match=r"b f32\[2,4\] does not match .* needs 3 rows") as e:
        pto.linalg.solve(pto.ones((3, 3)), pto.ones((2, 4)))
    assert "solve(a, b[..., None])[..., 0]" in str(e.value)
    with pytest.raises(pto.ShapeError, match=r"batch axes of a .* do not broadcast"):
        pto.linalg.solve(pto.ones((2, 3, 3)), pto.ones((4, 3, 1)))
    with pytest.raises(pto.ShapeError, match="matrix_power: needs square"):
        pto.linalg.matrix_power(pto.ones((3,)), 2)
    with pytest.raises(pto.ShapeError, match=r"cross: vectors of length 2 or 3 only") as e:
        pto.cross(pto.ones((3, 4)), pto.ones((3, 4)))
    assert "axisa/axisb" in str(e.value)


def test_norm_errors() -> None:
    with pytest.raises(pto.ShapeError, match="ord=-2 of empty matrices"):
        pto.linalg.norm(pto.ones((0, 3)), -2)
    with pytest.raises(pto.ShapeError, match="needs a 1-d or 2-d tensor"):
        pto.linalg.norm(pto.ones((2, 3, 4)), 1)


def test_numpy_aliases_are_the_same_functions() -> None:
    for alias, name in [
        ("absolute", "abs"),
        ("concatenate", "concat"),
        ("amax", "max"),
        ("divide", "div"),
        ("power", "pow"),
        ("permute_dims", "transpose"),
        ("degrees", "rad2deg"),
        ("bitwise_invert", "bitwise_not"),
    ]:
        assert getattr(pto, alias) is getattr(pto, name), alias
    x = pto.tensor([[1, 2], [3, 4]])
    np.testing.assert_array_equal(pto.tile(x, 2), np.tile([[1, 2], [3, 4]], 2))
    assert callable(pto.tile.load)  # and pto.tile is still the tile language


# ---------------------------------------------------------------------------------------------
# The tests


def test_every_op_has_a_case() -> None:
    assert set(CASES) == set(OPS), (
        f"ops without a case: {sorted(set(OPS) - set(CASES))}; "
        f"cases without an op: {sorted(set(CASES) - set(OPS))}"
    )


def _params(group: str) -> list[Any]:
    return [
        pytest.param(n, d, id=f"{n}-{d.name}")
        for n, c in sorted(CASES.items())
        if c.group == group
        for d in c.dtypes
    ]


def _examples(n: int) -> int:
    """``n``, scaled by ``$PYPTO_VS_JAX_SCALE`` (e.g. 20 for a long local soak)."""
    return max(1, round(n * float(os.environ.get("PYPTO_VS_JAX_SCALE", "1"))))


def _run(name: str, dtype: pto.DType, data: Draw) -> None:
    CASES[name].fn(data, dtype, name)


@pytest.mark.parametrize(("name", "dtype"), _params("elementwise"))
@settings(max_examples=_examples(25))
@given(data=st.data())
def test_elementwise_matches_jax(name: str, dtype: pto.DType, data: Draw) -> None:
    _run(name, dtype, data)


@pytest.mark.parametrize(("name", "dtype"), _params("reduce"))
@settings(max_examples=_examples(30))
@given(data=st.data())
def test_reduction_matches_jax(name: str, dtype: pto.DType, data: Draw) -> None:
    _run(name, dtype, data)


@pytest.mark.parametrize(("name", "dtype"), _params("layout"))
@settings(max_examples=_examples(20))
@given(data=st.data())
def test_layout_matches_jax(name: str, dtype: pto.DType, data: Draw) -> None:
    _run(name, dtype, data)


@pytest.mark.parametrize(("name", "dtype"), _params("library"))
@settings(max_examples=_examples(4))
@given(data=st.data())
def test_library_matches_jax(name: str, dtype: pto.DType, data: Draw) -> None:
    """numpy's library functions and jax.nn's activations: compositions of ops checked above,
    so few examples each — most draw new shapes, and JAX compiles its reference for each (a
    longer soak: $PYPTO_VS_JAX_SCALE=10)."""
    _run(name, dtype, data)


@pytest.mark.parametrize(("name", "dtype"), _params("heavy"))
@settings(max_examples=_examples(12))
@given(data=st.data())
def test_composite_and_matmul_match_jax(name: str, dtype: pto.DType, data: Draw) -> None:
    _run(name, dtype, data)


_KEYWORDS = {  # numpy's reduction keywords each function takes
    "sum": ("dtype", "initial", "where"),
    "prod": ("dtype", "initial", "where"),
    "max": ("initial", "where"),
    "min": ("initial", "where"),
    "mean": ("dtype", "where"),
    "var": ("dtype", "where", "mean", "correction"),
    "std": ("dtype", "where", "mean", "correction"),
    "any": ("where",),
    "all": ("where",),
    "nansum": ("dtype", "initial", "where"),
    "nanprod": ("dtype", "initial", "where"),
    "nanmax": ("initial", "where"),
    "nanmin": ("initial", "where"),
    "nanmean": ("dtype", "where"),
    "nanvar": ("dtype", "where", "mean"),
    "nanstd": ("dtype", "where", "mean"),
}


@pytest.mark.parametrize("name", sorted(_KEYWORDS))
@settings(max_examples=_examples(25))
@given(data=st.data())
def test_reduction_keywords_match_jax(name: str, data: Draw) -> None:
    """``dtype``, ``initial``, ``where`` (a mask of the operand's shape or one that
    broadcasts to it), a variance's ``mean`` and ``correction``, as function and method,
    eagerly and under jit."""
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    shape = data.draw(shapes(max_dims=3), label="shape")
    a = values(data, dtype, shape, -4.0, 4.0, ints=(-4, 4), specials=(np.nan,))
    axis = _axes(data, len(shape))
    kw: dict[str, Any] = {"axis": axis, "keepdims": data.draw(st.booleans(), label="keepdims")}
    allowed = _KEYWORDS[name]
    plain = name.removeprefix("nan")
    mask = _mask(data, shape) if "where" in allowed else None
    if mask is not None:
        kw["where"] = mask
    if "initial" in allowed and (data.draw(st.booleans(), label="initial") or "where" in kw):
        kw["initial"] = data.draw(st.sampled_from([-2, 0, 3]), label="initial")
    if plain in ("max", "min") and "where" not in kw and "initial" not in kw:
        kw["initial"] = 1  # (an empty axis needs it)
    if "dtype" in allowed and data.draw(st.booleans(), label="with dtype"):
        floats = [d for d in DTYPES if d.is_floating]
        # an integer mean of nothing divides by an integer 0: JAX's compile dies of SIGFPE on
        # a constant count, and gives -1 at run time (a row of NaNs is nothing to nanmean)
        empty = "where" in kw or 0 in [shape[i] for i in _norm_axes(axis, len(shape))]
        only_floats = plain in ("var", "std") or name == "nanmean" or (name == "mean" and empty)
        numeric = [d for d in DTYPES if d is not BOOL or plain != "mean"]  # (JAX refuses it)
        kw["dtype"] = data.draw(st.sampled_from(floats if only_floats else numeric))
    if "mean" in allowed and data.draw(st.booleans(), label="with mean"):
        kept = tuple(1 if i in _norm_axes(axis, len(shape)) else n for i, n in enumerate(shape))
        kw["mean"] = data.draw(_hnp.arrays(np.float32, kept, elements=st.floats(-2, 2, width=32)))
    if "correction" in allowed and data.draw(st.booleans(), label="with correction"):
        kw["correction"] = data.draw(st.sampled_from([0, 0.5, 1, 2.0]), label="correction")
    elif plain in ("var", "std"):
        kw["ddof"] = data.draw(st.sampled_from([0, 1]), label="ddof")
    jkw = {k: (v.np if isinstance(v, pto.DType) else v) for k, v in kw.items()}
    want = getattr(jnp, name)(a, **jkw)
    x = pto.tensor(a)
    k = 4 * max(1, a.size)
    assert_matches(getattr(pto, name)(x, **kw), want, k, what=f"{name} {kw}")
    if hasattr(x, name):
        assert_matches(getattr(x, name)(**kw), want, k, what=f"method {name}")
    traced = pto.jit(lambda t: getattr(pto, name)(t, **kw), backend="interpret")
    assert_matches(traced(x), want, k, what=f"jit {name}")


def test_reduction_keywords_refuse_what_numpy_refuses() -> None:
    x = pto.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    with pytest.raises(pto.ShapeError, match="needs initial"):
        pto.max(x, where=np.array([True, False, True]))
    with pytest.raises(pto.ShapeError, match="does not broadcast"):
        pto.sum(x, where=np.array([True, False]))
    with pytest.raises(pto.ShapeError, match="initial must be a scalar"):
        pto.sum(x, initial=np.ones(3))
    with pytest.raises(pto.TraceError, match="out= is not supported"):
        pto.mean(x, out=np.zeros(3))
    with pytest.raises(pto.DTypeError, match="a mean is a number"):
        pto.mean(x, dtype=pto.bool_)
    with pytest.raises(pto.DTypeError, match="a variance is a float"):
        pto.var(x, dtype=pto.int32)
    with pytest.raises(TypeError, match="dtype"):
        pto.max(x, dtype=pto.float16)  # type: ignore[call-arg]
    with pytest.raises(pto.ShapeError, match=r"ddof=1 and correction=1\.5 were both given"):
        pto.var(x, ddof=1, correction=1.5)
    with pytest.raises(pto.DTypeError, match="correction must be a number"):
        pto.std(x, correction="1")
    with pytest.raises(
        pto.ShapeError, match=r"mean of shape \(3,\) does not broadcast to \(2, 1\)"
    ):
        pto.var(x, 1, mean=np.zeros(3, np.float32))
    with pytest.raises(pto.ShapeError, match="needs initial"):
        pto.nanmax(x, where=np.array([True, False, True]))
    with pytest.raises(pto.DTypeError, match="a variance is a float"):
        pto.nanvar(x, dtype=pto.int8)
    with pytest.raises(pto.DTypeError, match="a mean is a number"):
        pto.nanmean(x, dtype=pto.bool_)


@settings(max_examples=_examples(20))
@given(data=st.data())
def test_trim_zeros_matches_jax(data: Draw) -> None:
    """Eager only: the result's shape depends on the values (a TraceError under jit)."""
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), label="shape")
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    a = values(data, dtype, shape, -1.0, 1.0, ints=(0, 1), discrete=True)
    trim = data.draw(st.sampled_from(["fb", "f", "b", "FB"]), label="trim")
    axis = data.draw(st.sampled_from([None, 0, -1]), label="axis")
    out = pto.trim_zeros(as_input(data, a), trim, axis)
    assert_matches(out, jnp.trim_zeros(a, trim.lower(), axis), what=f"{shape} {trim} {axis}")
    with pytest.raises(pto.TraceError, match="depends on the values"):
        pto.jit(pto.trim_zeros, backend="interpret")(pto.tensor(a))


def test_mask_indices_and_frombuffer_match_jax() -> None:
    for n, k in ((3, 0), (4, 1), (4, -2), (0, 0)):
        for pf, jf in ((pto.triu, jnp.triu), (pto.tril, jnp.tril)):
            for size in (None, 5):
                got = pto.mask_indices(n, pf, k, size=size)
                want = jnp.mask_indices(n, jf, k, size=size)
                for g, w in zip(got, want, strict=True):
                    assert_matches(g, w, what=f"mask_indices {n} {k} {size}")
    # inside jit the indices are constants
    f = pto.jit(lambda x: x[pto.mask_indices(3, pto.tril, -1)], backend="interpret")
    assert f(pto.tensor(np.arange(9.0).reshape(3, 3))).numpy().tolist() == [3.0, 6.0, 7.0]
    raw = np.arange(6, dtype=np.float32).tobytes()
    for args in ((), (int,), (pto.float32,), (pto.int8, 5, 3), (pto.float32, 2, 8)):
        jargs = tuple(a.np if isinstance(a, pto.DType) else a for a in args)
        assert_matches(pto.frombuffer(raw, *args), jnp.frombuffer(raw, *jargs), what=str(args))
    with pytest.raises(pto.ShapeError, match="frombuffer"):
        pto.frombuffer(raw, pto.float32, 10)
