"""Tile IR → Block IR: grid points onto cores, buffers into addresses, then synchronisation.

For each kernel section (the cube or the vector core's part):

* **distribution** — the grid's points are dealt round-robin to the workers: vector cores
  (``%blk*2+%sub`` of ``2*%nblk``) for vector kernels, clusters (``%blk`` of ``%nblk``) for
  cube kernels; each point's grid registers come from its linear index by ``SDIV``/``SMOD``
  (a kernel that declares a ``cost`` register has its points dealt costliest first, each
  worker starting at its own cost value where every worker has a point of each);
* **allocation** — tiles that a DMA or the cube touches (``io`` tiles) get their own region,
  two slots when they live inside a loop (double buffering: the slot alternates with the
  loop's iteration parity, so the next tile loads while this one computes; sibling loops
  that make one tile after another, as a software pipeline's fill, steady and drain loops
  do, count one parity between them); tiles only the vector unit touches share space by
  liveness. If double buffers do not fit, single buffers are tried before giving up with a
  :class:`~pypto.TileError` that gives bytes needed and available;
* **synchronisation** — :func:`pypto.block.sync.insert_sync`.

``pto.jit(..., tile=dict(double_buffer=False))`` allocates single buffers only (no ping-pong:
the baseline that shows what double buffering buys).
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field, replace
from typing import Any

from pypto.block.crosscore import add_cross_flags
from pypto.block.ir import BInstr, BItem, BlockFunc, BlockKernel, BLoop, Buf
from pypto.block.sync import insert_sync
from pypto.core.errors import TileError
from pypto.isa.ir import Expr, GmRef, Instr, Pipe, Reg, Space, Tile
from pypto.isa.opcodes import pipe_of
from pypto.npu.machine import Machine
from pypto.tile.ir import (
    For,
    Kernel,
    Section,
    SOp,
    Stmt,
    TileFunc,
    TileVar,
    TLoad,
    TOp,
    TStore,
    walk,
)

__all__ = ["schedule"]


def _store(s: TStore, src: Tile) -> Instr:
    """``TSTORE``, or ``TSTORE_S`` for a store with the fixpipe's scale."""
    g = GmRef(s.tensor, s.row, s.col)
    if s.scale is None:
        return Instr("TSTORE", (g, src))
    return Instr("TSTORE_S", (g, src, s.scale))


def _instr(s: Stmt) -> Instr:
    """The statement as an instruction with placeholder addresses (to ask for its pipe)."""

    def T(t: TileVar) -> Tile:
        return Tile(t.space, Expr(), t.dtype, t.shape)

    if isinstance(s, TLoad):
        return Instr("TLOAD", (T(s.dst), GmRef(s.tensor, s.row, s.col)))
    if isinstance(s, TStore):
        return _store(s, T(s.src))
    if isinstance(s, TOp):
        return Instr(s.op, (T(s.dst), *(T(a) if isinstance(a, TileVar) else a for a in s.args)))
    assert isinstance(s, SOp)
    return Instr(s.op, (Reg(s.dst), *(T(a) if isinstance(a, TileVar) else a for a in s.args)))


_PIPES: dict[tuple[Any, ...], Pipe] = {}


def _stmt_pipe(s: TLoad | TStore | TOp | SOp) -> Pipe:
    """``pipe_of`` the statement's instruction, remembered by what decides it: the kind, the
    opcode and the tiles' spaces (a long kernel asks for tens of thousands)."""
    if isinstance(s, TStore):
        key: tuple[Any, ...] = (TStore, s.src.space, s.scale is None)
    elif isinstance(s, TOp):
        key = (TOp, s.op, s.dst.space, *(a.space for a in s.args if isinstance(a, TileVar)))
    else:
        key = (type(s), getattr(s, "op", None))
    pipe = _PIPES.get(key)
    if pipe is None:
        pipe = _PIPES[key] = pipe_of(_instr(s))
    return pipe


def _tiles(s: Stmt) -> tuple[list[TileVar], list[TileVar]]:
    """(reads, writes) of a statement's tiles."""
    if isinstance(s, TLoad):
        return [], [s.dst]
    if isinstance(s, TStore):
        return [s.src], []
    if isinstance(s, TOp):
        reads = [a for a in s.args if isinstance(a, TileVar)]
        # an accumulating op reads its destination too
        if s.op == "TMATMUL_ACC":
            reads.append(s.dst)
        return reads, [s.dst]
    if isinstance(s, SOp):
        return list(s.tiles), []  # SLD reads a tile on the scalar unit
    return [], []


@dataclass
class _Var:
    name: str
    space: Space
    nbytes: int
    first: int
    last: int
    io: bool = False
    loops: list[tuple[str, ...]] = field(default_factory=list)  # loop path of each access
    fresh: list[bool] = field(default_factory=list)  # each access only writes (a new value)
    in_pre: bool = False


def _collect(sec: Section) -> tuple[dict[str, _Var], int]:
    vars_: dict[str, _Var] = {}
    pos = 0

    def visit(stmts: tuple[Stmt, ...], path: tuple[str, ...], where: str) -> None:
        nonlocal pos
        for i, s in enumerate(stmts):
            if isinstance(s, For):
                start = pos
                inner = (*path, str(i))
                visit(s.body, inner, where)
                # a tile used across iterations lives through the whole loop
                for v in vars_.values():
                    if any(p[: len(inner)] == inner for p in v.loops):
                        v.first = min(v.first, start)
                        v.last = max(v.last, pos)
                continue
            pos += 1
            reads, writes = _tiles(s)
            if not reads and not writes:
                continue
            pipe = _stmt_pipe(s)
            read = {t.name for t in reads}
            for t in reads + writes:
                if t.name not in vars_:
                    vars_[t.name] = _Var(t.name, t.space, t.nbytes, pos, pos)
                v = vars_[t.name]
                v.nbytes = max(v.nbytes, t.nbytes)
                v.last = max(v.last, pos)
                v.loops.append(path)
                v.fresh.append(t.name not in read)
                if pipe is not Pipe.V:
                    v.io = True
                if where != "body":
                    v.in_pre = True

    visit(sec.pre, ("pre",), "pre")
    visit(sec.body, ("g",), "body")
    visit(sec.post, ("post",), "post")
    end = pos + 1
    for v in vars_.values():
        if v.in_pre:
            v.first, v.last = 0, end
    return vars_, end


def _common_loop(v: _Var) -> tuple[str, ...]:
    paths = v.loops
    common = paths[0]
    for p in paths[1:]:
        n = 0
        while n < min(len(common), len(p)) and common[n] == p[n]:
            n += 1
        common = common[:n]
    return common


def _parity_loops(v: _Var) -> list[tuple[str, ...]]:
    """The loops whose iterations alternate ``v``'s slots: its accesses' common loop or,
    when it makes none there itself, the loops inside it that hold them (sibling loops over
    one sequence of tiles, e.g. a software pipeline's fill and steady loops)."""
    common = _common_loop(v)
    if any(p == common for p in v.loops):
        return [common]
    # each loop must make its own tiles: its first access writes a new value
    firsts: dict[tuple[str, ...], bool] = {}
    for p, fresh in zip(v.loops, v.fresh, strict=True):
        firsts.setdefault(p[: len(common) + 1], fresh)
    return sorted(firsts) if all(firsts.values()) else [common]


def _parities(vars_: dict[str, _Var]) -> tuple[dict[str, str], dict[tuple[str, ...], str]]:
    """Each tile's parity register, by name, and the register each loop counts.

    A tile's slots alternate with the iterations of its common loop; when sibling loops
    inside it make its tiles one after another (:func:`_parity_loops`), they share one
    register and one counter, each iteration counting once (with those of other tiles'
    sibling loops, transitively). A loop whose own tiles alternate with its iterations keeps
    a counter of its own: their flags order them across the loop's runs on the assumption
    that the slot alternates from one run to the next, which other loops counting in between
    would break. A tile whose sibling loops include such a loop alternates with its common
    loop instead."""
    plans = {name: _parity_loops(v) for name, v in vars_.items() if v.loops}
    rep: dict[tuple[str, ...], tuple[str, ...]] = {}

    def find(x: tuple[str, ...]) -> tuple[str, ...]:
        while rep.setdefault(x, x) != x:
            x = rep[x]
        return x

    while True:
        rep.clear()
        for ls in plans.values():
            for other in ls[1:]:
                a, b = find(ls[0]), find(other)
                if a != b:
                    rep[max(a, b)] = min(a, b)
        own = {find(ls[0]) for ls in plans.values() if len(ls) == 1}
        worse = [n for n, ls in plans.items() if len(ls) > 1 and find(ls[0]) in own]
        if not worse:
            break
        for name in worse:
            plans[name] = [_common_loop(vars_[name])]
    loops = {x: "p_" + "_".join(find(x)) for ls in plans.values() for x in ls}
    return {name: loops[ls[0]] for name, ls in plans.items()}, loops


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


class _Arena:
    """Disjoint blocks of one buffer placed first fit: the lowest address where a block fits
    between those placed is the start of the lowest free gap long enough, else the top.
    Sizes are multiples of the alignment, so every gap and the top are aligned."""

    def __init__(self) -> None:
        self.top = 0
        self.starts: list[int] = []  # the gaps below the top, by address
        self.end_of: dict[int, int] = {}
        self.start_of: dict[int, int] = {}

    def place(self, size: int) -> int:
        if size == 0:
            return 0
        for s in self.starts:
            e = self.end_of[s]
            if e - s >= size:
                self._drop(s)
                if s + size < e:
                    self._gap(s + size, e)
                return s
        addr, self.top = self.top, self.top + size
        return addr

    def free(self, addr: int, size: int) -> None:
        if size == 0:
            return
        s, e = addr, addr + size
        if s in self.start_of:  # a gap ends where the block starts
            s = self.start_of[s]
            self._drop(s)
        if e in self.end_of:  # a gap starts where the block ends
            e2 = self.end_of[e]
            self._drop(e)
            e = e2
        if e == self.top:
            self.top = s
        else:
            self._gap(s, e)

    def _gap(self, s: int, e: int) -> None:
        bisect.insort(self.starts, s)
        self.end_of[s], self.start_of[e] = e, s

    def _drop(self, s: int) -> None:
        del self.starts[bisect.bisect_left(self.starts, s)]
        del self.start_of[self.end_of.pop(s)]


def _allocate(
    k: Kernel, sec: Section, m: Machine, double: bool, single: frozenset[Space] = frozenset()
) -> tuple[dict[str, Buf], dict[tuple[str, ...], str]]:
    """The tiles' buffers, and the parity register each loop counts (:func:`_parities`)."""
    vars_, end = _collect(sec)
    caps = {
        sp: m.buffer_bytes(sp.value) for sp in (Space.L1, Space.L0A, Space.L0B, Space.L0C, Space.UB)
    }
    bufs: dict[str, Buf] = {}
    used: dict[Space, int] = {}
    # First fit by address among the tiles live at the same time. io tiles come first and
    # live throughout (a DMA may still be reading the previous slot); the others come in
    # order of their first access, so a placed tile whose last access is before this one's
    # first can never overlap a later one either, and frees its bytes (a linear scan: the
    # arena holds the tiles live at once, which are disjoint).
    arenas: dict[Space, _Arena] = {}
    ends: dict[Space, list[tuple[int, int, int]]] = {}  # heaps of (last access, addr, size)
    parity_of, loop_parity = _parities(vars_)
    for v in sorted(vars_.values(), key=lambda v: (not v.io, v.first)):
        loop = _common_loop(v)
        slots = 2 if (double and v.io and loop and not v.in_pre and v.space not in single) else 1
        parity = parity_of[v.name] if slots == 2 else None
        size = _align(v.nbytes, m.align_bytes) * slots
        first, last = (0, end) if v.io else (v.first, v.last)
        arena = arenas.setdefault(v.space, _Arena())
        expiry = ends.setdefault(v.space, [])
        while expiry and expiry[0][0] < first:
            _, a, sz = heapq.heappop(expiry)
            arena.free(a, sz)
        addr = arena.place(size)
        heapq.heappush(expiry, (last, addr, size))
        used[v.space] = max(used.get(v.space, 0), addr + size)
        bufs[v.name] = Buf(
            v.name, v.space.value, addr, v.nbytes, slots, parity, _align(v.nbytes, m.align_bytes)
        )
        if addr + size > caps[v.space]:
            raise _NoFit(v.space, used[v.space], caps[v.space])
    return bufs, loop_parity


class _NoFit(Exception):
    def __init__(self, space: Space, need: int, cap: int) -> None:
        self.space, self.need, self.cap = space, need, cap


_SPACES = {sp.value: sp for sp in Space}


@dataclass
class _Emitter:
    bufs: dict[str, Buf]
    parities: dict[str, str] = field(default_factory=dict)  # loop -> its parity register
    addrs: dict[str, Expr] = field(default_factory=dict)

    def tile(self, t: TileVar) -> Tile:
        addr = self.addrs.get(t.name)
        b = self.bufs[t.name]
        if addr is None:  # (a buffer's address expression is made once: Exprs are immutable)
            addr = Expr.of(b.addr)
            if b.slots > 1:
                assert b.parity is not None
                addr = Expr.reg(b.parity) * b.stride + b.addr
            self.addrs[t.name] = addr
        return Tile(_SPACES[b.space], addr, t.dtype, t.shape)

    def instr(self, s: TLoad | TStore | TOp | SOp) -> BInstr:
        loc = str(s.loc) if s.loc else None
        reads, writes = _tiles(s)
        r = tuple(dict.fromkeys(t.name for t in reads))
        w = tuple(dict.fromkeys(t.name for t in writes))
        if isinstance(s, TLoad):
            ins = Instr("TLOAD", (self.tile(s.dst), GmRef(s.tensor, s.row, s.col)), loc)
        elif isinstance(s, TStore):
            ins = replace(_store(s, self.tile(s.src)), loc=loc)
        elif isinstance(s, TOp):
            args = tuple(self.tile(a) if isinstance(a, TileVar) else a for a in s.args)
            ins = Instr(s.op, (self.tile(s.dst), *args), loc)
        else:
            assert isinstance(s, SOp)
            sargs = tuple(self.tile(a) if isinstance(a, TileVar) else a for a in s.args)
            ins = Instr(s.op, (Reg(s.dst), *sargs), loc)
        return BInstr(ins, r, w)

    def stmts(self, stmts: tuple[Stmt, ...], path: tuple[str, ...]) -> list[BItem]:
        out: list[BItem] = []
        for i, s in enumerate(stmts):
            if isinstance(s, For):
                body = self.stmts(s.body, (*path, str(i)))
                par: str | None = self.parities.get("p_" + "_".join((*path, str(i))))
                if par is not None:
                    cnt = "n" + par[1:]
                    body = [
                        BInstr(Instr("SMOD", (Reg(par), Expr.reg(cnt), Expr.of(2)))),
                        *body,
                        BInstr(Instr("SADD", (Reg(cnt), Expr.reg(cnt), Expr.of(1)))),
                    ]
                out.append(BLoop(s.reg, s.start, s.stop, Expr.of(s.step), tuple(body), par))
            else:
                out.append(self.instr(s))
        return out


def _decompose(k: Kernel, worker: Expr, workers: Expr) -> list[BItem]:
    """The grid registers of the point that the loop index ``%g`` (``worker``, then in
    steps of ``workers``) runs: row-major over the grid, except for a kernel with a
    ``cost`` register (:func:`_by_cost`)."""
    dims = list(k.grid)
    out: list[BItem] = []
    rest = "g"
    if k.cost in [r for r, _ in dims]:
        out, rest = _by_cost(k, worker, workers)
        dims = [(r, e) for r, e in dims if r != k.cost]
    for i, (r, _) in enumerate(dims):
        inner = 1
        for _, e in dims[i + 1 :]:
            inner *= e
        if i == len(dims) - 1:
            out.append(BInstr(Instr("SMOV", (Reg(r), Expr.reg(rest)))))
        else:
            out.append(BInstr(Instr("SDIV", (Reg(r), Expr.reg(rest), Expr.of(inner)))))
            out.append(BInstr(Instr("SMOD", (Reg("rest"), Expr.reg(rest), Expr.of(inner)))))
            rest = "rest"
    return out


def _reads_next(sec: Section) -> bool:
    """Whether the section reads the registers of its worker's next grid point (``%nx*``)."""

    def regs(s: Stmt) -> list[str]:
        if isinstance(s, For):
            return [*s.start.regs, *s.stop.regs]
        if isinstance(s, SOp):
            return [r for a in s.exprs for r in a.regs]
        if isinstance(s, TLoad | TStore):
            return [*s.row.regs, *s.col.regs]
        return [r for a in s.args if isinstance(a, Expr) for r in a.regs]

    stmts = walk(sec.pre + sec.body + sec.post)
    return any(r == "nx" or r.startswith("nx_") for s in stmts for r in regs(s))


def _next_point(k: Kernel, worker: Expr, workers: Expr) -> list[BItem]:
    """The grid registers of the point the worker runs next, ``%nx_<reg>``, from the loop index
    ``%g + workers`` as :func:`_decompose` finds this point's, and ``%nx``: 1 when there is
    such a point, 0 past the grid's end (the registers then name the grid's last point)."""
    items = _decompose(k, worker, workers)
    ren = {"g": "nx_g"}
    for it in items:
        assert isinstance(it, BInstr)
        dst = it.instr.args[0]
        assert isinstance(dst, Reg)
        ren[dst.name] = "nx_" + dst.name

    def renamed(a: object) -> object:
        if isinstance(a, Reg):
            return Reg(ren.get(a.name, a.name))
        if isinstance(a, Expr):
            return Expr.make([(ren.get(r, r), c) for r, c in a.terms], a.const)
        return a

    nx_g = Expr.reg("nx_g")
    out: list[BItem] = [
        BInstr(Instr("SADD", (Reg("nx_g"), Expr.reg("g"), workers))),
        BInstr(Instr("SMIN", (Reg("nx"), Expr.of(k.points) - nx_g, Expr.of(1)))),
        BInstr(Instr("SMAX", (Reg("nx"), Expr.reg("nx"), Expr()))),
        BInstr(Instr("SMIN", (Reg("nx_g"), nx_g, Expr.of(k.points - 1)))),
    ]
    for it in items:
        assert isinstance(it, BInstr)
        args = tuple(renamed(a) for a in it.instr.args)
        out.append(BInstr(Instr(it.instr.op, args)))  # type: ignore[arg-type]
    return out


def _by_cost(k: Kernel, worker: Expr, workers: Expr) -> tuple[list[BItem], str]:
    """The ``cost`` register of point ``%g`` and the register holding the row-major index
    of its other grid registers.

    The points go in windows of ``workers`` values of the other registers times every
    value of the cost register; a window runs in rounds, one of ``workers`` points per cost
    value, so every worker gets one point of each cost per full window (even totals) and
    the window's few tensors stay in L2 while its rounds reuse them. In a full window worker
    ``w`` takes the same other registers in every round and runs the cost values from
    ``ext-1-(w mod ext)`` down, cyclically: identical workers that all began with the same
    cost would hand their tiles over in step, leaving the shared L2 idle between bursts
    (causal attention at b4 h32 s2048: 20% of the run without a transfer; 876 → 759 µs).
    The last window runs costliest first, its rounds going to the workers alternately
    forwards and backwards (a snake), which evens out its points, fewer than the workers
    for each cost value."""
    ext = dict(k.grid)[k.cost]
    others = k.points // ext
    out: list[BItem] = []

    def op(name: str, dst: str, a: Expr, b: Expr) -> None:
        out.append(BInstr(Instr(name, (Reg(dst), a, b))))

    g = Expr.reg
    # %gfull = [the point lies in a window with a point for every worker]
    op("SMUL", "gsz", workers, Expr.of(ext))
    op("SDIV", "gfull", Expr.of(others), workers)
    op("SDIV", "gw", g("g"), g("gsz"))
    op("SSUB", "gfull", g("gfull"), g("gw"))
    op("SMIN", "gfull", g("gfull"), Expr.of(1))
    # snake (last window only): in odd rounds, point = round start + (round size - 1 - worker)
    op("SDIV", "grd", g("g"), workers)
    op("SMOD", "godd", g("grd"), Expr.of(2))
    op("SSUB", "godd", g("godd"), g("gfull"))
    op("SMAX", "godd", g("godd"), Expr())
    op("SMUL", "gr0", g("grd"), workers)
    op("SSUB", "grn", Expr.of(k.points), g("gr0"))
    op("SMIN", "grn", g("grn"), workers)
    op("SSUB", "gpt", g("gr0") + g("grn") - 1 - worker, g("g"))
    op("SMUL", "gpt", g("gpt"), g("godd"))
    op("SADD", "gpt", g("gpt"), g("g"))
    # window %gw of %gwn other points (the last one may hold fewer), index %gi in it
    op("SDIV", "gw", g("gpt"), g("gsz"))
    op("SMUL", "gb", g("gw"), workers)
    op("SSUB", "gwn", Expr.of(others), g("gb"))
    op("SMIN", "gwn", g("gwn"), workers)
    op("SMUL", "gi", g("gw"), g("gsz"))
    op("SSUB", "gi", g("gpt"), g("gi"))
    # costliest first: round %gi // %gwn has cost value ext-1 minus it; in full windows
    # each worker starts its rounds at its own cost value (worker w: rounds shifted by w),
    # so that the workers do not all hand over tiles in step
    op("SDIV", k.cost, g("gi"), g("gwn"))
    op("SMOD", "gi", g("gi"), g("gwn"))
    op("SMUL", "gsh", g("gi"), g("gfull"))
    op("SADD", k.cost, g(k.cost), g("gsh"))
    op("SMOD", k.cost, g(k.cost), Expr.of(ext))
    op("SSUB", k.cost, Expr.of(ext - 1), g(k.cost))
    op("SADD", "rest", g("gb"), g("gi"))
    return out, "rest"


def _section(
    k: Kernel, sec: Section, m: Machine, double: bool = True
) -> tuple[tuple[BItem, ...], tuple[Buf, ...]]:
    # double buffers where they fit: a space that overflows falls back to single buffers alone
    # (a 128 KiB accumulator fills L0C once while L1 and L0A/L0B still ping-pong)
    single: set[Space] = set()
    found: dict[str, Buf] | None = None
    while found is None and double:
        try:
            found, loops = _allocate(k, sec, m, double=True, single=frozenset(single))
        except _NoFit as nf:
            if nf.space in single:
                break
            single.add(nf.space)
    if found is not None:
        bufs = found
    else:
        try:
            bufs, loops = _allocate(k, sec, m, double=False)
        except _NoFit as nf:
            raise TileError(
                f"kernel @{k.name} needs {nf.need} bytes of {nf.space} on the {sec.core} core; "
                f"{m.name} has {nf.cap}",
                op="lower",
                loc=k.loc,
                hint="choose smaller tiles (pto.set_vec_tile_shapes / set_cube_tile_shapes)",
            ) from None
    em = _Emitter(bufs)
    # one counter per parity register, counted by every loop that alternates its slots
    used = {b.parity for b in bufs.values() if b.parity is not None}
    for path, reg in loops.items():
        if reg in used:
            em.parities["p_" + "_".join(path)] = reg
    body = em.stmts(sec.body, ("g",))
    pre = em.stmts(sec.pre, ("pre",))
    post = em.stmts(sec.post, ("post",))
    if sec.core == "aiv" and k.dist == "aiv":
        worker = Expr.reg("blk") * m.aiv_per_cluster + Expr.reg("sub")
        setup = [
            BInstr(Instr("SMOV", (Reg("w"), worker))),
            BInstr(Instr("SMUL", (Reg("nw"), Expr.reg("nblk"), Expr.of(m.aiv_per_cluster)))),
        ]
        start, step = Expr.reg("w"), Expr.reg("nw")
    else:
        setup = []
        start, step = Expr.reg("blk"), Expr.reg("nblk")
    if k.cores:
        # dealt to the first k.cores workers: the others start past the grid's end
        def op(name: str, *args: Expr) -> BInstr:
            return BInstr(Instr(name, (Reg("gx"), *args)))

        setup += [
            op("SSUB", start, Expr.of(k.cores - 1)),
            op("SMAX", Expr.reg("gx"), Expr()),
            op("SMIN", Expr.reg("gx"), Expr.of(1)),
            op("SMUL", Expr.reg("gx"), Expr.of(k.points)),
            BInstr(Instr("SADD", (Reg("gs"), start, Expr.reg("gx")))),
        ]
        start, step = Expr.reg("gs"), Expr.of(k.cores)
    decomp = _decompose(k, start, step)
    if _reads_next(sec):
        decomp += _next_point(k, start, step)
    head: list[BItem] = []
    tail: list[BItem] = []
    if "p_g" in em.parities:
        head.append(BInstr(Instr("SMOD", (Reg("p_g"), Expr.reg("n_g"), Expr.of(2)))))
        tail.append(BInstr(Instr("SADD", (Reg("n_g"), Expr.reg("n_g"), Expr.of(1)))))
    counters = sorted({"n" + r[1:] for r in em.parities.values()})
    init = [BInstr(Instr("SMOV", (Reg(c), Expr()))) for c in counters]
    grid = BLoop("g", start, Expr.of(k.points), step, tuple(decomp + head + body + tail), "p_g")
    items: list[BItem] = [*setup, *init, *pre, grid, *post]
    synced = add_cross_flags(k, sec.core, insert_sync(items, bufs, m), m)
    return tuple(synced), tuple(bufs.values())


def schedule(f: TileFunc, m: Machine, *, double_buffer: bool = True) -> BlockFunc:
    """The Block IR of a Tile IR function on machine ``m``; ``double_buffer=False`` allocates
    single buffers only."""
    kernels = []
    for k in f.kernels:
        progs = []
        allb = []
        for sec in k.sections:
            body, bufs = _section(k, sec, m, double_buffer)
            progs.append((sec.core, body))
            allb.append((sec.core, bufs))
        kernels.append(BlockKernel(k.name, tuple(progs), tuple(allb), k.points, k.dist))
    return BlockFunc(f.name, f.buffers, tuple(kernels), f.params, f.outputs, f.consts)
