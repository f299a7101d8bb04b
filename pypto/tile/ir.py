"""The Tile IR: one kernel per fusion group, written over tiles in named memory spaces.

A :class:`TileFunc` owns the GM buffers of a function (inputs, outputs, constants and
workspaces) and runs its :class:`Kernel` s in order. A kernel is a grid over output tiles: each
grid point runs the kernel's ``body`` with the grid registers (``%r``, ``%c``, ...) set, on a
vector core (``dist="aiv"``) or on a cluster (``dist="cluster"``: the cube core and its two
vector cores, MPMD). ``pre`` runs once per core before the grid (loop-invariant tiles such as a
bias row), ``post`` once after it.

Statements are tile loads/stores (GM windows indexed by affine expressions of registers), tile
ops named by the PTO instruction they become (``TADD``, ``TROWMAX``, ``TMATMUL_ACC`` ...),
scalar register ops and loops. Tiles are named buffers (``%t3: UB f32[8,64]``) that a kernel may
overwrite (an accumulator); buffer addresses, double buffering and synchronisation are decided
one level down, in the Block IR.

>>> from pypto.tile.ir import TileVar
>>> from pypto.isa import Space
>>> from pypto import dtypes as dt
>>> str(TileVar("a", Space.UB, dt.float16, (8, 64)))
'%a: UB f16[8,64]'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import PyptoError, SourceLoc
from pypto.isa.ir import Cond, Expr, Space, TensorDecl
from pypto.isa.opcodes import OPCODES

__all__ = [
    "For",
    "Kernel",
    "Ring",
    "SOp",
    "Section",
    "Stmt",
    "TLoad",
    "TOp",
    "TStore",
    "TileFunc",
    "TileIRError",
    "TileVar",
    "gate",
    "walk",
]


class TileIRError(PyptoError):
    """An ill-formed Tile IR (found by :func:`verify`)."""


@dataclass(frozen=True, slots=True)
class TileVar:
    """A tile buffer: ``%name: SPACE dtype[rows,cols]`` (row-major, dense)."""

    name: str
    space: Space
    dtype: dt.DType
    shape: tuple[int, int]

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.dtype.itemsize

    @property
    def ref(self) -> str:
        return "%" + self.name

    def __str__(self) -> str:
        return f"%{self.name}: {self.space} {self.dtype.short}[{self.shape[0]},{self.shape[1]}]"


def _loc(loc: SourceLoc | None) -> str:
    return f"  # {loc}" if loc else ""


@dataclass(frozen=True, slots=True)
class TLoad:
    """``dst = tload tensor[row : +rows, col : +cols]`` (the window has the tile's shape)."""

    dst: TileVar
    tensor: str
    row: Expr
    col: Expr
    loc: SourceLoc | None = None

    def text(self) -> str:
        r, c = self.dst.shape
        return f"{self.dst} = tload %{self.tensor}[{self.row} : +{r}, {self.col} : +{c}]"


@dataclass(frozen=True, slots=True)
class TStore:
    """``tstore tensor[row : +rows, col : +cols], src`` (``, scale s``: an L0C tile times
    ``s`` on the fixpipe before its cast, ``TSTORE_S``)."""

    tensor: str
    row: Expr
    col: Expr
    src: TileVar
    loc: SourceLoc | None = None
    scale: float | None = None

    def text(self) -> str:
        r, c = self.src.shape
        at = f"tstore %{self.tensor}[{self.row} : +{r}, {self.col} : +{c}], {self.src.ref}"
        return at if self.scale is None else f"{at}, scale {self.scale!r}"


TArg = TileVar | float | int | Cond | Expr


@dataclass(frozen=True, slots=True)
class TOp:
    """``dst = op args``: ``op`` is the PTO instruction it becomes (``TADD``, ``TEXTRACT`` ...)."""

    op: str
    dst: TileVar
    args: tuple[TArg, ...]
    loc: SourceLoc | None = None

    def text(self) -> str:
        def arg(a: TArg) -> str:
            if isinstance(a, TileVar):
                return a.ref
            if isinstance(a, float):
                return repr(a)
            return str(a)

        return f"{self.dst} = {self.op.lower()} " + ", ".join(arg(a) for a in self.args)


@dataclass(frozen=True, slots=True)
class SOp:
    """A scalar register op: ``%dst = op args`` (``SMOV``, ``SADD``, ``SDIV``, ``SMOD`` ...);
    ``SLD`` reads element ``args[1]`` of the int32 tile ``args[0]``."""

    op: str
    dst: str
    args: tuple[Expr | TileVar, ...]
    loc: SourceLoc | None = None

    @property
    def exprs(self) -> tuple[Expr, ...]:
        return tuple(a for a in self.args if isinstance(a, Expr))

    @property
    def tiles(self) -> tuple[TileVar, ...]:
        return tuple(a for a in self.args if isinstance(a, TileVar))

    def text(self) -> str:
        args = (a.ref if isinstance(a, TileVar) else str(a) for a in self.args)
        return f"%{self.dst} = {self.op.lower()} " + ", ".join(args)


@dataclass(frozen=True, slots=True)
class For:
    """``for %reg in start..stop step k { body }``."""

    reg: str
    start: Expr
    stop: Expr
    step: int
    body: tuple[Stmt, ...]


Stmt = TLoad | TStore | TOp | SOp | For


def gate(reg: str, left: Expr) -> list[Stmt]:
    """``%reg = clamp(left, 0, 1)``: the trip count of a 0/1-trip loop on ``left > 0``."""
    return [SOp("SMIN", reg, (left, Expr.of(1))), SOp("SMAX", reg, (Expr.reg(reg), Expr()))]


def stores_by_first_sub(stmts: Sequence[Stmt]) -> list[Stmt]:
    """``stmts`` with every store (in loops too) run only by the vector core with ``%sub`` 0:
    for a tile of one row, which both vector cores of a cluster compute, one store of it (two
    would race). Loads and cross-core flags stay on both, so hand-offs pair as before."""
    out: list[Stmt] = []
    for s in stmts:
        if isinstance(s, TStore):
            out.append(For("one", Expr.reg("sub"), Expr.of(1), 1, (s,)))
        elif isinstance(s, For):
            out.append(replace(s, body=tuple(stores_by_first_sub(s.body))))
        else:
            out.append(s)
    return out


def walk(stmts: tuple[Stmt, ...]) -> Any:
    """Every statement, loops included, depth first."""
    for s in stmts:
        yield s
        if isinstance(s, For):
            yield from walk(s.body)


def _lines(stmts: tuple[Stmt, ...], depth: int) -> list[str]:
    out: list[str] = []
    pad = "  " * depth
    for s in stmts:
        if isinstance(s, For):
            step = f" step {s.step}" if s.step != 1 else ""
            out.append(f"{pad}for %{s.reg} in {s.start}..{s.stop}{step} {{")
            out.extend(_lines(s.body, depth + 1))
            out.append(pad + "}")
        else:
            loc = _loc(getattr(s, "loc", None))
            out.append(pad + s.text() + loc)
    return out


@dataclass(frozen=True, slots=True)
class Section:
    """What one core type runs for a kernel: ``pre`` once, ``body`` per grid point, ``post``."""

    core: str  # "aic" or "aiv"
    body: tuple[Stmt, ...]
    pre: tuple[Stmt, ...] = ()
    post: tuple[Stmt, ...] = ()


@dataclass(frozen=True, slots=True)
class Ring:
    """A GM workspace through which one core type of a cluster kernel hands tiles to the
    other: ``slots`` copies, the live one picked by the register ``slot`` (the grid point's
    iteration count modulo ``slots``). The Block level orders the hand-off with cross-core
    flags (:mod:`pypto.block.crosscore`)."""

    tensor: str
    src: str  # the writing core type: "aic" or "aiv"
    slot: str
    slots: int = 2
    parts: int = 1
    """Row blocks of a slot handed over one by one (attention's query tiles of a point): the
    reader may take the first while the writer still fills the next."""

    def __str__(self) -> str:
        dst = "aiv" if self.src == "aic" else "aic"
        parts = f" in {self.parts} parts" if self.parts > 1 else ""
        return f"ring %{self.tensor} {self.src}->{dst} x{self.slots} by %{self.slot}{parts}"


@dataclass(frozen=True)
class Kernel:
    """One fused group as a grid of tiles.

    ``grid`` names the grid registers and their extents (row-major order of grid points);
    ``tile`` records the chosen tile shape for the text (``vec_tile(rows=8, cols=4096)``);
    ``dist`` says who runs a grid point: one vector core (``"aiv"``) or a cluster
    (``"cluster"``: the cube core with both vector cores; each vector core then takes its
    ``%sub``-th half of the epilogue rows). ``cost`` names a grid register that a point's
    work grows with (causal attention: the query tile, whose K/V loop stops at the
    diagonal); the Block level then deals the points longest first, so the round-robin
    gives every worker about the same work (printed ``cost(q)``). A section may read the grid
    registers of the point its worker runs next, ``%nx_<reg>``, with ``%nx`` 1 while there is
    one (to read ahead what that point loads); the Block level computes them.
    """

    name: str
    kind: str
    grid: tuple[tuple[str, int], ...]
    sections: tuple[Section, ...]
    tile: tuple[tuple[str, int], ...] = ()
    tile_kind: str = "vec_tile"
    dist: str = "aiv"
    loc: SourceLoc | None = None
    flops: int = 0
    rings: tuple[Ring, ...] = ()
    cost: str = ""
    cores: int = 0
    """How many workers the grid is dealt over (``pto.hint(cores=k)``, printed ``cores(k)``);
    0: every worker of the kernel's distribution."""

    @property
    def points(self) -> int:
        n = 1
        for _, e in self.grid:
            n *= e
        return n

    def section(self, core: str) -> Section | None:
        for s in self.sections:
            if s.core == core:
                return s
        return None

    def tensors(self) -> tuple[str, ...]:
        """GM tensors the kernel touches, in first-use order."""
        seen: dict[str, None] = {}
        for sec in self.sections:
            for s in walk(sec.pre + sec.body + sec.post):
                if isinstance(s, TLoad | TStore):
                    seen.setdefault(s.tensor, None)
        return tuple(seen)

    def header(self) -> str:
        grid = ", ".join(f"{r}={e}" for r, e in self.grid)
        tile = ", ".join(f"{k}={v}" for k, v in self.tile)
        extra = f" {self.tile_kind}({tile})" if tile else ""
        dist = " on cluster" if self.dist == "cluster" else ""
        cost = f" cost({self.cost})" if self.cost else ""
        cores = f" cores({self.cores})" if self.cores else ""
        return f"kernel @{self.name} grid({grid}){cost}{cores}{extra}{dist}"

    def __str__(self) -> str:
        lines = [self.header() + " {" + _loc(self.loc)]
        lines.extend(f"  {r}" for r in self.rings)
        for sec in self.sections:
            lines.append(f"  .{sec.core}")
            if sec.pre:
                lines.append("    pre {")
                lines.extend(_lines(sec.pre, 3))
                lines.append("    }")
            lines.extend(_lines(sec.body, 2))
            if sec.post:
                lines.append("    post {")
                lines.extend(_lines(sec.post, 3))
                lines.append("    }")
        lines.append("}")
        return "\n".join(lines)


@dataclass(frozen=True, eq=False)
class TileFunc:
    """A function at the Tile level: GM buffers and the kernels that run over them, in order.

    ``params`` names the buffer of each function parameter; ``outputs`` gives each result as
    (buffer, logical shape) — a reshape is a view of its operand's buffer, not a copy;
    ``consts`` holds the data of constant buffers (folded tensors, index tables).
    """

    name: str
    buffers: tuple[TensorDecl, ...]
    kernels: tuple[Kernel, ...]
    params: tuple[str, ...]
    outputs: tuple[tuple[str, tuple[int, ...]], ...]
    consts: tuple[tuple[str, np.ndarray], ...] = ()
    _by_name: dict[str, TensorDecl] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({b.name: b for b in self.buffers})

    def buffer(self, name: str) -> TensorDecl:
        return self._by_name[name]

    def __str__(self) -> str:
        lines = [f"tile_func @{self.name} {{"]
        for b in self.buffers:
            lines.append(f"  {b}")
        outs = ", ".join(
            f"%{n}" + (f" as {list(s)}" if s != self.buffer(n).shape else "")
            for n, s in self.outputs
        )
        for k in self.kernels:
            lines.extend("  " + ln for ln in str(k).splitlines())
        lines.append(f"  return {outs}")
        lines.append("}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        from pypto.core.display import pre

        return pre(str(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}

    def verify(self) -> TileFunc:
        verify(self)
        return self


def _fail(k: Kernel, msg: str) -> TileIRError:
    return TileIRError(f"kernel @{k.name}: {msg}")


def verify(f: TileFunc) -> None:
    """Check every kernel: known opcodes, tiles in the spaces of their core, GM windows inside
    their buffer's 2-D view, registers defined before use, matching tile shapes for moves."""
    names = {b.name for b in f.buffers}
    for p in f.params:
        if p not in names:
            raise TileIRError(f"parameter buffer %{p} is not declared")
    for n, shape in f.outputs:
        if n not in names:
            raise TileIRError(f"output buffer %{n} is not declared")
        if int(np.prod(shape)) != f.buffer(n).size:
            raise TileIRError(f"output %{n} viewed as {list(shape)} has another size")
    spaces = {"aic": (Space.L1, Space.L0A, Space.L0B, Space.L0C), "aiv": (Space.UB,)}
    for k in f.kernels:
        for sec in k.sections:
            # (%nx and %nx_<reg>: the worker's next grid point, pypto.block.schedule)
            regs = {"blk", "nblk", "sub", "nx", *(r for r, _ in k.grid)}
            regs |= {"nx_" + r for r, _ in k.grid}
            _verify_stmts(f, k, sec, sec.pre + sec.body + sec.post, regs, spaces[sec.core])


def _verify_stmts(
    f: TileFunc,
    k: Kernel,
    sec: Section,
    stmts: tuple[Stmt, ...],
    regs: set[str],
    spaces: tuple[Space, ...],
) -> None:
    def expr(e: Expr) -> None:
        for r in e.regs:
            if r not in regs:
                raise _fail(k, f"register %{r} used before it is set")

    def tile(t: TileVar) -> None:
        if t.space not in spaces:
            raise _fail(k, f"{t} is in {t.space}, which the {sec.core} core does not have")
        if t.shape[0] <= 0 or t.shape[1] <= 0:
            raise _fail(k, f"{t} has an empty shape")

    for s in stmts:
        if isinstance(s, For):
            expr(s.start)
            expr(s.stop)
            regs.add(s.reg)
            _verify_stmts(f, k, sec, s.body, regs, spaces)
        elif isinstance(s, SOp):
            for e in s.exprs:
                expr(e)
            for t in s.tiles:
                tile(t)
            regs.add(s.dst)
        elif isinstance(s, TLoad | TStore):
            t = s.dst if isinstance(s, TLoad) else s.src
            tile(t)
            if s.tensor not in {b.name for b in f.buffers}:
                raise _fail(k, f"no GM buffer %{s.tensor}")
            expr(s.row)
            expr(s.col)
            rows, cols = f.buffer(s.tensor).view2d
            if t.shape[0] > rows or t.shape[1] > cols:
                raise _fail(k, f"window {list(t.shape)} larger than %{s.tensor}'s view")
            if f.buffer(s.tensor).dtype is not t.dtype and not (
                isinstance(s, TStore) and t.space is Space.L0C
            ):
                raise _fail(k, f"{t} moves bytes of %{s.tensor} ({f.buffer(s.tensor).dtype})")
            if isinstance(s, TStore) and s.scale is not None and t.space is not Space.L0C:
                raise _fail(k, f"tstore of {t} with a scale: only the fixpipe scales (L0C)")
        else:
            if s.op not in OPCODES:
                raise _fail(k, f"unknown tile op {s.op}")
            tile(s.dst)
            for arg in s.args:
                if isinstance(arg, TileVar):
                    tile(arg)
                elif isinstance(arg, Expr):
                    expr(arg)
