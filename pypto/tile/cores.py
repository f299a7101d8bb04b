"""Spreading a kernel's grid over fewer cores (``pto.hint(cores=k)``).

The Block level deals a kernel's grid points round-robin to every worker (vector core or
cluster). To keep all but ``k`` of them idle the kernel gets a grid of ``k`` points, one per
core (``%core``), and each point loops over its share of the original points in the same
round-robin order (point ``%core + k * %ci``), recomputing the original grid registers from
it; the last cores take one point fewer when ``k`` does not divide the grid.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.core.errors import SourceLoc, TileError
from pypto.isa.ir import Expr
from pypto.npu.machine import Machine
from pypto.tile.ir import For, Kernel, SOp, Stmt

__all__ = ["spread"]


def workers(m: Machine, dist: str) -> tuple[int, str]:
    """How many workers run a kernel of this distribution, and what they are called."""
    if dist == "aiv":
        return m.clusters * m.aiv_per_cluster, "vector cores"
    return m.clusters, "clusters"


def _point(k: Kernel, cores: int) -> list[Stmt]:
    """The original grid registers of point ``%core + cores * %ci``."""
    lin = Expr.reg("core") + Expr.reg("ci") * cores
    dims = list(k.grid)
    out: list[Stmt] = []
    rest = lin
    for i, (r, _) in enumerate(dims):
        inner = 1
        for _, e in dims[i + 1 :]:
            inner *= e
        if i == len(dims) - 1:
            out.append(SOp("SMOV", r, (rest,)))
        else:
            out.append(SOp("SDIV", r, (rest, Expr.of(inner))))
            out.append(SOp("SMOD", "crest", (rest, Expr.of(inner))))
            rest = Expr.reg("crest")
    return out


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
    points = k.points
    if cores >= points:
        return k
    count: list[Stmt] = []
    if points % cores:
        # core c takes the points c, c + cores, ... below the grid's size
        count = [
            SOp("SDIV", "cn", (Expr.of(points + cores - 1) - Expr.reg("core"), Expr.of(cores)))
        ]
        stop = Expr.reg("cn")
    else:
        stop = Expr.of(points // cores)
    head = _point(k, cores)
    sections = tuple(
        replace(s, body=(*count, For("ci", Expr(), stop, 1, (*head, *s.body)))) for s in k.sections
    )
    return replace(k, grid=(("core", cores),), sections=sections)
