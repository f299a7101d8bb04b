"""Compare a pypto result with its JAX reference, within the tolerance table (DESIGN §6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.tolerance import coarser, tolerance


@dataclass(frozen=True)
class Comparison:
    """One output compared: the worst absolute and relative error against the allowed ones."""

    name: str
    dtype: dt.DType
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    rtol: float
    atol: float
    ok: bool

    def __str__(self) -> str:
        mark = "ok  " if self.ok else "FAIL"
        shape = ",".join(map(str, self.shape))
        return (
            f"{mark} {self.name:<24} {self.dtype.short}[{shape}]  max|Δ| {self.max_abs:.3g}  "
            f"max rel {self.max_rel:.3g}  (rtol {self.rtol:.3g}, atol {self.atol:.3g})"
        )


def compare(
    name: str,
    actual: Any,
    expected: Any,
    k: int = 1,
    scale: float | None = None,
    precision: dt.DType | None = None,
) -> Comparison:
    """Compare ``actual`` (a pypto result) with ``expected`` (JAX's), elementwise.

    A value passes when ``|a - e| <= atol·scale + rtol·|e|`` with ``scale`` the largest
    magnitude of the reference (so that results cancelling to ~0 are judged fairly); NaN must
    meet NaN and infinities must match exactly. When the result sums ``k`` terms that may
    cancel, pass the terms' magnitude as ``scale``: rounding errors grow with the terms, not
    with what is left of their sum (the larger of the two is used). ``precision`` is a less
    precise float dtype the result was rounded to on its way (see
    :func:`pypto.reference.jax_bridge.precisions`): its tolerance applies instead.

    >>> import pypto as pto
    >>> compare("y", pto.tensor([1.0, 2.0]), np.array([1.0, 2.0000001])).ok
    True
    """
    a = np.asarray(actual)
    e = np.asarray(expected)
    d = dt.from_numpy(a.dtype)
    rtol, atol = tolerance(d if precision is None else coarser(precision, d), k)
    if a.shape != e.shape:
        return Comparison(name, d, a.shape, np.inf, np.inf, rtol, atol, False)
    af = a.astype(np.float64)
    ef = e.astype(np.float64)
    nan_ok = np.array_equal(np.isnan(af), np.isnan(ef))
    inf_ok = np.array_equal(
        np.where(np.isinf(af), np.sign(af), 0), np.where(np.isinf(ef), np.sign(ef), 0)
    )
    fin = np.isfinite(af) & np.isfinite(ef)
    diff = np.abs(af - ef)[fin]
    scale = max(float(np.abs(ef[fin]).max()) if diff.size else 0.0, scale or 0.0)
    max_abs = float(diff.max()) if diff.size else 0.0
    # relative to the reference, but not below the tolerance's absolute floor: an output that
    # cancels to ~0 is judged against the scale of the tensor, not against zero
    floor = max(atol * scale, np.finfo(np.float64).tiny)
    rel = diff / np.maximum(np.abs(ef[fin]), floor)
    max_rel = float(rel.max()) if rel.size else 0.0
    within = bool(np.all(diff <= atol * max(scale, 1e-30) + rtol * np.abs(ef[fin])))
    return Comparison(name, d, a.shape, max_abs, max_rel, rtol, atol, nan_ok and inf_ok and within)
