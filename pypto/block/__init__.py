"""The Block level: tile kernels scheduled onto cores, buffers allocated, pipes synchronised,
and code generation to the PTO ISA; :func:`program` writes Block programs by hand."""

from pypto.block.codegen import codegen
from pypto.block.ir import BInstr, BlockFunc, BlockKernel, BLoop, Buf
from pypto.block.program import (
    BlockProgram,
    Builder,
    In,
    InOut,
    Out,
    ProgramError,
    program,
)
from pypto.block.schedule import schedule

__all__ = [
    "BInstr",
    "BLoop",
    "BlockFunc",
    "BlockKernel",
    "BlockProgram",
    "Buf",
    "Builder",
    "In",
    "InOut",
    "Out",
    "ProgramError",
    "codegen",
    "program",
    "schedule",
]
