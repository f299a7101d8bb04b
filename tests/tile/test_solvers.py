"""The elimination composites (solve, inv, det, slogdet, cholesky, matrix_power) compiled for
the simulated NPU, with their gradients, against JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto

RNG = np.random.default_rng(31)
# a batch of 5x5 matrices far from singular whose rows need reordering: elimination pivots
A = (RNG.standard_normal((3, 5, 5)) * 0.5 + 3 * np.eye(5))[:, [3, 0, 4, 1, 2]].astype(np.float32)
B = RNG.standard_normal((3, 5, 2)).astype(np.float32)


def _loss(lib, a, b):  # type: ignore[no-untyped-def]
    sign, logdet = lib.linalg.slogdet(a)
    spd = a @ jnp.swapaxes(a, -1, -2) if lib is jnp else a @ pto.swapaxes(a, -1, -2)
    return (
        (lib.linalg.solve(a, b) ** 2).sum()
        + (sign * logdet).sum()
        + lib.linalg.det(a[:, :3, :3]).sum() * 0.01
        + lib.linalg.inv(a)[:, 0].sum()
        + (lib.linalg.cholesky(spd) * 0.1).sum()
        + (lib.linalg.matrix_power(a * 0.2, 3) ** 2).sum()
    )


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
def test_solvers_and_their_gradients_on_the_npu(machine: str) -> None:
    want = _loss(jnp, A, B)
    got = pto.jit(lambda a, b: _loss(pto, a, b), machine=machine)(A, B)
    np.testing.assert_allclose(float(got), float(want), rtol=2e-5)
    grads = pto.jit(pto.grad(lambda a, b: _loss(pto, a, b), (0, 1)), machine=machine)(A, B)
    for g, w in zip(grads, jax.grad(lambda a, b: _loss(jnp, a, b), (0, 1))(A, B), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)


def test_float16_is_solved_in_float32_and_rounded_once() -> None:
    a16, b16 = A.astype(np.float16), B.astype(np.float16)
    want = np.linalg.solve(a16.astype(np.float32), b16.astype(np.float32)).astype(np.float16)
    got = pto.jit(pto.linalg.solve, machine="tiny")(a16, b16)
    assert got.dtype is pto.float16
    np.testing.assert_allclose(
        np.asarray(got, np.float32), want.astype(np.float32), rtol=1e-3, atol=1e-3
    )
