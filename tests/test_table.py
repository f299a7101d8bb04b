"""The op table: every op has every rule its levels require, and the rules agree with the data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pypto as pto
from pypto.ops import catalog, table
from pypto.ops.table import OPS, AVal, Cost
from pypto.tile.examples import rms_norm_matmul

ROOT = Path(__file__).resolve().parent.parent


@pto.custom_vjp
def _dense(x, w):
    return pto.relu(x @ w)


_dense.defvjp(lambda x, w: (_dense(x, w), (x, w)), lambda r, g: (g @ r[1].T, r[0].T @ g))

# One sample application per primitive: input arrays and params, as the API would bind them.
f32 = np.float32
SAMPLES: dict[str, tuple[tuple[np.ndarray, ...], dict]] = {
    **{
        n: ((np.linspace(0.1, 2.0, 6, dtype=f32).reshape(2, 3),), {})
        for n in ("exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "sin", "cos")
    },
    "stop_gradient": ((np.arange(6, dtype=np.int8).reshape(2, 3) > 2,), {}),
    "neg": ((np.arange(6, dtype=np.int32).reshape(2, 3),), {}),
    "abs": ((np.arange(-3, 3, dtype=np.int8).reshape(2, 3),), {}),
    **{
        n: ((np.ones((2, 3), f32), np.arange(3, dtype=f32)), {})
        for n in ("add", "sub", "mul", "maximum", "minimum", "pow")
    },
    "div": ((np.ones((2, 3), f32), np.arange(1, 4, dtype=f32)), {}),
    **{
        n: ((np.arange(6, dtype=np.int32).reshape(2, 3) - 3, np.array([2, 33, -1], np.int32)), {})
        for n in ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")
    },
    "bitwise_not": ((np.arange(-3, 3, dtype=np.int8),), {}),
    "fmod": ((np.arange(6, dtype=np.int32).reshape(2, 3) - 3, np.array([2, 0, -4], np.int32)), {}),
    **{
        n: ((np.ones((2, 1), f32), np.arange(3, dtype=f32)), {})
        for n in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
    },
    "where": ((np.array([True, False]), np.ones((3, 2), f32), np.zeros((1, 2), f32)), {}),
    "cast": ((np.array([1.5, -2.5], f32),), {"dtype": pto.int8}),
    "bitcast_convert_type": ((np.array([1.5, -2.5, np.nan], f32),), {"dtype": pto.int32}),
    "sum": ((np.ones((2, 3, 4), np.int8),), {"axes": (0, 2), "keepdims": True}),
    "max": ((np.ones((2, 3), f32),), {"axes": (1,), "keepdims": False}),
    "min": ((np.ones((2, 3), f32),), {"axes": (0, 1), "keepdims": False}),
    "argmax": ((np.arange(6, dtype=f32).reshape(2, 3),), {"axis": 1, "keepdims": False}),
    "matmul": ((np.ones((5, 2, 3), f32), np.ones((3, 4), f32)), {}),
    "reshape": ((np.ones((2, 6), f32),), {"shape": (3, 4)}),
    "transpose": ((np.ones((2, 3, 4), f32),), {"perm": (2, 0, 1)}),
    "broadcast_to": ((np.ones((3, 1), f32),), {"shape": (2, 3, 4)}),
    "concat": ((np.ones((2, 3), f32), np.zeros((4, 3), f32)), {"axis": 0}),
    "slice": ((np.ones((5, 6), f32),), {"index": ((4, None, -2), (1, 5, 3))}),
    "take": ((np.ones((5, 6), f32), np.array([[0, -1], [2, 3]], np.int32)), {"axis": 1}),
    "lax_pad": ((np.ones((2, 3), f32),), {"config": ((1, 0, 0), (0, 2, 1))}),
    "scan": ((np.ones((2, 3, 5), np.int32),), {"op": "max", "reverse": True}),
    "scan_affine": ((np.ones((2, 3, 5), f32), np.ones((2, 3, 5), f32)), {"reverse": False}),
    "argsort_last": ((np.ones((2, 5), f32),), {"order": "descending"}),
    "gather_last": (
        (np.ones((2, 3), f32), np.array([[2, 0, 1], [0, 1, 2]], np.int32)),
        {"perm": True},
    ),
    "custom_vjp_call": ((np.ones((2, 3), f32), np.ones((3, 4), f32)), {"fn": _dense.name}),
    "debug_print": ((np.ones(3, f32), np.arange(2, dtype=np.int32)), {"fmt": "{} {}", "keys": ()}),
    "optimization_barrier": ((np.ones((2, 3), f32),), {}),
    "checkpoint_name": ((np.ones((2, 3), np.int8),), {"name": "h"}),
    "kernel_call": (
        (np.ones((16, 32), np.float16), np.ones(32, np.float16), np.ones((32, 32), np.float16)),
        {"kernel": rms_norm_matmul.name, "bm": 16, "bn": 32, "bk": 16},
    ),
}


def test_table_is_complete() -> None:
    missing = table.missing_rules()
    assert not missing, "ops lacking rules (op: levels): " + ", ".join(
        f"{name}: {levels}" for name, levels in sorted(missing.items())
    )


# Ops reached through syntax rather than a function of their own name.
VIA_SYNTAX = {
    "slice": "x[start:stop:step]",
    "lax_pad": "pto.lax.pad; internally the VJP of slice",
    "scan": "internal: the running sums, products, maxima and minima of cumsum, cumprod, "
    "cummax and cummin along the last axis",
    "scan_affine": "internal: the linear recurrence of their gradients",
    "argsort_last": "internal: the permutation of sort, argsort and top_k",
    "gather_last": "internal: take_along_axis's core, and the values of sort and top_k",
    "custom_vjp_call": "a traced call of a pto.custom_vjp function",
    "kernel_call": "calling a @pto.kernel function",
    "debug_print": "pto.debug.print under a trace",
    "optimization_barrier": "pto.lax.optimization_barrier",
}

DESIGN_NAMES = [
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "abs",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "tanh",
    "sigmoid",
    "relu",
    "gelu",
    "silu",
    "sin",
    "cos",
    "pow",
    "maximum",
    "minimum",
    "where",
    "clip",
    "cast",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "sum",
    "max",
    "min",
    "mean",
    "argmax",
    "matmul",
    "reshape",
    "transpose",
    "broadcast_to",
    "expand_dims",
    "squeeze",
    "concat",
    "split",
    "take",
    "softmax",
    "log_softmax",
    "layer_norm",
    "rms_norm",
    "scaled_dot_product_attention",
]


def test_every_op_is_public() -> None:
    for name in OPS:
        if name not in VIA_SYNTAX:
            assert callable(getattr(pto, name, None)), f"pto.{name} is missing from the API"


def test_every_name_of_the_design_is_an_op() -> None:
    missing = [n for n in DESIGN_NAMES if n not in OPS or not callable(getattr(pto, n, None))]
    assert not missing, f"ops named in DESIGN §5 but absent: {missing}"


def test_a_declared_level_names_the_ops_it_lacks() -> None:
    table.require_rule("__probe__", lambda op: op.name in ("exp", "softmax"))
    try:
        assert table.missing_rules() == {"exp": ["__probe__"], "softmax": ["__probe__"]}
        table.register_rule("__probe__", "exp")(lambda *a: None)
        assert table.missing_rules() == {"softmax": ["__probe__"]}
    finally:
        table._REQUIRED.pop("__probe__")
        OPS["exp"].rules.pop("__probe__")


def test_every_primitive_has_a_sample() -> None:
    prims = {n for n, op in OPS.items() if not op.is_composite}
    assert prims == set(SAMPLES), f"missing samples: {prims - set(SAMPLES)}"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_rules_agree_with_numpy_impl_and_jax(name: str) -> None:
    op = OPS[name]
    arrays, params = SAMPLES[name]
    avals = [AVal(a.shape, pto.dtypes.from_numpy(a.dtype)) for a in arrays]
    shape = op.shape_rule(*avals, **params)
    dtype = op.dtype_rule(*avals, **params)
    out = np.asarray(op.impl(*arrays, **params))
    assert out.shape == shape, f"{name}: shape rule {shape} but numpy gives {out.shape}"
    assert out.dtype == dtype.np, f"{name}: dtype rule {dtype} but numpy gives {out.dtype}"
    ref = np.asarray(op.jax_impl(*arrays, **params))
    assert ref.shape == shape and ref.dtype == dtype.np, f"{name}: JAX gives {ref.dtype}{ref.shape}"
    cost = op.cost_rule(*avals, out=AVal(shape, dtype), **params)
    assert isinstance(cost, Cost) and cost.bytes_out == out.nbytes
    assert cost.bytes_in == sum(a.nbytes for a in arrays)


def test_matmul_cost_counts_multiply_adds() -> None:
    a, b = AVal((64, 32), pto.float16), AVal((32, 16), pto.float16)
    cost = OPS["matmul"].cost_rule(a, b, out=AVal((64, 16), pto.float16))
    assert (cost.flops, cost.unit) == (2 * 64 * 32 * 16, "cube")


def test_transcendentals_cost_more_vector_work_than_add() -> None:
    x = AVal((8, 8), pto.float32)
    add = OPS["add"].cost_rule(x, x, out=x)
    exp = OPS["exp"].cost_rule(x, out=x)
    assert exp.flops > add.flops == 64


def test_docs_ops_md_is_generated_from_the_table() -> None:
    text = (ROOT / "docs" / "ops.md").read_text()
    assert text == catalog.markdown(), "docs/ops.md is stale: run `python -m pypto docs`"
    for name in OPS:
        assert f"| `{name}` |" in text


def _example(a: np.ndarray, k: int, name: str, i: int) -> np.ndarray:
    """Example ``k`` of a batch built from the sample operand ``a``: different values."""
    if a.dtype == np.bool_:
        return a ^ bool(k % 2)
    if name == "take" and i == 1:  # indices stay in range
        return ((a + k) % 6).astype(a.dtype)
    if name == "gather_last" and i == 1:  # another permutation of each row
        return np.roll(a, k, axis=-1)
    if np.issubdtype(a.dtype, np.integer):
        return (a + k).astype(a.dtype)
    return (a * (1 + 0.5 * k) + 0.25 * k).astype(a.dtype)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_batch_rule_equals_the_op_per_example(name: str) -> None:
    """Every primitive's batching rule, with every operand batched and with each operand
    alone batched, gives the op applied to each example, stacked."""
    op = OPS[name]
    arrays, params = SAMPLES[name]
    size = 3
    patterns = [[True] * len(arrays)] + [
        [j == i for j in range(len(arrays))] for i in range(len(arrays)) if len(arrays) > 1
    ]
    for batched in patterns:
        examples = [
            [_example(a, k, name, i) if b else a for i, (a, b) in enumerate(zip(arrays, batched))]
            for k in range(size)
        ]
        want = np.stack([np.asarray(op.impl(*ex, **params)) for ex in examples])
        args = [
            pto.tensor(np.stack([ex[i] for ex in examples]) if b else a)
            for i, (a, b) in enumerate(zip(arrays, batched))
        ]
        out_aval = AVal(want.shape[1:], pto.dtypes.from_numpy(want.dtype))
        got = op.rules["batch"](args, batched, size, out_aval, **params).numpy()
        assert got.shape == want.shape and got.dtype == want.dtype, (name, batched)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{name} batched={batched}")
