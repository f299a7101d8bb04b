"""The one tolerance table: how far a result may be from the JAX reference (DESIGN §6).

Elementwise results agree to about one unit in the last place of their dtype; sums over ``k``
terms may differ in summation order, so their tolerance grows with ``√k``.
"""

from __future__ import annotations

import math

from pypto import dtypes as dt

RTOL: dict[str, float] = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 1e-2}
# Absolute floor relative to the magnitude of the data, for results that cancel to near zero.
ATOL: dict[str, float] = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}


def tolerance(dtype: dt.DType, k: int = 1) -> tuple[float, float]:
    """(rtol, atol) for results of ``dtype`` that sum ``k`` terms; integers and bools are exact.

    >>> tolerance(dt.float16, k=64)
    (0.008, 0.008)
    """
    if not dtype.is_floating:
        return (0.0, 0.0)
    s = math.sqrt(max(k, 1))
    return (RTOL[dtype.name] * s, ATOL[dtype.name] * s)


def coarser(a: dt.DType, b: dt.DType) -> dt.DType:
    """The less precise of two float dtypes (the one with the larger tolerance); ``b`` when
    either is not a float.

    >>> coarser(dt.float16, dt.float32).name
    'float16'
    """
    if a.is_floating and b.is_floating and RTOL[a.name] > RTOL[b.name]:
        return a
    return b
