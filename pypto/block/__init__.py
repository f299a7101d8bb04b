"""The Block level: tile kernels scheduled onto cores, buffers allocated, pipes synchronised,
and code generation to the PTO ISA."""

from pypto.block.codegen import codegen
from pypto.block.ir import BInstr, BlockFunc, BlockKernel, BLoop, Buf
from pypto.block.schedule import schedule

__all__ = ["BInstr", "BLoop", "BlockFunc", "BlockKernel", "Buf", "codegen", "schedule"]
