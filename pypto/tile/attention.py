"""Attention as flash attention: one cluster kernel, online softmax over K/V tiles.

The fusion pass makes ``scaled_dot_product_attention`` (and matmul → scale/bias/mask → softmax
→ matmul) one ``attention`` group. Its kernel's grid runs over the batch dims and the query tiles
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

The kernel is software-pipelined over the K/V steps, ``LAG`` steps deep: the cube makes step
``j``'s S while step ``j - LAG``'s P comes back, so the hand-offs' latency hides behind the
softmax of the steps in between. On the cube core that is three loops: the first ``LAG``
steps make S only, the steady loop makes step ``j``'s S products and step ``j - LAG``'s P V
products in turn, and the last ``LAG`` steps make P V only. In the steady loop each kind
of product has its own L0 tiles (``q0``/``k0``/``s`` against ``p0``/``v0``/``o``), so one
product's operands move into L0 and the other's result leaves L0C while the cube multiplies;
in the fill and drain loops consecutive products take the two sets in turn where every L0
tile has one shape (``D = kc = Dv``, operands waiting in L1). Neither L0 nor L0C holds two
of any one tile, so without this each product waited for the one before to drain.

A K/V step whose operands do not fit L0 at once (``bk`` 256 keys with head dim 128) runs as
``bk / kc`` cube products (``kc`` in the header): K, P and V go to L1 in one transfer each,
MTE1 cuts each product's chunk into L0 (``TEXTRACT_T`` for K), the chunks' scores leave L0C
one by one into the same ring slot, and P V accumulates over them in L0C
(``TMATMUL_ACC``). The vector cores see one ``[rows, bk]`` step, so the rings carry one P V
tile per ``bk`` keys: per score, the K/V loads and the P V ring cost ``(D + Dv) / bq +
2 Dv / bk`` elements, which the tile choice minimises once every cluster has work. Under a
causal mask with ``bk > bq`` the diagonal lies inside a step, ``%u = q mod (bk / bq)`` query
tiles from its start: the vector cores mask that step with rows ``%u*bq ..`` of a
lower-triangular ``[bk, bk]`` tile. A bias (``softmax(q kᵀ · scale + bias) v``, the bias
``[.., Lq, Lk]`` in the scores' dtype) is loaded tile by tile on the vector cores and added
before the masks, into the buffer of P V's f32 copy where it fits (:func:`_bias_in_otf`); the
batch axes it is shared along go innermost in the grid, so the clusters that read one bias
tile run at once and share it through L2.

At the end each vector core writes ``acc / l`` in the output dtype. The ``Lq x Lk`` score
matrix never reaches GM: only the rings' two slots per cluster do. A causal mask (the composite's
constant lower-triangular mask, ``Lq == Lk``) stops the K/V loop at the diagonal and masks only
the diagonal tiles, with the rows of a lower-triangular ``[bq, bq]`` tile each vector core
loads once per grid point; any other mask with the full ``[Lq, Lk]`` extent is loaded tile by
tile.

Where it pays (:func:`_makespan`), a grid point takes **two query tiles** (``g=2`` in the
header): each K/V tile it loads serves both, the cube core keeps the pair in L1 and moves one
tile at a time into L0A, and each vector core keeps statistics and an accumulator per tile,
and, where UB holds them, a scores tile per query tile (the second tile's S then loads while
the first one's softmax runs; the f32 copy of a P V tile goes where its tile's scores were).
The rings' traffic per tile step drops by the shared K/V bytes (an eighth); under a causal
mask the pair's first tile runs its partner's last steps fully masked, so both tiles hand the
same ring slots over in the same order.
Under a causal mask a pair may take K/V steps as wide as both its tiles (``bk = 2 bq``, in
chunks): both tiles then reach their diagonal in the point's last step, tile ``t`` at rows
``t*bq`` of a lower-triangular ``[bk, bk]`` mask, and no tile runs a fully masked step.
Numerics: S and P V cross the rings in the inputs' dtype (the fixpipe rounds them once, as the
reference rounds its logits); P is computed in that dtype with f32 row statistics and an f32
accumulator, within the tolerance table for a K-long sum.

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
from pypto.core.errors import SourceLoc, TileError
from pypto.graph.ir import Eqn, Lit, Var
from pypto.isa.ir import Expr, Space
from pypto.npu.machine import Machine
from pypto.ops.composite import causal_mask
from pypto.tile.ir import (
    For,
    Kernel,
    Ring,
    Section,
    SOp,
    Stmt,
    TileVar,
    TLoad,
    TOp,
    TStore,
    gate,
    stores_by_first_sub,
)
from pypto.tile.lower import (
    GROUP_RULES,
    GROUP_WINDOWS,
    Lowering,
    Via,
    batch_window,
    divisors,
    lower_single,
    relayout,
    used_outside,
    via_fits,
    window_out,
)

__all__ = ["AttentionPlan", "match_attention"]


@dataclass
class AttentionPlan:
    """What the group computes: ``softmax(q @ kt * scale + biases, masked) @ v``."""

    q: Var
    kt: Var  # [.., D, Lk]
    v: Var
    out: Var
    scale: float
    masks: list[Var]
    transpose: Eqn | None  # the group's own transpose of k
    causal: bool
    k: Var | None = None
    """the value that transpose reads: the cube core loads the keys' ``[bk, D]`` tiles from it
    and transposes them on the way into L0B (no transpose kernel)"""
    k_pos: tuple[int, ...] = ()
    """for each axis of the keys ``[.., Lk, D]``, the axis of ``k`` it is (identity: ``k`` is
    the keys; else a head split the tiles read as windows of ``k``)"""
    biases: tuple[Var, ...] = ()
    """``[.., Lq, Lk]`` operands added to the scaled scores (in their dtype) before the masks:
    the vector cores add each K/V step's tile of them"""


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
    k_pos: tuple[int, ...] = ()
    if tr is not None:
        # kᵀ = k.transpose(perm) with D from k's last axis: the keys [.., Lk, D] are k's
        # axes k_pos (a head split and the .T composed into one transpose, say)
        perm = tuple(tr.kwargs["perm"])
        n = len(perm)
        if tr.out is not kt or n < 2 or perm[-2] != n - 1:
            return None
        k_pos = (*perm[:-2], perm[-1], perm[-2])
    cur: Var = mm1.out
    scale = 1.0
    masks: list[Var] = []
    biases: list[Var] = []
    mid = es[1:-1]
    i = 0
    # the composite's order: scale, then biases, then masks
    while i < len(mid) and mid[i].op in ("mul", "add", "where"):
        e = mid[i]
        if e.op == "mul":
            a, b = e.inputs
            s = _lit(b) if a is cur else _lit(a) if b is cur else None
            if s is None or s <= 0 or masks or biases:
                return None
            scale *= s
        elif e.op == "add":
            a, b = e.inputs
            bias = b if a is cur else a if b is cur else None
            if not isinstance(bias, Var) or bias is cur or masks:
                return None
            if bias.aval.dtype is not cur.aval.dtype or bias.aval.ndim > cur.aval.ndim:
                return None
            biases.append(bias)
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
    if any(x.aval.shape[-2:] != (lq, lk) for x in biases):
        return None  # (a bias broadcast along the queries or the keys: not loaded by tiles)
    consts = {id(cv): arr for cv, arr in lw.func.consts}
    causal = False
    for mk in masks:
        if mk.aval.shape[-2:] != (lq, lk):
            return None
        arr = consts.get(id(mk))
        if arr is not None and lq == lk and _is_causal(arr, lq):
            causal = True
    if causal:
        masks = [mk for mk in masks if id(mk) not in consts]
    k = tr.inputs[0] if tr is not None and tr.out not in used_outside(lw.func, eqns) else None
    if not isinstance(k, Var):
        k, k_pos = None, ()
    elif k_pos != tuple(range(len(k_pos))) and not _fits(
        lw, (k, k_pos), kt.aval.shape[:-2], mm2.out.aval.shape[:-2]
    ):
        k, k_pos = None, ()  # K's layout does not give [bk, D] windows: transpose it first
    return AttentionPlan(q, kt, v, mm2.out, scale, masks, tr, causal, k, k_pos, tuple(biases))


def _is_causal(arr: np.ndarray, n: int) -> bool:
    """Whether a constant mask is the composite's own causal mask (the same array, as traced)."""
    cm = causal_mask(n, n)
    return arr is cm or np.array_equal(arr, cm)


def _fits(lw: Lowering, via: Via, xbatch: tuple[int, ...], batch: tuple[int, ...]) -> bool:
    """:func:`via_fits` for an operand whose batch dims may broadcast over the kernel's (the
    K/V heads of grouped-query attention, one per group of query heads): its windows step
    with the batch dims it has and stay put along the ones it broadcasts."""
    spread = len(xbatch) == len(batch) and all(
        x in (1, b) for x, b in zip(xbatch, batch, strict=True)
    )
    return spread and via_fits(lw, via, xbatch, xbatch)


def _strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Batch strides of an operand over the output's batch dims (0 where it broadcasts)."""
    shape = (1,) * (len(out) - len(shape)) + shape
    res, s = [], 1
    for dd, o in zip(reversed(shape), reversed(out), strict=True):
        res.append(s if dd == o else 0)
        s *= dd
    return res[::-1]


def _batch_rows(shape: tuple[int, ...], rows: int, ob: tuple[int, ...]) -> Expr:
    """The first row of grid point ``%b0, %b1, ..`` (the output's batch dims ``ob`` larger
    than 1) in an operand of ``shape`` viewed as ``[.., rows]`` blocks of its batch."""
    st = _strides(shape[:-2], ob)
    e = Expr()
    for j, i in enumerate(i for i, n in enumerate(ob) if n > 1):
        if st[i]:
            e = e + Expr.reg(f"b{j}") * (st[i] * rows)
    return e


def _batch_dim(batch: tuple[int, ...], i: int, n: int) -> int:
    """The size of batch dims ``batch`` along axis ``i`` of ``n`` batch axes (numpy's
    broadcasting aligns them on the right)."""
    j = i - (n - len(batch))
    return batch[j] if j >= 0 else 1


def _claim_windows(lw: Lowering, group: list[Eqn], cands: list[Eqn]) -> list[Eqn]:
    """The head-split transposes (``x.reshape(L, H, D).transpose(1, 0, 2)``) of attention's
    Q, K or V that the kernel reads as ``[rows, D]`` windows of the untransposed buffer."""
    plan = match_attention(lw, group)
    if plan is None:
        return []
    batch = plan.out.aval.shape[:-2]
    took = []
    for e in cands:
        if e.op != "transpose":
            continue
        if e.out is plan.k:
            via = _compose(e, plan.k_pos)
            xbatch = plan.kt.aval.shape[:-2]
        elif e.out is plan.q or e.out is plan.v:
            via = _compose(e, tuple(range(e.out.aval.ndim)))
            xbatch = e.out.aval.shape[:-2]
        else:
            continue
        if via[0] in lw.var_buf and _fits(lw, via, xbatch, batch):
            took.append(e)
    return took


def _compose(e: Eqn, pos: tuple[int, ...]) -> Via:
    """An operand that is axes ``pos`` of transpose ``e``'s result, as axes of its input."""
    src = e.inputs[0]
    assert isinstance(src, Var)
    perm = tuple(e.kwargs["perm"])
    return src, tuple(perm[i] for i in pos)


GROUP_WINDOWS.append(_claim_windows)


def _window_in(
    lw: Lowering, x: Var, pos: tuple[int, ...], xbatch: tuple[int, ...], batch: tuple[int, ...]
) -> Via | None:
    """How the kernel reads the operand that is axes ``pos`` of ``x``: through the transpose
    that makes ``x`` when the group claimed it, else ``x`` itself (None: as it is)."""
    own = None if pos == tuple(range(len(pos))) else (x, pos)
    e = lw.windows.get(x)
    if e is None:
        return own
    via = _compose(e, pos)
    if not _fits(lw, via, xbatch, batch):
        # a kernel lowered since the claim gave the buffer another layout: copy after all
        lower_single(lw, e)
        return own
    return via


def _ub_bytes(
    h: int,
    bk: int,
    bq: int,
    dv: int,
    s: int,
    g: int = 1,
    io: int = 1,
    masked: bool = True,
    split: bool = False,
    scratch: int = 0,
    bias: bool = False,
) -> int:
    """UB of the vector cores' tiles: scores (P in place; with ``split`` one per query tile,
    see :func:`_split`), the mask's rows (``masked``), a bias tile (``bias``), the PV tile (the
    output's cast too), its
    f32 copy, an accumulator per query tile, the row statistics and the read-ahead's
    ``scratch`` (:func:`_scratch`); ``io`` slots for each transfer (2: double-buffered, which
    the Block level keeps where it fits)."""
    in_scores = split and bk * s >= 4 * dv  # the f32 copy of P V sits in its tile's scores
    shared = bias and _bias_in_otf(bk, dv, s, split)
    return (
        io * h * bk * s * (g if split else 1)
        + (h * max(bq, bk) if masked else 0)
        + (2 * h * bk if bk < bq and masked else 0)
        + (io * h * bk * s if bias and not shared else 0)
        + ((io - 1) * h * dv * 4 if shared else 0)  # the f32 copy, now loaded, doubled too
        + io * h * dv * s
        + (g + (0 if in_scores else 1)) * h * dv * 4
        + (6 + 6 * g) * 32 * (h // 8 + 1)
        + bk * 4
        + scratch
    )


def _bias_in_otf(bk: int, dv: int, s: int, split: bool) -> bool:
    """Whether a bias tile (``s``-byte elements) goes where the f32 copy of a P V tile goes:
    the bias is read before the step's softmax and the copy made after it, so one buffer
    serves both where the bias fits it and the copy has its own (not in the scores:
    :func:`_ub_bytes`). At ``bk`` 256 and ``Dv`` 128 in fp16 that is the 32 KiB which pairs
    of query tiles lack beside a bias of their own."""
    return s < 4 and not (split and bk * s >= 4 * dv) and bk * s <= 4 * dv


def _scratch(m: Machine, gq: int) -> int:
    """At most the UB bytes of :func:`_read_ahead`'s scratch tile (none for one query row)."""
    return m.ub_bytes // 16 if gq > 1 else 0


def _split(
    m: Machine, h: int, bk: int, bq: int, dv: int, s: int, g: int, masked: bool, bias: bool
) -> bool:
    """Whether each query tile of a point gets its own scores tile in UB: the next tile's S
    then loads while this one's softmax runs, instead of after its P has left."""
    scratch = _scratch(m, g * bq)
    need = _ub_bytes(h, bk, bq, dv, s, g, masked=masked, split=True, scratch=scratch, bias=bias)
    return g > 1 and need <= m.ub_bytes


LAG = 4
"""K/V steps between a tile's softmax and the update with its P V product (at most; fewer
where the machine has fewer cross-core flag ids than the rings' slots need, :func:`_lag`):
the cube makes the next steps' S while a step's S goes to the vector cores and its P comes
back. Measured on ``ascend910b`` at b4 h32 s2048 d128 (causal / full): 2 gives 778 /
1,370 µs, 3 gives 764 / 1,335, 4 gives 759 / 1,319."""


def _slots(lag: int) -> dict[str, int]:
    """Slots of each ring (by its slot register): S and P V are read one step after they are
    written and P ``lag`` steps after, so these let each producer wait only for its consumer's
    previous use of a slot. Each slot takes a cross-core flag id."""
    return {"ss": 2, "sp": lag, "so": 2}


def _lag(m: Machine) -> int:
    """The pipeline's depth on ``m``: ``LAG``, or less where the rings' slots would take more
    cross-core flag ids than ``m`` has (8 on the chip: S and P V take 2 each)."""
    return max(1, min(LAG, m.cross_flag_ids - 4))


def _l0_needs(p: AttentionPlan, bq: int, kc: int) -> tuple[int, int, int]:
    """Bytes of L0A, L0B and L0C for query tiles of ``bq`` rows and K/V chunks of ``kc``."""
    s = p.q.aval.dtype.itemsize
    d, dv = p.q.aval.shape[-1], p.v.aval.shape[-1]
    return (bq * d + bq * kc) * s, (d * kc + kc * dv) * s, (bq * kc + bq * dv) * 4


def _l0_fits(lw: Lowering, p: AttentionPlan, bq: int, kc: int, slots: int = 1) -> bool:
    """Whether L0A, L0B and L0C hold ``slots`` copies of the cube operands (2: each
    double-buffered, so the cube core runs a product ahead)."""
    m = lw.machine
    caps = (m.l0a_bytes, m.l0b_bytes, m.l0c_bytes)
    return all(slots * n <= c for n, c in zip(_l0_needs(p, bq, kc), caps, strict=True))


def _chunk(lw: Lowering, p: AttentionPlan, bq: int, bk: int) -> int:
    """Keys per cube product (``kc``): all ``bk`` of a K/V step where its operands fit L0,
    else the largest divisor of ``bk`` (at least ``bq``, a multiple of 16) that fits. The
    step's S then leaves L0C chunk by chunk into one ring slot, its P V accumulates over the
    chunks in L0C, and the vector cores see one ``[rows, bk]`` step: fewer, larger hand-offs
    and one P V tile per ``bk`` keys."""
    for kc in sorted(divisors(bk), reverse=True):
        if kc < min(bq, bk) or (kc < bk and kc % 16):
            continue
        if _l0_fits(lw, p, bq, kc):
            return kc
    return bk


def _problems(lw: Lowering, p: AttentionPlan, bq: int, bk: int, g: int) -> list[str]:
    """Why tiles (bq, bk, g) cannot run this attention (empty: they can): the grid, the cube
    operands in L0 (single-buffered), the vector tiles in UB and, for pairs or chunked K/V
    steps, L1."""
    m = lw.machine
    s = p.q.aval.dtype.itemsize
    lq, d = p.q.aval.shape[-2:]
    lk, dv = p.kt.aval.shape[-1], p.v.aval.shape[-1]
    kc = _chunk(lw, p, bq, bk)
    masked = p.causal or bool(p.masks)
    out = []
    if lq % bq:
        out.append(f"bq={bq} does not divide the {lq} queries")
    if lk % bk:
        out.append(f"bk={bk} does not divide the {lk} keys")
    elif p.causal and bq % bk and bk % bq:
        out.append(f"bk={bk} and bq={bq}: one must divide the other (the causal diagonal)")
    if bq % m.aiv_per_cluster and lq > 1:
        out.append(f"bq={bq} is odd: the two vector cores of a cluster each take half its rows")
    l0a, l0b, l0c = _l0_needs(p, bq, kc)
    l1 = 0
    if g == 2:
        l1 = (g * bq * d + 2 * bk * d) * s
    if kc < bk:
        l1 += (bk * d + bq * bk + bk * dv) * s  # a step's K, P and V, cut chunk by chunk
    for space, need, cap in (
        ("L0A", l0a, m.l0a_bytes),
        ("L0B", l0b, m.l0b_bytes),
        ("L0C", l0c, m.l0c_bytes),
        # one slot each
        (
            "UB",
            _ub_bytes(
                max(1, bq // m.aiv_per_cluster),
                bk,
                bq,
                dv,
                s,
                g,
                masked=masked,
                scratch=_scratch(m, g * bq),
                bias=bool(p.biases),
            ),
            m.ub_bytes,
        ),
        ("L1", l1, m.l1_bytes),
    ):
        if need > cap:
            out.append(f"{space} needs {need} bytes; {m.name} has {cap}")
    if g == 2 and (lq // bq % 2 or p.masks):
        out.append("g=2 needs an even number of query tiles and no mask operand")
    if g == 2 and p.causal and bk > bq and bk != g * bq:
        out.append(f"g=2 under a causal mask needs bk <= bq or bk = 2 bq (bk={bk}, bq={bq})")
    return out


def _tiles(lw: Lowering, p: AttentionPlan) -> tuple[int, int, int]:
    """(bq, bk, g): tiles whose cube operands fit L0 (single-buffered, a K/V step in
    chunks if need be) and whose vector tiles fit UB, keeping every cluster busy where the
    grid allows (without a mask, counting the runs its keys may split into), then moving the
    fewest K/V and P V bytes per score (causal: one of bq, bk divides the other); ``g = 2``
    query tiles per grid point where they fit and the busiest cluster gets less work, so
    each K/V tile loaded serves both."""
    m = lw.machine
    s = p.q.aval.dtype.itemsize
    lq, d = p.q.aval.shape[-2:]
    lk, dv = p.kt.aval.shape[-1], p.v.aval.shape[-1]
    batch = math.prod(p.out.aval.shape[:-2])
    masked = p.causal or bool(p.masks)
    best = None
    for bq in divisors(lq):
        if bq > 128:
            continue
        keys = divisors(lk)
        if p.causal:  # one divides the other: the diagonal is whole steps or inside one
            keys = [k for k in keys if bq % k == 0 or k % bq == 0]
        for bk in keys:
            # (512-key steps measured slower than 256: 1,683 against 1,431 µs without a mask)
            if bk > 256 or _problems(lw, p, bq, bk, 1):
                continue
            kc = _chunk(lw, p, bq, bk)
            # (without a mask, a grid of few points splits its keys instead: _splits)
            runs = 1 if masked else lk // bk
            busy = min(batch * (lq // bq) * runs, m.clusters)
            # bytes per score besides S and P, which every tiling hands over once: the K/V
            # loads (shared by bq queries) and the P V ring (one tile per bk keys)
            traffic = (d + dv) / bq + 2 * dv / bk
            # every operand double-buffered lets the cores run a tile ahead
            ub2 = _ub_bytes(
                max(1, bq // m.aiv_per_cluster),
                bk,
                bq,
                dv,
                s,
                io=2,
                masked=masked,
                scratch=_scratch(m, bq),
                bias=bool(p.biases),
            )
            double = _l0_fits(lw, p, bq, kc, 2) and ub2 <= m.ub_bytes
            key = (busy, -traffic, double, bq * bk, bq)
            if best is None or key > best[0]:
                best = (key, bq, bk)
    if best is None:
        return 0, 0, 0
    bq, bk = best[1], best[2]
    fits = lq // bq > 1 and not _problems(lw, p, bq, bk, 2)
    # pairs share K/V loads but deal coarser points: pair only if the busiest cluster
    # (causal points dealt longest first) gets less work
    better = fits and _makespan(p, bq, bk, 2, m.clusters) < _makespan(p, bq, bk, 1, m.clusters)
    return bq, bk, 2 if better else 1


def _user_tiles(lw: Lowering, p: AttentionPlan) -> tuple[int, int, int]:
    """The user's ``attn`` tiles (larger than an axis: shrunk to it), checked."""
    assert lw.cfg.attn is not None
    bq, bk, g, _ = lw.cfg.attn
    lq, lk = p.q.aval.shape[-2], p.kt.aval.shape[-1]
    bq, bk = min(bq, lq), min(bk, lk)
    problems = _problems(lw, p, bq, bk, g)
    if problems:
        auto = _tiles(lw, p)
        fit = f"tile=dict(attn={auto})" if auto[0] else "smaller tiles"
        raise TileError(
            f"attention tiles attn=({bq}, {bk}, {g}) for q {p.q.aval}, "
            + (f"k {p.k.aval}" if p.k is not None else f"kᵀ {p.kt.aval}")
            + f", v {p.v.aval}: "
            + "; ".join(problems),
            op="scaled_dot_product_attention",
            hint=f"tiles that fit: {fit}",
        )
    return bq, bk, g


PAIR_STEP = 0.94
"""Time of a K/V step of two query tiles that share its K/V loads, per tile, against one
tile's step, as the tile choice counts it. Measured on ``ascend910b`` without a mask (b4 h32
s2048 d128, 256-key steps in chunks of 128) with ``LAG`` 2: 1,370 against 1,458 µs (0.94);
with ``LAG`` 4 pairs gain more there (1,319 against 1,515 µs, 0.87), but on grids of a few
points per cluster the pairs' coarser points cost more balance than this model counts, so
the smaller saving stays. Under a causal mask with ``bk <= bq`` a pair also runs one extra,
fully masked, step per tile of its first tile; with ``bk = 2 bq`` no tile runs such a step,
the pair's work equals its tiles' alone, and the saving decides (759 against 960 µs for
single tiles of the same steps)."""


def _makespan(p: AttentionPlan, bq: int, bk: int, g: int, clusters: int) -> float:
    """The busiest cluster's work in one-tile K/V steps with ``g`` query tiles per point,
    the points dealt longest first (as the Block level deals a ``cost`` axis)."""
    lq = p.q.aval.shape[-2]
    lk = p.kt.aval.shape[-1]
    # causal: every tile of a point runs to the point's last diagonal
    per = [
        (-(-(q + 1) * g * bq // bk) if p.causal else lk // bk) * g for q in range(lq // (g * bq))
    ]
    costs = sorted(per * math.prod(p.out.aval.shape[:-2]), reverse=True)
    loads = [0.0] * clusters
    for c in costs:
        i = loads.index(min(loads))
        loads[i] += c * (PAIR_STEP if g == 2 else 1.0)
    return max(loads)


def lower_attention(lw: Lowering, eqns: list[Eqn]) -> bool:
    """Lower an attention group as one flash-attention cluster kernel (False: not handled)."""
    plan = match_attention(lw, eqns)
    if plan is None:
        return False
    need = sum(_slots(1).values())  # the rings' slots at the shallowest pipeline
    if lw.machine.cross_flag_ids < need:
        if lw.cfg.attn is not None:
            raise TileError(
                f"attention tiles attn={lw.cfg.attn[:3]}: attention as one kernel hands tiles "
                f"over through {need} cross-core flag ids at least, and the machine has "
                f"cross_flag_ids={lw.machine.cross_flag_ids}",
                op="scaled_dot_product_attention",
                hint=f"machine.replace(cross_flag_ids={need}), or no attn tiles: then its "
                "matmuls and softmax run as kernels of their own",
            )
        return False  # separate kernels: the score matrix goes through GM
    bq, bk, g = _user_tiles(lw, plan) if lw.cfg.attn is not None else _tiles(lw, plan)
    if not bq:
        return False
    if plan.transpose is not None and plan.k is None:
        lower_single(lw, plan.transpose)
    merge = window_out(lw, plan.out)
    splits = _user_splits(lw, plan, bk) or _splits(lw, plan, bq, bk, g)
    if merge is not None:
        lw.skip.add(id(merge[0]))
    _kernel(lw, plan, bq, bk, g, eqns[-1], merge[1] if merge else None, splits)
    return True


SPLIT_STEP = 1.0
"""What a grid point costs besides its K/V steps, in steps, as :func:`_splits` counts it (the
pipeline's fill and drain, the partial results' stores and their share of the combine)."""


def _splits(lw: Lowering, p: AttentionPlan, bq: int, bk: int, g: int) -> int:
    """Into how many runs of K/V steps each grid point's keys split when the grid has too
    few points to keep the clusters busy (decoding: a few query rows against a long cache).
    Each run makes an unnormalised partial output with its rows' max and sum, and a vector
    kernel combines them (:func:`_combine`). The divisor of the steps that gives the busiest
    cluster the least work, counting ``SPLIT_STEP`` per point; 1 under a mask (the runs'
    work would differ) or when splitting gains less than a tenth."""
    if p.causal or p.masks:
        return 1
    m = lw.machine
    lq, lk = p.q.aval.shape[-2], p.kt.aval.shape[-1]
    points = math.prod(p.out.aval.shape[:-2]) * (lq // (g * bq))
    steps = lk // bk

    def makespan(s: int) -> float:
        return -(-points * s // m.clusters) * (steps // s + SPLIT_STEP)

    best = min(divisors(steps), key=lambda s: (makespan(s), s))
    return best if makespan(best) < 0.9 * makespan(1) else 1


def _user_splits(lw: Lowering, p: AttentionPlan, bk: int) -> int:
    """The user's split of each point's keys (``attn=(bq, bk, g, s)``), checked; 0 when not
    given."""
    s = lw.cfg.attn[3] if lw.cfg.attn is not None else 0
    steps = p.kt.aval.shape[-1] // bk
    problems = []
    if s > 1 and (p.causal or p.masks):
        problems.append("a causal mask or a mask operand keeps one run per point")
    if s > 1 and steps % s:
        problems.append(f"s={s} does not divide the {steps} K/V steps of {bk} keys")
    if problems:
        raise TileError(
            f"attention tiles attn={lw.cfg.attn}: " + "; ".join(problems),
            op="scaled_dot_product_attention",
            hint="leave s out (the compiler splits where it pays) or use s=1",
        )
    return s


def _combine(
    lw: Lowering,
    p: AttentionPlan,
    parts: tuple[str, str, str],
    splits: int,
    batch: list[tuple[str, int]],
    out_at: tuple[str, Expr, Expr],
    loc: SourceLoc | None,
) -> None:
    """The vector kernel that merges the ``splits`` partial results of split K/V runs: per
    row, from the runs' unnormalised outputs ``O_s``, maxima ``m_s`` and sums ``l_s`` (f32,
    run ``s`` at rows ``s*R ..``), ``M = max m_s``, ``O = Σ e^(m_s-M) O_s / Σ e^(m_s-M) l_s``
    (one run at a time, as flash attention merges its K/V tiles), cast to the output's
    dtype. Its grid is the attention's ``batch`` registers and tiles of query rows, so it
    stores where the attention would have (``out_at``: a head merge's window too)."""
    m = lw.machine
    f32 = dt.float32
    lq, dv = p.out.aval.shape[-2:]
    rows = p.out.aval.size // dv
    po, pm, pl = parts
    # query rows per tile: all vector cores busy where the rows allow, and the tiles in UB
    points = rows // lq
    fit = [r for r in divisors(lq) if (3 * r * dv * 4 + 8 * 32 * (r // 8 + 1)) <= m.ub_bytes // 2]
    tr = max([r for r in fit if points * (lq // r) >= m.n_aiv] or fit[:1] or [1])
    ob, o_row, o_col = out_at
    # the row of the flattened [batch.., lq] queries (the runs' partial results' order)
    row = _batch_rows(p.out.aval.shape, lq, p.out.aval.shape[:-2]) + Expr.reg("r") * tr

    def ub(name: str, shape: tuple[int, int]) -> TileVar:
        return TileVar(name, Space.UB, f32, shape)

    o, os_ = ub("o", (tr, dv)), ub("os", (tr, dv))
    mx, ms, mn = ub("m", (tr, 1)), ub("ms", (tr, 1)), ub("mn", (tr, 1))
    ls, lss, a, b = ub("l", (tr, 1)), ub("ls", (tr, 1)), ub("a", (tr, 1)), ub("b", (tr, 1))
    at = Expr.reg("s") * rows + row
    merge_one = (
        TLoad(ms, pm, at, Expr(), loc),
        TLoad(lss, pl, at, Expr(), loc),
        TLoad(os_, po, at, Expr(), loc),
        TOp("TMAX", mn, (mx, ms), loc),
        TOp("TSUB", a, (mx, mn), loc),
        TOp("TEXP", a, (a,), loc),
        TOp("TSUB", b, (ms, mn), loc),
        TOp("TEXP", b, (b,), loc),
        TOp("TMUL", ls, (ls, a), loc),
        TOp("TMUL", lss, (lss, b), loc),
        TOp("TADD", ls, (ls, lss), loc),
        TOp("TMUL", o, (o, a), loc),
        TOp("TMUL", os_, (os_, b), loc),
        TOp("TADD", o, (o, os_), loc),
        TOp("TMOV", mx, (mn,), loc),
    )
    body: list[Stmt] = [
        TLoad(mx, pm, row, Expr(), loc),
        TLoad(ls, pl, row, Expr(), loc),
        TLoad(o, po, row, Expr(), loc),
        For("s", Expr.of(1), Expr.of(splits), 1, merge_one),
        TOp("TDIV", o, (o, ls), loc),
    ]
    res = o
    if p.out.aval.dtype is not f32:
        res = TileVar("ot", Space.UB, p.out.aval.dtype, (tr, dv))
        body.append(TOp("TCVT", res, (o,), loc))
    body.append(TStore(ob, o_row + Expr.reg("r") * tr, o_col, res, loc))
    lw.add_kernel(
        Kernel(
            lw.fresh("attention_combine"),
            "vector",
            (*batch, ("r", lq // tr)),
            (Section("aiv", tuple(body)),),
            (("rows", tr), ("cols", dv), ("splits", splits)),
            loc=loc,
        )
    )


def _kernel(
    lw: Lowering,
    p: AttentionPlan,
    bq: int,
    bk: int,
    g: int,
    last: Eqn,
    merge: Via | None,
    splits: int = 1,
) -> None:
    m = lw.machine
    lag = _lag(m)
    ring_slots = _slots(lag)
    loc = last.loc
    d_t = p.q.aval.dtype
    f32 = dt.float32
    lq, d = p.q.aval.shape[-2:]
    lk, dv = p.kt.aval.shape[-1], p.v.aval.shape[-1]
    ob = p.out.aval.shape[:-2]
    keep = [i for i, n in enumerate(ob) if n > 1]
    # a grid point owns g query tiles of bq rows (%q counts groups of g)
    gq = g * bq
    bgrid = [(f"b{j}", ob[i]) for j, i in enumerate(keep)]
    if p.biases:
        # the batch axes a bias is shared along go innermost (row-major): the clusters that
        # read one bias tile then run at once and share it through L2 instead of reading
        # it from HBM once per batch row
        def bias_shared(j: int) -> bool:
            i = keep[j]
            return all(_batch_dim(b.aval.shape[:-2], i, len(ob)) == 1 for b in p.biases)

        bgrid = [bgrid[j] for j in sorted(range(len(keep)), key=bias_shared)]
    grid = [*bgrid, ("q", lq // gq)]
    # split K/V runs (a grid with too few points: decoding): run %kv reads steps
    # %kv*ns .. of the keys and leaves a partial result for _combine
    ns = lk // bk // splits
    kv0 = Expr.reg("kv") * (ns * bk) if splits > 1 else Expr()
    if splits > 1:
        grid.append(("kv", splits))

    def batch_rows(shape: tuple[int, ...], rows: int) -> Expr:
        return _batch_rows(shape, rows, ob)

    def gm(v: Var, rows: int, cols: int) -> str:
        """The buffer of ``v`` in rows of ``cols``: its own, or a copy where a kernel lowered
        before gave it another layout (a slice of the input that is also the keys)."""
        buf = lw.buffer(v)
        want = (v.aval.size // cols, cols)
        return buf if lw.view(buf, want) == want else relayout(lw, buf, want, loc)

    def place(
        v: Var, rows: int, cols: int, via: Via | None, xb: tuple[int, ...] | None = None
    ) -> tuple[str, Expr, Expr]:
        """The buffer of operand ``v``'s ``[.., rows, cols]`` tiles and the row and column
        where its tiles of batch ``%b..`` start: its own buffer, or through ``via`` a
        window of the value it transposes (head split and merge without a copy); ``xb``,
        the operand's batch dims (``v``'s by default), may broadcast over the output's."""
        if via is None:
            return gm(v, rows, cols), batch_rows(v.aval.shape, rows), Expr()
        xbatch = v.aval.shape[:-2] if xb is None else xb
        view, row, col = batch_window(via[0].aval.shape, via[1], xbatch, ob)
        buf = lw.buffer(via[0])
        lw.view(buf, view)
        return buf, row, col

    ident = tuple(range(len(ob) + 2))
    qb, q_row, q_col = place(p.q, lq, d, _window_in(lw, p.q, ident, p.q.aval.shape[:-2], ob))
    vb, v_row, v_col = place(p.v, lk, dv, _window_in(lw, p.v, ident, p.v.aval.shape[:-2], ob))
    ob_, o_row, o_col = place(p.out, lq, dv, merge)
    out_at = (ob_, o_row, o_col)  # (the combine of split runs stores there too)
    q_row = q_row + Expr.reg("q") * gq
    o_row = o_row + Expr.reg("q") * gq
    # S and P V cross in the inputs' dtype (the fixpipe rounds them once, as the reference
    # rounds its logits): half the fixpipe and vector bytes of f32. The fixpipe also scales
    # S (its scalar pre-quantisation scale, in f32 before the rounding): no vector pass.
    scale = None if p.scale == 1.0 else float(p.scale)
    # rows of a ring slot: the point's query rows; with one query row, a row per vector core
    # (both compute it, and each hands its P over without writing the other's)
    rr = 2 if gq == 1 else gq
    ws: dict[str, str] = {}
    for reg, name, cols in (("ss", "ws_s", bk), ("sp", "ws_p", bk), ("so", "ws_o", dv)):
        rows = m.clusters * ring_slots[reg] * rr
        ws[reg] = lw.new_buffer(name, d_t, rows * cols)
        lw.views[ws[reg]] = (rows, cols)
    ws_s, ws_p, ws_o = ws["ss"], ws["sp"], ws["so"]
    parts: tuple[str, str, str] = ("", "", "")
    prow = Expr()
    if splits > 1:
        # the split runs' partial results, run %kv's at rows %kv*R .. of [splits*R, ..]
        rows_all = math.prod(ob) * lq
        po, pm, pl = (
            lw.new_buffer(name, f32, splits * rows_all * cols)
            for name, cols in (("po", dv), ("pm", 1), ("pl", 1))
        )
        parts = (po, pm, pl)
        for b_, cols in zip(parts, (dv, 1, 1), strict=True):
            lw.views[b_] = (splits * rows_all, cols)
        prow = Expr.reg("kv") * rows_all + batch_rows(p.out.aval.shape, lq) + Expr.reg("q") * gq

    def ring(slot: str, t: int = 0) -> Expr:
        return Expr.reg("blk") * (ring_slots[slot] * rr) + Expr.reg(slot) * rr + t * bq

    j = Expr.reg("j")
    kc = _chunk(lw, p, bq, bk)
    nc = bk // kc  # cube products per K/V step
    # causal with bk > bq: the diagonal lies inside a step, at %u = q mod (bk/bq) query
    # tiles from its start; %nq = ceil((q+1) bq / bk) steps reach it
    wide = p.causal and bk > bq
    r = bq // bk if bk <= bq else 1  # K/V steps per query tile (causal, bk <= bq)
    rk = bk // bq if wide else 1  # query tiles per K/V step (wide)
    where: list[Stmt] = []
    if wide and g == 1:
        where = [
            SOp("SDIV", "nq", (Expr.reg("q") + rk, Expr.of(rk))),
            SOp("SMOD", "u", (Expr.reg("q"), Expr.of(rk))),
        ]
    elif wide:
        # a pair of query tiles per step (bk = 2 bq): both reach the diagonal in step %q,
        # tile t at query tile t of it
        where = [SOp("SADD", "nq", (Expr.reg("q"), Expr.of(1)))]

    def steps(t: int) -> Expr:
        """The K/V tiles query tile t of the point reads (causal: up to its diagonal)."""
        if not p.causal:
            return Expr.of(ns)
        if wide:
            return Expr.reg("nq")
        return Expr.reg("q") * (g * r) + (t + 1) * r

    n = steps(g - 1)
    # Software pipeline, lag K/V tiles deep: iteration j makes S_j (and on the vector cores
    # P_j) while the P V product of tile j-lag goes through the cube, so the hand-offs'
    # latency hides behind the softmax of the tiles in between. On the vector cores 0/1-trip
    # loops on %hs = [j < n] and %hp = [j >= lag] pick the stages (the cube core runs fill,
    # steady and drain loops instead, below). Under a causal mask a point's earlier query
    # tiles reach their diagonal sooner: %a<t> = [j < n_t].
    stages: list[Stmt] = [
        *gate("hs", n - j),
        SOp("SMAX", "hp", (j - (lag - 1), Expr())),
        SOp("SMIN", "hp", (Expr.reg("hp"), Expr.of(1))),
    ]
    early = list(range(g - 1)) if p.causal and not wide else []
    # (the vector cores' masking reads them; the cube core does not)
    gates = [x for t in early for x in gate(f"a{t}", steps(t) - j)]

    count: tuple[Stmt, ...] = (
        SOp("SMOV", "cs", (Expr(),)),
        SOp("SMOV", "cp", (Expr(),)),
    )

    def stage(reg: str, cnt: str, slots: tuple[str, ...], body: list[Stmt]) -> For:
        head: list[Stmt] = [SOp("SMOD", x, (Expr.reg(cnt), Expr.of(ring_slots[x]))) for x in slots]
        tail = SOp("SADD", cnt, (Expr.reg(cnt), Expr.of(1)))
        return For("i" + reg, Expr(), Expr.reg(reg), 1, (*head, *body, tail))

    # the cube core
    q0 = TileVar("q0", Space.L0A, d_t, (bq, d))
    k0 = TileVar("k0", Space.L0B, d_t, (d, kc))
    s0 = TileVar("s", Space.L0C, f32, (bq, kc))
    p0 = TileVar("p0", Space.L0A, d_t, (bq, kc))
    v0 = TileVar("v0", Space.L0B, d_t, (kc, dv))
    o0 = TileVar("o", Space.L0C, f32, (bq, dv))
    # a K/V step in several cube products (nc > 1): its K, P and V tiles go to L1 whole
    # (one transfer each) and MTE1 cuts each product's chunk into L0
    if p.k is not None:
        # K tiles [bk, D] as they are in GM; MTE1 transposes them into L0B (a step in
        # several products: each product's chunk)
        k1 = TileVar("k1", Space.L1, d_t, (bk, d))
        kin = _window_in(lw, p.k, p.k_pos, p.kt.aval.shape[:-2], ob)
        kb, k_row, k_col = place(p.k, lk, d, kin, p.kt.aval.shape[:-2])
        k_load: list[Stmt] = [TLoad(k1, kb, k_row + kv0 + j * bk, k_col, loc)]
        if nc == 1:
            k_load.append(TOp("TTRANS", k0, (k1,), loc))
    else:
        kt_b, kt_row = gm(p.kt, d, lk), batch_rows(p.kt.aval.shape, d)
        if nc == 1:
            k_load = [TLoad(k0, kt_b, kt_row, kv0 + j * bk, loc)]
        else:
            k1 = TileVar("k1", Space.L1, d_t, (d, bk))
            k_load = [TLoad(k1, kt_b, kt_row, kv0 + j * bk, loc)]
    q_in: list[Stmt]
    if g == 1:
        q_in = [TLoad(q0, qb, q_row, q_col, loc)]  # stays in L0A for the whole point
    else:
        # the point's query tiles wait in L1; each S product moves its tile into L0A
        q1 = TileVar("q1", Space.L1, d_t, (gq, d))
        q_in = [TLoad(q1, qb, q_row, q_col, loc)]

    # A query tile that stopped at its diagonal still goes through its point's last steps
    # (with every score masked on the vector cores), so both tiles hand over the same ring
    # slots in the same order: a hand-off skipped on one side would desynchronise the flags
    # of the slot the tiles share.
    v_at = v_row + kv0 + j * bk - lag * bk
    if nc == 1:
        v_load: list[Stmt] = [TLoad(v0, vb, v_at, v_col, loc)]
    else:
        v1 = TileVar("v1", Space.L1, d_t, (bk, dv))
        p1 = TileVar("p1", Space.L1, d_t, (bq, bk))
        v_load = [TLoad(v1, vb, v_at, v_col, loc)]
    # Where the first and last lag steps make only one kind of product, consecutive products
    # take the two sets of L0 tiles in turn when every L0 tile has one shape (D = kc = Dv)
    # and the operands wait in L1 (query tiles of a pair, K/V steps in chunks).
    turns = g > 1 and nc > 1 and d == kc == dv
    sets = ((q0, k0, s0), (p0, v0, o0))

    def products(kind: str, alternate: bool) -> list[Stmt]:
        """A step's S (``kind`` "s") or P V products, in that order, on the first set of L0
        tiles, or taking the sets in turn."""
        out: list[Stmt] = []
        held: dict[int, int] = {}  # the query tile each L0A tile holds (g > 1)
        i = 0
        for t in range(g):
            acc = sets[t % 2 if alternate else 1][2]
            for c in range(nc):
                x = i % 2 if alternate else (0 if kind == "s" else 1)
                a, b, r = sets[x]
                i += 1
                if kind == "s":
                    if g > 1 and held.get(x) != t:
                        out.append(TOp("TEXTRACT", a, (q1, Expr.of(t * bq), Expr()), loc))
                        held[x] = t
                    if nc > 1:
                        op = "TEXTRACT_T" if p.k is not None else "TEXTRACT"
                        at = (
                            (Expr.of(c * kc), Expr())
                            if p.k is not None
                            else (Expr(), Expr.of(c * kc))
                        )
                        out.append(TOp(op, b, (k1, *at), loc))
                    out += [
                        TOp("TMATMUL", r, (a, b), loc),
                        TStore(ws_s, ring("ss", t), Expr.of(c * kc), r, loc, scale),
                    ]
                    continue
                held.pop(x, None)
                if nc == 1:
                    out += [
                        TLoad(a, ws_p, ring("sp", t), Expr(), loc),
                        TOp("TMATMUL", acc, (a, b), loc),
                    ]
                else:
                    # P V accumulates over the step's chunks in L0C
                    if c == 0:
                        out.append(TLoad(p1, ws_p, ring("sp", t), Expr(), loc))
                    out += [
                        TOp("TEXTRACT", a, (p1, Expr(), Expr.of(c * kc)), loc),
                        TOp("TEXTRACT", b, (v1, Expr.of(c * kc), Expr()), loc),
                        TOp("TMATMUL_ACC" if c else "TMATMUL", acc, (a, b), loc),
                    ]
            if kind == "o":
                out.append(TStore(ws_o, ring("so", t), Expr(), acc, loc))
        return out

    def interleaved() -> list[Stmt]:
        """The steady loop's products: S on the first set, P V on the second, in turn."""
        s_all, o_all = products("s", False), products("o", False)
        cut = [i + 1 for i, x in enumerate(s_all) if isinstance(x, TStore)]
        # a P V tile's store goes with its last product: behind the next S store, the fixpipe
        # (in order) would hold the P V accumulator past the next tile's first product
        cuts = [
            i + 2 if i + 1 < len(o_all) and isinstance(o_all[i + 1], TStore) else i + 1
            for i, x in enumerate(o_all)
            if isinstance(x, TOp) and x.op.startswith("TMATMUL")
        ]
        out: list[Stmt] = []
        a0 = b0 = 0
        for a1, b1 in zip(cut, cuts, strict=True):
            out += [*s_all[a0:a1], *o_all[b0:b1]]
            a0, b0 = a1, b1
        return out + s_all[a0:] + o_all[b0:]

    # Three loops over j: the first lag steps make S only, the steady loop makes step j's S
    # and step j-lag's P V, and the last lag steps P V only. The steady loop's body is
    # straight-line code in which the two kinds of product alternate.
    pick_s = [SOp("SMOD", "ss", (Expr.reg("cs"), Expr.of(ring_slots["ss"])))]
    pick_o = [SOp("SMOD", x, (Expr.reg("cp"), Expr.of(ring_slots[x]))) for x in ("sp", "so")]
    count_s = SOp("SADD", "cs", (Expr.reg("cs"), Expr.of(1)))
    count_o = SOp("SADD", "cp", (Expr.reg("cp"), Expr.of(1)))
    loops = (
        SOp("SMIN", "jf", (n, Expr.of(lag))),
        SOp("SMAX", "jd", (n, Expr.of(lag))),
        For("j", Expr(), Expr.reg("jf"), 1, (*pick_s, *k_load, *products("s", turns), count_s)),
        For(
            "j",
            Expr.of(lag),
            n,
            1,
            (*pick_s, *pick_o, *k_load, *v_load, *interleaved(), count_s, count_o),
        ),
        For("j", Expr.reg("jd"), n + lag, 1, (*pick_o, *v_load, *products("o", turns), count_o)),
    )
    aic = Section("aic", (*where, *q_in, *loops), count)

    # the vector cores: rows %sub*h .. of each query tile of the point
    h = bq // m.aiv_per_cluster if bq > 1 else 1
    sub = Expr.reg("sub") * h if bq > 1 else Expr()

    def ub(name: str, dtype: dt.DType, shape: tuple[int, int]) -> TileVar:
        return TileVar(name, Space.UB, dtype, shape)

    neg = ub("ninf", d_t, (1, bk))
    split = _split(m, h, bk, bq, dv, d_t.itemsize, g, p.causal or bool(p.masks), bool(p.biases))
    pre: list[Stmt] = [*count, TOp("TEXPANDS", neg, (-math.inf,), loc)]
    tri = ub("tril", dt.bool_, (h, max(bq, bk)))
    start: list[Stmt] = list(where)
    tril = lw.const_buffer("tril", causal_mask(bk, bk)) if wide else ""
    if wide and g == 1:
        # the diagonal step's mask: rows %u*bq + .. of a lower-triangular [bk, bk] mask
        start.append(TLoad(tri, tril, Expr.reg("u") * bq + sub, Expr(), loc))
    elif p.causal and not wide:
        # the rows of a lower-triangular [bq, bq] mask this vector core takes, once per point
        start.append(TLoad(tri, lw.const_buffer("tril", causal_mask(bq, bq)), sub, Expr(), loc))
    shifts: list[Stmt] = []
    soft_all: list[Stmt] = []
    update_all: list[Stmt] = []
    fin: list[Stmt] = []
    for t in range(g):
        sfx = "" if g == 1 else str(t)  # one query tile: the names of the golden text
        mx, ls = ub(f"m{sfx}", f32, (h, 1)), ub(f"l{sfx}", f32, (h, 1))
        acc, al = ub(f"acc{sfx}", f32, (h, dv)), ub(f"alpha{sfx}", f32, (h, 1))
        # the rescale factors of the last lag tiles: the update of tile j-lag uses the oldest
        hist = [
            ub(f"alpha{sfx}_{i}" if sfx else f"alpha{i}", f32, (h, 1)) for i in range(1, lag + 1)
        ]
        x = ub(f"x{sfx}" if split else "x", d_t, (h, bk))
        soft: list[Stmt] = [TLoad(x, ws_s, ring("ss", t) + sub, Expr(), loc)]
        # the biases before the masks, as the composite adds them (a masked score is -inf
        # whatever its bias)
        for bv in p.biases:
            brow = batch_rows(bv.aval.shape, lq) + Expr.reg("q") * gq + t * bq + sub
            shared = _bias_in_otf(bk, dv, d_t.itemsize, split)
            bt = ub("otf" if shared else "bias", d_t, (h, bk))
            soft += [
                TLoad(bt, gm(bv, lq, lk), brow, kv0 + j * bk, loc),
                TOp("TADD", x, (x, bt), loc),
            ]
        if p.causal:
            # only the last bq/bk tiles of the row reach past the diagonal: mask those with
            # the matching columns of the lower-triangular tile (no DMA per step)
            # (wide: the last step is the diagonal one)
            jj = j - Expr.reg("nq") + 1 if wide else j - (Expr.reg("q") * g + t) * r
            mk = tri
            sel: list[Stmt] = []
            if wide and g > 1:
                # a pair: tile t's rows t*bq + .. of the mask, loaded at its diagonal step
                sel.append(TLoad(tri, tril, sub + t * bq, Expr(), loc))
            if r > 1:
                mk = ub("mask", dt.bool_, (h, bk))
                sel += [
                    SOp("SMOV", "jj", (jj,)),
                    TOp("TEXTRACT", mk, (tri, Expr(), Expr.reg("jj") * bk), loc),
                ]
            soft += [*gate("dg", jj + 1)]
            if t in early:
                # a tile that stopped at its diagonal sees every later step's scores masked
                soft += [
                    SOp("SMIN", "dg", (Expr.reg("dg"), Expr.reg(f"a{t}"))),
                    SOp("SSUB", "dz", (Expr.of(1), Expr.reg(f"a{t}"))),
                    For("idz", Expr(), Expr.reg("dz"), 1, (TOp("TEXPANDS", x, (-math.inf,), loc),)),
                ]
            soft.append(
                For(
                    "idg",
                    Expr(),
                    Expr.reg("dg"),
                    1,
                    (*sel, TOp("TSEL", x, (mk, x, neg), loc)),
                )
            )
        for i, mv in enumerate(p.masks):
            mb = gm(mv, lq, lk)
            mrow = batch_rows(mv.aval.shape, lq) + Expr.reg("q") * gq + t * bq + sub
            mt = ub(f"mask{i}", dt.bool_, (h, bk))
            soft += [TLoad(mt, mb, mrow, j * bk, loc), TOp("TSEL", x, (mt, x, neg), loc)]
        # P = exp(S - m) in the inputs' dtype (the reference's softmax precision); the row
        # statistics and the accumulator in f32
        mj, mn, rs = ub("mj", d_t, (h, 1)), ub("mn", f32, (h, 1)), ub("rs", d_t, (h, 1))
        mjf, mnx, rsf = mj, mn, rs
        if d_t is not f32:
            mjf, mnx = ub("mjf", f32, (h, 1)), ub("mnx", d_t, (h, 1))
            rsf = ub("rsf", f32, (h, 1))
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
            TStore(ws_p, ring("sp", t) + (Expr.reg("sub") if bq == 1 else sub), Expr(), x, loc),
        ]
        ot = ub("ot", d_t, (h, dv))
        update: list[Stmt] = [TLoad(ot, ws_o, ring("so", t) + sub, Expr(), loc)]
        otf = ot
        if d_t is not f32:
            # the f32 copy goes where this tile's scores were (their P has left by then)
            # when it fits there: UB for a score tile per query tile
            # the f32 copy goes where this tile's scores were (their P has left by then)
            otf = ub(x.name if split and bk * d_t.itemsize >= 4 * dv else "otf", f32, (h, dv))
            update.append(TOp("TCVT", otf, (ot,), loc))
        update += [
            TOp("TMUL", acc, (acc, hist[-1]), loc),
            TOp("TADD", acc, (acc, otf), loc),
        ]
        shifts += [
            *(TOp("TMOV", hist[i], (hist[i - 1],), loc) for i in range(lag - 1, 0, -1)),
            TOp("TMOV", hist[0], (al,), loc),
        ]
        soft_all += soft
        update_all += update
        if splits > 1:
            # a split run's partial result: its unnormalised output, row max and row sum
            at = prow + t * bq + sub
            fin += [TStore(b, at, Expr(), x_, loc) for b, x_ in zip(parts, (acc, mx, ls))]
        else:
            fin.append(TOp("TDIV", acc, (acc, ls), loc))
            out_t = acc
            if d_t is not f32:
                out_t = ub("ot", d_t, (h, dv))
                fin.append(TOp("TCVT", out_t, (acc,), loc))
            fin.append(TStore(ob_, o_row + t * bq + sub, o_col, out_t, loc))
        # the running max starts finite (in the dtype) so fully masked rows of a tile give
        # exp(-inf) = 0
        start += [
            TOp("TEXPANDS", mx, (-6e4 if d_t is not f32 else -1e30,), loc),
            TOp("TEXPANDS", ls, (0.0,), loc),
            TOp("TEXPANDS", al, (1.0,), loc),
            *(TOp("TEXPANDS", a, (1.0,), loc) for a in hist[:-1]),
            TOp("TEXPANDS", acc, (0.0,), loc),
        ]
    body: list[Stmt] = [
        *stages,
        *gates,
        *shifts,
        stage("hs", "cs", ("ss", "sp"), soft_all),
        stage("hp", "cp", ("so",), update_all),
    ]
    if bq == 1:
        # one query row: both vector cores compute it; the first stores the output
        fin = stores_by_first_sub(fin)
    if gq > 1 and lw.buffers[qb][2] == "in":
        body += _read_ahead(m, grid, (qb, q_row, q_col), gq, d, d_t)
    aiv = Section("aiv", (*start, For("j", Expr(), n + lag, 1, tuple(body)), *fin), tuple(pre))
    flops = 2 * math.prod(ob) * lq * lk * (d + dv)
    lw.add_kernel(
        Kernel(
            lw.fresh("attention"),
            "attention",
            tuple(grid),
            (aic, aiv),
            (
                ("bq", bq),
                ("bk", bk),
                *((("kc", kc),) if nc > 1 else ()),
                *((("g", g),) if g > 1 else ()),
                *((("splits", splits),) if splits > 1 else ()),
            ),
            "attn_tile",
            "cluster",
            loc,
            flops // 2 if p.causal else flops,
            (
                # each query tile of a point is its own part: the vector cores start a
                # tile's softmax while the cube makes the next tile's S, and the cube its
                # P V while they make the next tile's P
                Ring(ws_s, "aic", "ss", ring_slots["ss"], g),
                Ring(ws_p, "aiv", "sp", ring_slots["sp"], g),
                Ring(ws_o, "aic", "so", ring_slots["so"], g),
            ),
            # causal: query tile q runs q+1 K/V steps; deal the long ones first
            "q" if p.causal else "",
        )
    )
    if splits > 1:
        _combine(lw, p, parts, splits, grid[:-2], out_at, loc)


def _read_ahead(
    m: Machine,
    grid: list[tuple[str, int]],
    q: tuple[str, Expr, Expr],
    rows: int,
    d: int,
    d_t: dt.DType,
) -> list[Stmt]:
    """The vector cores' read, at step 1 of a grid point (after its first scores), of the
    query rows that their cluster's cube core loads at the start of the next point
    (``%nx_<reg>`` from the Block level; none past the grid's end, ``%nx`` = 0). Each vector
    core reads half of the ``rows``, a few at a time, into a scratch tile nothing uses (reads
    only: no flags). The cube core's load then finds them in L2 (at ``l2_read`` per core)
    instead of waiting for HBM (``gm_read``) before the point's first product: causal
    attention at b4 h32 s2048 d128 759 → 743 µs, without a mask 1,319 → 1,311 µs. (Reading
    the next point's K/V steps as well was slower, 757 and 1,414 µs: without a mask every
    cluster would read the K/V that the other points of its head read anyway, and the L2's
    bandwidth is what the kernel runs short of.) Only for queries that are the program's
    input, whose first read goes to HBM: queries an earlier kernel wrote are in L2 already
    (the decoder block's, after the rotary epilogue), and reading them twice cost 1.6 µs."""
    ren = {r: "nx_" + r for r, _ in grid}

    def nxt(e: Expr) -> Expr:
        return Expr.make([(ren.get(r, r), c) for r, c in e.terms], e.const)

    buf, row, col = q
    half = rows // m.aiv_per_cluster  # each vector core's share
    cap = m.ub_bytes // 16
    x = max(r for r in divisors(half) if r * d * d_t.itemsize <= cap or r == 1)
    t = TileVar("pfq", Space.UB, d_t, (x, d))
    at = nxt(row) + Expr.reg("sub") * half + Expr.reg("pr")
    j = Expr.reg("j")
    return [
        # %pq = [j == 1 and there is a next point]
        *gate("pq", Expr.of(2) - j),
        SOp("SMIN", "pq", (Expr.reg("pq"), j)),
        SOp("SMIN", "pq", (Expr.reg("pq"), Expr.reg("nx"))),
        For(
            "ipq",
            Expr(),
            Expr.reg("pq"),
            1,
            (For("pr", Expr(), Expr.of(half), x, (TLoad(t, buf, at, nxt(col)),)),),
        ),
    ]


def _group_rule(lw: Lowering, eqns: list[Eqn]) -> bool:
    if sum(e.op == "matmul" for e in eqns) != 2:
        return False
    return lower_attention(lw, eqns)


GROUP_RULES.append(_group_rule)
