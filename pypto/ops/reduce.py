"""Reduction primitives: sum, max, min over axes, and argmax (the running reductions are in
:mod:`pypto.ops.scan`).

Float16/bfloat16 sums accumulate in float32 and round once; integer and bool sums accumulate in
int32 (JAX's default integer), as ``jnp.sum`` does.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import ShapeError
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
