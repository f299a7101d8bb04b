"""The functional API: one function per op, promoting operands as JAX does, then binding.

These functions work in every mode: they hand the op to the current trace (eager evaluation,
or a graph tracer), so the same user code runs eagerly or staged.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core import dispatch
from pypto.core.errors import BoundsError, DTypeError, PyptoError, ShapeError, TraceError
from pypto.ops import elementwise as ew
from pypto.ops import layout, linalg, reduce, rules
from pypto.ops.table import AVal, Op, Shape, Value

_NO: dict[str, Any] = {}
_bind = dispatch.bind
_stack = dispatch._stack
_F32 = np.dtype(np.float32)
_LOWP = (dt.float16.np, dt.bfloat16.np)
_FLOAT_NP = frozenset(d.np for d in dt.FLOATS)


_new = object.__new__
_ndarray = np.ndarray


class _NotYet:
    """Stands in for the eager Tensor type until eager mode registers itself."""


# The eager fast path: when the eager trace is the only one active and the operands are eager
# tensors of an accepted dtype, an op calls its numpy function directly. Anything else takes the
# general path (promotion, bind, the trace), which also produces every error message. A public
# function re-raises a PyptoError with ``e.stripped()`` from its general path, so the user's
# traceback holds their own line and that one function, never the rules below it.
_ET: type = _NotYet
_EAGER_TRACE: object = None


def _eager_wrap(a: Any) -> Any:
    raise AssertionError("eager mode not registered")


def register_eager(tensor_type: type, wrap: Any, trace: object) -> None:
    """Called once by eager mode: its Tensor type, array wrapper and trace."""
    global _ET, _eager_wrap, _EAGER_TRACE
    _ET, _eager_wrap, _EAGER_TRACE = tensor_type, wrap, trace


ArrayLike = Any  # Tensor, tracer, numpy array, nested list or Python scalar
Axis = int | Sequence[int] | None


def asvalue(x: ArrayLike, op: str = "tensor") -> Value:
    """``x`` as a value of the current trace (non-tensors become constants, dtype canonicalized)."""
    if isinstance(x, Value):
        return x
    return dispatch.current_trace().const(to_numpy(x, op))  # type: ignore[attr-defined]


def to_numpy(x: Any, op: str = "tensor", dtype: dt.DType | None = None) -> np.ndarray:
    """A numpy array with a pypto dtype: float64 → float32, int64 → int32 (as JAX does)."""
    try:
        a = np.asarray(x)
    except ValueError as e:  # a ragged nested list
        raise ShapeError(f"cannot make a tensor from {type(x).__name__}: {e}", op=op) from None
    except TypeError as e:
        raise DTypeError(f"cannot make a tensor from {type(x).__name__}: {e}", op=op) from None
    if a.dtype.kind in "OSUVcmM" and a.dtype not in dt._BY_NP:  # bfloat16 is of kind V
        raise _unsupported(x, a, op)
    if dtype is not None:
        if not isinstance(x, np.ndarray) and a.dtype.kind in "iu" and dtype.is_integer:
            _check_fits(x, a, dtype, op)  # Python ints, as numpy 2 and JAX refuse them
        return a.astype(dtype.np)
    # What is left is bool, int, uint or float; the bools and the pypto dtypes are in _BY_NP.
    d = dt._BY_NP.get(a.dtype) or _BY_KIND[a.dtype.kind]
    if d.np != a.dtype:
        if a.dtype.kind in "iu":
            _check_fits(x, a, d, op)
        a = a.astype(d.np)
    return a


_BY_KIND = {"i": dt.int32, "u": dt.int32, "f": dt.float32}


def _np_show(a: np.ndarray) -> str:
    """``complex64[3]``: a numpy array as operands appear in messages."""
    return f"{a.dtype}[{','.join(map(str, a.shape))}]"


def _unsupported(x: Any, a: np.ndarray, op: str) -> DTypeError:
    what = f"{type(x).__name__} of {_np_show(a)}"
    if a.dtype.kind == "O" and a.size and all(type(v) is int for v in a.flat):
        big = builtins.max(a.flat, key=builtins.abs)
        return DTypeError(
            f"integer value {_show_int(big)} does not fit int32 ({type(x).__name__})",
            op=op,
            hint="int32 is the widest integer; use a float tensor for larger magnitudes",
        )
    if a.dtype.kind == "c":
        return DTypeError(
            f"complex numbers are not supported ({what})",
            op=op,
            hint="pass the real and imaginary parts as two real tensors",
        )
    return DTypeError(
        f"cannot make a tensor from {what}: the elements are not numbers",
        op=op,
        hint="pass numbers: a Tensor, a numpy array, a list or a Python scalar",
    )


def _check_fits(x: Any, a: np.ndarray, d: dt.DType, op: str) -> None:
    info = np.iinfo(d.np)
    if a.size and (a.min() < info.min or a.max() > info.max):
        bad = a.max() if a.max() > info.max else a.min()
        of = f" of {_np_show(a)}" if isinstance(x, np.ndarray) else ""
        raise DTypeError(
            f"integer value {bad}{of} does not fit {d} (range [{info.min}, {info.max}])",
            op=op,
            hint="use values that fit, or a wider dtype (int32 is the widest integer)",
        )


def _show_int(i: object) -> str:
    s = str(i)
    return s if len(s) <= 24 else f"{s[:8]}... ({len(s)} digits)"


def _scalar(x: bool | int | float, d: dt.DType, op: str, operands: Sequence[Any]) -> Value:
    try:
        if d.is_integer and type(x) is int:
            info = np.iinfo(d.np)
            if not info.min <= x <= info.max:
                raise OverflowError
        a = np.asarray(x, d.np)
    except OverflowError:
        avals = [_aval(v) for v in operands if isinstance(v, Value)]
        whose = f"the dtype of {rules.show(avals)}" if avals else "the default for Python ints"
        if d.is_integer:
            info = np.iinfo(d.np)
            rng = f"range [{info.min}, {info.max}]"
            hint = f"use a value that fits {d}, or cast the tensor to a wider dtype first"
            if d is dt.int8:
                hint += ", e.g. x.astype(pto.int32)"
        else:
            rng = f"magnitudes up to {float(dt.finfo(d).max):.6g}"
            hint = "an int this large overflows every float dtype; write it as a float"
        raise DTypeError(
            f"Python {type(x).__name__} {_show_int(x)} does not fit {d}, {whose} ({rng})",
            op=op,
            hint=hint,
        ) from None
    return dispatch.current_trace().const(a)  # type: ignore[attr-defined]


def promote(op: str, args: Sequence[ArrayLike], inexact: bool = False) -> list[Value]:
    """Operands cast to their common dtype (JAX's lattice, weak Python scalars).

    With ``inexact``, integer and bool results are promoted further to float32, as
    ``jnp.exp`` or true division do.
    """
    strong: dt.DType | None = None
    weak = -1
    vals: list[Any] = []
    for a in args:
        k = dt.weak_kind(a)
        if k is not None:
            weak = builtins.max(weak, k)
            vals.append(a)
            continue
        v = asvalue(a, op)
        vals.append(v)
        d = v.dtype  # type: ignore[attr-defined]
        strong = d if strong is None else dt._join(strong, d)
    target = strong if weak < 0 else dt.promote_with_weak(strong, weak)
    assert target is not None
    if inexact and not target.is_floating:
        target = dt.float32
    out: list[Value] = []
    for v in vals:
        if not isinstance(v, Value):
            out.append(_scalar(v, target, op, vals))
        elif v.dtype is not target:  # type: ignore[attr-defined]
            out.append(_bind(ew.CAST, (v,), {"dtype": target}))
        else:
            out.append(v)
    return out


def _sentence(doc: str) -> str:
    """An op's one-line doc as the start of a sentence (``capitalize`` would lower the rest:
    NaN, JAX)."""
    return doc[:1].upper() + doc[1:]


def _example_dtype(op: Op) -> str:
    """The dtype argument of a docstring example's ``pto.ones``: int32 for integer-only ops."""
    return "" if dt.float32 in op.dtypes else ", pto.int32"


def _unary(op: Op, inexact: bool = False) -> Any:
    fast = ew.per_dtype(op)

    def fn(x: ArrayLike, /) -> Any:
        if type(x) is _ET and _stack[-1] is _EAGER_TRACE:
            f = fast.get(x._a.dtype)  # type: ignore[attr-defined]
            if f is not None:
                # The result Tensor is built inline: a call to a wrapper costs a frame per op.
                r = f(x._a)  # type: ignore[attr-defined]
                t = _new(_ET)
                t._a = r if type(r) is _ndarray else np.asarray(r)
                return t
        try:
            return _bind(op, tuple(promote(op.name, (x,), inexact)), _NO)
        except PyptoError as e:
            raise e.stripped() from None

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = (
        f"{_sentence(op.doc)}, elementwise.\n\n>>> import pypto as pto\n"
        f">>> pto.{op.name}(pto.ones(3{_example_dtype(op)})).shape\n(3,)\n"
    )
    return fn


def _binary(op: Op, inexact: bool = False) -> Any:
    fast = ew.per_dtype(op)
    native = not hasattr(op.impl, "raw")  # numpy's own loop rounds a weak scalar as JAX does

    def fn(x: ArrayLike, y: ArrayLike, /) -> Any:
        if type(x) is _ET and _stack[-1] is _EAGER_TRACE:
            a = x._a  # type: ignore[attr-defined]
            ty = type(y)
            if ty is _ET:
                b = y._a
                if a.dtype is b.dtype:
                    f = fast.get(a.dtype)
                    if f is not None:
                        try:
                            r = f(a, b)
                        except (ValueError, PyptoError):
                            pass  # a shape mismatch or a bad value: the general path explains it
                        else:
                            t = _new(_ET)
                            t._a = r if type(r) is _ndarray else np.asarray(r)
                            return t
            elif (ty is float or ty is int) and a.dtype in _FLOAT_NP:
                # A weak scalar takes a float tensor's dtype (numpy 2 agrees with JAX here).
                f = fast.get(a.dtype)
                if f is not None:
                    try:
                        return _eager_wrap(
                            f(a, y if native or a.dtype is _F32 else a.dtype.type(y))
                        )
                    except OverflowError:
                        pass  # an int beyond any float: the general path explains it
        try:
            return _bind(op, tuple(promote(op.name, (x, y), inexact)), _NO)
        except PyptoError as e:
            raise e.stripped() from None

    fn.__name__ = fn.__qualname__ = op.name
    d = _example_dtype(op)
    fn.__doc__ = (
        f"{_sentence(op.doc)}, elementwise with broadcasting and JAX promotion.\n\n"
        f">>> import pypto as pto\n"
        f">>> pto.{op.name}(pto.ones((2, 3){d}), pto.ones(3{d})).shape\n(2, 3)\n"
    )
    return fn


neg = _unary(ew.NEG)
stop_gradient = _unary(ew.STOP_GRADIENT)
stop_gradient.__doc__ = """``x`` itself, but a constant to autodiff (its cotangent is zero), as
``jax.lax.stop_gradient``. Softmax shifts by a stopped max, so its gradient skips the max.

>>> import pypto as pto
>>> pto.grad(lambda x: (x * pto.stop_gradient(x)).sum())(pto.tensor([3.0])).numpy()
array([3.], dtype=float32)
"""
optimization_barrier = _unary(ew.OPTIMIZATION_BARRIER)
optimization_barrier.__doc__ = """``x`` through one ``optimization_barrier`` equation (see
``pto.lax.optimization_barrier``).

>>> import pypto as pto
>>> pto.lax.optimization_barrier(pto.ones(3)).shape
(3,)
"""


def checkpoint_name(x: ArrayLike, name: str) -> Any:
    """``x``, tagged ``name`` for the policies of ``pto.checkpoint``
    (``jax.ad_checkpoint.checkpoint_name``): ``save_only_these_names(name)`` keeps it for
    the backward pass instead of recomputing it.

    >>> import pypto as pto
    >>> pto.checkpoint_name(pto.ones(2), "h").numpy()
    array([1., 1.], dtype=float32)
    """
    if not isinstance(name, str):
        raise TraceError(
            f"checkpoint_name needs a string name, got {type(name).__name__}",
            op="checkpoint_name",
            hint='e.g. pto.checkpoint_name(h, "hidden")',
        )
    return _bind(ew.CHECKPOINT_NAME, (asvalue(x, "checkpoint_name"),), {"name": name})


abs = _unary(ew.ABS)
exp = _unary(ew.EXP, inexact=True)
log = _unary(ew.LOG, inexact=True)
sqrt = _unary(ew.SQRT, inexact=True)
rsqrt = _unary(ew.RSQRT, inexact=True)
reciprocal = _unary(ew.RECIPROCAL, inexact=True)
tanh = _unary(ew.TANH, inexact=True)
sigmoid = _unary(ew.SIGMOID, inexact=True)
sin = _unary(ew.SIN, inexact=True)
cos = _unary(ew.COS, inexact=True)

add = _binary(ew.ADD)
sub = _binary(ew.SUB)
mul = _binary(ew.MUL)
div = _binary(ew.DIV, inexact=True)
pow = _binary(ew.POW)
fmod = _binary(ew.FMOD)
bitwise_and = _binary(ew.BITWISE_AND)
bitwise_or = _binary(ew.BITWISE_OR)
bitwise_xor = _binary(ew.BITWISE_XOR)
left_shift = _binary(ew.LEFT_SHIFT)
right_shift = _binary(ew.RIGHT_SHIFT)
bitwise_not = _unary(ew.BITWISE_NOT)
maximum = _binary(ew.MAXIMUM)
minimum = _binary(ew.MINIMUM)
equal = _binary(ew.EQUAL)
not_equal = _binary(ew.NOT_EQUAL)
less = _binary(ew.LESS)
less_equal = _binary(ew.LESS_EQUAL)
greater = _binary(ew.GREATER)
greater_equal = _binary(ew.GREATER_EQUAL)


def where(
    cond: ArrayLike,
    x: ArrayLike | None = None,
    y: ArrayLike | None = None,
    /,
    *,
    size: int | None = None,
    fill_value: Any = None,
) -> Any:
    """``x`` where ``cond`` holds, else ``y``; a non-bool condition means ``cond != 0``.
    With ``cond`` alone it is :func:`pto.nonzero` (``size`` and ``fill_value`` as there), as
    ``jnp.where``.

    >>> import pypto as pto
    >>> pto.where(pto.tensor([True, False]), 1.0, 2.0).numpy()
    array([1., 2.], dtype=float32)
    >>> pto.where(pto.tensor([0, 5, 7]))[0].numpy()
    array([1, 2], dtype=int32)
    """
    if x is None and y is None:
        from pypto.ops.setops import nonzero  # setops is built on this module

        return nonzero(cond, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise TraceError(
            f"got {'y without x' if x is None else 'x without y'}: give both, or neither",
            op="where",
            hint="pto.where(cond, x, y) selects; pto.where(cond) gives the indices of cond",
        )
    if size is not None or fill_value is not None:
        raise TraceError(
            "size and fill_value belong to where(cond) alone (the indices of cond), "
            "not to where(cond, x, y)",
            op="where",
            hint="drop them, or call pto.nonzero(cond, size=..., fill_value=...)",
        )
    try:
        c = asvalue(cond, "where")
        if c.dtype is not dt.bool_:  # type: ignore[attr-defined]
            c = _bind(ew.CAST, (c,), {"dtype": dt.bool_})
        xv, yv = promote("where", (x, y))
        return _bind(ew.WHERE, (c, xv, yv), _NO)
    except PyptoError as e:
        raise e.stripped() from None


def cast(x: ArrayLike, dtype: Any, /) -> Any:
    """``x`` converted to ``dtype`` (float → int truncates toward zero; out-of-range saturates).

    >>> import pypto as pto
    >>> pto.cast(pto.tensor([1.7, -1.7]), pto.int32).numpy()
    array([ 1, -1], dtype=int32)
    """
    try:
        v = asvalue(x, "cast")
        try:
            d = dt.dtype(dtype)
        except DTypeError as e:
            raise DTypeError(f"{e.detail} (casting {_aval(v)})", op="cast", hint=e.hint) from None
        if v.dtype is d:  # type: ignore[attr-defined]
            return v
        return _bind(ew.CAST, (v,), {"dtype": d})
    except PyptoError as e:
        raise e.stripped() from None


def astype(x: ArrayLike, dtype: Any, /, *, copy: bool = False, device: Any = None) -> Any:
    """``x`` converted to ``dtype``, as ``jnp.astype`` (the array API's name for
    :func:`cast`; ``copy`` and ``device`` are accepted and mean nothing here: tensors are
    immutable and live in one place).

    >>> import pypto as pto
    >>> pto.astype(pto.tensor([1.5, -2.5]), pto.int8).numpy()
    array([ 1, -2], dtype=int8)
    """
    try:
        return cast(x, dtype)
    except PyptoError as e:
        raise e.stripped() from None


def bitcast_convert_type(x: ArrayLike, dtype: Any, /) -> Any:
    """``x``'s bits read as ``dtype``, which has the same element size, as
    ``jax.lax.bitcast_convert_type`` (numpy's ``x.view(dtype)``): float32 ↔ int32,
    float16 ↔ bfloat16.

    >>> import pypto as pto
    >>> pto.bitcast_convert_type(pto.tensor([1.0, -2.0]), pto.int32).numpy()
    array([ 1065353216, -1073741824], dtype=int32)
    """
    try:
        v = asvalue(x, "bitcast_convert_type")
        d = dt.dtype(dtype)
        if v.dtype is d:  # type: ignore[attr-defined]
            return v
        ew.bitcast_dtype(_aval(v), dtype=d)  # eager mode checks the sizes too
        return _bind(ew.BITCAST, (v,), {"dtype": d})
    except PyptoError as e:
        raise e.stripped() from None


def _aval(v: Value) -> AVal:
    return AVal(tuple(v.shape), v.dtype)  # type: ignore[attr-defined]


_ACC: dict[Any, Any] = {
    d.np: (_F32 if d.np in _LOWP else np.dtype(np.int32) if not d.is_floating else None)
    for d in dt.ALL
}


def reduction_keywords(
    name: str, v: Value, *, out: Any = None, mask: Any = None, fill: Any = 0
) -> Value:
    """numpy's ``out`` and ``where`` (``mask``) for a reduction of ``v``: ``out`` must be None
    (tensors are immutable), and elements where ``mask`` is False become ``fill``, the
    reduction's identity (``mask`` broadcasts to ``v``'s shape, as in numpy)."""
    if out is not None:
        raise TraceError(
            f"out= is not supported (tensors are immutable); got {type(out).__name__}",
            op=name,
            hint=f"use the result: y = pto.{name}(...)",
        )
    if mask is None:
        return v
    w = asvalue(mask, name)
    if not rules.broadcasts_to(w.shape, v.shape):  # type: ignore[attr-defined]
        raise ShapeError(
            f"where of shape {tuple(w.shape)} does not broadcast to the operand's "  # type: ignore[attr-defined]
            f"{_aval(v)}",
            op=name,
            hint="give a mask of the operand's shape, or one that broadcasts to it",
        )
    return where(w, v, cast(fill, v.dtype))  # type: ignore[attr-defined]


def extreme(d: dt.DType, largest: bool) -> Any:
    """The identity of ``min`` (``largest``) or ``max`` over ``d``: ±inf, the integer
    range's end, or True/False."""
    if d is dt.bool_:
        return largest
    if d.is_floating:
        return math.inf if largest else -math.inf
    info = np.iinfo(d.np)
    return int(info.max if largest else info.min)


def reduction_dtype(name: str, v: Value, dtype: Any) -> tuple[Value, dt.DType | None]:
    """numpy's ``dtype`` of a sum or product: ``v`` cast to the dtype it is computed in (a
    float result in float32, as jnp's), and the result's dtype (None: the usual one)."""
    if dtype is None:
        return v, None
    d = dt.dtype(dtype, op=name)
    return cast(v, dt.float32 if d in (dt.float16, dt.bfloat16) else d), d


def reduction_initial(name: str, initial: Any, d: dt.DType) -> Value:
    """numpy's ``initial``: a scalar, converted to the reduction's dtype ``d``."""
    v = cast(asvalue(initial, name), d)
    if tuple(v.shape):
        raise ShapeError(
            f"initial must be a scalar, got {_aval(v)}",
            op=name,
            hint="pass one number, e.g. initial=0.0",
        )
    return v


_UFUNCS: dict[str, Any] = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def _reduce(
    op: Op, x: ArrayLike, axis: Axis, keepdims: bool, out: Any, initial: Any, where: Any, dtype: Any
) -> Any:
    """``sum``, ``max`` or ``min`` with numpy's keywords (``dtype`` for ``sum`` alone)."""
    if (
        type(x) is _ET
        and _stack[-1] is _EAGER_TRACE
        and (axis is None or type(axis) is int)
        and type(keepdims) is bool
        and x._a.size  # type: ignore[attr-defined]
        and out is None
        and initial is None
        and where is None
        and dtype is None
    ):
        a = x._a  # type: ignore[attr-defined]
        try:
            if op is reduce.SUM:
                acc = _ACC[a.dtype]
                r = np.add.reduce(a, axis, acc, None, keepdims)  # type: ignore[call-overload]
                if acc is _F32:
                    r = r.astype(a.dtype)
            else:
                r = _UFUNCS[op.name].reduce(a, axis, None, None, keepdims)
            return _eager_wrap(r)
        except (ValueError, IndexError, KeyError):
            pass  # a bad axis: the general path explains it
    v = asvalue(x, op.name)
    v, d = reduction_dtype(op.name, v, dtype)
    axes = rules.normalize_axes(op.name, axis, _aval(v))
    keep = rules.flag(op.name, "keepdims", keepdims)
    vd = v.dtype  # type: ignore[attr-defined]
    if op is reduce.SUM:
        fill: Any = False if vd is dt.bool_ else 0
    else:
        fill = extreme(vd, largest=op is reduce.MIN)
        if initial is None and where is not None:
            raise ShapeError(
                f"a where mask needs initial=: {op.name} has no identity ({_aval(v)})",
                op=op.name,
                hint="pass initial=, the value of a row with nothing selected "
                f"(e.g. initial={'-inf' if op is reduce.MAX else 'inf'})",
            )
    v = reduction_keywords(op.name, v, out=out, mask=where, fill=fill)
    empty = builtins.any(v.shape[a] == 0 for a in axes)  # type: ignore[attr-defined]
    if initial is not None and empty and op is not reduce.SUM:
        # nothing to reduce (max and min refuse it): the initial value alone
        shape = tuple(_bind(reduce.SUM, (v,), {"axes": axes, "keepdims": keep}).shape)
        r = broadcast_to(reduction_initial(op.name, initial, vd), shape)
    else:
        r = _bind(op, (v,), {"axes": axes, "keepdims": keep})
        if initial is not None:
            both = {"sum": add, "max": maximum, "min": minimum}[op.name]
            # in the result's dtype first: a bool sum's initial is a truth value (as JAX's)
            first = reduction_initial(op.name, initial, d or r.dtype)
            r = both(cast(first, r.dtype), r)
    return r if d is None else cast(r, d)


def sum(
    x: ArrayLike,
    axis: Axis = None,
    keepdims: bool = False,
    *,
    dtype: Any = None,
    out: Any = None,
    initial: Any = None,
    where: Any = None,
) -> Any:
    """Sum over ``axis`` (an int, a tuple of ints, or None: all); bools and int8 give int32.
    numpy's keywords: ``dtype`` (of the result; a float one is summed in float32),
    ``initial`` (added), ``where`` (a mask: False elements count as 0) and ``out=None``.

    >>> import pypto as pto
    >>> x = pto.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> pto.sum(x, axis=1).numpy()
    array([3., 7.], dtype=float32)
    >>> pto.sum(x, axis=1, where=x > 1.5, initial=10.0).numpy()
    array([12., 17.], dtype=float32)
    """
    try:
        return _reduce(reduce.SUM, x, axis, keepdims, out, initial, where, dtype)
    except PyptoError as e:
        raise e.stripped() from None


def max(
    x: ArrayLike,
    axis: Axis = None,
    keepdims: bool = False,
    *,
    out: Any = None,
    initial: Any = None,
    where: Any = None,
) -> Any:
    """Maximum over ``axis`` (an int, a tuple of ints, or None: all); NaN wins. numpy's
    keywords: ``initial`` (taken into the maximum; it also allows an empty axis), ``where``
    (a mask: False elements take no part; needs ``initial``) and ``out=None``.

    >>> import pypto as pto
    >>> x = pto.tensor([[1.0, 5.0], [3.0, 4.0]])
    >>> pto.max(x, axis=1, where=x < 4.5, initial=0.0).numpy()
    array([1., 4.], dtype=float32)
    """
    try:
        return _reduce(reduce.MAX, x, axis, keepdims, out, initial, where, None)
    except PyptoError as e:
        raise e.stripped() from None


def min(
    x: ArrayLike,
    axis: Axis = None,
    keepdims: bool = False,
    *,
    out: Any = None,
    initial: Any = None,
    where: Any = None,
) -> Any:
    """Minimum over ``axis`` (an int, a tuple of ints, or None: all); NaN wins. numpy's
    keywords: ``initial`` (taken into the minimum; it also allows an empty axis), ``where``
    (a mask: False elements take no part; needs ``initial``) and ``out=None``.

    >>> import pypto as pto
    >>> pto.min(pto.tensor([3, 1, 2]), initial=0).item()
    0
    """
    try:
        return _reduce(reduce.MIN, x, axis, keepdims, out, initial, where, None)
    except PyptoError as e:
        raise e.stripped() from None


def argmax(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Any:
    """Index of the first maximum along ``axis`` (of the flattened tensor when None), int32.

    >>> import pypto as pto
    >>> int(pto.argmax(pto.tensor([3, 9, 2])))
    1
    """
    try:
        v = asvalue(x, "argmax")
        if axis is not None:
            axis = rules.normalize_axis("argmax", axis, len(v.shape), _aval(v))  # type: ignore[attr-defined]
        keep = rules.flag("argmax", "keepdims", keepdims)
        return _bind(reduce.ARGMAX, (v,), {"axis": axis, "keepdims": keep})
    except PyptoError as e:
        raise e.stripped() from None


def matmul(a: ArrayLike, b: ArrayLike, /) -> Any:
    """Matrix product with numpy semantics; float16/bfloat16 accumulate in float32.

    >>> import pypto as pto
    >>> (pto.ones((2, 3)) @ pto.ones((3, 4))).shape
    (2, 4)
    """
    if type(a) is _ET and type(b) is _ET and _stack[-1] is _EAGER_TRACE:
        x = a._a  # type: ignore[attr-defined]
        y = b._a
        if x.dtype is y.dtype and x.dtype is _F32 and x.ndim and y.ndim:
            try:
                return _eager_wrap(np.matmul(x, y))
            except ValueError:
                pass  # a shape mismatch: the general path explains it
    try:
        return _bind(linalg.MATMUL, tuple(promote("matmul", (a, b))), _NO)
    except PyptoError as e:
        raise e.stripped() from None


def _shape_arg(op: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        return (int(shape),)
    try:
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        raise ShapeError(
            f"shape must be an int or a sequence of ints, got {shape!r}", op=op
        ) from None


def reshape(x: ArrayLike, shape: int | Sequence[int], /) -> Any:
    """Same elements, new shape; one dim may be -1 and is inferred.

    >>> import pypto as pto
    >>> pto.reshape(pto.arange(6), (2, -1)).shape
    (2, 3)
    """
    try:
        v = asvalue(x, "reshape")
        new = list(_shape_arg("reshape", shape))
        size = math.prod(v.shape)  # type: ignore[attr-defined]
        if -1 in new:
            if new.count(-1) > 1:
                raise ShapeError(
                    f"cannot reshape {_aval(v)} to {new}: only one dim can be inferred",
                    op="reshape",
                    hint="give every dim but one (the -1) explicitly",
                )
            rest = math.prod(s for s in new if s != -1)
            if rest == 0 or size % rest:
                raise ShapeError(
                    f"cannot reshape {_aval(v)} ({size} elements) to {new}",
                    op="reshape",
                    hint=f"{size} is not divisible by {rest}",
                )
            new[new.index(-1)] = size // rest
        target = tuple(new)
        if target == tuple(v.shape):  # type: ignore[attr-defined]
            return v
        return _bind(layout.RESHAPE, (v,), {"shape": target})
    except PyptoError as e:
        raise e.stripped() from None


def transpose(x: ArrayLike, axes: Sequence[int] | None = None, /) -> Any:
    """Permute axes (reverse them when ``axes`` is None)."""
    try:
        v = asvalue(x, "transpose")
        nd = len(v.shape)  # type: ignore[attr-defined]
        if axes is None:
            perm = tuple(range(nd))[::-1]
        else:
            perm = tuple(
                rules.normalize_axis("transpose", a, nd, _aval(v))
                for a in _shape_arg("transpose", axes)
            )
        if perm == tuple(range(nd)):
            return v
        return _bind(layout.TRANSPOSE, (v,), {"perm": perm})
    except PyptoError as e:
        raise e.stripped() from None


def broadcast_to(x: ArrayLike, shape: Sequence[int], /) -> Any:
    """Repeat size-1 dims (and add leading ones) to reach ``shape``."""
    try:
        v = asvalue(x, "broadcast_to")
        target = _shape_arg("broadcast_to", shape)
        if any(n < 0 for n in target):
            raise ShapeError(
                f"cannot broadcast {_aval(v)} to shape {list(target)}: sizes must be >= 0",
                op="broadcast_to",
            )
        if target == tuple(v.shape):  # type: ignore[attr-defined]
            return v
        return _bind(layout.BROADCAST_TO, (v,), {"shape": target})
    except PyptoError as e:
        raise e.stripped() from None


def concat(xs: Sequence[ArrayLike], axis: int = 0) -> Any:
    """Join tensors along an existing axis (dtypes promoted).

    >>> import pypto as pto
    >>> pto.concat([pto.ones((2, 3)), pto.zeros((1, 3))]).shape
    (3, 3)
    """
    try:
        if not isinstance(xs, list | tuple) or not xs:
            raise ShapeError(
                f"takes a non-empty list or tuple of tensors, got {type(xs).__name__}",
                op="concat",
            )
        vals = promote("concat", list(xs))
        a = rules.normalize_axis("concat", axis, len(vals[0].shape), _aval(vals[0]))  # type: ignore[attr-defined]
        return _bind(layout.CONCAT, tuple(vals), {"axis": a})
    except PyptoError as e:
        raise e.stripped() from None


def take(x: ArrayLike, indices: ArrayLike, axis: int | None = None) -> Any:
    """Gather along ``axis`` at integer ``indices`` (of the flattened tensor when None).

    Negative indices count from the end; indices outside the axis are an error.

    >>> import pypto as pto
    >>> pto.take(pto.tensor([10, 20, 30]), pto.tensor([2, 0])).numpy()
    array([30, 10], dtype=int32)
    """
    try:
        v = asvalue(x, "take")
        idx = asvalue(indices, "take")
        if axis is None:
            v = reshape(v, (-1,))
            axis = 0
        a = rules.normalize_axis("take", axis, len(v.shape), _aval(v))  # type: ignore[attr-defined]
        return _bind(layout.TAKE, (v, idx), {"axis": a})
    except PyptoError as e:
        raise e.stripped() from None


def _indexed(shape: Shape, of: Value | None) -> str:
    return str(_aval(of)) if of is not None else f"shape {list(shape)}"


def slice_spec(
    shape: Shape, key: Any, of: Value | None = None
) -> tuple[layout.SliceSpec, Shape, bool]:
    """Basic indexing (ints, slices, None, ...) as (slice spec, result shape, whole tensor).

    ``of``, the indexed value, only names the operand in error messages.
    """
    if not isinstance(key, tuple):
        key = (key,)
    n_ell = builtins.sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise ShapeError(
            f"an index can only have a single Ellipsis ('...'), indexing {_indexed(shape, of)}",
            op="getitem",
        )
    real = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if real > len(shape):
        raise BoundsError(
            f"too many indices: {real} for a {len(shape)}-d tensor {_indexed(shape, of)}",
            op="getitem",
            hint=f"index at most {len(shape)} axes (None and ... do not count)",
        )
    spec: list[tuple[int, int | None, int]] = []
    out: list[int] = []
    d = 0
    for k in key:
        if k is None:
            out.append(1)
        elif k is Ellipsis:
            for _ in range(len(shape) - real):
                spec.append((0, shape[d], 1))
                out.append(shape[d])
                d += 1
        elif isinstance(k, slice):
            n = shape[d]
            try:
                start, stop, step = k.indices(n)
            except (TypeError, ValueError) as e:
                raise ShapeError(
                    f"bad slice {k} for axis {d} of {_indexed(shape, of)}: {e}",
                    op="getitem",
                    hint="slice with ints (or None) and a non-zero step",
                ) from None
            length = len(range(start, stop, step))
            if length == 0:
                spec.append((0, 0, 1))
            else:
                spec.append((start, None if stop < 0 else stop, step))
            out.append(length)
            d += 1
        elif isinstance(k, int | np.integer) and not isinstance(k, bool | np.bool_):
            n = shape[d]
            i = int(k)
            if not -n <= i < n:
                raise BoundsError(
                    f"index {i} is out of range for axis {d} of size {n} in {_indexed(shape, of)}",
                    op="getitem",
                    hint=f"use an index in [{-n}, {n})",
                )
            i = i + n if i < 0 else i
            spec.append((i, i + 1, 1))
            d += 1
        else:
            raise ShapeError(
                f"index of type {type(k).__name__} is not basic indexing "
                f"(indexing {_indexed(shape, of)})",
                op="getitem",
                hint="index with ints, slices, None and ...; gather with pto.take(x, idx, axis)",
            )
    while d < len(shape):
        spec.append((0, shape[d], 1))
        out.append(shape[d])
        d += 1
    full = all(s == (0, n, 1) for s, n in zip(spec, shape, strict=True))
    return tuple(spec), tuple(out), full


def getitem(x: ArrayLike, key: Any) -> Any:
    """``x[key]``: basic indexing (ints, slices, None, ...) is a strided slice, then a reshape
    for ints and None. Integer arrays (lists, numpy arrays, tensors) and boolean masks known
    when tracing are numpy's advanced indexing: the arrays broadcast together and pick
    elements jointly, their axes placed as numpy places them (see pypto.ops.indexing).

    >>> import pypto as pto
    >>> x = pto.arange(12).reshape(3, 4)
    >>> x[1:, ::2].numpy()
    array([[ 4,  6],
           [ 8, 10]], dtype=int32)
    >>> x[[2, 0]].numpy()
    array([[ 8,  9, 10, 11],
           [ 0,  1,  2,  3]], dtype=int32)
    >>> x[[0, 2], [1, 3]].numpy()
    array([ 1, 11], dtype=int32)
    >>> x[0, :, None][[3, 1]].shape
    (2, 1)
    """
    try:
        v = asvalue(x, "getitem")
        keys = key if isinstance(key, tuple) else (key,)
        if builtins.any(_array_index(k) for k in keys):
            # (the indexing module builds on this one's functions)
            from pypto.ops import indexing

            return indexing.getitem(v, key)
        keys = tuple(
            int(k) if isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind in "iu" else k
            for k in keys
        )
        spec, out_shape, full = slice_spec(tuple(v.shape), keys, v)  # type: ignore[attr-defined]
        if not full:
            v = _bind(layout.SLICE, (v,), {"index": spec})
        return reshape(v, out_shape)
    except PyptoError as e:
        raise e.stripped() from None


def _array_index(k: Any) -> bool:
    """Whether an index entry is an array (list, numpy array of 1+ axes, tensor)."""
    return isinstance(k, list | Value) or (isinstance(k, np.ndarray) and k.ndim > 0)
