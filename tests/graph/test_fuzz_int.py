"""Differential fuzzing of integer and boolean programs: wrapping arithmetic, comparisons and
selects, clips, integer powers, casts between int32, int8, bool and float, int32-accumulating
sums, extremes, argmax and argmin, any and all, logical operators, gathers by integer arrays,
the rounding ops (identities on integers), scans, products, divisions, bit operations, signs,
triangles and flips, mixed with layout steps. Integers are exact, so eager mode, the
interpreter, the simulated NPU (tiny and ascend910b) and JAX must agree bit for bit
(docs/numerics.md: integer semantics are JAX's)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto as pto

INTS = [pto.int32, pto.int8]

UNARY: dict[str, Callable[[Any], Any]] = {
    "neg": pto.neg,
    "abs": pto.abs,
    "square": lambda x: x * x,
    "pow3": lambda x: pto.pow(x, 3),
    "clip": lambda x: pto.clip(x, -5, 7),
    "to_i8": lambda x: x.astype(pto.int8),
    "to_i32": lambda x: x.astype(pto.int32),
    "bool_trip": lambda x: (x > 0).astype(x.dtype) + (x != 0).astype(x.dtype) * 2,
    "float_trip": lambda x: (x.astype(pto.float32) * 0.5).astype(x.dtype),
    "half_trip": lambda x: (x.astype(pto.float16) * 1.5).astype(x.dtype),
    "sum": lambda x: pto.sum(x, -1, keepdims=True) if x.ndim else x,
    "max0": lambda x: pto.max(x, 0) if x.ndim else x,
    "min-1": lambda x: pto.min(x, -1, keepdims=True) if x.ndim else x,
    "argmax": lambda x: pto.argmax(x, -1, keepdims=True) if x.ndim else x,
    "argmax0": lambda x: pto.argmax(x, 0) if x.ndim > 1 else x,
    "T": lambda x: x.T,
    "rev": lambda x: x[..., ::-1] if x.ndim else x,
    "flat": lambda x: pto.reshape(x, (-1,)),
    "argmin": lambda x: pto.argmin(x, -1, keepdims=True) if x.ndim else x,
    "any-all": lambda x: (pto.any(x, -1) ^ pto.all(x > -3, -1)).astype(x.dtype) if x.ndim else x,
    "gather": lambda x: x[[0, -1, 0]] if x.ndim else x,
    "gather-1": lambda x: x[..., np.array([-1, 0])] if x.ndim else x,
    "round": lambda x: pto.round(x) + pto.floor(x) - pto.ceil(x),
    "cumsum": lambda x: pto.cumsum(x, -1) if x.ndim else x,
    "cummax": lambda x: pto.cummax(x, 0) - pto.cummin(x, -1, reverse=True) if x.ndim else x,
    "cumprod": lambda x: pto.cumprod(x, -1) if x.ndim else x,  # wraps in int32
    "prod": lambda x: pto.prod(x, -1, keepdims=True) if x.ndim else x,  # wraps in int32
    "sign": lambda x: pto.sign(x) * x - pto.square(x),
    "tri": lambda x: pto.tril(x) - pto.triu(x, 1) if x.ndim > 1 else x,
    "flip": lambda x: pto.flip(x) + pto.swapaxes(x, 0, -1).T if x.ndim else x,
    "sort": lambda x: pto.sort(x, -1) - pto.argsort(x, 0).astype(x.dtype) if x.ndim else x,
    "top_k": lambda x: pto.top_k(x, x.shape[-1])[1].astype(x.dtype) * x if x.ndim else x,
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": pto.add,
    "sub": pto.sub,
    "mul": pto.mul,
    "maximum": pto.maximum,
    "minimum": pto.minimum,
    "where": lambda x, y: pto.where(x > y, x, y),
    "eq-select": lambda x, y: pto.where(pto.equal(x, y) | (x < 0), y - x, x),
    "logical": lambda x, y: pto.where(~((x > 0) & (y > 0)) ^ (x == y), x, y),
    # divisions over the whole range: JAX's x // 0, x % 0 and -2**31 // -1 included
    "floordiv": lambda x, y: x // y,
    "mod": lambda x, y: x % y + pto.fmod(y, x),
    "bits": lambda x, y: (x & y) ^ (~x | (y << 3)) ^ (x >> (y & 7)),
}


@st.composite
def programs(draw: st.DrawFn, sizes: list[int]) -> tuple[list[np.ndarray], list[Any]]:
    base = draw(st.lists(st.sampled_from(sizes), min_size=1, max_size=3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    inputs = []
    for _ in range(draw(st.integers(1, 3))):
        d = draw(st.sampled_from(INTS))
        shape = tuple(1 if draw(st.integers(0, 3)) == 0 else s for s in base)
        hi = 120 if d is pto.int8 else 2**31 - 1
        lo_hi = draw(st.sampled_from([(-9, 9), (-hi, hi)]))  # small, or the whole range
        inputs.append(rng.integers(lo_hi[0], lo_hi[1], shape, endpoint=True).astype(d.np))
    steps = []
    for _ in range(draw(st.integers(1, 15))):
        if draw(st.booleans()):
            steps.append(("u", draw(st.sampled_from(sorted(UNARY))), draw(st.integers(0, 99))))
        else:
            name = draw(st.sampled_from(sorted(BINARY)))
            steps.append(("b", name, draw(st.integers(0, 99)), draw(st.integers(0, 99))))
    return inputs, steps


def build(steps: list[Any]) -> Callable[..., Any]:
    def program(*xs: Any) -> Any:
        pool = list(xs)
        for step in steps:
            if step[0] == "u":
                pool.append(UNARY[step[1]](pool[step[2] % len(pool)]))
                continue
            x, y = pool[step[2] % len(pool)], pool[step[3] % len(pool)]
            try:
                np.broadcast_shapes(x.shape, y.shape)
            except ValueError:
                y = pto.max(y)  # shapes that do not broadcast: a scalar of y
            pool.append(BINARY[step[1]](x, y))
        return pool[-1], pool[len(xs) + (len(pool) - len(xs)) // 2]

    return program


def _same(name: str, got: Any, want: Any, steps: list[Any]) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, f"{name}: {g.dtype}{g.shape} {w.dtype}"
    np.testing.assert_array_equal(g, w, err_msg=f"{name}, steps {steps}")


@settings(max_examples=40)
@given(programs([1, 2, 3, 5]))
def test_integer_programs_agree_bit_for_bit(prog: Any) -> None:
    inputs, steps = prog
    fn = build(steps)
    tensors = [pto.tensor(a) for a in inputs]
    with np.errstate(over="ignore"):  # integer overflow wraps on every path
        eager = fn(*tensors)
        staged = pto.jit(fn, backend="interpret")(*tensors)
        npu = pto.jit(fn, machine="tiny")(*tensors)
    ref = pto.to_jax(fn)(*inputs)
    for i, (e, s, n, r) in enumerate(zip(eager, staged, npu, ref, strict=True)):
        _same(f"interpret out[{i}]", s, e, steps)
        _same(f"npu out[{i}]", n, e, steps)
        _same(f"jax out[{i}]", e, r, steps)


@settings(max_examples=12)
@given(programs([1, 3, 16, 48, 100, 130]))
def test_integer_programs_on_ascend910b(prog: Any) -> None:
    inputs, steps = prog
    fn = build(steps)
    tensors = [pto.tensor(a) for a in inputs]
    with np.errstate(over="ignore"):
        eager = fn(*tensors)
        npu = pto.jit(fn, machine="ascend910b")(*tensors)
    for i, (e, n) in enumerate(zip(eager, npu, strict=True)):
        _same(f"npu out[{i}]", n, e, steps)
