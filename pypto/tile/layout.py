"""Tile rules of the layout primitives: every one a pattern of DMA windows, without arithmetic.

Each op is written as one or more **strided copies**: a box of indices (the *domain*) and, for
the destination and the source, which domain dim drives each tensor axis with what step and
offset. Transpose permutes the dims, slice steps and offsets the source, broadcast_to leaves a
source axis undriven, concat and pad offset (and, for interior padding, step) the destination.
:func:`copy` turns a strided copy into kernels, choosing per copy the cheapest shape of tile:

* ``straight`` — the last axis runs along the last axis on both sides: ``[rows, cols]`` windows
  moved GM → UB → GM; a source row broadcast down the tile is loaded once as ``[1, cols]`` and
  spread with ``TCOLEXPAND``; a constant source (the zeros of pad) is a ``TEXPANDS`` tile;
* ``rowexpand`` — the source's last axis is a broadcast size-1 axis: ``[rows, 1]`` loaded and
  spread with ``TROWEXPAND``;
* ``transpose`` — the last axes trade places: a ``[b, a]`` window, ``TTRANS`` to ``[a, b]``;
* ``stepped`` — a positive step on the source's last axis: the ``[rows, step*cols]`` window
  seen as ``[rows*cols, step]`` gives up its first column with one ``TEXTRACT``;
* ``gather`` — a negative step on the source's last axis (``x[..., ::-1]``, ``flip``): the
  window from the tile's last element to its first, loaded forwards, and one ``TGATHER`` with
  a constant index tile that puts its columns in order;
* ``element`` — anything else (interior padding of the last axis, a reversed last axis whose
  window the source's layout cannot hold): one element per DMA. Correct, and slow: only the
  unusual cases land here.

Buffers are read and written through their 2-D views; a layout op's output is laid out as
``[prod(shape[:-1]), shape[-1]]`` of the (merged) shape the kernel sees, and a source whose view
cannot hold a window as one rectangle is first copied into that layout (``relayout``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import SourceLoc, TileError
from pypto.graph.ir import Eqn, Lit, Var
from pypto.isa.ir import Cond, Expr, Space
from pypto.npu.machine import Machine
from pypto.ops.table import AVal, register_rule
from pypto.tile.ir import For, Kernel, Section, SOp, Stmt, TileVar, TLoad, TOp, TStore
from pypto.tile.lower import (
    KernelRule,
    Lowering,
    _kind_of,
    lower_row_kernel,
    plan_row,
    relayout,
    window,
)
from pypto.tile.rules import BINARY_OPS, COMPARE_OPS, UNARY_OPS

__all__ = ["Access", "alias", "copy", "transpose_into"]

TILE_BYTES = 32 * 1024
"""bytes of one copy tile: DMA runs near its full rate from about 16 KiB, and a tile with its
double buffer and a transposed twin stays well inside UB (on a machine with less UB than
the chip's 192 KiB: :func:`tile_bytes`)"""


def tile_bytes(m: Machine) -> int:
    """Bytes of one copy tile on ``m``: ``TILE_BYTES``, or a sixth of a smaller UB (the
    chip's share), so that the tiles and their double buffers fit there too."""
    return min(TILE_BYTES, max(m.align_bytes, m.ub_bytes // 6 // m.align_bytes * m.align_bytes))


def gather_dtype(d: dt.DType) -> dt.DType:
    """The dtype ``d``'s values are gathered in: TGATHER moves 2- and 4-byte elements, so
    bools and int8 travel as float16 (which holds every one of them exactly)."""
    return dt.float16 if d.itemsize == 1 else d


MIN_RUN_BYTES = 512
"""bytes per row of a transposed tile's load: one L2 line, so a miss wastes nothing"""

Axis = tuple[int | None, int, int]
"""how a tensor axis is indexed: (domain dim driving it or None, step, offset)"""


@dataclass(frozen=True)
class Access:
    """One side of a strided copy: a buffer seen with ``shape`` and, per axis, the domain dim,
    step and offset. Its 2-D view puts the first ``split`` axes on rows and the rest on columns:
    ``[prod(shape[:split]), prod(shape[split:])]``; the natural view (``split=None``) has only
    the last axis on columns. ``buf=None`` is a constant source (every element ``fill``)."""

    buf: str | None
    dtype: dt.DType
    shape: tuple[int, ...]
    axes: tuple[Axis, ...]
    fill: float = 0.0
    split: int | None = None

    @staticmethod
    def dense(buf: str | None, dtype: dt.DType, shape: tuple[int, ...]) -> Access:
        """Axis ``a`` driven by domain dim ``a``, step 1, offset 0."""
        return Access(buf, dtype, shape, tuple((a, 1, 0) for a in range(len(shape))))

    @property
    def nrow(self) -> int:
        """How many leading axes the view's rows hold."""
        return len(self.shape) - 1 if self.split is None else self.split

    @property
    def cols(self) -> int:
        return math.prod(self.shape[self.nrow :])

    @property
    def view(self) -> tuple[int, int]:
        return (math.prod(self.shape[: self.nrow]), self.cols)

    def row_stride(self, a: int) -> int:
        return math.prod(self.shape[a + 1 : self.nrow])

    def row_step(self, d: int) -> int:
        """How far one step of domain dim ``d`` moves in rows of the view."""
        k = self.nrow
        return sum(
            s * self.row_stride(a) for a, (dd, s, _) in enumerate(self.axes) if dd == d and a < k
        )

    def col_axes(self, d: int) -> list[int]:
        """The axes on the view's columns that domain dim ``d`` drives."""
        return [a for a in _drives(self, d) if a >= self.nrow]

    def last(self) -> Axis:
        return self.axes[-1]

    def row(self, idx: list[Expr]) -> Expr:
        e = Expr()
        for a, (d, s, off) in enumerate(self.axes[: self.nrow]):
            i = Expr.of(off) if d is None else idx[d] * s + off
            e = e + i * self.row_stride(a)
        return e

    def col(self, idx: list[Expr]) -> Expr:
        e = Expr()
        n = len(self.shape)
        for a in range(self.nrow, n):
            d, s, off = self.axes[a]
            i = Expr.of(off) if d is None else idx[d] * s + off
            e = e + i * math.prod(self.shape[a + 1 :])
        return e


def _norm(acc: Access) -> Access:
    """A 0-d side as a 1-element 1-d one."""
    if acc.shape:
        return acc
    return replace(acc, shape=(1,), axes=((None, 0, 0),))


@dataclass(frozen=True)
class _Plan:
    mode: str
    dc: int | None = None  # the dim along the destination's columns
    dr: int | None = None  # the dim along the destination's rows (None: one row)


def _drives(acc: Access, d: int) -> list[int]:
    return [a for a, (dd, _, _) in enumerate(acc.axes) if dd == d]


def _plan(dst: Access, src: Access, extents: tuple[int, ...]) -> _Plan:
    ndst = len(dst.shape)
    dc, dstep, _ = dst.last()
    if dc is None or dstep != 1:
        return _Plan("element")
    lsrc = len(src.shape)

    if dst.col_axes(dc) != [ndst - 1]:
        return _Plan("element")

    def row_dim(ok_src: tuple[int, ...], exclude: int) -> int | None:
        best = None
        for d in range(len(extents)):
            if d == exclude or extents[d] == 1 or dst.row_step(d) != 1 or ndst < 2:
                continue
            if dst.col_axes(d):
                continue
            if src.buf is not None and src.row_step(d) not in ok_src:
                continue
            if src.buf is not None and src.col_axes(d):
                continue
            if best is None or extents[d] > extents[best]:
                best = d
        return best

    if src.buf is None:
        return _Plan("straight", dc, row_dim((0, 1), dc))
    sd, sstep, _ = src.last()
    # the tile's columns run along the last axis only (other column axes stay put in a tile)
    only_last = src.col_axes(dc) in ([lsrc - 1], [])
    if sd == dc and sstep == 1 and src.row_step(dc) == 0 and only_last:
        return _Plan("straight", dc, row_dim((0, 1), dc))
    if sd is None and src.row_step(dc) == 0 and only_last:
        return _Plan("rowexpand", dc, row_dim((0, 1), dc))
    if src.split is not None or dst.split is not None:
        return _Plan("element")  # the other plans read and write the natural views
    if sd == dc and sstep >= 2 and src.row_step(dc) == 0:
        return _Plan("stepped", dc, row_dim((1,), dc))
    if sd == dc and sstep < 0 and src.row_step(dc) == 0:
        return _Plan("gather", dc, row_dim((1,), dc))
    if (
        sd is not None
        and sd != dc
        and sstep == 1
        and src.row_step(dc) == 1
        and dst.row_step(sd) == 1
        and len(_drives(src, dc)) == 1
        and len(_drives(dst, sd)) == 1
    ):
        return _Plan("transpose", dc, sd)
    return _Plan("element")


def _pick(extent: int, cap: int) -> int:
    """A tile length along a dim: the whole dim when it fits, else a divisor near ``cap`` (no
    remainder strip), else ``cap`` (with one)."""
    cap = max(1, cap)
    if extent <= cap:
        return extent
    for t in range(cap, cap // 2, -1):
        if extent % t == 0:
            return t
    return cap


def _split(start: int, extent: int, t: int) -> list[tuple[int, int, int]]:
    """(start, extent, tile) of the main part (whole tiles) and of the remainder."""
    main = extent - extent % t
    out = [(start, main, t)] if main else []
    if extent % t:
        out.append((start + main, extent % t, extent % t))
    return out


class _Emit:
    """Builds the kernels of one strided copy over sub-boxes of its domain."""

    def __init__(self, lw: Lowering, name: str, loc: SourceLoc | None) -> None:
        self.lw, self.name, self.loc = lw, name, loc

    # ---- windows over the buffers' views
    def _load(self, acc: Access, tile: TileVar, row: Expr, col: Expr) -> TLoad | None:
        assert acc.buf is not None
        lay = self.lw.view(acc.buf, acc.view)
        w = window(lay, acc.cols, tile.shape, row, col)
        if w is None:
            return None
        shape, r, c = w
        return TLoad(TileVar(tile.name, tile.space, tile.dtype, shape), acc.buf, r, c, self.loc)

    def _store(self, acc: Access, tile: TileVar, row: Expr, col: Expr) -> TStore | None:
        assert acc.buf is not None
        lay = self.lw.view(acc.buf, acc.view)
        w = window(lay, acc.cols, tile.shape, row, col)
        if w is None:
            return None
        shape, r, c = w
        return TStore(acc.buf, r, c, TileVar(tile.name, tile.space, tile.dtype, shape), self.loc)

    def _gather(
        self, src: Access, out: TileVar, idx: list[Expr], tr: int, tc: int, pre: list[Stmt]
    ) -> list[Stmt]:
        """A negative step on the source's last axis: the ``[tr, W]`` window from the tile's
        last element to its first, loaded forwards, then one ``TGATHER`` with a constant index
        tile (``r·W + W-1 - c·|step|``) puts its columns in order. [] when the window is not
        one rectangle of the source's layout."""
        step = -src.last()[1]
        W = step * (tc - 1) + 1
        d = out.dtype
        work = gather_dtype(d)
        x = TileVar("x", Space.UB, d, (tr, W))
        ld = self._load(src, x, src.row(idx), src.col(idx) - step * (tc - 1))
        if ld is None:
            return []
        order = np.arange(tr)[:, None] * W + (W - 1) - np.arange(tc)[None, :] * step
        ix = TileVar("ix", Space.UB, dt.int32, (tr, tc))
        pre.append(
            TLoad(ix, self.lw.const_buffer("rev", order.astype(np.int32)), Expr(), Expr(), self.loc)
        )
        body: list[Stmt] = [ld]
        if work is not d:
            xw = TileVar("xw", Space.UB, work, (tr, W))
            yw = TileVar("yw", Space.UB, work, (tr, tc))
            body += [
                TOp("TCVT", xw, (x,), self.loc),
                TOp("TGATHER", yw, (xw, ix), self.loc),
                TOp("TCVT", out, (yw,), self.loc),
            ]
        else:
            body.append(TOp("TGATHER", out, (x, ix), self.loc))
        return body

    def kernel(
        self,
        dst: Access,
        src: Access,
        plan: _Plan,
        box: list[tuple[int, int, int]],
    ) -> bool:
        """One kernel over ``box`` (per dim: start, extent, tile length); False when a window
        is not one rectangle of its buffer's view."""
        idx: list[Expr] = []
        grid: list[tuple[str, int]] = []
        for d, (start, extent, t) in enumerate(box):
            n = extent // t
            # a dim longer than one element is a grid dim even when one tile covers it (but for
            # whole rows), so the kernel's code does not change with the sizes, only its grid
            if extent > 1 and (t < extent or d != len(box) - 1):
                reg = f"d{d}"
                grid.append((reg, n))
                idx.append(Expr.reg(reg) * t + start)
            else:
                idx.append(Expr.of(start))
        pre: list[Stmt] = []
        body: list[Stmt] = []
        d_t = dst.dtype
        tr = box[plan.dr][2] if plan.dr is not None else 1
        tc = box[plan.dc][2] if plan.dc is not None else 1
        out = TileVar("y", Space.UB, d_t, (tr, tc))
        if plan.mode == "transpose":
            assert plan.dc is not None and plan.dr is not None
            x = TileVar("x", Space.UB, d_t, (tc, tr))
            ld = self._load(src, x, src.row(idx), src.col(idx))
            if ld is None:
                return False
            body += [ld, TOp("TTRANS", out, (x,), self.loc)]
        elif src.buf is None:
            pre.append(TOp("TEXPANDS", out, (float(src.fill),), self.loc))
        elif plan.mode in ("straight", "element"):
            bcast = plan.dr is not None and src.row_step(plan.dr) == 0 and tr > 1
            x = TileVar("x", Space.UB, d_t, (1, tc)) if bcast else out
            ld = self._load(src, x, src.row(idx), src.col(idx))
            if ld is None:
                return False
            body.append(ld)
            if bcast:
                body.append(TOp("TCOLEXPAND", out, (x,), self.loc))
        elif plan.mode == "rowexpand":
            bcast = plan.dr is not None and src.row_step(plan.dr) == 0 and tr > 1
            x = TileVar("x", Space.UB, d_t, (1 if bcast else tr, 1))
            ld = self._load(src, x, src.row(idx), src.col(idx))
            if ld is None:
                return False
            body.append(ld)
            if bcast:
                x1 = TileVar("x1", Space.UB, d_t, (1, tc))
                body += [
                    TOp("TROWEXPAND", x1, (x,), self.loc),
                    TOp("TCOLEXPAND", out, (x1,), self.loc),
                ]
            else:
                body.append(TOp("TROWEXPAND", out, (x,), self.loc))
        elif plan.mode == "gather":
            body += self._gather(src, out, idx, tr, tc, pre)
            if not body:
                return False
        else:
            assert plan.mode == "stepped"
            step = src.last()[1]
            x = TileVar("x", Space.UB, d_t, (tr, step * tc))
            ld = self._load(src, x, src.row(idx), src.col(idx))
            if ld is None:
                return False
            # the window's bytes seen as [rows*cols, step]: column 0 holds the kept elements
            strided = TileVar("x", Space.UB, d_t, (tr * tc, step))
            picked = TileVar("y", Space.UB, d_t, (tr * tc, 1))
            body += [ld, TOp("TEXTRACT", picked, (strided, Expr(), Expr()), self.loc)]
        st = self._store(dst, out, dst.row(idx), dst.col(idx))
        if st is None:
            return False
        body.append(st)
        self.lw.add_kernel(
            Kernel(
                self.lw.fresh(self.name),
                "layout",
                tuple(grid) or (("d", 1),),
                (Section("aiv", tuple(body), tuple(pre)),),
                (("rows", tr), ("cols", tc)),
                loc=self.loc,
            )
        )
        return True


def _splits(lw: Lowering, acc: Access) -> list[int | None]:
    """The 2-D views a side may be seen through: the natural one, and any other split of its
    axes that matches the layout its buffer already has (or every split when it has none)."""
    n = len(acc.shape)
    if acc.buf is None or n < 3:
        return [None]
    have = lw.views.get(acc.buf)
    return [
        None,
        *(k for k in range(1, n - 1) if have is None or math.prod(acc.shape[k:]) == have[1]),
    ]


def _choose_views(
    lw: Lowering, dst: Access, src: Access, extents: tuple[int, ...]
) -> tuple[Access, Access, _Plan]:
    """The plan for the natural views, unless another split of the axes (one the buffers'
    layouts allow) gives whole tiles of rows where the natural views give one row per tile:
    ``[s, h, d] -> [h, s, d]`` then moves ``[rows of s, d]`` windows out of the ``[s, h*d]``
    layout a matmul wrote, instead of one row of ``d`` per transfer."""
    plan = _plan(dst, src, extents)
    if plan.mode not in ("straight", "rowexpand") or plan.dr is not None:
        return dst, src, plan
    best = (dst, src, plan)
    for ks in _splits(lw, src):
        for kd in _splits(lw, dst):
            if ks is None and kd is None:
                continue
            d2, s2 = replace(dst, split=kd), replace(src, split=ks)
            p = _plan(d2, s2, extents)
            if p.mode in ("straight", "rowexpand") and p.dr is not None:
                bp = best[2]
                if bp.dr is None or extents[p.dr] > extents[bp.dr]:
                    best = (d2, s2, p)
    return best


def copy(
    lw: Lowering,
    name: str,
    dst: Access,
    src: Access,
    extents: tuple[int, ...],
    loc: SourceLoc | None,
) -> None:
    """Kernels that copy ``src`` into ``dst`` over the domain box ``extents``."""
    if math.prod(extents) == 0:
        return
    dst, src = _norm(dst), _norm(src)
    if not extents:
        extents = (1,)
    dst, src, plan = _choose_views(lw, dst, src, extents)
    isz = dst.dtype.itemsize
    cap = tile_bytes(lw.machine) // isz
    tiles = [1] * len(extents)
    regions: dict[int, list[tuple[int, int, int]]] = {}
    if plan.mode == "transpose":
        assert plan.dc is not None and plan.dr is not None
        ta = _pick(extents[plan.dr], max(MIN_RUN_BYTES // isz, 64))
        tb = _pick(extents[plan.dc], cap // ta)
        tiles[plan.dr], tiles[plan.dc] = ta, tb
    elif plan.mode == "stepped":
        dc, dr = plan.dc, plan.dr
        assert dc is not None
        step, off = src.last()[1], src.last()[2]
        # whole tiles whose [step*cols] window stays inside the source row; the rest by element
        fit = min(extents[dc], (src.cols - off) // step)
        tc = _pick(fit, cap // step)
        main = fit // tc * tc if tc else 0
        if main == 0:
            plan = _Plan("element")
        else:
            tiles[dc] = tc
            regions[dc] = [(0, main, tc)] + (
                [(main, extents[dc] - main, 1)] if main < extents[dc] else []
            )
            if dr is not None:
                tiles[dr] = _pick(extents[dr], max(1, cap // (tc * step)))
    elif plan.mode == "gather":
        dc, dr = plan.dc, plan.dr
        assert dc is not None
        step = -src.last()[1]
        tb, wb = tile_bytes(lw.machine), max(isz, 2)
        # the [tr, step·(tc-1)+1] window and the i32 [tr, tc] index tile: each one copy tile
        tc = tiles[dc] = _pick(extents[dc], max(1, min(tb // (step * wb), tb // 4)))
        if dr is not None:
            w = step * (tc - 1) + 1
            tiles[dr] = _pick(extents[dr], max(1, min(tb // (w * wb), tb // (tc * 4))))
    if plan.mode in ("straight", "rowexpand"):
        assert plan.dc is not None
        tiles[plan.dc] = _pick(extents[plan.dc], cap)
        if plan.dr is not None:
            tiles[plan.dr] = _pick(extents[plan.dr], cap // tiles[plan.dc])
    for d, e in enumerate(extents):
        if d not in regions:
            regions[d] = _split(0, e, tiles[d])
    em = _Emit(lw, name, loc)
    boxes: list[list[tuple[int, int, int]]] = [[]]
    for d in range(len(extents)):
        boxes = [[*b, r] for b in boxes for r in regions[d]]
    for box in boxes:
        p = plan
        if plan.mode == "stepped" and plan.dc is not None and box[plan.dc][2] == 1:
            p = _Plan("element")
        if p.mode == "element":
            box = [(start, extent, 1) for start, extent, _ in box]
        if not em.kernel(dst, src, p, box):
            # a view that does not hold the window: copy the buffer into the natural layout
            if src.buf is not None and lw.views.get(src.buf) != src.view:
                src = replace(src, buf=relayout(lw, src.buf, src.view, loc))
            if not em.kernel(dst, src, p, box):
                raise TileError(
                    f"{name}: no window of the destination's layout "
                    f"{lw.views.get(dst.buf or '')} holds a tile of {list(dst.shape)}",
                    op=name,
                    loc=loc,
                )


def alias(lw: Lowering, e: Eqn, src: Var) -> None:
    """``e.out`` is ``src``'s buffer (same bytes, same order): a view, no kernel."""
    buf = lw.buffer(src)
    lw.var_buf[e.out] = buf
    d, size, role = lw.buffers[buf]
    if e.out in lw.outputs_of and role == "tmp":
        lw.buffers[buf] = (d, size, "out")


def _out(lw: Lowering, e: Eqn, shape: tuple[int, ...]) -> Access:
    """The destination side: ``e.out``'s buffer laid out naturally for ``shape``."""
    buf = lw.buffer(e.out)
    sh = shape or (1,)
    lw.view(buf, (math.prod(sh[:-1]), sh[-1]))
    return Access.dense(buf, e.out.aval.dtype, shape)


def _source(lw: Lowering, x: Var | Lit, dtype: dt.DType) -> Access:
    if isinstance(x, Lit):
        return Access(None, dtype, (), (), float(np.asarray(x.value).item()))
    return Access.dense(lw.buffer(x), dtype, x.aval.shape)


# ---------------------------------------------------------------- the rules
def _reshape(lw: Lowering, e: Eqn) -> None:
    x = e.inputs[0]
    if isinstance(x, Var):
        alias(lw, e, x)
    else:
        lw.var_buf[e.out] = lw.const_buffer("lit", np.asarray(x.value).reshape(1, 1))


def _merge_perm(
    shape: tuple[int, ...], perm: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Drop size-1 axes and merge source axes that stay adjacent: the same transpose on the
    fewest axes (``(shape, perm)`` of the merged source)."""
    order = [a for a in perm if shape[a] != 1]
    groups: list[list[int]] = []
    for a in order:
        if groups and groups[-1][-1] + 1 == a:
            groups[-1].append(a)
        else:
            groups.append([a])
    firsts = sorted(g[0] for g in groups)
    merged = tuple(math.prod(shape[a] for a in g) for g in sorted(groups, key=lambda g: g[0]))
    new_perm = tuple(firsts.index(g[0]) for g in groups)
    return merged, new_perm


def transpose_into(
    lw: Lowering,
    name: str,
    xbuf: str,
    dtype: dt.DType,
    shape: tuple[int, ...],
    perm: tuple[int, ...],
    dst: str,
    loc: SourceLoc | None,
) -> None:
    """Kernels writing ``transpose(x, perm)`` into buffer ``dst`` (laid out for the merged
    result): a two-axis swap is one ``TTRANS`` copy; a permutation that keeps the last axis is
    a row copy; any other one is a swap followed by a row permutation."""
    s, p = _merge_perm(shape, perm)
    n = len(s)
    out_shape = tuple(s[a] for a in p)
    if n <= 1 or p == tuple(range(n)):
        src = Access.dense(xbuf, dtype, s or (1,))
        copy(lw, name, Access.dense(dst, dtype, s or (1,)), src, s or (1,), loc)
        return
    if p[-1] == n - 1 or _swap_last(p):
        if _swap_last(p):
            lw.view(dst, (math.prod(out_shape[:-1]), out_shape[-1]))
        # (a row permutation leaves the destination's layout to copy: see _choose_views)
        src = Access(xbuf, dtype, s, tuple((p.index(a), 1, 0) for a in range(n)))
        copy(lw, name, Access.dense(dst, dtype, out_shape), src, out_shape, loc)
        return
    # move the source axis that ends last to the end with one swap of two axis groups,
    # then permute the rest with the last axis fixed
    q = p[-1]
    lead = 0
    while p[lead] == lead:
        lead += 1
    b = math.prod(s[:lead])
    x_ = math.prod(s[lead : q + 1])
    y_ = math.prod(s[q + 1 :])
    # the swap leaves the axes as [s[:lead], s[q+1:], s[lead:q+1]]
    mid = (*s[:lead], *s[q + 1 :], *s[lead : q + 1])
    axes_of = [*range(lead), *range(q + 1, n), *range(lead, q + 1)]
    perm2 = tuple(axes_of.index(a) for a in p)
    rest = _merge_perm(mid, perm2)[1]
    if rest == tuple(range(len(rest))):  # the swap alone is the transpose
        transpose_into(lw, name, xbuf, dtype, (b, x_, y_), (0, 2, 1), dst, loc)
        return
    tmp = lw.new_buffer("tr", dtype, math.prod(s))
    lw.views[tmp] = (b * y_, x_)
    transpose_into(lw, name, xbuf, dtype, (b, x_, y_), (0, 2, 1), tmp, loc)
    transpose_into(lw, name, tmp, dtype, mid, perm2, dst, loc)


def _swap_last(p: tuple[int, ...]) -> bool:
    """``p`` fixes its leading axes and swaps the last two (a batched 2-D transpose)."""
    n = len(p)
    return p[-1] == n - 2 and p[-2] == n - 1 and p[: n - 2] == tuple(range(n - 2))


def _transpose(lw: Lowering, e: Eqn) -> None:
    x = e.inputs[0]
    assert isinstance(x, Var)
    perm = tuple(e.kwargs["perm"])
    _s, p = _merge_perm(x.aval.shape, perm)
    if p == tuple(range(len(p))):
        alias(lw, e, x)  # only size-1 axes move: the bytes keep their order
        return
    out = lw.buffer(e.out)
    transpose_into(lw, "transpose", lw.buffer(x), x.aval.dtype, x.aval.shape, perm, out, e.loc)


def _broadcast_to(lw: Lowering, e: Eqn) -> None:
    x = e.inputs[0]
    shape = tuple(e.kwargs["shape"])
    if isinstance(x, Var) and x.aval.size == math.prod(shape):
        alias(lw, e, x)  # only size-1 axes are added
        return
    copy(
        lw,
        "broadcast",
        _out(lw, e, shape),
        _spread(_source(lw, x, e.out.aval.dtype), shape),
        shape,
        e.loc,
    )


def _spread(src: Access, shape: tuple[int, ...]) -> Access:
    """``src`` read as broadcast to ``shape``: its size-1 axes stay put, new axes lead."""
    if src.buf is None:
        return src
    k = len(shape) - len(src.shape)
    return replace(
        src,
        axes=tuple(
            (None, 0, 0) if n == 1 and shape[a + k] != 1 else (a + k, 1, 0)
            for a, n in enumerate(src.shape)
        ),
    )


def _elementwise_general(lw: Lowering, e: Eqn) -> None:
    """An elementwise op whose operands broadcast in a way the row kernel cannot take (both
    ``[B, 1, C]`` and ``[1, T, C]``, or ``[T, 1]`` against ``[B, T, C]``): those operands are
    broadcast to the full shape first, then the row kernel runs."""
    shape = e.out.aval.shape
    ins: list[Var | Lit] = []
    for a in e.inputs:
        if isinstance(a, Var) and _kind_of(a.aval.shape, shape) is None:
            full = Var(AVal(shape, a.aval.dtype))
            buf = lw.new_buffer("bcast", a.aval.dtype, math.prod(shape))
            lw.var_buf[full] = buf
            dst = Access.dense(buf, a.aval.dtype, shape)
            copy(lw, "broadcast", dst, _spread(_source(lw, a, a.aval.dtype), shape), shape, e.loc)
            a = full
        ins.append(a)
    e2 = Eqn(e.op, tuple(ins), e.params, e.out, e.loc)
    plan = plan_row(lw, [e2], {e.out})
    if plan is None:
        raise TileError(
            f"no tile lowering for {e.op} on "
            + ", ".join(str(a.aval) for a in e.inputs)
            + f" -> {e.out.aval}",
            op=e.op,
            loc=e.loc,
        )
    lower_row_kernel(lw, plan, lw.fresh(e.op), e.loc)


def _concat(lw: Lowering, e: Eqn) -> None:
    axis = e.kwargs["axis"]
    shape = e.out.aval.shape
    axis %= len(shape)
    d = e.out.aval.dtype
    dst = _out(lw, e, shape)
    off = 0
    for x in e.inputs:
        assert isinstance(x, Var)
        n = x.aval.shape[axis]
        place = replace(dst, axes=tuple((a, 1, off if a == axis else 0) for a in range(len(shape))))
        copy(lw, "concat", place, Access.dense(lw.buffer(x), d, x.aval.shape), x.aval.shape, e.loc)
        off += n


def _slice(lw: Lowering, e: Eqn) -> None:
    x = e.inputs[0]
    assert isinstance(x, Var)
    index = e.kwargs["index"]
    shape = e.out.aval.shape
    dst = _out(lw, e, shape)
    src = Access(
        lw.buffer(x),
        x.aval.dtype,
        x.aval.shape,
        tuple((a, step, start) for a, (start, _, step) in enumerate(index)),
    )
    copy(lw, "slice", dst, src, shape, e.loc)


def _pad(lw: Lowering, e: Eqn) -> None:
    x = e.inputs[0]
    config = e.kwargs["config"]
    shape = e.out.aval.shape
    d = e.out.aval.dtype
    dst = _out(lw, e, shape)
    # the padding value everywhere first (one constant fill), then the input over it
    fill = float(e.kwargs.get("value", 0))
    copy(lw, "pad_zero", dst, Access(None, d, (), (), fill), shape, e.loc)
    src = _source(lw, x, d)
    if src.buf is None:
        src = replace(src, shape=(1,) * len(shape), axes=tuple((None, 0, 0) for _ in shape))
    place = replace(dst, axes=tuple((a, mid + 1, lo) for a, (lo, _, mid) in enumerate(config)))
    xs = x.aval.shape
    copy(lw, "pad", place, src, xs, e.loc)


for _name, _fn in (
    ("reshape", _reshape),
    ("transpose", _transpose),
    ("concat", _concat),
    ("slice", _slice),
    ("lax_pad", _pad),
):
    register_rule("tile", _name)(KernelRule(_fn))
# a broadcast a row kernel can take is one of its ops (pypto.tile.rules); the others copy
register_rule("tile_general", "broadcast_to")(KernelRule(_broadcast_to))
for _name in (*UNARY_OPS, *BINARY_OPS, *COMPARE_OPS, "where", "cast", "bitcast_convert_type"):
    register_rule("tile_general", _name)(KernelRule(_elementwise_general))


# ---------------------------------------------------------------- take
@dataclass
class _TakeIO:
    """What both ways of lowering ``take`` start from: ``x`` viewed ``[P, N, Q]`` (``N`` the
    taken axis), ``K`` indices as a ``[K, 1]`` column, the output viewed ``[P*K, Q]``."""

    P: int
    N: int
    Q: int
    K: int
    dtype: dt.DType
    index_dtype: dt.DType
    xbuf: str
    ibuf: str
    out: str
    loc: SourceLoc | None

    @staticmethod
    def of(lw: Lowering, e: Eqn) -> _TakeIO:
        x, ix = e.inputs
        assert isinstance(x, Var) and isinstance(ix, Var)
        shape = x.aval.shape
        a = e.kwargs["axis"] % len(shape)
        K = ix.aval.size
        ibuf = lw.buffer(ix)
        if lw.view(ibuf, (K, 1)) != (K, 1):
            ibuf = relayout(lw, ibuf, (K, 1), e.loc)
        P, Q = math.prod(shape[:a]), math.prod(shape[a + 1 :])
        out = lw.buffer(e.out)
        lw.view(out, (P * K, Q))
        return _TakeIO(
            P, shape[a], Q, K, x.aval.dtype, ix.aval.dtype, lw.buffer(x), ibuf, out, e.loc
        )

    def grid(self, tk: int, tq: int) -> tuple[int, int, list[tuple[str, int]], list[Expr]]:
        """Tiles of ``tk`` indices and ``tq`` columns (1 where they would not divide), the
        grid over them and its registers ``p``, ``k``, ``q`` (0 where the grid has no dim)."""
        K, Q = self.K, self.Q
        if K % tk or Q % tq:
            tk, tq = (tk if K % tk == 0 else 1), (tq if Q % tq == 0 else 1)
        grid = [(r, n) for r, n in (("p", self.P), ("k", K // tk), ("q", Q // tq)) if n > 1]
        reg = {r: Expr.reg(r) for r, _ in grid}
        return tk, tq, grid, [reg.get(r, Expr()) for r in ("p", "k", "q")]

    def indices(self, tk: int, k: Expr) -> tuple[list[Stmt], TileVar]:
        """The statements loading grid point ``k``'s ``[tk, 1]`` indices as int32."""
        raw = TileVar("idx", Space.UB, self.index_dtype, (tk, 1))
        body: list[Stmt] = [TLoad(raw, self.ibuf, k * tk, Expr(), self.loc)]
        if self.index_dtype is dt.int32:
            return body, raw
        idx = TileVar("idx32", Space.UB, dt.int32, (tk, 1))
        return [*body, TOp("TCVT", idx, (raw,), self.loc)], idx

    def table(self, lw: Lowering, shape: tuple[int, int], row: Expr, col: Expr) -> TLoad:
        """A load of ``shape`` at (row, col) of ``x``'s ``[P*N, Q]`` view (``x`` first copied
        into that layout when its own does not hold the window as one rectangle)."""
        view = (self.P * self.N, self.Q)
        w = window(lw.view(self.xbuf, view), self.Q, shape, row, col)
        if w is None:
            self.xbuf = relayout(lw, self.xbuf, view, self.loc)
            w = shape, row, col
        return TLoad(TileVar("", Space.UB, self.dtype, w[0]), self.xbuf, w[1], w[2], self.loc)


def _take(lw: Lowering, e: Eqn) -> None:
    """``take`` of ``x`` viewed ``[P, N, Q]`` (``N`` the taken axis) at ``K`` indices, in the
    cheaper of two ways (estimated from the machine's DMA start-up and per-core read rate):

    * **rows by scalar loads** (:func:`_take_rows`): the scalar unit loads each index from UB
      (``SLD``) and one DMA moves that row of ``x`` from GM and another stores it: an
      embedding lookup, whatever the size of the table;
    * **gather in UB** (:func:`_take_gather`): each output tile reads the column block of
      ``x`` in chunks that fit UB and picks its rows with ``TGATHER``: a small table read
      once per tile of indices instead of a transfer per index.

    Negative indices count from the end, as in numpy; indices still outside the axis (known
    only as the kernel runs: eager mode refuses them) clamp to it, as JAX's gathers do."""
    io = _TakeIO.of(lw, e)
    # (both ways scale with the leading axes' product alike)
    N, Q, K = io.N, io.Q, io.K
    m = lw.machine
    isz = io.dtype.itemsize
    row_bytes = Q * isz
    # per index: one row in, one row out (MTE2 and MTE3 overlap); per chunk of the gather: a
    # transfer of the chunk and about ten vector instructions, for every tile of indices
    tb = tile_bytes(m)
    nc = max(1, tb // max(1, min(Q, tb // 32) * max(isz, 2)))
    chunks = -(-N // nc)
    tiles = -(-K // max(1, tb // 4 // max(1, min(Q, tb // 32))))
    rows = K * (m.dma_latency + row_bytes / m.l2_read)
    gather = tiles * (chunks * (m.dma_latency + 10 * m.vector_latency) + N * row_bytes / m.l2_read)
    if rows < gather:
        _take_rows(lw, io)
    else:
        _take_gather(lw, io)


def _take_rows(lw: Lowering, io: _TakeIO) -> None:
    """``take`` as a row DMA per index: ``[tk, 1]`` indices go to UB, and for each one the
    scalar unit reads it (``SLD``), wraps and clamps it, and the row (``[1, tq]`` columns of
    it) moves GM → UB → GM."""
    N, K = io.N, io.K
    # enough grid points for every vector core, at most 64 indices per load of them
    tk, tq, grid, (p, k, q) = io.grid(
        _pick(K, max(1, min(64, -(-K // lw.workers())))),
        _pick(io.Q, tile_bytes(lw.machine) // io.dtype.itemsize),
    )
    body, idx = io.indices(tk, k)
    i, j = Expr.reg("ix"), Expr.reg("j")
    load = io.table(lw, (1, tq), p * N + i, q * tq)
    row = TileVar("row", Space.UB, io.dtype, (1, tq))
    per_index: list[Stmt] = [
        SOp("SLD", "ix", (idx, j), io.loc),
        # [-N, N) wraps as numpy's negative indices do; beyond that clamps, as JAX does
        SOp("SMAX", "ix", (i, Expr.of(-N))),
        SOp("SMIN", "ix", (i, Expr.of(N - 1))),
        SOp("SMOD", "ix", (i, Expr.of(N))),
        replace(load, dst=replace(load.dst, name=row.name)),
        TStore(io.out, p * K + k * tk + j, q * tq, row, io.loc),
    ]
    body.append(For("j", Expr(), Expr.of(tk), 1, tuple(per_index)))
    lw.add_kernel(
        Kernel(
            lw.fresh("take"),
            "layout",
            tuple(grid) or (("p", 1),),
            (Section("aiv", tuple(body)),),
            (("rows", tk), ("cols", tq)),
            loc=io.loc,
        )
    )


def _take_gather(lw: Lowering, io: _TakeIO) -> None:
    """``take`` by ``TGATHER``: each output tile ``[tk, tq]`` reads the ``[N, tq]`` column
    block of ``x`` in chunks of ``nc`` rows; one ``TGATHER`` per chunk picks element
    ``(i - c, col)`` of chunk ``c`` for every index ``i``, and a ``TSEL`` keeps the rows whose
    index falls in the chunk (a block that fits UB is one chunk, without the select). Exact
    for every dtype."""
    N, K, d, loc = io.N, io.K, io.dtype, io.loc
    work = gather_dtype(d)
    wsz = max(work.itemsize, d.itemsize)
    tb = tile_bytes(lw.machine)
    # the i32 [tk, tq] index tile and an [nc, tq] chunk each take one copy tile
    tq0 = _pick(io.Q, tb // 4 // 8)
    tk, tq, grid, (p, k, q) = io.grid(_pick(K, max(1, tb // (tq0 * 4))), tq0)
    nc = min(N, max(1, tb // (tq * wsz)))
    cols = TileVar("cols", Space.UB, dt.int32, (1, tq))
    neg = TileVar("neg", Space.UB, dt.bool_, (tk, 1))
    wrap = TileVar("wrap", Space.UB, dt.int32, (tk, 1))
    local = TileVar("local", Space.UB, dt.int32, (tk, 1))
    body, idx = io.indices(tk, k)
    # negative indices count from the end, as in numpy; indices still outside the axis (known
    # only as the kernel runs: eager mode refuses them) clamp to it, as JAX's gathers do
    body += [
        TOp("TCMPS", neg, (idx, 0.0, Cond.LT), loc),
        TOp("TADDS", wrap, (idx, float(N)), loc),
        TOp("TSEL", local, (neg, wrap, idx), loc),
        TOp("TMAXS", local, (local, 0.0), loc),
        TOp("TMINS", local, (local, float(N - 1)), loc),
    ]

    def chunk(rows: int, row: Expr, last: bool) -> list[Stmt]:
        """Gather from the ``[rows, tq]`` chunk of ``x`` at ``row``; ``local`` holds the
        indices relative to the chunk's first row (a later chunk's are ``rows`` less)."""
        blk = TileVar("blk", Space.UB, d, (rows, tq))
        load = io.table(lw, (rows, tq), row, q * tq)
        st: list[Stmt] = [replace(load, dst=replace(load.dst, name=blk.name))]
        if work is not d:
            wide = TileVar("blkw", Space.UB, work, (rows, tq))
            st.append(TOp("TCVT", wide, (blk,), loc))
            blk = wide
        whole = rows == N
        pos = local
        if not whole:
            pos = TileVar("pos", Space.UB, dt.int32, (tk, 1))
            st += [
                TOp("TMAXS", pos, (local, 0.0), loc),
                TOp("TMINS", pos, (pos, float(rows - 1)), loc),
            ]
        flat = TileVar("flat", Space.UB, dt.int32, (tk, 1))
        at = TileVar("at", Space.UB, dt.int32, (tk, tq))
        got = TileVar("acc" if whole else "got", Space.UB, work, (tk, tq))
        st += [
            TOp("TMULS", flat, (pos, float(tq)), loc),
            TOp("TADD", at, (flat, cols), loc),
            TOp("TGATHER", got, (blk, at), loc),
        ]
        if not whole:
            hit = TileVar("hit", Space.UB, dt.bool_, (tk, 1))
            acc = TileVar("acc", Space.UB, work, (tk, tq))
            st += [
                TOp("TCMP", hit, (pos, local, Cond.EQ), loc),
                TOp("TSEL", acc, (hit, got, acc), loc),
            ]
            if not last:
                st.append(TOp("TADDS", local, (local, float(-rows)), loc))
        return st

    if nc >= N:
        body += chunk(N, p * N, True)
    else:
        body.append(TOp("TEXPANDS", TileVar("acc", Space.UB, work, (tk, tq)), (0.0,), loc))
        tail = N % nc
        body.append(
            For(
                "c",
                Expr(),
                Expr.of(N // nc),
                1,
                tuple(chunk(nc, p * N + Expr.reg("c") * nc, False)),
            )
        )
        if tail:
            body += chunk(tail, p * N + (N - tail), True)
    res = TileVar("acc", Space.UB, work, (tk, tq))
    if work is not d:
        y = TileVar("y", Space.UB, d, (tk, tq))
        body.append(TOp("TCVT", y, (res,), loc))
        res = y
    body.append(TStore(io.out, p * K + k * tk, q * tq, res, loc))
    colbuf = lw.const_buffer("cols", np.arange(tq, dtype=np.int32))
    lw.add_kernel(
        Kernel(
            lw.fresh("take"),
            "layout",
            tuple(grid) or (("p", 1),),
            (Section("aiv", tuple(body), (TLoad(cols, colbuf, Expr(), Expr(), loc),)),),
            (("rows", tk), ("cols", tq)),
            loc=loc,
        )
    )


register_rule("tile", "take")(KernelRule(_take))
