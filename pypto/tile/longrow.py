"""Multi-pass row kernels: last-axis reductions over rows too long for UB.

A row kernel (:func:`pypto.tile.lower.lower_row_kernel`) keeps whole rows in UB. When a row
with its intermediates does not fit, :func:`lower_long_rows` builds a kernel that walks each
row in **column chunks** instead. The grid is over blocks of ``tr`` rows; the tile is
``[tr, cw]`` with ``cw`` a 32-byte-aligned chunk (the last chunk of a row whose length ``cw``
does not divide is a narrower tail). The group's values are split by **reduction level** —
the number of reductions on a value's dependency path:

* pass ``l`` (``l = 1 .. L``) computes the reductions of level ``l``: a ``for %k`` loop over
  the chunks re-loads the inputs, recomputes the elementwise values these reductions read
  (they depend only on inputs and on per-row values of earlier levels), reduces each chunk
  with ``TROWSUM``/``TROWMAX``/``TROWMIN`` and combines the partials into a per-row ``[tr, 1]``
  accumulator that starts at the identity (0, -inf, +inf);
* per-row values of level ``l`` (``[tr, 1]``: means, reciprocal norms ...) are computed once,
  after pass ``l``, and stay in UB for the later passes;
* a full-size output is recomputed and stored chunk by chunk in the first pass after its
  level (a final pass ``L + 1`` when it depends on the last reductions).

So softmax takes three passes (max; sum of exp; output), rms_norm two, layer_norm three; an
elementwise kernel whose rows have no tile that fits (a long row of prime length) is the output
pass alone. Sums
of float16/bfloat16 chunks are taken in float32 and the float32 accumulator is rounded once
at the end (as the op table's implementation does); sums of integers accumulate in their
declared dtype. Chunked summation changes the order of the additions, within the tolerance
the numerics contract allows for reductions.

argmax keeps three per-row tiles: the running maximum, its index and the column where the
chunk starts. Each chunk's maximum and the first index holding it (its first NaN, if any) are
found as in the row kernel; the chunk's index replaces the running one only when its maximum
is greater, or is the first NaN of the row, so ties keep the first index, as numpy does.

The per-row tiles, the loops and their double buffers go through the Block-IR scheduler like
any other kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import SourceLoc, TileError
from pypto.graph.ir import Eqn, Var
from pypto.isa.ir import Cond, Expr
from pypto.ops.scan import identity
from pypto.ops.table import OPS
from pypto.tile.ir import For, Kernel, Section, Stmt, TileVar, TLoad, TOp, TStore, walk
from pypto.tile.lower import (
    Lowering,
    RowBuilder,
    RowPlan,
    RowRule,
    divisors,
    relayout,
    tiles_of,
)

__all__ = ["lower_long_rows", "takes"]

ROW_OPS = {"sum": ("TROWSUM", "TADD"), "max": ("TROWMAX", "TMAX"), "min": ("TROWMIN", "TMIN")}
CHUNKED = ("full", "row")  # kinds whose tiles follow the column chunk


def _acc_dtype(op: str, d: dt.DType) -> dt.DType:
    """The dtype a reduction's chunk partials accumulate in."""
    if op == "sum" and d.is_floating:
        return dt.float32
    return dt.int8 if d is dt.bool_ else d


def _rule(e: Eqn) -> RowRule:
    rule = OPS[e.op].rules["tile"]
    assert isinstance(rule, RowRule)
    return rule


@dataclass
class _Built:
    """A trial kernel and its UB estimate."""

    kernel: Kernel
    need: int  # an upper estimate of the UB bytes it takes


class _Levels:
    """The reduction level of every value of a plan, and what each pass computes."""

    def __init__(self, plan: RowPlan) -> None:
        self.level: dict[Any, int] = {v: 0 for v in plan.inputs}
        self.producer: dict[Any, Eqn] = {}
        for e in plan.eqns:
            rule = _rule(e)
            lv = max((self.level[a] for a in e.inputs if isinstance(a, Var)), default=0)
            self.level[e.out] = lv + (1 if rule.reduces else 0)
            self.producer[e.out] = e
        self.reductions = [e for e in plan.eqns if _rule(e).reduces]
        self.L = max((self.level[e.out] for e in self.reductions), default=0)


def takes(plan: RowPlan) -> bool:
    """Whether the multi-pass kernel takes ``plan`` (groups merge into one only then): every
    output full-size, per-row or (one row) a scalar."""
    return all(_stores(plan, v) for v in plan.outputs)


def _stores(plan: RowPlan, v: Var) -> bool:
    """Whether the multi-pass kernel stores the output ``v``: a chunked full-size value or a
    per-row one (a scalar is the per-row value of a single row)."""
    k = plan.kinds[v]
    return k in ("full", "col") or (k == "one" and plan.R == 1)


def lower_long_rows(lw: Lowering, plan: RowPlan, name: str, loc: SourceLoc | None) -> None:
    """Lower a row kernel whose rows do not fit UB as a multi-pass kernel over column chunks."""
    what = f"@{name} over rows of {plan.C} " + "/".join(sorted({d.short for d in plan.dtypes}))
    for v in plan.outputs:
        if not _stores(plan, v):
            raise TileError(
                f"kernel {what}: rows do not fit UB and {v.aval} is a "
                f"{plan.kinds[v]} output, which the multi-pass kernel does not store",
                op="lower",
                loc=loc,
                hint="compute it in a kernel of its own (pto.jit(..., fuse=False))",
            )
    # Every pass (and its tail) loads the chunked inputs: one laid out with rows other than C
    # holds no chunk window, so it is copied into rows of C once, not at every load.
    copies: dict[Var, str] = {}
    for v in plan.inputs:
        buf = lw.var_buf.get(v)
        rows = (v.aval.size // plan.C, plan.C)
        if buf is not None and plan.kinds[v] in CHUNKED and lw.view(buf, rows)[1] != plan.C:
            copies[v] = buf
            lw.var_buf[v] = relayout(lw, buf, rows, loc)
    try:
        tr, cw = _choose(lw, plan, name, loc, what)
        lw.add_kernel(_build(lw, plan, name, loc, tr, cw).kernel)
    finally:
        lw.var_buf.update(copies)  # later kernels (and the parameters) keep their buffers


def _units(plan: RowPlan, align: int) -> int:
    """The chunk width's step: every dtype's chunk a whole number of ``align`` bytes."""
    return max(align // math.gcd(align, d.itemsize) for d in plan.dtypes)


def _choose(
    lw: Lowering, plan: RowPlan, name: str, loc: SourceLoc | None, what: str
) -> tuple[int, int]:
    """(rows, chunk columns): the user's vec tile, checked, or the largest that fits UB."""
    m = lw.machine
    cap = m.ub_bytes
    unit = _units(plan, m.align_bytes)
    user = lw.cfg.vec
    if user is not None:
        tr = min(math.prod(user[:-1]) if len(user) > 1 else 1, plan.R)
        cw = min(user[-1], plan.C)
        problems = []
        if plan.R % tr or any(p % tr for p in plan.period.values()):
            problems.append(f"has {tr} rows, which do not divide the rows")
        if cw % unit and cw != plan.C:
            problems.append(f"has {cw} columns, not a multiple of {unit} (32-byte chunks)")
        if not problems:
            need = _build(_probe(lw), plan, name, loc, tr, cw).need
            if need <= cap:
                return tr, cw
            problems.append(f"needs {need} bytes of UB; {m.name} has {cap}")
        fit = _best(lw, plan, name, loc, unit, what)
        raise TileError(
            f"vector tile {list(user)} for the multi-pass kernel {what} (a "
            f"[{plan.R},{plan.C}] view) " + " and ".join(problems),
            op="set_vec_tile_shapes",
            hint=f"a tile that fits: pto.set_vec_tile_shapes({fit[0]}, {fit[1]})",
        )
    return _best(lw, plan, name, loc, unit, what)


def _best(
    lw: Lowering, plan: RowPlan, name: str, loc: SourceLoc | None, unit: int, what: str
) -> tuple[int, int]:
    cap = lw.machine.ub_bytes
    workers = lw.workers("aiv")
    probe = _probe(lw)
    best: tuple[Any, ...] | None = None
    for tr in divisors(plan.R):
        if any(p % tr for p in plan.period.values()) or tr > 64:
            continue
        cw = _widest(probe, plan, name, loc, tr, unit, cap)
        if cw is None:
            continue
        points = plan.R // tr
        score = (min(points, workers), tr * cw, -points)
        if best is None or score > best[0]:
            best = (score, tr, cw)
    if best is None:
        raise TileError(
            f"multi-pass kernel {what} (a [{plan.R},{plan.C}] view): not even a chunk of "
            f"{unit} columns fits UB ({cap} bytes on {lw.machine.name})",
            op="/".join(dict.fromkeys(e.op for e in plan.eqns)),
            loc=loc,
            hint="run on a machine with more UB, or split the computation into smaller kernels "
            "(pto.jit(..., fuse=False))",
        )
    return best[1], best[2]


def _widest(
    probe: Lowering, plan: RowPlan, name: str, loc: SourceLoc | None, tr: int, unit: int, cap: int
) -> int | None:
    """The widest chunk that fits UB with ``tr`` rows: a divisor of the row when one is at
    least 3/4 as wide as chunks with a tail can be (no tail: less code, fewer buffers)."""

    def fits(cw: int) -> bool:
        return _build(probe, plan, name, loc, tr, cw).need <= cap

    def bisect(opts: list[int]) -> int | None:
        # the need grows with the chunk
        if not opts or not fits(opts[0]):
            return None
        lo, hi = 0, len(opts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(opts[mid]):
                lo = mid
            else:
                hi = mid - 1
        return opts[lo]

    steps = bisect([unit * i for i in range(1, max(1, (plan.C - 1) // unit) + 1)])
    if steps is None:
        return None
    whole = bisect([d for d in divisors(plan.C) if d % unit == 0 and d < plan.C])
    if whole is not None and 4 * whole >= 3 * steps:
        return whole
    return _balanced(plan.C, steps, unit)


def _balanced(C: int, widest: int, unit: int) -> int:
    """The chunk of at most ``widest`` columns that splits ``C`` into the fewest, most even
    chunks (so a tail is not a sliver)."""
    n = -(-C // widest)
    even = -(-C // n)
    return min(widest, -(-even // unit) * unit)


def _probe(lw: Lowering) -> Lowering:
    """A copy of ``lw`` to build trial kernels in (they may add buffers or relayouts)."""
    return replace(
        lw,
        buffers=dict(lw.buffers),
        views=dict(lw.views),
        var_buf=dict(lw.var_buf),
        kernels=list(lw.kernels),
        consts=list(lw.consts),
        relaid=dict(lw.relaid),
        _names=dict(lw._names),
    )


class _Chunks:
    """Builders over one kernel's chunks: a full chunk at ``%k*cw`` and the tail."""

    def __init__(self, lw: Lowering, plan: RowPlan, tr: int, cw: int) -> None:
        self.main = self._builder(lw, plan, tr, cw, Expr.reg("k") * cw, None)
        self.n = plan.C // cw
        rem = plan.C - self.n * cw
        self.tail = (
            self._builder(lw, plan, tr, rem, Expr.of(self.n * cw), self.main) if rem else None
        )

    @staticmethod
    def _builder(
        lw: Lowering, plan: RowPlan, tr: int, tc: int, col: Expr, share: RowBuilder | None
    ) -> RowBuilder:
        b = RowBuilder(lw, plan, tr, tc)
        b.grid_c = 2  # per-column rows follow the chunk: loaded in the loop, not in pre
        b.col = col
        if share is not None:
            b.pre, b.in_pre, b.loc = share.pre, share.in_pre, share.loc
        return b

    def sync_names(self, src: RowBuilder) -> None:
        """Keep tile names unique across the builders."""
        n = src._n
        self.main._n = n
        if self.tail is not None:
            self.tail._n = n


def _build(
    lw: Lowering, plan: RowPlan, name: str, loc: SourceLoc | None, tr: int, cw: int
) -> _Built:
    lv = _Levels(plan)
    ch = _Chunks(lw, plan, tr, cw)
    b = ch.main
    b.loc = loc
    if ch.tail is not None:
        ch.tail.loc = loc
    per_row: dict[Any, TileVar] = {}
    running: dict[Any, tuple[TileVar, TileVar]] = {}  # argmax: (maximum, chunk start)
    reduced = {id(e) for e in lv.reductions}
    body: list[Stmt] = []
    loops: list[list[Stmt]] = []  # the statements of each loop body and tail, for the estimate

    def chunked(v: Any) -> bool:
        return plan.kinds[v] in CHUNKED

    # when a chunked output is stored: the first pass after its level
    store_pass = {v: lv.level[v] + 1 for v in plan.outputs if chunked(v)}

    def emit_row_values(level: int) -> None:
        """Per-row inputs (level 0) and per-row values of ``level``, once, outside loops."""
        b.body = body
        if level == 0:
            for v in plan.inputs:
                if not chunked(v):
                    per_row[v] = b.load(v)
        for e in plan.eqns:
            if chunked(e.out) or lv.level[e.out] != level or id(e) in reduced:
                continue
            b.loc = e.loc or loc
            rule = _rule(e)
            args = [per_row[a] if isinstance(a, Var) else a for a in e.inputs]
            per_row[e.out] = rule.fn(b, e, args)
        b.loc = loc
        b.grid_c = 1  # stored once per row block: no chunk register
        for v in plan.outputs:
            if not chunked(v) and lv.level[v] == level:
                b.store(v, per_row[v])
        b.grid_c = 2

    def chunk(bb: RowBuilder, reds: list[Eqn], stores: list[Any], accs: dict[Any, TileVar]) -> None:
        """One chunk's statements into ``bb.body``: recompute, reduce into ``accs``, store."""
        targets = [e.inputs[0] for e in reds] + stores
        need: set[Any] = set()
        work = [t for t in targets if isinstance(t, Var)]
        while work:
            v = work.pop()
            if v in need or not chunked(v):
                continue
            need.add(v)
            if v in lv.producer:
                work += [a for a in lv.producer[v].inputs if isinstance(a, Var)]
        local: dict[Any, TileVar] = {}
        for v in plan.inputs:
            if v in need:
                local[v] = bb.load(v)
        for e in plan.eqns:
            if e.out not in need:
                continue
            bb.loc = e.loc or loc
            rule = _rule(e)
            args = [
                (local[a] if chunked(a) else per_row[a]) if isinstance(a, Var) else a
                for a in e.inputs
            ]
            local[e.out] = rule.fn(bb, e, args)
        for e in reds:
            bb.loc = e.loc or loc
            x = local[e.inputs[0]]
            acc = accs[e.out]
            if e.op == "argmax":
                _argmax_chunk(bb, x, acc, *running[e.out], last=bb is ch.tail)
                continue
            row_op, comb = ROW_OPS[e.op]
            if x.dtype is not acc.dtype:
                wide = bb.new(acc.dtype, "full")
                bb.body.append(TOp("TCVT", wide, (x,), bb.loc))
                x = wide
            part = bb.new(acc.dtype, "col", "s")
            bb.body.append(TOp(row_op, part, (x,), bb.loc))
            bb.body.append(TOp(comb, acc, (acc, part), bb.loc))
        bb.loc = loc
        for v in stores:
            bb.store(v, local[v])

    def run_pass(p: int) -> None:
        reds = [e for e in lv.reductions if lv.level[e.out] == p]
        stores = [v for v, q in store_pass.items() if q == p]
        if not reds and not stores:
            return
        accs: dict[Any, TileVar] = {}
        b.body = body
        for e in reds:
            if e.op == "argmax":
                # the index, the running maximum and the column where the next chunk starts
                md = _acc_dtype("max", e.inputs[0].aval.dtype)
                accs[e.out] = b.new(dt.int32, "col", "acc")
                running[e.out] = (b.new(md, "col", "top"), b.new(dt.int32, "col", "at"))
                inits = zip((accs[e.out], *running[e.out]), (0.0, identity("max", md), 0.0))
            else:
                ad = _acc_dtype(e.op, e.out.aval.dtype)
                accs[e.out] = b.new(ad, "col", "acc")
                inits = zip((accs[e.out],), (identity("add" if e.op == "sum" else e.op, ad),))
            for t, v in inits:
                body.append(TOp("TEXPANDS", t, (v,), e.loc or loc))
        inner: list[Stmt] = []
        b.body = inner
        chunk(b, reds, stores, accs)
        loops.append(inner)
        body.append(For("k", Expr(), Expr.of(ch.n), 1, tuple(inner)))
        if ch.tail is not None:
            ch.sync_names(b)
            tail: list[Stmt] = []
            ch.tail.body = tail
            chunk(ch.tail, reds, stores, accs)
            loops.append(tail)
            body.extend(tail)
            b._n = ch.tail._n
        b.body = body
        for e in reds:
            acc = accs[e.out]
            d = e.out.aval.dtype
            if acc.dtype is not d:
                res = b.new(d, "col")
                body.append(TOp("TCVT", res, (acc,), e.loc or loc))
                acc = res
            per_row[e.out] = acc
        emit_row_values(p)

    emit_row_values(0)
    for p in range(1, lv.L + 2):
        run_pass(p)
    kernel = Kernel(
        name,
        "vector",
        (("r", plan.R // tr),),
        (Section("aiv", tuple(body), tuple(b.pre)),),
        (("rows", tr), ("cols", cw)),
        loc=loc,
    )
    return _Built(kernel, _need(lw, body, b.pre, loops))


def _argmax_chunk(
    b: RowBuilder, x: TileVar, at: TileVar, top: TileVar, start: TileVar, last: bool
) -> None:
    """Fold one chunk of argmax's rows into the running index ``at`` and maximum ``top``;
    ``start`` holds the chunk's first column and moves on to the next chunk's (none follows
    the ``last`` chunk)."""
    if x.dtype is dt.bool_:
        x = b.op("TCVT", b.new(dt.int8, "full"), x)
    iota = b.lw.const_buffer("iota", np.arange(b.tc, dtype=np.int32).reshape(1, b.tc))
    idx = b.new(dt.int32, "row", "i")
    b.pre.append(TLoad(idx, iota, Expr(), Expr(), b.loc))
    b.in_pre.add(idx.name)
    m = b.op("TROWMAX", b.new(x.dtype, "col"), x)
    sel = b.op(
        "TSEL",
        b.new(dt.int32, "full"),
        b.op("TCMP", b.new(dt.bool_, "full"), x, m, Cond.EQ),
        idx,
        b.lit(b.tc, dt.int32),
    )
    floating = x.dtype.is_floating
    if floating:
        # a chunk holding NaN has NaN for its maximum (TROWMAX propagates it), which no
        # element equals: its pick is its first NaN, as numpy's argmax picks the first NaN
        nan = b.op("TCMP", b.new(dt.bool_, "full"), x, x, Cond.NE)
        sel = b.op("TSEL", b.new(dt.int32, "full"), nan, idx, sel)
    first = b.op("TROWMIN", b.new(dt.int32, "col"), sel)
    first = b.op("TADD", b.new(dt.int32, "col"), first, start)
    # a later chunk wins only with a greater maximum (ties keep the first index) ...
    b.op("TSEL", at, b.op("TCMP", b.new(dt.bool_, "col"), m, top, Cond.GT), first, at)
    if floating:
        # ... or with the row's first NaN; once the maximum is NaN it stays
        nan_here = b.op("TCMP", b.new(dt.bool_, "col"), m, m, Cond.NE)
        nan_before = b.op("TCMP", b.new(dt.bool_, "col"), top, top, Cond.NE)
        pick = b.op("TSEL", b.new(dt.int32, "col"), nan_here, first, at)
        b.op("TSEL", at, nan_before, at, pick)
    b.op("TMAX", top, top, m)
    if not last:
        b.op("TADDS", start, start, float(b.tc))


def _need(lw: Lowering, body: list[Stmt], pre: list[Stmt], loops: list[list[Stmt]]) -> int:
    """An upper estimate of the kernel's UB: tiles a DMA touches in two slots for the whole
    kernel, tiles used outside the loops (``pre``, per-row values) throughout, and the
    largest loop's other tiles (tiles of different loops are never live at once, so the
    allocator shares their space)."""
    align = lw.machine.align_bytes
    sizes: dict[str, int] = {}
    io: set[str] = set()
    where: dict[str, set[int]] = {}  # tile -> the loops using it (-1: outside every loop)

    def visit(stmts: Any, seg: int) -> None:
        for s in stmts:
            if isinstance(s, For):
                continue
            ts = tiles_of(s)
            if isinstance(s, TLoad | TStore):
                io.update(t.name for t in ts)
            for t in ts:
                sizes[t.name] = max(sizes.get(t.name, 0), -(-t.nbytes // align) * align)
                where.setdefault(t.name, set()).add(seg)

    in_loops = {id(s) for ls in loops for s in walk(tuple(ls))}
    visit([s for s in walk(tuple(pre + body)) if id(s) not in in_loops], -1)
    for i, ls in enumerate(loops):
        visit(walk(tuple(ls)), i)
    total = 0
    per_loop = [0] * len(loops)
    for n, segs in where.items():
        if n in io:
            total += sizes[n] * (1 if segs == {-1} else 2)
        elif len(segs) == 1 and -1 not in segs:
            per_loop[next(iter(segs))] += sizes[n]
        else:
            total += sizes[n]
    return total + max(per_loop, default=0)
