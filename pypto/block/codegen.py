"""Block IR → PTO ISA: one program per function, its kernels separated by GM barriers.

Each core type's template is the concatenation of its kernels' programs; a kernel that has no
part for a core type leaves that core waiting at the barrier. Loops stay loops (``LOOP`` …
``ENDLOOP``), so the program's size depends on the graph, not on the tensor sizes.
"""

from __future__ import annotations

from pypto.block.ir import BInstr, BItem, BlockFunc, BLoop
from pypto.isa.ir import CoreProgram, Instr, Item, Program, Reg

__all__ = ["codegen"]


def _flatten(items: tuple[BItem, ...] | list[BItem], out: list[Item]) -> None:
    for it in items:
        if isinstance(it, BLoop):
            out.append(Instr("LOOP", (Reg(it.reg), it.start, it.stop, it.step)))
            _flatten(it.body, out)
            out.append(Instr("ENDLOOP", ()))
        else:
            assert isinstance(it, BInstr)
            out.append(it.instr)


def codegen(bf: BlockFunc) -> Program:
    """The PTO program of a Block IR function."""
    kinds = [c for c in ("aic", "aiv") if any(k.program(c) is not None for k in bf.kernels)]
    # a function of views and constants only still runs (an empty vector program)
    kinds = kinds or ["aiv"]
    cores = []
    for c in kinds:
        body: list[Item] = []
        for i, k in enumerate(bf.kernels):
            if i:
                body.append(Instr("BARRIER", ()))
            prog = k.program(c)
            if prog is not None:
                _flatten(prog, body)
        cores.append(CoreProgram(c, tuple(body)))
    return Program(bf.name, bf.tensors, tuple(cores))
