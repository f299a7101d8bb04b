"""Layout primitives: reshape, transpose, broadcast_to, concat, strided slice and take (gather).

They move or select elements without arithmetic, so their results are exact at every level.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import BoundsError, DTypeError, ShapeError
from pypto.ops import rules
from pypto.ops.table import AVal, Op, Shape, register

SliceSpec = tuple[tuple[int, int | None, int], ...]


def _reshape_shape(x: AVal, *, shape: Shape) -> Shape:
    if math.prod(shape) != x.size or any(s < 0 for s in shape):
        raise ShapeError(
            f"cannot reshape {x} ({x.size} elements) to {list(shape)} "
            f"({math.prod(shape)} elements)",
            op="reshape",
            hint="the sizes must multiply to the same count; use -1 for one inferred dim",
        )
    return shape


RESHAPE = register(
    Op(
        name="reshape",
        kind="layout",
        doc="same elements in row-major order, new shape",
        shape_rule=_reshape_shape,
        dtype_rule=lambda x, **p: x.dtype,
        impl=lambda x, *, shape: x.reshape(shape),
        jax_impl=lambda x, *, shape: jnp.reshape(x, shape),
        cost_rule=rules.movement_cost,
    )
)


def _transpose_shape(x: AVal, *, perm: tuple[int, ...]) -> Shape:
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(
            f"perm {list(perm)} is not a permutation of the {x.ndim} axes of {x}",
            op="transpose",
            hint=f"give each axis in 0..{x.ndim - 1} once",
        )
    return tuple(x.shape[p] for p in perm)


TRANSPOSE = register(
    Op(
        name="transpose",
        kind="layout",
        doc="permute axes",
        shape_rule=_transpose_shape,
        dtype_rule=lambda x, **p: x.dtype,
        impl=lambda x, *, perm: np.transpose(x, perm),
        jax_impl=lambda x, *, perm: jnp.transpose(x, perm),
        cost_rule=rules.movement_cost,
    )
)


def _broadcast_shape(x: AVal, *, shape: Shape) -> Shape:
    ok = len(shape) >= x.ndim and all(
        s in (1, t) for s, t in zip(x.shape, shape[len(shape) - x.ndim :], strict=True)
    )
    if not ok:
        raise ShapeError(
            f"cannot broadcast {x} to {list(shape)}",
            op="broadcast_to",
            hint="each dim must equal the target's or be 1, aligned from the right",
        )
    return shape


BROADCAST_TO = register(
    Op(
        name="broadcast_to",
        kind="layout",
        doc="repeat size-1 dims (and add leading dims) to reach a shape",
        shape_rule=_broadcast_shape,
        dtype_rule=lambda x, **p: x.dtype,
        impl=lambda x, *, shape: np.broadcast_to(x, shape),
        jax_impl=lambda x, *, shape: jnp.broadcast_to(x, shape),
        cost_rule=rules.movement_cost,
    )
)


def _concat_shape(*xs: AVal, axis: int) -> Shape:
    if not xs:
        raise ShapeError("needs at least one tensor", op="concat")
    x0 = xs[0]
    if x0.ndim == 0:
        raise ShapeError(f"cannot concatenate 0-d tensors {rules.show(xs)}", op="concat")
    a = rules.normalize_axis("concat", axis, x0.ndim, x0)
    for x in xs[1:]:
        if x.ndim != x0.ndim or any(
            s != t for i, (s, t) in enumerate(zip(x.shape, x0.shape, strict=True)) if i != a
        ):
            raise ShapeError(
                f"shapes {rules.show(xs)} differ outside axis {axis}",
                op="concat",
                hint="all dims but the concatenation axis must match",
            )
    return (*x0.shape[:a], sum(x.shape[a] for x in xs), *x0.shape[a + 1 :])


CONCAT = register(
    Op(
        name="concat",
        kind="layout",
        doc="join tensors along an existing axis",
        shape_rule=_concat_shape,
        dtype_rule=lambda *xs, **p: rules.same_dtype("concat", *xs),
        impl=lambda *xs, axis: np.concatenate(xs, axis=axis),
        jax_impl=lambda *xs, axis: jnp.concatenate(xs, axis=axis),
        cost_rule=rules.movement_cost,
    )
)


def slice_length(start: int, stop: int | None, step: int) -> int:
    return len(range(start, -1 if stop is None else stop, step))


def _slice_shape(x: AVal, *, index: SliceSpec) -> Shape:
    if len(index) != x.ndim:
        raise ShapeError(f"slice spec has {len(index)} dims for {x}", op="slice")
    out = []
    for (start, stop, step), n in zip(index, x.shape, strict=True):
        if step == 0:
            raise ShapeError("slice step cannot be zero", op="slice")
        if not (0 <= start <= n and (stop is None or -1 <= stop <= n)):
            raise ShapeError(f"normalized slice {start}:{stop}:{step} outside {x}", op="slice")
        out.append(slice_length(start, stop, step))
    return tuple(out)


def _slice_impl(x: np.ndarray, *, index: SliceSpec) -> np.ndarray:
    return x[tuple(slice(a, b, c) for a, b, c in index)]


def _slice_jax(x: Any, *, index: SliceSpec) -> Any:
    return x[tuple(slice(a, b, c) for a, b, c in index)]


SLICE = register(
    Op(
        name="slice",
        kind="layout",
        doc="strided window (start, stop, step per dim; negative steps allowed)",
        shape_rule=_slice_shape,
        dtype_rule=lambda x, **p: x.dtype,
        impl=_slice_impl,
        jax_impl=_slice_jax,
        cost_rule=rules.movement_cost,
    )
)


def _take_shape(x: AVal, idx: AVal, *, axis: int) -> Shape:
    a = rules.normalize_axis("take", axis, x.ndim, x)
    return x.shape[:a] + idx.shape + x.shape[a + 1 :]


def _take_dtype(x: AVal, idx: AVal, *, axis: int) -> dt.DType:
    if not idx.dtype.is_integer:
        raise DTypeError(
            f"indices must be integers, got {rules.show((x, idx))}",
            op="take",
            hint="cast the indices with .astype(pto.int32)",
        )
    return x.dtype


def _take_impl(x: np.ndarray, idx: np.ndarray, *, axis: int) -> np.ndarray:
    n = x.shape[axis]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = int(idx.max()) if idx.max() >= n else int(idx.min())
        raise BoundsError(
            f"index {bad} is out of range for axis {axis} of size {n} "
            f"(tensor {AVal(x.shape, dt.from_numpy(x.dtype))}, "
            f"indices {AVal(idx.shape, dt.from_numpy(idx.dtype))})",
            op="take",
            hint=f"indices must lie in [{-n}, {n})",
        )
    return np.take(x, idx, axis=axis)


def _take_jax(x: Any, idx: Any, *, axis: int) -> Any:
    n = x.shape[axis]
    return jnp.take(x, jnp.where(idx < 0, idx + n, idx), axis=axis, mode="clip")


TAKE = register(
    Op(
        name="take",
        kind="layout",
        doc="gather slices of x along axis at integer indices (negative indices wrap; out of "
        "range: an error eagerly, clamped in compiled code, as in JAX)",
        shape_rule=_take_shape,
        dtype_rule=_take_dtype,
        impl=_take_impl,
        jax_impl=_take_jax,
        cost_rule=rules.movement_cost,
    )
)


PadConfig = tuple[tuple[int, int, int], ...]


def _pad_shape(x: AVal, *, config: PadConfig, value: float = 0) -> Shape:
    if len(config) != x.ndim:
        raise ShapeError(f"pad config has {len(config)} dims for {x}", op="lax_pad")
    if any(p < 0 for dim in config for p in dim):
        raise ShapeError(
            f"negative padding {list(config)} for {x}",
            op="lax_pad",
            hint="low, high and interior padding are >= 0; crop with a slice",
        )
    return tuple(
        lo + hi + n + max(n - 1, 0) * mid for (lo, hi, mid), n in zip(config, x.shape, strict=True)
    )


def _pad_impl(x: np.ndarray, *, config: PadConfig, value: float = 0) -> np.ndarray:
    shape = tuple(
        lo + hi + n + max(n - 1, 0) * mid for (lo, hi, mid), n in zip(config, x.shape, strict=True)
    )
    out = np.full(shape, value, x.dtype)
    out[
        tuple(
            slice(lo, lo + n + max(n - 1, 0) * mid, mid + 1)
            for (lo, _, mid), n in zip(config, x.shape, strict=True)
        )
    ] = x
    return out


def _pad_jax(x: Any, *, config: PadConfig, value: float = 0) -> Any:
    # lax, because interior padding has no jax.numpy form.
    return jax.lax.pad(x, jnp.asarray(value, x.dtype), config)


PAD = register(
    Op(
        name="lax_pad",
        kind="layout",
        doc="value (default 0) around (low, high) and between (interior) elements, per dim, "
        "as jax.lax.pad",
        shape_rule=_pad_shape,
        dtype_rule=lambda x, **p: x.dtype,
        impl=_pad_impl,
        jax_impl=_pad_jax,
        cost_rule=rules.movement_cost,
    )
)
