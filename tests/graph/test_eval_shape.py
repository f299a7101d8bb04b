"""``pto.eval_shape`` and ``pto.ShapeDtypeStruct`` against ``jax.eval_shape``: shapes and
dtypes through pytrees and keyword arguments, JAX's structs as inputs, nothing computed."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto


def _same(ours: Any, theirs: Any) -> None:
    a = pto.tree_util.tree_leaves(ours)
    b = jax.tree_util.tree_leaves(theirs)
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert isinstance(x, pto.ShapeDtypeStruct)
        assert x.shape == y.shape and x.dtype.np == np.dtype(y.dtype), (x, y)


@pytest.mark.parametrize(
    ("f", "jf"),
    [
        (lambda x, w: pto.tanh(x @ w), lambda x, w: jnp.tanh(x @ w)),
        (lambda x, w: (x.sum(0), {"m": x.max(-1)}), lambda x, w: (x.sum(0), {"m": x.max(-1)})),
        (lambda x, w: pto.argsort(x, -1), lambda x, w: jnp.argsort(x, -1)),
        (
            lambda x, w: x.astype(pto.int8)[:, None] > 0,
            lambda x, w: x.astype(jnp.int8)[:, None] > 0,
        ),
    ],
)
def test_eval_shape_matches_jax(f: Any, jf: Any) -> None:
    x, w = jax.ShapeDtypeStruct((8, 16), jnp.float16), jax.ShapeDtypeStruct((16, 4), jnp.float16)
    _same(pto.eval_shape(f, x, w), jax.eval_shape(jf, x, w))
    ours = (pto.ShapeDtypeStruct((8, 16), pto.float16), pto.ShapeDtypeStruct((16, 4), "float16"))
    _same(pto.eval_shape(f, *ours), jax.eval_shape(jf, x, w))


def test_nothing_runs_and_keywords_and_pytrees_pass() -> None:
    # 4 TB of float32 if anything were computed
    huge = pto.ShapeDtypeStruct((1 << 20, 1 << 20), pto.float32)
    out = pto.eval_shape(
        lambda p, scale=1.0: {"y": (p["a"] * scale).sum(1)}, {"a": huge}, scale=2.0
    )
    assert out == {"y": pto.ShapeDtypeStruct((1 << 20,), pto.float32)}
    # arrays and tensors stand for their shapes
    got = pto.eval_shape(lambda a, b: a + b, np.ones((2, 1), np.int32), pto.ones(3, pto.bfloat16))
    assert got == pto.ShapeDtypeStruct((2, 3), pto.bfloat16)
    assert (
        got.ndim == 2
        and got.size == 6
        and hash(got) == hash(pto.ShapeDtypeStruct((2, 3), "bfloat16"))
    )
    # a struct is an argument that lowers without data
    assert "bf16[2,3]" in str(pto.make_graph(lambda a: a * 2)(got))


def test_errors_point_at_the_user() -> None:
    with pytest.raises(pto.ShapeError, match="matmul"):
        pto.eval_shape(lambda a: a @ a, pto.ShapeDtypeStruct((2, 3), pto.float32))
