"""Elementwise primitives: unary math, binary arithmetic, comparisons, select and cast.

Binary primitives take operands of one dtype (the API layer promotes first, as JAX's
``promote_args`` does) and broadcast their shapes. Math on float16/bfloat16 is computed in
float32 and rounded once to the declared dtype (DESIGN §6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import DTypeError
from pypto.ops import rules
from pypto.ops.table import AVal, Op, Shape, register

_F32 = np.dtype(np.float32)
_LOWP = (dt.float16.np, dt.bfloat16.np)
NUMERIC = (dt.float32, dt.float16, dt.bfloat16, dt.int32, dt.int8)
INTS = (dt.int32, dt.int8)


def in_f32(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``fn`` computed in float32 on float16/bfloat16 inputs and rounded back once."""

    def impl(*xs: np.ndarray) -> np.ndarray:
        d = xs[0].dtype
        if d in _LOWP:
            return np.asarray(fn(*(x.astype(_F32) for x in xs))).astype(d)
        return np.asarray(fn(*xs))

    impl.__name__ = getattr(fn, "__name__", "impl")
    impl.raw = fn  # type: ignore[attr-defined]  # the float32 (and integer) function itself
    return impl


def per_dtype(op: Op) -> dict[np.dtype[Any], Callable[..., np.ndarray]]:
    """numpy dtype -> the function computing ``op`` on arrays of that dtype (eager fast path)."""
    impl: Callable[..., np.ndarray] = op.impl  # type: ignore[assignment]
    raw: Callable[..., np.ndarray] = getattr(impl, "raw", impl)
    return {d.np: (impl if d.np in _LOWP else raw) for d in op.dtypes}


def _shape_n(name: str) -> Callable[..., Shape]:
    def rule(*avals: AVal, **params: Any) -> Shape:
        if len(avals) == 1:
            return avals[0].shape
        return rules.broadcast_shapes(name, *avals)

    return rule


def _dtype_same(name: str, allowed: tuple[dt.DType, ...], why: str) -> Callable[..., dt.DType]:
    def rule(*avals: AVal, **params: Any) -> dt.DType:
        d = rules.same_dtype(name, *avals)
        rules.check_dtype(name, avals, allowed, why)
        return d

    return rule


def _elementwise(
    name: str,
    impl: Callable[..., np.ndarray],
    jax_impl: Callable[..., Any],
    doc: str,
    *,
    allowed: tuple[dt.DType, ...] = dt.ALL,
    why: str = "",
    factor: int = 1,
    out_dtype: dt.DType | None = None,
    differentiable: bool = True,
) -> Op:
    same = _dtype_same(name, allowed, why or f"{name} does not accept this dtype")

    def dtype_rule(*avals: AVal, **params: Any) -> dt.DType:
        d = same(*avals)
        return out_dtype if out_dtype is not None else d

    return register(
        Op(
            name=name,
            kind="elementwise",
            doc=doc,
            shape_rule=_shape_n(name),
            dtype_rule=dtype_rule,
            impl=impl,
            jax_impl=jax_impl,
            cost_rule=rules.elementwise_cost(factor),  # type: ignore[arg-type]
            differentiable=differentiable,
            dtypes=allowed,
            vector_factor=factor,
        )
    )


_FLOAT_WHY = "{} is defined on floating tensors (integer inputs are promoted to float32 first)"


def _float_unary(
    name: str, fn: Callable[..., Any], jfn: Callable[..., Any], doc: str, f: int
) -> Op:
    return _elementwise(
        name, in_f32(fn), jfn, doc, allowed=dt.FLOATS, why=_FLOAT_WHY.format(name), factor=f
    )


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # 1 / (1 + e^-x): where e^-x overflows to inf the result is 0, as it should be; in place,
    # to touch memory once per step.
    t = np.asarray(np.exp(-x))  # 0-d inputs give numpy scalars, which cannot be written
    t += 1
    return np.reciprocal(t, out=t)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.reciprocal(np.sqrt(x))


EXP = _float_unary("exp", np.exp, jnp.exp, "e to the power x", 4)
LOG = _float_unary("log", np.log, jnp.log, "natural logarithm", 4)
SQRT = _float_unary("sqrt", np.sqrt, jnp.sqrt, "square root", 2)
RSQRT = _float_unary("rsqrt", _rsqrt, jax.lax.rsqrt, "1 / sqrt(x)", 2)
RECIPROCAL = _float_unary("reciprocal", np.reciprocal, jnp.reciprocal, "1 / x", 2)
TANH = _float_unary("tanh", np.tanh, jnp.tanh, "hyperbolic tangent", 4)
SIGMOID = _float_unary("sigmoid", _sigmoid, jax.nn.sigmoid, "logistic 1 / (1 + e^-x)", 4)
SIN = _float_unary("sin", np.sin, jnp.sin, "sine (radians)", 4)
COS = _float_unary("cos", np.cos, jnp.cos, "cosine (radians)", 4)


def _identity(x: np.ndarray) -> np.ndarray:
    return np.array(x, copy=True)


STOP_GRADIENT = _elementwise(
    "stop_gradient",
    _identity,
    jax.lax.stop_gradient,
    "x, with a zero derivative: autodiff treats it as a constant (dropped before tiling)",
)

OPTIMIZATION_BARRIER = _elementwise(
    "optimization_barrier",
    _identity,
    jax.lax.optimization_barrier,
    "x, opaque to the tensor passes until they finish (dropped before fusion): CSE never "
    "merges a value computed after it with one computed before",
)


def _named(x: np.ndarray, *, name: str) -> np.ndarray:
    return _identity(x)


def _jax_named(x: Any, *, name: str) -> Any:
    from jax.ad_checkpoint import checkpoint_name

    return checkpoint_name(x, name)


CHECKPOINT_NAME = _elementwise(
    "checkpoint_name",
    _named,
    _jax_named,
    "x, tagged with `name` for a `pto.checkpoint` policy (dropped before tiling)",
)

_NOBOOL = "{} is not defined on bool tensors"
NEG = _elementwise(
    "neg", np.negative, jnp.negative, "-x", allowed=NUMERIC, why=_NOBOOL.format("neg")
)
ABS = _elementwise("abs", np.abs, jnp.abs, "|x|", allowed=NUMERIC, why=_NOBOOL.format("abs"))

# Native numpy loops on float16/bfloat16 compute in float32 and round once for these
# (double rounding through float32 is exact for + - * / max min), so no explicit upcast.
ADD = _elementwise("add", np.add, jnp.add, "x + y (logical or on bool)")
SUB = _elementwise(
    "sub", np.subtract, jnp.subtract, "x - y", allowed=NUMERIC, why=_NOBOOL.format("sub")
)
MUL = _elementwise("mul", np.multiply, jnp.multiply, "x * y (logical and on bool)")
DIV = _elementwise(
    "div",
    np.true_divide,
    jnp.true_divide,
    "x / y, true division",
    allowed=dt.FLOATS,
    why=_FLOAT_WHY.format("div"),
    factor=2,
)
MAXIMUM = _elementwise("maximum", np.maximum, jnp.maximum, "elementwise max (NaN propagates)")
MINIMUM = _elementwise("minimum", np.minimum, jnp.minimum, "elementwise min (NaN propagates)")


def float_power(x: np.ndarray, y: Any) -> np.ndarray:
    """``np.power`` with C99's (and JAX's) value for a base of -inf and a non-integer
    exponent: ``(-inf) ** 0.5`` is inf (and ``(-inf) ** -0.5`` is 0), where numpy gives nan."""
    r = np.power(x, y)
    neg = np.isneginf(x)
    if not neg.any():
        return r
    yb = np.broadcast_to(y, r.shape)
    fix = np.broadcast_to(neg, r.shape) & np.isfinite(yb) & (yb != np.floor(yb))
    return np.where(fix, np.where(yb > 0, np.inf, 0.0).astype(r.dtype), r)


def _pow(x: np.ndarray, y: np.ndarray | float) -> np.ndarray:
    y = np.asarray(y, x.dtype)  # the eager fast path passes a weak Python scalar as is
    if x.dtype.kind == "i":
        if np.any(y < 0):
            raise DTypeError(
                f"integer pow with a negative exponent "
                f"(x: {AVal(x.shape, dt.from_numpy(x.dtype))})",
                op="pow",
                hint="cast the base to a float dtype first",
            )
        return np.power(x, y)
    return in_f32(float_power)(x, y)


POW = _elementwise(
    "pow", _pow, jnp.power, "x ** y", allowed=NUMERIC, why=_NOBOOL.format("pow"), factor=8
)


def _fmod(x: np.ndarray, y: np.ndarray | float) -> np.ndarray:
    y = np.asarray(y, x.dtype)  # the eager fast path passes a weak Python scalar as is
    if x.dtype.kind == "i":
        # an integer divisor of 0 counts as 1 (the remainder is 0), as jnp.fmod does
        return np.fmod(x, np.where(y == 0, np.ones((), x.dtype), y))
    return in_f32(np.fmod)(x, y)


FMOD = _elementwise(
    "fmod",
    _fmod,
    jnp.fmod,
    "remainder of truncated division, the sign of x (C's fmod; an integer x % 0 is 0)",
    allowed=NUMERIC,
    why=_NOBOOL.format("fmod"),
    factor=2,
)

_BITS = "{} works on the bits of integers (bool tensors: use the logical functions, as & | ^ ~ do)"


def bit_shift(left: bool) -> Callable[..., np.ndarray]:
    """A shift with JAX's (XLA's) meaning for every amount: beyond the width, or negative, a
    left shift gives 0 and a right shift (arithmetic) the sign."""

    def impl(x: np.ndarray, s: np.ndarray | int) -> np.ndarray:
        s = np.asarray(s, x.dtype)
        bits = 8 * x.dtype.itemsize
        out = (np.left_shift if left else np.right_shift)(x, np.clip(s, 0, bits - 1))
        fill = np.zeros((), x.dtype) if left else np.where(x < 0, -1, 0).astype(x.dtype)
        return np.where((s < 0) | (s >= bits), fill, out).astype(x.dtype)

    impl.__name__ = "left_shift" if left else "right_shift"
    return impl


_BIT_OPS: dict[str, tuple[Callable[..., np.ndarray], Callable[..., Any], str]] = {
    "bitwise_and": (np.bitwise_and, jnp.bitwise_and, "x & y, bit by bit (integers)"),
    "bitwise_or": (np.bitwise_or, jnp.bitwise_or, "x | y, bit by bit (integers)"),
    "bitwise_xor": (np.bitwise_xor, jnp.bitwise_xor, "x ^ y, bit by bit (integers)"),
    "bitwise_not": (np.invert, jnp.invert, "~x, every bit flipped (integers)"),
    "left_shift": (
        bit_shift(True),
        jnp.left_shift,
        "x << s (0 for an amount outside 0 .. bits-1, as in JAX)",
    ),
    "right_shift": (
        bit_shift(False),
        jnp.right_shift,
        "x >> s, arithmetic (the sign for an amount outside 0 .. bits-1, as in JAX)",
    ),
}
BITWISE_AND, BITWISE_OR, BITWISE_XOR, BITWISE_NOT, LEFT_SHIFT, RIGHT_SHIFT = (
    _elementwise(n, f, j, doc, allowed=INTS, why=_BITS.format(n), differentiable=False)
    for n, (f, j, doc) in _BIT_OPS.items()
)

_CMP_DOC = "elementwise comparison giving bool"
EQUAL = _elementwise(
    "equal", np.equal, jnp.equal, _CMP_DOC, out_dtype=dt.bool_, differentiable=False
)
NOT_EQUAL = _elementwise(
    "not_equal", np.not_equal, jnp.not_equal, _CMP_DOC, out_dtype=dt.bool_, differentiable=False
)
LESS = _elementwise("less", np.less, jnp.less, _CMP_DOC, out_dtype=dt.bool_, differentiable=False)
LESS_EQUAL = _elementwise(
    "less_equal",
    np.less_equal,
    jnp.less_equal,
    _CMP_DOC,
    out_dtype=dt.bool_,
    differentiable=False,
)
GREATER = _elementwise(
    "greater", np.greater, jnp.greater, _CMP_DOC, out_dtype=dt.bool_, differentiable=False
)
GREATER_EQUAL = _elementwise(
    "greater_equal",
    np.greater_equal,
    jnp.greater_equal,
    _CMP_DOC,
    out_dtype=dt.bool_,
    differentiable=False,
)


def _where_dtype(c: AVal, x: AVal, y: AVal) -> dt.DType:
    if c.dtype is not dt.bool_:
        raise DTypeError(f"condition must be bool, got {rules.show((c, x, y))}", op="where")
    return rules.same_dtype("where", x, y)


WHERE = register(
    Op(
        name="where",
        kind="elementwise",
        doc="select x where cond else y",
        shape_rule=_shape_n("where"),
        dtype_rule=_where_dtype,
        impl=np.where,
        jax_impl=jnp.where,
        cost_rule=rules.elementwise_cost(1),  # type: ignore[arg-type]
    )
)


def _cast_impl(x: np.ndarray, *, dtype: dt.DType) -> np.ndarray:
    if (x.dtype.kind == "f" or x.dtype in _LOWP) and dtype.is_integer:
        # float -> int truncates toward zero, as JAX does; out-of-range values saturate (in
        # float64, where int32's bounds are exact: float32(2**31 - 1) is 2**31) and NaN gives 0.
        info = np.iinfo(dtype.np)
        f = np.trunc(x.astype(np.float64))
        return np.clip(np.nan_to_num(f, nan=0.0), info.min, info.max).astype(dtype.np)
    return x.astype(dtype.np)


def _cast_jax(x: Any, *, dtype: dt.DType) -> Any:
    return jax.lax.convert_element_type(x, dtype.np)


def bitcast_dtype(x: AVal, *, dtype: dt.DType) -> dt.DType:
    if x.dtype is dt.bool_ or dtype is dt.bool_ or x.dtype.itemsize != dtype.itemsize:
        same = [
            d.name
            for d in dt.ALL
            if d is not x.dtype and d is not dt.bool_ and d.itemsize == x.dtype.itemsize
        ]
        raise DTypeError(
            f"{x} to {dtype}: a bitcast keeps the bits, so both dtypes need the same element "
            f"size ({x.dtype.itemsize} and {dtype.itemsize} bytes) and neither may be bool",
            op="bitcast_convert_type",
            hint=f"{x.dtype} bitcasts to {', '.join(same)}" if same else "cast with .astype",
        )
    return dtype


def _bitcast_impl(x: np.ndarray, *, dtype: dt.DType) -> np.ndarray:
    return x.view(dtype.np)


def _bitcast_jax(x: Any, *, dtype: dt.DType) -> Any:
    return jax.lax.bitcast_convert_type(x, dtype.np)


BITCAST = register(
    Op(
        name="bitcast_convert_type",
        kind="elementwise",
        doc="the same bits read as another dtype of the same size (float32 ↔ int32, float16 ↔ "
        "bfloat16)",
        shape_rule=lambda x, *, dtype: x.shape,
        dtype_rule=bitcast_dtype,
        impl=_bitcast_impl,
        jax_impl=_bitcast_jax,
        cost_rule=rules.elementwise_cost(1),  # type: ignore[arg-type]
        differentiable=False,
        dtypes=(dt.float32, dt.float16, dt.bfloat16, dt.int32),  # no other size has a partner
    )
)


CAST = register(
    Op(
        name="cast",
        kind="elementwise",
        doc="convert to another dtype (float -> int truncates toward zero)",
        shape_rule=lambda x, *, dtype: x.shape,
        dtype_rule=lambda x, *, dtype: dtype,
        impl=_cast_impl,
        jax_impl=_cast_jax,
        cost_rule=rules.elementwise_cost(1),  # type: ignore[arg-type]
    )
)
