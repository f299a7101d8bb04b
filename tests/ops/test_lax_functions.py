"""``pto.lax``'s array functions against ``jax.lax``'s, eagerly and under ``jit``."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest
from jaxref import assert_matches

import pypto as pto

rng = np.random.default_rng(11)
F = rng.normal(size=(3, 4, 5)).astype(np.float32)
G = rng.normal(size=(3, 4, 5)).astype(np.float32)
M = rng.normal(size=(4, 6)).astype(np.float32)
N = rng.normal(size=(6, 5)).astype(np.float32)
I = rng.integers(-9, 10, size=(3, 4)).astype(np.int32)
J = rng.integers(1, 5, size=(3, 4)).astype(np.int32) * np.where(
    rng.random((3, 4)) < 0.5, -1, 1
).astype(np.int32)
B = rng.random((3, 4, 5)) < 0.5
HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.3, -0.7], np.float32)
U = rng.uniform(-0.9, 0.9, size=(3, 4)).astype(np.float32)

# (name, operands, static arguments, terms summed for the tolerance)
CASES: list[tuple[str, tuple[Any, ...], dict[str, Any], int]] = [
    ("abs", (F,), {}, 1),
    ("acos", (U,), {}, 1),
    ("asinh", (F,), {}, 1),
    ("atan2", (F, G), {}, 1),
    ("atanh", (U,), {}, 1),
    ("add", (F, G), {}, 1),
    ("sub", (I, J), {}, 1),
    ("mul", (F, G), {}, 1),
    ("div", (I, J), {}, 1),
    ("div", (F, G), {}, 1),
    ("rem", (I, J), {}, 1),
    ("rem", (F, G), {}, 1),
    ("max", (F, G), {}, 1),
    ("min", (I, J), {}, 1),
    ("pow", (np.abs(F) + 0.1, G), {}, 1),
    ("integer_pow", (F,), {"y": 3}, 3),
    ("integer_pow", (F,), {"y": -2}, 3),
    ("integer_pow", (I,), {"y": 0}, 1),
    ("round", (HALVES,), {}, 1),
    ("round", (HALVES,), {"rounding_method": 1}, 1),
    ("clamp", (np.float32(-0.5), F, np.float32(0.5)), {}, 1),
    ("eq", (I, J), {}, 1),
    ("ge", (F, G), {}, 1),
    ("select", (B, F, G), {}, 1),
    ("select_n", (B, F, G), {}, 1),
    ("select_n", (np.clip(I, 0, 2), I, J, -I), {}, 1),
    ("exp2", (F,), {}, 1),
    ("logistic", (F,), {}, 1),
    ("cbrt", (F,), {}, 1),
    ("erf", (F,), {}, 1),
    ("lgamma", (F * 4,), {}, 4),
    ("digamma", (np.abs(F) * 4 + 0.1,), {}, 4),
    ("erf_inv", (np.tanh(F),), {}, 4),
    ("bessel_i0e", (F * 10,), {}, 1),
    ("bessel_i1e", (F * 10,), {}, 1),
    ("zeta", (np.abs(F) * 3 + 1.2, np.abs(G) + 0.1), {}, 4),
    ("polygamma", (np.floor(np.abs(G) * 2), np.abs(F) * 3 + 0.2), {}, 4),
    ("is_finite", (np.array([1.0, np.inf, np.nan], np.float32),), {}, 1),
    ("nextafter", (F, G), {}, 1),
    ("shift_left", (np.abs(I), np.full((3, 4), 2, np.int32)), {}, 1),
    ("shift_right_arithmetic", (I, np.full((3, 4), 1, np.int32)), {}, 1),
    ("bitwise_xor", (I, J), {}, 1),
    ("bitwise_not", (I,), {}, 1),
    ("convert_element_type", (F,), {"new_dtype": np.int32}, 1),
    ("reduce_sum", (F,), {"axes": (0, 2)}, 15),
    ("reduce_sum", (I,), {"axes": (1,)}, 1),
    ("reduce_prod", (U,), {"axes": (1,)}, 4),
    ("reduce_max", (F,), {"axes": (1,)}, 1),
    ("reduce_min", (I,), {"axes": (0, 1)}, 1),
    ("reduce_and", (B,), {"axes": (2,)}, 1),
    ("reduce_or", (B,), {"axes": (0,)}, 1),
    ("argmax", (F,), {"axis": 1, "index_dtype": np.int32}, 1),
    ("argmin", (I,), {"axis": 0, "index_dtype": np.int32}, 1),
    ("cumsum", (F,), {"axis": 1, "reverse": True}, 4),
    ("cummax", (I,), {"axis": 1}, 1),
    ("sort", (F,), {"dimension": 1}, 1),
    ("reshape", (F,), {"new_sizes": (5, 12), "dimensions": (2, 0, 1)}, 1),
    ("transpose", (F,), {"permutation": (1, 2, 0)}, 1),
    ("squeeze", (F[:, :1],), {"dimensions": (1,)}, 1),
    ("expand_dims", (F,), {"dimensions": (0, 3)}, 1),
    ("rev", (F,), {"dimensions": (0, 2)}, 1),
    ("collapse", (F,), {"start_dimension": 1, "stop_dimension": 3}, 1),
    (
        "slice",
        (F,),
        {"start_indices": (1, 0, 1), "limit_indices": (3, 4, 5), "strides": (1, 2, 3)},
        1,
    ),
    ("slice_in_dim", (F,), {"start_index": 1, "limit_index": 5, "stride": 2, "axis": 2}, 1),
    ("index_in_dim", (F,), {"index": -1, "axis": 1, "keepdims": False}, 1),
    ("dynamic_slice", (F,), {"start_indices": (2, -1, 4), "slice_sizes": (2, 3, 2)}, 1),
    ("dynamic_slice_in_dim", (F,), {"start_index": 3, "slice_size": 3, "axis": 1}, 1),
    ("dynamic_index_in_dim", (F,), {"index": 2, "axis": 2, "keepdims": False}, 1),
    ("dynamic_update_slice", (F, G[:2, :2, :3]), {"start_indices": (2, 1, 4)}, 1),
    ("dynamic_update_slice_in_dim", (F, G[:, :2]), {"start_index": 3, "axis": 1}, 1),
    ("dynamic_update_index_in_dim", (F, G[:, :, 0]), {"index": 4, "axis": 2}, 1),
    ("broadcast", (M,), {"sizes": (2,)}, 1),
    ("broadcast_in_dim", (M[:, :1],), {"shape": (3, 4, 6), "broadcast_dimensions": (1, 2)}, 1),
    ("concatenate", ([F, G],), {"dimension": 1}, 1),
    ("full_like", (F,), {"fill_value": 2.5}, 1),
    ("dot", (M, N), {}, 6),
    ("dot", (M[0], N[:, 0]), {}, 6),
    (
        "dot_general",
        (F, np.transpose(G, (0, 2, 1))),
        {"dimension_numbers": (((2,), (1,)), ((0,), (0,)))},
        5,
    ),
    ("dot_general", (F, G), {"dimension_numbers": (((1, 2), (1, 2)), ((), ()))}, 20),
    ("dot_general", (F, M), {"dimension_numbers": (((1,), (0,)), ((), ()))}, 4),
    ("batch_matmul", (F, np.transpose(G, (0, 2, 1))), {}, 5),
    ("cumlogsumexp", (F,), {"axis": 2}, 5),
    ("cumlogsumexp", (F,), {"axis": 1, "reverse": True}, 4),
]


def _ids() -> list[str]:
    return [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize(("name", "operands", "static", "k"), CASES, ids=_ids())
def test_lax_function_matches_jax(
    name: str, operands: tuple[Any, ...], static: dict, k: int
) -> None:
    want = getattr(jax.lax, name)(*operands, **static)
    got = getattr(pto.lax, name)(*operands, **static)
    assert_matches(got, want, k, what=name)
    if name == "concatenate":
        traced = pto.jit(lambda a, b: pto.lax.concatenate([a, b], **static), backend="interpret")
        assert_matches(traced(*operands[0]), want, k, what=f"jit {name}")
        return
    arrays = [i for i, o in enumerate(operands) if isinstance(o, np.ndarray) and o.ndim]

    def f(*xs: Any) -> Any:
        args = list(operands)
        for i, x in zip(arrays, xs, strict=True):
            args[i] = x
        return getattr(pto.lax, name)(*args, **static)

    traced = pto.jit(f, backend="interpret")(*(operands[i] for i in arrays))
    assert_matches(traced, want, k, what=f"jit {name}")


def test_every_lax_function_is_tested() -> None:
    from pypto.ops.lax_ops import __all__ as names

    untested = set(names) - {c[0] for c in CASES}
    # the plain aliases of functions the op tests check under their numpy names
    aliases = {"acosh", "asin", "atan", "ceil", "cos", "cosh", "eq", "erfc", "exp", "expm1"}
    aliases |= {"floor", "gt", "le", "log", "log1p", "lt", "ne", "neg", "reciprocal", "rsqrt"}
    aliases |= {"sign", "sin", "sinh", "sqrt", "square", "stop_gradient", "tan", "tanh"}
    aliases |= {"bitwise_and", "bitwise_or", "cumprod", "cummin", "top_k", "split", "iota"}
    aliases |= {"broadcasted_iota", "full"}
    # checked by test_scans_and_reductions_with_any_associative_function_match_jax
    aliases |= {"associative_scan", "reduce"}
    assert untested <= aliases, f"untested: {sorted(untested - aliases)}"


def test_constructors_traced_starts_and_sorting_by_a_key_match_jax() -> None:
    assert_matches(pto.lax.iota(np.int32, 5), jax.lax.iota(np.int32, 5))
    assert_matches(
        pto.lax.broadcasted_iota(np.float32, (2, 3), 1),
        jax.lax.broadcasted_iota(np.float32, (2, 3), 1),
    )
    assert_matches(pto.lax.full((2, 3), 7, np.int32), jax.lax.full((2, 3), 7, np.int32))
    for got, want in zip(
        pto.lax.split(F, (1, 3, 0), axis=1), jax.lax.split(F, (1, 3, 0), axis=1), strict=True
    ):
        assert_matches(got, want)
    keys, vals = pto.lax.sort([I[0], F[0, :, 0]], num_keys=1)
    jkeys, jvals = jax.lax.sort([I[0], F[0, :, 0]], num_keys=1)
    assert_matches(keys, jkeys)
    assert_matches(vals, jvals)
    # traced start indices: clamped into the operand, as JAX does
    for start in (-3, 1, 9):
        s = np.int32(start)
        want = jax.lax.dynamic_slice(F, (s, np.int32(1), s), (2, 2, 3))
        got = pto.jit(
            lambda x, i: pto.lax.dynamic_slice(x, (i, 1, i), (2, 2, 3)), backend="interpret"
        )(F, s)
        assert_matches(got, want, what=f"dynamic_slice at {start}")
        want = jax.lax.dynamic_update_slice(F, G[:2, :3, :2], (s, s, np.int32(0)))
        upd = pto.jit(
            lambda x, u, i: pto.lax.dynamic_update_slice(x, u, (i, i, 0)), backend="interpret"
        )
        assert_matches(upd(F, G[:2, :3, :2], s), want, what=f"dynamic_update_slice at {start}")
    npu = pto.jit(lambda x, i: pto.lax.dynamic_slice(x, (i, 0, 1), (2, 4, 3)), machine="tiny")
    assert_matches(npu(F, np.int32(1)), jax.lax.dynamic_slice(F, (1, 0, 1), (2, 4, 3)), what="npu")


def _affine(a: Any, b: Any) -> Any:
    """The composition of two affine maps x -> m x + c: associative, not commutative."""
    return (a[0] * b[0], a[1] * b[0] + b[1])


def test_scans_and_reductions_with_any_associative_function_match_jax() -> None:
    for axis, reverse in ((1, False), (2, True), (0, False)):
        want = jax.lax.associative_scan(_affine, (F, G), reverse=reverse, axis=axis)
        got = pto.lax.associative_scan(_affine, (F, G), reverse=reverse, axis=axis)
        for g, w in zip(got, want, strict=True):
            assert_matches(g, w, F.shape[axis], what=f"associative_scan {axis} {reverse}")
        traced = pto.jit(
            lambda a, b, r=reverse, ax=axis: pto.lax.associative_scan(_affine, (a, b), r, ax),
            backend="interpret",
        )
        for g, w in zip(traced(F, G), want, strict=True):
            assert_matches(g, w, F.shape[axis], what="jit associative_scan")
    assert_matches(
        pto.lax.associative_scan(pto.maximum, I, axis=1),
        jax.lax.associative_scan(jax.lax.max, I, axis=1),
    )
    for fn, init in ((jax.lax.add, 0.0), (jax.lax.max, -np.inf), (jax.lax.mul, 2.0)):
        want = jax.lax.reduce(U, np.float32(init), fn, (1,))
        assert_matches(pto.lax.reduce(U, init, fn, (1,)), want, 4, what=f"reduce {fn}")
    # a function the op does not know: folded as a tree, then with the initial value
    want = jax.lax.reduce(F, np.float32(0.5), lambda a, b: jax.lax.max(a, b), (0, 2))
    assert_matches(pto.lax.reduce(F, 0.5, lambda a, b: pto.maximum(a, b), (0, 2)), want)
    # two operands reduced together: the first maximum and its index (an argmax)
    idx = np.broadcast_to(np.arange(5, dtype=np.int32), F.shape).copy()

    def first_max(a: Any, b: Any) -> Any:
        lib = jax.numpy if isinstance(a[0], jax.Array) else pto
        pick = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]))
        return (lib.where(pick, a[0], b[0]), lib.where(pick, a[1], b[1]))

    init = (np.float32(-np.inf), np.int32(0))
    want = jax.lax.reduce((F, idx), init, first_max, (2,))
    got = pto.lax.reduce((F, idx), init, first_max, (2,))
    for g, w in zip(got, want, strict=True):
        assert_matches(g, w)
    empty = np.zeros((3, 0), np.float32)
    assert_matches(
        pto.lax.reduce(empty, 1.5, lambda a, b: a + b, (1,)),
        jax.lax.reduce(empty, np.float32(1.5), jax.lax.add, (1,)),
    )


def test_lax_functions_refuse_what_jax_refuses() -> None:
    with pytest.raises(pto.ShapeError, match="rounding_method 3"):
        pto.lax.round(F, 3)
    with pytest.raises(pto.ShapeError, match="2 start indices and 3 sizes"):
        pto.lax.dynamic_slice(F, (0, 0), (1, 1, 1))
    with pytest.raises(pto.ShapeError, match="slice size 9 does not fit an axis of 4"):
        pto.lax.dynamic_slice(F, (0, 0, 0), (1, 9, 1))
    with pytest.raises(pto.ShapeError, match="do not pair up"):
        pto.lax.dot_general(F, M, (((2,), (0,)), ((), ())))
    with pytest.raises(pto.ShapeError, match=r"sizes .* do not add up"):
        pto.lax.split(F, (1, 1), axis=1)
    with pytest.raises(pto.ShapeError, match="num_keys=2"):
        pto.lax.sort([F, G], num_keys=2)


def test_scans_reductions_and_dot_general_on_the_npu_match_jax() -> None:
    """The tree of slices and concatenations, and dot_general's one matmul, compile."""

    def f(a: Any, b: Any) -> Any:
        return (
            pto.lax.cumlogsumexp(a, 2),
            pto.lax.associative_scan(_affine, (a, b), axis=1)[1],
            pto.lax.reduce(a, 0.5, lambda u, v: pto.maximum(u, v), (0,)),
            pto.lax.dot_general(a, b, (((2,), (2,)), ((0,), (0,)))),
        )

    got = pto.jit(f, machine="tiny")(F, G)
    want = (
        jax.lax.cumlogsumexp(F, 2),
        jax.lax.associative_scan(_affine, (F, G), axis=1)[1],
        jax.lax.reduce(F, np.float32(0.5), jax.lax.max, (0,)),
        jax.lax.dot_general(F, G, (((2,), (2,)), ((0,), (0,)))),
    )
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_matches(g, w, 5, what=f"out[{i}]")
