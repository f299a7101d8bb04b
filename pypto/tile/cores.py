"""Dealing a kernel's grid to fewer cores (``pto.hint(cores=k)``).

The Block level deals a kernel's grid points round-robin to every worker (vector core or
cluster). A kernel with ``cores=k`` is dealt to the first ``k`` workers only, in the same
order (points ``w, w + k, ...`` to worker ``w``; a kernel with a ``cost`` axis keeps its
costliest-first dealing over the ``k``); the other workers skip its grid loop. The grid and
the kernel's code are unchanged: no loop level is added, so a kernel keeps its flags' event
ids.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.core.errors import SourceLoc, TileError
from pypto.npu.machine import Machine
from pypto.tile.ir import Kernel

__all__ = ["spread"]


def workers(m: Machine, dist: str) -> tuple[int, str]:
    """How many workers run a kernel of this distribution, and what they are called."""
    if dist == "aiv":
        return m.clusters * m.aiv_per_cluster, "vector cores"
    return m.clusters, "clusters"


def spread(k: Kernel, cores: int, m: Machine, loc: SourceLoc | None) -> Kernel:
    """``k`` run by ``cores`` workers only (unchanged when its grid has no more points)."""
    n, what = workers(m, k.dist)
    if cores > n:
        raise TileError(
            f"cores={cores} for kernel @{k.name}, but {m.name} has {n} {what}",
            op="hint",
            loc=loc,
            hint=f"use cores <= {n}",
        )
    if cores >= k.points:
        return k
    return replace(k, cores=cores)
