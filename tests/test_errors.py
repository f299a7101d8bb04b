"""User mistakes: a PyptoError subclass that names the op, the operands and the caller's line.

Every check goes through :func:`expect`, a context manager that asserts the error's class, that
its message contains the op name and the operands (printed like ``f32[3,4]``), the test's own
``file:line`` (the line of the offending call, recorded by ``e.at(...)`` on that very line) and
the hint, and that its traceback starts at the test and keeps no frame below pypto's public
entry points (rules, op definitions, dispatch).
"""

from __future__ import annotations

import operator
import os
import sys
import traceback
import types
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto
from pypto.core.errors import ConversionError
from pypto.eager.tensor import EagerTrace
from pypto.ops.surface import TensorSurface

HERE = os.path.basename(__file__)
PKG = os.path.dirname(os.path.abspath(pto.__file__)) + os.sep


def _entry_points() -> set[types.CodeType]:
    """The code of pypto's public functions and Tensor methods: what a user calls."""
    fns: list[Any] = [getattr(pto, n) for n in pto.__all__]
    for cls in (TensorSurface, pto.Tensor):
        for name, v in vars(cls).items():
            if not name.startswith("_") or name.endswith("__"):  # not _concrete and the like
                fns.append(v.fget if isinstance(v, property) else v)
    # A composite re-raises from its wrapper through the trace's composite method.
    fns.append(EagerTrace.composite)
    return {f.__code__ for f in fns if isinstance(f, types.FunctionType)}


ENTRY_POINTS = _entry_points()
# Composites show their wrapper and the trace's composite method.
COMPOSITE_FRAMES = 2


def internal_frames(tb: types.TracebackType | None) -> list[tuple[str, str]]:
    """(path inside pypto, function) of every pypto frame in ``tb``."""
    return [
        (os.path.relpath(f.f_code.co_filename, PKG).replace(os.sep, "/"), f.f_code.co_name)
        for f, _ in traceback.walk_tb(tb)
        if f.f_code.co_filename.startswith(PKG)
    ]


def frames_below_the_entry_points(tb: types.TracebackType | None) -> list[str]:
    """pypto frames in ``tb`` that are not a public function or method: internal noise."""
    return [
        f"{os.path.relpath(f.f_code.co_filename, PKG)}:{lineno} in {f.f_code.co_name}"
        for f, lineno in traceback.walk_tb(tb)
        if f.f_code.co_filename.startswith(PKG) and f.f_code not in ENTRY_POINTS
    ]


class expect:
    """``with expect(cls, *parts, hint=...) as e:`` around a call marked with ``e.at(operand)``."""

    def __init__(
        self,
        cls: type[BaseException],
        *parts: str,
        hint: str | None = None,
        frames: int = 1,
    ) -> None:
        self.cls = cls
        self.parts = parts
        self.hint = hint
        self.frames = frames
        self.line: int | None = None
        self.error: pto.PyptoError | None = None

    def at(self, value: Any) -> Any:
        """``value`` itself; records the caller's current line, the line of the offending call."""
        self.line = sys._getframe(1).f_lineno
        return value

    def __enter__(self) -> expect:
        return self

    def __exit__(self, kind: Any, err: BaseException | None, tb: Any) -> bool:
        if err is None:
            pytest.fail(f"no {self.cls.__name__} was raised")
        if not isinstance(err, pto.PyptoError):
            raise AssertionError(f"a bare {type(err).__name__}, not a PyptoError: {err}") from err
        assert isinstance(err, self.cls), f"{type(err).__name__}, not {self.cls.__name__}: {err}"
        assert self.line is not None, "mark the offending call with e.at(...)"
        msg = str(err)
        for part in self.parts:
            assert part in msg, f"{part!r} is not in the message:\n{msg}"
        where = f"{HERE}:{self.line}"
        assert where in msg, f"{where!r} is not in the message:\n{msg}"
        assert err.loc is not None and err.loc.file == __file__ and err.loc.line == self.line
        if self.hint is not None:
            assert err.hint and self.hint in err.hint, f"hint {self.hint!r} missing:\n{msg}"
            assert "hint: " in msg
        # The traceback starts at the test's own line ...
        first = err.__traceback__
        assert first is not None and first.tb_frame.f_code.co_filename == __file__
        assert first.tb_lineno == self.line
        # ... and holds no pypto frame below the public entry point that was called.
        below = frames_below_the_entry_points(err.__traceback__)
        assert not below, f"internal frames in the traceback: {below}"
        inner = internal_frames(err.__traceback__)
        assert len(inner) <= self.frames, f"too many pypto frames: {inner}"
        self.error = err
        return True


@pytest.fixture
def x() -> pto.Tensor:
    return pto.ones((3, 4))


# -- the error classes ------------------------------------------------------------------------


def test_error_classes_are_also_the_builtin_errors() -> None:
    assert issubclass(pto.ShapeError, pto.PyptoError) and issubclass(pto.ShapeError, ValueError)
    assert issubclass(pto.DTypeError, pto.PyptoError) and issubclass(pto.DTypeError, TypeError)
    assert issubclass(pto.BoundsError, pto.ShapeError) and issubclass(pto.BoundsError, IndexError)
    assert issubclass(ConversionError, pto.ShapeError) and issubclass(ConversionError, TypeError)
    assert issubclass(pto.NumericsMismatch, AssertionError)
    for cls in (pto.TraceError, pto.TileError, pto.SimulationError):
        assert issubclass(cls, pto.PyptoError)


def test_the_message_has_op_detail_location_and_hint(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "matmul", hint="second-to-last") as e:
        e.at(x) @ x
    err = e.error
    assert err is not None and err.op == "matmul" and err.loc is not None
    head, at, hint = str(err).splitlines()
    assert head == "matmul: " + err.detail
    assert at == f"  at {HERE}:{err.loc.line} ({__file__})"
    assert hint == f"  hint: {err.hint}"


def test_the_printed_traceback_shows_no_internals(x: pto.Tensor) -> None:
    with pytest.raises(pto.ShapeError) as info:
        pto.add(x, pto.ones((5,)))
    text = "".join(traceback.format_exception(info.value))
    for internal in ("rules.py", "elementwise.py", "dispatch.py", "table.py", "eager/tensor.py"):
        assert internal not in text
    assert HERE in text and "add: shapes f32[3,4], f32[5] cannot be broadcast" in text
    assert "During handling" not in text and "direct cause" not in text


# -- matmul -----------------------------------------------------------------------------------


def test_matmul_2d_contraction_mismatch(x: pto.Tensor) -> None:
    w = pto.ones((5, 6))
    with expect(pto.ShapeError, "matmul", "f32[3,4]", "f32[5,6]", "4 with 5", hint="last") as e:
        pto.matmul(e.at(x), w)
    with expect(pto.ShapeError, "matmul", "f32[3,4]", "f32[5,6]") as e:
        e.at(x) @ w
    with expect(pto.ShapeError, "matmul", "f32[5,6]", "f32[3,4]") as e:
        np.ones((5, 6), np.float32) @ e.at(x)


def test_matmul_suggests_a_transpose(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "matmul", "f32[3,4]", "f32[3,4]", hint="transpose") as e:
        e.at(x) @ x


def test_matmul_batched_contraction_mismatch() -> None:
    a, b = pto.ones((2, 3, 4)), pto.ones((2, 5, 6))
    with expect(pto.ShapeError, "matmul", "f32[2,3,4]", "f32[2,5,6]", "4 with 5") as e:
        pto.matmul(e.at(a), b)


def test_matmul_batched_batch_mismatch_names_the_operands() -> None:
    a, b = pto.ones((2, 3, 4)), pto.ones((3, 4, 5))
    with expect(pto.ShapeError, "matmul", "f32[2,3,4]", "f32[3,4,5]") as e:
        pto.matmul(e.at(a), b)


def test_matmul_batched_batch_mismatch_is_a_shape_error() -> None:
    a, b = pto.ones((2, 3, 4)), pto.ones((3, 4, 5))
    with expect(pto.ShapeError, "matmul", "cannot be broadcast") as e:
        pto.matmul(e.at(a), b)


def test_matmul_1d() -> None:
    u, v = pto.ones((3,)), pto.ones((4,))
    with expect(pto.ShapeError, "matmul", "f32[3]", "f32[4]", "3 with 4") as e:
        e.at(u) @ v
    with expect(pto.ShapeError, "matmul", "f32[3]", "f32[4,5]") as e:
        pto.matmul(e.at(u), pto.ones((4, 5)))
    with expect(pto.ShapeError, "matmul", "f32[5,4]", "f32[3]") as e:
        pto.matmul(e.at(pto.ones((5, 4))), u)


def test_matmul_0d_operand(x: pto.Tensor) -> None:
    s = pto.tensor(2.0)
    with expect(pto.ShapeError, "matmul", "f32[]", "f32[3,4]", "1-d", hint="mul") as e:
        pto.matmul(e.at(s), x)
    with expect(pto.ShapeError, "matmul", "f32[3,4]", "f32[]", hint="mul") as e:
        e.at(x) @ s


def test_matmul_of_mixed_dtypes_still_names_the_shapes() -> None:
    a, b = pto.ones((3, 4), pto.float16), pto.ones((5, 6), pto.bfloat16)
    with expect(pto.ShapeError, "matmul", "[3,4]", "[5,6]") as e:
        pto.matmul(e.at(a), b)


# -- broadcasting -----------------------------------------------------------------------------


def test_add_not_broadcastable(x: pto.Tensor) -> None:
    y = pto.ones((5,))
    parts = ("f32[3,4]", "f32[5]", "cannot be broadcast")
    with expect(pto.ShapeError, "add", *parts, hint="equal or 1") as e:
        pto.add(e.at(x), y)
    with expect(pto.ShapeError, "add", *parts) as e:
        e.at(x) + y
    with expect(pto.ShapeError, "add", *parts) as e:
        np.ones(5, np.float32) + e.at(x)


# numpy on the left: Python calls the tensor's reflected method, so a comparison flips.
@pytest.mark.parametrize(
    ("fn", "name", "reflected"),
    [
        (operator.sub, "sub", "sub: shapes f32[2,4], f32[3,4]"),
        (operator.mul, "mul", "mul: shapes f32[2,4], f32[3,4]"),
        (operator.truediv, "div", "div: shapes f32[2,4], f32[3,4]"),
        (operator.pow, "pow", "pow: shapes f32[2,4], f32[3,4]"),
        (operator.eq, "equal", "equal: shapes f32[3,4], f32[2,4]"),
        (operator.ne, "not_equal", "not_equal: shapes f32[3,4], f32[2,4]"),
        (operator.lt, "less", "greater: shapes f32[3,4], f32[2,4]"),
        (operator.ge, "greater_equal", "less_equal: shapes f32[3,4], f32[2,4]"),
        (pto.maximum, "maximum", "maximum: shapes f32[2,4], f32[3,4]"),
    ],
)
def test_binary_operators_not_broadcastable(
    x: pto.Tensor, fn: Any, name: str, reflected: str
) -> None:
    y = pto.ones((2, 4))
    with expect(pto.ShapeError, f"{name}: shapes f32[3,4], f32[2,4] cannot be broadcast") as e:
        fn(e.at(x), y)
    with expect(pto.ShapeError, reflected) as e:
        fn(np.ones((2, 4), np.float32), e.at(x))


def test_not_broadcastable_after_promotion(x: pto.Tensor) -> None:
    i = pto.ones((5,), pto.int32)
    with expect(pto.ShapeError, "add", "[3,4]", "[5]") as e:
        e.at(x) + i
    with expect(pto.ShapeError, "mul", "[3,4]", "[5]") as e:
        e.at(i) * x


def test_where_not_broadcastable(x: pto.Tensor) -> None:
    cond = pto.tensor([True, False])
    with expect(pto.ShapeError, "where", "bool[2]", "f32[3,4]", hint="equal or 1") as e:
        pto.where(e.at(cond), x, 0.0)
    with expect(pto.ShapeError, "where", "bool[3,4]", "f32[3,4]", "f32[5]") as e:
        pto.where(e.at(x > 0), x, pto.ones((5,)))


def test_broadcast_to_an_incompatible_shape(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "broadcast_to", "f32[3,4]", "[3, 5]", hint="aligned") as e:
        pto.broadcast_to(e.at(x), (3, 5))


# -- axes -------------------------------------------------------------------------------------

AXIS_PARTS = ("f32[3,4]", "out of range", "2-d")


@pytest.mark.parametrize(
    "fn",
    [pto.sum, pto.max, pto.min, pto.argmax],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize("axis", [2, -3])
def test_reduction_bad_axis(x: pto.Tensor, fn: Any, axis: int) -> None:
    with expect(pto.ShapeError, fn.__name__, f"axis {axis}", *AXIS_PARTS, hint="[-2, 2)") as e:
        fn(e.at(x), axis)


@pytest.mark.parametrize("fn", [pto.mean, pto.softmax, pto.log_softmax], ids=lambda f: f.__name__)
def test_composite_bad_axis(x: pto.Tensor, fn: Any) -> None:
    name = fn.__name__
    with expect(pto.ShapeError, name, "axis 2", *AXIS_PARTS, frames=COMPOSITE_FRAMES) as e:
        fn(e.at(x), 2)


def test_reduction_methods_bad_axis(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "sum", "axis 2", *AXIS_PARTS) as e:
        e.at(x).sum(2)
    with expect(pto.ShapeError, "max", "axis -3", *AXIS_PARTS) as e:
        e.at(x).max(axis=-3)
    with expect(pto.ShapeError, "min", "axis 5", *AXIS_PARTS) as e:
        e.at(x).min((0, 5))
    with expect(pto.ShapeError, "argmax", "axis 2", *AXIS_PARTS) as e:
        e.at(x).argmax(2)
    with expect(pto.ShapeError, "mean", "axis 4", *AXIS_PARTS, frames=COMPOSITE_FRAMES) as e:
        e.at(x).mean(4)


def test_axis_that_is_not_an_int(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "sum", "axis must be an int", "1.5", "f32[3,4]") as e:
        e.at(x).sum(1.5)
    with expect(pto.ShapeError, "argmax", "axis must be an int", "'a'", "f32[3,4]") as e:
        pto.argmax(e.at(x), "a")
    parts = ("softmax", "axis must be an int", "1.5", "f32[3,4]")
    with expect(pto.ShapeError, *parts, frames=COMPOSITE_FRAMES) as e:
        pto.softmax(e.at(x), 1.5)
    assert x.sum(np.int64(1)).shape == (3,) and x.max([np.int32(0), 1]).shape == ()


def test_repeated_axis(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "sum", "repeated axis", "f32[3,4]") as e:
        e.at(x).sum((1, -1))


def test_reduce_over_an_empty_axis() -> None:
    z = pto.zeros((0, 3))
    with expect(pto.ShapeError, "max", "f32[0,3]", "zero-size", hint="sum") as e:
        e.at(z).max(0)


def test_concat_bad_axis_and_shapes(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "concat", "axis 2", *AXIS_PARTS) as e:
        pto.concat([e.at(x), x], 2)
    with expect(pto.ShapeError, "concat", "f32[3,4]", "f32[3,5]", hint="must match") as e:
        pto.concat([e.at(x), pto.ones((3, 5))])
    with expect(pto.ShapeError, "concat", "non-empty list") as e:
        pto.concat(e.at([]))


def test_take_bad_axis(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "take", "axis 2", *AXIS_PARTS) as e:
        pto.take(e.at(x), pto.tensor([0]), 2)


def test_expand_dims_bad_axis_names_the_operand(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "expand_dims", "axis 4", "f32[3,4]", frames=2) as e:
        pto.expand_dims(e.at(x), 4)


def test_expand_dims_bad_axis(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "expand_dims", "axis 4", "3-d", frames=COMPOSITE_FRAMES) as e:
        pto.expand_dims(e.at(x), 4)


def test_squeeze_bad_axis(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "squeeze", "axis 2", *AXIS_PARTS, frames=COMPOSITE_FRAMES) as e:
        pto.squeeze(e.at(x), 2)


def test_transpose_bad_axes(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "transpose", "axis 2", *AXIS_PARTS) as e:
        pto.transpose(e.at(x), (0, 2))
    with expect(pto.ShapeError, "transpose", "axis 2", *AXIS_PARTS) as e:
        e.at(x).transpose(1, 2)
    with expect(pto.ShapeError, "transpose", "[0, 0]", "f32[3,4]", hint="once") as e:
        pto.transpose(e.at(x), (0, 0))
    with expect(pto.ShapeError, "transpose", "[1]", "f32[3,4]") as e:
        pto.transpose(e.at(x), 1)


def test_split_bad_axis(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "split", "axis 2", *AXIS_PARTS, frames=COMPOSITE_FRAMES) as e:
        pto.split(e.at(x), 2, axis=2)


# -- reshape, split, squeeze ------------------------------------------------------------------


def test_reshape_size_mismatch(x: pto.Tensor) -> None:
    parts = ("f32[3,4]", "12 elements", "[5, 3]", "15 elements")
    with expect(pto.ShapeError, "reshape", *parts, hint="-1") as e:
        pto.reshape(e.at(x), (5, 3))
    with expect(pto.ShapeError, "reshape", *parts) as e:
        e.at(x).reshape(5, 3)
    with expect(pto.ShapeError, "reshape", "f32[3,4]", "[5, -1]", hint="not divisible by 5") as e:
        e.at(x).reshape(5, -1)


def test_reshape_with_two_inferred_dims(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "reshape", "f32[3,4]", "[-1, -1]", "one dim", hint="-1") as e:
        e.at(x).reshape(-1, -1)


def test_reshape_to_a_non_shape(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "reshape", "'a'", "sequence of ints") as e:
        pto.reshape(e.at(x), "a")


def test_split_into_unequal_sections(x: pto.Tensor) -> None:
    v = pto.ones((7,))
    parts = ("split", "f32[7]", "3 equal sections")
    with expect(pto.ShapeError, *parts, hint="list", frames=COMPOSITE_FRAMES) as e:
        pto.split(e.at(v), 3)
    parts = ("split", "f32[3,4]", "axis 1", "size 4", "3 equal")
    with expect(pto.ShapeError, *parts, frames=COMPOSITE_FRAMES) as e:
        pto.split(e.at(x), 3, axis=1)


def test_squeeze_of_a_non_unit_axis(x: pto.Tensor) -> None:
    parts = ("squeeze", "axis 0", "size 3", "f32[3,4]")
    with expect(pto.ShapeError, *parts, hint="size-1", frames=COMPOSITE_FRAMES) as e:
        pto.squeeze(e.at(x), 0)


# -- dtypes an op does not take ---------------------------------------------------------------


def test_neg_abs_sub_refuse_bool() -> None:
    b = pto.tensor([True, False])
    with expect(pto.DTypeError, "neg", "bool[2]", "bool", hint="astype") as e:
        pto.neg(e.at(b))
    with expect(pto.DTypeError, "neg", "bool[2]") as e:
        -e.at(b)
    with expect(pto.DTypeError, "abs", "bool[2]", hint="astype") as e:
        pto.abs(e.at(b))
    with expect(pto.DTypeError, "abs", "bool[2]") as e:
        abs(e.at(b))
    with expect(pto.DTypeError, "sub", "bool[2], bool[2]", hint="astype") as e:
        e.at(b) - b
    with expect(pto.DTypeError, "sub", "bool[], bool[2]") as e:
        True - e.at(b)


def test_matmul_refuses_bool() -> None:
    b = pto.ones((2, 2), pto.bool_)
    with expect(pto.DTypeError, "matmul", "bool[2,2], bool[2,2]", hint="astype") as e:
        pto.matmul(e.at(b), b)


def test_exp_of_int_is_promoted_to_float32_as_in_jax() -> None:
    i = pto.tensor([0, 1, 2])
    y = pto.exp(i)
    assert y.dtype is pto.float32
    assert np.dtype(jnp.exp(jnp.asarray([0, 1, 2], jnp.int32)).dtype) == np.float32
    np.testing.assert_allclose(y.numpy(), np.exp(np.arange(3, dtype=np.float32)), rtol=1e-6)
    assert (i / 2).dtype is pto.float32 and pto.sqrt(pto.tensor([True])).dtype is pto.float32


def test_take_with_float_indices(x: pto.Tensor) -> None:
    idx = pto.tensor([0.0, 1.0])
    with expect(pto.DTypeError, "take", "f32[3,4]", "f32[2]", "integers", hint="astype") as e:
        pto.take(e.at(x), idx, 0)


def test_integer_pow_with_a_negative_exponent_names_the_operands() -> None:
    a, b = pto.tensor([2]), pto.tensor([-1])
    with expect(pto.DTypeError, "pow", "i32[1]", hint="float") as e:
        e.at(a) ** b


def test_integer_pow_with_a_negative_exponent() -> None:
    a, b = pto.tensor([2]), pto.tensor([-1])
    with expect(pto.DTypeError, "pow", "negative exponent", hint="float") as e:
        e.at(a) ** b


# -- indices out of range ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "index", "axis", "size"),
    [(3, 3, 0, 3), (-4, -4, 0, 3), ((0, 4), 4, 1, 4), ((slice(None), -5), -5, 1, 4)],
)
def test_getitem_int_out_of_range(
    x: pto.Tensor, key: Any, index: int, axis: int, size: int
) -> None:
    parts = ("getitem", f"index {index}", f"axis {axis}", f"size {size}", "f32[3,4]")
    with expect(pto.BoundsError, *parts, hint=f"[{-size}, {size})") as e:
        e.at(x)[key]
    assert isinstance(e.error, IndexError)


def test_getitem_out_of_range_after_none_and_ellipsis(x: pto.Tensor) -> None:
    with expect(pto.BoundsError, "getitem", "index 4", "axis 1", "f32[3,4]") as e:
        e.at(x)[None, ..., 4]


def test_getitem_too_many_indices(x: pto.Tensor) -> None:
    with expect(pto.BoundsError, "getitem", "too many indices", "3", "f32[3,4]", hint="2") as e:
        e.at(x)[0, 0, 0]
    with expect(pto.BoundsError, "getitem", "too many indices", "f32[]") as e:
        e.at(pto.tensor(1.0))[0]


def test_getitem_with_a_bad_index(x: pto.Tensor) -> None:
    with expect(pto.ShapeError, "getitem", "float", "f32[3,4]", hint="pto.take") as e:
        e.at(x)[1.5]
    with expect(pto.ShapeError, "getitem", "boolean mask", "f32[3,4]", hint="pto.where") as e:
        e.at(x)[pto.tensor([True, False, True])]
    with expect(pto.ShapeError, "getitem", "[2], [3] cannot be broadcast", "f32[3,4]") as e:
        e.at(x)[[0, 1], [1, 0, 1]]
    with expect(pto.BoundsError, "getitem", "mask of shape [2]", "f32[3,4]", hint="shape") as e:
        e.at(x)[np.array([True, False])]
    with expect(pto.ShapeError, "getitem", "step cannot be zero", "f32[3,4]") as e:
        e.at(x)[::0]
    with expect(pto.ShapeError, "getitem", "Ellipsis", "f32[3,4]") as e:
        e.at(x)[..., ...]


def test_take_out_of_range_names_the_operand(x: pto.Tensor) -> None:
    with expect(pto.BoundsError, "take", "index 3", "f32[3,4]") as e:
        pto.take(e.at(x), pto.tensor([0, 3]), 0)


@pytest.mark.parametrize(
    ("indices", "axis", "bad", "size"), [([0, 3], 0, 3, 3), ([-5], 1, -5, 4), ([12], None, 12, 12)]
)
def test_take_out_of_range(
    x: pto.Tensor, indices: list[int], axis: int | None, bad: int, size: int
) -> None:
    idx = pto.tensor(indices)
    parts = ("take", f"index {bad}", f"size {size}")
    with expect(pto.BoundsError, *parts, hint=f"[{-size}, {size})") as e:
        pto.take(e.at(x), idx, axis)
    assert isinstance(e.error, IndexError)


# -- dtype names and values -------------------------------------------------------------------


def test_unknown_dtype_name(x: pto.Tensor) -> None:
    with expect(pto.DTypeError, "tensor", "unknown dtype name 'float64x'", hint="float32") as e:
        pto.tensor(e.at([1.0]), dtype="float64x")
    with expect(pto.DTypeError, "cast", "unknown dtype name 'foo'", "f32[3,4]") as e:
        e.at(x).astype("foo")
    with expect(pto.DTypeError, "cast", "'foo'", "f32[3,4]", hint="float32, float16") as e:
        pto.cast(e.at(x), "foo")
    with expect(pto.DTypeError, "zeros", "'int64x'", hint="int32") as e:
        pto.zeros(e.at((2,)), "int64x")
    with expect(pto.DTypeError, "ones_like", "'f64'", hint="float32") as e:
        pto.ones_like(e.at(x), "f64")


def test_a_numpy_dtype_pypto_does_not_have(x: pto.Tensor) -> None:
    with expect(pto.DTypeError, "cast", "complex64", "f32[3,4]") as e:
        pto.cast(e.at(x), np.complex64)


@pytest.mark.parametrize(
    ("fn", "left", "name", "value"),
    [
        (operator.add, True, "add", 300),
        (operator.add, False, "add", 300),
        (operator.mul, True, "mul", -129),
        (operator.sub, False, "sub", 128),
        (pto.maximum, True, "maximum", 128),
    ],
)
def test_python_int_that_does_not_fit_the_dtype(fn: Any, left: bool, name: str, value: int) -> None:
    t = pto.ones((3,), pto.int8)
    parts = (name, f"Python int {value}", "int8", "i8[3]", "[-128, 127]")
    with expect(pto.DTypeError, *parts, hint="astype(pto.int32)") as e:
        fn(e.at(t), value) if left else fn(value, e.at(t))


def test_python_int_that_does_not_fit_int8() -> None:
    t = pto.ones((3,), pto.int8)
    parts = ("add", "Python int 300", "int8", "i8[3]", "[-128, 127]")
    with expect(pto.DTypeError, *parts, hint="astype(pto.int32)") as e:
        e.at(t) + 300
    with expect(pto.DTypeError, "tensor", "300", "int8", "[-128, 127]") as e:
        pto.tensor(e.at([1, 300]), dtype=pto.int8)


def test_python_int_beyond_every_dtype() -> None:
    with expect(pto.DTypeError, "add", "int32", "i32[2]") as e:
        e.at(pto.ones((2,), pto.int32)) + 2**40
    with expect(pto.DTypeError, "mul", "float32", "f32[2]", "digits", hint="float") as e:
        e.at(pto.ones((2,))) * 10**400
    with expect(pto.DTypeError, "tensor", "int32", "2361183241434822606848") as e:
        pto.tensor(e.at([2**71]))


# -- Python conversions -----------------------------------------------------------------------


def test_bool_and_float_of_a_multi_element_tensor(x: pto.Tensor) -> None:
    parts = ("f32[3,4]", "12 elements", "one element")
    with expect(ConversionError, "bool", *parts, hint="x.sum()") as e:
        bool(e.at(x))
    with expect(ConversionError, "float", *parts, hint="index one element") as e:
        float(e.at(x))
    with expect(ConversionError, "int", *parts) as e:
        int(e.at(x))
    with expect(ConversionError, "item", *parts) as e:
        e.at(x).item()
    with expect(pto.ShapeError, "bool", *parts) as e:
        if e.at(x):
            pass
    assert isinstance(e.error, ValueError) and isinstance(e.error, TypeError)


def test_length_and_index_protocols_keep_raising_type_errors() -> None:
    s = pto.tensor(1.0)
    with expect(ConversionError, "len", "0-d", "f32[]") as e:
        len(e.at(s))
    assert isinstance(e.error, TypeError)
    with expect(ConversionError, "iter", "0-d", "f32[]") as e:
        list(e.at(s))
    with expect(pto.DTypeError, "index", "f32[]", hint="astype(pto.int32)") as e:
        [1, 2][e.at(s)]
    with expect(ConversionError, "index", "i32[2]") as e:
        [1, 2][e.at(pto.tensor([0, 1]))]


class _Traced(TensorSurface):
    """A stand-in for a graph tracer: the surface without data."""

    __slots__ = ()
    shape = (2, 3)
    dtype = pto.float32


def test_concrete_value_of_a_traced_tensor() -> None:
    t = _Traced()
    with expect(pto.TraceError, "bool", "f32[2,3]", "traced", hint="pto.where") as e:
        bool(e.at(t))
    with expect(pto.TraceError, "float", "f32[2,3]", "traced") as e:
        float(e.at(t))


# -- inputs pypto cannot hold -----------------------------------------------------------------


def test_complex_inputs(x: pto.Tensor) -> None:
    c = np.ones(3, np.complex64)
    with expect(pto.DTypeError, "tensor", "complex", "complex64[3]", hint="real") as e:
        pto.tensor(e.at(c))
    with expect(pto.DTypeError, "add", "complex", "complex128[4]") as e:
        e.at(x) + np.ones(4, complex)
    with expect(pto.DTypeError, "tensor", "complex", "complex128[]") as e:
        pto.tensor(e.at(1j))


def test_string_and_object_inputs(x: pto.Tensor) -> None:
    with expect(pto.DTypeError, "tensor", "<U1[2]", "not numbers", hint="numbers") as e:
        pto.tensor(e.at(["a", "b"]))
    with expect(pto.DTypeError, "tensor", "<U3[1]", "not numbers") as e:
        pto.tensor(e.at(np.array(["abc"])))
    with expect(pto.DTypeError, "mul", "<U2[]", "not numbers") as e:
        e.at(x) * "ab"
    with expect(pto.DTypeError, "tensor", "object[2]", "not numbers") as e:
        pto.tensor(e.at(np.array([None, 1], dtype=object)))
    with expect(pto.DTypeError, "full", "'a'", hint="an int, a float") as e:
        pto.full(e.at((2,)), "a")


def test_ragged_nested_lists() -> None:
    with expect(pto.ShapeError, "tensor", "inhomogeneous") as e:
        pto.tensor(e.at([[1, 2], [3]]))


def test_reduction_flags_and_ddof_must_be_what_they_say(x: pto.Tensor) -> None:
    """keepdims given an array (numpy's own 'truth value is ambiguous') and ddof given a
    list ('>' not supported) escaped as Python errors without the op."""
    with expect(pto.DTypeError, "sum", "keepdims must be a bool", "array") as e:
        pto.sum(e.at(x), 0, np.ones(2))
    with expect(pto.DTypeError, "argmax", "keepdims must be a bool", "'yes'") as e:
        pto.argmax(e.at(x), 0, "yes")
    with expect(pto.DTypeError, "var", "ddof must be an int", "[]", frames=COMPOSITE_FRAMES) as e:
        pto.var(e.at(x), ddof=[])


def test_odd_arguments_are_refused_by_the_op(x: pto.Tensor) -> None:
    """A tensor as a dtype, a float as an axis and a negative broadcast size escaped as
    numpy's ValueError or Python's TypeError (found by calling every op with random
    arguments)."""
    with expect(pto.DTypeError, "cast", "a Tensor is not a dtype") as e:
        pto.cast(e.at(x), x)
    with expect(pto.ShapeError, "expand_dims", "axis must be an int, got None", frames=2) as e:
        pto.expand_dims(e.at(x), None)
    with expect(pto.ShapeError, "broadcast_to", "shape [-1]: sizes must be >= 0") as e:
        pto.broadcast_to(e.at(2), (-1,))
    with expect(pto.ShapeError, "split", "split points must be ints", frames=2) as e:
        pto.split(e.at(x), [1.5])  # (was truncated to 1 silently; a string raised ValueError)


def test_numpy_helpers_name_themselves_and_the_fix(x: pto.Tensor) -> None:
    """stack, one_hot, sign, tril/triu, moveaxis, cumsum and logsumexp check their own
    arguments: the message names them, not the op they are built from."""
    cf = COMPOSITE_FRAMES
    with expect(pto.ShapeError, "stack", "f32[3,4]", "f32[4,3]", hint="concat", frames=cf) as e:
        pto.stack([e.at(x), pto.ones((4, 3))])
    with expect(pto.ShapeError, "stack", "axis 3", "3-d result", hint="[-3, 3)", frames=cf) as e:
        pto.stack([e.at(x), x], 3)
    with expect(
        pto.ShapeError, "stack", "non-empty list", hint="pto.stack([x, y])", frames=cf
    ) as e:
        pto.stack(e.at([]))
    i = pto.tensor([1, 2])
    with expect(pto.DTypeError, "one_hot", "integers", "f32[3,4]", hint="astype", frames=cf) as e:
        pto.one_hot(e.at(x), 3)
    with expect(pto.DTypeError, "one_hot", "num_classes must be an int", "2.5", frames=cf) as e:
        pto.one_hot(e.at(i), 2.5)
    with expect(pto.DTypeError, "one_hot", "'foo'", hint="float32", frames=cf) as e:
        pto.one_hot(e.at(i), 3, dtype="foo")
    with expect(pto.DTypeError, "sign", "bool[3,4]", hint="astype", frames=cf) as e:
        pto.sign(e.at(x) > 0)
    with expect(pto.ShapeError, "tril", "2-d", "f32[4]", frames=cf) as e:
        pto.tril(e.at(pto.ones(4)))
    with expect(pto.DTypeError, "triu", "k must be an int", "0.5", frames=cf) as e:
        pto.triu(e.at(x), 0.5)
    with expect(pto.ShapeError, "moveaxis", "different lengths", frames=cf) as e:
        pto.moveaxis(e.at(x), (0, 1), 0)
    for fn in (pto.cumsum, pto.logsumexp, pto.flip):
        with expect(pto.ShapeError, fn.__name__, "axis 2", *AXIS_PARTS, frames=cf) as e:
            fn(e.at(x), 2)


def test_einsum_names_the_subscripts_and_the_operand(x: pto.Tensor) -> None:
    cf = COMPOSITE_FRAMES
    y = pto.ones((5, 2))
    with expect(pto.ShapeError, "einsum", "'j'", "size 5", "f32[5,2]", "4 before", frames=cf) as e:
        pto.einsum("ij,jk->ik", x, e.at(y))
    with expect(
        pto.ShapeError, "einsum", "'ijk'", "3 axes", "f32[3,4]", hint="'...'", frames=cf
    ) as e:
        pto.einsum("ijk", e.at(x))
    with expect(pto.ShapeError, "einsum", "2 operand(s)", "1 were given", frames=cf) as e:
        pto.einsum("ij,jk", e.at(x))
    with expect(pto.ShapeError, "einsum", "output label 'l'", frames=cf) as e:
        pto.einsum("ij->il", e.at(x))
    with expect(pto.ShapeError, "einsum", "repeats label 'i'", hint="'ii->i'", frames=cf) as e:
        pto.einsum("ij->ii", e.at(x))
    with expect(pto.ShapeError, "einsum", "'$'", "letters", frames=cf) as e:
        pto.einsum("i$", e.at(x))
    with expect(pto.ShapeError, "einsum", "subscripts string", hint="'ij,jk->ik'", frames=cf) as e:
        pto.einsum(e.at(x), x)


def test_nan_to_num_wants_numbers(x: pto.Tensor) -> None:
    with expect(pto.DTypeError, "nan_to_num", "posinf must be a number", "'big'", frames=2) as e:
        pto.nan_to_num(e.at(x), posinf="big")
    with expect(pto.DTypeError, "nan_to_num", "nan must be a number", "True", frames=2) as e:
        pto.nan_to_num(e.at(x), nan=True)


def test_products_diagonals_and_creation_name_themselves(x: pto.Tensor) -> None:
    cf = COMPOSITE_FRAMES
    with expect(pto.ShapeError, "tensordot", "axes=3", "f32[3,4]", "at most 2", frames=cf) as e:
        pto.tensordot(e.at(x), x, 3)
    with expect(pto.ShapeError, "tensordot", "axis 1 of f32[3,4]", "axis 0", frames=cf) as e:
        pto.tensordot(e.at(x), x, ([1], [0]))
    with expect(pto.ShapeError, "tensordot", "pair of axis lists", hint="axes=", frames=cf) as e:
        pto.tensordot(e.at(x), x, "ij")
    with expect(pto.ShapeError, "diagonal", "both axis 1", frames=cf) as e:
        pto.diagonal(e.at(x), 0, 1, -1)
    with expect(pto.ShapeError, "trace", "2-d", "f32[4]", frames=cf) as e:
        pto.trace(e.at(pto.ones(4)))
    with expect(pto.ShapeError, "linspace", "num must be >= 0", "-2") as e:
        pto.linspace(0, 1, e.at(-2))
    with expect(pto.ShapeError, "eye", "k must be an int", "0.5") as e:
        pto.eye(3, k=e.at(0.5))
