"""``jax.nn.initializers``: weight initializers, each a factory of ``init(seed, shape, dtype)``.

pypto's random numbers come from an integer seed (:mod:`pypto.random`, Philox), not a JAX
key, so the values differ from JAX's; the distributions are JAX's: the same fans (a
convolution kernel's receptive field counts), scales, truncation and orthogonality.

>>> import pypto as pto
>>> init = pto.nn.initializers.glorot_uniform()
>>> w = init(0, (256, 128))
>>> w.shape, w.dtype, bool(abs(w).max() <= (6 / (256 + 128)) ** 0.5)
((256, 128), float32, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import DTypeError, ShapeError
from pypto.eager.tensor import Tensor, _wrap

__all__ = [
    "Initializer",
    "constant",
    "delta_orthogonal",
    "glorot_normal",
    "glorot_uniform",
    "he_normal",
    "he_uniform",
    "kaiming_normal",
    "kaiming_uniform",
    "lecun_normal",
    "lecun_uniform",
    "normal",
    "ones",
    "orthogonal",
    "truncated_normal",
    "uniform",
    "variance_scaling",
    "xavier_normal",
    "xavier_uniform",
    "zeros",
]

Initializer = Callable[..., Tensor]
"""``init(seed, shape, dtype=float32) -> Tensor``"""

# the standard deviation of a unit normal truncated to [-2, 2] (JAX's constant)
_TRUNCATED_STD = 0.87962566103423978


def _rng(seed: Any) -> np.random.Generator:
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool):
        raise DTypeError(
            f"an initializer takes an integer seed, got {type(seed).__name__}",
            op="initializers",
            hint="pass a seed such as 0; pypto's random numbers come from seeds, not JAX keys",
        )
    return np.random.Generator(np.random.Philox(int(seed)))


def _dtype(d: Any) -> dt.DType:
    out = dt.float32 if d is None else dt.dtype(d)
    if not out.is_floating:
        raise DTypeError(f"weights are floats, got dtype {out}", op="initializers")
    return out


def _shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, int | np.integer) else tuple(int(s) for s in shape)


def _out(a: np.ndarray, d: dt.DType) -> Tensor:
    return _wrap(np.asarray(a, np.float32).astype(d.np))


def _truncated(
    rng: np.random.Generator, lower: float, upper: float, shape: tuple[int, ...]
) -> np.ndarray:
    """Unit normal samples in ``[lower, upper]``: those outside drawn again."""
    out = rng.standard_normal(shape, dtype=np.float32)
    bad = (out < lower) | (out > upper)
    while bad.any():
        out[bad] = rng.standard_normal(int(bad.sum()), dtype=np.float32)
        bad = (out < lower) | (out > upper)
    return out


def zeros(seed: Any, shape: Any, dtype: Any = None) -> Tensor:
    """Zeros (the seed is ignored), as ``jax.nn.initializers.zeros``."""
    return _out(np.zeros(_shape(shape), np.float32), _dtype(dtype))


def ones(seed: Any, shape: Any, dtype: Any = None) -> Tensor:
    """Ones (the seed is ignored)."""
    return _out(np.ones(_shape(shape), np.float32), _dtype(dtype))


def constant(value: Any, dtype: Any = None) -> Initializer:
    """An initializer that fills with ``value``."""

    def init(seed: Any, shape: Any, dtype: Any = dtype) -> Tensor:
        return _out(np.full(_shape(shape), value, np.float32), _dtype(dtype))

    return init


def uniform(scale: float = 1e-2, dtype: Any = None) -> Initializer:
    """Uniform on ``[0, scale)``."""

    def init(seed: Any, shape: Any, dtype: Any = dtype) -> Tensor:
        return _out(_rng(seed).random(_shape(shape), dtype=np.float32) * scale, _dtype(dtype))

    return init


def normal(stddev: float = 1e-2, dtype: Any = None) -> Initializer:
    """Normal with mean 0 and ``stddev``."""

    def init(seed: Any, shape: Any, dtype: Any = dtype) -> Tensor:
        a = _rng(seed).standard_normal(_shape(shape), dtype=np.float32) * stddev
        return _out(a, _dtype(dtype))

    return init


def truncated_normal(
    stddev: float = 1e-2, dtype: Any = None, lower: float = -2.0, upper: float = 2.0
) -> Initializer:
    """``stddev`` times a unit normal truncated to ``[lower, upper]``."""

    def init(seed: Any, shape: Any, dtype: Any = dtype) -> Tensor:
        return _out(_truncated(_rng(seed), lower, upper, _shape(shape)) * stddev, _dtype(dtype))

    return init


def _axes(v: int | Sequence[int]) -> tuple[int, ...]:
    return (v,) if isinstance(v, int) else tuple(v)


def _fans(
    shape: tuple[int, ...], in_axis: Any, out_axis: Any, batch_axis: Any
) -> tuple[float, float]:
    """JAX's fans of a weight: the in and out axes' sizes, each times the receptive field
    (every axis that is none of in, out and batch)."""
    if in_axis == -2 and len(shape) <= 1:
        raise ShapeError(
            f"a weight of shape {shape} has no in and out axes",
            op="initializers",
            hint="give in_axis= and out_axis= for a 1-d weight, or use a 2-d shape",
        )
    size = math.prod
    ins = size(shape[a] for a in _axes(in_axis))
    outs = size(shape[a] for a in _axes(out_axis))
    batch = size(shape[a] for a in _axes(batch_axis))
    field = size(shape) / ins / outs / batch
    return ins * field, outs * field


def variance_scaling(
    scale: float,
    mode: str,
    distribution: str,
    in_axis: int | Sequence[int] = -2,
    out_axis: int | Sequence[int] = -1,
    batch_axis: int | Sequence[int] = (),
    dtype: Any = None,
) -> Initializer:
    """Samples with variance ``scale / n``, ``n`` the fan in, out, their mean
    (``"fan_avg"``) or geometric mean (``"fan_geo_avg"``): ``"truncated_normal"`` (to ±2
    standard deviations, rescaled so the variance holds), ``"normal"`` or ``"uniform"`` (on
    ``±sqrt(3 · variance)``), as ``jax.nn.initializers.variance_scaling``."""
    if mode not in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
        raise ShapeError(
            f"mode {mode!r} is not fan_in, fan_out, fan_avg or fan_geo_avg", op="variance_scaling"
        )
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ShapeError(
            f"distribution {distribution!r} is not truncated_normal, normal or uniform",
            op="variance_scaling",
        )

    def init(seed: Any, shape: Any, dtype: Any = dtype) -> Tensor:
        shp = _shape(shape)
        fan_in, fan_out = _fans(shp, in_axis, out_axis, batch_axis)
        n = {
            "fan_in": fan_in,
            "fan_out": fan_out,
            "fan_avg": (fan_in + fan_out) / 2,
            "fan_geo_avg": (fan_in * fan_out) ** 0.5,
        }[mode]
        var = scale / n
        rng = _rng(seed)
        if distribution == "truncated_normal":
            a = _truncated(rng, -2.0, 2.0, shp) * np.float32(math.sqrt(var) / _TRUNCATED_STD)
        elif distribution == "normal":
            a = rng.standard_normal(shp, dtype=np.float32) * np.float32(math.sqrt(var))
        else:
            a = (rng.random(shp, dtype=np.float32) * 2 - 1) * np.float32(math.sqrt(3 * var))
        return _out(a, _dtype(dtype))

    return init


def _scaled(scale: float, mode: str, dist: str) -> Callable[..., Initializer]:
    def make(
        in_axis: int | Sequence[int] = -2,
        out_axis: int | Sequence[int] = -1,
        batch_axis: int | Sequence[int] = (),
        dtype: Any = None,
    ) -> Initializer:
        return variance_scaling(scale, mode, dist, in_axis, out_axis, batch_axis, dtype)

    return make


glorot_uniform = xavier_uniform = _scaled(1.0, "fan_avg", "uniform")
glorot_normal = xavier_normal = _scaled(1.0, "fan_avg", "truncated_normal")
lecun_uniform = _scaled(1.0, "fan_in", "uniform")
lecun_normal = _scaled(1.0, "fan_in", "truncated_normal")
he_uniform = kaiming_uniform = _scaled(2.0, "fan_in", "uniform")
he_normal = kaiming_normal = _scaled(2.0, "fan_in", "truncated_normal")
for _f, _doc in (
    (glorot_uniform, "variance_scaling(1, 'fan_avg', 'uniform') (Glorot and Bengio)"),
    (glorot_normal, "variance_scaling(1, 'fan_avg', 'truncated_normal')"),
    (lecun_uniform, "variance_scaling(1, 'fan_in', 'uniform')"),
    (lecun_normal, "variance_scaling(1, 'fan_in', 'truncated_normal')"),
    (he_uniform, "variance_scaling(2, 'fan_in', 'uniform') (He et al.)"),
    (he_normal, "variance_scaling(2, 'fan_in', 'truncated_normal')"),
):
    _f.__doc__ = f"``{_doc}``, as ``jax.nn.initializers``."


def _orthogonal_matrix(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """A ``rows x cols`` matrix with orthonormal rows or columns (whichever are fewer): the Q
    of a normal matrix's QR, its signs fixed by R's diagonal (uniform over the group)."""
    a = rng.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    return q if rows >= cols else q.T


def orthogonal(scale: float = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """``scale`` times a matrix with orthonormal columns (or rows, when there are fewer of
    them), the weight's other axes flattened into the rows."""

    def init(seed: Any, shape: Any, dtype: Any = dtype) -> Tensor:
        shp = _shape(shape)
        if len(shp) < 2:
            raise ShapeError(f"orthogonal weights need 2 axes or more, got {shp}", op="orthogonal")
        if 0 in shp:
            return _out(np.zeros(shp, np.float32), _dtype(dtype))
        cols = shp[column_axis]
        q = _orthogonal_matrix(_rng(seed), math.prod(shp) // cols, cols)
        rest = tuple(np.delete(np.array(shp), column_axis))
        q = np.moveaxis(q.reshape(*rest, cols), -1, column_axis)
        return _out(scale * q, _dtype(dtype))

    return init


def delta_orthogonal(scale: float = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """A convolution kernel (3, 4 or 5 axes, in-features ≤ out-features) that is an
    orthogonal matrix at the window's centre and zero elsewhere (Xiao et al.)."""

    def init(seed: Any, shape: Any, dtype: Any = dtype) -> Tensor:
        shp = _shape(shape)
        if len(shp) not in (3, 4, 5):
            raise ShapeError(
                f"delta_orthogonal needs 3, 4 or 5 axes, got {shp}", op="delta_orthogonal"
            )
        if shp[-1] < shp[-2]:
            raise ShapeError(
                f"in-features {shp[-2]} exceed out-features {shp[-1]}", op="delta_orthogonal"
            )
        w = np.zeros(shp, np.float32)
        centre = tuple((k - 1) // 2 for k in shp[:-2])
        w[centre] = orthogonal(scale, column_axis, dt.float32)(seed, shp[-2:]).numpy()
        return _out(w, _dtype(dtype))

    return init
