"""The Block IR: per-core-type programs with allocated buffers and explicit synchronisation.

A :class:`BlockKernel` holds, per core type (``aic``/``aiv``), a structured program: PTO
instructions with their tile addresses fixed (double-buffered tiles alternate between two
slots by a parity register), loops kept as :class:`BLoop`, and the ``SET_FLAG``/``WAIT_FLAG``
pairs that order the pipes. Every instruction remembers which tile buffers it reads and writes
(``reads``/``writes``) so synchronisation can be derived and checked. Code generation
(:mod:`pypto.block.codegen`) flattens the loops into ``LOOP``/``ENDLOOP`` and joins the kernels
of a function into one PTO program, separated by GM barriers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pypto.isa.ir import Expr, Instr, TensorDecl

if TYPE_CHECKING:
    from pypto.npu.machine import Machine

__all__ = ["BInstr", "BItem", "BLoop", "BlockFunc", "BlockKernel", "Buf"]


@dataclass(frozen=True, slots=True)
class Buf:
    """An allocated tile buffer: ``slots`` copies of ``nbytes`` at ``addr`` in ``space``;
    the live copy is ``addr + parity*stride`` where ``parity`` names a register."""

    name: str
    space: str
    addr: int
    nbytes: int
    slots: int = 1
    parity: str | None = None
    stride: int = 0

    def __str__(self) -> str:
        slots = f" x{self.slots}" if self.slots > 1 else ""
        if self.slots > 1 and self.parity:
            slots += f" by %{self.parity}"
        return f"{self.space}[{hex(self.addr)}, +{hex(self.nbytes)}{slots}] %{self.name}"


@dataclass(frozen=True, slots=True)
class BInstr:
    """One instruction and the tile buffers (by name) it reads and writes."""

    instr: Instr
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BLoop:
    """``LOOP %reg, start, stop, step`` … ``ENDLOOP``."""

    reg: str
    start: Expr
    stop: Expr
    step: Expr
    body: tuple[BItem, ...]
    parity: str | None = None
    """the register holding this loop's iteration parity (double-buffer slot), if any"""
    loc: str | None = None
    """the user's source location of a hand-written loop (``pto.block.program``)"""


BItem = BInstr | BLoop


def _lines(items: tuple[BItem, ...], depth: int) -> list[str]:
    out: list[str] = []
    pad = "  " * depth
    for it in items:
        if isinstance(it, BLoop):
            out.append(f"{pad}loop %{it.reg} in {it.start}..{it.stop} step {it.step} {{")
            out.extend(_lines(it.body, depth + 1))
            out.append(pad + "}")
        else:
            out.append(pad + str(it.instr))
    return out


@dataclass(frozen=True)
class BlockKernel:
    """One kernel scheduled onto cores: buffers and a program per core type."""

    name: str
    programs: tuple[tuple[str, tuple[BItem, ...]], ...]
    buffers: tuple[tuple[str, tuple[Buf, ...]], ...] = ()
    grid: int = 1
    dist: str = "aiv"

    def program(self, core: str) -> tuple[BItem, ...] | None:
        for c, body in self.programs:
            if c == core:
                return body
        return None

    def __str__(self) -> str:
        who = "clusters" if self.dist == "cluster" else "vector cores"
        lines = [f"block @{self.name} ({self.grid} tiles over the {who}) {{"]
        for core, body in self.programs:
            lines.append(f"  .{core}")
            for c, bufs in self.buffers:
                if c == core:
                    lines.extend(f"    .buf {b}" for b in bufs)
            lines.extend(_lines(body, 2))
        lines.append("}")
        return "\n".join(lines)


@dataclass(frozen=True, eq=False)
class BlockFunc:
    """A function at the Block level: GM tensors and its scheduled kernels, in order."""

    name: str
    tensors: tuple[TensorDecl, ...]
    kernels: tuple[BlockKernel, ...]
    params: tuple[str, ...]
    outputs: tuple[tuple[str, tuple[int, ...]], ...]
    consts: tuple[tuple[str, object], ...] = field(default=())

    def __str__(self) -> str:
        lines = [f"block_func @{self.name} {{"]
        lines.extend(f"  {t}" for t in self.tensors)
        for k in self.kernels:
            lines.extend("  " + ln for ln in str(k).splitlines())
        lines.append("}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        from pypto.core.display import pre

        return pre(str(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}

    def verify(self, machine: Machine | None = None) -> BlockFunc:
        from pypto.block.verify import verify

        verify(self, machine)
        return self
