"""``pto.vmap`` against ``jax.vmap``: axes in and out, pytrees, composites, nesting, per-example
gradients, ``jit`` on the NPU, and the errors. Each primitive's batching rule is checked
against the op run per example in tests/test_table.py."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto
from pypto.ops.table import OPS
from pypto.reference import compare

RNG = np.random.default_rng(11)
X = RNG.normal(size=(5, 3, 4)).astype(np.float32)
W = RNG.normal(size=(4, 2)).astype(np.float32)


def close(got: Any, want: Any, what: str, k: int = 8) -> None:
    gs = got if isinstance(got, tuple | list) else (got,)
    ws = want if isinstance(want, tuple | list) else (want,)
    assert len(gs) == len(ws), what
    for i, (g, w) in enumerate(zip(gs, ws, strict=True)):
        assert tuple(g.shape) == tuple(np.shape(w)), f"{what}[{i}]: {g.shape} vs {np.shape(w)}"
        c = compare(f"{what}[{i}]", g, np.asarray(w), k=k)
        assert c.ok, str(c)


def block(lib: Any, x: Any, w: Any) -> Any:
    """One example: a projection, a softmax, a layer_norm, a transpose and a reduction."""
    nn = pto if lib is pto else jax.nn
    h = lib.tanh(x @ w)
    p = nn.softmax(h, -1)
    n = pto.layer_norm(x) if lib is pto else OPS["layer_norm"].jax_impl(x)
    return (p * h.sum()).T, (n @ w + p).max(0), x[0] @ w[:, 0]


@pytest.mark.parametrize(
    ("in_axes", "out_axes"), [((0, None), 0), ((1, None), 0), ((2, None), (1, 1, 0)), (0, -1)]
)
def test_vmap_equals_jax(in_axes: Any, out_axes: Any) -> None:
    x = np.moveaxis(X, 0, in_axes if isinstance(in_axes, int) else in_axes[0])
    w = np.stack([W * (1 + i) for i in range(5)]) if in_axes == 0 else W
    got = pto.vmap(lambda a, b: block(pto, a, b), in_axes, out_axes)(pto.tensor(x), pto.tensor(w))
    want = jax.vmap(lambda a, b: block(jnp, a, b), in_axes, out_axes)(x, w)
    close(got, want, f"vmap in_axes={in_axes} out_axes={out_axes}")


def test_pytrees_nested_vmap_and_unmapped_outputs() -> None:
    params = {"w": W, "b": np.arange(2, dtype=np.float32)}

    def f(lib: Any, p: Any, x: Any) -> Any:
        return {"y": lib.tanh(x @ p["w"] + p["b"]), "b": p["b"] * 2}

    got = pto.vmap(lambda p, x: f(pto, p, x), (None, 0))(
        {k: pto.tensor(v) for k, v in params.items()}, pto.tensor(X)
    )
    want = jax.vmap(lambda p, x: f(jnp, p, x), (None, 0))(params, X)
    close((got["y"], got["b"]), (want["y"], want["b"]), "pytree")
    # an output that no mapped argument reaches may stay unmapped (out_axes None)
    got = pto.vmap(lambda x, w: (x @ w, w * 2), (0, None), (0, None))(pto.tensor(X), pto.tensor(W))
    close(got, (X @ W, W * 2), "unmapped output")
    # a vmap of a vmap: every pair of rows and columns
    inner = pto.vmap(lambda r, c: (r * c).sum(), (None, 1))
    got = pto.vmap(inner, (0, None))(pto.tensor(X[0]), pto.tensor(X[1].T @ X[1]))
    close(got, X[0] @ (X[1].T @ X[1]), "nested")


def test_keyword_arguments_are_mapped_over_axis_0() -> None:
    got = pto.vmap(lambda x, *, w: w @ x, in_axes=(None,))(pto.tensor(X[0, 0]), w=pto.tensor(X))
    close(got, jax.vmap(lambda x, *, w: w @ x, in_axes=(None,))(X[0, 0], w=X), "kwargs")


def test_per_example_gradients_and_gradient_of_a_vmap() -> None:
    def loss(lib: Any, w: Any, x: Any) -> Any:
        return (lib.tanh(x @ w) ** 2).mean()

    got = pto.vmap(pto.grad(lambda w, x: loss(pto, w, x)), (None, 0))(pto.tensor(W), pto.tensor(X))
    want = jax.vmap(jax.grad(lambda w, x: loss(jnp, w, x)), (None, 0))(W, X)
    close(got, want, "per-example gradients")
    got = pto.grad(lambda w: pto.vmap(lambda x: loss(pto, w, x))(pto.tensor(X)).sum())(
        pto.tensor(W)
    )
    want = jax.grad(lambda w: jax.vmap(lambda x: loss(jnp, w, x))(X).sum())(W)
    close(got, want, "gradient of a vmap")


def test_jit_of_vmap_is_one_batched_graph_on_the_npu() -> None:
    f = pto.jit(pto.vmap(lambda x, w: pto.softmax(x @ w, -1), (0, None)), machine="tiny")
    got = f(pto.tensor(X), pto.tensor(W))
    close(got, jax.vmap(lambda x: jax.nn.softmax(x @ W, -1))(X), "jit vmap")
    graph = str(f.lower(pto.tensor(X), pto.tensor(W)).tensor_ir)
    assert "f32[5,3,2] = matmul" in graph  # the whole batch in one product, no loop


def test_take_with_per_example_indices_and_a_custom_vjp() -> None:
    idx = np.array([[0, 3], [1, 1], [3, 0], [2, 2], [0, 1]], np.int32)
    got = pto.vmap(lambda a, i: pto.take(a, i, axis=1))(pto.tensor(X), pto.tensor(idx))
    close(got, jax.vmap(lambda a, i: jnp.take(a, i, axis=1))(X, idx), "take")

    @pto.custom_vjp
    def square(x: Any) -> Any:
        return x * x

    square.defvjp(lambda x: (square(x), x), lambda x, g: (2 * x * g,))
    got = pto.vmap(pto.grad(lambda x: square(x).sum()))(pto.tensor(X))
    close(got, 2 * X, "custom_vjp per example")


def test_pytree_in_axes_and_out_axes_equal_jax() -> None:
    """A dict of parameters with an axis per entry, a nested tuple, and out_axes as a prefix of
    the results' tree."""
    rng = np.random.default_rng(3)
    p = {"w": rng.normal(size=(3, 4)).astype(np.float32), "b": rng.normal(size=(4, 5))}
    p["b"] = p["b"].astype(np.float32)  # one bias per example, along axis 1
    x = rng.normal(size=(5, 3)).astype(np.float32)
    pair = (x, (x * 2, x[:, :2]))

    def f(xp: Any, p: Any, t: Any) -> Any:
        a, (b, c) = t
        h = xp.tanh(a @ p["w"] + p["b"])
        return {"h": h, "s": (h.sum(), c * 3)}, b

    in_axes = ({"w": None, "b": 1}, (0, (0, 0)))
    out_axes = ({"h": 1, "s": 0}, 0)
    got = pto.vmap(lambda p, t: f(pto, p, t), in_axes, out_axes)(
        {k: pto.tensor(v) for k, v in p.items()},
        (pto.tensor(x), (pto.tensor(x * 2), pto.tensor(x[:, :2]))),
    )
    want = jax.vmap(lambda p, t: f(jnp, p, t), in_axes, out_axes)(p, pair)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        close(g, w, "pytree vmap")


def test_a_mismatched_axes_tree_is_a_clear_error() -> None:
    p = {"w": pto.ones((3, 4)), "b": pto.ones((5, 4))}
    with pytest.raises(
        pto.TraceError, match=r"in_axes of argument 0: \{'w': None\} does not match"
    ):
        pto.vmap(lambda p: p["w"] + p["b"], ({"w": None},))(p)
    with pytest.raises(pto.TraceError, match=r"out_axes: \(0, 0\) does not match the structure \*"):
        pto.vmap(lambda a: a * 2, 0, (0, 0))(pto.ones((2, 3)))


def test_vmap_errors_name_the_axes() -> None:
    x = pto.tensor(X)
    with pytest.raises(pto.ShapeError, match=r"vmap: the mapped axes differ in size: f32\[5,3,4\]"):
        pto.vmap(lambda a, b: a + b)(x, pto.ones((4, 3, 4)))
    with pytest.raises(pto.TraceError, match="no argument is mapped"):
        pto.vmap(lambda a: a, None)(x)
    with pytest.raises(pto.ShapeError, match="in_axes of argument 0: axis 3 is out of range"):
        pto.vmap(lambda a: a, 3)(x)
    with pytest.raises(pto.TraceError, match=r"in_axes=\(0, 0\) must be an int, None, or a tuple"):
        pto.vmap(lambda a: a, (0, 0))(x)
    with pytest.raises(pto.TraceError, match="output 0 depends on the mapped arguments"):
        pto.vmap(lambda a: a * 2, 0, None)(x)
