"""Reductions the row kernel cannot take: other axes, several axes, all axes, long rows.

``sum``, ``max``, ``min`` and ``argmax`` keep their row rule (a reduction over the last axis,
fused with its neighbours); when that does not apply, their ``"tile_general"`` rule here looks
at the input as groups of kept and reduced axes (size-1 axes dropped, neighbours merged):

* ``[K, R]`` — the reduced axes are the trailing ones: a row kernel over that 2-D view;
* ``[B, R, C]`` — one reduced group with kept axes after it: a **column reduction**. Each grid
  point owns ``[R/P, tc]`` of one batch: it loads ``[tr, tc]`` tiles, reduces each with
  ``TCOLSUM``/``TCOLMAX``/``TCOLMIN`` and accumulates in a ``[1, tc]`` tile. When batches and
  column tiles are too few to keep every vector core busy, the rows are split into ``P`` parts
  whose partials go to a workspace that a second, small column reduction combines;
* anything else — the kept axes are moved in front with a transpose, then ``[K, R]``.

A row that does not fit UB is split as ``[K, R1, R2]``: a column reduction over ``R1``, then a
row reduction over ``R2``. When no divisor ``R2`` fits (a prime row length, say), rows of the
narrowest divisor from 8 up, or the whole rows, are walked in column chunks by the multi-pass
kernel of :mod:`pypto.tile.longrow`, and their partials reduced after. Sums of
float16/bfloat16 accumulate in float32 and sums of integers and bools in int32 between the
steps, and round once at the end, as the op table's implementation does; max and min of bools
run on int8 (the vector unit takes no bool maths).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import SourceLoc, TileError
from pypto.graph.ir import Eqn, Lit, Var
from pypto.isa.ir import Expr, Space
from pypto.ops.table import AVal, register_rule
from pypto.tile.ir import For, Kernel, Section, Stmt, TileVar, TLoad, TOp, TStore
from pypto.tile.layout import Access, alias, copy, tile_bytes, transpose_into
from pypto.tile.longrow import lower_long_rows
from pypto.tile.lower import (
    KernelRule,
    Lowering,
    RowPlan,
    divisors,
    lower_row_kernel,
    plan_row,
    relayout,
    ub_bytes_needed,
    window,
)

__all__ = ["column_reduce"]

COL_OPS = {"sum": ("TCOLSUM", "TADD"), "max": ("TCOLMAX", "TMAX"), "min": ("TCOLMIN", "TMIN")}


def acc_dtype(op: str, d: dt.DType) -> dt.DType:
    """The dtype partial results are kept in."""
    if op == "sum":
        return dt.float32 if d.is_floating else dt.int32
    return dt.int8 if d is dt.bool_ else d


def _row_eqns(
    lw: Lowering,
    op: str,
    xbuf: str,
    xd: dt.DType,
    K: int,
    R: int,
    out: str,
    od: dt.DType,
    loc: SourceLoc | None,
    partial: bool = False,
) -> tuple[list[Eqn], Var]:
    """``op`` over the rows of ``x`` viewed ``[K, R]`` (then a cast to ``od``) as equations
    over fresh values bound to the buffers: the row kernel lowers them. A ``partial`` sum
    yields its accumulator dtype ``od`` directly (a float16 sum is not rounded to float16)."""
    xv = Var(AVal((K, R), xd))
    lw.var_buf[xv] = xbuf
    if op == "argmax":
        params: tuple[tuple[str, Any], ...] = (("axis", 1), ("keepdims", False))
        mid = dt.int32
    else:
        params = (("axes", (1,)), ("keepdims", False))
        mid = (dt.int32 if not xd.is_floating else xd) if op == "sum" else xd
        if partial:
            mid = od
    ov = Var(AVal((K,), mid))
    eqns = [Eqn(op, (xv,), params, ov, loc)]
    if mid is not od:
        cv = Var(AVal((K,), od))
        eqns.append(Eqn("cast", (ov,), (("dtype", od),), cv, loc))
        ov = cv
    lw.var_buf[ov] = out
    return eqns, ov


def _rows(
    lw: Lowering,
    op: str,
    xbuf: str,
    xd: dt.DType,
    K: int,
    R: int,
    out: str,
    od: dt.DType,
    loc: SourceLoc | None,
) -> None:
    """``op`` over the rows of ``[K, R]``; rows too long for UB go through a column step, or
    through multi-pass row kernels when no divisor of ``R`` fits UB (a prime ``R``)."""
    eqns, ov = _row_eqns(lw, op, xbuf, xd, K, R, out, od, loc)
    plan = plan_row(lw, eqns, {ov})
    assert plan is not None
    limit = lw.machine.ub_bytes * 3 // 4
    if _row_need(plan, op, R) <= limit:
        lower_row_kernel(lw, plan, lw.fresh(op), loc)
        return
    # a row that does not fit: [K, R1, R2] with R2 the widest divisor that does
    fits = [d for d in divisors(R) if 8 <= d < R and _need(lw, op, xd, K, d, od, loc) <= limit]
    if fits:
        r2 = fits[-1]
        if op == "argmax":
            _argmax_split(lw, xbuf, xd, K, R // r2, r2, out, loc)
            return
        ad = acc_dtype(op, xd)
        tmp = lw.new_buffer("part", ad, K * r2)
        column_reduce(lw, op, xbuf, xd, K, R // r2, r2, tmp, ad, loc)
        _rows(lw, op, tmp, ad, K, r2, out, od, loc)
        return
    # Every divisor from 8 up is too wide for UB: rows of the narrowest, R2, are walked in
    # column chunks (R/R2 times the rows to spread over the cores), then their partials are
    # reduced; with no such divisor, the whole rows are. The row kernel's own estimate leaves
    # out the rule's temporaries, so the multi-pass kernel is asked for directly.
    wide = [d for d in divisors(R) if 8 <= d < R]
    if not wide:
        lower_long_rows(lw, plan, lw.fresh(op), loc)
        return
    r2 = wide[0]
    if op == "argmax":
        _argmax_split(lw, xbuf, xd, K, R // r2, r2, out, loc, chunked=True)
        return
    ad = acc_dtype(op, xd)
    tmp = lw.new_buffer("part", ad, K * (R // r2))
    part, pv = _row_eqns(lw, op, xbuf, xd, K * (R // r2), r2, tmp, ad, loc, partial=True)
    pplan = plan_row(lw, part, {pv})
    assert pplan is not None
    lower_long_rows(lw, pplan, lw.fresh(op), loc)
    _rows(lw, op, tmp, ad, K, R // r2, out, od, loc)


def _argmax_split(
    lw: Lowering,
    xbuf: str,
    xd: dt.DType,
    K: int,
    R1: int,
    R2: int,
    out: str,
    loc: SourceLoc | None,
    chunked: bool = False,
) -> None:
    """argmax over rows of ``[K, R1*R2]`` in two row kernels: the maximum and its position in
    each ``R2``-long piece, then the first piece holding its row's maximum (NaN included) and
    that piece's position, picked without a data-dependent address (a select and a sum).
    With ``chunked``, the pieces are too long for UB and the first kernel walks them in
    column chunks."""
    xv = Var(AVal((K * R1, R2), xd))
    mv = Var(AVal((K * R1,), xd))
    iv = Var(AVal((K * R1,), dt.int32))
    lw.var_buf[xv] = xbuf
    lw.var_buf[mv] = lw.new_buffer("pmax", mv.aval.dtype, K * R1)
    lw.var_buf[iv] = lw.new_buffer("parg", dt.int32, K * R1)
    first = [
        Eqn("max", (xv,), (("axes", (1,)), ("keepdims", False)), mv, loc),
        Eqn("argmax", (xv,), (("axis", 1), ("keepdims", False)), iv, loc),
    ]
    plan = plan_row(lw, first, {mv, iv})
    assert plan is not None
    if chunked:
        lower_long_rows(lw, plan, lw.fresh("argmax"), loc)
    else:
        # one row per tile: the row kernel's UB estimate leaves out argmax's temporaries
        cfg = lw.cfg
        lw.cfg = replace(cfg, vec=(1, R2))
        try:
            lower_row_kernel(lw, plan, lw.fresh("argmax"), loc)
        finally:
            lw.cfg = cfg
    m2 = Var(AVal((K, R1), mv.aval.dtype))
    i2 = Var(AVal((K, R1), dt.int32))
    lw.var_buf[m2], lw.var_buf[i2] = lw.var_buf[mv], lw.var_buf[iv]
    iota = Var(AVal((R1,), dt.int32))
    base = Var(AVal((R1,), dt.int32))
    lw.var_buf[iota] = lw.const_buffer("iota", np.arange(R1, dtype=np.int32))
    lw.var_buf[base] = lw.const_buffer("iota", np.arange(R1, dtype=np.int32) * R2)
    a = Var(AVal((K, 1), dt.int32))
    hit = Var(AVal((K, R1), dt.bool_))
    flat = Var(AVal((K, R1), dt.int32))
    pick = Var(AVal((K, R1), dt.int32))
    res = Var(AVal((K,), dt.int32))
    zero = Lit(np.asarray(0, np.int32))
    second = [
        Eqn("argmax", (m2,), (("axis", 1), ("keepdims", True)), a, loc),
        Eqn("equal", (iota, a), (), hit, loc),
        Eqn("add", (i2, base), (), flat, loc),
        Eqn("where", (hit, flat, zero), (), pick, loc),
        Eqn("sum", (pick,), (("axes", (1,)), ("keepdims", False)), res, loc),
    ]
    lw.var_buf[res] = out
    plan = plan_row(lw, second, {res})
    assert plan is not None
    lower_row_kernel(lw, plan, lw.fresh("argmax"), loc)


def _need(
    lw: Lowering, op: str, xd: dt.DType, K: int, R: int, od: dt.DType, loc: SourceLoc | None
) -> int:
    """UB bytes a row kernel of ``op`` over rows of ``R`` partials needs (an estimate)."""
    ad = xd if op == "argmax" else acc_dtype(op, xd)
    probe = Lowering(lw.func, lw.machine, lw.cfg)
    eqns, ov = _row_eqns(probe, op, "probe", ad, K, R, "probe_out", od, loc)
    plan = plan_row(probe, eqns, {ov})
    assert plan is not None
    return _row_need(plan, op, R)


def _row_need(plan: RowPlan, op: str, R: int) -> int:
    """UB bytes of one row of ``R``: the row kernel's estimate plus the rule's own 32-bit
    temporaries (a widened copy for a sum; masks, indices and selections for argmax)."""
    return ub_bytes_needed(plan, 1, R) + R * 4 * (8 if op == "argmax" else 1)


def _column_body(
    lw: Lowering,
    op: str,
    xbuf: str,
    xd: dt.DType,
    B: int,
    R: int,
    C: int,
    lay: tuple[int, int],
    split: bool,
    loc: SourceLoc | None,
) -> tuple[list[Stmt], TileVar, dict[str, Expr], int, int, int] | None:
    """The body of a column reduction's grid point (None when a window of ``x`` is not one
    rectangle of its layout ``lay``, or whole rows, which such windows need, do not fit a
    tile), with its accumulator, grid indices, parts and tile."""
    ad = acc_dtype(op, xd)
    isz = max(xd.itemsize, ad.itemsize)
    cap = tile_bytes(lw.machine) // isz
    workers = lw.workers("aiv")
    if lay[1] == C:
        # column tiles a whole number of 512-byte L2 lines wide where C allows it: as few as
        # keep every core busy, else the narrowest (and the rows split into parts)
        opts = [d for d in divisors(C) if d <= cap and (d == C or d * xd.itemsize % 512 == 0)]
        opts = opts or [d for d in divisors(C) if d <= cap] or [1]
        busy = [d for d in opts if B * (C // d) >= workers]
        tc = max(busy) if busy else min(opts)
    elif cap >= C:
        tc = C  # a window of another layout is whole rows of the view
    else:
        return None  # whole rows do not fit a tile: the caller copies x into [B*R, C]
    tr_cap = max(1, cap // tc)
    points = B * (C // tc)
    P = 1
    if split and points < 16 * workers:
        for p in divisors(R):
            if R // p < min(tr_cap, R):
                break
            P = p
            if points * p >= 16 * workers:
                break
    rp = R // P
    tr = min(rp, tr_cap)
    col_op, comb = COL_OPS[op]
    idx = {
        reg: Expr.reg(reg) if n > 1 else Expr() for reg, n in (("b", B), ("p", P), ("c", C // tc))
    }
    row0 = idx["b"] * R + idx["p"] * rp
    col0 = idx["c"] * tc
    acc = TileVar("acc", Space.UB, ad, (1, tc))

    def part(rows: int, row: Expr, first: bool, tag: str) -> list[Stmt] | None:
        x = TileVar("x" + tag, Space.UB, xd, (rows, tc))
        w = window(lay, C, x.shape, row, col0)
        if w is None:
            return None
        stmts: list[Stmt] = [TLoad(TileVar(x.name, Space.UB, xd, w[0]), xbuf, w[1], w[2], loc)]
        if xd is not ad:
            wide = TileVar("w" + tag, Space.UB, ad, (rows, tc))
            stmts.append(TOp("TCVT", wide, (x,), loc))
            x = wide
        if first:
            stmts.append(TOp(col_op, acc, (x,), loc))
        else:
            s = TileVar("s" + tag, Space.UB, ad, (1, tc))
            stmts += [TOp(col_op, s, (x,), loc), TOp(comb, acc, (acc, s), loc)]
        return stmts

    n_full, rem = rp // tr, rp % tr
    parts = [part(tr, row0, True, "0")]  # its own tiles: the loop's alternate slots
    if n_full > 1:
        parts.append(part(tr, row0 + Expr.reg("j") * tr, False, ""))
    if rem:
        parts.append(part(rem, row0 + n_full * tr, False, "r"))
    if any(p is None for p in parts):
        return None
    body: list[Stmt] = list(parts[0] or [])
    if n_full > 1:
        body.append(For("j", Expr.of(1), Expr.of(n_full), 1, tuple(parts[1] or [])))
    if rem:
        body += parts[-1] or []
    return body, acc, idx, P, tr, tc


def column_reduce(
    lw: Lowering,
    op: str,
    xbuf: str,
    xd: dt.DType,
    B: int,
    R: int,
    C: int,
    out: str,
    od: dt.DType,
    loc: SourceLoc | None,
    split: bool = True,
) -> None:
    """``op`` of ``x`` viewed ``[B, R, C]`` over ``R`` into ``out`` viewed ``[B, C]``."""
    lay = lw.view(xbuf, (B * R, C))
    built = _column_body(lw, op, xbuf, xd, B, R, C, lay, split, loc)
    if built is None:
        # the buffer's layout holds no window of whole rows: copy it into [B*R, C] first
        xbuf = relayout(lw, xbuf, (B * R, C), loc)
        built = _column_body(lw, op, xbuf, xd, B, R, C, (B * R, C), split, loc)
        assert built is not None
    body, acc, idx, P, tr, tc = built
    ad = acc.dtype
    col0 = idx["c"] * tc
    grid = [(r, n) for r, n in (("b", B), ("p", P), ("c", C // tc)) if n > 1]
    if P > 1:
        ws = lw.new_buffer("colpart", ad, B * P * C)
        lw.views[ws] = (B * P, C)
        body.append(TStore(ws, idx["b"] * P + idx["p"], col0, acc, loc))
    else:
        res = acc
        if ad is not od:
            res = TileVar("y", Space.UB, od, (1, tc))
            body.append(TOp("TCVT", res, (acc,), loc))
        olay = lw.view(out, (B, C))
        w = window(olay, C, (1, tc), idx["b"], col0)
        if w is None:
            raise TileError(
                f"{op}: the result's layout {list(olay)} holds no [1, {tc}] row", op=op, loc=loc
            )
        body.append(TStore(out, w[1], w[2], TileVar(res.name, Space.UB, od, w[0]), loc))
    lw.add_kernel(
        Kernel(
            lw.fresh(op + "_cols"),
            "reduce",
            tuple(grid) or (("b", 1),),
            (Section("aiv", tuple(body)),),
            (("rows", tr), ("cols", tc)),
            loc=loc,
        )
    )
    if P > 1:
        column_reduce(lw, op, ws, ad, B, P, C, out, od, loc, split=False)


def _general(lw: Lowering, e: Eqn) -> None:
    x = e.inputs[0]
    assert isinstance(x, Var)
    shape = x.aval.shape
    n = len(shape)
    xd, od = x.aval.dtype, e.out.aval.dtype
    if e.op == "argmax":
        axis = e.kwargs["axis"]
        red = set(range(n)) if axis is None else {axis % n}
    else:
        red = {a % n for a in e.kwargs["axes"]}
    groups: list[tuple[int, bool]] = []
    for a, s in enumerate(shape):
        if s == 1:
            continue
        r = a in red
        if groups and groups[-1][1] == r:
            groups[-1] = (groups[-1][0] * s, r)
        else:
            groups.append((s, r))
    xbuf = lw.buffer(x)
    out = lw.buffer(e.out)
    size = x.aval.size
    if not any(r for _, r in groups):
        # only size-1 axes are reduced: every element is its own result
        if e.op == "argmax":
            copy(
                lw,
                "argmax",
                Access.dense(out, od, (size,)),
                Access(None, od, (), ()),
                (size,),
                e.loc,
            )
        elif xd is od:
            alias(lw, e, x)
        else:
            _cast(lw, xbuf, xd, size, out, od, e.loc)
        return
    kinds = [r for _, r in groups]
    sizes = [s for s, _ in groups]
    if kinds in ([True], [False, True]):
        K = sizes[0] if len(sizes) == 2 else 1
        _rows(lw, e.op, xbuf, xd, K, sizes[-1], out, od, e.loc)
        return
    if e.op != "argmax" and kinds in ([True, False], [False, True, False]):
        B = sizes[0] if len(sizes) == 3 else 1
        column_reduce(lw, e.op, xbuf, xd, B, sizes[-2], sizes[-1], out, od, e.loc)
        return
    # move the reduced axes last, then reduce rows
    kept = [a for a in range(n) if a not in red]
    perm = tuple(kept + sorted(red))
    tmp = lw.new_buffer("red_tr", xd, size)
    K = math.prod(shape[a] for a in kept)
    transpose_into(lw, "transpose", xbuf, xd, shape, perm, tmp, e.loc)
    _rows(lw, e.op, tmp, xd, K, size // K, out, od, e.loc)


def _cast(
    lw: Lowering,
    xbuf: str,
    xd: dt.DType,
    size: int,
    out: str,
    od: dt.DType,
    loc: SourceLoc | None,
) -> None:
    xv, ov = Var(AVal((size,), xd)), Var(AVal((size,), od))
    lw.var_buf[xv], lw.var_buf[ov] = xbuf, out
    plan = plan_row(lw, [Eqn("cast", (xv,), (("dtype", od),), ov, loc)], {ov})
    assert plan is not None
    lower_row_kernel(lw, plan, lw.fresh("cast"), loc)


for _name in ("sum", "max", "min", "argmax"):
    register_rule("tile_general", _name)(KernelRule(_general))
