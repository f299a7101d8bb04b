"""``pto.save``/``pto.load``: numpy's files, every dtype, interchangeable with ``jnp``'s."""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import pypto as pto

DTYPES = [pto.float32, pto.float16, pto.bfloat16, pto.int32, pto.int8, pto.bool_]


@pytest.mark.parametrize("dtype", DTYPES, ids=[d.name for d in DTYPES])
def test_a_tensor_round_trips_and_jax_reads_it_back(tmp_path: Path, dtype: pto.DType) -> None:
    a = (np.arange(-6, 6).reshape(3, 4) * 1.5).astype(dtype.np)
    path = tmp_path / "a.npy"
    pto.save(path, pto.tensor(a))
    got = pto.load(path)
    assert isinstance(got, pto.Tensor) and got.dtype is dtype and got.shape == (3, 4)
    np.testing.assert_array_equal(got.numpy(), a)
    via_jax = jnp.load(path)  # bfloat16 comes back from numpy's 2-byte voids in both
    assert via_jax.dtype == a.dtype
    np.testing.assert_array_equal(np.asarray(via_jax), a)
    jnp.save(tmp_path / "j.npy", jnp.asarray(a))
    np.testing.assert_array_equal(pto.load(tmp_path / "j.npy").numpy(), a)


def test_archives_load_lazily_as_tensors(tmp_path: Path) -> None:
    w = pto.tensor(np.ones((2, 3), ml_dtypes.bfloat16))
    path = tmp_path / "params.npz"
    pto.savez(path, pto.zeros(2), w=w, step=np.int64(7))
    with pto.load(path) as f:
        assert sorted(f.files) == ["arr_0", "step", "w"] and "w" in f and len(f) == 3
        assert f["w"].dtype is pto.bfloat16 and f["w"].shape == (2, 3)
        assert f["step"].dtype is pto.int32 and f["step"].item() == 7  # narrowed, as JAX
        np.testing.assert_array_equal(f["arr_0"].numpy(), np.zeros(2, np.float32))
    pto.savez_compressed(tmp_path / "c.npz", x=pto.arange(5))
    np.testing.assert_array_equal(pto.load(tmp_path / "c.npz")["x"].numpy(), np.arange(5))


def test_what_pypto_has_no_tensor_for_stays_a_numpy_array(tmp_path: Path) -> None:
    np.save(tmp_path / "s.npy", np.array(["a", "bc"]))
    out = pto.load(tmp_path / "s.npy")
    assert isinstance(out, np.ndarray) and out.tolist() == ["a", "bc"]
