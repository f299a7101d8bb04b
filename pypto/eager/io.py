"""Tensors to and from numpy's ``.npy`` and ``.npz`` files, as ``jnp.save`` and ``jnp.load``.

numpy has no bfloat16, so it writes one as a 2-byte void (``V2``); :func:`load` reads such an
array back as bfloat16, as ``jnp.load`` does, and a file written by either library loads in
the other.
"""

from __future__ import annotations

import os
from typing import Any

import ml_dtypes
import numpy as np

from pypto.eager.tensor import Tensor, tensor

__all__ = ["load", "save", "savez", "savez_compressed"]


def _array(x: Any) -> Any:
    return x.numpy() if isinstance(x, Tensor) else x


def save(file: str | os.PathLike[str] | Any, arr: Any, allow_pickle: bool = False) -> None:
    """Write ``arr`` (a tensor, or anything ``np.save`` takes) to ``file`` in ``.npy``
    format (numpy adds the suffix to a name without one).

    >>> import pypto as pto, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
    >>> pto.save(path, pto.tensor([1.5, 2.5], pto.bfloat16))
    >>> pto.load(path)
    Tensor([1.5, 2.5], dtype=bfloat16)
    """
    np.save(file, _array(arr), allow_pickle=allow_pickle)


def savez(file: str | os.PathLike[str] | Any, *args: Any, **kwds: Any) -> None:
    """Write several tensors to one ``.npz`` file (positional ones as ``arr_0``, ``arr_1``, …,
    keyword ones by their names), as ``np.savez``."""
    np.savez(file, *map(_array, args), **{k: _array(v) for k, v in kwds.items()})


def savez_compressed(file: str | os.PathLike[str] | Any, *args: Any, **kwds: Any) -> None:
    """:func:`savez`, compressed."""
    np.savez_compressed(file, *map(_array, args), **{k: _array(v) for k, v in kwds.items()})


class NpzTensors:
    """The arrays of an ``.npz`` file, each read as a tensor when first asked for (by
    ``files`` name, as numpy's ``NpzFile``); a context manager that closes the file.

    >>> import pypto as pto, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "w.npz")
    >>> pto.savez(path, w=pto.ones((2, 2)), b=pto.zeros(2))
    >>> with pto.load(path) as f:
    ...     f.files, f["b"]
    (['w', 'b'], Tensor([0., 0.], dtype=float32))
    """

    def __init__(self, npz: Any) -> None:
        self._npz = npz
        self.files: list[str] = list(npz.files)

    def __getitem__(self, key: str) -> Any:
        return _tensor(self._npz[key])

    def __contains__(self, key: object) -> bool:
        return key in self.files

    def __iter__(self) -> Any:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def keys(self) -> list[str]:
        return list(self.files)

    def close(self) -> None:
        self._npz.close()

    def __enter__(self) -> NpzTensors:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"NpzTensors({self.files})"


def _tensor(a: Any) -> Any:
    """An array read from a file as a tensor: ``V2`` is bfloat16 (numpy wrote it as bytes);
    a dtype pypto has no tensor for (strings, objects) stays a numpy array, as in JAX."""
    if isinstance(a, np.ndarray) and a.dtype == np.dtype("V2"):
        a = a.view(ml_dtypes.bfloat16)
    try:
        return tensor(a)
    except (TypeError, ValueError):
        return a


def load(file: str | os.PathLike[str] | Any, *args: Any, **kwargs: Any) -> Any:
    """``np.load`` of ``file`` as tensors (``jnp.load``): an ``.npy`` array as a Tensor
    (bfloat16 back from numpy's 2-byte voids; float64 and int64 narrowed as by
    :func:`~pypto.tensor`), an ``.npz`` archive as :class:`NpzTensors`."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        return _tensor(out)
    if hasattr(out, "files"):
        return NpzTensors(out)
    return out
