"""Deterministic random tensors: the same seed gives the same values on every machine.

>>> import pypto as pto
>>> a = pto.random.normal(0, (2, 3))
>>> b = pto.random.normal(0, (2, 3))
>>> bool((a == b).numpy().all())
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import DTypeError
from pypto.eager.tensor import Tensor, _shape, _wrap

__all__ = ["normal", "uniform"]


def _rng(seed: int) -> np.random.Generator:
    # Philox is a counter-based generator: its stream depends only on the seed.
    return np.random.Generator(np.random.Philox(seed))


def _float(dtype: Any, op: str) -> dt.DType:
    d = dt.dtype(dtype)
    if not d.is_floating:
        raise DTypeError(f"random values need a float dtype, got {d}", op=op)
    return d


def normal(
    seed: int, shape: Any = (), dtype: Any = dt.float32, mean: float = 0.0, std: float = 1.0
) -> Tensor:
    """Samples of a normal distribution N(mean, std²), rounded to ``dtype``."""
    d = _float(dtype, "random.normal")
    a = _rng(seed).standard_normal(_shape(shape), dtype=np.float32) * std + mean
    return _wrap(np.asarray(a, np.float32).astype(d.np))


def uniform(
    seed: int, shape: Any = (), dtype: Any = dt.float32, minval: float = 0.0, maxval: float = 1.0
) -> Tensor:
    """Samples of a uniform distribution on [minval, maxval), rounded to ``dtype``."""
    d = _float(dtype, "random.uniform")
    a = _rng(seed).random(_shape(shape), dtype=np.float32) * (maxval - minval) + minval
    return _wrap(np.asarray(a, np.float32).astype(d.np))
