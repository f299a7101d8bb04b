"""Compile an ISA program for one machine: static instruction tables and generated front ends.

The simulator's inner loop must not interpret operands or allocate objects per instruction, so
everything static is computed here once:

* every instruction gets a global id (``sid``) with its pipe, kind, duration (when it does not
  depend on other cores), GM window geometry and roofline work;
* each core template becomes a Python generator function (the core's *front end*, its scalar
  unit): registers are local variables, ``LOOP`` becomes a ``for`` loop, labels and branches
  become a small state machine, and each tile instruction appends one tuple
  ``(sid, issue_cycle, *operand_values)`` to its pipe's queue and, if that queue was empty,
  yields the pipe number (a flag instruction queues its flag key instead of its id).
  Dynamic addresses are bounds- and alignment-checked in the generated code. A barrier yields
  ``(sid, issue_cycle)`` instead and is resumed with ``send(release_cycle)``; so does a
  ``WAIT_FLAG`` whose destination is the scalar unit, as ``(sid, issue_cycle, flag_key)``.
  The scalar unit's own ``SET_FLAG`` calls ``sflag(sid, cycle, flag_key)`` and ``SLD`` calls
  ``peek(sid, cycle, ub_byte_address)`` for the int32 it loads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from pypto import dtypes as dt
from pypto.isa.ir import (
    PEERS,
    CoreProgram,
    Expr,
    GmRef,
    Instr,
    IsaError,
    Item,
    Label,
    Pipe,
    Program,
    Reg,
    Space,
    Tile,
)
from pypto.isa.opcodes import (
    BRANCHES,
    GM_STORES,
    OPCODES,
    REDUCTIONS,
    SCALAR_BINARY,
    UNARY,
    pipe_of,
)
from pypto.isa.printer import format_instr
from pypto.npu.machine import Machine

__all__ = ["PIPE_NO", "PIPE_ORDER", "Compiled", "DmaInfo", "compile_program"]

PIPE_ORDER: tuple[Pipe, ...] = (Pipe.S, Pipe.MTE1, Pipe.MTE2, Pipe.MTE3, Pipe.M, Pipe.V, Pipe.FIX)
PIPE_NO: dict[Pipe, int] = {p: i for i, p in enumerate(PIPE_ORDER)}
NPIPES = len(PIPE_ORDER)

# Instruction kinds, as the pipe loop dispatches on them.
K_LOCAL, K_SET, K_WAIT, K_XSET, K_XWAIT, K_DMA_RD, K_DMA_WR, K_FRONT = range(8)
FLAG_SPACE = 64
"""Flag keys: (source pipe * NPIPES + destination pipe) * FLAG_SPACE + event id."""

_TRANSCENDENTAL = {"TEXP", "TLOG", "TTANH", "TSIGMOID", "TSIN", "TCOS", "TGELU", "TPOW", "TPOWS"}
_DIVLIKE = {"TDIV", "TDIVS", "TRECIP", "TSQRT", "TRSQRT", "TFMOD", "TFMODS"}


@dataclass(frozen=True, slots=True)
class DmaInfo:
    """Geometry of one GM transfer instruction."""

    tensor: int
    """index into the program's tensors"""
    base: int
    """byte address of the tensor in GM"""
    row_stride: int
    """bytes between rows of the tensor's 2-D view"""
    rows: int
    row_bytes: int
    """GM bytes per window row"""
    nbytes: int
    """GM bytes moved"""
    itemsize: int
    """GM element size"""
    gm_slot: int
    """item index of the window's row (its column follows)"""
    cap: float
    """per-core rate cap in bytes/cycle (writes); reads use the L2/HBM caps"""


@dataclass
class Compiled:
    """A program prepared for one machine; shared by every run of that pair."""

    program: Program
    machine: Machine
    instrs: list[Instr]
    core_kind: list[str]
    local_index: list[int]
    pipe_no: list[int]
    kind: list[int]
    dur: list[float]
    flag_base: list[int]
    peer: list[str | None]
    dma: list[DmaInfo | None]
    flops: list[float]
    cube_cycles: list[float]
    """ideal cube cycles (MACs / MACs per cycle) of each matmul, for the roofline"""
    vec_bytes: list[int]
    tensor_base: list[int]
    gm_bytes: int
    frontends: dict[str, Any]
    source: dict[str, str]
    """generated Python source of each front end (for debugging the simulator)"""
    written_tensors: frozenset[int]
    sids_of: dict[str, range] = field(default_factory=dict)

    def where(self, sid: int) -> str:
        """``aiv #12 TADD ...`` for messages (the source location once, after the text)."""
        ins = self.instrs[sid]
        text = format_instr(replace(ins, loc=None))
        return f"{self.core_kind[sid]} #{self.local_index[sid]} `{text}`" + (
            f" (source {ins.loc})" if ins.loc else ""
        )


def _tile_args(ins: Instr) -> list[Tile]:
    return [a for a in ins.args if isinstance(a, Tile)]


def _exprs(ins: Instr) -> list[tuple[Expr, str, Any]]:
    """The instruction's integer expressions in operand order, with what each one is."""
    out: list[tuple[Expr, str, Any]] = []
    for a in ins.args:
        if isinstance(a, Tile):
            out.append((a.addr, "addr", a))
        elif isinstance(a, GmRef):
            out.append((a.row, "row", a))
            out.append((a.col, "col", a))
        elif isinstance(a, Expr):
            out.append((a, "expr", None))
    return out


def _cube_depth(d: dt.DType, m: Machine) -> int:
    """K depth of one cube issue: int8 32, fp16/bf16 16, fp32 half of fp16 (the fp32 fractal
    is 16x8: the chip's cube runs fp32 at half the fp16 rate)."""
    if d is dt.int8:
        return m.cube_k_i8
    return m.cube_k_f16 // 2 if d is dt.float32 else m.cube_k_f16


def _duration(ins: Instr, m: Machine, p: Pipe) -> float:
    op = ins.op
    tiles = _tile_args(ins)
    if op in ("SET_FLAG", "WAIT_FLAG", "XSET_FLAG", "XWAIT_FLAG"):
        return 1.0
    if op in ("TMATMUL", "TMATMUL_ACC"):
        _, a, b = tiles
        k0 = _cube_depth(a.dtype, m)
        fr = math.ceil(a.rows / m.cube_m) * math.ceil(a.cols / k0) * math.ceil(b.cols / m.cube_n)
        return float(m.cube_latency + fr)
    if p is Pipe.MTE1:
        dst = tiles[0].space
        rate = m.l1_l0a if dst is Space.L0A else m.l1_l0b if dst is Space.L0B else m.l1_ub
        return m.local_latency + tiles[0].nbytes / rate
    if p is Pipe.FIX:
        return m.local_latency + tiles[1].nbytes / m.l0c_ub
    if p is Pipe.MTE3:
        return m.local_latency + tiles[1].nbytes / m.l1_ub
    # vector unit
    if op == "TGATHER":
        # pto-isa's A2/A3 TGATHER: a vmuls turning the indices into byte offsets, then the
        # vgather, each a pass at the vector width
        vb = m.vector_bytes
        return (
            2 * m.vector_latency + math.ceil(tiles[2].nbytes / vb) + math.ceil(tiles[0].nbytes / vb)
        )
    if op in ("TSORT32", "TMRGSORT", "TMRGSORT2"):
        # one instruction per row on the chip (vbitsort, vmrgsort4); the sort writes its
        # structures at the vector width, the 4-way merge at a quarter of it (estimates)
        rate = m.vector_bytes if op == "TSORT32" else m.vector_bytes / 4
        return tiles[0].rows * m.vector_latency + math.ceil(tiles[0].nbytes / rate)
    width = max(t.nbytes for t in tiles)
    factor = 1.0
    if op in _TRANSCENDENTAL:
        factor = m.vec_factor_transcendental
    elif op in _DIVLIKE:
        factor = m.vec_factor_div
    return m.vector_latency + math.ceil(width / m.vector_bytes) * factor


def _kind(ins: Instr) -> int:
    op = ins.op
    group = OPCODES[op].group
    if group in ("scalar", "branch", "loop") or op in ("PIPE_BARRIER", "BARRIER"):
        return K_FRONT
    if op in ("SET_FLAG", "WAIT_FLAG") and pipe_of(ins) is Pipe.S:
        return K_FRONT  # the scalar unit's own flags: the front end sets and waits on them
    if op == "SET_FLAG":
        return K_SET
    if op == "WAIT_FLAG":
        return K_WAIT
    if op == "XSET_FLAG":
        return K_XSET
    if op == "XWAIT_FLAG":
        return K_XWAIT
    if op == "TLOAD":
        return K_DMA_RD
    if op in GM_STORES:
        return K_DMA_WR
    return K_LOCAL


class _Gen:
    """Writes the Python source of one core template's front end."""

    def __init__(self, cp: Compiled, core: CoreProgram, sid0: int) -> None:
        self.cp = cp
        self.m = cp.machine
        self.core = core
        self.sid0 = sid0
        self.lines: list[str] = []
        self.issue = self.m.issue_cycles
        self.pending = 0
        """issue cycles of scalar instructions not yet added to ``t`` (added in one go before
        the next point that reads ``t`` or joins control flow)"""
        self.uid = 0
        self.sid_of: dict[int, int] = {}
        i = 0
        for n, item in enumerate(core.body):
            if isinstance(item, Instr):
                self.sid_of[n] = sid0 + i
                i += 1

    def w(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def flush(self, depth: int) -> None:
        if self.pending:
            self.w(depth, f"t += {self.pending}")
            self.pending = 0

    @staticmethod
    def py(e: Expr) -> str:
        parts = [f"r_{r}" if c == 1 else f"r_{r}*{c}" for r, c in e.terms]
        if e.const or not parts:
            parts.append(str(e.const))
        return "(" + "+".join(parts) + ")"

    def source(self) -> str:
        regs: list[str] = []
        for ins in self.core.instructions():
            for a in ins.args:
                names: tuple[str, ...] = ()
                if isinstance(a, Reg):
                    names = (a.name,)
                elif isinstance(a, Expr):
                    names = a.regs
                elif isinstance(a, Tile):
                    names = a.addr.regs
                elif isinstance(a, GmRef):
                    names = a.row.regs + a.col.regs
                for r in names:
                    if r not in regs and r not in ("blk", "nblk", "sub"):
                        regs.append(r)
        self.w(0, "def frontend(r_blk, r_nblk, r_sub, q, fault, peek, sflag):")
        for p in range(1, NPIPES):
            self.w(1, f"Q{p} = q[{p}]")
            self.w(1, f"q{p} = Q{p}.append")
        self.w(1, "t = 0")
        self.w(1, "stall = 0")
        for r in regs:
            self.w(1, f"r_{r} = 0")
        self.region(list(enumerate(self.core.body)), 1)
        self.flush(1)
        self.w(1, "return (t, stall)")
        self.w(1, "yield 0  # makes this a generator even with no tile instructions")
        return "\n".join(self.lines) + "\n"

    def region(self, items: list[tuple[int, Item]], d: int) -> None:
        """Emit the items of one loop body (or the top level) at depth ``d``."""
        top = self._top_level(items)
        has_flow = any(
            isinstance(it, Label) or (isinstance(it, Instr) and OPCODES[it.op].group == "branch")
            for _, it in top
        )
        if not has_flow:
            self.straight(items, d)
            return
        # Basic blocks of this region: split at labels and after branches.
        blocks: list[list[tuple[int, Item]]] = [[]]
        labels: dict[str, int] = {}
        k = 0
        while k < len(items):
            n, it = items[k]
            if isinstance(it, Label):
                if blocks[-1]:
                    blocks.append([])
                labels[it.name] = len(blocks) - 1
                k += 1
                continue
            if isinstance(it, Instr) and it.op == "LOOP":
                end = self._match_end(items, k)
                blocks[-1].extend(items[k : end + 1])
                k = end + 1
                continue
            blocks[-1].append((n, it))
            k += 1
            if isinstance(it, Instr) and OPCODES[it.op].group == "branch":
                blocks.append([])
        pc = f"pc{self.uid}"
        self.uid += 1
        self.w(d, f"{pc} = 0")
        self.w(d, "while True:")
        for b, body in enumerate(blocks):
            self.w(d + 1, f"{'if' if b == 0 else 'elif'} {pc} == {b}:")
            last = body[-1][1] if body else None
            plain = body[:-1] if isinstance(last, Instr) and last.op in _BRANCH_OPS else body
            self.straight(plain, d + 2)
            if isinstance(last, Instr) and last.op in _BRANCH_OPS:
                self.w(d + 2, f"t += {self.issue}")
                target = labels[str(last.args[-1])]
                if last.op == "JMP":
                    self.w(d + 2, f"{pc} = {target}")
                else:
                    a, bb = last.args[0], last.args[1]
                    assert isinstance(a, Expr) and isinstance(bb, Expr)
                    cmp = BRANCHES[last.op]
                    self.w(
                        d + 2,
                        f"{pc} = {target} if {self.py(a)} {cmp} {self.py(bb)} else {b + 1}",
                    )
            else:
                self.w(d + 2, f"{pc} = {b + 1}")
        self.w(d + 1, "else:")
        self.w(d + 2, "break")

    @staticmethod
    def _top_level(items: list[tuple[int, Item]]) -> list[tuple[int, Item]]:
        out = []
        depth = 0
        for n, it in items:
            if isinstance(it, Instr) and it.op == "ENDLOOP":
                depth -= 1
                continue
            if depth == 0:
                out.append((n, it))
            if isinstance(it, Instr) and it.op == "LOOP":
                depth += 1
        return out

    @staticmethod
    def _match_end(items: list[tuple[int, Item]], k: int) -> int:
        depth = 0
        for j in range(k, len(items)):
            it = items[j][1]
            if isinstance(it, Instr) and it.op == "LOOP":
                depth += 1
            elif isinstance(it, Instr) and it.op == "ENDLOOP":
                depth -= 1
                if depth == 0:
                    return j
        raise IsaError("LOOP without a matching ENDLOOP")

    def straight(self, items: list[tuple[int, Item]], d: int) -> None:
        k = 0
        wrote = False
        while k < len(items):
            n, it = items[k]
            assert isinstance(it, Instr)
            if it.op == "LOOP":
                end = self._match_end(items, k)
                self.loop(n, it, items[k + 1 : end], d)
                k = end + 1
                wrote = True
                continue
            self.instr(self.sid_of[n], it, d)
            wrote = True
            k += 1
        self.flush(d)
        if not wrote:
            self.w(d, "pass")

    def loop(self, n: int, ins: Instr, body: list[tuple[int, Item]], d: int) -> None:
        sid = self.sid_of[n]
        reg, start, stop, step = ins.args
        assert isinstance(reg, Reg)
        assert isinstance(start, Expr) and isinstance(stop, Expr) and isinstance(step, Expr)
        self.pending += self.issue
        self.flush(d)
        st = self.py(step)
        if not step.is_const:
            st = f"_st{self.uid}"
            self.uid += 1
            self.w(d, f"{st} = {self.py(step)}")
            self.w(d, f"if {st} <= 0: fault({sid}, 'step', 3, {st})")
        self.w(d, f"for r_{reg.name} in range({self.py(start)}, {self.py(stop)}, {st}):")
        self.region(body, d + 1)
        self.w(d + 1, f"t += {self.issue}")  # ENDLOOP

    def instr(self, sid: int, ins: Instr, d: int) -> None:
        op = ins.op
        spec = OPCODES[op]
        w = self.w
        self.pending += self.issue
        if op == "SLD":
            self.sld(sid, ins, d)
            return
        if spec.group == "scalar":
            dst = ins.args[0]
            assert isinstance(dst, Reg)
            srcs = [self.py(a) for a in ins.args[1:] if isinstance(a, Expr)]
            if op == "SMOV":
                w(d, f"r_{dst.name} = {srcs[0]}")
            elif op in ("SDIV", "SMOD"):
                sym = "//" if op == "SDIV" else "%"
                divisor = ins.args[2]
                assert isinstance(divisor, Expr)
                if divisor.is_const:  # the verifier rejected a constant zero
                    w(d, f"r_{dst.name} = {srcs[0]} {sym} {srcs[1]}")
                else:
                    w(d, f"_dv = {srcs[1]}")
                    w(d, f"if _dv == 0: fault({sid}, 'div0', 2, 0)")
                    w(d, f"r_{dst.name} = {srcs[0]} {sym} _dv")
            elif op in ("SMIN", "SMAX"):
                w(d, f"r_{dst.name} = {op[1:].lower()}({srcs[0]}, {srcs[1]})")
            else:
                w(d, f"r_{dst.name} = {srcs[0]} {SCALAR_BINARY[op]} {srcs[1]}")
            return
        self.flush(d)
        if op in ("PIPE_BARRIER", "BARRIER"):
            w(d, "_t0 = t")
            w(d, f"t = yield ({sid}, t)")
            w(d, "stall += t - _t0")
            return
        vals: list[str] = []
        for slot, (e, what, arg) in enumerate(_exprs(ins)):
            if e.is_const:
                vals.append(str(e.const))
                continue
            v = f"_v{slot}"
            w(d, f"{v} = {self.py(e)}")
            vals.append(v)
            self.check(sid, ins, slot, what, arg, v, d)
        if op in ("SET_FLAG", "WAIT_FLAG"):
            # Queue the flag's key (pipe pair and id) rather than its id.
            base = self.cp.flag_base[sid]
            vals[0] = (
                str(base + int(vals[0]))
                if vals[0].lstrip("-").isdigit()
                else (f"{base} + {vals[0]}")
            )
        if op in ("SET_FLAG", "WAIT_FLAG") and pipe_of(ins) is Pipe.S:
            if op == "SET_FLAG":  # S → a pipe: the front end sets it as it issues
                w(d, f"sflag({sid}, t, {vals[0]})")
            else:  # a pipe → S: the front end stops until the flag is set
                w(d, "_t0 = t")
                w(d, f"t = yield ({sid}, t, {vals[0]})")
                w(d, "stall += t - _t0")
            return
        p = PIPE_NO[pipe_of(ins)]
        tup = f"({sid}, t, {', '.join(vals)})" if vals else f"({sid}, t)"
        # Yield only when the queue was empty: only then can a pipe be waiting for it.
        w(d, f"if Q{p}:")
        w(d + 1, f"q{p}({tup})")
        w(d, "else:")
        w(d + 1, f"q{p}({tup})")
        w(d + 1, f"yield {p}")

    def sld(self, sid: int, ins: Instr, d: int) -> None:
        """``SLD``: the front end reads one int32 of a UB tile (``peek``: the buffer in full
        mode, 0 in timing-only mode) at its issue cycle."""
        dst, tile, e = ins.args
        assert isinstance(dst, Reg) and isinstance(tile, Tile) and isinstance(e, Expr)
        self.flush(d)
        self.w(d, f"_v0 = {self.py(tile.addr)}")
        self.check(sid, ins, 0, "addr", tile, "_v0", d)
        n = tile.rows * tile.cols
        self.w(d, f"_v1 = {self.py(e)}")
        self.w(d, f"if _v1 < 0 or _v1 >= {n}: fault({sid}, 'sld', 1, _v1)")
        self.w(d, f"r_{dst.name} = peek({sid}, t, _v0 + _v1 * 4)")

    def check(self, sid: int, ins: Instr, slot: int, what: str, arg: Any, v: str, d: int) -> None:
        m = self.m
        if what == "addr":
            assert isinstance(arg, Tile)
            lim = m.buffer_bytes(arg.space.value) - arg.nbytes
            mask = m.align_bytes - 1
            self.w(
                d, f"if {v} < 0 or {v} > {lim} or {v} & {mask}: fault({sid}, 'addr', {slot}, {v})"
            )
        elif what in ("row", "col"):
            assert isinstance(arg, GmRef)
            decl = self.cp.program.tensor(arg.tensor)
            rows, cols = decl.view2d
            other = _tile_args(ins)[0]
            lim = rows - other.rows if what == "row" else cols - other.cols
            self.w(d, f"if {v} < 0 or {v} > {lim}: fault({sid}, '{what}', {slot}, {v})")
        elif ins.op in ("TEXTRACT", "TEXTRACT_T"):
            dst, src = _tile_args(ins)
            wr, wc = dst.shape if ins.op == "TEXTRACT" else dst.shape[::-1]
            lim = src.rows - wr if slot == 2 else src.cols - wc
            kind = "ext_row" if slot == 2 else "ext_col"
            self.w(d, f"if {v} < 0 or {v} > {lim}: fault({sid}, '{kind}', {slot}, {v})")
        elif ins.op in ("SET_FLAG", "WAIT_FLAG", "XSET_FLAG", "XWAIT_FLAG"):
            n = m.event_ids if ins.op in ("SET_FLAG", "WAIT_FLAG") else m.cross_flag_ids
            self.w(d, f"if {v} < 0 or {v} >= {n}: fault({sid}, 'flag', {slot}, {v})")


_BRANCH_OPS = {"JMP", *BRANCHES}


def _vec_bytes(ins: Instr) -> int:
    tiles = _tile_args(ins)
    if ins.op in UNARY or ins.op in REDUCTIONS or OPCODES[ins.op].group == "vector":
        return max(t.nbytes for t in tiles)
    return 0


@lru_cache(maxsize=64)
def compile_program(prog: Program, machine: Machine) -> Compiled:
    """Verify ``prog`` against ``machine`` and build its static tables and front ends."""
    prog.verify(machine)
    m = machine
    tensor_base: list[int] = []
    off = 0
    line = m.l2_line_bytes
    for t in prog.tensors:
        tensor_base.append(off)
        off += -(-t.nbytes // line) * line  # each tensor starts on an L2 line
    tindex = {t.name: i for i, t in enumerate(prog.tensors)}
    cp = Compiled(
        program=prog,
        machine=m,
        instrs=[],
        core_kind=[],
        local_index=[],
        pipe_no=[],
        kind=[],
        dur=[],
        flag_base=[],
        peer=[],
        dma=[],
        flops=[],
        cube_cycles=[],
        vec_bytes=[],
        tensor_base=tensor_base,
        gm_bytes=max(off, line),
        frontends={},
        source={},
        written_tensors=frozenset(),
    )
    written: set[int] = set()
    for core in prog.cores:
        sid0 = len(cp.instrs)
        for i, ins in enumerate(core.instructions()):
            p = pipe_of(ins)
            k = _kind(ins)
            cp.instrs.append(ins)
            cp.core_kind.append(core.kind)
            cp.local_index.append(i)
            cp.pipe_no.append(PIPE_NO[p])
            cp.kind.append(k)
            cp.dur.append(_duration(ins, m, p) if k < K_DMA_RD else 0.0)
            fb = 0
            if ins.op in ("SET_FLAG", "WAIT_FLAG"):
                sp, dp = ins.args[0], ins.args[1]
                assert isinstance(sp, Pipe) and isinstance(dp, Pipe)
                fb = (PIPE_NO[sp] * NPIPES + PIPE_NO[dp]) * FLAG_SPACE
            cp.flag_base.append(fb)
            peer = ins.args[1] if ins.op in ("XSET_FLAG", "XWAIT_FLAG") else None
            assert peer is None or (isinstance(peer, str) and peer in PEERS)
            cp.peer.append(peer)
            cp.dma.append(
                _dma_info(ins, prog, m, tindex, tensor_base)
                if k >= K_DMA_RD and k <= K_DMA_WR
                else None
            )
            if k == K_DMA_WR:
                g = ins.args[0]
                assert isinstance(g, GmRef)
                written.add(tindex[g.tensor])
            fl, cc = 0.0, 0.0
            if ins.op in ("TMATMUL", "TMATMUL_ACC"):
                _, a, b = _tile_args(ins)
                k0 = _cube_depth(a.dtype, m)
                fl = 2.0 * a.rows * a.cols * b.cols
                cc = a.rows * a.cols * b.cols / (m.cube_m * m.cube_n * k0)
            cp.flops.append(fl)
            cp.cube_cycles.append(cc)
            cp.vec_bytes.append(_vec_bytes(ins) if p is Pipe.V else 0)
        cp.sids_of[core.kind] = range(sid0, len(cp.instrs))
        gen = _Gen(cp, core, sid0)
        src = gen.source()
        ns: dict[str, Any] = {}
        exec(compile(src, f"<pto frontend {prog.name}:{core.kind}>", "exec"), ns)
        cp.frontends[core.kind] = ns["frontend"]
        cp.source[core.kind] = src
    cp.written_tensors = frozenset(written)
    return cp


def _dma_info(
    ins: Instr, prog: Program, m: Machine, tindex: dict[str, int], bases: list[int]
) -> DmaInfo:
    if ins.op == "TLOAD":
        tile, g, gm_slot = ins.args[0], ins.args[1], 1
        cap = m.gm_read
    else:
        g, tile, gm_slot = ins.args[0], ins.args[1], 0
        assert isinstance(tile, Tile)
        cap = m.ub_gm if tile.space is Space.UB else m.l2_write
    assert isinstance(tile, Tile) and isinstance(g, GmRef)
    ti = tindex[g.tensor]
    decl = prog.tensors[ti]
    isz = decl.dtype.itemsize
    return DmaInfo(
        tensor=ti,
        base=bases[ti],
        row_stride=decl.view2d[1] * isz,
        rows=tile.rows,
        row_bytes=tile.cols * isz,
        nbytes=tile.rows * tile.cols * isz,
        itemsize=isz,
        gm_slot=2 + gm_slot,
        cap=cap,
    )
