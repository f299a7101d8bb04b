"""Helpers of the tile-lowering tests: run a function on the NPU and on the interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np

import pypto as pto

DTYPES = {
    "f32": pto.float32,
    "f16": pto.float16,
    "bf16": pto.bfloat16,
    "i32": pto.int32,
    "i8": pto.int8,
    "bool": pto.bool_,
}


def sample(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> Any:
    """Distinct-looking values of ``dtype`` (so a misplaced element shows)."""
    rng = np.random.default_rng(seed)
    if dtype is pto.bool_:
        return pto.tensor(rng.random(shape) < 0.5)
    if dtype in (pto.int32, pto.int8):
        return pto.tensor(rng.integers(-100, 100, shape).astype(dtype.np))
    return pto.tensor(rng.standard_normal(shape).astype(np.float32)).astype(dtype)


def npu_and_interpret(fn: Any, *args: Any, machine: str = "tiny") -> tuple[Any, Any]:
    """(NPU result, interpreter result) of ``fn`` as numpy arrays (pytrees flattened)."""
    got = pto.jit(fn, machine=machine)(*args)
    want = pto.jit(fn, backend="interpret")(*args)
    if isinstance(got, list | tuple):
        return [np.asarray(g) for g in got], [np.asarray(w) for w in want]
    return np.asarray(got), np.asarray(want)


def assert_same(fn: Any, *args: Any, machine: str = "tiny") -> None:
    """The NPU path equals the interpreter bit for bit, in shape and dtype too."""
    got, want = npu_and_interpret(fn, *args, machine=machine)
    gs = got if isinstance(got, list) else [got]
    ws = want if isinstance(want, list) else [want]
    for g, w in zip(gs, ws, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        # bit for bit (NaN payloads and signed zeros included; bfloat16 compares as its bytes)
        b = (np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in (g, w))
        np.testing.assert_array_equal(*b)
