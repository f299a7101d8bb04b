"""The PTO virtual ISA: instructions per pipe, per-core-type program templates, text assembly.

A program is text you can read, edit and run: ``parse`` turns text into a verified
:class:`Program`, ``str(program)`` prints it back canonically (print → parse → print is
identical), and :func:`pypto.npu.simulate` runs it.

>>> import pypto.isa as isa
>>> p = isa.parse('''
... .program scale
... .tensor x f16[16,128] in
... .tensor y f16[16,128] out
... .core aiv
...   TLOAD UB[0x0]:f16[16,128], x[0, 0]
...   SET_FLAG MTE2, V, 0
...   WAIT_FLAG MTE2, V, 0
...   TMULS UB[0x1000]:f16[16,128], UB[0x0]:f16[16,128], 2.0
...   SET_FLAG V, MTE3, 0
...   WAIT_FLAG V, MTE3, 0
...   TSTORE y[0, 0], UB[0x1000]:f16[16,128]
... ''')
>>> isa.parse(str(p)) == p
True
>>> [str(isa.pipe_of(i)) for i in p.core("aiv").instructions()][:4]
['MTE2', 'MTE2', 'V', 'V']
"""

from pypto.isa.ir import (
    CORE_KINDS,
    PEERS,
    PIPES_OF,
    ROLES,
    SPACES_OF,
    SPECIAL_REGS,
    AsmSyntaxError,
    Cond,
    CoreProgram,
    Expr,
    GmRef,
    Instr,
    IsaError,
    Item,
    Label,
    Operand,
    Pipe,
    Program,
    Reg,
    Space,
    TensorDecl,
    Tile,
)
from pypto.isa.opcodes import OPCODES, OpSpec, pipe_of
from pypto.isa.parser import load, parse, parse_instr
from pypto.isa.printer import format_instr, format_program
from pypto.isa.verify import verify

__all__ = [
    "CORE_KINDS",
    "OPCODES",
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
    "OpSpec",
    "Operand",
    "Pipe",
    "Program",
    "Reg",
    "Space",
    "TensorDecl",
    "Tile",
    "format_instr",
    "format_program",
    "load",
    "parse",
    "parse_instr",
    "pipe_of",
    "verify",
]
