"""``pto.lax``'s array functions against ``jax.lax``'s, eagerly and under ``jit``."""

from __future__ import annotations

from typing import Any

import jax
import ml_dtypes
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
I8_ALL = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
I32_BITS = np.concatenate(
    [rng.integers(-(2**31), 2**31, 250, dtype=np.int64), [-(2**31), 2**31 - 1, 0, -1, 1, 65535]]
).astype(np.int32)
SHIFTS32 = rng.integers(-3, 36, I32_BITS.shape).astype(np.int32)
SHIFTS8 = rng.integers(-3, 12, I8_ALL.shape).astype(np.int8)
# any float32 bit pattern (NaNs with payloads, subnormals), and the formats' edges
ODD_FLOATS = np.concatenate(
    [
        rng.integers(-(2**31), 2**31, 400, dtype=np.int64).astype(np.int32).view(np.float32),
        np.array([0.0, -0.0, np.inf, -np.inf, 65504, 65520, 1e-40, 2**-14, 2**-24], np.float32),
        np.array([3 * 2**-25, 240, 248, 1 + 2**-11, 1 + 3 * 2**-11, -(2**-6)], np.float32),
    ]
)
with np.errstate(over="ignore", invalid="ignore"):  # past float16's range: inf, as meant
    ODD_F16, ODD_BF16 = ODD_FLOATS.astype(np.float16), ODD_FLOATS.astype(ml_dtypes.bfloat16)
IMG = rng.normal(size=(2, 3, 7, 6)).astype(np.float32)

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
    # bits: every int8 value and int32 extremes; shift amounts past the width both ways
    ("population_count", (I32_BITS,), {}, 1),
    ("population_count", (I8_ALL,), {}, 1),
    ("clz", (I32_BITS,), {}, 1),
    ("clz", (I8_ALL,), {}, 1),
    ("shift_right_logical", (I32_BITS, SHIFTS32), {}, 1),
    ("shift_right_logical", (I8_ALL, SHIFTS8), {}, 1),
    ("mulhi", (I32_BITS, I32_BITS[::-1]), {}, 1),
    ("mulhi", (I8_ALL, I8_ALL[::-1]), {}, 1),
    ("reduce_precision", (ODD_FLOATS,), {"exponent_bits": 5, "mantissa_bits": 10}, 1),
    ("reduce_precision", (ODD_FLOATS,), {"exponent_bits": 8, "mantissa_bits": 7}, 1),
    ("reduce_precision", (ODD_FLOATS,), {"exponent_bits": 4, "mantissa_bits": 3}, 1),
    ("reduce_precision", (ODD_F16,), {"exponent_bits": 5, "mantissa_bits": 2}, 1),
    ("reduce_precision", (ODD_BF16,), {"exponent_bits": 3, "mantissa_bits": 5}, 1),
    ("reduce_xor", (I,), {"axes": (1,)}, 1),
    ("reduce_xor", (B,), {"axes": (0, 2)}, 1),
    ("sort_key_val", (I[0], F[0, 0, :4]), {}, 1),
    ("sort_key_val", (F, G), {"dimension": 1}, 1),
    ("approx_max_k", (F,), {"k": 2, "reduction_dimension": 1}, 1),
    ("approx_min_k", (F,), {"k": 3}, 1),
    ("index_take", (F, np.array([[1, 2, -1], [0, 3, 7]], np.int32)), {"axes": (0, 1)}, 1),
    ("index_take", (F, np.array([[1, 4], [0, 3]], np.int32)), {"axes": (0, 2)}, 1),
    ("broadcast_to_rank", (M,), {"rank": 4}, 1),
    ("broadcast_like", (M[:1],), {"like_arr": np.zeros((2, 4, 6), np.float32)}, 1),
    ("tile", (M,), {"reps": (2, 3)}, 1),
    ("stack", ([F, G],), {"axis": 2}, 1),
    ("unstack", (M,), {"axis": 1}, 1),
    (
        "conv_general_dilated_patches",
        (IMG,),
        {"filter_shape": (2, 3), "window_strides": (1, 2), "padding": "SAME"},
        1,
    ),
    (
        "conv_general_dilated_patches",
        (np.transpose(IMG, (0, 2, 3, 1)),),
        {
            "filter_shape": (3, 2),
            "window_strides": (2, 1),
            "padding": [(1, 0), (0, 1)],
            "rhs_dilation": (1, 2),
            "dimension_numbers": ("NHWC", "HWIO", "NHWC"),
        },
        1,
    ),
    ("igamma", (np.abs(F) * 4 + 0.1, np.abs(G) * 4), {}, 4),
    ("igammac", (np.abs(F) * 4 + 0.1, np.abs(G) * 4), {}, 4),
    ("betainc", (np.abs(F) * 3 + 0.2, np.abs(G) * 3 + 0.2, np.abs(np.tanh(F * G))), {}, 8),
    ("igamma_grad_a", (np.abs(F) * 4 + 0.1, np.abs(G) * 4 + 0.05), {}, 16),
    ("random_gamma_grad", (np.abs(F) * 4 + 0.1, np.abs(G) * 4 + 0.05), {}, 16),
]


def _ids() -> list[str]:
    return [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize(("name", "operands", "static", "k"), CASES, ids=_ids())
def test_lax_function_matches_jax(
    name: str, operands: tuple[Any, ...], static: dict, k: int
) -> None:
    with np.errstate(over="ignore", invalid="ignore"):  # JAX's casts of the odd floats
        want = getattr(jax.lax, name)(*operands, **static)
    got = getattr(pto.lax, name)(*operands, **static)
    _match(got, want, k, name)
    if name in ("concatenate", "stack"):
        traced = pto.jit(lambda a, b: getattr(pto.lax, name)([a, b], **static), backend="interpret")
        _match(traced(*operands[0]), want, k, f"jit {name}")
        return
    arrays = [i for i, o in enumerate(operands) if isinstance(o, np.ndarray) and o.ndim]

    def f(*xs: Any) -> Any:
        args = list(operands)
        for i, x in zip(arrays, xs, strict=True):
            args[i] = x
        return getattr(pto.lax, name)(*args, **static)

    traced = pto.jit(f, backend="interpret")(*(operands[i] for i in arrays))
    _match(traced, want, k, f"jit {name}")


def _match(got: Any, want: Any, k: int, what: str) -> None:
    """One result, or a tuple of them, against JAX's."""
    if isinstance(want, tuple | list):
        assert isinstance(got, tuple | list) and len(got) == len(want), what
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_matches(g, w, k, what=f"{what}[{i}]")
    else:
        assert_matches(got, want, k, what=what)


def test_every_lax_function_is_tested() -> None:
    from pypto.ops.lax_ops import __all__ as names

    untested = set(names) - {c[0] for c in CASES}
    # the plain aliases of functions the op tests check under their numpy names
    aliases = {"acosh", "asin", "atan", "ceil", "cos", "cosh", "eq", "erfc", "exp", "expm1"}
    aliases |= {"floor", "gt", "le", "log", "log1p", "lt", "ne", "neg", "reciprocal", "rsqrt"}
    aliases |= {"sign", "sin", "sinh", "sqrt", "square", "stop_gradient", "tan", "tanh"}
    aliases |= {"bitwise_and", "bitwise_or", "cumprod", "cummin", "top_k", "split", "iota"}
    aliases |= {"broadcasted_iota", "full", "empty", "optimization_barrier"}
    aliases |= {"broadcast_shapes"}
    # checked by test_scans_and_reductions_with_any_associative_function_match_jax
    aliases |= {"associative_scan", "reduce"}
    # checked by the test_ragged_dot_* tests below
    aliases |= {"RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"}
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


def test_reduce_precision_rounds_its_gradient_and_barriers_pass_values_through() -> None:
    x = np.array([1.3, 2.7, -0.1, 100.2], np.float32)
    for f in (lambda a: (pto.lax.reduce_precision(a, 5, 2) * 3.3).sum(),):
        want = jax.grad(lambda a: (jax.lax.reduce_precision(a, 5, 2) * 3.3).sum())(x)
        assert_matches(pto.grad(f)(x), want, what="grad")  # the cotangent 3.3 rounded: 3.5
        assert_matches(pto.jit(pto.grad(f), backend="interpret")(x), want, what="jit grad")
    tree = {"a": F, "b": (I,)}
    out = pto.lax.optimization_barrier(tree)
    want_tree = jax.lax.optimization_barrier(tree)
    assert_matches(out["a"], want_tree["a"])
    assert_matches(out["b"][0], want_tree["b"][0])
    # traced, one opaque equation per leaf, gone once the passes are done
    g = pto.make_graph(lambda t: pto.lax.optimization_barrier(t))(tree)
    assert [e.op for e in g.eqns] == ["optimization_barrier"] * 2
    lowered = pto.jit(lambda t: pto.lax.optimization_barrier(t)["a"] * 2, backend="interpret")
    assert [e.op for e in lowered.lower(tree).tensor_ir.eqns] == ["mul"]
    assert_matches(pto.lax.empty((2, 3), np.int32), jax.lax.empty((2, 3), np.int32))
    shapes = ((2, 1, 3), (4, 1), ())
    assert pto.lax.broadcast_shapes(*shapes) == jax.lax.broadcast_shapes(*shapes) == (2, 4, 3)


def test_jax_lax_names_pypto_does_not_have_are_the_known_ones() -> None:
    """What of ``jax.lax`` is not built, by kind: a new JAX name, or a gap closed, shows."""
    types = {n for n in dir(jax.lax) if n[:1].isupper()}  # dimension numbers, enums, ...
    devices = {"all_gather", "all_to_all", "axis_index", "axis_size", "pbroadcast", "pcast"}
    devices |= {"pmax", "pmean", "pmin", "ppermute", "precv", "psend", "pshuffle", "psum"}
    devices |= {"psum_scatter", "pswapaxes", "ragged_all_to_all", "with_sharding_constraint"}
    complex_ = {"complex", "conj", "imag", "real", "fft"}
    xla = {"after_all", "create_token", "composite", "dce_sink", "platform_dependent", "stage"}
    xla |= {"rng_bit_generator", "rng_uniform", "shape_as_value", "dtype"}
    other = {"conv_general_dilated_local"}
    other |= {"scaled_dot"}
    known = types | devices | complex_ | xla | other
    names = {n for n in dir(jax.lax) if not n.startswith("_") and callable(getattr(jax.lax, n))}
    lacking = {n for n in names if not hasattr(pto.lax, n)}
    assert lacking - known == set(), f"new in jax.lax and not in pto.lax: {sorted(lacking - known)}"
    built = {n for n in known - types if hasattr(pto.lax, n)}
    assert not built, f"built now, drop from the list: {sorted(built)}"


def test_bit_functions_and_reduce_precision_on_the_npu_match_jax() -> None:
    """Shifts, masks and wrapping products on the vector cores, bit for bit."""

    def f(lax: Any, i: Any, s: Any, x: Any, h: Any) -> Any:
        return (
            lax.population_count(i),
            lax.clz(i),
            lax.shift_right_logical(i, s),
            lax.mulhi(i, i[::-1]),
            lax.reduce_precision(x, 4, 3),
            lax.reduce_precision(h, 5, 2),
        )

    ins = (I32_BITS, SHIFTS32, ODD_FLOATS, ODD_F16)
    got = pto.jit(lambda *a: f(pto.lax, *a), machine="tiny")(*ins)
    with np.errstate(over="ignore", invalid="ignore"):
        want = f(jax.lax, *ins)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_matches(g, w, what=f"out[{i}]")
        if g.dtype.is_floating:  # and the NaNs' payloads, the zeros' signs
            bits = np.asarray(g).view(np.int32 if g.dtype.itemsize == 4 else np.int16)
            np.testing.assert_array_equal(bits, np.asarray(w).view(bits.dtype))
    patches = pto.jit(
        lambda im: pto.lax.conv_general_dilated_patches(im, (2, 3), (1, 2), "SAME"), machine="tiny"
    )(IMG)
    assert_matches(
        patches, jax.lax.conv_general_dilated_patches(IMG, (2, 3), (1, 2), "SAME"), what="patches"
    )


def test_lax_functions_refuse_what_jax_refuses() -> None:
    with pytest.raises(pto.ShapeError, match="exponent_bits=0"):
        pto.lax.reduce_precision(F, 0, 3)
    with pytest.raises(pto.DTypeError, match=r"lax.reduce_precision: rounds floats, got i32"):
        pto.lax.reduce_precision(I, 5, 3)
    with pytest.raises(pto.DTypeError, match=r"bits of integers, got f32"):
        pto.lax.population_count(F)
    with pytest.raises(pto.DTypeError, match="takes floats"):
        pto.lax.approx_max_k(I, 2)
    with pytest.raises(pto.ShapeError, match="one row of indices per axis"):
        pto.lax.index_take(F, np.zeros((3, 2), np.int32), (0, 1))
    with pytest.raises(pto.ShapeError, match="one size per spatial axis"):
        pto.lax.conv_general_dilated_patches(IMG, (2,), (1,), "SAME")
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


# ---- ragged_dot: a mixture of experts' grouped products -------------------------------------

X7 = rng.normal(size=(7, 3)).astype(np.float32)
W3 = rng.normal(size=(3, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("sizes", [[2, 0, 4], [7, 0, 0], [0, 0, 0], [1, 2, 2]])
def test_ragged_dot_matches_jax_with_gradients_and_on_the_npu(sizes: list[int]) -> None:
    # empty groups and rows past the groups (zeros), eagerly, jitted, on the NPU, gradients
    gs = np.array(sizes, np.int32)
    want = jax.lax.ragged_dot(X7, W3, gs)
    assert_matches(pto.lax.ragged_dot(X7, W3, gs), want, k=3)
    assert_matches(pto.jit(pto.lax.ragged_dot, machine="tiny")(X7, W3, gs), want, k=3)

    def loss(lax: Any) -> Any:
        return lambda a, b, g: (lax.ragged_dot(a, b, g) ** 2).sum()

    got = pto.jit(pto.grad(loss(pto.lax), argnums=(0, 1)))(X7, W3, gs)
    for g, w in zip(got, jax.grad(loss(jax.lax), argnums=(0, 1))(X7, W3, gs), strict=True):
        assert_matches(g, w, k=12, what="grad")


def test_ragged_dot_general_modes_and_dtypes_match_jax() -> None:
    dn = jax.lax.RaggedDotDimensionNumbers
    gs = np.array([2, 2], np.int32)
    a, b = rng.normal(size=(2, 5)).astype(np.float32), rng.normal(size=(5, 3)).astype(np.float32)
    # the ragged dimension contracting: one product per group, stacked first
    contracting = ((([1], [0]), ([], [])), [1], [])
    want = jax.lax.ragged_dot_general(a, b, gs, dn(*contracting))
    for d in (dn(*contracting), pto.lax.RaggedDotDimensionNumbers(*contracting)):
        got = pto.lax.ragged_dot_general(a, b, gs, d)
        assert got.shape == (2, 2, 3)
        assert_matches(got, want, k=2)
    # a batch dimension: every entry its own product (the groups change nothing, as in JAX)
    batch = ((([2], [1]), ([0], [0])), [0], [])
    x, y = F, np.transpose(G, (0, 2, 1))
    want = jax.lax.ragged_dot_general(x, y, np.array([1, 1], np.int32), dn(*batch))
    assert_matches(
        pto.lax.ragged_dot_general(x, y, np.array([1, 1], np.int32), dn(*batch)), want, k=5
    )
    # fp16 operands, f32 result, and the free mode with batch dims on the right of rhs
    h, wh = X7.astype(np.float16), W3.astype(np.float16)
    gs3 = np.array([3, 3, 1], np.int32)
    want = jax.lax.ragged_dot(h, wh, gs3, preferred_element_type=np.float32)
    got = pto.lax.ragged_dot(h, wh, gs3, preferred_element_type=pto.float32)
    assert got.dtype == pto.float32
    assert_matches(got, want, k=3)
    w_last = np.moveaxis(W3, 0, 2)  # [k, n, g]: the group dimension last
    free = ((([1], [0]), ([], [])), [0], [2])
    want = jax.lax.ragged_dot_general(X7, w_last, gs3, dn(*free))
    assert_matches(pto.lax.ragged_dot_general(X7, w_last, gs3, dn(*free)), want, k=3)


def test_ragged_dot_errors() -> None:
    gs = np.array([2, 2, 3], np.int32)
    with pytest.raises(pto.ShapeError, match="group_offset is not supported"):
        pto.lax.ragged_dot(X7, W3, gs, group_offset=np.array([1], np.int32))
    with pytest.raises(pto.ShapeError, match=r"group_sizes is f32\[3\]"):
        pto.lax.ragged_dot(X7, W3, gs.astype(np.float32))
    with pytest.raises(pto.ShapeError, match=r"group dimension 0 must have the 2 groups"):
        pto.lax.ragged_dot(X7, W3, gs[:2])
    with pytest.raises(pto.ShapeError, match="is not a RaggedDotDimensionNumbers"):
        pto.lax.ragged_dot_general(X7, W3, gs, (((1,), (1,)), ((), ())))


def test_convolution_shape_helpers_match_jax() -> None:
    nhwc = ("NHWC", "HWIO", "NHWC")
    for pad in ("SAME", "VALID", "SAME_LOWER"):
        for ins, win, st in (
            ((7, 8), (3, 3), (2, 2)),
            ((5, 9), (4, 1), (3, 1)),
            ((2, 2), (5, 5), (1, 1)),
        ):
            assert pto.lax.padtype_to_pads(ins, win, st, pad) == list(
                jax.lax.padtype_to_pads(ins, win, st, pad)
            ), (pad, ins, win, st)
    for pads in ("SAME", "VALID", [(1, 0), (2, 3)], [(-1, 0), (0, 0)]):
        for st in ((1, 1), (2, 3)):
            want = jax.lax.conv_shape_tuple((4, 3, 9, 10), (8, 3, 3, 2), st, pads)
            assert pto.lax.conv_shape_tuple((4, 3, 9, 10), (8, 3, 3, 2), st, pads) == tuple(want)
            for dn in (nhwc, ("NCHW", "OIHW", "NCHW"), ("NHWC", "OIHW", "NCHW")):
                lhs = (4, 9, 10, 3) if dn[0] == "NHWC" else (4, 3, 9, 10)
                rhs = (3, 2, 3, 8) if dn[1] == "HWIO" else (8, 3, 3, 2)
                want = jax.lax.conv_general_shape_tuple(lhs, rhs, st, pads, dn)
                got = pto.lax.conv_general_shape_tuple(lhs, rhs, st, pads, dn)
                assert got == tuple(want), (pads, st, dn)
                want = jax.lax.conv_transpose_shape_tuple(lhs, rhs, st, pads, dn)
                got = pto.lax.conv_transpose_shape_tuple(lhs, rhs, st, pads, dn)
                assert got == tuple(want), ("transpose", pads, st, dn)
        assert pto.lax.conv_general_permutations(nhwc) == jax.lax.conv_general_permutations(nhwc)
    assert pto.lax.conv_shape_tuple((4, 3, 9), (8, 1, 3), (1,), "VALID", 2) == (2, 8, 7)
    args = ((8, 56, 56, 64), (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (0, 1), (1, 1), (0, 0)))
    for bd, wd in ((None, None), ((1, 2, 1, 1), (1, 1, 2, 1))):
        want = jax.lax.reduce_window_shape_tuple(*args, bd, wd)
        assert pto.lax.reduce_window_shape_tuple(*args, bd, wd) == tuple(want)
