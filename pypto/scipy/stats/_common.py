"""What the distributions share: promotion of their arguments, as ``promote_args_inexact``."""

from __future__ import annotations

from typing import Any

from pypto.ops import api, composite


def args(name: str, *xs: Any) -> list[Any]:
    """``xs`` promoted together to one float dtype (integers to float32), for ``name``."""
    return api.promote(name, xs, inexact=True)


def outside_unit(q: Any) -> Any:
    """Where a probability ``q`` is NaN or outside ``[0, 1]`` (a quantile is NaN there)."""
    out = composite.logical_or(api.less(q, 0.0), api.greater(q, 1.0))
    return composite.logical_or(composite.isnan(q), out)


def standardized(name: str, x: Any, loc: Any, scale: Any) -> tuple[Any, Any, Any]:
    """``(x - loc) / scale``, ``scale`` promoted, and where ``scale > 0``."""
    x, loc, scale = args(name, x, loc, scale)
    return api.div(api.sub(x, loc), scale), scale, api.greater(scale, 0.0)
