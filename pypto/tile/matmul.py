"""Matmul on the cube cores, with its epilogue fused on the vector cores of each cluster.

A matmul ``[.., M, K] @ [.., K, N]`` becomes a cluster kernel over output tiles ``[m1, n1]``
(batch dims first in the grid; with a 2-D right operand the left operand's batch dims fold
into M). The cube core loads ``[m1, k1]`` and ``[k1, n1]`` blocks to L1, cuts them into
``[m0, k0]``/``[k0, n0]`` steps in L0A/L0B and accumulates in L0C (f32; int32 for int8), the
first step with ``TMATMUL``, the rest with ``TMATMUL_ACC``. Then either

* the fixpipe stores the accumulator to the result, cast once to its dtype (f16/bf16/f32 with
  no epilogue), or
* it hands the tile to the cluster's two vector cores through a GM workspace ring (each takes
  its ``%sub``-th half of the rows) which apply the fused epilogue — bias, activation, cast,
  residual: the row-kernel rules of :mod:`pypto.tile.rules` — and store. int8 results take
  this path too: the fixpipe cannot narrow int32, the vector unit does (wrapping, as numpy).

An operand that is a transpose of its last two axes, read by nothing else (``x @ w.T`` with a
weight stored ``[out, in]``, the ``xᵀ``/``wᵀ`` of a backward pass), is not copied: the cube core
loads the stored ``[k, m]``/``[n, k]`` blocks and ``TEXTRACT_T`` cuts each L0 step out of them
transposed. A batched operand split into heads (``[s, h*d] -> [h, s, d]``, or its ``.T``) is
read the same way, each batch index stepping the columns of the stored projection. A product
whose only reader transposes it, ``(a @ b).T``, is computed as ``b.T @ a.T`` into the
transpose's result.

float32 operands run on the cube at half the fp16 rate (the chip's fp32 fractal is 16x8);
int32 has no cube path and runs on the vector cores as multiply-adds of columns by rows.

Tile sizes: ``pto.set_cube_tile_shapes([m0, m1], [k0, k1], [n0, n1])`` (checked: they divide
the axes, fit L0A/L0B/L1 double-buffered and L0C, 32-byte aligned), or chosen by a small cost
model (cube, MTE1, MTE2 and fixpipe time per tile times the waves over the cube cores) among the
divisors of M, K and N and, without an epilogue, among whole fractals that need not divide M
and N: the last tile row or column is then partial and runs on its real extent (its own static
shapes, picked per grid point by 0/1-trip loops). So awkward sizes (1000 x 3000 x 700) get full
tiles in one wave (24 of 176 x 175) instead of equal tiles in two (40 of 125 x 140). The vector
cores read the operand blocks into L2 ahead of the cube, so that its loads hit L2 rather than
wait for HBM: each block once per band of tile rows, beside an epilogue too
(:func:`_read_ahead`; ``tile=dict(read_ahead=False)`` turns it off). A product without an
epilogue whose output tiles are too few for the clusters, over a long K, may be split along K
(:func:`_lower_split`; ``tile=dict(split_k=S)`` asks for ``S`` runs): each run of each tile is
a grid point, and a vector kernel adds the runs' float32 partial products.

The chosen tiles are in the kernel's header; the efficiency (roofline cycles / simulated
cycles) comes from a timing-only profile — on ``ascend910b`` with 4096 x 4096 x 4096 for the
headline number (``f.profile(a, b, numerics=False).efficiency``):

    >>> import numpy as np, pypto as pto
    >>> a = np.zeros((256, 512), np.float16)
    >>> f = pto.jit(lambda x, y: x @ y, machine="tiny")
    >>> print(f.lower(a, a.T.copy()).tile_ir.kernels[0].header())
    kernel @matmul grid(m=2, n=1) cube_tile(m=128, k=128, n=128, ...) on cluster
    >>> f.profile(a, a.T.copy(), numerics=False).bound
    'cube'
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pypto import dtypes as dt
from pypto.core.errors import SourceLoc, TileError, at_location
from pypto.graph.ir import Eqn, Var
from pypto.isa.ir import Expr, Space
from pypto.isa.verify import cast_ok, matmul_result
from pypto.npu.machine import Machine
from pypto.ops.table import OPS, AVal, register_rule
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
from pypto.tile.layout import tile_bytes
from pypto.tile.lower import (
    GROUP_RULES,
    GROUP_WINDOWS,
    HEAD_EPILOGUES,
    LAYOUT_OPS,
    KernelRule,
    Lowering,
    RowBuilder,
    RowPlan,
    RowRule,
    Variant,
    batch_window,
    divisors,
    lower_row_kernel,
    lower_single,
    matmul_reads_in_place,
    merge_variants,
    plan_row,
    relayout,
    ub_bytes_needed,
    used_outside,
    window,
    window_out,
)

__all__ = ["CubeTiles", "Geom", "choose_cube_tiles", "cube_tiles", "geometry", "lower_matmul"]


@dataclass(frozen=True)
class Geom:
    """A matmul's iteration space: grid batch dims with each operand's batch strides (0 where
    it broadcasts), and the 2-D views ``A [a_rows, K]``, ``B [b_rows, N]``, ``C [c_rows, N]``."""

    batch: tuple[int, ...]
    a_strides: tuple[int, ...]
    b_strides: tuple[int, ...]
    c_strides: tuple[int, ...]
    M: int
    K: int
    N: int

    @property
    def points(self) -> int:
        return math.prod(self.batch)

    def rows(self, strides: tuple[int, ...], scale: int) -> Expr:
        """The row offset of the grid point's batch in a view with ``scale`` rows per batch."""
        e = Expr()
        for i, s in enumerate(strides):
            if s:
                e = e + Expr.reg(f"b{i}") * (s * scale)
        return e


def geometry(a: tuple[int, ...], b: tuple[int, ...]) -> Geom:
    """The :class:`Geom` of ``a @ b`` (numpy matmul shapes)."""
    ash = (1, *a) if len(a) == 1 else a
    bsh = (*b, 1) if len(b) == 1 else b
    K, N = ash[-1], bsh[-1]
    if len(bsh) == 2:  # one right operand for every row: fold the batch into M
        return Geom((), (), (), (), math.prod(ash[:-1]), K, N)
    nd = max(len(ash), len(bsh)) - 2
    ab = (1,) * (nd - len(ash) + 2) + ash[:-2]
    bb = (1,) * (nd - len(bsh) + 2) + bsh[:-2]
    ob = tuple(max(x, y) for x, y in zip(ab, bb, strict=True))

    def strides(shape: tuple[int, ...]) -> list[int]:
        out, s = [], 1
        for d, o in zip(reversed(shape), reversed(ob), strict=True):
            out.append(s if d == o else 0)
            s *= d
        return out[::-1]

    keep = [i for i, o in enumerate(ob) if o > 1]
    sa, sb, sc = strides(ab), strides(bb), strides(ob)
    return Geom(
        tuple(ob[i] for i in keep),
        tuple(sa[i] for i in keep),
        tuple(sb[i] for i in keep),
        tuple(sc[i] for i in keep),
        ash[-2],
        K,
        N,
    )


@dataclass(frozen=True)
class CubeTiles:
    """L0 and L1 tile sizes of m, k and n (each L1 size a multiple of its L0 size)."""

    m0: int
    m1: int
    k0: int
    k1: int
    n0: int
    n1: int
    reuse: int = 1
    """output tiles in a row that share one ``[m1, K]`` block of A kept in L1 (chosen
    automatically when the whole K of A fits, cutting the A traffic by this factor)"""
    split: int = 1
    """runs of whole K blocks that K is cut into, each its own grid point (split K: a vector
    kernel adds the runs' float32 partial products up, :func:`_lower_split`)"""

    def text(self) -> tuple[tuple[str, int], ...]:
        extra: tuple[tuple[str, int], ...] = (("reuse", self.reuse),) if self.reuse > 1 else ()
        extra += (("split", self.split),) if self.split > 1 else ()
        return (
            ("m", self.m1),
            ("k", self.k1),
            ("n", self.n1),
            ("m0", self.m0),
            ("k0", self.k0),
            ("n0", self.n0),
            *extra,
        )


def _acc_dtype(d: dt.DType) -> dt.DType | None:
    return matmul_result(d, d)


def _aligned(l0: int, size: int, d: dt.DType, m: Machine) -> bool:
    """A tile of ``l0`` along a contiguous axis of ``size`` keeps rows 32-byte aligned: it is
    the whole axis, a multiple of 32 bytes, or the axis itself is not (an awkward axis has no
    aligned divisor; its equal tiles are padded by the cube to its 16-element fractal)."""
    s = d.itemsize
    return l0 == size or (l0 * s) % m.align_bytes == 0 or (size * s) % m.align_bytes != 0


def _needs(t: CubeTiles, d: dt.DType, m: Machine) -> list[tuple[str, int, int, str]]:
    """(buffer, bytes needed, capacity, what) for the cube buffers of tiles ``t``."""
    s = d.itemsize
    acc = 4
    return [
        ("L0A", 2 * t.m0 * t.k0 * s, m.l0a_bytes, f"two {t.m0}x{t.k0} {d.short} tiles"),
        ("L0B", 2 * t.k0 * t.n0 * s, m.l0b_bytes, f"two {t.k0}x{t.n0} {d.short} tiles"),
        ("L0C", t.m1 * t.n1 * acc, m.l0c_bytes, f"a {t.m1}x{t.n1} accumulator"),
        (
            "L1",
            2 * (t.m1 * t.k1 + t.k1 * t.n1) * s,
            m.l1_bytes,
            f"two {t.m1}x{t.k1} and two {t.k1}x{t.n1} {d.short} blocks",
        ),
    ]


def _estimate(
    t: CubeTiles, g: Geom, d: dt.DType, m: Machine, vec: Callable[[int, int], float] | None
) -> tuple[float, float]:
    """Cycles of the whole matmul under a simple model: per output tile the slowest of cube,
    MTE1, MTE2 (L2 bandwidth shared by the active cores) and the epilogue, plus what does
    not overlap (the fixpipe when L0C holds one accumulator), times the waves; and the
    cube and DMA work of one tile (to break ties)."""
    s = d.itemsize
    depth = {dt.int8: m.cube_k_i8, dt.float32: m.cube_k_f16 // 2}.get(d, m.cube_k_f16)
    r = t.reuse
    points = g.points * -(-g.M // t.m1) * -(-g.N // t.n1) // r
    active = min(points, m.clusters)
    waves = -(-points // m.clusters)
    steps = (g.K // t.k0) * (t.m1 // t.m0) * (t.n1 // t.n0)
    frac = math.ceil(t.m0 / m.cube_m) * math.ceil(t.k0 / depth) * math.ceil(t.n0 / m.cube_n)
    cube = steps * (m.cube_latency + frac)
    mte1 = (g.K // t.k0) * (
        (t.m1 // t.m0) * (m.local_latency + t.m0 * t.k0 * s / m.l1_l0a)
        + (t.n1 // t.n0) * (m.local_latency + t.k0 * t.n0 * s / m.l1_l0b)
    )
    bw = min(m.l2_read, m.l2_bytes_per_cycle / active)
    if r > 1:  # A once per r tiles
        mte2 = (g.K // t.k1) * (m.dma_latency + t.n1 * t.k1 * s / bw)
        mte2 += (m.dma_latency + t.m1 * g.K * s / bw) / r
    else:
        mte2 = (g.K // t.k1) * (2 * m.dma_latency + (t.m1 + t.n1) * t.k1 * s / bw)
    fix = m.dma_latency + t.m1 * t.n1 * 4 / m.l2_write
    single_acc = 2 * t.m1 * t.n1 * 4 > m.l0c_bytes
    epi = vec(t.m1, t.n1) if vec is not None else 0.0
    tile = max(cube, mte1, mte2, epi) + (fix if single_acc else 0.0)
    # the pipeline fills once (the first blocks come from HBM before the cube can start) and
    # drains once (the cube's last block after the last load): both shrink with k1 (counted
    # without an epilogue, whose vector pipeline fills and drains on its own)
    ends = 0.0
    if vec is None:
        fill = 2 * m.dma_latency + (t.m1 + t.n1) * t.k1 * s / min(m.gm_read, bw)
        ends = fill + cube / (g.K // t.k1)
    return waves * r * tile + m.dma_latency * 4 + fix + ends, cube + mte1 + mte2


def _k_loop(
    loads: Sequence[Stmt],
    cuts: Sequence[Stmt],
    mms: Callable[[str], tuple[Stmt, ...]],
    KB: int,
    KK: int,
    end: Expr | None = None,
) -> For:
    """The K loops of one output tile: ``KB`` L1 blocks (``loads``), each ``KK`` L0 steps
    (``cuts``, then the matmuls ``mms(op)`` on registers ``%kb``/``%kk``); ``end``: the
    blocks when they are a register's (at most ``KB``: a split K's last run is shorter)."""
    step: list[Stmt]
    if KB * KK == 1:
        step = [*cuts, *mms("TMATMUL")]
    else:
        # the first K step starts the accumulator, the others add to it: 0/1-trip loops
        # on %z = min(step index, 1) pick the instruction
        step = [
            *cuts,
            SOp("SMIN", "z", (Expr.reg("kb") * KK + Expr.reg("kk"), Expr.of(1))),
            For("i0", Expr.reg("z"), Expr.of(1), 1, mms("TMATMUL")),
            For("i1", Expr(), Expr.reg("z"), 1, mms("TMATMUL_ACC")),
        ]
    inner = For("kk", Expr(), Expr.of(KK), 1, tuple(step))
    return For("kb", Expr(), Expr.of(KB) if end is None else end, 1, (*loads, inner))


def _by_flag(flag: str, site: str, full: Sequence[Stmt], part: Sequence[Stmt]) -> list[Stmt]:
    """``full`` when ``%flag`` is 0 and ``part`` when it is 1: two 0/1-trip loops (the code
    of a full tile extent and of the partial last one)."""
    reg = Expr.reg(flag)
    return [
        For(f"{flag}f{site}", reg, Expr.of(1), 1, tuple(full)),
        For(f"{flag}p{site}", Expr(), reg, 1, tuple(part)),
    ]


def _edges(g: Geom, m1: int, n1: int) -> bool:
    """Whether tiles ``[m1, n1]`` leave a partial last tile row or column."""
    return bool(g.M % m1 or g.N % n1)


def _extents(size: int, tile: int) -> list[int]:
    """The extents of an axis' tiles: ``[tile]``, and the partial last one when it is shorter."""
    last = size - (-(-size // tile) - 1) * tile
    return [tile] if last == tile else [tile, last]


def _runs(K: int, k1: int, split: int) -> tuple[int, int]:
    """(K blocks per run, runs) when K's ``k1`` blocks are cut into at most ``split`` runs of
    equal length but the last."""
    kb = K // k1
    per = -(-kb // split)
    return per, -(-kb // per)


def _split_geom(g: Geom, runs: int, k: int) -> Geom:
    """The iteration space of one K run of ``k`` columns: the runs as an outer batch axis that
    A and B do not step (the run's K offset does) and the partial products do (each run holds
    every batch's ``[M, N]``)."""
    return Geom(
        (runs, *g.batch),
        (0, *g.a_strides),
        (0, *g.b_strides),
        (g.points, *g.c_strides),
        g.M,
        k,
        g.N,
    )


def _split_sum_cycles(m: Machine, runs: int, rows: int, cols: int) -> float:
    """Cycles of the vector kernel that adds ``runs`` float32 partial products ``[rows, cols]``
    (read and written at the vector cores' L2 rates, shared) and of the barrier before it."""
    nbytes = (runs + 1) * rows * cols * 4
    rate = min(m.l2_bytes_per_cycle, m.n_aiv * min(m.l2_read, m.ub_gm))
    return m.barrier_latency + (runs + 2) * m.dma_latency + nbytes / rate


SPLIT_MARGIN = 1.15
"""How much cheaper than the best unsplit tiles a split K must look under the estimate: the
sum kernel's barrier and a second launch are what the simple model knows least well."""


def _split_total(
    total: float,
    t: CubeTiles,
    g: Geom,
    gs: Geom,
    d: dt.DType,
    m: Machine,
    cold: tuple[bool, bool],
) -> float:
    """The estimate of split-K tiles ``t`` (``total`` from :func:`_estimate` on the runs'
    geometry ``gs``) with the partial products' sum and :data:`SPLIT_MARGIN`. Of an operand
    that comes from HBM (``cold``: A's, B's), each point's blocks are first touches, which
    its cluster's cores read at the per-core miss rate (``gm_read``; the vector cores read
    ahead) and all of them at HBM's bandwidth; without a split, the few large points re-read
    blocks that others brought into L2."""
    ca, cb = cold
    if ca or cb:
        points = gs.points * -(-g.M // t.m1) * -(-g.N // t.n1)
        waves = -(-points // m.clusters)
        blocks = gs.K // t.k1
        # the cube core and, reading ahead, its vector cores each miss at gm_read
        rate = min(m.l2_read, m.gm_read * (1 + m.aiv_per_cluster))
        miss, hit = (t.m1 * ca + t.n1 * cb), (t.m1 * (not ca) + t.n1 * (not cb))
        first = blocks * 2 * m.dma_latency + gs.K * d.itemsize * (miss / rate + hit / m.l2_read)
        hbm = g.points * (g.M * ca + g.N * cb) * g.K * d.itemsize / m.hbm_bytes_per_cycle
        total = max(total, waves * first, hbm)
    return (total + _split_sum_cycles(m, t.split, g.points * g.M, g.N)) * SPLIT_MARGIN


SPLIT_MIN_K = 1024
"""K below which a matmul is never split (its runs would be shorter than their overheads)."""


def _split_candidates(g: Geom, m: Machine) -> list[int]:
    """Run counts worth trying for a matmul without an epilogue: none (``[1]``) unless K is
    long and tiles of 128 x 128 would leave clusters idle."""
    tiles = g.points * -(-g.M // 128) * -(-g.N // 128)
    if g.K < SPLIT_MIN_K or tiles >= m.clusters:
        return [1]
    # the partial products stay in L2 for the sum
    most = m.l2_bytes // 4 // (g.points * g.M * g.N * 4)
    return [1, *(r for r in range(2, min(m.clusters, most) + 1) if r * tiles <= 2 * m.clusters)]


def choose_cube_tiles(
    g: Geom,
    d: dt.DType,
    m: Machine,
    epilogue: Callable[[int, int], tuple[bool, float]] | None,
    epilogue_edges: bool = False,
    k_part: int = 0,
    splits: Sequence[int] = (1,),
    cold: tuple[bool, bool] = (True, True),
) -> CubeTiles:
    """The cheapest tiles under :func:`_estimate` among divisors of M, K and N that fit the
    buffers (double-buffered L0A/L0B/L1; with an epilogue, even m1 and its UB need), and
    edge tiles that need not divide M and N (with an epilogue only where ``epilogue_edges``,
    every extent's rows even and its UB need met). With ``k_part``, A is read in parts of
    that many K columns (:func:`_shifted_parts`): K blocks divide a part, and no reuse.
    ``splits``: the counts of K runs to try (split K, :func:`_lower_split`; a count the
    blocks of a K tile do not cut into is skipped for it), the partial products' sum
    counted too; ``cold``: whether A and B are read from HBM (:func:`_split_total`)."""
    kdiv = k_part or g.K
    # tiles under 16 waste the cube's 16-wide fractal unless the axis is that short
    cands_m = [x for x in divisors(g.M) if min(16, g.M) <= x <= 512]
    cands_n = [x for x in divisors(g.N) if min(16, g.N) <= x <= 1024 and _aligned(x, g.N, d, m)]
    if epilogue is None or epilogue_edges:
        # edge tiles: a whole number of fractals that need not divide the axis (the last
        # tile row or column is partial), so awkward sizes get full-sized tiles and waves
        cands_m += [x for x in range(64, min(g.M, 513), 16) if g.M % x]
        cands_n += [x for x in range(64, min(g.N, 1025), 16) if g.N % x and _aligned(x, g.N, d, m)]
    cands_k = [x for x in divisors(kdiv) if min(16, kdiv) <= x <= 1024 and _aligned(x, g.K, d, m)]
    s = d.itemsize
    best: tuple[tuple[int, int, float], CubeTiles] | None = None
    for m0 in cands_m:
        for n0 in cands_n:
            if m0 * n0 * 4 > m.l0c_bytes:
                continue
            vec = None
            if epilogue is not None:
                ms, ns = _extents(g.M, m0), _extents(g.N, n0)
                if g.M > 1 and any(x % m.aiv_per_cluster for x in ms):
                    continue
                if not all(epilogue(me, ne)[0] for me in ms for ne in ns):
                    continue

                def vec(a: int, b: int) -> float:
                    return epilogue(a, b)[1]

            for k0 in cands_k:
                # L0A and L0B double-buffered, as _needs counts them (inline: this loop is
                # the tile choice's hot spot)
                if 2 * m0 * k0 * s > m.l0a_bytes or 2 * k0 * n0 * s > m.l0b_bytes:
                    continue
                # L1 blocks: one L0 step, or the most that fit (fewer, longer DMAs)
                js = [
                    j
                    for j in divisors(kdiv // k0)
                    if (j == 1 or k0 * j <= 4096) and 2 * (m0 + n0) * k0 * j * s <= m.l1_bytes
                ]
                for j, split in (
                    (j, sp) for j in (sorted({js[0], js[-1]}) if js else []) for sp in splits
                ):
                    per, runs = _runs(g.K, k0 * j, split)
                    if runs != split:
                        continue
                    gs = g if runs == 1 else _split_geom(g, runs, per * k0 * j)
                    reuse = [1]
                    a_block = 2 * (m0 * g.K + k0 * j * n0) * d.itemsize
                    if (
                        epilogue is None
                        and a_block <= m.l1_bytes
                        and not _edges(g, m0, n0)
                        and not k_part
                        and runs == 1
                    ):
                        reuse += [r for r in divisors(g.N // n0) if 1 < r <= 8]
                    for r in reuse:
                        tr = CubeTiles(m0, m0, k0, k0 * j, n0, n0, r, runs)
                        # ties (an epilogue sets the pace) go to the least cube and DMA work
                        total, work = _estimate(tr, gs, d, m, vec)
                        if runs > 1:
                            total = _split_total(total, tr, g, gs, d, m, cold)
                        # then rows of B and C that fill an L2 line (wider n)
                        key = (round(total), -min(n0 * d.itemsize, m.l2_line_bytes), work)
                        if best is None or key < best[0]:
                            best = (key, tr)
    if best is None:
        raise TileError(
            f"no cube tiles fit a [{g.M},{g.K}] @ [{g.K},{g.N}] {d.short} matmul on {m.name}",
            op="matmul",
        )
    return best[1]


def _check_user(
    user: tuple[tuple[int, int], tuple[int, int], tuple[int, int]],
    g: Geom,
    d: dt.DType,
    m: Machine,
    fit: Callable[[], CubeTiles],
    epilogue: Callable[[int, int], tuple[bool, float]] | None,
) -> CubeTiles:
    (m0, m1), (k0, k1), (n0, n1) = user
    # tiles larger than an axis shrink to it (a small matmul under a global setting)
    m0, m1 = min(m0, g.M), min(m1, g.M)
    k0, k1 = min(k0, g.K), min(k1, g.K)
    n0, n1 = min(n0, g.N), min(n1, g.N)
    t = CubeTiles(m0, m1, k0, k1, n0, n1)
    problems = []
    for axis, size, l0, l1 in (("m", g.M, m0, m1), ("k", g.K, k0, k1), ("n", g.N, n0, n1)):
        if size % l1 or l1 % l0:
            problems.append(f"{axis}=[{l0}, {l1}] does not divide {axis} = {size}")
    for axis, size, l0 in (("k", g.K, k0), ("n", g.N, n0)):
        if not _aligned(l0, size, d, m):
            problems.append(
                f"{axis}0 = {l0} {d.short} elements = {l0 * d.itemsize} bytes is not a "
                f"multiple of {m.align_bytes}"
            )
    for sp, need, cap, what in _needs(t, d, m):
        if need > cap:
            problems.append(f"{sp} needs {need} bytes ({what}); {m.name} has {cap}")
    if epilogue is not None and not problems:
        if m1 % m.aiv_per_cluster and g.M > 1:
            problems.append(
                f"m1 = {m1} is odd: the two vector cores of a cluster each take half its rows"
            )
        elif not epilogue(m1, n1)[0]:
            h = max(1, m1 // m.aiv_per_cluster)
            problems.append(f"the epilogue's [{h},{n1}] tiles do not fit UB ({m.ub_bytes} bytes)")
    if problems:
        f = fit()
        raise TileError(
            f"cube tiles m=[{m0}, {m1}] k=[{k0}, {k1}] n=[{n0}, {n1}] for a "
            f"[{g.M},{g.K}] @ [{g.K},{g.N}] {d.short} matmul: " + "; ".join(problems),
            op="set_cube_tile_shapes",
            hint=f"tiles that fit: pto.set_cube_tile_shapes([{f.m0}, {f.m1}], "
            f"[{f.k0}, {f.k1}], [{f.n0}, {f.n1}])",
        )
    return t


def _cube_fits(
    lw: Lowering,
    g: Geom,
    d: dt.DType,
    epilogue: Callable[[int, int], tuple[bool, float]] | None,
    epilogue_edges: bool = False,
) -> bool:
    """Whether any cube tiles fit this matmul (the automatic choice finds some)."""
    try:
        choose_cube_tiles(g, d, lw.machine, epilogue, epilogue_edges)
    except TileError:
        return False
    return True


def cube_tiles(
    lw: Lowering,
    g: Geom,
    d: dt.DType,
    epilogue: Callable[[int, int], tuple[bool, float]] | None = None,
    epilogue_edges: bool = False,
    k_part: int = 0,
    split_ok: bool = False,
    cold: tuple[bool, bool] = (True, True),
) -> CubeTiles:
    """The user's cube tiles, checked, or the automatic choice; where ``split_ok`` (no
    epilogue), K runs too: the user's ``split_k``, or the automatic choice among
    :func:`_split_candidates` (only with automatic tiles; ``cold``: whether A and B come
    from HBM)."""
    m = lw.machine
    user = lw.cfg.split_k if split_ok and lw.cfg.split_k != 1 else None
    if not split_ok or lw.cfg.split_k == 1 or k_part:
        splits = [1]
    elif user is not None:
        splits = [user]
    else:
        splits = [1] if lw.cfg.cube is not None else _split_candidates(g, m)

    def auto(splits: Sequence[int] = splits) -> CubeTiles:
        return choose_cube_tiles(g, d, m, epilogue, epilogue_edges, k_part, splits, cold)

    def no_runs(k1: int) -> TileError:
        assert user is not None
        kb = g.K // k1
        ok = sorted({_runs(g.K, k1, r)[1] for r in range(1, kb + 1)})
        shown = str(ok) if len(ok) <= 12 else str(ok[:12])[:-1] + ", ...]"
        return TileError(
            f"split_k={user} for a [{g.M},{g.K}] @ [{g.K},{g.N}] {d.short} matmul: its "
            f"{kb} K blocks of {k1} do not cut into {user} runs of equal length but the last",
            op="matmul",
            hint=f"split_k in {shown}, or other cube tiles",
        )

    if lw.cfg.cube is not None:
        t = _check_user(lw.cfg.cube, g, d, m, lambda: auto([1]), epilogue)
        if user is not None:
            runs = _runs(g.K, t.k1, user)[1]
            if runs != user:
                raise no_runs(t.k1)
            t = replace(t, split=runs)
        return t
    if user is not None:
        try:
            return auto()
        except TileError:
            raise no_runs(auto([1]).k1) from None
    return auto()


# ---------------------------------------------------------------- GM operands
def _operand(
    lw: Lowering, v: Var, view: tuple[int, int], tile: tuple[int, int], row: Expr, col: Expr
) -> tuple[str, Expr, Expr]:
    """The buffer of ``v`` seen as ``view`` and the window of a ``tile`` at (row, col); a copy
    in that layout when its buffer is laid out otherwise."""
    buf = lw.buffer(v)
    lay = lw.view(buf, view)
    w = window(lay, view[1], tile, row, col)
    if w is None or w[0] != tile:
        buf = relayout(lw, buf, view, None)
        w = window(lw.views[buf], view[1], tile, row, col)
        assert w is not None
    return buf, w[1], w[2]


# ---------------------------------------------------------------- the cube section
@dataclass(frozen=True)
class _Order:
    """The order of a cube kernel's output tiles: row-major ``(m, n)``, or with the grid
    flattened to ``%t`` and cut into bands of ``group`` tile rows walked column by column, so
    the tiles one wave runs on the clusters share A and B blocks in L2 (CANN's grouped order)."""

    grid: tuple[tuple[str, int], ...]
    head: tuple[Stmt, ...]
    lin: Expr  # the grid point's linear index
    group: int = 1
    """the band height in tile rows (1: row-major)"""

    @staticmethod
    def of(
        g: Geom, mt: int, nt: int, clusters: int, swizzle: int | None = None, runs: int = 1
    ) -> _Order:
        """The order of ``mt x nt`` tiles per batch (``runs`` > 1: split K, the run ``%ks``
        the outermost grid axis)."""
        batch = [(f"b{i}", n) for i, n in enumerate(g.batch)]
        if runs > 1:
            batch.insert(0, ("ks", runs))
        # the user's band height (tile=dict(swizzle=G)), else about √clusters; a divisor of mt
        most = swizzle if swizzle is not None else math.isqrt(clusters)
        group = max(x for x in divisors(mt) if x <= most)
        lin, inner = Expr.reg("m") * nt + Expr.reg("n"), mt * nt
        if group == 1 or nt == 1:
            grid = (*batch, ("m", mt), ("n", nt))
            head: tuple[Stmt, ...] = ()
        else:
            band = group * nt
            t = Expr.reg("t")
            grid = (*batch, ("t", mt * nt))
            head = (
                SOp("SDIV", "mb", (t, Expr.of(band))),
                SOp("SMOD", "r", (t, Expr.of(band))),
                SOp("SMOD", "mi", (Expr.reg("r"), Expr.of(group))),
                SOp("SDIV", "n", (Expr.reg("r"), Expr.of(group))),
                SOp("SMOV", "m", (Expr.reg("mb") * group + Expr.reg("mi"),)),
            )
            lin = t
        for reg, n in reversed(batch):
            lin = lin + Expr.reg(reg) * inner
            inner *= n
        return _Order(grid, head, lin, group if len(grid) == len(batch) + 1 else 1)

    def slot(self) -> list[Stmt]:
        """``%slot``: the grid point's iteration count on its cluster, modulo 2 (the ring copy)."""
        return [
            SOp("SMOV", "lin", (self.lin,)),
            SOp("SDIV", "it", (Expr.reg("lin"), Expr.reg("nblk"))),
            SOp("SMOD", "slot", (Expr.reg("it"), Expr.of(2))),
        ]


@dataclass
class _Cube:
    """Emits the cube section of one matmul: K loops into accumulators ``acc[i][j]``."""

    g: Geom
    t: CubeTiles
    d: dt.DType
    loc: SourceLoc | None
    ta: bool = False
    """A is stored transposed (``[K, M]``): its L1 blocks are ``[k1, m1]`` and ``TEXTRACT_T``
    cuts the ``[m0, k0]`` steps out of them"""
    tb: bool = False
    """B is stored transposed (``[N, K]``): L1 blocks ``[n1, k1]``, steps by ``TEXTRACT_T``"""
    part_k: int = 0
    """A is a concatenation along K of row windows of one buffer, ``part_k`` columns each (a
    shifted-rows convolution's taps, :class:`_Shifted`): the operand is the lowest part's
    window, and K block ``%kb`` is read its part's shift further down, at its column within
    the part"""
    radix: tuple[tuple[int, int], ...] = ()
    """the parts' row shifts as digits: (count, rows per step) from the outermost; part ``p``
    is ``lift`` plus ``p``'s mixed-radix digits times those rows"""
    lift: int = 0
    """part 0's rows below the lowest part's (where the operand's window starts), when some
    steps go up: a transposed convolution's parts, the input gradient's"""
    kb_end: Expr | None = None
    """the K blocks of this grid point when a register holds them (split K: the run's; the
    operands' windows start at the run)"""

    def digits(self, part: Expr) -> tuple[list[Stmt], Expr]:
        """Scalar code that splits the part index ``part`` into its digits (``%pd<i>``; the
        outermost is what the divisions leave, ``%pq``), and the part's row shift."""
        out: list[Stmt] = []
        shift = Expr()
        for i in range(len(self.radix) - 1, 0, -1):
            n, rows = self.radix[i]
            out += [
                SOp("SMOD", f"pd{i}", (part, Expr.of(n))),
                SOp("SDIV", "pq", (part, Expr.of(n))),
            ]
            shift = shift + Expr.reg(f"pd{i}") * rows
            part = Expr.reg("pq")
        if self.radix:
            shift = part * self.radix[0][1] + shift + self.lift
        return out, shift

    def part_regs(self) -> tuple[list[Stmt], Expr]:
        """Scalar code at the top of K block ``%kb``: its part's row shift, and its block
        within the part (``%kc``) when a part has several."""
        cb = self.part_k // self.t.k1
        kb = Expr.reg("kb")
        out: list[Stmt] = []
        if cb > 1:
            out += [SOp("SDIV", "pt", (kb, Expr.of(cb))), SOp("SMOD", "kc", (kb, Expr.of(cb)))]
            kb = Expr.reg("pt")
        sops, shift = self.digits(kb)
        return out + sops, shift

    def shifted_load(self, a1: TileVar, a: tuple[str, Expr, Expr]) -> list[Stmt]:
        """The scalar code and the load of K block ``%kb``'s window of A, read in parts."""
        sops, shift = self.part_regs()
        col = Expr.reg("kc") * self.t.k1 if self.part_k > self.t.k1 else Expr()
        return [*sops, TLoad(a1, a[0], a[1] + shift, a[2] + col, self.loc)]

    def span(self) -> int:
        """The rows between the lowest part's window and the highest one's."""
        return sum((n - 1) * abs(rows) for n, rows in self.radix)

    def im2col_body(
        self,
        a: tuple[str, Expr, Expr],
        b: tuple[str, Expr, Expr],
        stores: list[Stmt],
        b_whole: bool,
    ) -> list[Stmt]:
        """The K loops of a grid point whose A is read in parts, with every part's window
        in one L1 block: ``m1 + span`` rows of each K chunk loaded once, and each part's L0
        steps cut from it at the part's row shift (as the chip's image-to-column load cuts a
        convolution's windows from a feature map in L1). ``b_whole``: B's ``[K, n1]`` block
        is loaded once per grid point too."""
        t, d = self.t, self.d
        P = math.prod(n for n, _ in self.radix)
        CB, KK = self.part_k // t.k1, t.k1 // t.k0
        im, jn = t.m1 // t.m0, t.n1 // t.n0
        a1 = TileVar("a1", Space.L1, d, self.a_block(t.m1 + self.span(), t.k1))
        b1 = TileVar("b1", Space.L1, d, self.b_block(self.g.K if b_whole else t.k1, t.n1))
        a0 = [TileVar(f"a0_{i}", Space.L0A, d, (t.m0, t.k0)) for i in range(im)]
        b0 = [TileVar(f"b0_{j}", Space.L0B, d, (t.k0, t.n0)) for j in range(jn)]
        acc = self.accs()
        kc, pt, kk = Expr.reg("kc"), Expr.reg("pt"), Expr.reg("kk")
        sops, shift = self.digits(pt)
        b_row = pt * self.part_k + kc * t.k1  # B's row of this part's chunk
        cuts: list[Stmt] = [self.a_cut(a0[i], a1, shift + i * t.m0, kk * t.k0) for i in range(im)]
        b_at = b_row + kk * t.k0 if b_whole else kk * t.k0
        cuts += [self.b_cut(b0[j], b1, b_at, Expr.of(j * t.n0)) for j in range(jn)]

        def mms(op: str) -> tuple[Stmt, ...]:
            return tuple(
                TOp(op, acc[i][j], (a0[i], b0[j]), self.loc) for i in range(im) for j in range(jn)
            )

        step: list[Stmt] = [
            *cuts,
            SOp("SMIN", "z", ((kc * P + pt) * KK + kk, Expr.of(1))),
            For("i0", Expr.reg("z"), Expr.of(1), 1, mms("TMATMUL")),
            For("i1", Expr(), Expr.reg("z"), 1, mms("TMATMUL_ACC")),
        ]
        inner = For("kk", Expr(), Expr.of(KK), 1, tuple(step))
        per_part: list[Stmt] = [*sops]
        if not b_whole:
            per_part.append(self.load_b(b1, b, b_row))
        parts = For("pt", Expr(), Expr.of(P), 1, (*per_part, inner))
        chunks = For("kc", Expr(), Expr.of(CB), 1, (self.load_a(a1, a, kc * t.k1), parts))
        head = [self.load_b(b1, b, Expr())] if b_whole else []
        return [*head, chunks, *stores]

    def a_cut(self, dst: TileVar, a1: TileVar, row: Expr, k: Expr) -> TOp:
        """The L0A step of A at (row, k) of its L1 block."""
        if self.ta:
            return TOp("TEXTRACT_T", dst, (a1, k, row))
        return TOp("TEXTRACT", dst, (a1, row, k))

    def b_cut(self, dst: TileVar, b1: TileVar, k: Expr, col: Expr) -> TOp:
        """The L0B step of B at (k, col) of its L1 block."""
        if self.tb:
            return TOp("TEXTRACT_T", dst, (b1, col, k))
        return TOp("TEXTRACT", dst, (b1, k, col))

    def a_block(self, rows: int, k: int) -> tuple[int, int]:
        """The shape of an L1 block of A holding ``rows`` rows of ``k`` columns."""
        return (k, rows) if self.ta else (rows, k)

    def b_block(self, k: int, cols: int) -> tuple[int, int]:
        return (cols, k) if self.tb else (k, cols)

    def load_a(self, a1: TileVar, a: tuple[str, Expr, Expr], k: Expr) -> TLoad:
        """The L1 block of A from K column ``k`` (a row of A's stored ``[K, M]``; in parts,
        block ``%kb`` after :meth:`part_regs`)."""
        if self.ta:
            return TLoad(a1, a[0], a[1] + k, a[2], self.loc)
        return TLoad(a1, a[0], a[1], a[2] + k, self.loc)

    def load_b(self, b1: TileVar, b: tuple[str, Expr, Expr], k: Expr) -> TLoad:
        if self.tb:
            return TLoad(b1, b[0], b[1], b[2] + k, self.loc)
        return TLoad(b1, b[0], b[1] + k, b[2], self.loc)

    def accs(self) -> list[list[TileVar]]:
        """The accumulators of one output tile: ``[m1/m0][n1/n0]`` tiles in L0C."""
        t = self.t
        acc_dt = _acc_dtype(self.d)
        assert acc_dt is not None
        return [
            [TileVar(f"acc_{i}_{j}", Space.L0C, acc_dt, (t.m0, t.n0)) for j in range(t.n1 // t.n0)]
            for i in range(t.m1 // t.m0)
        ]

    def body(
        self, a: tuple[str, Expr, Expr], b: tuple[str, Expr, Expr], stores: list[Stmt]
    ) -> list[Stmt]:
        """The K loops of one grid point followed by ``stores`` (with ``reuse``: an A block
        loaded once, then a loop ``%nn`` over the output tiles sharing it)."""
        t, d = self.t, self.d
        KB, KK = self.g.K // t.k1, t.k1 // t.k0
        im, jn = t.m1 // t.m0, t.n1 // t.n0
        whole = t.reuse > 1
        a1 = TileVar("a1", Space.L1, d, self.a_block(t.m1, self.g.K if whole else t.k1))
        b1 = TileVar("b1", Space.L1, d, self.b_block(t.k1, t.n1))
        a0 = [TileVar(f"a0_{i}", Space.L0A, d, (t.m0, t.k0)) for i in range(im)]
        b0 = [TileVar(f"b0_{j}", Space.L0B, d, (t.k0, t.n0)) for j in range(jn)]
        acc = self.accs()
        kb, kk = Expr.reg("kb"), Expr.reg("kk")
        a_load = self.load_a(a1, a, Expr() if whole else kb * t.k1)
        loads: list[Stmt] = [self.load_b(b1, b, kb * t.k1)]
        if not whole:
            loads.insert(0, a_load)
        if self.part_k:
            assert not whole
            loads[:1] = self.shifted_load(a1, a)
        a_col = kb * t.k1 + kk * t.k0 if whole else kk * t.k0
        cuts: list[Stmt] = [self.a_cut(a0[i], a1, Expr.of(i * t.m0), a_col) for i in range(im)]
        cuts += [self.b_cut(b0[j], b1, kk * t.k0, Expr.of(j * t.n0)) for j in range(jn)]

        def mms(op: str) -> tuple[Stmt, ...]:
            return tuple(
                TOp(op, acc[i][j], (a0[i], b0[j]), self.loc) for i in range(im) for j in range(jn)
            )

        k_loop = _k_loop(loads, cuts, mms, KB, KK, self.kb_end)
        if whole:
            return [a_load, For("nn", Expr(), Expr.of(t.reuse), 1, (k_loop, *stores))]
        return [k_loop, *stores]

    def edge_body(
        self,
        a: dict[int, tuple[str, Expr, Expr]],
        b: dict[int, tuple[str, Expr, Expr]],
        c: tuple[str, Expr, Expr],
    ) -> list[Stmt]:
        """The grid point's K loops and store when the last tile row or column is partial.

        Every tile has one L0 step in m and n (``m0 = m1``, ``n0 = n1``); ``%em``/``%en`` are 1
        on the last tile row/column, and 0/1-trip loops on them pick the code for the full or
        the partial extent (its own static shapes, the same tile names, so one buffer holds
        either). ``a``/``b`` give the GM window of each extent, ``c`` the result's window."""
        t, d, g = self.t, self.d, self.g
        assert t.m0 == t.m1 and t.n0 == t.n1 and t.reuse == 1
        acc_dt = _acc_dtype(d)
        assert acc_dt is not None
        mt, nt = -(-g.M // t.m1), -(-g.N // t.n1)
        ms = [t.m1] + ([g.M - (mt - 1) * t.m1] if g.M % t.m1 else [])
        ns = [t.n1] + ([g.N - (nt - 1) * t.n1] if g.N % t.n1 else [])
        head: list[Stmt] = []
        # %em = 1 only on the last tile row: max(m - (mt - 2), 0)
        if len(ms) > 1:
            head.append(SOp("SMAX", "em", (Expr.reg("m") - (mt - 2), Expr.of(0))))
        if len(ns) > 1:
            head.append(SOp("SMAX", "en", (Expr.reg("n") - (nt - 2), Expr.of(0))))
        sites = iter(range(1 << 30))

        def pick(flag: str, sizes: list[int], emit: Callable[[int], list[Stmt]]) -> list[Stmt]:
            """``emit(size)`` for the full extent when ``%flag`` is 0, the partial one when 1."""
            if len(sizes) == 1:
                return emit(sizes[0])
            return _by_flag(flag, str(next(sites)), emit(sizes[0]), emit(sizes[1]))

        def both(emit: Callable[[int, int], list[Stmt]]) -> list[Stmt]:
            return pick("em", ms, lambda me: pick("en", ns, lambda ne: emit(me, ne)))

        kk = Expr.reg("kk")

        def a1(me: int) -> TileVar:
            return TileVar("a1", Space.L1, d, self.a_block(me, t.k1))

        def b1(ne: int) -> TileVar:
            return TileVar("b1", Space.L1, d, self.b_block(t.k1, ne))

        def a0(me: int) -> TileVar:
            return TileVar("a0_0", Space.L0A, d, (me, t.k0))

        def b0(ne: int) -> TileVar:
            return TileVar("b0_0", Space.L0B, d, (t.k0, ne))

        def acc(me: int, ne: int) -> TileVar:
            return TileVar("acc_0_0", Space.L0C, acc_dt, (me, ne))

        kb = Expr.reg("kb")

        def load_a(me: int) -> list[Stmt]:
            if self.part_k:
                return self.shifted_load(a1(me), a[me])
            return [self.load_a(a1(me), a[me], kb * t.k1)]

        loads = pick("em", ms, load_a)
        loads += pick("en", ns, lambda ne: [self.load_b(b1(ne), b[ne], kb * t.k1)])
        cuts = pick("em", ms, lambda me: [self.a_cut(a0(me), a1(me), Expr(), kk * t.k0)])
        cuts += pick("en", ns, lambda ne: [self.b_cut(b0(ne), b1(ne), kk * t.k0, Expr())])

        def mms(op: str) -> tuple[Stmt, ...]:
            return tuple(both(lambda me, ne: [TOp(op, acc(me, ne), (a0(me), b0(ne)), self.loc)]))

        k_loop = _k_loop(loads, cuts, mms, g.K // t.k1, t.k1 // t.k0, self.kb_end)
        stores = both(lambda me, ne: [TStore(c[0], c[1], c[2], acc(me, ne), self.loc)])
        return [*head, k_loop, *stores]


def _views(e: Eqn, g: Geom) -> tuple[Var, Var, tuple[int, int], tuple[int, int], tuple[int, int]]:
    a, b = e.inputs
    assert isinstance(a, Var) and isinstance(b, Var)
    ba = math.prod(a.aval.shape[:-2]) if a.aval.ndim > 2 and g.batch else 1
    bb = math.prod(b.aval.shape[:-2]) if b.aval.ndim > 2 else 1
    rows_a = g.M * ba if g.batch else g.M
    return a, b, (rows_a, g.K), (bb * g.K, g.N), (g.points * g.M, g.N)


def _grid(g: Geom, t: CubeTiles) -> tuple[tuple[str, int], ...]:
    dims = [(f"b{i}", n) for i, n in enumerate(g.batch)]
    return (*dims, ("m", g.M // t.m1), ("n", g.N // t.n1))


def _n_col(t: CubeTiles) -> Expr:
    """The first column of the grid point's output tile (``%nn``-th of its reuse group)."""
    if t.reuse > 1:
        return Expr.reg("n") * (t.reuse * t.n1) + Expr.reg("nn") * t.n1
    return Expr.reg("n") * t.n1


def _swap_last(x: Var) -> Var:
    """A value of ``x``'s transpose (the last two axes swapped)."""
    sh = x.aval.shape
    return Var(AVal((*sh[:-2], sh[-1], sh[-2]), x.aval.dtype))


def _transposed_product(lw: Lowering, e: Eqn) -> bool:
    """``(a @ b).T`` as ``b.T @ a.T`` when the product's only reader is a transpose of its last
    two axes (a backward pass's weight gradient of ``x @ w.T``): the cube computes the
    transposed result straight into the transpose's buffer, reading each operand transposed
    (or as stored, when it is itself a transpose the group claimed), and the transpose is no
    kernel."""
    a, b = e.inputs
    assert isinstance(a, Var) and isinstance(b, Var)
    out = e.out
    if (
        _acc_dtype(a.aval.dtype) is None
        or not cast_ok(_acc_dtype(a.aval.dtype) or dt.float32, out.aval.dtype)
        or out in lw.outputs_of
        or a.aval.ndim < 2
        or b.aval.ndim < 2
        or (b.aval.ndim > 2 and a.aval.ndim == 2)  # b.T's batch would fold into M
    ):
        return False
    readers = [q for q in lw.func.eqns if out in q.inputs]
    if len(readers) != 1 or readers[0].op != "transpose" or id(readers[0]) in lw.skip:
        return False
    tr = readers[0]
    n = out.aval.ndim
    if tuple(tr.kwargs["perm"]) != (*range(n - 2), n - 1, n - 2):
        return False
    windows = dict(lw.windows)

    def flipped(x: Var) -> Var:
        """``x.T`` as an operand: a transpose of what ``x`` transposes (the value itself when
        that comes to no transpose), or of ``x``, read in place."""
        m = x.aval.ndim
        swap = (*range(m - 2), m - 1, m - 2)
        own = windows.get(x)
        src, perm = (own.inputs[0], tuple(own.kwargs["perm"])) if own is not None else (x, None)
        assert isinstance(src, Var)
        comp = swap if perm is None else tuple(perm[i] for i in swap)
        if comp == tuple(range(m)):
            return src
        t = _swap_last(x)
        lw.windows[t] = Eqn("transpose", (src,), (("perm", comp),), t)
        return t

    lw.windows = {}
    swapped = Eqn("matmul", (flipped(b), flipped(a)), (), tr.out, e.loc, e.group, e.hint)
    try:
        lower_matmul(lw, swapped)
    finally:
        lw.windows = windows
    lw.skip.add(id(tr))
    return True


def _copy_transposes(lw: Lowering, e: Eqn) -> None:
    """Lower the transposes the group claimed (:func:`_claim_operands`) as kernels after
    all, for a path that reads A and B as they are."""
    for x in e.inputs:
        tr = lw.windows.pop(x, None) if isinstance(x, Var) else None
        if tr is not None:
            lower_single(lw, tr)


Stored = tuple[Var, tuple[int, ...], bool]
"""An operand read through the transpose that makes it: the value it transposes, for each
axis of the operand as the cube reads it (A, or ``Aᵀ`` when transposed) the axis of that
value, and whether the blocks are cut transposed (``TEXTRACT_T``)."""


def _stored(x: Var, tr: Eqn) -> Stored | None:
    """How a matmul operand ``x = tr(src)`` is read in place: its last axis is the source's
    (plain blocks) or its second last is (transposed blocks); leading axes anyhow (head
    splits). None when neither of the operand's last two axes is the source's last."""
    src = tr.inputs[0]
    perm = tuple(tr.kwargs["perm"])
    n = len(perm)
    if not isinstance(src, Var) or x.aval.ndim != n or not matmul_reads_in_place(perm):
        return None
    if perm[-1] == n - 1:
        return src, perm, False
    return src, (*perm[:-2], perm[-1], perm[-2]), True


def _transposed(lw: Lowering, e: Eqn) -> tuple[Stored | None, Stored | None]:
    """How A and B are read when the group reads them through windows (``lw.windows``)."""
    out: list[Stored | None] = []
    for x in e.inputs:
        tr = lw.windows.get(x) if isinstance(x, Var) else None
        if tr is None or tr.op != "transpose" or not isinstance(x, Var):
            out.append(None)  # read as it is, or in parts (a concatenation, _Shifted)
        else:
            out.append(_stored(x, tr))
    return out[0], out[1]


def _window_base(e: Eqn, x: Var, st: Stored) -> tuple[tuple[int, int], Expr, Expr]:
    """A stored operand's 2-D view of its source and where the grid point's batch starts."""
    return batch_window(st[0].aval.shape, st[1], x.aval.shape[:-2], e.out.aval.shape[:-2])


def _a_operand(
    lw: Lowering, e: Eqn, g: Geom, rows: int, k: int, row0: Expr, st: Stored | None
) -> tuple[str, Expr, Expr]:
    """The GM window of A's ``[rows, k]`` blocks (``[k, rows]`` when cut transposed) for tile
    row ``row0``; the K offset is added per block."""
    a, _, va, _, _ = _views(e, g)
    if st is None:
        return _operand(lw, a, va, (rows, k), g.rows(g.a_strides, g.M) + row0, Expr())
    view, r, c = _window_base(e, a, st)
    if st[2]:
        return _operand(lw, st[0], view, (k, rows), r, c + row0)
    return _operand(lw, st[0], view, (rows, k), r + row0, c)


def _b_operand(
    lw: Lowering, e: Eqn, g: Geom, k: int, cols: int, col0: Expr, st: Stored | None
) -> tuple[str, Expr, Expr]:
    """The GM window of B's ``[k, cols]`` blocks (``[cols, k]`` when cut transposed) for tile
    column ``col0``."""
    _, b, _, vb, _ = _views(e, g)
    if st is None:
        return _operand(lw, b, vb, (k, cols), g.rows(g.b_strides, g.K), col0)
    view, r, c = _window_base(e, b, st)
    if st[2]:
        return _operand(lw, st[0], view, (cols, k), r + col0, c)
    return _operand(lw, st[0], view, (k, cols), r, c + col0)


def _cube_operands(
    lw: Lowering, e: Eqn, g: Geom, t: CubeTiles
) -> tuple[tuple[str, Expr, Expr], tuple[str, Expr, Expr], Expr]:
    sa, sb = _transposed(lw, e)
    m_row = Expr.reg("m") * t.m1
    ga = _a_operand(lw, e, g, t.m1, g.K if t.reuse > 1 else t.k1, m_row, sa)
    gb = _b_operand(lw, e, g, t.k1, t.n1, _n_col(t), sb)
    c_row = g.rows(g.c_strides, g.M) + m_row
    return ga, gb, c_row


@dataclass(frozen=True)
class _Shifted:
    """A matmul's A that is a concatenation along K of row windows of one 2-D buffer,
    ``concat([src[r : r + M, col : col + width] for r in rows], axis=1)``, where the rows
    ``r`` step as the digits of a mixed-radix count (``radix``): the patches of a
    shifted-rows convolution (``pypto/ops/conv.py``), each part one kernel offset."""

    src: Var
    row: int
    """the lowest part's first row"""
    col: int
    width: int
    radix: tuple[tuple[int, int], ...]
    """(count, rows per step) from the outermost digit: part ``p`` starts at ``row + lift``
    plus ``p``'s digits times these rows (steps may be negative)"""
    lift: int
    eqns: tuple[Eqn, ...]
    """the slices, then the concatenation"""


def _radix(rel: list[int]) -> list[tuple[int, int]] | None:
    """``rel`` (the parts' rows after the first's) as mixed-radix digits times fixed steps,
    from the outermost digit, with as few digits as possible; None when they are not."""
    n = len(rel)
    if n == 1:
        return []
    for k in sorted((d for d in divisors(n) if d > 1), reverse=True):
        step = rel[1]
        if all(rel[q + j] == rel[q] + j * step for q in range(0, n, k) for j in range(k)):
            outer = _radix(rel[::k])
            if outer is not None:
                return [*outer, (k, step)]
    return None


def _shifted_of(cat: Eqn, slices: dict[Var, Eqn]) -> _Shifted | None:
    """The row windows concatenation ``cat`` makes of ``slices`` (None: it is not one)."""
    out = cat.out
    if cat.op != "concat" or out.aval.ndim != 2 or cat.kwargs["axis"] % 2 != 1:
        return None
    src: Var | None = None
    rows: list[int] = []
    cols = set()
    for p in cat.inputs:
        sl = slices.get(p) if isinstance(p, Var) else None
        if sl is None or not isinstance(sl.inputs[0], Var) or sl.inputs[0].aval.ndim != 2:
            return None
        if src is not None and sl.inputs[0] is not src:
            return None
        src = sl.inputs[0]
        (r0, r1, rs), (c0, c1, cs) = sl.kwargs["index"]
        if rs != 1 or cs != 1 or r1 - r0 != out.aval.shape[0]:
            return None
        rows.append(r0)
        cols.add((c0, c1))
    radix = _radix([r - rows[0] for r in rows]) if rows else None
    if src is None or len(cols) != 1 or radix is None:
        return None
    ((c0, c1),) = cols
    eqns = tuple(dict.fromkeys(slices[p] for p in cat.inputs if isinstance(p, Var)))
    low = min(rows)
    return _Shifted(src, low, c0, c1 - c0, tuple(radix), rows[0] - low, (*eqns, cat))


def _shifted_parts(lw: Lowering, e: Eqn) -> _Shifted | None:
    """A's parts when the group claimed a concatenation of row windows as A."""
    a = e.inputs[0]
    cat = lw.windows.get(a) if isinstance(a, Var) else None
    if cat is None or cat.op != "concat":
        return None
    slices = {q.out: q for q in lw.windows.values() if q.op == "slice"}
    return _shifted_of(cat, slices)


def _shifted_body(
    lw: Lowering,
    cube: _Cube,
    a: tuple[str, Expr, Expr],
    b: tuple[str, Expr, Expr],
    stores: list[Stmt],
) -> list[Stmt]:
    """A grid point of a product whose A is read in parts: every part's window from one L1
    block when two of those blocks (and B's blocks, or all of B's K) fit L1, else each K
    block's window loaded on its own."""
    t, s, cap = cube.t, cube.d.itemsize, lw.machine.l1_bytes
    a_big = 2 * (t.m1 + cube.span()) * t.k1 * s
    if a_big + 2 * t.k1 * t.n1 * s > cap:
        return cube.body(a, b, stores)
    return cube.im2col_body(a, b, stores, a_big + 2 * cube.g.K * t.n1 * s <= cap)


def _lower_shifted(lw: Lowering, e: Eqn, g: Geom, d: dt.DType, sh: _Shifted) -> bool:
    """A plain 2-D product whose A is read in parts (:class:`_Shifted`): each K block of A
    is loaded from its part's window of the source, so the patches are never written. False
    when no tiles take it (the user's K blocks straddle a part)."""
    try:
        t = cube_tiles(lw, g, d, None, True, k_part=sh.width)
    except TileError:
        return False
    if sh.width % t.k1 or t.reuse > 1 or (_edges(g, t.m1, t.n1) and t.m0 != t.m1):
        return False
    sa, sb = _transposed(lw, e)
    assert sa is None
    view = sh.src.aval.shape
    m_row = Expr.reg("m") * t.m1
    mt, nt = -(-g.M // t.m1), -(-g.N // t.n1)
    order = _Order.of(g, mt, nt, lw.machine.clusters, lw.cfg.swizzle)
    cube = _Cube(g, t, d, e.loc, False, sb is not None and sb[2], sh.width, sh.radix, sh.lift)

    def part0(rows: int) -> tuple[str, Expr, Expr]:
        # the lowest part's window; each K block's is its part's shift further down
        buf, r, c = _operand(
            lw, sh.src, (view[0], view[1]), (rows, t.k1), m_row + sh.row, Expr.of(sh.col)
        )
        assert lw.views[buf][1] == view[1]  # rows of the layout are the source's rows
        return buf, r, c

    if _edges(g, t.m1, t.n1):
        ms = {t.m1, g.M - (mt - 1) * t.m1}
        ns = {t.n1, g.N - (nt - 1) * t.n1}
        ga = {me: part0(me) for me in ms}
        gb = {ne: _b_operand(lw, e, g, t.k1, ne, Expr.reg("n") * t.n1, sb) for ne in ns}
        c = lw.buffer(e.out)
        lw.view(c, (g.M, g.N))
        body = cube.edge_body(ga, gb, (c, m_row, Expr.reg("n") * t.n1))
    else:
        ga1 = part0(t.m1)
        gb1 = _b_operand(lw, e, g, t.k1, t.n1, _n_col(t), sb)
        c, c_row, c_col = _result(lw, e, g, t, m_row)
        acc = cube.accs()
        stores: list[Stmt] = [
            TStore(c, c_row + i * t.m0, c_col + _n_col(t) + j * t.n0, acc[i][j], e.loc)
            for i in range(len(acc))
            for j in range(len(acc[0]))
        ]
        body = _shifted_body(lw, cube, ga1, gb1, stores)
    sections = [Section("aic", (*order.head, *body))]
    lw.add_kernel(_cube_kernel(lw.fresh("matmul"), e, g, t, order, sections))
    return True


MAX_EPILOGUE_CHUNKS = 4
"""column chunks an epilogue tile may be cut into (each one unrolled in the vector code)"""


def _epilogue_chunk(m: Machine, plan: RowPlan | None, ws: dt.DType, h: int, n1: int) -> int | None:
    """Columns of the chunks in which a vector core finishes its ``[h, n1]`` half of an output
    tile: the widest divisor of ``n1`` (at most :data:`MAX_EPILOGUE_CHUNKS` chunks, 32-byte
    aligned) whose ring tile and epilogue fit UB; None when none does. Chunks let wide cube
    tiles (128 x 256: twice the reuse of 128 x 128) keep an epilogue of several ops."""
    for nc in range(1, MAX_EPILOGUE_CHUNKS + 1):
        if n1 % nc:
            continue
        cw = n1 // nc
        if nc > 1 and (cw * min(ws.itemsize, 2)) % m.align_bytes:
            continue
        nb = 2 * h * cw * ws.itemsize
        nb += ub_bytes_needed(plan, h, cw) if plan is not None else 2 * h * cw * 4
        if nb <= m.ub_bytes * 3 // 4:
            return cw
    return None


def _epilogue_need(
    lw: Lowering, plan: RowPlan | None, ws: dt.DType
) -> Callable[[int, int], tuple[bool, float]]:
    """Whether an [m1, n1] output tile's epilogue fits UB, and its vector cycles per tile."""
    m = lw.machine
    ops = len(plan.eqns) if plan is not None else 1

    @functools.cache
    def need(m1: int, n1: int) -> tuple[bool, float]:
        h = max(1, m1 // m.aiv_per_cluster)  # rows per vector core
        cw = _epilogue_chunk(m, plan, ws, h, n1)
        if cw is None:
            return False, 0.0
        nc = n1 // cw
        cycles = (ops + 1) * (nc * m.vector_latency + h * n1 * 4 / m.vector_bytes)
        return True, cycles

    return need


def lower_matmul(lw: Lowering, e: Eqn, epilogue: list[Eqn] | None = None) -> bool:
    """Lower ``e`` (a matmul) with the elementwise ``epilogue`` equations that follow it, as
    one cluster kernel; False when the epilogue does not fit a row kernel."""
    a, b = e.inputs
    assert isinstance(a, Var) and isinstance(b, Var)
    d = a.aval.dtype
    out = e.out
    g = geometry(a.aval.shape, b.aval.shape)
    shifted = _shifted_parts(lw, e)
    if shifted is not None:
        if not epilogue and _lower_shifted(lw, e, g, d, shifted):
            return True
        # the patches after all (one row kernel of the windows), then the product as it is
        eqns = list(shifted.eqns)
        for q in eqns:
            lw.windows.pop(q.out, None)
        patches = plan_row(lw, eqns, used_outside(lw.func, eqns))
        with at_location(e.loc):
            if patches is not None:
                lower_row_kernel(lw, patches, lw.fresh("slice_concat"), e.loc)
            else:
                for q in eqns:
                    lower_single(lw, q)
    if not epilogue and _transposed_product(lw, e):
        return True
    acc_dt = _acc_dtype(d)
    if acc_dt is None:  # int32: no cube path
        if epilogue:
            return False
        _vector_matmul(lw, e, g)
        return True
    plan: RowPlan | None = None
    group = [e, *(epilogue or [])]
    used = used_outside(lw.func, group)
    if epilogue:
        if b.aval.ndim == 1 or (lw.cfg.split_k or 1) > 1:
            return False  # (the user's split K: its runs' sum is a kernel of its own)
        plan = plan_row(lw, epilogue, used)
        if (
            plan is None
            or plan.reduces
            or plan.windows
            or plan.cats
            or plan.kinds.get(out) != "full"
        ):
            return False
    handoff = plan is not None or not cast_ok(acc_dt, out.aval.dtype)
    ws_dt = out.aval.dtype if cast_ok(acc_dt, out.aval.dtype) else acc_dt
    need = _epilogue_need(lw, plan, ws_dt) if handoff else None
    # partial edge tiles under an epilogue: each extent's vector code is its own variant;
    # not for one-row outputs or operands read at the row modulo a period
    edges_ok = g.M > 1 and (plan is None or not plan.period)
    try:
        t = cube_tiles(lw, g, d, need, edges_ok, split_ok=need is None, cold=_cold(lw, e))
    except TileError:
        user = lw.cfg.cube is not None or (need is None and (lw.cfg.split_k or 1) > 1)
        if user and _cube_fits(lw, g, d, need, edges_ok):
            raise  # the user's tiles or split do not fit, and others would: say so
        # no cube tiles fit at all (with the user's tiles too: they are for what the cube
        # runs), or none split evenly between the vector cores: unfused, or all vector
        if plan is not None:
            return False
        _copy_transposes(lw, e)
        _vector_matmul(lw, e, g)
        return True
    if handoff and t.m1 % lw.machine.aiv_per_cluster and g.M > 1:
        return False
    # an operand repeating over leading axes (a causal mask against every head's scores) is
    # read at the row modulo its period: a vector core's rows must not straddle one
    h = max(1, t.m1 // lw.machine.aiv_per_cluster)
    if plan is not None and any(p % h for p in plan.period.values()):
        return False
    if t.split > 1:
        _lower_split(lw, e, g, t, d)
        return True
    if _edges(g, t.m1, t.n1):
        return _lower_edges(lw, e, g, t, d, (plan, ws_dt, used) if handoff else None)
    ga, gb, c_row = _cube_operands(lw, e, g, t)
    sa, sb = _transposed(lw, e)
    cube = _Cube(g, t, d, e.loc, sa is not None and sa[2], sb is not None and sb[2])
    acc = cube.accs()
    name = lw.fresh(_group_name(lw, e) if epilogue else "matmul")
    order = _Order.of(g, g.M // t.m1, g.N // t.n1 // t.reuse, lw.machine.clusters, lw.cfg.swizzle)
    if handoff:
        ws, ring_row = _ring(lw, t, ws_dt)
        aiv = _vector_epilogue(lw, e, plan, t, g, ws, ws_dt, ring_row, c_row, used, order)
        _add_handoff(lw, name, e, g, t, order, (cube, ga, gb), (ws, ring_row), aiv)
        return True
    n_col = _n_col(t)
    c, c_row, c_col = _result(lw, e, g, t, c_row)
    stores: list[Stmt] = [
        TStore(c, c_row + i * t.m0, c_col + n_col + j * t.n0, acc[i][j], e.loc)
        for i in range(len(acc))
        for j in range(len(acc[0]))
    ]
    sections = [Section("aic", (*order.head, *cube.body(ga, gb, stores)))]
    ahead = _read_ahead(lw, e, g, t, order, cube, ga, gb, racing=True)
    if ahead:
        sections.append(Section("aiv", (*order.head, *ahead)))
    lw.add_kernel(_cube_kernel(name, e, g, t, order, sections))
    return True


def _add_handoff(
    lw: Lowering,
    name: str,
    e: Eqn,
    g: Geom,
    t: CubeTiles,
    order: _Order,
    operands: tuple[_Cube, tuple[str, Expr, Expr], tuple[str, Expr, Expr]],
    ring: tuple[str, Expr],
    aiv: Section,
) -> None:
    """A matmul kernel whose cube core stores each output tile into the cluster's ring slot
    and whose vector cores finish it (``aiv``, with the read-ahead at the top of each grid
    point's code): an epilogue, or a row kernel reading the product through head windows."""
    cube, ga, gb = operands
    ws, ring_row = ring
    acc = cube.accs()
    stores: list[Stmt] = [
        TStore(ws, ring_row + i * t.m0, Expr.of(j * t.n0), acc[i][j], e.loc)
        for i in range(len(acc))
        for j in range(len(acc[0]))
    ]
    aiv = _ahead_of(aiv, order, _read_ahead(lw, e, g, t, order, cube, ga, gb, racing=False))
    aic = Section("aic", (*order.head, *order.slot(), *cube.body(ga, gb, stores)))
    lw.add_kernel(_cube_kernel(name, e, g, t, order, [aic, aiv], (Ring(ws, "aic", "slot"),)))


def lower_head_epilogue(lw: Lowering, e: Eqn, views: list[Eqn], plan: RowPlan) -> bool:
    """Lower matmul ``e`` and a row kernel that reads its result only through head-split
    windows — ``[M, N]`` viewed ``[M, H, D]`` (``views``), heads first, columns ``lo .. lo + C``
    of each head: the two halves a rotary embedding rotates — as one cluster kernel. The
    vector cores take each head's windows of an output tile straight from the ring (``[h, C]``
    tiles at the head's columns), run the row kernel on them and store its results at the
    head's rows (a concatenation piece by piece), so neither the product nor its head split
    goes to GM. False when the plan has another form or no cube tile keeps whole heads."""
    a, b = e.inputs
    assert isinstance(a, Var) and isinstance(b, Var)
    out = e.out
    d = a.aval.dtype
    acc_dt = _acc_dtype(d)
    shapes = {v.out.aval.shape for v in views}
    if acc_dt is None or a.aval.ndim != 2 or b.aval.ndim != 2 or len(shapes) != 1:
        return False
    (M, H, D) = next(iter(shapes))
    srcs = {v.out for v in views}
    C = plan.C
    halves = all(
        w.src in srcs and w.perm == (1, 0, 2) and w.lo + C <= D and not (w.row or w.lead)
        for w in plan.windows.values()
    )
    if (
        plan.reduces
        or not plan.windows
        or not halves
        or plan.S != (H, M, C)
        or any(v == out or v in srcs for v in plan.inputs if v not in plan.windows)
    ):
        return False
    used = used_outside(lw.func, [e, *views, *plan.eqns])
    if out in used or srcs & used or out in lw.outputs_of:
        return False
    m = lw.machine
    ws_dt = out.aval.dtype if cast_ok(acc_dt, out.aval.dtype) else acc_dt
    ops = sum(q.op not in LAYOUT_OPS for q in plan.eqns)

    def need(m1: int, n1: int) -> tuple[bool, float]:
        h = max(1, m1 // m.aiv_per_cluster)
        if n1 % D or M % h or any(p % h for p in plan.period.values()):
            return False, 0.0
        nb = ub_bytes_needed(plan, h, C)  # (the windows are its inputs)
        cycles = (ops + 1) * (n1 // D * m.vector_latency + h * n1 * 4 / m.vector_bytes)
        return nb <= m.ub_bytes * 3 // 4, cycles

    g = geometry(a.aval.shape, b.aval.shape)
    try:
        t = cube_tiles(lw, g, d, need)
    except TileError:
        return False  # the user's tiles split heads: the product and the row kernel apart
    if t.m1 % m.aiv_per_cluster or _edges(g, t.m1, t.n1):
        return False
    ga, gb, c_row = _cube_operands(lw, e, g, t)
    cube = _Cube(g, t, d, e.loc, False, False)
    name = "_".join(dict.fromkeys(q.op for q in plan.eqns if q.op not in LAYOUT_OPS))
    order = _Order.of(g, g.M // t.m1, g.N // t.n1, m.clusters, lw.cfg.swizzle)
    ws, ring_row = _ring(lw, t, ws_dt)
    # the vector cores: rows %sub*h .. of each head of the tile
    h = t.m1 // m.aiv_per_cluster
    sub = Expr.reg("sub") * h
    per = t.n1 // D
    body: list[Stmt] = [*order.head, *order.slot()]
    pre: list[Stmt] = []
    post: list[Stmt] = []
    # inputs repeating every M rows or less (cos and sin by position): the same rows for
    # every head, loaded once per tile
    shared: dict[Var, TileVar] = {}
    for j in range(per):
        head = Expr.reg("n") * per + j if t.n1 < g.N else Expr.of(j)
        rb = RowBuilder(lw, plan, h, C)
        rb.row, rb.col, rb.loc = head * M + c_row + sub, Expr(), e.loc
        for v, w in plan.windows.items():
            x = rb.new(ws_dt, "full", "w")
            rb.body.append(TLoad(x, ws, ring_row + sub, Expr.of(j * D + w.lo), e.loc))
            if ws_dt is not v.aval.dtype:
                x = rb.op("TCVT", rb.new(v.aval.dtype, "full", "wc"), x)
            rb.tiles[v] = x
        for v in plan.inputs:
            if v in shared:
                rb.given(v, shared[v])
        rb.emit()
        shared = {v: rb.tiles[v] for v, p in plan.period.items() if M % p == 0}
        body += rb.body
        # every head's builder names its invariant tiles alike: keep one copy of each
        pre += [st for st in rb.pre if st not in pre]
        post += [st for st in rb.post if st not in post]
    aiv = Section("aiv", tuple(body), tuple(pre), tuple(post))
    ring = (ws, ring_row)
    _add_handoff(lw, lw.fresh(f"matmul_{name}"), e, g, t, order, (cube, ga, gb), ring, aiv)
    return True


def _cube_kernel(
    name: str,
    e: Eqn,
    g: Geom,
    t: CubeTiles,
    order: _Order,
    sections: Sequence[Section],
    rings: tuple[Ring, ...] = (),
) -> Kernel:
    """A matmul's cluster kernel: its grid, tile text and cube flops (2MNK, no padding)."""
    flops = 2 * g.points * g.M * g.N * g.K
    return Kernel(
        name,
        "matmul",
        order.grid,
        tuple(sections),
        t.text(),
        "cube_tile",
        "cluster",
        e.loc,
        flops,
        rings,
    )


def _lower_edges(
    lw: Lowering,
    e: Eqn,
    g: Geom,
    t: CubeTiles,
    d: dt.DType,
    epi: tuple[RowPlan | None, dt.DType, set[Var]] | None = None,
) -> bool:
    """The cluster kernel of a matmul whose tiles leave a partial last row or column
    (:meth:`_Cube.edge_body`): the fixpipe stores the result, or with ``epi`` (the epilogue's
    plan, the ring's dtype and the values used outside) hands each tile to the vector cores,
    whose code for each tile extent is its own variant (:func:`_vector_epilogue`)."""
    mt, nt = -(-g.M // t.m1), -(-g.N // t.n1)
    m_row = Expr.reg("m") * t.m1
    n_col = Expr.reg("n") * t.n1
    ms = {t.m1, g.M - (mt - 1) * t.m1}
    ns = {t.n1, g.N - (nt - 1) * t.n1}
    sa, sb = _transposed(lw, e)
    ga = {me: _a_operand(lw, e, g, me, t.k1, m_row, sa) for me in ms}
    gb = {ne: _b_operand(lw, e, g, t.k1, ne, n_col, sb) for ne in ns}
    c_row = g.rows(g.c_strides, g.M) + m_row
    cube = _Cube(g, t, d, e.loc, sa is not None and sa[2], sb is not None and sb[2])
    order = _Order.of(g, mt, nt, lw.machine.clusters, lw.cfg.swizzle)

    def full_tiles_ahead(racing: bool) -> list[Stmt]:
        # through the full tiles' windows (shifted inside at the edges), when they fit
        if t.m1 > g.M or t.n1 > g.N:
            return []
        return _read_ahead(lw, e, g, t, order, cube, ga[t.m1], gb[t.n1], racing)

    if epi is not None:
        plan, ws_dt, used = epi
        ws, ring_row = _ring(lw, t, ws_dt)
        body = cube.edge_body(ga, gb, (ws, ring_row, Expr()))
        aiv = _vector_epilogue(lw, e, plan, t, g, ws, ws_dt, ring_row, c_row, used, order)
        aiv = _ahead_of(aiv, order, full_tiles_ahead(False))
        sections = [Section("aic", (*order.head, *order.slot(), *body)), aiv]
        name = lw.fresh(_group_name(lw, e))
        lw.add_kernel(_cube_kernel(name, e, g, t, order, sections, (Ring(ws, "aic", "slot"),)))
        return True
    c = lw.buffer(e.out)
    lw.view(c, (g.points * g.M, g.N))
    body = cube.edge_body(ga, gb, (c, c_row, n_col))
    sections = [Section("aic", (*order.head, *body))]
    if ahead := full_tiles_ahead(True):
        sections.append(Section("aiv", (*order.head, *ahead)))
    lw.add_kernel(_cube_kernel(lw.fresh("matmul"), e, g, t, order, sections))
    return True


def _cold(lw: Lowering, e: Eqn) -> tuple[bool, bool]:
    """Whether each operand of matmul ``e`` (or what it reads through a claimed transpose) is
    a parameter of the program or a constant, so its first reads come from HBM; one that an
    earlier kernel wrote is taken to be in L2 still."""
    params = set(lw.func.params)
    out = []
    for x in e.inputs:
        tr = lw.windows.get(x) if isinstance(x, Var) else None
        src = tr.inputs[0] if tr is not None else x
        out.append(not isinstance(src, Var) or src in params)
    return out[0], out[1]


def _at_k(op: tuple[str, Expr, Expr], k: Expr, rows: bool) -> tuple[str, Expr, Expr]:
    """An operand's window moved ``k`` along K: down its rows (A stored ``[K, M]``, B as it
    is) or along its columns."""
    buf, row, col = op
    return (buf, row + k, col) if rows else (buf, row, col + k)


def _lower_split(lw: Lowering, e: Eqn, g: Geom, t: CubeTiles, d: dt.DType) -> None:
    """Split K: a product whose output tiles are too few for the clusters, over a long K, as
    ``t.split`` runs of K blocks, each run of each output tile a grid point (``%ks``, the
    outermost axis). Each point stores its float32 partial product (the accumulator as it is,
    int32 for int8) into a workspace of ``[runs * rows, N]``, and a vector kernel adds the
    runs up and rounds once to the result's dtype (:func:`_split_sum`). The runs are equal
    but the last, which the K loop's bound ``%kn`` shortens."""
    m = lw.machine
    acc_dt = _acc_dtype(d)
    assert acc_dt is not None
    KB = g.K // t.k1
    per, runs = _runs(g.K, t.k1, t.split)
    mt, nt = -(-g.M // t.m1), -(-g.N // t.n1)
    rows = g.points * g.M
    ws = lw.new_buffer("splitk", acc_dt, runs * rows * g.N)
    lw.views[ws] = (runs * rows, g.N)
    ks = Expr.reg("ks")
    k0 = ks * (per * t.k1)
    sa, sb = _transposed(lw, e)
    ta, tb = sa is not None and sa[2], sb is not None and sb[2]
    m_row, n_col = Expr.reg("m") * t.m1, Expr.reg("n") * t.n1
    ms = {t.m1, g.M - (mt - 1) * t.m1}
    ns = {t.n1, g.N - (nt - 1) * t.n1}
    ga = {me: _at_k(_a_operand(lw, e, g, me, t.k1, m_row, sa), k0, ta) for me in ms}
    gb = {ne: _at_k(_b_operand(lw, e, g, t.k1, ne, n_col, sb), k0, not tb) for ne in ns}
    c_row = ks * rows + g.rows(g.c_strides, g.M) + m_row
    head: list[Stmt] = []
    end = None
    if KB % per:  # the last run is shorter
        head.append(SOp("SMIN", "kn", (Expr.of(KB) + ks * (-per), Expr.of(per))))
        end = Expr.reg("kn")
    cube = _Cube(replace(g, K=per * t.k1), t, d, e.loc, ta, tb, kb_end=end)
    order = _Order.of(g, mt, nt, m.clusters, lw.cfg.swizzle, runs)
    if _edges(g, t.m1, t.n1):
        body = cube.edge_body(ga, gb, (ws, c_row, n_col))
    else:
        acc = cube.accs()
        stores: list[Stmt] = [
            TStore(ws, c_row + i * t.m0, n_col + j * t.n0, acc[i][j], e.loc)
            for i in range(len(acc))
            for j in range(len(acc[0]))
        ]
        body = cube.body(ga[t.m1], gb[t.n1], stores)
    sections = [Section("aic", (*order.head, *head, *body))]
    cold = _cold(lw, e)
    if lw.cfg.read_ahead is not False and any(cold) and t.m1 <= g.M and t.n1 <= g.N:
        # the vector cores read the point's K blocks of an operand that comes from HBM into
        # L2 ahead of the cube, in turns: each run reads its blocks once, all first touches
        # (of an operand an earlier kernel wrote, the reads would only crowd L2)
        pk, nv = Expr.reg("pk"), m.aiv_per_cluster
        a1 = TileVar("a1", Space.L1, d, cube.a_block(t.m1, t.k1))
        b1 = TileVar("b1", Space.L1, d, cube.b_block(t.k1, t.n1))
        edges = _edges(g, t.m1, t.n1)
        reads: list[Stmt] = []
        if cold[0]:
            reads += _prefetch(lw, "pfa", cube.load_a(a1, ga[t.m1], pk * t.k1), edges)
        if cold[1]:
            reads += _prefetch(lw, "pfb", cube.load_b(b1, gb[t.n1], pk * t.k1), edges)
        loop = For("pk", Expr.reg("sub"), end or Expr.of(per), nv, tuple(reads))
        sections.append(Section("aiv", (*order.head, *head, loop)))
    lw.add_kernel(_cube_kernel(lw.fresh("matmul"), e, g, t, order, sections))
    _split_sum(lw, ws, acc_dt, runs, rows, g.N, e)


def _split_sum(
    lw: Lowering, ws: str, ad: dt.DType, runs: int, rows: int, cols: int, e: Eqn
) -> None:
    """The vector kernel that adds the ``runs`` partial products ``[rows, cols]`` stacked in
    ``ws`` and stores their sum, cast once to the result's dtype, into the result: tiles of
    whole rows where they fit, as many as keep every vector core busy."""
    m = lw.machine
    od = e.out.aval.dtype
    out = lw.buffer(e.out)
    olay = lw.view(out, (rows, cols))
    cap = max(1, tile_bytes(m) // ad.itemsize)
    tc = cols
    if cols > cap:
        tc = max(
            (x for x in divisors(cols) if x <= cap and x * od.itemsize % m.align_bytes == 0),
            default=1,
        )
    trs = [x for x in divisors(rows) if x * tc <= cap] or [1]
    busy = [x for x in trs if rows // x * (cols // tc) >= lw.workers("aiv")]
    tr = max(busy) if busy else min(trs)
    grid = tuple((r, n) for r, n in (("r", rows // tr), ("c", cols // tc)) if n > 1)
    row0 = Expr.reg("r") * tr if rows > tr else Expr()
    col0 = Expr.reg("c") * tc if cols > tc else Expr()
    acc = TileVar("acc", Space.UB, ad, (tr, tc))
    x = TileVar("x", Space.UB, ad, (tr, tc))
    body: list[Stmt] = [
        TLoad(acc, ws, row0, col0, e.loc),
        For(
            "ks",
            Expr.of(1),
            Expr.of(runs),
            1,
            (
                TLoad(x, ws, Expr.reg("ks") * rows + row0, col0, e.loc),
                TOp("TADD", acc, (acc, x), e.loc),
            ),
        ),
    ]
    res = acc
    if od is not ad:
        res = TileVar("y", Space.UB, od, (tr, tc))
        body.append(TOp("TCVT", res, (acc,), e.loc))
    w = window(olay, cols, (tr, tc), row0, col0)
    assert w is not None, (olay, cols, tr, tc)
    body.append(TStore(out, w[1], w[2], TileVar(res.name, Space.UB, od, w[0]), e.loc))
    lw.add_kernel(
        Kernel(
            lw.fresh("split_sum"),
            "reduce",
            grid or (("r", 1),),
            (Section("aiv", tuple(body)),),
            (("rows", tr), ("cols", tc)),
            loc=e.loc,
        )
    )


def _result(lw: Lowering, e: Eqn, g: Geom, t: CubeTiles, c_row: Expr) -> tuple[str, Expr, Expr]:
    """Where the fixpipe stores the result's tiles: its own buffer at ``c_row``, or — for a
    batched product whose only reader merges heads (``[h, s, d] -> [s, h, d]``) — straight
    into the merge's result, each batch index stepping its rows or columns (the merge is no
    kernel then). The buffer, the grid point's first row and its column offset."""
    out = e.out
    merge = window_out(lw, out) if g.batch and min(g.batch) > 1 else None
    if merge is None:
        c = lw.buffer(out)
        lw.view(c, (g.points * g.M, g.N))
        return c, c_row, Expr()
    tr, (src, pos) = merge
    lw.skip.add(id(tr))
    view, row, col = batch_window(src.aval.shape, pos, out.aval.shape[:-2], g.batch)
    c = lw.buffer(src)
    lw.view(c, view)
    return c, row + Expr.reg("m") * t.m1, col


def _ring(lw: Lowering, t: CubeTiles, ws_dt: dt.DType) -> tuple[str, Expr]:
    """The GM ring of two ``[m1, n1]`` slots per cluster that hands the cube core's output
    tiles to its vector cores, and the row of this grid point's slot."""
    m = lw.machine
    ws = lw.new_buffer("ws", ws_dt, m.clusters * 2 * t.m1 * t.n1)
    lw.views[ws] = (m.clusters * 2 * t.m1, t.n1)
    return ws, Expr.reg("blk") * (2 * t.m1) + Expr.reg("slot") * t.m1


def _prefetch(lw: Lowering, name: str, load: TLoad, edges: bool) -> tuple[Stmt, ...]:
    """A cube core's ``load`` of an operand block, read by a vector core into L2 ahead of it:
    a loop over a few of its rows at a time into a scratch UB tile nothing uses (small beside
    an epilogue's). With partial edge tiles a window past the end of the buffer's view shifts
    back inside it, covering the edge tile's rows and columns."""
    d = load.dst.dtype
    cap = lw.machine.ub_bytes // 16
    rows, cols = load.dst.shape
    x = max(r for r in divisors(rows) if r * cols * d.itemsize <= cap or r == 1)
    pfx = TileVar(name, Space.UB, d, (x, cols))
    row, col = load.row + Expr.reg("pr"), load.col
    clamp: list[Stmt] = []
    if edges:
        vr, vc = lw.views[load.tensor]
        clamp = [
            SOp("SMIN", "pr1", (row, Expr.of(vr - x))),
            SOp("SMIN", "pc1", (col, Expr.of(vc - cols))),
        ]
        row, col = Expr.reg("pr1"), Expr.reg("pc1")
    step = (*clamp, TLoad(pfx, load.tensor, row, col))
    return (For("pr", Expr(), Expr.of(rows), x, step),)


def _read_ahead(
    lw: Lowering,
    e: Eqn,
    g: Geom,
    t: CubeTiles,
    order: _Order,
    cube: _Cube,
    ga: tuple[str, Expr, Expr],
    gb: tuple[str, Expr, Expr],
    racing: bool,
) -> list[Stmt]:
    """The vector cores' reads of the A and B blocks that their cube core's tile reads first,
    ahead of it in K, so that the cube's loads find them in L2 instead of paying the HBM
    rate on top of their L2 reads (a core's MTE2 reads GM at ``gm_read`` but L2 at
    ``l2_read``).

    In the grouped order the ``G`` tile rows of a band share each B column, and the first
    ``W = clusters / G`` columns of a band — about one wave — share each A row (in row-major
    order each tile row is a band of one: ``G = 1``, ``W`` = the clusters). Grid point
    ``(m, n)`` (``mi`` its row in the band) reads, into a scratch UB tile nothing uses, a few
    rows at a time: of column ``n``'s B blocks every ``2G``-th from ``2·mi + sub`` (in the
    first band only, when A, B and C fit L2 together: later bands find B there), and, when
    ``n < W``, of row ``m``'s A blocks every ``2W``-th from ``2·n + sub`` (2: the vector cores
    of a cluster; with one, every ``G``-th and ``W``-th). (A one-wave grid
    is one band of all its rows and columns.) Between them each
    block is read once per band, and each vector core's share is a few blocks spread over
    K, which it reads while the cube works through the K blocks before them. Reads only,
    so no flags.

    Under an epilogue the reads go at the top of each point's vector code, which the vector
    cores reach when the cube has finished the point before: when A, B and C fit L2 they
    read the blocks of the point their cluster runs next (``%nblk`` points on), and of their
    first point too (otherwise, and in one wave, the point's own). A plain product's vector
    cores have nothing else to do and run through the grid ahead of the cube (``racing``), so
    they read only when A, B and C fit L2 together (otherwise the loops run no times: the code
    does not depend on the sizes).
    The reads are the cube's own loads of those blocks (an operand read transposed in place
    too), cut into a few rows at a time; with partial edge tiles they use the full tiles'
    windows, shifted back inside the operand at its edges. Empty when the product is
    batched, reads A in whole-K panels or has a single K block, and with
    ``tile=dict(read_ahead=False)``."""
    m = lw.machine
    d = e.inputs[0].aval.dtype
    s = d.itemsize
    G = order.group
    KB = g.K // t.k1
    if lw.cfg.read_ahead is False or g.batch or KB < 2 or t.reuse > 1:
        return []
    fits = (g.M * g.K + g.K * g.N + g.M * g.N) * s <= m.l2_bytes
    mt, nt = -(-g.M // t.m1), -(-g.N // t.n1)
    W = min(nt, max(1, m.clusters // G))
    # the band and the row in it (row-major order: each tile row is a band of one; one wave:
    # the whole grid is one band, every point of it reading at once)
    mb, mi = (Expr.reg("mb"), Expr.reg("mi")) if G > 1 else (Expr.reg("m"), Expr())
    one_wave = mt * nt <= m.clusters
    if one_wave:
        G, W, mb, mi = mt, nt, Expr(), Expr.reg("m")
    bands = mt // G
    # the bands whose blocks are read ahead (loop bounds, not code: the program is the same
    # for every size): racing through the grid only when everything it reads stays in L2
    a_bands = bands if fits or not racing else 0
    b_bands = 1 if fits else a_bands
    pk, sub, n = Expr.reg("pk"), Expr.reg("sub"), Expr.reg("n")
    edges = bool(g.M % t.m1 or g.N % t.n1)

    def reads(name: str, load: TLoad) -> tuple[Stmt, ...]:
        return _prefetch(lw, name, load, edges)

    a1 = TileVar("a1", Space.L1, d, cube.a_block(t.m1, t.k1))
    b1 = TileVar("b1", Space.L1, d, cube.b_block(t.k1, t.n1))
    a_loads = reads("pfa", cube.load_a(a1, ga, pk * t.k1))
    b_loads = reads("pfb", cube.load_b(b1, gb, pk * t.k1))
    # 0/1-trip loops: bands below the bound; for A, also the band's first W columns
    # (the cluster's vector cores take the K blocks in turn)
    nv = m.aiv_per_cluster
    b_part = For("pk", mi * nv + sub, Expr.of(KB), nv * G, b_loads)
    a_part = For("pk", n * nv + sub, Expr.of(KB), nv * W, a_loads)
    a_reads = For(
        "pa", mb, Expr.of(a_bands), max(1, a_bands), (For("pw", n, Expr.of(W), W, (a_part,)),)
    )
    b_reads = For("pb", mb, Expr.of(b_bands), max(1, b_bands), (b_part,))
    # (measured: B first over several waves, whose first band reads all of B; A first in one)
    here: list[Stmt] = [a_reads, b_reads] if one_wave else [b_reads, a_reads]
    if racing or one_wave or g.batch:
        return here
    # Under an epilogue the vector cores reach a point's code only when the cube has finished
    # the point before, too late for the blocks its first K steps read: they read for the
    # point their cluster runs next (%nblk points on; none past the grid: the band loops run
    # no times), and for their first point as well. Only when everything fits L2 (a smaller
    # L2 would evict the blocks the cube is still reading to make room for the next ones);
    # otherwise the same code reads the point's own blocks (0 points on, no first reads).
    ahead = Expr.reg("nblk") * (1 if fits else 0)
    lin, nt_ = Expr.reg("lin"), Expr.of(nt)
    first = [
        SOp("SMOV", "lin", (order.lin,)),
        *gate("ra0", (Expr.reg("nblk") - lin) * (1 if fits else 0)),
        For("ira0", Expr(), Expr.reg("ra0"), 1, tuple(here)),
    ]
    if order.head:  # the band order: registers from %t
        t_ = Expr.reg("t")
        nxt = [SOp("SADD", "t", (t_, ahead)), *order.head]
        back = [SOp("SSUB", "t", (t_, ahead)), *order.head]
    else:  # row-major: %m and %n
        nxt = [
            SOp("SMOV", "m0", (Expr.reg("m"),)),
            SOp("SMOV", "n0", (Expr.reg("n"),)),
            SOp("SADD", "lin", (lin, ahead)),
            SOp("SDIV", "m", (lin, nt_)),
            SOp("SMOD", "n", (lin, nt_)),
        ]
        back = [SOp("SMOV", "m", (Expr.reg("m0"),)), SOp("SMOV", "n", (Expr.reg("n0"),))]
    return [*first, *nxt, *here, *back]


def _ahead_of(aiv: Section, order: _Order, ahead: list[Stmt]) -> Section:
    """An epilogue's vector section with the read-ahead at the top of each grid point's code,
    right after the point's registers."""
    if not ahead:
        return aiv
    return replace(aiv, body=(*order.head, *ahead, *aiv.body[len(order.head) :]))


def _group_name(lw: Lowering, e: Eqn) -> str:
    return dict(lw.func.groups).get(e.group or "", "matmul")


def _vector_epilogue(
    lw: Lowering,
    e: Eqn,
    plan: RowPlan | None,
    t: CubeTiles,
    g: Geom,
    ws: str,
    ws_dt: dt.DType,
    ring_row: Expr,
    c_row: Expr,
    used: set[Var],
    order: _Order,
) -> Section:
    """The vector cores' part: take half of the tile's rows from the ring, finish the result
    (cast to the matmul's dtype, then the epilogue's rules) and store — in column chunks when
    the whole half does not fit UB (:func:`_epilogue_chunk`). The chunks reuse the same tiles,
    one after another; all of them read the ring slot between one pair of cross-core flags.
    With partial edge tiles each extent (full or partial rows, full or partial columns) is a
    variant of that code, picked by 0/1-trip loops on ``%em``/``%en`` as the cube core's."""
    out = e.out
    mt, nt = -(-g.M // t.m1), -(-g.N // t.n1)
    n_col = Expr.reg("n") * t.n1 if nt > 1 else Expr()

    def finish(me: int, ne: int) -> Variant:
        """(pre, body, post) for an ``[me, ne]`` tile at the top left of the ring slot."""
        h = me // lw.machine.aiv_per_cluster if g.M > 1 else 1
        sub = Expr.reg("sub") * h if g.M > 1 else Expr()
        cw = _epilogue_chunk(lw.machine, plan, ws_dt, h, ne) or ne
        body: list[Stmt] = []
        pre: list[Stmt] = []
        post: list[Stmt] = []
        for c0 in range(0, ne, cw):
            x = TileVar("mm", Space.UB, ws_dt, (h, cw))
            body.append(TLoad(x, ws, ring_row + sub, Expr.of(c0), e.loc))
            y = x
            if ws_dt is not out.aval.dtype:
                y = TileVar("mmc", Space.UB, out.aval.dtype, (h, cw))
                body.append(TOp("TCVT", y, (x,), e.loc))
            if plan is None:
                c = lw.buffer(out)
                lw.view(c, (g.points * g.M, g.N))
                body.append(TStore(c, c_row + sub, n_col + c0, y, e.loc))
                continue
            rb = RowBuilder(lw, plan, h, cw)
            rb.row = c_row + sub
            rb.col = n_col + c0
            rb.loc = e.loc
            rb.tiles[out] = y
            for v in plan.inputs:
                if v is not out:
                    rb.tiles[v] = rb.load(v)
            for q in plan.eqns:
                rb.loc = q.loc or e.loc
                rule = OPS[q.op].rules["tile"]
                assert isinstance(rule, RowRule)
                args = [rb.tiles[a] if isinstance(a, Var) else a for a in q.inputs]
                rb.tiles[q.out] = rule.fn(rb, q, args)
            if out in used:
                rb.store(out, y)
            for v in plan.outputs:
                rb.store(v, rb.tiles[v])
            body += rb.body
            # every chunk's builder names its invariant tiles alike: keep one copy of each
            pre += [st for st in rb.pre if st not in pre]
            post += [st for st in rb.post if st not in post]
        return pre, body, post

    ms, ns = _extents(g.M, t.m1), _extents(g.N, t.n1)
    head: list[Stmt] = [*order.head, *order.slot()]
    if len(ms) * len(ns) == 1:
        pre, body, post = finish(t.m1, t.n1)
        if g.M == 1:
            # one row: both vector cores take it from the ring, only the first stores it
            body = stores_by_first_sub(body)
        return Section("aiv", (*head, *body), tuple(pre), tuple(post))
    # the variants share their tiles' buffers (the largest extent's size), as the cube's do
    pre, bodies, post = merge_variants([finish(me, ne) for me in ms for ne in ns], False)

    def pick(flag: str, parts: list[list[Stmt]], site: str) -> list[Stmt]:
        return parts[0] if len(parts) == 1 else _by_flag(flag, site, parts[0], parts[1])

    rows = [pick("en", bodies[i * len(ns) : (i + 1) * len(ns)], str(i)) for i in range(len(ms))]
    if len(ms) > 1:
        head.append(SOp("SMAX", "em", (Expr.reg("m") - (mt - 2), Expr.of(0))))
    if len(ns) > 1:
        head.append(SOp("SMAX", "en", (Expr.reg("n") - (nt - 2), Expr.of(0))))
    return Section("aiv", (*head, *pick("em", rows, "")), tuple(pre), tuple(post))


# ---------------------------------------------------------------- int32: vector multiply-adds
def _vector_matmul(lw: Lowering, e: Eqn, g: Geom) -> None:
    """``C = A @ B`` on the vector cores: per ``[tr, tc]`` tile of C, ``acc += A[:, k] * B[k, :]``
    (a column by a row, broadcast) over K, in blocks of ``kt`` columns of A and rows of B;
    integers accumulate in int32 and wrap to the result dtype once, as numpy does, and
    float16/bfloat16 in float32, rounded once (the numerics contract of every matmul)."""
    m = lw.machine
    d = e.out.aval.dtype
    w = dt.int32 if d is dt.int8 else dt.float32 if d in (dt.float16, dt.bfloat16) else d
    s = w.itemsize
    tc = max(x for x in divisors(g.N) if x * s <= 4096)
    kt = max(x for x in divisors(g.K) if x <= 64)
    rows = [
        x for x in divisors(g.M) if (3 * x * tc + 2 * x * kt + 2 * kt * tc) * s <= m.ub_bytes // 2
    ]
    points = g.points * (g.N // tc)
    tr = max(rows, key=lambda x: (min(points * (g.M // x), lw.workers()), x))
    t = CubeTiles(tr, tr, kt, kt, tc, tc)
    a, b, va, vb, _ = _views(e, g)
    a_row = g.rows(g.a_strides, g.M) + Expr.reg("m") * tr
    b_row = g.rows(g.b_strides, g.K)
    n_col = Expr.reg("n") * tc
    kb = Expr.reg("kb")
    ga = _operand(lw, a, va, (tr, kt), a_row, Expr())
    gb = _operand(lw, b, vb, (kt, tc), b_row, n_col)
    c = lw.buffer(e.out)
    lw.view(c, (g.points * g.M, g.N))
    acc = TileVar("acc", Space.UB, w, (tr, tc))
    at = TileVar("a", Space.UB, d, (tr, kt))
    bt = TileVar("b", Space.UB, d, (kt, tc))
    col = TileVar("ak", Space.UB, d, (tr, 1))
    row = TileVar("bk", Space.UB, d, (1, tc))
    prod = TileVar("p", Space.UB, w, (tr, tc))
    kk = Expr.reg("kk")
    cuts: list[Stmt] = [
        TOp("TEXTRACT", col, (at, Expr(), kk), e.loc),
        TOp("TEXTRACT", row, (bt, kk, Expr()), e.loc),
    ]
    if w is not d:
        wc, wr = TileVar("akw", Space.UB, w, (tr, 1)), TileVar("bkw", Space.UB, w, (1, tc))
        cuts += [TOp("TCVT", wc, (col,), e.loc), TOp("TCVT", wr, (row,), e.loc)]
        col, row = wc, wr
    inner = (
        *cuts,
        TOp("TMUL", prod, (col, row), e.loc),
        TOp("TADD", acc, (acc, prod), e.loc),
    )
    res = acc
    tail: list[Stmt] = []
    if w is not d:
        res = TileVar("c", Space.UB, d, (tr, tc))
        tail.append(TOp("TCVT", res, (acc,), e.loc))
    body: tuple[Stmt, ...] = (
        TOp("TEXPANDS", acc, (0.0,), e.loc),
        For(
            "kb",
            Expr(),
            Expr.of(g.K // kt),
            1,
            (
                TLoad(at, ga[0], ga[1], ga[2] + kb * kt, e.loc),
                TLoad(bt, gb[0], gb[1] + kb * kt, gb[2], e.loc),
                For("kk", Expr(), Expr.of(kt), 1, inner),
            ),
        ),
        *tail,
        TStore(c, g.rows(g.c_strides, g.M) + Expr.reg("m") * tr, n_col, res, e.loc),
    )
    lw.add_kernel(
        Kernel(
            lw.fresh("matmul"),
            "matmul",
            _grid(g, t),
            (Section("aiv", body),),
            (("rows", tr), ("cols", tc), ("k", kt)),
            loc=e.loc,
            flops=2 * g.points * g.M * g.N * g.K,
        )
    )


def _matmul_rule(lw: Lowering, e: Eqn) -> None:
    lower_matmul(lw, e)


def _group_rule(lw: Lowering, eqns: list[Eqn]) -> bool:
    """A matmul followed by its elementwise epilogue: one cluster kernel."""
    if eqns[0].op != "matmul" or any(q.op == "matmul" for q in eqns[1:]):
        return False
    return lower_matmul(lw, eqns[0], eqns[1:])


def _claim_operands(lw: Lowering, group: list[Eqn], cands: list[Eqn]) -> list[Eqn]:
    """The transposes that make a cube matmul's A or B and keep the source's last axis as one
    of its last two (``x @ w.T``, the weight and activation transposes of a backward pass,
    head splits): the cube core loads the source's blocks and cuts its L0 steps from them
    (``TEXTRACT_T`` where transposed), so no transpose kernel. And a plain product's A that
    is a concatenation of row windows of one buffer (:class:`_Shifted`), with its slices:
    each K block is loaded from its window, so the patches are never written."""
    e = group[0]
    if e.op != "matmul" or any(q.op == "matmul" for q in group[1:]):
        return []
    a, b = e.inputs
    if not isinstance(a, Var) or not isinstance(b, Var) or _acc_dtype(a.aval.dtype) is None:
        return []
    took: list[Eqn] = []
    slices = {q.out: q for q in cands if q.op == "slice"}
    for cat in cands:
        sh = _shifted_of(cat, slices) if cat.out is a and len(group) == 1 else None
        s, align = a.aval.dtype.itemsize, lw.machine.align_bytes
        if (
            sh is not None
            and b.aval.ndim == 2
            and sh.src in lw.var_buf
            # each part's rows start 32-byte aligned, and its K blocks are whole fractals
            and (sh.src.aval.shape[1] * s) % align == 0
            and (sh.col * s) % align == 0
            and sh.width % 16 == 0
            and all([q for q in lw.func.eqns if sl.out in q.inputs] == [cat] for sl in sh.eqns[:-1])
        ):
            # a concatenation of row windows (a convolution's shifted taps): read in parts
            took += sh.eqns
    for tr in cands:
        if tr.op != "transpose":
            continue
        src = tr.inputs[0]
        if src not in lw.var_buf or tr.out not in (a, b) or _stored(tr.out, tr) is None:
            continue
        # (A's batch folded into M with a 2-D B would not be one window of the source)
        if tr.out is a and a.aval.ndim > 2 and b.aval.ndim == 2:
            continue
        took.append(tr)
    return took


register_rule("tile", "matmul")(KernelRule(_matmul_rule))
GROUP_RULES.append(_group_rule)
HEAD_EPILOGUES.append(lower_head_epilogue)
GROUP_WINDOWS.append(_claim_operands)
