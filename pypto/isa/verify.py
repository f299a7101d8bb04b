"""The ISA verifier: every static rule of the instruction set, as code.

Errors are :class:`~pypto.isa.ir.IsaError` naming the core template, the instruction's index in
it (``#n``, counting instructions only), its text and the broken rule. Given a machine, it also
checks what is static against that machine — tiles fit their buffer and, at constant addresses,
lie inside it and are aligned; flag ids are in range; the launch fits the clusters; the
cube ↔ vector paths exist — and raises :class:`~pypto.core.errors.SimulationError` for those.

>>> from pypto.isa import parse
>>> parse(".program p\\n.core aiv\\n  TEXP UB[0x0]:i32[8,8], UB[0x100]:i32[8,8]\\n")
... # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
pypto.isa.ir.IsaError: aiv #0 TEXP UB[0x0]:i32[8,8], UB[0x100]:i32[8,8]: TEXP needs a float dtype...
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pypto import dtypes as dt
from pypto.core.errors import SimulationError
from pypto.isa.ir import (
    PEERS,
    PIPES_OF,
    ROLES,
    SPACES_OF,
    SPECIAL_REGS,
    Cond,
    CoreProgram,
    Expr,
    GmRef,
    Instr,
    IsaError,
    Label,
    Pipe,
    Program,
    Reg,
    Space,
    TensorDecl,
    Tile,
)
from pypto.isa.opcodes import (
    BINARY,
    GM_STORES,
    OPCODES,
    REDUCTIONS,
    TILE_SCALAR,
    UNARY,
    OpSpec,
    pipe_of,
)

if TYPE_CHECKING:
    from pypto.npu.machine import Machine

__all__ = ["cast_ok", "verify", "verify_instr"]

_FLOATS = (dt.float32, dt.float16, dt.bfloat16)
_INT_OK_UNARY = ("TABS", "TNEG", "TRELU", "TNOT")
_BITS = ("TAND", "TOR", "TXOR", "TSHL", "TSHR", "TNOT")
"""bitwise opcodes (and their tile-scalar forms): integer tiles only"""
_FIX_CASTS: dict[dt.DType, tuple[dt.DType, ...]] = {
    dt.float32: (dt.float32, dt.float16, dt.bfloat16),
    dt.int32: (dt.int32,),
}
_MATMUL_TYPES: dict[tuple[dt.DType, dt.DType], dt.DType] = {
    (dt.float16, dt.float16): dt.float32,
    (dt.bfloat16, dt.bfloat16): dt.float32,
    (dt.int8, dt.int8): dt.int32,
    # fp32 operands pass through the cube at half the fp16 rate (the fp32 fractal is 16x8)
    (dt.float32, dt.float32): dt.float32,
}


def cast_ok(src: dt.DType, dst: dt.DType) -> bool:
    """Whether the fixpipe can convert ``src`` (an L0C accumulator type) to ``dst``."""
    return dst in _FIX_CASTS.get(src, ())


def matmul_result(a: dt.DType, b: dt.DType) -> dt.DType | None:
    """The L0C dtype of a cube matmul of ``a`` by ``b``, or None when the cube cannot do it."""
    return _MATMUL_TYPES.get((a, b))


class _Ctx:
    def __init__(self, prog: Program, core: CoreProgram, machine: Machine | None) -> None:
        self.prog = prog
        self.core = core
        self.kind = core.kind
        self.machine = machine
        self.index = 0
        self.ins: Instr | None = None

    def fail(self, msg: str, hint: str | None = None) -> IsaError:
        # index -1: an instruction checked on its own (``verify_instr``) has no place yet
        where = f"{self.kind} #{self.index}" if self.index >= 0 else self.kind
        if self.ins is not None:
            where += f" {self.ins}"
        loc_hint = hint
        if self.ins is not None and self.ins.loc:
            loc_hint = f"(source {self.ins.loc}) " + (hint or "")
        return IsaError(f"{where}: {msg}", hint=loc_hint)

    def fault(self, msg: str, hint: str | None = None) -> SimulationError:
        """A valid instruction that cannot run on this machine (names every core of the kind)."""
        assert self.ins is not None and self.machine is not None
        where = f"every {self.kind} core of {self.machine.name}, pipe {pipe_of(self.ins)}, "
        where += (f"{self.kind} #{self.index} " if self.index >= 0 else "") + f"`{self.ins}`"
        if self.ins.loc:
            where += f" (source {self.ins.loc})"
        return SimulationError(f"{where}: {msg}", op=self.ins.op, hint=hint)


def _check_tile(c: _Ctx, t: Tile, what: str, *, peer_ok: bool = False) -> None:
    if t.rows <= 0 or t.cols <= 0:
        raise c.fail(f"{what} tile has an empty shape {list(t.shape)}")
    if t.peer is not None:
        if not peer_ok:
            raise c.fail(f"{what} tile names a peer core (@{t.peer}); only a cross-core TMOV can")
        owner = "aic" if t.peer == "aic" else "aiv"
    else:
        owner = c.kind
    if t.space not in SPACES_OF[owner]:
        raise c.fail(
            f"{what} tile is in {t.space}, which the {owner} core does not have",
            hint=f"the {owner} core's buffers: " + ", ".join(SPACES_OF[owner]),
        )
    m = c.machine
    if m is None:
        return
    if t.peer is not None and not m.direct_cube_vector:
        raise c.fault(
            f"{m.name} has no path from the cube core to a vector core's buffers "
            f"({what} tile {t.space}@{t.peer})",
            hint="on A2/A3 the cube and vector cores hand tiles over through a GM workspace "
            "(TSTORE, a cross-core flag, TLOAD); machine.replace(direct_cube_vector=True) "
            "models an A5-style chip with the direct path",
        )
    cap = m.buffer_bytes(t.space.value)
    if t.nbytes > cap:
        raise c.fault(
            f"{what} tile {t.dtype.short}[{t.rows},{t.cols}] needs {t.nbytes} bytes; "
            f"{t.space} holds {cap} bytes on {m.name}"
        )
    if t.addr.is_const:
        a = t.addr.const
        if a < 0 or a + t.nbytes > cap:
            raise c.fault(
                f"{what} tile [{hex(a)}, {hex(a + t.nbytes)}) is outside {t.space} "
                f"[0x0, {hex(cap)}) on {m.name}"
            )
        if a % m.align_bytes:
            raise c.fault(
                f"{what} tile address {hex(a)} is not {m.align_bytes}-byte aligned",
                hint=f"use {hex(a - a % m.align_bytes)} or "
                f"{hex(a - a % m.align_bytes + m.align_bytes)}",
            )


def _check_gm(c: _Ctx, g: GmRef, t: Tile) -> TensorDecl:
    try:
        decl = c.prog.tensor(g.tensor)
    except IsaError:
        raise c.fail(
            f"no GM tensor named {g.tensor!r}",
            hint="declared: " + (", ".join(x.name for x in c.prog.tensors) or "none"),
        ) from None
    rows, cols = decl.view2d
    if t.rows > rows or t.cols > cols:
        raise c.fail(
            f"the window {t.rows}x{t.cols} is larger than {g.tensor}'s 2-D view {rows}x{cols}"
        )
    if g.row.is_const and not 0 <= g.row.const <= rows - t.rows:
        raise c.fail(f"rows {g.row.const}..{g.row.const + t.rows} outside {g.tensor} ({rows} rows)")
    if g.col.is_const and not 0 <= g.col.const <= cols - t.cols:
        raise c.fail(
            f"columns {g.col.const}..{g.col.const + t.cols} outside {g.tensor} ({cols} columns)"
        )
    return decl


def _same(c: _Ctx, a: Tile, b: Tile, what: str) -> None:
    if a.shape != b.shape:
        raise c.fail(f"{what}: shapes {list(a.shape)} and {list(b.shape)} differ")
    if a.dtype is not b.dtype:
        raise c.fail(f"{what}: dtypes {a.dtype.short} and {b.dtype.short} differ")


def _bcast(c: _Ctx, dst: Tile, x: Tile, what: str) -> None:
    r, k = dst.shape
    if x.shape not in ((r, k), (r, 1), (1, k)):
        raise c.fail(
            f"{what} shape {list(x.shape)} does not broadcast to {list(dst.shape)}",
            hint=f"use [{r},{k}], [{r},1] or [1,{k}]",
        )


def _ub(c: _Ctx, *tiles: Tile) -> None:
    for i, t in enumerate(tiles):
        _check_tile(c, t, f"operand {i}")
        if t.space is not Space.UB:
            raise c.fail(f"vector operand {i} must be in UB, not {t.space}")


def _verify_vector(c: _Ctx, ins: Instr) -> None:
    op, a = ins.op, ins.args
    tiles = [x for x in a if isinstance(x, Tile)]
    if op == "TTRANS" and tiles[1].space is Space.L1:
        # the transposing L1 -> L0 load of the cube core (MTE1)
        for i, t in enumerate(tiles):
            _check_tile(c, t, f"operand {i}")
        if tiles[0].space not in (Space.L0A, Space.L0B):
            raise c.fail(f"TTRANS from L1 writes L0A or L0B, not {tiles[0].space}")
    else:
        _ub(c, *tiles)
    dst = tiles[0]
    if op in UNARY:
        _same(c, dst, tiles[1], op)
        if op == "TNOT" and not dst.dtype.is_integer:
            raise c.fail(f"TNOT needs an integer dtype, got {dst.dtype.short}")
        if dst.dtype not in _FLOATS and not (op in _INT_OK_UNARY and dst.dtype.is_integer):
            raise c.fail(f"{op} needs a float dtype, got {dst.dtype.short}")
    elif op in BINARY or op in TILE_SCALAR:
        for i, x in enumerate(tiles[1:], start=1):
            if x.dtype is not dst.dtype:
                raise c.fail(f"{op}: operand {i} is {x.dtype.short}, dst is {dst.dtype.short}")
            if op in TILE_SCALAR:
                _same(c, dst, x, op)
            else:
                _bcast(c, dst, x, f"{op} operand {i}")
        if dst.dtype is dt.bool_:
            raise c.fail(f"{op} does not take bool tiles")
        if op in ("TDIV", "TDIVS") and dst.dtype not in _FLOATS:
            raise c.fail(f"{op} needs a float dtype, got {dst.dtype.short}")
        if op.rstrip("S") in _BITS and not dst.dtype.is_integer:
            raise c.fail(f"{op} works on integer tiles, got {dst.dtype.short}")
    elif op in ("TCMP", "TCMPS"):
        if dst.dtype is not dt.bool_:
            raise c.fail(f"{op} writes a bool tile, got {dst.dtype.short}")
        src = tiles[1]
        if src.dtype is dt.bool_:
            raise c.fail(f"{op} compares numbers, not bool tiles")
        if op == "TCMP":
            if tiles[2].dtype is not src.dtype:
                raise c.fail(f"TCMP compares {src.dtype.short} with {tiles[2].dtype.short}")
            _bcast(c, dst, src, "TCMP operand 1")
            _bcast(c, dst, tiles[2], "TCMP operand 2")
        elif src.shape != dst.shape:
            raise c.fail(f"TCMPS: shapes {list(dst.shape)} and {list(src.shape)} differ")
        assert isinstance(a[-1], Cond)
    elif op == "TSEL":
        mask, x, y = tiles[1:]
        if mask.dtype is not dt.bool_:
            raise c.fail(f"TSEL mask must be bool, got {mask.dtype.short}")
        _bcast(c, dst, mask, "TSEL mask")
        for name, t in (("a", x), ("b", y)):
            if t.dtype is not dst.dtype:
                raise c.fail(f"TSEL {name} is {t.dtype.short}, dst is {dst.dtype.short}")
            _bcast(c, dst, t, f"TSEL {name}")
    elif op == "TGATHER":
        src, idx = tiles[1:]
        if idx.dtype is not dt.int32:
            raise c.fail(f"TGATHER indices must be i32, got {idx.dtype.short}")
        if idx.shape != dst.shape:
            raise c.fail(
                f"TGATHER: the index tile {list(idx.shape)} must have the shape of dst "
                f"{list(dst.shape)}"
            )
        if src.dtype is not dst.dtype or dst.dtype.itemsize not in (2, 4):
            raise c.fail(
                f"TGATHER moves 2- or 4-byte elements of one dtype: src is {src.dtype.short}, "
                f"dst is {dst.dtype.short}",
                hint="convert 1-byte tiles with TCVT first",
            )
    elif op in ("TSORT32", "TMRGSORT", "TMRGSORT2"):
        _verify_sort(c, op, dst, tiles[1:], a[-1])
    elif op == "TCVT":
        if dst.shape != tiles[1].shape:
            raise c.fail(f"TCVT: shapes {list(dst.shape)} and {list(tiles[1].shape)} differ")
    elif op == "TBITCAST":
        src = tiles[1]
        if dst.shape != src.shape:
            raise c.fail(f"TBITCAST: shapes {list(dst.shape)} and {list(src.shape)} differ")
        if dst.dtype.itemsize != src.dtype.itemsize or dt.bool_ in (dst.dtype, src.dtype):
            raise c.fail(
                f"TBITCAST keeps the bits: {src.dtype.short} and {dst.dtype.short} need one "
                "element size and neither may be bool"
            )
    elif op == "TEXPANDS":
        pass
    elif op in REDUCTIONS:
        src = tiles[1]
        axis = REDUCTIONS[op][1]
        want = (src.rows, 1) if axis == 1 else (1, src.cols)
        if dst.shape != want:
            raise c.fail(f"{op} of {list(src.shape)} writes {list(want)}, not {list(dst.shape)}")
        if dst.dtype is not src.dtype or src.dtype is dt.bool_:
            raise c.fail(f"{op}: dtypes must match and not be bool")
    elif op in ("TROWEXPAND", "TCOLEXPAND"):
        src = tiles[1]
        want = (dst.rows, 1) if op == "TROWEXPAND" else (1, dst.cols)
        if src.shape != want:
            raise c.fail(f"{op} to {list(dst.shape)} reads {list(want)}, not {list(src.shape)}")
        if dst.dtype is not src.dtype:
            raise c.fail(f"{op}: dtypes {dst.dtype.short} and {src.dtype.short} differ")
    elif op == "TTRANS":
        src = tiles[1]
        if dst.shape != (src.cols, src.rows) or dst.dtype is not src.dtype:
            raise c.fail(f"TTRANS of {src.dtype.short}{list(src.shape)} writes its transpose")


def _verify_sort(c: _Ctx, op: str, dst: Tile, srcs: list[Tile], n: object) -> None:
    """TSORT32, TMRGSORT and TMRGSORT2: f32 or f16 values; a structure holds 8 bytes."""
    src = srcs[0]
    if dst.dtype not in (dt.float32, dt.float16) or src.dtype is not dst.dtype:
        raise c.fail(
            f"{op} sorts f32 or f16 values: src is {src.dtype.short}, dst is {dst.dtype.short}",
            hint="convert the keys with TCVT first",
        )
    per = 8 // dst.dtype.itemsize  # columns of one (value, index) structure
    if op == "TSORT32":
        idx = srcs[1]
        if idx.dtype is not dt.int32 or idx.shape != src.shape:
            raise c.fail(
                f"TSORT32: the index tile must be i32{list(src.shape)} like src, got "
                f"{idx.dtype.short}{list(idx.shape)}"
            )
        if src.cols % 32:
            raise c.fail(
                f"TSORT32 sorts blocks of 32: src has {src.cols} columns",
                hint="pad each row to a multiple of 32 with the smallest value",
            )
        if dst.shape != (src.rows, src.cols * per):
            raise c.fail(
                f"TSORT32 of {src.dtype.short}{list(src.shape)} writes its structures to "
                f"[{src.rows},{src.cols * per}], not {list(dst.shape)}"
            )
        return
    if op == "TMRGSORT2":
        other = srcs[1]
        if other.dtype is not dst.dtype or other.rows != src.rows or other.cols % per:
            raise c.fail(
                f"TMRGSORT2 merges lists of whole structures of one dtype and row count: "
                f"{src.dtype.short}{list(src.shape)} and {other.dtype.short}{list(other.shape)}"
            )
        if src.cols % per or dst.shape != (src.rows, src.cols + other.cols):
            raise c.fail(
                f"TMRGSORT2 of {list(src.shape)} and {list(other.shape)} writes "
                f"[{src.rows},{src.cols + other.cols}], not {list(dst.shape)}"
            )
        return
    assert isinstance(n, int)
    if n < 1 or dst.shape != src.shape or src.cols % per:
        raise c.fail(
            f"TMRGSORT of runs of {n} structures: src {list(src.shape)} and dst "
            f"{list(dst.shape)} must be equal rows of whole structures ({per} columns each)"
        )


def _verify_move(c: _Ctx, ins: Instr) -> None:
    op, a = ins.op, ins.args
    if op == "TLOAD":
        dst, g = a
        assert isinstance(dst, Tile) and isinstance(g, GmRef)
        _check_tile(c, dst, "destination")
        if dst.space is Space.L0C:
            raise c.fail("TLOAD cannot write L0C; it loads into L1, L0A, L0B or UB")
        decl = _check_gm(c, g, dst)
        if decl.dtype is not dst.dtype:
            raise c.fail(
                f"TLOAD copies bytes: {g.tensor} is {decl.dtype.short}, tile is {dst.dtype.short}"
            )
        return
    if op in GM_STORES:
        g, src = a[0], a[1]
        assert isinstance(src, Tile) and isinstance(g, GmRef)
        _check_tile(c, src, "source")
        decl = _check_gm(c, g, src)
        if op == "TSTORE_S" and (src.space is not Space.L0C or not src.dtype.is_floating):
            raise c.fail(
                f"TSTORE_S scales a float L0C tile on the fixpipe, not {src.dtype.short} in "
                f"{src.space}"
            )
        if op == "TSTORE_S" and not math.isfinite(float(a[2])):  # type: ignore[arg-type]
            raise c.fail(f"TSTORE_S scale {a[2]} is not finite")
        if src.space is Space.UB:
            if decl.dtype is not src.dtype:
                raise c.fail(
                    f"TSTORE from UB copies bytes: {g.tensor} is {decl.dtype.short}, "
                    f"tile is {src.dtype.short}"
                )
        elif src.space is Space.L0C:
            if not cast_ok(src.dtype, decl.dtype):
                raise c.fail(f"the fixpipe cannot convert {src.dtype.short} to {decl.dtype.short}")
        else:
            raise c.fail(f"TSTORE writes GM from UB or L0C, not {src.space}")
        return
    dst, src = a[0], a[1]
    assert isinstance(dst, Tile) and isinstance(src, Tile)
    if op in ("TEXTRACT", "TEXTRACT_T"):
        _check_tile(c, dst, "destination")
        _check_tile(c, src, "source")
        ok = (src.space is Space.L1 and dst.space in (Space.L0A, Space.L0B)) or (
            op == "TEXTRACT" and src.space is Space.UB and dst.space is Space.UB
        )
        if not ok:
            paths = "L1 → L0A/L0B" + (" or UB → UB" if op == "TEXTRACT" else "")
            raise c.fail(f"{op} goes {paths}, not {src.space} → {dst.space}")
        if dst.dtype is not src.dtype:
            raise c.fail(f"{op}: dtypes {dst.dtype.short} and {src.dtype.short} differ")
        # the source window: dst's shape, or its transpose
        wr, wc = dst.shape if op == "TEXTRACT" else (dst.cols, dst.rows)
        if wr > src.rows or wc > src.cols:
            raise c.fail(f"{op} of {list(dst.shape)} from a smaller tile {list(src.shape)}")
        r, k = a[2], a[3]
        assert isinstance(r, Expr) and isinstance(k, Expr)
        if r.is_const and not 0 <= r.const <= src.rows - wr:
            raise c.fail(f"{op} rows {r.const}..{r.const + wr} outside {src.rows}")
        if k.is_const and not 0 <= k.const <= src.cols - wc:
            raise c.fail(f"{op} columns {k.const}..{k.const + wc} outside {src.cols}")
        return
    # TMOV
    path = (src.space, dst.space)
    _check_tile(c, src, "source")
    if path in ((Space.L1, Space.L0A), (Space.L1, Space.L0B), (Space.UB, Space.UB)):
        _check_tile(c, dst, "destination")
        if dst.peer is not None:
            raise c.fail("this TMOV stays within the core; drop the @peer")
        _same(c, dst, src, "TMOV")
    elif src.space is Space.L0C and dst.space in (Space.L1, Space.UB):
        if dst.space is Space.UB and dst.peer not in ("aiv0", "aiv1"):
            raise c.fail("TMOV L0C → UB writes a vector core's UB: name it, e.g. UB@aiv0[...]")
        if dst.space is Space.L1 and dst.peer is not None:
            raise c.fail("TMOV L0C → L1 stays within the cube core; drop the @peer")
        _check_tile(c, dst, "destination", peer_ok=dst.space is Space.UB)
        if dst.shape != src.shape:
            raise c.fail(f"TMOV: shapes {list(dst.shape)} and {list(src.shape)} differ")
        if not cast_ok(src.dtype, dst.dtype):
            raise c.fail(f"the fixpipe cannot convert {src.dtype.short} to {dst.dtype.short}")
    elif path == (Space.UB, Space.L1):
        if dst.peer != "aic":
            raise c.fail("TMOV UB → L1 writes the cluster's cube core: name it, L1@aic[...]")
        _check_tile(c, dst, "destination", peer_ok=True)
        _same(c, dst, src, "TMOV")
    elif path == (Space.L1, Space.UB):
        if dst.peer not in ("aiv0", "aiv1"):
            raise c.fail("TMOV L1 → UB writes a vector core's UB: name it, e.g. UB@aiv0[...]")
        _check_tile(c, dst, "destination", peer_ok=True)
        _same(c, dst, src, "TMOV")
    else:
        raise c.fail(
            f"no TMOV path {src.space} → {dst.space}",
            hint="paths: L1→L0A, L1→L0B, L1→UB@aivN (MTE1); L0C→L1, L0C→UB@aivN (FIX); "
            "UB→L1@aic (MTE3); "
            "UB→UB (V); GM transfers use TLOAD/TSTORE",
        )


def _verify_cube(c: _Ctx, ins: Instr) -> None:
    dst, x, y = ins.args
    assert isinstance(dst, Tile) and isinstance(x, Tile) and isinstance(y, Tile)
    for t, sp, what in (
        (dst, Space.L0C, "result"),
        (x, Space.L0A, "left"),
        (y, Space.L0B, "right"),
    ):
        _check_tile(c, t, what)
        if t.space is not sp:
            raise c.fail(f"{ins.op} {what} operand must be in {sp}, not {t.space}")
    m, k = x.shape
    k2, n = y.shape
    if k != k2 or dst.shape != (m, n):
        raise c.fail(f"{ins.op} shapes: [{m},{k}] @ [{k2},{n}] -> {list(dst.shape)}")
    out = matmul_result(x.dtype, y.dtype)
    if out is None:
        raise c.fail(
            f"the cube cannot multiply {x.dtype.short} by {y.dtype.short}",
            hint="f16@f16, bf16@bf16 and f32@f32 accumulate in f32; i8@i8 in i32",
        )
    if dst.dtype is not out:
        raise c.fail(
            f"{x.dtype.short} @ {y.dtype.short} accumulates in {out.short}, not {dst.dtype.short}"
        )


def _verify_sync(c: _Ctx, ins: Instr) -> None:
    op, a = ins.op, ins.args
    pipes = PIPES_OF[c.kind]
    m = c.machine
    if op in ("SET_FLAG", "WAIT_FLAG"):
        src, dst, ev = a
        assert isinstance(src, Pipe) and isinstance(dst, Pipe) and isinstance(ev, Expr)
        for q in (src, dst):
            if q not in pipes:
                raise c.fail(
                    f"the {c.kind} core has no {q} pipe", hint="its pipes: " + ", ".join(pipes)
                )
        if src is dst:
            raise c.fail(f"{op} orders two different pipes, got {src} → {dst}")
        n = m.event_ids if m else None
        if ev.is_const and ev.const < 0:
            raise c.fail(f"event id {ev.const} is negative")
        if ev.is_const and n is not None and ev.const >= n:
            raise c.fault(f"event id {ev.const} outside 0..{n - 1}")
    elif op in ("XSET_FLAG", "XWAIT_FLAG"):
        p, peer, ev = a
        assert isinstance(p, Pipe) and isinstance(peer, str) and isinstance(ev, Expr)
        if p not in pipes or p is Pipe.S:
            raise c.fail(f"{op} runs on a non-scalar pipe of the {c.kind} core, not {p}")
        if peer not in PEERS or (c.kind == "aic" and peer == "aic"):
            raise c.fail(f"{op}: {peer!r} is not a peer of the {c.kind} core")
        n = m.cross_flag_ids if m else None
        if ev.is_const and ev.const < 0:
            raise c.fail(f"cross-core flag id {ev.const} is negative")
        if ev.is_const and n is not None and ev.const >= n:
            raise c.fault(f"cross-core flag id {ev.const} outside 0..{n - 1}")


def _check_instr(c: _Ctx, ins: Instr) -> OpSpec:
    """The rules one instruction keeps on its own: opcode, operand kinds, its group's rules and
    its pipe on ``c.kind``'s core."""
    spec = OPCODES.get(ins.op)
    if spec is None:
        raise c.fail(f"unknown opcode {ins.op!r}")
    if len(ins.args) != len(spec.sig):
        raise c.fail(f"{ins.op} takes {len(spec.sig)} operands ({spec.sig}), got {len(ins.args)}")
    for kind, arg in zip(spec.sig, ins.args, strict=True):
        _check_kind(c, kind, arg)
    if ins.op == "LOOP":
        step = ins.args[3]
        assert isinstance(step, Expr)
        if step.is_const and step.const <= 0:
            raise c.fail("LOOP step must be positive")
    elif ins.op in ("SDIV", "SMOD"):
        d = ins.args[2]
        assert isinstance(d, Expr)
        if d.is_const and d.const == 0:
            raise c.fail(f"{ins.op} by zero")
    elif ins.op == "SLD":
        t, e = ins.args[1], ins.args[2]
        assert isinstance(t, Tile) and isinstance(e, Expr)
        _check_tile(c, t, "operand 1")
        if t.space is not Space.UB or t.dtype is not dt.int32:
            raise c.fail(
                f"SLD reads an i32 tile in UB, not {t.dtype.short} in {t.space}",
                hint="convert the indices with TCVT first",
            )
        if e.is_const and not 0 <= e.const < t.rows * t.cols:
            raise c.fail(f"SLD element {e.const} is outside the {t.rows * t.cols} of its tile")
    if spec.group == "vector":
        _verify_vector(c, ins)
    elif spec.group == "move":
        _verify_move(c, ins)
    elif spec.group == "cube":
        _verify_cube(c, ins)
    elif spec.group == "sync":
        _verify_sync(c, ins)
    p = pipe_of(ins)
    if p not in PIPES_OF[c.kind]:
        raise c.fail(
            f"{ins.op} runs on the {p} pipe, which the {c.kind} core does not have",
            hint=f"the {c.kind} core's pipes: " + ", ".join(PIPES_OF[c.kind]),
        )
    return spec


def verify_instr(prog: Program, kind: str, ins: Instr, machine: Machine | None = None) -> None:
    """Check the rules ``ins`` keeps on its own in the ``kind`` template of ``prog`` (whose GM
    tensors it may name), so a program builder can report a mistake where it is made.

    >>> from pypto.isa import parse_instr
    >>> ins = parse_instr("TEXP UB[0x0]:f32[8,8], UB[0x100]:f32[8,8]")
    >>> verify_instr(Program("p", (), ()), "aic", ins)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    pypto.isa.ir.IsaError: aic TEXP ...: ... tile is in UB, which the aic core does not have...
    """
    c = _Ctx(prog, CoreProgram(kind, (ins,)), machine)
    c.index, c.ins = -1, ins
    _check_instr(c, ins)


def _verify_core(prog: Program, core: CoreProgram, machine: Machine | None) -> None:
    c = _Ctx(prog, core, machine)
    labels: dict[str, tuple[int, ...]] = {}
    branches: list[tuple[int, Instr, str, tuple[int, ...]]] = []
    assigned: set[str] = set(SPECIAL_REGS)
    used: list[tuple[int, Instr, str]] = []
    loop_stack: list[tuple[int, str]] = []  # (index, loop register)
    scope: tuple[int, ...] = ()
    idx = 0
    for item in core.body:
        if isinstance(item, Label):
            if item.name in labels:
                c.index, c.ins = idx, None
                raise c.fail(f"label {item.name!r} is defined twice")
            labels[item.name] = scope
            continue
        ins = item
        c.index, c.ins = idx, ins
        spec = _check_instr(c, ins)
        for arg in ins.args:
            for e in _exprs(arg):
                used.extend((idx, ins, r) for r in e.regs)
        if spec.sig.startswith("R"):
            reg = ins.args[0]
            assert isinstance(reg, Reg)
            if reg.name in SPECIAL_REGS:
                raise c.fail(f"%{reg.name} is read-only")
            if any(r == reg.name for _, r in loop_stack):
                raise c.fail(f"%{reg.name} is the register of an enclosing LOOP")
            assigned.add(reg.name)
        if ins.op == "LOOP":
            reg = ins.args[0]
            assert isinstance(reg, Reg)
            loop_stack.append((idx, reg.name))
            scope = (*scope, idx)
        elif ins.op == "ENDLOOP":
            if not loop_stack:
                raise c.fail("ENDLOOP without a matching LOOP")
            loop_stack.pop()
            scope = scope[:-1]
        elif spec.group == "branch":
            target = ins.args[-1]
            assert isinstance(target, str)
            branches.append((idx, ins, target, scope))
        idx += 1
    if loop_stack:
        c.index, c.ins = loop_stack[-1][0], None
        raise c.fail("LOOP without a matching ENDLOOP")
    for i, ins, target, sc in branches:
        c.index, c.ins = i, ins
        if target not in labels:
            raise c.fail(f"no label {target!r}", hint="labels: " + (", ".join(labels) or "none"))
        if labels[target] != sc:
            raise c.fail(f"branch to {target!r} crosses a LOOP boundary")
    for i, ins, r in used:
        if r not in assigned:
            c.index, c.ins = i, ins
            raise c.fail(
                f"%{r} is never assigned in the {c.kind} template",
                hint="registers: %blk, %nblk, %sub and those set by SMOV/S*/LOOP",
            )


def _exprs(arg: object) -> tuple[Expr, ...]:
    if isinstance(arg, Expr):
        return (arg,)
    if isinstance(arg, Tile):
        return (arg.addr,)
    if isinstance(arg, GmRef):
        return (arg.row, arg.col)
    return ()


_KIND_TYPES: dict[str, tuple[type, ...]] = {
    "T": (Tile,),
    "G": (GmRef,),
    "E": (Expr,),
    "R": (Reg,),
    "F": (float,),
    "I": (int,),
    "P": (Pipe,),
    "K": (str,),
    "C": (Cond,),
    "L": (str,),
}


def _check_kind(c: _Ctx, kind: str, arg: object) -> None:
    if not isinstance(arg, _KIND_TYPES[kind]) or (kind == "I" and isinstance(arg, bool)):
        raise c.fail(f"operand {arg!r} should be of kind {kind!r}")


def verify(prog: Program, machine: Machine | None = None) -> None:
    """Raise :class:`IsaError` for the first broken rule of ``prog`` (see module doc)."""
    where = f"program {prog.name!r}"
    names: set[str] = set()
    for t in prog.tensors:
        if t.name in names:
            raise IsaError(f"{where}: tensor {t.name!r} is declared twice")
        names.add(t.name)
        if t.role not in ROLES:
            raise IsaError(
                f"{where}: tensor {t.name!r} has role {t.role!r}; use one of " + ", ".join(ROLES)
            )
        if not t.shape or any(d <= 0 for d in t.shape):
            raise IsaError(f"{where}: tensor {t.name!r} has shape {list(t.shape)}")
    if not prog.cores:
        raise IsaError(f"{where} has no core template (.core aic / .core aiv)")
    kinds = [c.kind for c in prog.cores]
    if len(set(kinds)) != len(kinds) or any(k not in PIPES_OF for k in kinds):
        raise IsaError(f"{where}: templates {kinds}; at most one aic and one aiv")
    if prog.blocks is not None and prog.blocks <= 0:
        raise IsaError(f"{where}: .blocks {prog.blocks} must be positive")
    if machine is not None:
        if prog.blocks is not None and prog.blocks > machine.clusters:
            raise SimulationError(
                f"{where} launches {prog.blocks} clusters; {machine.name} has {machine.clusters}",
                hint="loop over work with %blk and %nblk so any cluster count works",
            )
        total = sum(t.nbytes for t in prog.tensors)
        if total > machine.hbm_bytes:
            raise SimulationError(
                f"{where}: GM tensors need {total} bytes; {machine.name} has {machine.hbm_bytes}"
            )
    for core in prog.cores:
        _verify_core(prog, core, machine)
