"""Block-level programs written by hand: ``pto.block.program``.

A system developer writes the per-core-type programs of one launch in Python: the cube core's
(``with b.aic:``) and the vector cores' (``with b.aiv:``), with explicit buffers (one or more
slots), ``SET_FLAG``/``WAIT_FLAG`` between the pipes of a core and ``XSET_FLAG``/``XWAIT_FLAG``
between the cores of a cluster. Every PTO opcode is a method of the builder under its own name
in lower case (``b.tload``, ``b.tmatmul``, ``b.set_flag``, ``b.xwait_flag`` …), and every call
records the caller's ``file:line``. The result is a real :class:`~pypto.block.ir.BlockFunc`
(checked by its ``verify``), turned into a PTO program by :func:`~pypto.block.codegen.codegen`
and run by the simulator, so a deadlock or a data race is reported against the lines that
wrote the instructions.

Python is the macro language: a Python ``for`` unrolls, a :meth:`Builder.range` is a ``LOOP``
of the program. Each instruction is checked by the ISA's rules as it is written (a mistake
raises at its own line); the whole program is checked once the function returns.
See :func:`program` for an example and ``docs/expert.md`` for a walk-through.
"""

from __future__ import annotations

import linecache
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.block.codegen import codegen
from pypto.block.ir import BInstr, BItem, BlockFunc, BlockKernel, BLoop, Buf
from pypto.core.errors import (
    DTypeError,
    PyptoError,
    ShapeError,
    SimulationError,
    SourceLoc,
    TileError,
)
from pypto.isa.ir import (
    PEERS,
    SPACES_OF,
    SPECIAL_REGS,
    Cond,
    Expr,
    GmRef,
    Instr,
    IsaError,
    Operand,
    Pipe,
    Program,
    Reg,
    Space,
    TensorDecl,
    Tile,
)
from pypto.isa.opcodes import GM_STORES, OPCODES
from pypto.isa.verify import verify_instr
from pypto.npu.machine import Machine
from pypto.npu.machine import machine as get_machine
from pypto.npu.profile import Profile

__all__ = [
    "BlockProgram",
    "Buffer",
    "Builder",
    "GmTensor",
    "In",
    "InOut",
    "Loop",
    "Out",
    "ProgramError",
    "Scalar",
    "Section",
    "TensorSpec",
    "TileRef",
    "program",
]


class ProgramError(PyptoError, ValueError):
    """A hand-written Block program that breaks a rule: an instruction outside a core section,
    a buffer in a space its core does not have, an operand of the wrong kind …"""


# --- where the user is ---

_HERE = __file__


def _caller() -> SourceLoc:
    """The innermost frame outside this module: the user's line that called the builder (their
    code may live anywhere, even inside pypto, as the examples do)."""
    f = sys._getframe(1)
    while f.f_back is not None and f.f_code.co_filename == _HERE:
        f = f.f_back
    return SourceLoc(f.f_code.co_filename, f.f_lineno)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*=[^=]")
_WITH_AS = re.compile(r"\bas\s+([A-Za-z_]\w*)\s*:")


def _name_at(loc: SourceLoc, pattern: re.Pattern[str]) -> str | None:
    """The Python name the user's line binds (``a = b.aic.buffer(...)``, ``... as t:``), so the
    Block IR and the ISA read like the source."""
    m = pattern.search(linecache.getline(loc.file, loc.line))
    return m.group(1) if m and _IDENT.fullmatch(m.group(1)) else None


# --- GM tensors ---


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """A GM tensor parameter of a program: its shape, dtype and role (``in``, ``out``,
    ``inout``); made by :func:`In`, :func:`Out` and :func:`InOut`."""

    shape: tuple[int, ...]
    dtype: dt.DType
    role: str

    def __str__(self) -> str:
        return f"{self.dtype.short}[{','.join(map(str, self.shape))}] {self.role}"


def _spec(shape: Sequence[int], dtype: Any, role: str) -> TensorSpec:
    d = dt.dtype(dtype, op="block.program")
    dims = tuple(int(n) for n in shape)
    if not dims or any(n <= 0 for n in dims):
        raise ShapeError(f"a GM tensor needs a positive shape, got {list(dims)}", loc=_caller())
    return TensorSpec(dims, d, role)


def In(shape: Sequence[int], dtype: Any) -> TensorSpec:
    """An input tensor: passed to the program when it is called."""
    return _spec(shape, dtype, "in")


def Out(shape: Sequence[int], dtype: Any) -> TensorSpec:
    """An output tensor: returned by the call."""
    return _spec(shape, dtype, "out")


def InOut(shape: Sequence[int], dtype: Any) -> TensorSpec:
    """A tensor passed in, updated in place by the program and returned."""
    return _spec(shape, dtype, "inout")


@dataclass(frozen=True, slots=True)
class GmTensor:
    """A GM tensor inside the program body; ``t[row, col]`` is the window whose top-left
    element is at (row, col) of its 2-D view (leading dimensions flattened into rows)."""

    decl: TensorDecl

    @property
    def name(self) -> str:
        return self.decl.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.decl.shape

    def __getitem__(self, at: Any) -> GmRef:
        loc = _caller()
        row, col = at if isinstance(at, tuple) else (at, 0)
        if isinstance(at, tuple) and len(at) != 2:
            raise ProgramError(
                f"{self.name}[{', '.join(map(str, at))}]: a GM window is {self.name}[row, col] "
                "of the tensor's 2-D view",
                loc=loc,
            )
        return GmRef(self.decl.name, _expr(row, loc), _expr(col, loc))

    def __repr__(self) -> str:
        return str(self.decl)


# --- scalars ---


class Scalar(Reg):
    """A scalar register of the program: it takes part in affine index and address arithmetic
    (``t * 32 + b.blk``) and is the destination of the scalar instructions (``b.sadd(j, j, 1)``)."""

    __slots__ = ()

    def _e(self) -> Expr:
        return Expr.reg(self.name)

    def __repr__(self) -> str:
        return f"%{self.name}"

    def __add__(self, other: Any) -> Expr:
        return self._e() + _expr(other, _caller())

    __radd__ = __add__

    def __sub__(self, other: Any) -> Expr:
        return self._e() - _expr(other, _caller())

    def __rsub__(self, other: Any) -> Expr:
        return _expr(other, _caller()) - self._e()

    def __mul__(self, k: int) -> Expr:
        if isinstance(k, bool) or not isinstance(k, int | np.integer):
            raise ProgramError(
                f"%{self.name} * {k!r}: addresses and indices are affine (register * int)",
                loc=_caller(),
            )
        return self._e() * int(k)

    __rmul__ = __mul__


class Loop(Scalar):
    """The register of a :meth:`Builder.range` loop. ``parity`` is the loop's iteration count
    modulo 2, counted over every run of the loop, so a double buffer indexed by it keeps
    alternating across the runs of an enclosing loop (its registers are made on first use)."""

    __slots__ = ("_state",)
    _state: _LoopState

    @property
    def parity(self) -> Scalar:
        return self._state.parity()


def _expr(x: Any, loc: SourceLoc) -> Expr:
    if isinstance(x, Expr):
        return Expr(x.terms, x.const)
    if isinstance(x, Reg):
        return Expr.reg(x.name)
    if isinstance(x, bool | float) or not isinstance(x, int | np.integer):
        raise ProgramError(
            f"{x!r} is not an integer expression",
            loc=loc,
            hint="use ints, registers (loop variables, b.reg(), b.blk, b.nblk, b.sub) and + - *",
        )
    return Expr.of(int(x))


# --- buffers and tiles ---


@dataclass(frozen=True, slots=True)
class TileRef:
    """A tile of a :class:`Buffer`: one slot, rows of it (:meth:`rows`) or the same tile on a
    cluster peer (:meth:`on`, for a cross-core ``TMOV`` on machines with that path)."""

    buffer: Buffer
    tile: Tile

    def rows(self, start: Any, n: int) -> TileRef:
        """Rows ``start .. start+n`` of this tile (a row-major tile keeps them contiguous)."""
        loc = _caller()
        t = self.tile
        if not 0 < n <= t.rows:
            raise ProgramError(f"rows(…, {n}) of a tile with {t.rows} rows", loc=loc)
        s = _expr(start, loc)
        if s.is_const and not 0 <= s.const <= t.rows - n:
            raise ProgramError(
                f"rows {s.const}..{s.const + n} of a tile with {t.rows} rows", loc=loc
            )
        addr = t.addr + s * (t.cols * t.dtype.itemsize)
        return TileRef(self.buffer, replace(t, addr=addr, shape=(n, t.cols)))

    def view(self, dtype: Any) -> TileRef:
        """The same bytes read as ``dtype`` of the same width: a sort's f32 structures as i32,
        whose odd elements are the indices."""
        t = self.tile
        d = dt.dtype(dtype, op="view")
        if d.itemsize != t.dtype.itemsize:
            raise ProgramError(
                f"view as {d.short} of a {t.dtype.short} tile: the widths differ",
                loc=_caller(),
                hint="view as a dtype of the same size (f32 <-> i32, f16 <-> bf16)",
            )
        return TileRef(self.buffer, replace(t, dtype=d))

    def on(self, peer: str) -> TileRef:
        """This tile in the buffer of cluster peer ``peer`` (``"aic"``, ``"aiv0"``, ``"aiv1"``)."""
        if peer not in PEERS:
            raise ProgramError(f"{peer!r} is not a cluster peer; use one of {PEERS}", loc=_caller())
        return TileRef(self.buffer, replace(self.tile, peer=peer))

    def __str__(self) -> str:
        return str(self.tile)


@dataclass(frozen=True, eq=False)
class Buffer:
    """A buffer of one core type: ``slots`` copies of a ``dtype[shape]`` tile at ``addr`` in
    ``space``, ``stride`` bytes apart. ``buf[s]`` is the tile of slot ``s`` (an int or a
    register, e.g. a loop's ``parity``); a single-slot buffer is its own tile."""

    name: str
    core: str
    space: Space
    dtype: dt.DType
    shape: tuple[int, int]
    addr: int
    slots: int
    stride: int
    _slot_regs: set[str]

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.dtype.itemsize

    def __getitem__(self, slot: Any) -> TileRef:
        loc = _caller()
        s = _expr(slot, loc)
        if s.is_const and not 0 <= s.const < self.slots:
            raise ProgramError(f"slot {s.const} of %{self.name}, which has {self.slots}", loc=loc)
        if len(s.terms) == 1 and s.terms[0][1] == 1 and not s.const:
            self._slot_regs.add(s.terms[0][0])
        return TileRef(self, self._tile(self.addr + s * self.stride))

    def _tile(self, addr: Expr) -> Tile:
        return Tile(self.space, addr, self.dtype, self.shape)

    def tile(self, loc: SourceLoc) -> TileRef:
        """The whole buffer as a tile (single-slot buffers only)."""
        if self.slots > 1:
            raise ProgramError(
                f"%{self.name} has {self.slots} slots: name one, e.g. {self.name}[t.parity]",
                loc=loc,
            )
        return TileRef(self, self._tile(Expr.of(self.addr)))

    def rows(self, start: Any, n: int) -> TileRef:
        """Rows ``start .. start+n`` of a single-slot buffer."""
        return self.tile(_caller()).rows(start, n)

    def on(self, peer: str) -> TileRef:
        """A single-slot buffer on cluster peer ``peer``."""
        return self.tile(_caller()).on(peer)

    def view(self, dtype: Any) -> TileRef:
        """A single-slot buffer's bytes read as ``dtype`` of the same width."""
        return self.tile(_caller()).view(dtype)

    def ir(self) -> Buf:
        parity = next(iter(self._slot_regs)) if len(self._slot_regs) == 1 else None
        sp = self.space.value
        return Buf(self.name, sp, self.addr, self.nbytes, self.slots, parity, self.stride)

    def __repr__(self) -> str:
        return str(self.ir())


# --- the program being written ---


@dataclass(eq=False)
class _LoopState:
    core: _Core
    reg: str
    body: list[BItem]
    loc: str
    parity_reg: str | None = None
    counter: str = ""

    def parity(self) -> Scalar:
        if self.parity_reg is None:
            if self not in self.core.stack:
                raise ProgramError(
                    f"%{self.reg}.parity is first asked for after its loop ended; ask inside it",
                    loc=_caller(),
                )
            # a counter that runs on over every run of the loop, set once at the section start;
            # its instructions belong to the loop's line
            n = self.core.fresh("n_" + self.reg)
            p = self.core.fresh("p_" + self.reg)
            self.core.prologue.append(BInstr(Instr("SMOV", (Reg(n), Expr.of(0)), self.loc)))
            smod = Instr("SMOD", (Reg(p), Expr.reg(n), Expr.of(2)), self.loc)
            self.body.insert(0, BInstr(smod))
            self.parity_reg = p
            self.counter = n
        return Scalar(self.parity_reg)


class _Core:
    """One core type's part of the program: its buffers, registers and instructions."""

    def __init__(self, b: Builder, kind: str) -> None:
        self.b = b
        self.kind = kind
        self.buffers: list[Buffer] = []
        self.top: list[BItem] = []
        self.prologue: list[BItem] = []
        self.stack: list[_LoopState] = []
        self.names: set[str] = set(SPECIAL_REGS)
        self.free: dict[Space, int] = {}

    def fresh(self, want: str | None, fallback: str = "r") -> str:
        base = want if want and _IDENT.fullmatch(want) else fallback
        name, n = base, 1
        while name in self.names:
            name, n = f"{base}_{n}", n + 1
        self.names.add(name)
        return name

    @property
    def items(self) -> list[BItem]:
        return self.stack[-1].body if self.stack else self.top


class Section:
    """``b.aic`` / ``b.aiv``: declares that core type's buffers; ``with b.aic:`` writes its
    program (a section may be entered more than once; its parts follow each other)."""

    def __init__(self, core: _Core) -> None:
        self._core = core

    @property
    def kind(self) -> str:
        return self._core.kind

    def buffer(
        self,
        space: str | Space,
        shape: tuple[int, int],
        dtype: Any,
        *,
        slots: int = 1,
        addr: int | None = None,
        name: str | None = None,
    ) -> Buffer:
        """A buffer of ``slots`` copies of a ``shape`` tile of ``dtype`` in ``space`` of every
        core of this type, at ``addr`` (default: the next free, aligned address of that space)."""
        loc = _caller()
        core = self._core
        m = core.b.machine
        sp = _space(space, loc)
        if sp not in SPACES_OF[core.kind]:
            raise ProgramError(
                f"the {core.kind} core has no {sp}; its buffers are "
                + ", ".join(s.value for s in SPACES_OF[core.kind]),
                loc=loc,
                hint="UB belongs to the vector cores (b.aiv); L1, L0A, L0B and L0C to the cube "
                "core (b.aic)",
            )
        d = dt.dtype(dtype, op="buffer")
        if len(shape) != 2 or any(int(n) <= 0 for n in shape):
            raise ProgramError(f"a tile shape is [rows, cols] > 0, got {list(shape)}", loc=loc)
        if slots < 1:
            raise ProgramError(f"slots={slots}: a buffer has at least one slot", loc=loc)
        rows, cols = int(shape[0]), int(shape[1])
        nbytes = rows * cols * d.itemsize
        align = m.align_bytes
        stride = -(-nbytes // align) * align
        at = core.free.get(sp, 0) if addr is None else addr
        if at % align:
            raise ProgramError(f"address {hex(at)} in {sp} is not {align}-byte aligned", loc=loc)
        cap = m.buffer_bytes(sp.value)
        need = stride * (slots - 1) + nbytes
        if at < 0 or at + need > cap:
            raise TileError(
                f"{sp} buffer {d.short}[{rows},{cols}] x{slots} needs {need} bytes at {hex(at)}; "
                f"{sp} of each {core.kind} core on {m.name} has {cap} bytes "
                f"({max(cap - at, 0)} available from {hex(at)})",
                loc=loc,
                hint="smaller tiles, fewer slots, or a machine with more: machine.replace(...)",
            )
        core.free[sp] = max(core.free.get(sp, 0), at + stride * slots)
        taken = {x.name for c in core.b.cores.values() for x in c.buffers}
        base = name or _name_at(loc, _ASSIGN) or f"{sp.value.lower()}{len(core.buffers)}"
        nm, n = base, 1
        while nm in taken:
            nm, n = f"{base}_{n}", n + 1
        buf = Buffer(nm, core.kind, sp, d, (rows, cols), at, slots, stride, set())
        core.buffers.append(buf)
        return buf

    def __enter__(self) -> Section:
        b = self._core.b
        if b._current is not None:
            raise ProgramError(
                f"`with b.{self.kind}:` inside `with b.{b._current.kind}:`; sections do not nest",
                loc=_caller(),
            )
        b._current = self._core
        return self

    def __exit__(self, *exc: object) -> None:
        self._core.b._current = None


def _space(x: str | Space, loc: SourceLoc) -> Space:
    try:
        return Space(x.upper() if isinstance(x, str) else x)
    except ValueError:
        raise ProgramError(
            f"unknown memory space {x!r}; use one of L1, L0A, L0B, L0C, UB", loc=loc
        ) from None


def _pipe(x: Any, loc: SourceLoc) -> Pipe:
    try:
        return Pipe(x.upper() if isinstance(x, str) else x)
    except ValueError:
        raise ProgramError(
            f"unknown pipe {x!r}; use one of " + ", ".join(p.value for p in Pipe), loc=loc
        ) from None


class _Range:
    def __init__(self, b: Builder, start: Expr, stop: Expr, step: Expr, name: str | None) -> None:
        self.b, self.start, self.stop, self.step, self.name = b, start, stop, step, name

    def __enter__(self) -> Loop:
        loc = _caller()
        core = self.b._need_section("range", loc)
        reg = core.fresh(self.name or _name_at(loc, _WITH_AS), "i")
        head = Instr("LOOP", (Reg(reg), self.start, self.stop, self.step))
        self.b._check(core, head, loc)
        st = _LoopState(core, reg, [], str(loc))
        core.stack.append(st)
        self.core = core
        lp = Loop(reg)
        object.__setattr__(lp, "_state", st)
        return lp

    def __exit__(self, *exc: object) -> None:
        st = self.core.stack.pop()
        if st.parity_reg is not None:
            n = st.counter
            st.body.append(BInstr(Instr("SADD", (Reg(n), Expr.reg(n), Expr.of(1)), st.loc)))
        par = st.parity_reg
        lp = BLoop(st.reg, self.start, self.stop, self.step, tuple(st.body), par, st.loc)
        self.core.items.append(lp)


_TILE_READ_ONLY = (*sorted(GM_STORES), "SLD")  # their tiles are read, not written


def _regs(ins: Instr) -> set[str]:
    out: set[str] = set()
    for a in ins.args:
        if isinstance(a, Reg):
            out.add(a.name)
        elif isinstance(a, Expr):
            out.update(a.regs)
        elif isinstance(a, Tile):
            out.update(a.addr.regs)
        elif isinstance(a, GmRef):
            out.update(a.row.regs + a.col.regs)
    return out


def _method(op: str) -> Callable[..., None]:
    """The builder method of opcode ``op``: it records the instruction at the caller's line."""

    def emit(self: Builder, *args: Any) -> None:
        self._emit(op, args, _caller())

    spec = OPCODES[op]
    emit.__name__ = emit.__qualname__ = op.lower()
    emit.__doc__ = f"``{op}`` ({spec.sig}): {spec.doc}."
    return emit


class Builder:
    """What a program's function receives as ``b``: sections, buffers, loops, registers and one
    method per PTO opcode (in lower case), each recording the caller's line."""

    def __init__(self, name: str, machine: Machine, grid: int) -> None:
        self.name = name
        self.machine = machine
        self.grid = grid
        self.tensors: list[TensorDecl] = []
        self.cores = {k: _Core(self, k) for k in ("aic", "aiv")}
        self._current: _Core | None = None
        self.aic = Section(self.cores["aic"])
        """the cube core of each cluster"""
        self.aiv = Section(self.cores["aiv"])
        """the vector cores of each cluster (one program; ``b.sub`` tells them apart)"""

    blk = Scalar("blk")
    """the cluster index of this core in the launch (0 .. grid-1)"""
    nblk = Scalar("nblk")
    """the clusters in the launch (``grid``)"""
    sub = Scalar("sub")
    """which vector core of the cluster (0 or 1; 0 on the cube core)"""

    # --- declarations ---

    def workspace(self, shape: Sequence[int], dtype: Any, *, name: str | None = None) -> GmTensor:
        """A GM scratch tensor (role ``tmp``), e.g. the ring through which the cube core hands
        tiles to the vector cores on machines without a direct path."""
        loc = _caller()
        spec = _spec(shape, dtype, "tmp")
        return self._tensor(name or _name_at(loc, _ASSIGN) or "ws", spec, loc)

    def _tensor(self, want: str, spec: TensorSpec, loc: SourceLoc) -> GmTensor:
        taken = {t.name for t in self.tensors}
        if not _IDENT.fullmatch(want):
            raise ProgramError(f"{want!r} is not a tensor name", loc=loc)
        nm, n = want, 1
        while nm in taken:
            nm, n = f"{want}_{n}", n + 1
        decl = TensorDecl(nm, spec.dtype, spec.shape, spec.role)
        self.tensors.append(decl)
        return GmTensor(decl)

    def reg(self, init: Any = 0, *, name: str | None = None) -> Scalar:
        """A scalar register of the current section, set to ``init`` here (``SMOV``)."""
        loc = _caller()
        core = self._need_section("reg", loc)
        r = core.fresh(name or _name_at(loc, _ASSIGN), "r")
        self._emit("SMOV", (Scalar(r), init), loc)
        return Scalar(r)

    def range(
        self, start: Any, stop: Any = None, step: Any = 1, *, name: str | None = None
    ) -> _Range:
        """``with b.range(start, stop, step) as t:`` — a ``LOOP`` of the program (``range(stop)``
        and ``range(start, stop)`` as in Python); ``t`` is its register, ``t.parity`` its
        iteration parity for double buffers. The register is named after ``t``."""
        loc = _caller()
        if stop is None:
            start, stop = 0, start
        return _Range(self, _expr(start, loc), _expr(stop, loc), _expr(step, loc), name)

    # --- instructions ---

    def _need_section(self, what: str, loc: SourceLoc) -> _Core:
        if self._current is None:
            raise ProgramError(
                f"b.{what} outside a core section: write it inside `with b.aic:` (the cube core) "
                "or `with b.aiv:` (the vector cores)",
                loc=loc,
            )
        return self._current

    def _check(self, core: _Core, ins: Instr, loc: SourceLoc) -> None:
        for r in _regs(ins):
            if r not in core.names:
                raise ProgramError(
                    f"%{r} is not a register of the {core.kind} section",
                    loc=loc,
                    hint="a register belongs to the section that made it (b.reg, b.range); "
                    "b.blk, b.nblk and b.sub are in every section",
                )
        prog = Program(self.name, tuple(self.tensors), ())
        try:
            verify_instr(prog, core.kind, ins, self.machine)
        except (IsaError, SimulationError) as e:
            raise ProgramError(e.detail, loc=loc, hint=e.hint) from None

    def _emit(self, op: str, args: tuple[Any, ...], loc: SourceLoc) -> None:
        core = self._need_section(op.lower(), loc)
        sig = OPCODES[op].sig
        if len(args) != len(sig):
            raise ProgramError(
                f"b.{op.lower()} takes {len(sig)} operands, got {len(args)}", loc=loc
            )
        ops: list[Operand] = []
        tiles: list[TileRef] = []
        for kind, a in zip(sig, args, strict=True):
            ops.append(self._operand(core, op, kind, a, loc, tiles))
        ins = Instr(op, tuple(ops))
        self._check(core, ins, loc)
        names = [t.buffer.name for t in tiles]
        if op in _TILE_READ_ONLY:
            reads, writes = names, []
        else:
            reads, writes = names[1:], names[:1]
            if op == "TMATMUL_ACC":
                reads = names
        core.items.append(
            BInstr(
                Instr(op, tuple(ops), str(loc)),
                tuple(dict.fromkeys(reads)),
                tuple(dict.fromkeys(writes)),
            )
        )

    def _operand(
        self, core: _Core, op: str, kind: str, a: Any, loc: SourceLoc, tiles: list[TileRef]
    ) -> Operand:
        if kind == "T":
            if isinstance(a, Buffer):
                a = a.tile(loc)
            if not isinstance(a, TileRef):
                raise ProgramError(
                    f"b.{op.lower()}: {a!r} is not a tile (a buffer or buf[slot])", loc=loc
                )
            if a.buffer.core != core.kind and a.tile.peer is None:
                raise ProgramError(
                    f"b.{op.lower()} in the {core.kind} section names %{a.buffer.name}, a buffer "
                    f"of the {a.buffer.core} core",
                    loc=loc,
                    hint="a cross-core TMOV names the peer's buffer: buf.on('aiv0')",
                )
            tiles.append(a)
            return a.tile
        if kind == "G":
            if not isinstance(a, GmRef):
                raise ProgramError(
                    f"b.{op.lower()}: {a!r} is not a GM window (tensor[row, col])", loc=loc
                )
            return a
        if kind == "E":
            return _expr(a, loc)
        if kind == "R":
            if not isinstance(a, Scalar) or isinstance(a, Loop) or a.name in SPECIAL_REGS:
                raise ProgramError(
                    f"b.{op.lower()} writes a register made by b.reg(), not {a!r}", loc=loc
                )
            return Reg(a.name)
        if kind == "P":
            return _pipe(a, loc)
        if kind == "C":
            try:
                return Cond(str(a).upper())
            except ValueError:
                raise ProgramError(f"unknown condition {a!r}", loc=loc) from None
        if kind == "F":
            if isinstance(a, bool) or not isinstance(a, int | float | np.number):
                raise ProgramError(f"b.{op.lower()}: {a!r} is not a number", loc=loc)
            return float(a)
        if kind == "I":
            if isinstance(a, bool) or not isinstance(a, int | np.integer):
                raise ProgramError(f"b.{op.lower()}: {a!r} is not an int", loc=loc)
            return int(a)
        assert kind == "K"
        return str(a)

    def _xflag(self, op: str, pipe: Any, peer: str, ev: Any, loc: SourceLoc) -> None:
        core = self._need_section(op.lower(), loc)
        # "aiv" from the cube core: every vector core of the cluster
        peers = (
            [f"aiv{i}" for i in range(self.machine.aiv_per_cluster)]
            if peer == "aiv" and core.kind == "aic"
            else [peer]
        )
        for p in peers:
            self._emit(op, (pipe, p, ev), loc)

    def set_flag(self, src: Any, dst: Any, event: Any) -> None:
        """``SET_FLAG src, dst, event`` (on pipe ``src``): signal ``dst`` of this core."""
        self._emit("SET_FLAG", (src, dst, event), _caller())

    def wait_flag(self, src: Any, dst: Any, event: Any) -> None:
        """``WAIT_FLAG src, dst, event`` (on pipe ``dst``): wait for ``src``'s signal."""
        self._emit("WAIT_FLAG", (src, dst, event), _caller())

    def xset_flag(self, pipe: Any, peer: str, event: Any) -> None:
        """``XSET_FLAG pipe, peer, event``: signal a cluster peer (``"aic"``, ``"aiv0"``,
        ``"aiv1"``; from the cube core ``"aiv"`` signals every vector core)."""
        self._xflag("XSET_FLAG", pipe, peer, event, _caller())

    def xwait_flag(self, pipe: Any, peer: str, event: Any) -> None:
        """``XWAIT_FLAG pipe, peer, event``: wait for a cluster peer's signal (``"aiv"`` from
        the cube core: for every vector core's)."""
        self._xflag("XWAIT_FLAG", pipe, peer, event, _caller())

    # One method per opcode, named after it. Control flow is structured: loops are
    # b.range (LOOP/ENDLOOP) and Python's own if/for choose and unroll at build time, so
    # the builder has no branches or labels.
    smov = _method("SMOV")
    sadd = _method("SADD")
    ssub = _method("SSUB")
    smul = _method("SMUL")
    sdiv = _method("SDIV")
    smod = _method("SMOD")
    smin = _method("SMIN")
    smax = _method("SMAX")
    sld = _method("SLD")
    tload = _method("TLOAD")
    tstore = _method("TSTORE")
    tstore_s = _method("TSTORE_S")
    tmov = _method("TMOV")
    textract = _method("TEXTRACT")
    textract_t = _method("TEXTRACT_T")
    tmatmul = _method("TMATMUL")
    tmatmul_acc = _method("TMATMUL_ACC")
    texp = _method("TEXP")
    tlog = _method("TLOG")
    tsqrt = _method("TSQRT")
    trsqrt = _method("TRSQRT")
    trecip = _method("TRECIP")
    tabs = _method("TABS")
    tneg = _method("TNEG")
    trelu = _method("TRELU")
    ttanh = _method("TTANH")
    tsigmoid = _method("TSIGMOID")
    tsin = _method("TSIN")
    tcos = _method("TCOS")
    tgelu = _method("TGELU")
    tadd = _method("TADD")
    tsub = _method("TSUB")
    tmul = _method("TMUL")
    tdiv = _method("TDIV")
    tmax = _method("TMAX")
    tmin = _method("TMIN")
    tpow = _method("TPOW")
    tfmod = _method("TFMOD")
    tand = _method("TAND")
    tor = _method("TOR")
    txor = _method("TXOR")
    tshl = _method("TSHL")
    tshr = _method("TSHR")
    tnot = _method("TNOT")
    tadds = _method("TADDS")
    tsubs = _method("TSUBS")
    tmuls = _method("TMULS")
    tdivs = _method("TDIVS")
    tmaxs = _method("TMAXS")
    tmins = _method("TMINS")
    tpows = _method("TPOWS")
    tfmods = _method("TFMODS")
    tands = _method("TANDS")
    tors = _method("TORS")
    txors = _method("TXORS")
    tshls = _method("TSHLS")
    tshrs = _method("TSHRS")
    tcmp = _method("TCMP")
    tcmps = _method("TCMPS")
    tsel = _method("TSEL")
    tgather = _method("TGATHER")
    tsort32 = _method("TSORT32")
    tmrgsort = _method("TMRGSORT")
    tmrgsort2 = _method("TMRGSORT2")
    tcvt = _method("TCVT")
    tbitcast = _method("TBITCAST")
    texpands = _method("TEXPANDS")
    trowsum = _method("TROWSUM")
    trowmax = _method("TROWMAX")
    trowmin = _method("TROWMIN")
    tcolsum = _method("TCOLSUM")
    tcolmax = _method("TCOLMAX")
    tcolmin = _method("TCOLMIN")
    trowexpand = _method("TROWEXPAND")
    tcolexpand = _method("TCOLEXPAND")
    ttrans = _method("TTRANS")
    pipe_barrier = _method("PIPE_BARRIER")
    barrier = _method("BARRIER")


# --- the program ---


class BlockProgram:
    """A hand-written Block program, built and checked: call it on numpy arrays or pto
    Tensors (its inputs, in parameter order) to run it on the simulated NPU and get its outputs;
    ``profile(...)`` gives the :class:`~pypto.npu.Profile`; ``block_ir`` and ``isa`` are its two
    levels (``str()`` of each is its text)."""

    def __init__(
        self,
        name: str,
        specs: tuple[tuple[str, TensorSpec], ...],
        block_ir: BlockFunc,
        isa: Program,
        machine: Machine,
        grid: int,
        loc: SourceLoc,
    ) -> None:
        self.name = name
        self.specs = specs
        self.block_ir = block_ir
        """the :class:`~pypto.block.ir.BlockFunc`: buffers and each core type's program"""
        self.isa = isa
        """the PTO :class:`~pypto.isa.Program` the simulator runs (its text re-parses)"""
        self.machine = machine
        self.grid = grid
        self.loc = loc

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(n for n, s in self.specs if s.role in ("in", "inout"))

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(n for n, s in self.specs if s.role in ("out", "inout"))

    def _arrays(self, args: tuple[Any, ...], loc: SourceLoc | None) -> dict[str, np.ndarray]:
        names = self.inputs
        if len(args) != len(names):
            raise ShapeError(
                f"@{self.name} takes {len(names)} inputs ({', '.join(names)}), got {len(args)}",
                op=self.name,
                loc=loc,
            )
        spec = dict(self.specs)
        out: dict[str, np.ndarray] = {}
        for n, x in zip(names, args, strict=True):
            s = spec[n]
            a = np.asarray(x)
            if a.shape != s.shape:
                raise ShapeError(
                    f"input {n!r} has shape {list(a.shape)}; @{self.name} declares "
                    f"{s.dtype.short}[{','.join(map(str, s.shape))}]",
                    op=self.name,
                    loc=loc,
                )
            if a.dtype != s.dtype.np:
                if dt.from_numpy(a.dtype).is_floating != s.dtype.is_floating:
                    raise DTypeError(
                        f"input {n!r} is {a.dtype}; @{self.name} declares {s.dtype.name}",
                        op=self.name,
                        loc=loc,
                    )
                a = a.astype(s.dtype.np)
            out[n] = a
        return out

    def profile(self, *args: Any, numerics: bool = True, trace: bool = True) -> Profile:
        """Run on the simulated NPU: the Profile (cycles, roofline, utilization, trace …); its
        ``outputs`` are the results as Tensors in output order (None without ``numerics``)."""
        from pypto.eager.tensor import _wrap
        from pypto.npu.invariants import check_if_requested, requested
        from pypto.npu.simulator import simulate

        try:
            arrays = self._arrays(args, None) if numerics or args else {}
            trace = trace or requested()
            prof = simulate(self.isa, self.machine, arrays, numerics=numerics, trace=trace)
        except PyptoError as e:
            raise e.stripped() from None
        check_if_requested(prof)
        if not numerics:
            return prof
        got = prof.outputs or {}
        prof._cache["gm_outputs"] = got
        outs = [_wrap(np.array(got[n])) for n in self.outputs]
        return replace(prof, outputs=outs)  # type: ignore[arg-type]

    def __call__(self, *args: Any) -> Any:
        # the profile's outputs are the results, as Tensors in output order
        outs: Any = self.profile(*args, trace=False).outputs
        return outs[0] if len(outs) == 1 else tuple(outs)

    def signature(self) -> str:
        params = ", ".join(f"{n}: {s}" for n, s in self.specs)
        many = "s" if self.grid > 1 else ""
        return f"@{self.name}({params}) on {self.machine.name}, {self.grid} cluster{many}"

    def __repr__(self) -> str:
        return f"<block program {self.signature()}>"

    def __str__(self) -> str:
        return f"{self.signature()}\n{self.block_ir}"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        import html

        from pypto.core.display import pre, section, table

        rows = [
            (
                f"%{b.name}",
                html.escape(f"{core} {b.space} {hex(b.addr)}, {b.nbytes} B x{b.slots}"),
            )
            for k in self.block_ir.kernels
            for core, bufs in k.buffers
            for b in bufs
        ]
        body = (
            f"<b>block program</b> <code>{html.escape(self.signature())}</code>"
            + table(rows, "buffers")
            + section("Block IR", pre(str(self.block_ir)), open_=True)
            + section("PTO ISA", pre(str(self.isa)))
        )
        return {"text/plain": str(self), "text/html": body}


def program(
    *specs: TensorSpec,
    machine: Machine | str = "tiny",
    grid: int | None = None,
    name: str | None = None,
) -> Callable[[Callable[..., None]], BlockProgram]:
    """Decorate ``fn(b, *tensors)`` to build a Block program by hand.

    ``specs`` declare ``fn``'s GM tensor parameters in order (:func:`In`, :func:`Out`,
    :func:`InOut`); ``grid`` is the clusters of the launch (default: every cluster of
    ``machine``; the program reads ``b.blk`` and ``b.nblk``). ``fn`` runs once, now: it receives
    the :class:`Builder` and a :class:`GmTensor` per parameter, declares buffers
    (``b.aic.buffer``, ``b.aiv.buffer``) and workspaces (``b.workspace``) and writes each core
    type's program in ``with b.aic:`` / ``with b.aiv:``. The result is a :class:`BlockProgram`.

    Each vector core of the cluster doubles its 16 rows of ``x`` (``b.sub`` picks them):

    >>> import numpy as np
    >>> import pypto as pto
    >>> from pypto.block import In, Out
    >>> @pto.block.program(In((32, 64), "f32"), Out((32, 64), "f32"), machine="tiny", grid=1)
    ... def double(b, x, y):
    ...     ub = b.aiv.buffer("UB", (16, 64), "f32")
    ...     with b.aiv:
    ...         b.tload(ub, x[b.sub * 16, 0])
    ...         b.set_flag("MTE2", "V", 0)
    ...         b.wait_flag("MTE2", "V", 0)
    ...         b.tadd(ub, ub, ub)
    ...         b.set_flag("V", "MTE3", 0)
    ...         b.wait_flag("V", "MTE3", 0)
    ...         b.tstore(y[b.sub * 16, 0], ub)
    >>> x = np.arange(32 * 64, dtype=np.float32).reshape(32, 64)
    >>> bool((np.asarray(double(x)) == 2 * x).all())
    True
    >>> print(double.isa.core("aiv").body[0])  # doctest: +ELLIPSIS
    TLOAD UB[0x0]:f32[16,64], x[%sub*16, 0]  loc("<doctest ...>:5")
    """
    decl = _caller()

    def build(fn: Callable[..., None]) -> BlockProgram:
        try:
            return _build(fn, specs, machine, grid, name or fn.__name__, decl)
        except PyptoError as e:
            raise e.stripped() from None

    return build


def _build(
    fn: Callable[..., None],
    specs: tuple[TensorSpec, ...],
    machine: Machine | str,
    grid: int | None,
    name: str,
    loc: SourceLoc,
) -> BlockProgram:
    import inspect

    m = get_machine(machine)
    n = m.clusters if grid is None else grid
    if not 0 < n <= m.clusters:
        raise ProgramError(
            f"grid={grid}: {m.name} has {m.clusters} clusters", op="block.program", loc=loc
        )
    params = list(inspect.signature(fn).parameters)[1:]
    if len(params) != len(specs) or any(not isinstance(s, TensorSpec) for s in specs):
        raise ProgramError(
            f"@{name} has {len(params)} tensor parameters ({', '.join(params)}) and "
            f"{len(specs)} tensor specs",
            op="block.program",
            loc=loc,
            hint="give one In(shape, dtype) / Out(...) / InOut(...) per parameter after b",
        )
    b = Builder(name, m, n)
    handles = [b._tensor(p, s, loc) for p, s in zip(params, specs, strict=True)]
    fn(b, *handles)
    programs: list[tuple[str, tuple[BItem, ...]]] = []
    buffers: list[tuple[str, tuple[Buf, ...]]] = []
    for kind, core in b.cores.items():
        if core.top:
            programs.append((kind, (*core.prologue, *core.top)))
        if core.buffers:
            buffers.append((kind, tuple(x.ir() for x in core.buffers)))
    if not programs:
        raise ProgramError(
            f"@{name} has no instructions: write them in `with b.aic:` or `with b.aiv:`",
            op="block.program",
            loc=loc,
        )
    kernel = BlockKernel(name, tuple(programs), tuple(buffers), n, "cluster")
    tensors = tuple(b.tensors)
    outs = tuple((t.name, t.shape) for t in tensors if t.role in ("out", "inout"))
    ins = tuple(t.name for t in tensors if t.role in ("in", "inout"))
    bf = BlockFunc(name, tensors, (kernel,), ins, outs).verify(m)
    prog = replace(codegen(bf), blocks=n).verify(m)
    named = tuple(zip(params, specs, strict=True))
    return BlockProgram(name, named, bf, prog, m, n, loc)
