"""Reduction primitives: sum, max, min over axes, and argmax; and ``scan_add``, the running sum
along the last axis that ``cumsum`` is built on.

Float16/bfloat16 sums accumulate in float32 and round once; integer and bool sums accumulate in
int32 (JAX's default integer), as ``jnp.sum`` does.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import DTypeError, ShapeError
from pypto.ops import rules
from pypto.ops.table import AVal, Cost, Op, Shape, register

_F32 = np.dtype(np.float32)
_LOWP = (dt.float16.np, dt.bfloat16.np)


def reduced_shape(x: AVal, axes: tuple[int, ...], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    return tuple(s for i, s in enumerate(x.shape) if i not in axes)


def _shape(name: str, needs_nonempty: bool) -> Any:
    def rule(x: AVal, *, axes: tuple[int, ...], keepdims: bool) -> Shape:
        for a in axes:
            rules.normalize_axis(name, a, x.ndim, x)
        if needs_nonempty and any(x.shape[a] == 0 for a in axes):
            raise ShapeError(
                f"cannot reduce {x} over a zero-size axis {axes}: the result has no identity",
                op=name,
                hint="reduce over non-empty axes, or use sum",
            )
        return reduced_shape(x, axes, keepdims)

    return rule


def _sum_dtype(x: AVal, **params: Any) -> dt.DType:
    return x.dtype if x.dtype.is_floating else dt.int32


_add_reduce: Any = np.add.reduce
"""The ufunc's reduce, not ``np.sum``: a warning (inf - inf) is then raised from this module,
where pypto's filter keeps it quiet as JAX does, not from numpy's wrapper."""


def _sum_impl(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    d = x.dtype
    if d in _LOWP:
        return _add_reduce(x, axis=axes, dtype=_F32, keepdims=keepdims).astype(d)
    if d.kind in "bi":
        return np.asarray(_add_reduce(x, axis=axes, dtype=np.int32, keepdims=keepdims))
    return np.asarray(_add_reduce(x, axis=axes, keepdims=keepdims))


def _sum_jax(x: Any, *, axes: tuple[int, ...], keepdims: bool) -> Any:
    return jnp.sum(x, axis=axes, keepdims=keepdims)


def _reduce_cost(x: AVal, *, out: AVal, **params: Any) -> Cost:
    return Cost(flops=x.size, unit="vector", bytes_in=x.nbytes, bytes_out=out.nbytes)


SUM = register(
    Op(
        name="sum",
        kind="reduce",
        doc="sum over axes (float16/bfloat16 accumulate in float32; ints and bools in int32)",
        shape_rule=_shape("sum", False),
        dtype_rule=_sum_dtype,
        impl=_sum_impl,
        jax_impl=_sum_jax,
        cost_rule=_reduce_cost,
    )
)


def _extreme(name: str, fn: Any, jfn: Any, doc: str) -> Op:
    def impl(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        return np.asarray(fn(x, axis=axes, keepdims=keepdims))

    def jax_impl(x: Any, *, axes: tuple[int, ...], keepdims: bool) -> Any:
        return jfn(x, axis=axes, keepdims=keepdims)

    return register(
        Op(
            name=name,
            kind="reduce",
            doc=doc,
            shape_rule=_shape(name, True),
            dtype_rule=lambda x, **p: x.dtype,
            impl=impl,
            jax_impl=jax_impl,
            cost_rule=_reduce_cost,
        )
    )


MAX = _extreme("max", np.max, jnp.max, "maximum over axes (NaN propagates)")
MIN = _extreme("min", np.min, jnp.min, "minimum over axes (NaN propagates)")


def _argmax_shape(x: AVal, *, axis: int | None, keepdims: bool) -> Shape:
    if axis is None:
        if x.size == 0:
            raise ShapeError(f"argmax of an empty tensor {x}", op="argmax")
        return (1,) * x.ndim if keepdims else ()
    a = rules.normalize_axis("argmax", axis, x.ndim, x)
    if x.shape[a] == 0:
        raise ShapeError(f"argmax over zero-size axis {axis} of {x}", op="argmax")
    return reduced_shape(x, (a,), keepdims)


def _argmax_impl(x: np.ndarray, *, axis: int | None, keepdims: bool) -> np.ndarray:
    return np.asarray(np.argmax(x, axis=axis, keepdims=keepdims)).astype(np.int32)


def _argmax_jax(x: Any, *, axis: int | None, keepdims: bool) -> Any:
    return jnp.argmax(x, axis=axis, keepdims=keepdims)


ARGMAX = register(
    Op(
        name="argmax",
        kind="reduce",
        doc="index of the first maximum (NaN counts as maximal), int32",
        shape_rule=_argmax_shape,
        dtype_rule=lambda x, **p: dt.int32,
        impl=_argmax_impl,
        jax_impl=_argmax_jax,
        cost_rule=_reduce_cost,
        differentiable=False,
    )
)


def _scan_shape(x: AVal) -> Shape:
    if x.ndim == 0:
        raise ShapeError(
            f"scan_add of a 0-d tensor {x}: it runs along the last axis", op="scan_add"
        )
    return x.shape


def _scan_dtype(x: AVal) -> dt.DType:
    if x.dtype not in (dt.float32, dt.int32):
        raise DTypeError(
            f"scan_add runs on f32 and i32, got {x}",
            op="scan_add",
            hint="pto.cumsum converts the other dtypes",
        )
    return x.dtype


def _scan_impl(x: np.ndarray) -> np.ndarray:
    return np.cumsum(x, axis=-1, dtype=x.dtype)


def _scan_jax(x: Any) -> Any:
    return jnp.cumsum(x, axis=-1)


def _scan_cost(x: AVal, *, out: AVal, **params: Any) -> Cost:
    # the least work a scan needs, one add per element (the kernel does more: a log-step scan)
    return Cost(flops=x.size, unit="vector", bytes_in=x.nbytes, bytes_out=out.nbytes)


SCAN_ADD = register(
    Op(
        name="scan_add",
        kind="scan",
        doc="running sums along the last axis, f32 or i32 (integers wrap): cumsum's core",
        shape_rule=_scan_shape,
        dtype_rule=_scan_dtype,
        impl=_scan_impl,
        jax_impl=_scan_jax,
        cost_rule=_scan_cost,
        dtypes=(dt.float32, dt.int32),
    )
)
