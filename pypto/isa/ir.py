"""The data model of the PTO virtual ISA: pipes, memory spaces, operands, instructions, programs.

A :class:`Program` declares its GM tensors and holds one :class:`CoreProgram` template per core
type (``aic`` = cube core, ``aiv`` = vector core). Every core of that type runs the same template,
parameterised by the read-only registers ``%blk`` (cluster index of the launch), ``%nblk``
(clusters in the launch) and ``%sub`` (0 or 1: which vector core of the cluster; 0 on the cube
core). Templates keep their loops, so code size does not grow with the tensor sizes.

All nodes are immutable; ``str(node)`` is the canonical text (see :mod:`pypto.isa.printer`).

>>> from pypto.isa import Expr
>>> str(Expr.reg("m") * 128 + Expr.reg("k") + 16)
'%m*128+%k+16'
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pypto import dtypes as dt
from pypto.core.errors import PyptoError

if TYPE_CHECKING:
    from pypto.npu.machine import Machine

__all__ = [
    "CORE_KINDS",
    "PEERS",
    "PIPES_OF",
    "ROLES",
    "SPACES_OF",
    "SPECIAL_REGS",
    "AsmSyntaxError",
    "Cond",
    "CoreProgram",
    "Expr",
    "GmRef",
    "Instr",
    "IsaError",
    "Item",
    "Label",
    "Operand",
    "Pipe",
    "Program",
    "Reg",
    "Space",
    "TensorDecl",
    "Tile",
]


class IsaError(PyptoError, ValueError):
    """An ISA program that breaks a rule of the instruction set (found by ``verify``)."""


class AsmSyntaxError(IsaError):
    """Text assembly that does not parse; ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, *, line: int, column: int, text: str = "") -> None:
        self.line = line
        self.column = column
        caret = f"\n    {text}\n    {' ' * (column - 1)}^" if text else ""
        super().__init__(f"line {line}, column {column}: {message}{caret}")


class Pipe(enum.StrEnum):
    """The instruction queues of a core; instructions on one pipe run in order."""

    S = "S"
    """scalar unit: the front end that runs the program and issues to the other pipes"""
    MTE1 = "MTE1"
    """L1 → L0A/L0B"""
    MTE2 = "MTE2"
    """GM → L1/L0A/L0B/UB"""
    MTE3 = "MTE3"
    """UB → GM (and UB → L1 of the cluster's cube core, where the machine has that path)"""
    M = "M"
    """cube unit"""
    V = "V"
    """vector unit"""
    FIX = "FIX"
    """fixpipe: L0C → GM/L1/UB, with cast"""


class Space(enum.StrEnum):
    """Memory spaces: GM (shared) and the on-chip buffers of the cube and vector cores."""

    GM = "GM"
    L1 = "L1"
    L0A = "L0A"
    L0B = "L0B"
    L0C = "L0C"
    UB = "UB"


class Cond(enum.StrEnum):
    """Comparison conditions of TCMP/TCMPS."""

    EQ = "EQ"
    NE = "NE"
    LT = "LT"
    LE = "LE"
    GT = "GT"
    GE = "GE"


CORE_KINDS: tuple[str, ...] = ("aic", "aiv")
PIPES_OF: dict[str, tuple[Pipe, ...]] = {
    "aic": (Pipe.S, Pipe.MTE2, Pipe.MTE1, Pipe.M, Pipe.FIX),
    "aiv": (Pipe.S, Pipe.MTE2, Pipe.V, Pipe.MTE3),
}
SPACES_OF: dict[str, tuple[Space, ...]] = {
    "aic": (Space.L1, Space.L0A, Space.L0B, Space.L0C),
    "aiv": (Space.UB,),
}
PEERS: tuple[str, ...] = ("aic", "aiv0", "aiv1")
"""The cores of a cluster, as named by cross-core flags and cross-core moves."""
ROLES: tuple[str, ...] = ("in", "out", "inout", "tmp")
"""Roles of GM tensors: inputs, outputs, both, and workspaces (``tmp``)."""
SPECIAL_REGS: tuple[str, ...] = ("blk", "nblk", "sub")
"""Read-only registers: cluster index, clusters in the launch, vector core within the cluster."""


@dataclass(frozen=True, slots=True)
class Reg:
    """A scalar register named ``%name`` (64-bit integer)."""

    name: str

    def __str__(self) -> str:
        return "%" + self.name


@dataclass(frozen=True, slots=True)
class Expr:
    """An affine integer expression over registers: ``Σ coef·%reg + const``, in canonical form.

    >>> str(Expr.reg("i") * 16 - 4)
    '%i*16-4'
    >>> (Expr.reg("i") + Expr.reg("i")).terms
    (('i', 2),)
    """

    terms: tuple[tuple[str, int], ...] = ()
    const: int = 0

    @staticmethod
    def make(terms: list[tuple[str, int]] | tuple[tuple[str, int], ...], const: int = 0) -> Expr:
        """The canonical expression: registers merged in first-appearance order, zeros dropped."""
        acc: dict[str, int] = {}
        for r, c in terms:
            acc[r] = acc.get(r, 0) + c
        return Expr(tuple((r, c) for r, c in acc.items() if c != 0), const)

    @staticmethod
    def of(x: int | str | Reg | Expr) -> Expr:
        """An int, a register name (``"%i"`` or ``"i"``), a :class:`Reg` or an :class:`Expr`."""
        if isinstance(x, Expr):
            return x
        if isinstance(x, Reg):
            return Expr(((x.name, 1),))
        if isinstance(x, str):
            return Expr(((x.lstrip("%"), 1),))
        if isinstance(x, bool) or not isinstance(x, int):
            raise IsaError(f"{x!r} is not an integer expression")
        return Expr((), x)

    @staticmethod
    def reg(name: str) -> Expr:
        return Expr(((name.lstrip("%"), 1),))

    @property
    def is_const(self) -> bool:
        return not self.terms

    @property
    def regs(self) -> tuple[str, ...]:
        return tuple(r for r, _ in self.terms)

    def eval(self, regs: dict[str, int]) -> int:
        return self.const + sum(c * regs[r] for r, c in self.terms)

    def __add__(self, other: int | str | Reg | Expr) -> Expr:
        o = Expr.of(other)
        return Expr.make(self.terms + o.terms, self.const + o.const)

    __radd__ = __add__

    def __sub__(self, other: int | str | Reg | Expr) -> Expr:
        return self + Expr.of(other) * -1

    def __mul__(self, k: int) -> Expr:
        if isinstance(k, bool) or not isinstance(k, int):
            raise IsaError("an affine expression can only be scaled by an integer constant")
        return Expr.make([(r, c * k) for r, c in self.terms], self.const * k)

    __rmul__ = __mul__

    def format(self, hexa: bool = False) -> str:
        """The canonical text; ``hexa`` prints the numbers in hexadecimal (tile addresses)."""

        def num(v: int) -> str:
            return (("-" if v < 0 else "") + hex(abs(v))) if hexa else str(v)

        parts: list[str] = []
        for r, c in self.terms:
            sign = "-" if c < 0 else "+"
            body = f"%{r}" if abs(c) == 1 else f"%{r}*{num(abs(c))}"
            parts.append(body if not parts and c > 0 else sign + body)
        if self.const or not parts:
            if not parts:
                parts.append(num(self.const))
            else:
                parts.append(("-" if self.const < 0 else "+") + num(abs(self.const)))
        return "".join(parts)

    def __str__(self) -> str:
        return self.format()


@dataclass(frozen=True, slots=True)
class Tile:
    """An on-chip tile: ``space[addr]:dtype[rows,cols]``, stored row-major and dense at ``addr``.

    ``peer`` names another core of the cluster (``"aic"``, ``"aiv0"``, ``"aiv1"``) whose buffer a
    cross-core move writes (only on machines with ``direct_cube_vector``).
    """

    space: Space
    addr: Expr
    dtype: dt.DType
    shape: tuple[int, int]
    peer: str | None = None

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[1]

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __str__(self) -> str:
        peer = f"@{self.peer}" if self.peer else ""
        r, c = self.shape
        return f"{self.space}{peer}[{self.addr.format(hexa=True)}]:{self.dtype.short}[{r},{c}]"


@dataclass(frozen=True, slots=True)
class GmRef:
    """A window of a GM tensor, ``name[row, col]``: its top-left element in the tensor's 2-D view
    (all leading dimensions flattened into rows); the window's shape is the other tile's."""

    tensor: str
    row: Expr
    col: Expr

    def __str__(self) -> str:
        return f"{self.tensor}[{self.row}, {self.col}]"


Operand = Tile | GmRef | Expr | Reg | float | int | Pipe | Cond | str
"""What an instruction argument can be; the opcode's signature says which (see ``opcodes``)."""


@dataclass(frozen=True, slots=True)
class Instr:
    """One instruction: opcode, arguments (kinds fixed by the opcode's signature) and the user's
    source location (``"file.py:12"``), if the code generator knew it."""

    op: str
    args: tuple[Operand, ...] = ()
    loc: str | None = None

    def __str__(self) -> str:
        from pypto.isa.printer import format_instr

        return format_instr(self)


@dataclass(frozen=True, slots=True)
class Label:
    """A branch target."""

    name: str

    def __str__(self) -> str:
        return f"{self.name}:"


Item = Instr | Label


@dataclass(frozen=True, slots=True)
class TensorDecl:
    """A GM tensor of the program: ``role`` is ``in``, ``out``, ``inout`` or ``tmp`` (workspace)."""

    name: str
    dtype: dt.DType
    shape: tuple[int, ...]
    role: str = "in"

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def view2d(self) -> tuple[int, int]:
        """(rows, cols) of the 2-D view that GM windows index."""
        if not self.shape:
            return (1, 1)
        return (self.size // self.shape[-1] if self.shape[-1] else 0, self.shape[-1])

    def __str__(self) -> str:
        return (
            f".tensor {self.name} {self.dtype.short}[{','.join(map(str, self.shape))}] {self.role}"
        )


@dataclass(frozen=True, slots=True)
class CoreProgram:
    """The template every core of one kind (``aic`` or ``aiv``) runs."""

    kind: str
    body: tuple[Item, ...]

    def instructions(self) -> tuple[Instr, ...]:
        return tuple(x for x in self.body if isinstance(x, Instr))


@dataclass(frozen=True)
class Program:
    """A PTO program: GM tensors and one template per core type.

    ``blocks`` is the number of clusters the launch uses; ``None`` means every cluster of the
    machine it runs on.

    >>> from pypto.isa import parse
    >>> p = parse('''
    ... .program copy
    ... .tensor x f32[8,64] in
    ... .tensor y f32[8,64] out
    ... .core aiv
    ...   TLOAD UB[0x0]:f32[8,64], x[0, 0]
    ...   SET_FLAG MTE2, MTE3, 0
    ...   WAIT_FLAG MTE2, MTE3, 0
    ...   TSTORE y[0, 0], UB[0x0]:f32[8,64]
    ... ''')
    >>> p.core("aiv").instructions()[0].op
    'TLOAD'
    >>> p.static_size()
    4
    """

    name: str
    tensors: tuple[TensorDecl, ...]
    cores: tuple[CoreProgram, ...]
    blocks: int | None = None
    _by_name: dict[str, TensorDecl] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self._by_name.update({t.name: t for t in self.tensors})

    def tensor(self, name: str) -> TensorDecl:
        t = self._by_name.get(name)
        if t is None:
            raise IsaError(
                f"program {self.name!r} has no tensor {name!r}",
                hint="tensors: " + ", ".join(x.name for x in self.tensors),
            )
        return t

    def core(self, kind: str) -> CoreProgram:
        for c in self.cores:
            if c.kind == kind:
                return c
        raise IsaError(f"program {self.name!r} has no {kind} template")

    def has_core(self, kind: str) -> bool:
        return any(c.kind == kind for c in self.cores)

    def static_size(self) -> int:
        """Instructions in the program text (independent of tensor sizes)."""
        return sum(len(c.instructions()) for c in self.cores)

    def verify(self, machine: Machine | None = None) -> Program:
        """Check every rule of the ISA (and, given a machine, that static tiles fit its buffers);
        raise :class:`IsaError` naming the core, instruction index and rule. Returns ``self``."""
        from pypto.isa.verify import verify

        verify(self, machine)
        return self

    def __str__(self) -> str:
        from pypto.isa.printer import format_program

        return format_program(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from pypto.core.display import pre

        text = str(self)
        return {"text/plain": text, "text/html": pre(text)}
