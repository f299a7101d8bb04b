"""``pto.nn``: jax.nn's names, and initializers with JAX's distributions (the values come from
pypto's seeds, so the tests compare the distributions: bounds, moments, orthogonality)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

import pypto as pto

I = pto.nn.initializers
J = jax.nn.initializers


def test_every_jax_nn_function_pypto_has_is_under_its_name() -> None:
    missing = {"get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul"}
    names = {n for n in dir(jax.nn) if not n.startswith("_") and n != "initializers"}
    assert names - set(pto.nn.__all__) == missing
    assert set(I.__all__) - {"Initializer"} == {
        n for n in dir(J) if not n.startswith("_") and n != "Initializer"
    }
    x = np.linspace(-3, 3, 13, dtype=np.float32)
    np.testing.assert_allclose(
        pto.nn.gelu(x).numpy(), np.asarray(jax.nn.gelu(x)), rtol=1e-5, atol=1e-6
    )
    assert pto.nn.identity(x) is x


# (name, arguments, shape): conv kernels [H, W, I, O], dense [I, O], axes named
SCALED = [
    ("glorot_uniform", {}, (256, 128)),
    ("glorot_normal", {}, (3, 3, 64, 32)),
    ("lecun_uniform", {}, (512, 64)),
    ("lecun_normal", {}, (5, 96, 80)),
    ("he_uniform", {"in_axis": 0, "out_axis": 1}, (128, 256)),
    ("he_normal", {"in_axis": -2, "out_axis": -1, "batch_axis": 0}, (4, 200, 100)),
]


@pytest.mark.parametrize(("name", "kw", "shape"), SCALED, ids=[s[0] for s in SCALED])
def test_variance_scaling_has_jaxs_spread(name: str, kw: dict, shape: tuple[int, ...]) -> None:
    ours = getattr(I, name)(**kw)(0, shape).numpy()
    theirs = np.asarray(getattr(J, name)(**kw)(jax.random.key(0), shape))
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    # the same spread (within sampling noise: n >= 40,000) and the same support
    np.testing.assert_allclose(ours.std(), theirs.std(), rtol=0.03)
    assert abs(ours.mean()) < 0.03 * theirs.std()
    if "uniform" in name:
        bound = np.abs(theirs).max()
        assert np.abs(ours).max() <= bound * 1.01 and np.abs(ours).max() >= bound * 0.98
    else:  # truncated at 2 standard deviations of the underlying normal
        assert np.abs(ours).max() <= np.abs(theirs).max() * 1.01


def test_plain_distributions_and_orthogonal_weights() -> None:
    n = (300, 200)
    np.testing.assert_allclose(I.normal(0.5)(1, n).numpy().std(), 0.5, rtol=0.02)
    u = I.uniform(2.0)(1, n).numpy()
    assert 0 <= u.min() < 0.01 and 1.99 < u.max() < 2.0
    t = I.truncated_normal(1.0, lower=-1.0, upper=0.5)(2, n).numpy()
    assert t.min() >= -1.0 and t.max() <= 0.5
    np.testing.assert_array_equal(
        I.constant(3.5)(0, (2, 2)).numpy(), np.full((2, 2), 3.5, np.float32)
    )
    assert I.zeros(0, (3,), pto.bfloat16).dtype is pto.bfloat16
    assert I.ones(0, 4).numpy().tolist() == [1.0, 1.0, 1.0, 1.0]
    for shape, axis in (((64, 32), -1), ((32, 64), -1), ((3, 8, 16), 0)):
        q = I.orthogonal(2.0, axis)(3, shape).numpy()
        m = np.moveaxis(q, axis, -1).reshape(-1, shape[axis])
        gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
        np.testing.assert_allclose(gram, 4.0 * np.eye(len(gram)), atol=1e-4)
    k = I.delta_orthogonal()(4, (3, 3, 8, 16)).numpy()
    assert not np.any(np.delete(k.reshape(9, 8, 16), 4, axis=0))
    np.testing.assert_allclose(k[1, 1] @ k[1, 1].T, np.eye(8), atol=1e-5)
    # the same seed gives the same weights; another seed others
    a, b = I.he_normal()(7, (64, 64)).numpy(), I.he_normal()(7, (64, 64)).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, I.he_normal()(8, (64, 64)).numpy())


def test_initializers_refuse_what_they_cannot_do() -> None:
    with pytest.raises(pto.DTypeError, match="integer seed"):
        I.glorot_uniform()(jax.random.key(0), (2, 2))
    with pytest.raises(pto.ShapeError, match="no in and out axes"):
        I.lecun_normal()(0, (5,))
    with pytest.raises(pto.ShapeError, match="mode 'fan_max'"):
        I.variance_scaling(1.0, "fan_max", "normal")
    with pytest.raises(pto.DTypeError, match="weights are floats"):
        I.normal()(0, (2,), pto.int32)
    with pytest.raises(pto.ShapeError, match="in-features 16 exceed out-features 8"):
        I.delta_orthogonal()(0, (3, 16, 8))


def _mlp(params: Any, x: Any) -> Any:
    for w in params[:-1]:
        x = pto.nn.relu(x @ w)
    return pto.nn.log_softmax(x @ params[-1])


def test_a_small_network_initialises_and_trains_a_step() -> None:
    """The initializers feed pypto's autodiff like any tensor."""
    init = I.he_normal()
    params = [init(i, s) for i, s in enumerate([(8, 32), (32, 32), (32, 4)])]
    x = pto.random.normal(9, (16, 8))
    y = np.arange(16) % 4

    def loss(p: Any) -> Any:
        return -pto.mean(pto.take_along_axis(_mlp(p, x), pto.tensor(y[:, None]), axis=1))

    before = float(loss(params))
    grads = pto.grad(loss)(params)
    params = [w - 0.1 * g for w, g in zip(params, grads, strict=True)]
    assert float(loss(params)) < before
