"""Pytrees of results compared leaf by leaf with the tolerance table."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from pypto.reference import compare


def assert_close(ours: Any, theirs: Any, k: int = 1) -> None:
    """Every leaf of ``ours`` within the tolerance of a ``k``-long sum of ``theirs``."""
    a = jax.tree_util.tree_leaves(jax.tree_util.tree_map(np.asarray, ours))
    b = jax.tree_util.tree_leaves(jax.tree_util.tree_map(np.asarray, theirs))
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        c = compare(f"leaf {i}", x, np.asarray(y).astype(x.dtype), k=k)
        assert c.ok, str(c)
