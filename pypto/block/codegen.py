"""Block IR → PTO ISA: one program per function, its kernels in order.

Each core type's template is the concatenation of its kernels' programs. Between two kernels
goes a GM ``BARRIER`` (every core of the launch drains and meets) when the second one touches a
GM tensor that a kernel since the last barrier wrote (or writes one that it read); otherwise a
core-local ``PIPE_BARRIER`` is enough — its buffers are free again — and independent kernels
overlap across cores. Loops stay loops (``LOOP`` … ``ENDLOOP``), so the program's size depends
on the graph, not on the tensor sizes.
"""

from __future__ import annotations

from pypto.block.ir import BInstr, BItem, BlockFunc, BLoop
from pypto.isa.ir import CoreProgram, GmRef, Instr, Item, Program, Reg
from pypto.isa.opcodes import GM_STORES

__all__ = ["codegen"]


def _flatten(items: tuple[BItem, ...] | list[BItem], out: list[Item]) -> None:
    for it in items:
        if isinstance(it, BLoop):
            out.append(Instr("LOOP", (Reg(it.reg), it.start, it.stop, it.step), it.loc))
            _flatten(it.body, out)
            out.append(Instr("ENDLOOP", (), it.loc))
        else:
            assert isinstance(it, BInstr)
            out.append(it.instr)


def _gm_sets(items: tuple[BItem, ...], reads: set[str], writes: set[str]) -> None:
    for it in items:
        if isinstance(it, BLoop):
            _gm_sets(it.body, reads, writes)
        elif it.instr.op == "TLOAD":
            g = it.instr.args[1]
            assert isinstance(g, GmRef)
            reads.add(g.tensor)
        elif it.instr.op in GM_STORES:
            g = it.instr.args[0]
            assert isinstance(g, GmRef)
            writes.add(g.tensor)


def separators(bf: BlockFunc) -> list[str]:
    """What goes before each kernel after the first: ``BARRIER`` or ``PIPE_BARRIER``."""
    out: list[str] = []
    seen_r: set[str] = set()
    seen_w: set[str] = set()
    for i, k in enumerate(bf.kernels):
        r: set[str] = set()
        w: set[str] = set()
        for _, prog in k.programs:
            _gm_sets(prog, r, w)
        if i:
            if r & seen_w or w & (seen_r | seen_w):
                out.append("BARRIER")
                seen_r, seen_w = set(), set()
            else:
                out.append("PIPE_BARRIER")
        seen_r |= r
        seen_w |= w
    return out


def codegen(bf: BlockFunc) -> Program:
    """The PTO program of a Block IR function."""
    kinds = [c for c in ("aic", "aiv") if any(k.program(c) is not None for k in bf.kernels)]
    # a function of views and constants only still runs (an empty vector program)
    kinds = kinds or ["aiv"]
    seps = separators(bf)
    cores = []
    for c in kinds:
        body: list[Item] = []
        for i, k in enumerate(bf.kernels):
            if i:
                body.append(Instr(seps[i - 1], ()))
            prog = k.program(c)
            if prog is not None:
                _flatten(prog, body)
        cores.append(CoreProgram(c, tuple(body)))
    return Program(bf.name, bf.tensors, tuple(cores))
