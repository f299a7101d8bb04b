"""What the distributions share: promotion of their arguments, as ``promote_args_inexact``."""

from __future__ import annotations

from typing import Any

from pypto.ops import api


def args(name: str, *xs: Any) -> list[Any]:
    """``xs`` promoted together to one float dtype (integers to float32), for ``name``."""
    return api.promote(name, xs, inexact=True)
