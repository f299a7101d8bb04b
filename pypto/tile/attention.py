"""Attention as flash attention: one cluster kernel, online softmax over K/V tiles.

The fusion pass makes ``scaled_dot_product_attention`` (and matmul → scale/mask → softmax →
matmul) one ``attention`` group. Its kernel's grid runs over the batch dims and the query tiles
``[bq, D]``; for each query tile the K/V tiles ``[bk, D]`` go by in a loop:

* the cube core computes ``S = Q Kᵀ`` (f32 in L0C) and hands it to the two vector cores
  through a GM workspace ring (each takes half the rows). When the group transposes K itself
  (``q @ k.T``, as the composite does), K's ``[bk, D]`` tiles go to L1 as they are and MTE1
  transposes them into L0B (``TTRANS``, the chip's transposing 2-D load): no ``Kᵀ`` in GM;
* the vector cores scale and mask ``S``, keep the running row max ``m`` and row sum ``l``,
  compute ``P = exp(S - m)`` and hand ``P`` (in the inputs' dtype) back to the cube core
  through a second ring;
* the cube core computes ``P V`` and hands it over through a third ring; the vector cores
  rescale their f32 accumulator by ``exp(m_old - m)`` and add it.

At the end each vector core writes ``acc / l`` in the output dtype. The ``Lq x Lk`` score
matrix never reaches GM: only the rings' two slots per cluster do. A causal mask (the composite's
constant lower-triangular mask, ``Lq == Lk``) stops the K/V loop at the diagonal and masks only
the diagonal tile (the mask row is picked from a two-tile constant: all-true, then
lower-triangular); any other mask with the full ``[Lq, Lk]`` extent is loaded tile by tile.
Numerics: the scores and the softmax stay in f32 (the reference rounds the logits to the
inputs' dtype), within the tolerance table for a K-long sum.

>>> import pypto as pto
>>> q = pto.random.normal(0, (2, 64, 32), pto.float16)
>>> f = pto.jit(lambda q: pto.scaled_dot_product_attention(q, q, q, causal=True), machine="tiny")
>>> print(f.lower(q).tile_ir.kernels[-1].header())
kernel @attention grid(b0=2, q=1) cost(q) attn_tile(bq=64, bk=64) on cluster
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pypto import dtypes as dt
from pypto.graph.ir import Eqn, Lit, Var
from pypto.isa.ir import Expr, Space
from pypto.ops.composite import causal_mask
from pypto.tile.ir import For, Kernel, Ring, Section, SOp, Stmt, TileVar, TLoad, TOp, TStore
from pypto.tile.lower import GROUP_RULES, Lowering, _used_outside, divisors, lower_single

__all__ = ["AttentionPlan", "match_attention"]


@dataclass
class AttentionPlan:
    """What the group computes: ``softmax(q @ kt * scale, masked) @ v``."""

    q: Var
    kt: Var  # [.., D, Lk]
    v: Var
    out: Var
    scale: float
    masks: list[Var]
    transpose: Eqn | None  # the group's own transpose of k
    causal: bool
    k: Var | None = None
    """the keys ``[.., Lk, D]`` before that transpose: the cube core loads their tiles and
    transposes them on the way into L0B (no transpose kernel)"""


def _lit(x: object) -> float | None:
    return float(x.value.item()) if isinstance(x, Lit) else None


def match_attention(lw: Lowering, eqns: list[Eqn]) -> AttentionPlan | None:
    """The plan of an attention group, or None when it is not the shape this kernel handles."""
    es = list(eqns)
    tr = None
    if es and es[0].op == "transpose":
        tr = es.pop(0)
    if len(es) < 7 or es[0].op != "matmul" or es[-1].op != "matmul":
        return None
    mm1, mm2 = es[0], es[-1]
    q, kt = mm1.inputs
    p, v = mm2.inputs
    if not all(isinstance(x, Var) for x in (q, kt, p, v)):
        return None
    assert isinstance(q, Var) and isinstance(kt, Var) and isinstance(v, Var)
    if tr is not None:
        perm = tuple(tr.kwargs["perm"])
        n = len(perm)
        if tr.out is not kt or n < 2 or perm != (*range(n - 2), n - 1, n - 2):
            return None
    cur: Var = mm1.out
    scale = 1.0
    masks: list[Var] = []
    mid = es[1:-1]
    i = 0
    while i < len(mid) and mid[i].op in ("mul", "where"):
        e = mid[i]
        if e.op == "mul":
            a, b = e.inputs
            s = _lit(b) if a is cur else _lit(a) if b is cur else None
            if s is None or s <= 0 or masks:
                return None
            scale *= s
        else:
            c, x, y = e.inputs
            ninf = _lit(y)
            if x is not cur or ninf != -math.inf or not isinstance(c, Var):
                return None
            masks.append(c)
        cur = e.out
        i += 1
    soft = [e.op for e in mid[i:]]
    if soft != ["max", "sub", "exp", "sum", "div"]:
        return None
    mx, sb, ex, sm, dv = mid[i:]
    if (
        mx.inputs[0] is not cur
        or sb.inputs != (cur, mx.out)
        or ex.inputs[0] is not sb.out
        or sm.inputs[0] is not ex.out
        or dv.inputs != (ex.out, sm.out)
        or dv.out is not p
    ):
        return None
    nd = q.aval.ndim
    if kt.aval.ndim != nd or v.aval.ndim != nd or nd < 2:
        return None
    lq, d = q.aval.shape[-2:]
    lk = kt.aval.shape[-1]
    if kt.aval.shape[-2] != d or v.aval.shape[-2] != lk:
        return None
    dtypes = {x.aval.dtype for x in (q, kt, v, mm2.out)}
    if len(dtypes) != 1 or dtypes.pop() not in (dt.float16, dt.bfloat16, dt.float32):
        return None
    consts = {id(cv): arr for cv, arr in lw.func.consts}
    causal = False
    for mk in masks:
        if mk.aval.shape[-2:] != (lq, lk):
            return None
        arr = consts.get(id(mk))
        if arr is not None and lq == lk and np.array_equal(arr, causal_mask(lq, lk)):
            causal = True
    if causal:
        masks = [mk for mk in masks if id(mk) not in consts]
    k = tr.inputs[0] if tr is not None and tr.out not in _used_outside(lw.func, eqns) else None
    return AttentionPlan(
        q, kt, v, mm2.out, scale, masks, tr, causal, k if isinstance(k, Var) else None
    )


def _strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Batch strides of an operand over the output's batch dims (0 where it broadcasts)."""
    shape = (1,) * (len(out) - len(shape)) + shape
    res, s = [], 1
    for dd, o in zip(reversed(shape), reversed(out), strict=True):
        res.append(s if dd == o else 0)
        s *= dd
    return res[::-1]


def _ub_bytes(h: int, bk: int, dv: int, s: int) -> int:
    """UB of the vector cores' tiles: scores (P in place) and mask, the PV tile (double),
    its f32 copy, the accumulator, the output tile (double) and the row statistics."""
    return (
        2 * h * bk * s
        + 2 * h * bk
        + 2 * h * dv * s
        + 2 * h * dv * 4
        + 2 * h * dv * s
        + 12 * 32 * (h // 8 + 1)
        + bk * 4
    )


LAG = 2
"""K/V tiles between a tile's softmax and the update with its P V product: the cube makes
the next tiles' S while a tile's S goes to the vector cores and its P comes back (deeper
lags measured no faster on ``ascend910b``, where the rings' L2 traffic binds)."""

SLOTS = {"ss": 2, "sp": LAG, "so": 2}
"""Slots of each ring (by its slot register): S and P V are read one tile after they are
written and P LAG tiles after, so these let each producer wait only for its consumer's
previous use of a slot. Each slot takes a cross-core flag id (8 on the chip)."""


def _tiles(lw: Lowering, p: AttentionPlan) -> tuple[int, int]:
    """(bq, bk): the largest tiles whose cube operands fit L0 (single-buffered) and whose
    vector tiles fit UB, keeping every cluster busy where the grid allows (causal: bk
    divides bq, so the diagonal is the last bq/bk K/V tiles of a query tile)."""
    m = lw.machine
    s = p.q.aval.dtype.itemsize
    lq, d = p.q.aval.shape[-2:]
    lk, dv = p.kt.aval.shape[-1], p.v.aval.shape[-1]
    batch = math.prod(p.out.aval.shape[:-2])
    best = None
    for bq in divisors(lq):
        if bq > 128 or (bq % 2 and lq > 1):
            continue
        for bk in divisors(bq) if p.causal else divisors(lk):
            if bk > 256:
                continue
            h = max(1, bq // 2)
            fits = (
                (bq * d + bq * bk) * s <= m.l0a_bytes
                and (d * bk + bk * dv) * s <= m.l0b_bytes
                and (bq * bk + bq * dv) * 4 <= m.l0c_bytes
                and _ub_bytes(h, bk, dv, s) <= m.ub_bytes
            )
            if not fits:
                continue
            busy = min(batch * (lq // bq), m.clusters)
            # every cube operand double-buffered lets the cube run a tile ahead
            double = (
                2 * (bq * d + bq * bk) * s <= m.l0a_bytes
                and 2 * (d * bk + bk * dv) * s <= m.l0b_bytes
                and 2 * (bq * bk + bq * dv) * 4 <= m.l0c_bytes
            )
            key = (busy, bq * bk, double, bq)
            if best is None or key > best[0]:
                best = (key, bq, bk)
    if best is None:
        return 0, 0
    return best[1], best[2]


def lower_attention(lw: Lowering, eqns: list[Eqn]) -> bool:
    """Lower an attention group as one flash-attention cluster kernel (False: not handled)."""
    plan = match_attention(lw, eqns)
    if plan is None:
        return False
    bq, bk = _tiles(lw, plan)
    if not bq:
        return False
    if plan.transpose is not None and plan.k is None:
        lower_single(lw, plan.transpose)
    _kernel(lw, plan, bq, bk, eqns[-1])
    return True


def _kernel(lw: Lowering, p: AttentionPlan, bq: int, bk: int, last: Eqn) -> None:
    m = lw.machine
    loc = last.loc
    d_t = p.q.aval.dtype
    f32 = dt.float32
    lq, d = p.q.aval.shape[-2:]
    lk, dv = p.kt.aval.shape[-1], p.v.aval.shape[-1]
    ob = p.out.aval.shape[:-2]
    keep = [i for i, n in enumerate(ob) if n > 1]
    grid = [(f"b{j}", ob[i]) for j, i in enumerate(keep)] + [("q", lq // bq)]

    def batch_rows(shape: tuple[int, ...], rows: int) -> Expr:
        st = _strides(shape[:-2], ob)
        e = Expr()
        for j, i in enumerate(keep):
            if st[i]:
                e = e + Expr.reg(f"b{j}") * (st[i] * rows)
        return e

    def gm(v: Var, rows: int, cols: int) -> str:
        buf = lw.buffer(v)
        lw.view(buf, (v.aval.size // cols, cols))
        assert lw.views[buf] == (v.aval.size // cols, cols)
        return buf

    qb, vb = gm(p.q, lq, d), gm(p.v, lk, dv)
    ob_ = gm(p.out, lq, dv)
    q_row = batch_rows(p.q.aval.shape, lq) + Expr.reg("q") * bq
    v_row = batch_rows(p.v.aval.shape, lk)
    o_row = batch_rows(p.out.aval.shape, lq) + Expr.reg("q") * bq
    # S and P V cross in the inputs' dtype (the fixpipe rounds them once, as the reference
    # rounds its logits): half the fixpipe and vector bytes of f32
    ws: dict[str, str] = {}
    for reg, name, cols in (("ss", "ws_s", bk), ("sp", "ws_p", bk), ("so", "ws_o", dv)):
        rows = m.clusters * SLOTS[reg] * bq
        ws[reg] = lw.new_buffer(name, d_t, rows * cols)
        lw.views[ws[reg]] = (rows, cols)
    ws_s, ws_p, ws_o = ws["ss"], ws["sp"], ws["so"]

    def ring(slot: str) -> Expr:
        return Expr.reg("blk") * (SLOTS[slot] * bq) + Expr.reg(slot) * bq

    j = Expr.reg("j")
    r = bq // bk
    n = Expr.reg("q") * r + r if p.causal else Expr.of(lk // bk)
    # Software pipeline, LAG K/V tiles deep: iteration j makes S_j (and on the vector cores
    # P_j) while the P V product of tile j-LAG goes through the cube, so the hand-offs'
    # latency hides behind the softmax of the tiles in between; 0/1-trip loops on
    # %hs = [j < n] and %hp = [j >= LAG] pick the stages.
    stages: list[Stmt] = [
        SOp("SMIN", "hs", (n - j, Expr.of(1))),
        SOp("SMAX", "hs", (Expr.reg("hs"), Expr())),
        SOp("SMAX", "hp", (j - (LAG - 1), Expr())),
        SOp("SMIN", "hp", (Expr.reg("hp"), Expr.of(1))),
    ]
    count: tuple[Stmt, ...] = (
        SOp("SMOV", "cs", (Expr(),)),
        SOp("SMOV", "cp", (Expr(),)),
    )

    def stage(reg: str, cnt: str, slots: tuple[str, ...], body: list[Stmt]) -> For:
        head: list[Stmt] = [SOp("SMOD", x, (Expr.reg(cnt), Expr.of(SLOTS[x]))) for x in slots]
        tail = SOp("SADD", cnt, (Expr.reg(cnt), Expr.of(1)))
        return For("i" + reg, Expr(), Expr.reg(reg), 1, (*head, *body, tail))

    # the cube core
    q0 = TileVar("q0", Space.L0A, d_t, (bq, d))
    k0 = TileVar("k0", Space.L0B, d_t, (d, bk))
    s0 = TileVar("s", Space.L0C, f32, (bq, bk))
    p0 = TileVar("p0", Space.L0A, d_t, (bq, bk))
    v0 = TileVar("v0", Space.L0B, d_t, (bk, dv))
    o0 = TileVar("o", Space.L0C, f32, (bq, dv))
    if p.k is not None:
        # K tiles [bk, D] as they are in GM; MTE1 transposes them into L0B
        k1 = TileVar("k1", Space.L1, d_t, (bk, d))
        k_row = batch_rows(p.k.aval.shape, lk)
        k_load: list[Stmt] = [
            TLoad(k1, gm(p.k, lk, d), k_row + j * bk, Expr(), loc),
            TOp("TTRANS", k0, (k1,), loc),
        ]
    else:
        k_load = [TLoad(k0, gm(p.kt, d, lk), batch_rows(p.kt.aval.shape, d), j * bk, loc)]
    cube_s = stage(
        "hs",
        "cs",
        ("ss",),
        [
            *k_load,
            TOp("TMATMUL", s0, (q0, k0), loc),
            TStore(ws_s, ring("ss"), Expr(), s0, loc),
        ],
    )
    cube_o = stage(
        "hp",
        "cp",
        ("sp", "so"),
        [
            TLoad(p0, ws_p, ring("sp"), Expr(), loc),
            TLoad(v0, vb, v_row + j * bk - LAG * bk, Expr(), loc),
            TOp("TMATMUL", o0, (p0, v0), loc),
            TStore(ws_o, ring("so"), Expr(), o0, loc),
        ],
    )
    aic = Section(
        "aic",
        (
            TLoad(q0, qb, q_row, Expr(), loc),
            For("j", Expr(), n + LAG, 1, (*stages, cube_s, cube_o)),
        ),
        count,
    )

    # the vector cores: rows %sub*h .. of the query tile
    h = bq // 2 if bq > 1 else 1
    sub = Expr.reg("sub") * h if bq > 1 else Expr()

    def ub(name: str, dtype: dt.DType, shape: tuple[int, int]) -> TileVar:
        return TileVar(name, Space.UB, dtype, shape)

    mx, ls, acc = ub("m", f32, (h, 1)), ub("l", f32, (h, 1)), ub("acc", f32, (h, dv))
    al = ub("alpha", f32, (h, 1))
    # the rescale factors of the last LAG tiles: the update of tile j-LAG uses the oldest
    hist = [ub(f"alpha{i}", f32, (h, 1)) for i in range(1, LAG + 1)]
    neg = ub("ninf", d_t, (1, bk))
    pre: list[Stmt] = [*count, TOp("TEXPANDS", neg, (-math.inf,), loc)]
    x = ub("x", d_t, (h, bk))
    soft: list[Stmt] = [TLoad(x, ws_s, ring("ss") + sub, Expr(), loc)]
    if p.scale != 1.0:
        soft.append(TOp("TMULS", x, (x, p.scale), loc))
    if p.causal:
        # only the last bq/bk tiles of the row reach past the diagonal: mask those with the
        # matching columns of a lower-triangular constant
        tri = lw.const_buffer("tril", causal_mask(bq, bq))
        mk = ub("mask", dt.bool_, (h, bk))
        jj = j - Expr.reg("q") * r
        soft += [
            SOp("SMOV", "dg", (jj + 1,)),
            SOp("SMAX", "dg", (Expr.reg("dg"), Expr())),
            SOp("SMIN", "dg", (Expr.reg("dg"), Expr.of(1))),
            For(
                "idg",
                Expr(),
                Expr.reg("dg"),
                1,
                (
                    SOp("SMOV", "jj", (jj,)),
                    TLoad(mk, tri, sub, Expr.reg("jj") * bk, loc),
                    TOp("TSEL", x, (mk, x, neg), loc),
                ),
            ),
        ]
    for i, mv in enumerate(p.masks):
        mb = gm(mv, lq, lk)
        mrow = batch_rows(mv.aval.shape, lq) + Expr.reg("q") * bq + sub
        mt = ub(f"mask{i}", dt.bool_, (h, bk))
        soft += [TLoad(mt, mb, mrow, j * bk, loc), TOp("TSEL", x, (mt, x, neg), loc)]
    # P = exp(S - m) in the inputs' dtype (the reference's softmax precision); the row
    # statistics and the accumulator in f32
    mj, mn, rs = ub("mj", d_t, (h, 1)), ub("mn", f32, (h, 1)), ub("rs", d_t, (h, 1))
    mjf, mnx, rsf = mj, mn, rs
    if d_t is not f32:
        mjf, mnx, rsf = ub("mjf", f32, (h, 1)), ub("mnx", d_t, (h, 1)), ub("rsf", f32, (h, 1))
    soft.append(TOp("TROWMAX", mj, (x,), loc))
    if mjf is not mj:
        soft.append(TOp("TCVT", mjf, (mj,), loc))
    soft += [
        TOp("TMAX", mn, (mx, mjf), loc),
        TOp("TSUB", al, (mx, mn), loc),
        TOp("TEXP", al, (al,), loc),
        TOp("TMOV", mx, (mn,), loc),
    ]
    if mnx is not mn:  # the max of values of the dtype is one of them: exact
        soft.append(TOp("TCVT", mnx, (mn,), loc))
    soft += [
        TOp("TSUB", x, (x, mnx), loc),
        TOp("TEXP", x, (x,), loc),
        TOp("TROWSUM", rs, (x,), loc),
    ]
    if rsf is not rs:
        soft.append(TOp("TCVT", rsf, (rs,), loc))
    soft += [
        TOp("TMUL", ls, (ls, al), loc),
        TOp("TADD", ls, (ls, rsf), loc),
        TStore(ws_p, ring("sp") + sub, Expr(), x, loc),
    ]
    ot = ub("ot", d_t, (h, dv))
    update: list[Stmt] = [TLoad(ot, ws_o, ring("so") + sub, Expr(), loc)]
    otf = ot
    if d_t is not f32:
        otf = ub("otf", f32, (h, dv))
        update.append(TOp("TCVT", otf, (ot,), loc))
    update += [
        TOp("TMUL", acc, (acc, hist[-1]), loc),
        TOp("TADD", acc, (acc, otf), loc),
    ]
    body: list[Stmt] = [
        *stages,
        *(TOp("TMOV", hist[i], (hist[i - 1],), loc) for i in range(LAG - 1, 0, -1)),
        TOp("TMOV", hist[0], (al,), loc),
        stage("hs", "cs", ("ss", "sp"), soft),
        stage("hp", "cp", ("so",), update),
    ]
    fin: list[Stmt] = [TOp("TDIV", acc, (acc, ls), loc)]
    out_t = acc
    if d_t is not f32:
        out_t = ub("y", d_t, (h, dv))
        fin.append(TOp("TCVT", out_t, (acc,), loc))
    fin.append(TStore(ob_, o_row + sub, Expr(), out_t, loc))
    # the running max starts finite (in the dtype) so fully masked rows of a tile give
    # exp(-inf) = 0
    start: list[Stmt] = [
        TOp("TEXPANDS", mx, (-6e4 if d_t is not f32 else -1e30,), loc),
        TOp("TEXPANDS", ls, (0.0,), loc),
        TOp("TEXPANDS", al, (1.0,), loc),
        *(TOp("TEXPANDS", a, (1.0,), loc) for a in hist[:-1]),
        TOp("TEXPANDS", acc, (0.0,), loc),
    ]
    aiv = Section("aiv", (*start, For("j", Expr(), n + LAG, 1, tuple(body)), *fin), tuple(pre))
    flops = 2 * math.prod(ob) * lq * lk * (d + dv)
    lw.add_kernel(
        Kernel(
            lw.fresh("attention"),
            "attention",
            tuple(grid),
            (aic, aiv),
            (("bq", bq), ("bk", bk)),
            "attn_tile",
            "cluster",
            loc,
            flops // 2 if p.causal else flops,
            (
                Ring(ws_s, "aic", "ss", SLOTS["ss"]),
                Ring(ws_p, "aiv", "sp", SLOTS["sp"]),
                Ring(ws_o, "aic", "so", SLOTS["so"]),
            ),
            # causal: query tile q runs q+1 K/V steps; deal the long ones first
            "q" if p.causal else "",
        )
    )


def _group_rule(lw: Lowering, eqns: list[Eqn]) -> bool:
    if sum(e.op == "matmul" for e in eqns) != 2:
        return False
    return lower_attention(lw, eqns)


GROUP_RULES.append(_group_rule)
