"""The matmul primitive: numpy ``matmul`` semantics (1-d operands, broadcast batch dims).

Accumulation is float32 for float16/bfloat16 (as in the cube unit's L0C) and int32 for int8,
rounded once to the result dtype.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import ShapeError
from pypto.ops import rules
from pypto.ops.table import AVal, Cost, Op, Shape, register

_ALLOWED = (dt.float32, dt.float16, dt.bfloat16, dt.int32, dt.int8)
_F32 = np.dtype(np.float32)


def _shape(a: AVal, b: AVal) -> Shape:
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            f"operands must be at least 1-d, got {rules.show((a, b))}",
            op="matmul",
            hint="use mul for scaling by a scalar",
        )
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if ka != kb:
        raise ShapeError(
            f"contraction dimensions differ: {a} @ {b} contracts {ka} with {kb}",
            op="matmul",
            hint="the last dim of the left operand must equal the second-to-last of the right"
            + (" (did you mean to transpose the right operand?)" if b.shape[-1] == ka else ""),
        )
    batch_a = a.shape[:-2]
    batch_b = b.shape[:-2]
    try:
        batch = (
            rules.broadcast_shapes("matmul", AVal(batch_a, a.dtype), AVal(batch_b, b.dtype))
            if (batch_a or batch_b)
            else ()
        )
    except ShapeError:
        raise ShapeError(
            f"batch dimensions {list(batch_a)} and {list(batch_b)} of {a} @ {b} cannot be "
            "broadcast together",
            op="matmul",
            hint="make the leading (batch) dims equal or 1",
        ) from None
    m = (a.shape[-2],) if a.ndim >= 2 else ()
    n = (b.shape[-1],) if b.ndim >= 2 else ()
    return batch + m + n


def _dtype(a: AVal, b: AVal) -> dt.DType:
    d = rules.same_dtype("matmul", a, b)
    rules.check_dtype("matmul", (a, b), _ALLOWED, "matmul is not defined on bool tensors")
    return d


def _impl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = a.dtype
    if d in (dt.float16.np, dt.bfloat16.np):
        return np.matmul(a.astype(_F32), b.astype(_F32)).astype(d)
    if d == np.int8:
        return np.matmul(a.astype(np.int32), b.astype(np.int32)).astype(np.int8)
    return np.asarray(np.matmul(a, b))


def _cost(a: AVal, b: AVal, *, out: AVal) -> Cost:
    k = a.shape[-1]
    return Cost(
        flops=2 * out.size * k, unit="cube", bytes_in=a.nbytes + b.nbytes, bytes_out=out.nbytes
    )


def _jax(a: Any, b: Any) -> Any:
    if a.dtype in (jnp.float16, jnp.bfloat16):
        return jnp.matmul(a, b, preferred_element_type=jnp.float32).astype(a.dtype)
    return jnp.matmul(a, b)


MATMUL = register(
    Op(
        name="matmul",
        kind="matmul",
        doc="matrix product with float32 accumulation (int32 for int8)",
        shape_rule=_shape,
        dtype_rule=_dtype,
        impl=_impl,
        jax_impl=_jax,
        cost_rule=_cost,
        dtypes=_ALLOWED,
    )
)
