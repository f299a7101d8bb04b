"""The VJP rules (pypto/ops/vjp.py) against ``jax.vjp`` of each op's JAX reference.

Every differentiable primitive has cases here (a test fails naming any that lacks one); the
composites are differentiated through their decompositions with a small test-only tape. Each
rule also runs on abstract values (shape and dtype, no data), as a graph tracer would run it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import scipy.special
from hypothesis import example, given, settings
from hypothesis import strategies as st

import pypto as pto
from pypto.core import dispatch
from pypto.eager.tensor import EagerTrace
from pypto.ops import api
from pypto.ops.surface import TensorSurface
from pypto.ops.table import OPS, AVal, Op
from pypto.ops.vjp import unbroadcast
from pypto.reference import compare

f32 = np.float32
bf16 = ml_dtypes.bfloat16
_EAGER = EagerTrace()


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def normal(shape: Sequence[int], seed: int, dtype: Any = f32) -> np.ndarray:
    return _rng(seed).standard_normal(tuple(shape)).astype(dtype)


def uniform(shape: Sequence[int], seed: int, lo: float, hi: float, dtype: Any = f32) -> np.ndarray:
    return _rng(seed).uniform(lo, hi, tuple(shape)).astype(dtype)


def ties(shape: Sequence[int], seed: int, dtype: Any = f32) -> np.ndarray:
    """Small integers as floats, so that equal values (ties) are common."""
    return _rng(seed).integers(-2, 3, tuple(shape)).astype(dtype)


# a product's zeros: one in the middle of a row, two in a row, one first
_ZEROS = np.array(
    [[1.5, -0.5, 0.0, 2.0, 0.75, -1.25, 0.5], [0.0, 0.0, 1.5, -2.0, 0.5, 1.0, 0.25]], f32
)

# every kink of the piecewise activations (relu6 at 0 and 6, hard_tanh at ±1, hard_sigmoid at
# ±3), between points off them
_KINKS = np.array([[-7.0, -3.0, -1.5, -1.0, -0.0, 0.0], [0.5, 1.0, 3.0, 4.5, 6.0, 8.0]], f32)
# two 4x4 matrices far from singular whose rows need reordering: elimination pivots
_PIVOTED = (normal((2, 4, 4), 192) * 0.5 + 3 * np.eye(4, dtype=f32))[:, [2, 0, 3, 1]]
_ROW_MASK = np.array([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 0, 1, 1, 1]], bool)
_WITH_NAN_MASK = np.array([[1, 1, 0, 1], [1, 0, 1, 1], [0, 1, 1, 1]], bool)
_WITH_NAN = np.array(
    # NaN in some rows and columns, one row of them only
    [[1.5, np.nan, -0.5, 2.0], [np.nan, np.nan, np.nan, np.nan], [0.25, -1.0, np.nan, 0.75]],
    f32,
)


def is_float(a: np.ndarray) -> bool:
    return pto.dtypes.from_numpy(a.dtype).is_floating


# ---------------------------------------------------------------------------------------------
# Abstract values: what a graph tracer hands the rules (a shape and a dtype, no data).


class Abstract(TensorSurface):
    """A value with only an aval; any attempt to read its data is a TraceError."""

    __slots__ = ("aval",)

    def __init__(self, aval: AVal) -> None:
        self.aval = aval

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return self.aval.shape

    @property
    def dtype(self) -> pto.DType:  # type: ignore[override]
        return self.aval.dtype


class AbstractTrace:
    """Applies ops by their shape and dtype rules only."""

    def process(self, op: Op, args: tuple[Any, ...], params: dict[str, Any]) -> Abstract:
        for a in args:
            assert type(a) is Abstract, f"{op.name} got a {type(a).__name__}, not a traced value"
        avals = [a.aval for a in args]
        assert op.shape_rule is not None and op.dtype_rule is not None
        return Abstract(AVal(op.shape_rule(*avals, **params), op.dtype_rule(*avals, **params)))

    def const(self, array: np.ndarray) -> Abstract:
        return Abstract(AVal(array.shape, pto.dtypes.from_numpy(array.dtype)))

    def composite(self, op: Op, args: tuple[Any, ...], params: dict[str, Any]) -> Any:
        assert op.decompose is not None
        return op.decompose(*args, **params)


def abstract_cotangents(op: Op, primals: Sequence[np.ndarray], params: dict) -> list[Any]:
    """The rule run on abstract values; returns the avals of its results (or None)."""
    trace = AbstractTrace()
    with dispatch.pushed(trace):
        xs = [trace.const(np.asarray(a)) for a in primals]
        out = dispatch.bind(op, tuple(xs), params)
        ct = trace.const(np.zeros(out.shape, out.dtype.np))
        cts = op.rules["vjp"](ct, *xs, out=out, **params)
    return [None if c is None else c.aval for c in cts]


# ---------------------------------------------------------------------------------------------
# Checking a rule against jax.vjp


def assert_close(
    name: str, actual: Any, expected: Any, like: np.ndarray, k: int, scale: float | None = None
) -> None:
    """``actual`` is a Tensor with ``like``'s shape and dtype, within tolerance of ``expected``
    (``scale``: the magnitude of the terms a cotangent sums, see ``compare``)."""
    assert isinstance(actual, pto.Tensor), f"{name}: cotangent is a {type(actual).__name__}"
    assert actual.shape == like.shape, f"{name}: cotangent shape {actual.shape} != {like.shape}"
    assert actual.dtype.np == like.dtype, f"{name}: cotangent dtype {actual.dtype} != {like.dtype}"
    e = np.asarray(expected)
    assert e.shape == like.shape and e.dtype == like.dtype, (name, e.shape, e.dtype)
    c = compare(name, actual, e, k=k, scale=scale)
    assert c.ok, f"{c}\n pypto: {np.asarray(actual).ravel()[:8]}\n jax:   {e.ravel()[:8]}"


def reference(op: Op, params: dict[str, Any]) -> Callable[..., Any]:
    """The op's JAX reference with its params bound."""
    jax_impl = op.jax_impl
    assert jax_impl is not None
    return lambda *a: jax_impl(*a, **params)


def jax_cotangents(
    fn: Callable[..., Any], primals: Sequence[np.ndarray], ct: np.ndarray
) -> list[Any]:
    """``jax.vjp`` of ``fn`` with respect to its floating arguments; None for the others."""
    diff = [i for i, a in enumerate(primals) if is_float(a)]

    def f(*d: Any) -> Any:
        args: list[Any] = list(primals)
        for i, v in zip(diff, d, strict=True):
            args[i] = v
        return fn(*args)

    def pullback(d: tuple[Any, ...], ct: Any) -> Any:
        return jax.vjp(f, *d)[1](ct)

    # One compiled function per case: much faster than JAX's op-by-op dispatch.
    got = dict(zip(diff, jax.jit(pullback)(tuple(primals[i] for i in diff), ct), strict=True))
    return [got.get(i) for i in range(len(primals))]


def check_primitive(
    name: str, primals: Sequence[np.ndarray], params: dict | None = None, k: int = 1, seed: int = 0
) -> None:
    """The rule of ``name`` at ``primals`` matches ``jax.vjp`` of the op's ``jax_impl``, and
    gives the same avals when run on abstract values."""
    op = OPS[name]
    params = params or {}
    primals = [np.asarray(a) for a in primals]
    xs = [pto.tensor(a) for a in primals]
    with np.errstate(divide="ignore", invalid="ignore"):  # pow at 0 meets infinities
        out = dispatch.bind(op, tuple(xs), params)
        ct = normal(out.shape, seed + 1, out.dtype.np)
        cts = op.rules["vjp"](pto.tensor(ct), *xs, out=out, **params)
        assert isinstance(cts, tuple) and len(cts) == len(primals), f"{name}: {len(cts)} results"
        refs = jax_cotangents(reference(op, params), primals, ct)
        # a cotangent summed over broadcast axes may cancel: its rounding error scales with
        # the terms (about |ct| times the primals' magnitude), not with the sum
        terms = float(np.abs(ct).max(initial=0.0)) * max(
            [1.0] + [float(np.abs(p).max()) for p in primals if is_float(p) and p.size]
        )
        for i, (a, c, r) in enumerate(zip(primals, cts, refs, strict=True)):
            what = f"{name} cotangent {i} at {[p.shape for p in primals]} {params}"
            if r is None:
                assert c is None, f"{what}: expected None for a {a.dtype} primal"
            elif c is None:
                assert not np.any(np.asarray(r)), f"{what}: None but JAX's is nonzero"
            else:
                assert_close(what, c, r, a, k, terms)
    traced = abstract_cotangents(op, primals, params)
    for a, c, s in zip(primals, cts, traced, strict=True):
        assert (c is None) == (s is None), f"{name}: traced and eager rules disagree"
        if s is not None:
            assert s == AVal(a.shape, pto.dtypes.from_numpy(a.dtype)), f"{name}: traced {s}"


# ---------------------------------------------------------------------------------------------
# The cases: at least one per differentiable primitive.

Case = tuple[list[np.ndarray], dict[str, Any], int]  # primals, params, k (terms summed)

_X23 = (2, 3)


def _spec(shape: tuple[int, ...], key: Any) -> dict[str, Any]:
    return {"index": api.slice_spec(shape, key)[0]}


@pto.custom_vjp
def _sin_mul(x, y):
    return pto.sin(x) * y


_sin_mul.defvjp(
    lambda x, y: (_sin_mul(x, y), (x, y)),
    lambda r, g: (g * pto.cos(r[0]) * r[1], g * pto.sin(r[0])),
)


CASES: dict[str, list[Case]] = {
    "exp": [([normal(_X23, 1)], {}, 1), ([normal(_X23, 1, bf16)], {}, 1)],
    "log": [([uniform(_X23, 2, 0.1, 3.0)], {}, 1)],
    "sqrt": [([uniform(_X23, 3, 0.1, 3.0)], {}, 1)],
    "rsqrt": [([uniform(_X23, 4, 0.1, 3.0)], {}, 1), ([uniform(_X23, 4, 0.1, 3.0, bf16)], {}, 1)],
    "reciprocal": [([uniform(_X23, 5, 0.5, 3.0)], {}, 1)],
    "tanh": [([normal(_X23, 6) * 2], {}, 1), ([normal(_X23, 6, bf16)], {}, 1)],
    "sigmoid": [([normal(_X23, 7) * 3], {}, 1)],
    "sin": [([normal(_X23, 8) * 3], {}, 1)],
    "cos": [([normal(_X23, 9) * 3], {}, 1)],
    "neg": [([normal(_X23, 10)], {}, 1)],
    "stop_gradient": [([normal(_X23, 15)], {}, 1)],  # a zero cotangent, as jax.lax.stop_gradient
    "optimization_barrier": [([normal(_X23, 16)], {}, 1)],  # the cotangent passes through
    "checkpoint_name": [([normal(_X23, 17)], {"name": "h"}, 1)],
    "abs": [([np.array([-2.0, -0.5, 0.5, 3.0], f32)], {}, 1)],
    "add": [([normal((2, 3), 11), normal((3,), 12)], {}, 2)],
    "sub": [([normal((2, 1), 13), normal((1, 3), 14)], {}, 3)],
    "mul": [
        ([normal((4, 1, 3), 15), normal((2, 1), 16)], {}, 4),
        ([normal((4, 1, 3), 15, bf16), normal((2, 1), 16, bf16)], {}, 4),
    ],
    "div": [([normal((3,), 17), uniform((2, 3), 18, 0.5, 2.0)], {}, 2)],
    "maximum": [([ties((3, 4), 19), ties((4,), 20)], {}, 3)],
    "minimum": [([ties((3, 4), 21), ties((3, 1), 22)], {}, 4)],
    "fmod": [([uniform((2, 3), 25, -6.0, 6.0), uniform((3,), 26, 0.7, 2.5)], {}, 2)],
    "pow": [
        ([uniform((2, 3), 23, 0.5, 2.0), uniform((3,), 24, -1.5, 2.5)], {}, 2),
        # x == 0: the exponent's cotangent is 0 there, and 0^(y-1) is 0 or inf for the base.
        ([np.array([0.0, 0.0, 2.0], f32), np.array([2.0, 0.5, 3.0], f32)], {}, 1),
    ],
    "where": [([np.array([True, False, True]), normal((2, 3), 25), normal((2, 1), 26)], {}, 3)],
    "cast": [
        ([normal(_X23, 27)], {"dtype": pto.float16}, 1),
        ([normal(_X23, 28, bf16)], {"dtype": pto.float32}, 1),
        ([normal(_X23, 29)], {"dtype": pto.int32}, 1),
    ],
    "sum": [
        ([normal((2, 3, 4), 30)], {"axes": (0, 2), "keepdims": False}, 1),
        ([normal((2, 3, 4), 31)], {"axes": (1,), "keepdims": True}, 1),
        ([normal((2, 3), 32)], {"axes": (0, 1), "keepdims": False}, 1),
        ([normal((2, 3, 4), 33, bf16)], {"axes": (2,), "keepdims": False}, 1),
    ],
    "max": [
        ([ties((3, 4, 2), 34)], {"axes": (1,), "keepdims": False}, 1),
        ([ties((3, 4), 35)], {"axes": (0, 1), "keepdims": True}, 1),
        ([ties((3, 4), 36, bf16)], {"axes": (0,), "keepdims": False}, 1),
    ],
    "min": [([ties((3, 4, 2), 37)], {"axes": (0, 2), "keepdims": False}, 1)],
    "matmul": [
        ([normal((3, 4), 40), normal((4, 5), 41)], {}, 5),
        ([normal((4,), 42), normal((4, 5), 43)], {}, 5),
        ([normal((3, 4), 44), normal((4,), 45)], {}, 4),
        ([normal((4,), 46), normal((4,), 47)], {}, 1),
        ([normal((4,), 48), normal((2, 4, 5), 49)], {}, 10),
        ([normal((2, 3, 4), 50), normal((4,), 51)], {}, 4),
        ([normal((2, 1, 3, 4), 52), normal((5, 4, 2), 53)], {}, 10),
        ([normal((3, 4), 54), normal((2, 4, 5), 55)], {}, 10),
        ([normal((8, 16), 56, bf16), normal((16, 8), 57, bf16)], {}, 16),
    ],
    "reshape": [([normal((2, 6), 60)], {"shape": (3, 4)}, 1)],
    "transpose": [([normal((2, 3, 4), 61)], {"perm": (2, 0, 1)}, 1)],
    "broadcast_to": [
        ([normal((3, 1), 62)], {"shape": (2, 3, 4)}, 8),
        ([normal((), 63)], {"shape": (2, 3)}, 6),
    ],
    "concat": [
        ([normal((2, 3), 64), normal((2, 0), 65), normal((2, 2), 66)], {"axis": 1}, 1),
        ([normal((1, 3), 67), normal((2, 3), 68)], {"axis": 0}, 1),
    ],
    "slice": [
        ([normal((5, 6), 70)], _spec((5, 6), (slice(4, None, -2), slice(1, 5, 3))), 1),
        ([normal((5, 6), 71)], _spec((5, 6), (slice(None, None, -1), slice(2, 3))), 1),
        ([normal((4, 7), 72)], _spec((4, 7), (slice(1, 3), slice(None, None, 2))), 1),
        ([normal((4, 7), 73)], _spec((4, 7), (slice(3, 1), slice(6, 0, -4))), 1),
    ],
    "scan": [
        ([normal((3, 7), 129)], {"op": "add", "reverse": False}, 7),
        ([normal((2, 1, 40), 130)], {"op": "add", "reverse": True}, 40),
        ([normal((3, 7), 140)], {"op": "mul", "reverse": False}, 7),
        # zeros in a product: its gradient has no division to break
        ([_ZEROS], {"op": "mul", "reverse": False}, 7),
        ([_ZEROS], {"op": "mul", "reverse": True}, 7),
        ([normal((3, 9), 141)], {"op": "max", "reverse": True}, 9),
        ([normal((2, 1, 9), 142)], {"op": "min", "reverse": False}, 9),
    ],
    "scan_affine": [
        ([uniform((3, 7), 143, -1.5, 1.5), normal((3, 7), 144)], {"reverse": False}, 7),
        ([_ZEROS, normal((2, 7), 145)], {"reverse": True}, 7),
    ],
    "lax_pad": [
        ([normal((2, 3), 74)], {"config": ((1, 0, 0), (2, 1, 2))}, 1),
        ([normal((3, 0, 2), 75)], {"config": ((0, 0, 1), (1, 2, 3), (0, 0, 0))}, 1),
    ],
    "gather_last": [
        ([normal((3, 5), 131), np.array([[4, 0, 1, 3, 2]] * 3, np.int32)], {"perm": True}, 1),
        (
            [normal((2, 1, 4), 132, bf16), np.array([[[1, 0, 3, 2]], [[0, 1, 2, 3]]], np.int32)],
            {"perm": True},
            1,
        ),
        # repeated indices sum their cotangents; positions not taken get none
        (
            [normal((3, 5), 133), np.array([[4, 4, 0], [1, 2, 1], [0, 0, 0]], np.int32)],
            {"perm": False},
            3,
        ),
        ([normal((2, 6), 134, np.float16), np.zeros((2, 0), np.int32)], {"perm": False}, 1),
    ],
    "take": [
        ([normal((5, 6), 76), np.array([[0, -1], [2, 0]], np.int32)], {"axis": 1}, 3),
        ([normal((4, 3, 2), 77), np.array([3, 3, -4, 1, 3], np.int8)], {"axis": 0}, 5),
        ([normal((4, 3), 78, bf16), np.array([1, 1, 2], np.int32)], {"axis": 0}, 2),
        ([normal((4, 3), 79), np.zeros((0,), np.int32)], {"axis": 0}, 1),
    ],
    # a hand-written backward equal to the body's derivative: JAX differentiates the body
    "custom_vjp_call": [([normal(_X23, 80), normal(_X23, 81)], {"fn": _sin_mul.name}, 1)],
}


def _case_ids() -> list[Any]:
    out = []
    for name, cases in sorted(CASES.items()):
        for i, (primals, params, k) in enumerate(cases):
            d = "-".join(a.dtype.name for a in primals)
            out.append(pytest.param(name, primals, params, k, id=f"{name}-{i}-{d}"))
    return out


def test_every_differentiable_primitive_has_a_case() -> None:
    want = {n for n, op in OPS.items() if not op.is_composite and op.differentiable}
    assert not want - set(CASES), (
        f"differentiable primitives without a VJP case: {want - set(CASES)}"
    )
    assert set(CASES) <= want, f"cases for unknown or non-differentiable ops: {set(CASES) - want}"


@pytest.mark.parametrize(("name", "primals", "params", "k"), _case_ids())
def test_vjp_matches_jax(name: str, primals: list[np.ndarray], params: dict, k: int) -> None:
    check_primitive(name, primals, params, k)


# Broadcasting pairs (and triples for where), drawn by hypothesis.

_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "pow")


@pytest.mark.parametrize("name", _BINARY)
@settings(max_examples=6)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
    seed=st.integers(0, 1000),
)
# x's cotangent sums four terms that cancel to 3.5e-4 (sub): judged against the terms
@example(shapes=hnp.BroadcastableShapes(((), (2, 2, 1)), (2, 2, 1)), seed=307)
def test_binary_vjp_broadcasts(name: str, shapes: Any, seed: int) -> None:
    sx, sy = shapes.input_shapes
    if name in ("maximum", "minimum"):
        xs = [ties(sx, seed), ties(sy, seed + 1)]
    elif name == "div":
        xs = [normal(sx, seed), uniform(sy, seed + 1, 0.5, 2.0)]
    elif name == "pow":
        xs = [uniform(sx, seed, 0.5, 2.0), uniform(sy, seed + 1, -2.0, 2.0)]
    else:
        xs = [normal(sx, seed), normal(sy, seed + 1)]
    k = max(1, math.prod(shapes.result_shape))
    check_primitive(name, xs, {}, k, seed)


@settings(max_examples=6)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3),
    seed=st.integers(0, 1000),
)
def test_where_vjp_broadcasts(shapes: Any, seed: int) -> None:
    sc, sx, sy = shapes.input_shapes
    cond = _rng(seed).random(sc) < 0.5
    k = max(1, math.prod(shapes.result_shape))
    check_primitive("where", [cond, normal(sx, seed), normal(sy, seed + 1)], {}, k, seed)


@settings(max_examples=6)
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
    data=st.data(),
)
def test_reduction_vjp_over_any_axes(shape: tuple[int, ...], data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(["sum", "max", "min"]))
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    keepdims = data.draw(st.booleans())
    x = ties(shape, len(shape)) if name != "sum" else normal(shape, len(shape))
    check_primitive(name, [x], {"axes": axes, "keepdims": keepdims}, 1)


@settings(max_examples=6)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=5), data=st.data())
def test_slice_vjp_any_window(shape: tuple[int, ...], data: st.DataObject) -> None:
    key = tuple(
        slice(
            data.draw(st.none() | st.integers(-n - 1, n + 1)),
            data.draw(st.none() | st.integers(-n - 1, n + 1)),
            data.draw(st.sampled_from([None, 1, 2, 3, -1, -2])),
        )
        for n in shape
    )
    check_primitive("slice", [normal(shape, 0)], _spec(shape, key), 1)


# ---------------------------------------------------------------------------------------------
# Zero cotangents: integer and bool primals, and ops without derivatives.

_I = np.arange(6, dtype=np.int32).reshape(2, 3)
_INT_CASES: list[tuple[str, list[np.ndarray], dict[str, Any]]] = [
    ("neg", [_I], {}),
    ("abs", [_I.astype(np.int8)], {}),
    ("add", [_I, _I[0]], {}),
    ("add", [_I > 2, _I < 4], {}),
    ("mul", [_I, _I], {}),
    ("maximum", [_I, _I.T.reshape(2, 3)], {}),
    ("pow", [_I, _I], {}),
    ("where", [_I > 2, _I, _I[:1]], {}),
    ("cast", [_I], {"dtype": pto.float32}),
    ("cast", [_I > 2], {"dtype": pto.bfloat16}),
    ("sum", [_I.astype(np.int8)], {"axes": (0,), "keepdims": False}),
    ("sum", [_I > 2], {"axes": (0, 1), "keepdims": False}),
    ("max", [_I], {"axes": (1,), "keepdims": True}),
    ("matmul", [_I.astype(np.int8), _I.T.astype(np.int8)], {}),
    ("reshape", [_I], {"shape": (3, 2)}),
    ("transpose", [_I], {"perm": (1, 0)}),
    ("broadcast_to", [_I[0]], {"shape": (4, 3)}),
    ("concat", [_I, _I], {"axis": 0}),
    ("slice", [_I], {"index": ((1, 2, 1), (2, None, -1))}),
    ("lax_pad", [_I > 2], {"config": ((1, 1, 1), (0, 2, 0))}),
    ("take", [_I, np.array([1, 0], np.int32)], {"axis": 1}),
]


@pytest.mark.parametrize(("name", "primals", "params"), _INT_CASES, ids=lambda v: str(v)[:24])
def test_integer_and_bool_primals_get_none(
    name: str, primals: list[np.ndarray], params: dict
) -> None:
    op = OPS[name]
    xs = [pto.tensor(a) for a in primals]
    out = dispatch.bind(op, tuple(xs), params)
    cts = op.rules["vjp"](pto.zeros(out.shape, out.dtype), *xs, out=out, **params)
    assert cts == (None,) * len(primals)


def test_cast_to_an_integer_passes_no_cotangent_as_in_jax() -> None:
    x = normal((3,), 0)
    out, pull = jax.vjp(reference(OPS["cast"], {"dtype": pto.int32}), x)
    (g,) = pull(np.zeros(out.shape, jax.dtypes.float0))
    assert not np.any(np.asarray(g))
    t = pto.tensor(x)
    assert OPS["cast"].rules["vjp"](pto.zeros(3, pto.int32), t, out=t, dtype=pto.int32) == (None,)


def test_non_differentiable_ops_have_no_vjp_rule() -> None:
    nondiff = {n for n, op in OPS.items() if not op.differentiable}
    assert {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"} <= nondiff
    assert "argmax" in nondiff
    # a hand-written kernel's rule only refuses (tests/tile/test_kernel.py): no silent zero
    assert not [n for n in nondiff if "vjp" in OPS[n].rules and n != "kernel_call"]


def test_abs_derivative_at_zero_is_jaxs() -> None:
    x = np.array([-0.0, 0.0, -1.0, 2.0], f32)
    (g,) = OPS["abs"].rules["vjp"](pto.ones(4), pto.tensor(x), out=pto.abs(pto.tensor(x)))
    want = [float(jax.grad(jnp.abs)(v)) for v in x]
    assert want == [1.0, 1.0, -1.0, 1.0]
    np.testing.assert_array_equal(g.numpy(), want)


def test_unbroadcast_sums_added_and_stretched_dims() -> None:
    ct = pto.tensor(np.arange(24, dtype=f32).reshape(2, 3, 4))
    np.testing.assert_array_equal(
        unbroadcast(ct, (3, 1)).numpy(),
        np.arange(24, dtype=f32).reshape(2, 3, 4).sum((0, 2))[:, None],
    )
    assert unbroadcast(ct, ()).shape == ()
    assert unbroadcast(ct, (2, 3, 4)) is ct


# ---------------------------------------------------------------------------------------------
# Composites, differentiated through their decompositions with a test-only tape.


class Tape:
    """Runs ops eagerly and records (op, inputs, params, output) for the backward pass."""

    def __init__(self) -> None:
        self.records: list[tuple[Op, tuple[Any, ...], dict[str, Any], Any]] = []

    def process(self, op: Op, args: tuple[Any, ...], params: dict[str, Any]) -> Any:
        out = _EAGER.process(op, args, params)
        self.records.append((op, args, params, out))
        return out

    def const(self, array: np.ndarray) -> Any:
        return _EAGER.const(array)

    def composite(self, op: Op, args: tuple[Any, ...], params: dict[str, Any]) -> Any:
        assert op.decompose is not None
        return op.decompose(*args, **params)


def tape_vjp(fn: Callable[..., Any], primals: Sequence[np.ndarray], ct: np.ndarray) -> list[Any]:
    """Reverse mode over the recorded ops, calling each op's VJP rule."""
    xs = [pto.tensor(a) for a in primals]
    tape = Tape()
    with dispatch.pushed(tape):
        out = fn(*xs)
    cts: dict[int, Any] = {id(out): pto.tensor(ct)}
    for op, args, params, o in reversed(tape.records):
        g = cts.pop(id(o), None)
        if g is None:
            continue
        for a, ga in zip(args, op.rules["vjp"](g, *args, out=o, **params), strict=True):
            if ga is not None:
                prev = cts.get(id(a))
                cts[id(a)] = ga if prev is None else api.add(prev, ga)
    return [cts.get(id(x)) for x in xs]


_DPA_QKV = [normal((2, 4, 4, 8), 93), normal((2, 5, 2, 8), 94), normal((2, 5, 2, 8), 96)]
_SDPA_QKV = [normal((2, 4, 8), 90), normal((2, 5, 8), 91), normal((2, 5, 6), 92)]
COMPOSITE_CASES: list[tuple[str, list[np.ndarray], dict[str, Any], int]] = [
    ("softmax", [normal((3, 5), 80)], {"axis": -1}, 5),
    ("softmax", [normal((4, 3), 81)], {"axis": 0}, 4),
    ("softmax", [normal((3, 8), 81, bf16)], {"axis": -1}, 8),
    ("log_softmax", [normal((3, 5), 82)], {"axis": -1}, 5),
    # masked elements (a row of them only) get nothing; through the decomposition's selects
    ("softmax", [normal((3, 5), 83)], {"axis": -1, "where": _ROW_MASK}, 5),
    ("log_softmax", [normal((3, 5), 84)], {"axis": (0, 1), "where": _ROW_MASK}, 15),
    ("var", [normal((3, 5), 85)], {"axis": 1, "correction": 1.5, "where": _ROW_MASK[:, :1]}, 5),
    ("std", [normal((3, 5), 86)], {"axis": 0, "mean": normal((1, 5), 87)}, 3),
    ("nanvar", [_WITH_NAN], {"axis": 1, "where": _WITH_NAN_MASK}, 4),
    ("nansum", [_WITH_NAN], {"axis": 0, "where": _WITH_NAN_MASK, "initial": 2.0}, 3),
    ("nanmax", [_WITH_NAN], {"axis": 1, "where": _WITH_NAN_MASK, "initial": -3.0}, 1),
    # jax.nn's attention: grouped heads, a bias, padded queries and keys (rows that see no key
    # take the values' mean), and a causal window
    ("dot_product_attention", _DPA_QKV, {"is_causal": True}, 12),
    # pooling: a max (the gradient to each window's maximum) and a padded, dilated sum
    (
        "reduce_window",
        [normal((2, 5, 6), 235)],
        {
            "init_value": -np.inf,
            "computation": pto.maximum,
            "window_dimensions": (1, 3, 2),
            "window_strides": (1, 2, 1),
            "padding": "SAME",
        },
        1,
    ),
    (
        "reduce_window",
        [normal((4, 6), 236)],
        {
            "init_value": 0.0,
            "computation": pto.add,
            "window_dimensions": (2, 2),
            "padding": ((1, 1), (0, 2)),
            "base_dilation": (2, 1),
            "window_dilation": (1, 2),
        },
        4,
    ),
    # convolutions: strided, padded and dilated, grouped, transposed (lhs dilation)
    (
        "conv_general_dilated",
        [normal((2, 4, 6, 5), 231), normal((6, 2, 3, 2), 232)],
        {
            "window_strides": (2, 1),
            "padding": "SAME",
            "rhs_dilation": (1, 2),
            "feature_group_count": 2,
        },
        12,
    ),
    (
        "conv_general_dilated",
        [normal((1, 5, 4, 3), 233), normal((2, 2, 3, 4), 234)],
        {
            "window_strides": (1, 1),
            "padding": ((1, 0), (2, 1)),
            "lhs_dilation": (2, 1),
            "dimension_numbers": ("NHWC", "HWIO", "NHWC"),
        },
        12,
    ),
    (
        "dot_product_attention",
        _DPA_QKV,
        {
            "bias": normal((1, 4, 4, 5), 95),
            "query_seq_lengths": np.array([3, 4], np.int32),
            "key_value_seq_lengths": np.array([0, 4], np.int32),
        },
        12,
    ),
    ("dot_product_attention", _DPA_QKV, {"local_window_size": (1, 0), "scale": 0.5}, 12),
    ("layer_norm", [normal((3, 6), 83), normal((6,), 84), normal((6,), 85)], {}, 18),
    ("layer_norm", [normal((2, 8), 83, bf16), normal((8,), 84, bf16)], {}, 16),
    ("rms_norm", [normal((3, 6), 86), normal((6,), 87)], {}, 18),
    ("gelu", [normal((2, 5), 88) * 2], {}, 1),
    ("silu", [normal((2, 5), 89) * 2], {}, 1),
    ("relu", [np.array([-2.0, -0.5, 0.25, 3.0], f32)], {}, 1),
    ("clip", [ties((3, 4), 93)], {"min": -1.0, "max": 1.0}, 1),
    ("mean", [normal((3, 4, 2), 94)], {"axis": (0, 2), "keepdims": False}, 1),
    ("mean", [normal((3, 4), 95)], {"axis": None, "keepdims": True}, 1),
    ("var", [normal((3, 4, 2), 96)], {"axis": (0, 2), "keepdims": False, "ddof": 1}, 8),
    ("var", [normal((3, 8), 96, bf16)], {"axis": -1, "keepdims": True}, 8),
    ("std", [normal((4, 5), 97)], {"axis": 0, "keepdims": False}, 8),
    ("scaled_dot_product_attention", _SDPA_QKV, {"causal": True}, 40),
    ("square", [normal((2, 5), 100)], {}, 1),
    ("logsumexp", [normal((3, 5), 101)], {"axis": -1, "keepdims": False}, 5),
    ("logsumexp", [normal((3, 4, 2), 102)], {"axis": (0, 2), "keepdims": True}, 6),
    ("logsumexp", [normal((3, 8), 103, bf16)], {"axis": None, "keepdims": False}, 24),
    ("swapaxes", [normal((2, 3, 4), 104)], {"axis1": 0, "axis2": 2}, 1),
    ("moveaxis", [normal((2, 3, 4), 105)], {"source": (0, 1), "destination": (2, 0)}, 1),
    ("flip", [normal((3, 4), 106)], {"axis": 1}, 1),
    ("tril", [normal((2, 3, 4), 107)], {"k": 1}, 1),
    ("triu", [normal((4, 3), 108)], {"k": -1}, 1),
    ("cumsum", [normal((3, 7), 109)], {"axis": 1}, 7),
    ("cumsum", [normal((2, 5), 110, bf16)], {"axis": None}, 10),
    ("cumsum", [normal((3, 4), 146)], {"axis": 0, "reverse": True}, 3),
    ("cumprod", [_ZEROS], {"axis": 1}, 7),
    ("cumprod", [uniform((3, 4), 147, -1.5, 1.5, bf16)], {"axis": 0, "reverse": True}, 3),
    ("cummax", [normal((3, 6), 148)], {"axis": 1}, 1),
    ("cummax", [normal((4, 3), 149, bf16)], {"axis": 0, "reverse": True}, 1),
    ("cummin", [normal((2, 3, 4), 150)], {"axis": None}, 1),
    ("log1p", [np.abs(normal((3, 4), 111))], {}, 2),
    ("expm1", [normal((3, 4), 112)], {}, 2),
    ("expm1", [normal((3, 4), 112, bf16)], {}, 2),
    ("softplus", [np.append(normal((7,), 113) * 4, 0).astype(f32)], {}, 2),  # 1/2 at 0
    ("elu", [normal((3, 4), 114)], {"alpha": 0.5}, 2),
    ("leaky_relu", [np.append(normal((7,), 115), 0).astype(f32)], {}, 1),
    ("nan_to_num", [np.array([1.5, np.nan, np.inf, -np.inf, -2.0], f32)], {"nan": 3.0}, 1),
    ("tensordot", [normal((2, 3, 4), 116), normal((4, 3, 5), 117)], {"axes": ([1, 2], [1, 0])}, 12),
    ("dot", [normal((2, 3, 4), 118), normal((5, 4, 2), 119)], {}, 4),
    ("inner", [normal((3, 4), 120), normal((2, 4), 121)], {}, 4),
    ("outer", [normal((3,), 122), normal((2, 2), 123)], {}, 1),
    ("diagonal", [normal((3, 4, 5), 124)], {"offset": 1, "axis1": 2, "axis2": 0}, 1),
    ("trace", [normal((4, 3), 125)], {"offset": -1}, 3),
    ("remainder", [normal((3, 4), 131) * 5, -uniform((4,), 132, 0.7, 2.5)], {}, 2),
    ("floor_divide", [normal((3, 4), 133) * 5, uniform((4,), 134, 0.7, 2.5)], {}, 2),
    ("prod", [normal((3, 5), 126)], {"axis": -1, "keepdims": False}, 5),
    ("prod", [normal((3, 4, 2), 127)], {"axis": (0, 2), "keepdims": True}, 6),
    ("prod", [np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 1.5]], f32)], {"axis": 1}, 3),  # zeros
    ("prod", [normal((2, 7), 128, bf16)], {"axis": None}, 14),
    # numpy's library
    ("log2", [uniform((3, 4), 151, 0.2, 5.0)], {}, 2),
    ("log10", [uniform((3, 4), 152, 0.2, 5.0, bf16)], {}, 2),
    ("exp2", [normal((3, 4), 153)], {}, 2),
    ("sinh", [np.append(normal((7,), 154) * 2, [0.0, 1e-5, -0.999]).astype(f32)], {}, 4),
    ("cosh", [normal((3, 4), 155) * 2], {}, 4),
    ("tan", [uniform((3, 4), 156, -1.4, 1.4)], {}, 4),
    ("deg2rad", [normal((3, 4), 157)], {}, 1),
    ("rad2deg", [normal((3, 4), 158)], {}, 1),
    # ties: half the gradient to each side, as JAX's rule gives
    ("logaddexp", [normal((3, 4), 159), np.append(normal((3,), 160), 0.5).astype(f32)], {}, 2),
    ("logaddexp", [np.full((2, 2), 0.5, f32), np.full((2,), 0.5, f32)], {}, 2),
    ("logaddexp2", [normal((3, 4), 161), normal((3, 1), 162)], {}, 2),
    ("hypot", [normal((3, 4), 163), normal((4,), 164)], {}, 2),
    (
        "fmax",
        [np.array([1.0, np.nan, 2.0, np.nan], f32), np.array([0.5, 3.0, np.nan, np.nan], f32)],
        {},
        1,
    ),
    ("fmin", [normal((3, 4), 165), normal((3, 4), 166)], {}, 1),
    ("ptp", [normal((3, 5), 167)], {"axis": 1}, 1),
    ("average", [normal((3, 5), 168)], {"axis": 1}, 5),
    ("nansum", [_WITH_NAN], {"axis": 1}, 4),
    ("nanprod", [_WITH_NAN], {"axis": 0}, 3),
    ("nanmean", [_WITH_NAN], {"axis": None}, 12),
    ("nanmax", [_WITH_NAN], {"axis": 1}, 1),
    ("nanmin", [_WITH_NAN], {"axis": 0, "keepdims": True}, 1),
    ("nanvar", [_WITH_NAN], {"axis": 1, "ddof": 1}, 8),
    ("nanstd", [_WITH_NAN], {"axis": 0}, 8),
    ("nancumsum", [_WITH_NAN], {"axis": 1}, 4),
    ("nanquantile", [_WITH_NAN], {"q": [0.3, 0.5], "axis": 1}, 4),
    ("arctan", [normal((3, 4), 203) * 3], {}, 4),
    ("arctan2", [normal((3, 4), 204), normal((4,), 205)], {}, 4),
    ("arcsin", [uniform((3, 4), 206, -0.95, 0.95)], {}, 4),
    ("arccos", [uniform((3, 4), 207, -0.95, 0.95)], {}, 4),
    ("arcsinh", [normal((3, 4), 208) * 3], {}, 4),
    ("arccosh", [uniform((3, 4), 209, 1.05, 9.0)], {}, 4),
    ("arctanh", [uniform((3, 4), 210, -0.95, 0.95)], {}, 4),
    ("pad", [normal((2, 3), 211)], {"pad_width": ((1, 4), (2, 0)), "mode": "reflect"}, 4),
    ("pad", [normal((2, 3), 212)], {"pad_width": 2, "mode": "edge"}, 8),
    ("pad", [normal((2, 3), 213)], {"pad_width": (1, 3), "mode": "wrap"}, 4),
    ("pad", [normal((3, 4), 214)], {"pad_width": 2, "mode": "mean", "stat_length": 2}, 8),
    ("pad", [normal((3, 4), 215)], {"pad_width": (2, 1), "mode": "linear_ramp"}, 4),
    ("pad", [normal((3, 4), 216)], {"pad_width": 3, "mode": "reflect", "reflect_type": "odd"}, 8),
    ("pad", [normal((3, 5), 217)], {"pad_width": (1, 2), "mode": "maximum"}, 4),
    ("cbrt", [normal((3, 4), 214) * 5], {}, 2),
    ("sinc", [np.append(normal((5,), 215), 0.0).astype(f32)], {}, 4),
    ("vdot", [normal((2, 3), 216), normal((6,), 217)], {}, 6),
    ("vecdot", [normal((2, 3, 4), 218), normal((4,), 219)], {}, 4),
    ("matvec", [normal((2, 3, 4), 220), normal((4,), 221)], {}, 4),
    ("vecmat", [normal((4,), 222), normal((2, 4, 3), 223)], {}, 4),
    ("polyval", [normal((4,), 224), normal((3, 2), 225)], {}, 8),
    ("trapezoid", [normal((3, 5), 226)], {"dx": 0.5}, 5),
    ("convolve", [normal((7,), 227), normal((3,), 228)], {"mode": "same"}, 4),
    ("correlate", [normal((3,), 229), normal((6,), 230)], {"mode": "full"}, 4),
    (
        "interp",
        [uniform((5,), 231, -1.0, 4.0), np.array([0.0, 1.0, 2.5, 3.0], f32), normal((4,), 232)],
        {},
        4,
    ),
    (
        "interp",
        [uniform((5,), 267, -6.0, 9.0), np.array([2.5, 0.0, 3.0, 1.0], f32), normal((4,), 268)],
        {"period": 3.5},
        4,
    ),
    (
        "interp",
        [uniform((5,), 269, -1.0, 4.0), np.array([0.0, 1.0, 2.5, 3.0], f32), normal((4,), 270)],
        {"left": "extrapolate", "right": "extrapolate"},
        4,
    ),
    ("diag", [normal((4,), 233)], {"k": -1}, 1),
    ("diagflat", [normal((2, 2), 234)], {"k": 2}, 1),
    ("cumulative_sum", [normal((3, 4), 235)], {"axis": 1, "include_initial": True}, 4),
    ("cross", [normal((2, 3), 195), normal((3,), 196)], {}, 2),
    ("cross", [normal((3, 2), 197), normal((2, 3), 198)], {"axisa": 0}, 2),
    ("kron", [normal((2, 3), 199), normal((3,), 200)], {}, 1),
    ("solve", [_PIVOTED, normal((2, 4, 2), 193)], {}, 32),
    ("solve", [_PIVOTED[0], normal((4,), 194)], {}, 32),
    ("inv", [_PIVOTED], {}, 32),
    ("det", [_PIVOTED], {}, 32),
    ("det", [_PIVOTED[:, :3, :3]], {}, 8),
    ("cholesky", [_PIVOTED @ _PIVOTED.transpose(0, 2, 1)], {}, 32),
    ("matrix_power", [_PIVOTED * 0.25], {"n": 5}, 16),
    ("matrix_power", [_PIVOTED], {"n": -2}, 32),
    ("nanmedian", [_WITH_NAN], {"axis": 0}, 2),
    ("nanpercentile", [_WITH_NAN], {"q": 40.0, "axis": 1, "method": "nearest"}, 1),
    ("nancumprod", [_WITH_NAN], {"axis": 0}, 3),
    ("roll", [normal((3, 4), 170)], {"shift": (1, -1), "axis": (0, 1)}, 1),
    ("repeat", [normal((3, 4), 171)], {"repeats": [2, 0, 1], "axis": 0}, 1),
    ("tile", [normal((2, 3), 172, bf16)], {"reps": (2, 1, 2)}, 1),
    ("diff", [normal((3, 5), 173)], {"n": 2, "axis": 1, "append": 1.0}, 4),
    ("rot90", [normal((2, 3, 4), 174)], {"k": 3, "axes": (2, 0)}, 1),
    ("vstack", [normal((2, 3), 175)], {}, 1),  # a tensor: the sequence of its rows
    ("append", [normal((2, 3), 176), normal((2, 2), 177)], {"axis": 1}, 1),
    ("erf", [np.append(normal((9,), 178) * 2, [0.0, 1e-4, 0.84, -0.85]).astype(f32)], {}, 4),
    ("erfc", [normal((3, 4), 179) * 3], {}, 4),
    ("gelu", [normal((3, 4), 180) * 3], {"approximate": False}, 4),
    ("relu6", [uniform((3, 4), 181, -2.0, 8.0)], {}, 1),
    # at the kinks: JAX's custom derivatives (relu, relu6) and formulas (hard_tanh, celu)
    ("relu", [_KINKS], {}, 1),
    ("relu6", [_KINKS], {}, 1),
    ("hard_tanh", [_KINKS], {}, 1),
    ("hard_sigmoid", [_KINKS], {}, 1),
    ("hard_silu", [_KINKS], {}, 1),
    ("celu", [_KINKS], {"alpha": 2.0}, 2),
    ("squareplus", [normal((3, 4), 236) * 3], {"b": 0.5}, 2),
    ("sparse_plus", [_KINKS], {}, 2),
    ("sparse_sigmoid", [_KINKS], {}, 1),
    ("log1mexp", [uniform((3, 4), 237, 0.01, 3.0)], {}, 8),
    ("logmeanexp", [normal((3, 4), 238) * 3], {"axis": 1}, 4),
    ("standardize", [normal((3, 5), 239)], {"axis": 1}, 16),
    ("standardize", [normal((3, 5), 240)], {"axis": 0, "algorithm": "stable"}, 16),
    ("hard_silu", [uniform((3, 4), 182, -5.0, 5.0)], {}, 1),
    # special functions: both sides of the reflections (digamma's on the positive side only:
    # JAX's polygamma(1, x) is wrong below 0, see test_digamma_gradient_is_trigamma_below_zero)
    (
        "lgamma",
        [np.append(uniform((10,), 250, -6.0, 8.0), [0.5, 1.0, 2.0, 30.0]).astype(f32)],
        {},
        4,
    ),
    ("digamma", [np.append(uniform((10,), 251, 0.05, 8.0), [1.0, 2.0, 30.0]).astype(f32)], {}, 4),
    ("erf_inv", [np.append(uniform((10,), 252, -0.99, 0.99), [0.0, 0.999]).astype(f32)], {}, 4),
    ("ndtri", [np.array([1e-30, 1e-9, 2e-7, 0.01, 0.3, 0.5, 0.9, 0.999], f32)], {}, 4),
    ("ndtr", [normal((3, 4), 253) * 4], {}, 2),
    ("log_ndtr", [np.append(normal((8,), 254) * 4, [-8.0, 6.0]).astype(f32)], {}, 4),
    ("xlogy", [np.array([0.0, 0.0, 1.5, -2.0], f32), uniform((3, 4), 255, 0.1, 3.0)], {}, 1),
    ("xlog1py", [np.array([0.0, 0.0, 1.5, -2.0], f32), uniform((3, 4), 256, -0.9, 3.0)], {}, 1),
    ("logit", [uniform((3, 4), 257, 0.02, 0.98)], {}, 1),
    ("entr", [uniform((3, 4), 258, 0.01, 3.0)], {}, 1),
    ("rel_entr", [uniform((3, 4), 259, 0.01, 3.0), uniform((4,), 260, 0.01, 3.0)], {}, 1),
    ("kl_div", [uniform((3, 4), 261, 0.01, 3.0), uniform((3, 1), 262, 0.01, 3.0)], {}, 1),
    ("i1e", [np.append(normal((8,), 271) * 12, [0.5, -19.9, 20.5, 40.0]).astype(f32)], {}, 2),
    ("zeta", [uniform((3, 4), 264, 1.5, 6.0), uniform((4,), 265, 0.2, 5.0)], {}, 2),
    ("i0e", [np.append(normal((8,), 263) * 10, [0.5, -8.5, 40.0]).astype(f32)], {}, 2),
    ("hard_tanh", [uniform((3, 4), 183, -2.0, 2.0)], {}, 1),
    ("log_sigmoid", [normal((3, 4), 184) * 10], {}, 2),
    ("selu", [normal((3, 4), 185)], {}, 2),
    ("celu", [normal((3, 4), 186)], {"alpha": 0.5}, 2),
    ("soft_sign", [normal((3, 4), 187)], {}, 2),
    ("mish", [normal((3, 4), 188) * 3], {}, 4),
    ("glu", [normal((3, 4), 189)], {"axis": 1}, 2),
    ("norm", [normal((3, 4), 190)], {"axis": 1}, 4),
    ("norm", [normal((3, 4), 191)], {"ord": 3, "axis": 0}, 4),
    ("norm", [normal((3, 4), 192)], {"ord": "fro", "axis": (0, 1)}, 8),
]


@pytest.mark.parametrize(
    ("name", "primals", "params", "k"),
    COMPOSITE_CASES,
    ids=[f"{c[0]}-{c[1][0].dtype.name}-{i}" for i, c in enumerate(COMPOSITE_CASES)],
)
def test_composite_vjp_through_its_decomposition(
    name: str, primals: list[np.ndarray], params: dict, k: int
) -> None:
    fn = getattr(pto.ops, name)
    out = fn(*(pto.tensor(a) for a in primals), **params)
    ct = normal(out.shape, 99, out.dtype.np)
    got = tape_vjp(lambda *a: fn(*a, **params), primals, ct)
    refs = jax_cotangents(reference(OPS[name], params), primals, ct)
    for i, (a, g, r) in enumerate(zip(primals, got, refs, strict=True)):
        assert_close(f"{name} cotangent {i}", g, r, a, k)


def test_digamma_gradient_is_trigamma_below_zero() -> None:
    """Through the reflection, ``ψ'(x) = π²/sin²(πx) - ψ'(1 - x)``: scipy's trigamma.
    (JAX's rule, ``polygamma(1, x)`` through the Hurwitz zeta, is wrong there: -250.9 at
    -8.75, where the trigamma is 19.1.)"""
    x = np.array([-8.745642, -2.5, -0.3, -1e-3, 0.2, 3.0], f32)
    got = np.asarray(pto.grad(lambda v: pto.digamma(v).sum())(pto.tensor(x)))
    np.testing.assert_allclose(got, scipy.special.polygamma(1, x.astype(np.float64)), rtol=2e-5)


def test_log_ndtr_gradient_in_the_far_tail_is_float64s() -> None:
    """``d/dx log Φ(x) = φ(x)/Φ(x)`` through the decomposition keeps float32's precision far
    into the lower tail, where JAX's float32 gradient (through its asymptotic series) is off
    by 2e-5 at -30: compared with JAX's float64 gradient."""
    x = np.array([-300.0, -30.0, -10.0, -1.0, 2.0, 9.0], f32)
    got = np.asarray(pto.grad(lambda v: pto.log_ndtr(v).sum())(pto.tensor(x)))
    with jax.enable_x64():
        want = jax.grad(lambda v: jax.scipy.special.log_ndtr(v).sum())(x.astype(np.float64))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5)


def test_copysign_gradient_goes_to_the_magnitude_alone() -> None:
    x, y = normal((3, 4), 201), normal((4,), 202)
    got = pto.grad(lambda a, b: (pto.copysign(a, b) * a).sum(), (0, 1))(x, y)
    want = jax.grad(lambda a, b: (jnp.copysign(a, b) * a).sum(), (0, 1))(x, y)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


@pytest.mark.parametrize("backend", ["eager", "interpret", "npu"])
def test_infinite_cotangents_reach_only_the_rows_they_were_taken_from(backend: str) -> None:
    """take's and take_along_axis's gradients scatter-add the cotangent; an infinity or NaN
    in it lands on its own source element, as in JAX, instead of 0·inf spreading NaN."""
    x = normal((5, 3), 211)
    i = np.array([1, 3, 1, -1], np.int32)
    w = np.ones((4, 3), np.float32)
    w[0, 1], w[2, 2], w[3, 0] = np.inf, -np.inf, np.nan
    j = np.array([[2, 0, 2], [1, 1, 0], [0, 2, 2], [1, 0, 1], [2, 2, 2]], np.int32)
    u = np.ones((5, 3), np.float32)
    u[0, 0], u[0, 2], u[1, 1], u[4, 0] = np.inf, -np.inf, np.nan, -np.inf

    def loss(t: Any, lib: Any = pto) -> Any:
        a = (lib.take(t, i, 0, mode="wrap") if lib is jnp else pto.take(t, i, 0)) * w
        b = lib.take_along_axis(t, j, -1) * u
        return a.sum() + b.sum()

    want = np.asarray(jax.grad(lambda t: loss(t, jnp))(x))
    g = pto.grad(loss)
    if backend != "eager":
        g = pto.jit(g, **({"machine": "tiny"} if backend == "npu" else {"backend": backend}))
    got = np.asarray(g(pto.tensor(x)).numpy())
    assert np.isfinite(want).sum() == 10  # the test's own premise: most rows stay finite
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_i0_gradient_is_i1_through_its_series() -> None:
    """I₀' = I₁ (JAX's rule), here the derivative of the series, within 2e-5 of it: the
    series' two terms cancel near 0, so there the error is absolute (1e-7)."""
    x = np.r_[np.linspace(-20, 20, 401), 8.0, -8.0].astype(np.float32)
    got = pto.grad(lambda t: pto.i0(t).sum())(pto.tensor(x)).numpy()
    want = np.asarray(jax.grad(lambda t: jnp.i0(t).sum())(x))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


def test_qr_gradient_matches_jax() -> None:
    """Through the Householder reflections (JAX differentiates its own QR rule)."""
    a = normal((5, 3), 221) + 2 * np.eye(5, 3, dtype=np.float32)
    w = normal((5, 3), 222)

    def loss(x: Any, lib: Any) -> Any:
        q, r = lib.linalg.qr(x)
        return (q * w).sum() + (r * r).sum()

    got = pto.grad(lambda x: loss(x, pto))(pto.tensor(a)).numpy()
    want = np.asarray(jax.grad(lambda x: loss(x, jnp))(a))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


def test_frexp_and_ldexp_gradients_are_the_powers_of_two() -> None:
    """Built from the float's bits, they still have JAX's derivatives: 2^-e for frexp's
    mantissa, 2^n for ldexp (exactly, also where 2^-e leaves float32's range: a subnormal's
    ldexp by 100; JAX's own derivative overflows there)."""
    x = np.array([3.0, -0.375, 5e30, 0.0, 1e-40], f32)
    n = np.array([3, -2, -100, 4, 100], np.int32)
    got = pto.grad(lambda a: pto.frexp(a)[0].sum())(pto.tensor(x)).numpy()
    np.testing.assert_array_equal(got, [0.25, 2.0, 2.0**-102, 1.0, np.inf])
    got = pto.grad(lambda a: pto.ldexp(a, n).sum())(pto.tensor(x)).numpy()
    np.testing.assert_array_equal(got, [8.0, 0.25, 2.0**-100, 1.0, 2.0**100])
    want = jax.grad(lambda a: jnp.ldexp(a, n).sum())(x)  # (its 2^-100 is a few ulps off)
    np.testing.assert_allclose(got[:4], np.asarray(want)[:4], rtol=1e-5)


def test_eigh_and_svd_gradients_match_jax() -> None:
    """Through the Jacobi rotations, on inputs whose eigen- and singular values are distinct
    (where JAX's rules are defined); the losses use the squares of the vectors, whose signs
    are arbitrary."""
    a = normal((4, 4), 231)
    c = normal((4, 4), 232)

    def eig_loss(x: Any, lib: Any) -> Any:
        w, v = lib.linalg.eigh(x)
        return (w * c[0]).sum() + (v * v * c).sum()  # the vectors' signs are arbitrary

    got = pto.grad(lambda x: eig_loss(x, pto))(pto.tensor(a)).numpy()
    want = np.asarray(jax.grad(lambda x: eig_loss(x, jnp))(a))
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
    for shape, seed in (((5, 3), 233), ((3, 5), 234), ((3, 3), 235)):
        b = normal(shape, seed)
        k = min(shape)
        cu, cv = normal((shape[0], k), seed + 10), normal((k, shape[1]), seed + 20)

        def svd_loss(x: Any, lib: Any, cu: Any = cu, cv: Any = cv) -> Any:
            u, s, vh = lib.linalg.svd(x, full_matrices=False)
            return (s * cv[0, : s.shape[-1]]).sum() + (u * u * cu).sum() + (vh * vh * cv).sum()

        got = pto.grad(lambda x, f=svd_loss: f(x, pto))(pto.tensor(b)).numpy()
        want = np.asarray(jax.grad(lambda x, f=svd_loss: f(x, jnp))(b))
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5, err_msg=str(shape))


def test_pinv_gradient_is_the_pseudo_inverses_own() -> None:
    """Also where singular values repeat (the identity, an orthogonal matrix, a repeated
    diagonal): there the SVD's derivative is undefined and the pseudo-inverse's is not. As
    JAX's, eagerly, under jit and on the NPU; a rank-deficient matrix too."""
    q = np.linalg.qr(normal((3, 3), 241).astype(np.float64))[0].astype(f32)
    c = normal((3, 3), 242)
    cases = [
        np.eye(3, dtype=f32),
        q,
        np.diag([2.0, 2.0, 1.0]).astype(f32),
        normal((3, 3), 243),
        np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], f32),
    ]

    def loss(x: Any, lib: Any) -> Any:
        return (lib.linalg.pinv(x) * c).sum()

    jitted = pto.jit(pto.grad(lambda x: loss(x, pto)), backend="interpret")
    for a in cases:
        want = np.asarray(jax.grad(lambda x: loss(x, jnp))(a))
        for got in (pto.grad(lambda x: loss(x, pto))(pto.tensor(a)), jitted(pto.tensor(a))):
            np.testing.assert_allclose(got.numpy(), want, rtol=2e-4, atol=2e-5, err_msg=str(a))
    rect, c2 = normal((4, 2), 244), normal((2, 4), 245)
    npu = pto.jit(pto.grad(lambda x: (pto.linalg.pinv(x) * c2).sum()), machine="tiny")
    want = np.asarray(jax.grad(lambda x: (jnp.linalg.pinv(x) * c2).sum())(rect))
    np.testing.assert_allclose(npu(pto.tensor(rect)).numpy(), want, rtol=2e-4, atol=2e-5)


def test_lstsq_gradient_matches_jax() -> None:
    a, b = normal((5, 3), 251), normal((5, 2), 252)

    def loss(x: Any, y: Any, lib: Any) -> Any:
        sol, res, _, s = lib.linalg.lstsq(x, y)
        return (sol * sol).sum() + res.sum() + s.sum()

    got = pto.grad(lambda x, y: loss(x, y, pto), (0, 1))(pto.tensor(a), pto.tensor(b))
    want = jax.grad(lambda x, y: loss(x, y, jnp), (0, 1))(a, b)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=2e-4, atol=2e-5)
