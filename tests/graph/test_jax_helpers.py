"""JAX's small top-level helpers: ``disable_jit``, ``jacobian``, ``linear_transpose``,
``device_get`` and ``block_until_ready``, against JAX's."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import pypto as pto

X = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]], np.float32)


def test_disable_jit_runs_the_python_eagerly_and_nests() -> None:
    seen: list[str] = []

    @pto.jit
    def f(x: Any) -> Any:
        seen.append(type(x).__name__)
        return x * 2.0

    with pto.disable_jit():
        out = f(X)
        with pto.disable_jit(False):
            f(X)
    np.testing.assert_array_equal(np.asarray(out), 2 * X)
    assert seen == ["ndarray", "Tracer"]  # eager: the argument itself; then traced once
    assert f.cache_info().traces == 1
    f(X)
    assert seen == ["ndarray", "Tracer"]  # cached, compiled


def test_jacobian_and_linear_transpose_match_jax() -> None:
    def g(m: Any) -> Any:
        return m**2 * m[::-1]

    np.testing.assert_allclose(
        np.asarray(pto.jacobian(g)(X)), np.asarray(jax.jacobian(g)(X)), rtol=1e-6
    )
    w = np.arange(6, dtype=np.float32).reshape(3, 2)

    def lin(x: Any, y: Any) -> Any:
        return (x @ w) * 2.0 - y.T

    ct = np.ones((2, 2), np.float32) * np.array([1.0, -3.0], np.float32)
    theirs = jax.linear_transpose(lin, X, jnp.zeros((2, 2), jnp.float32))(ct)
    for primals in (
        (X, np.zeros((2, 2), np.float32)),
        (pto.ShapeDtypeStruct((2, 3), pto.float32), jax.ShapeDtypeStruct((2, 2), jnp.float32)),
    ):
        ours = pto.linear_transpose(lin, *primals)(ct)
        assert len(ours) == 2
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_device_get_and_block_until_ready() -> None:
    tree = {"w": pto.ones((2, 2)), "n": 3, "t": (pto.tensor(1.5),)}
    got = pto.device_get(tree)
    assert isinstance(got["w"], np.ndarray) and got["n"] == 3
    assert isinstance(got["t"][0], np.ndarray) and float(got["t"][0]) == 1.5
    assert pto.block_until_ready(tree) is tree
