"""The canonical text assembly of a program (``parse(format_program(p))`` prints identically).

Layout::

    .program NAME
    .blocks N                          (optional: clusters in the launch)
    .tensor NAME DTYPE[SHAPE] ROLE     (one per GM tensor)

    .core aic|aiv
      OPCODE operand, operand, ...  loc("file.py:12")
    label:
      LOOP %i, 0, 8, 1
        ...                            (loop bodies indented two more spaces)
      ENDLOOP

Tile addresses print in hexadecimal, every other number in decimal. ``#`` starts a comment.
"""

from __future__ import annotations

from pypto.isa.ir import Instr, Label, Program, Tile
from pypto.isa.opcodes import OPCODES

__all__ = ["format_float", "format_instr", "format_program"]


def format_float(x: float) -> str:
    """Shortest text that parses back to the same float."""
    return repr(float(x))


def _arg(kind: str, a: object) -> str:
    if kind == "F":
        assert isinstance(a, float | int)
        return format_float(a)
    if kind == "T":
        assert isinstance(a, Tile)
    return str(a)


def format_instr(ins: Instr) -> str:
    """One instruction without indentation.

    >>> from pypto.isa import parse_instr
    >>> format_instr(parse_instr("TADDS   UB[64]:f32[2,8],UB[0]:f32[2,8], 1"))
    'TADDS UB[0x40]:f32[2,8], UB[0x0]:f32[2,8], 1.0'
    """
    spec = OPCODES.get(ins.op)
    # A malformed instruction (built by hand, caught by the verifier) still prints.
    sig = spec.sig if spec is not None and len(spec.sig) == len(ins.args) else "?" * len(ins.args)
    body = ins.op
    if ins.args:
        body += " " + ", ".join(_arg(k, a) for k, a in zip(sig, ins.args, strict=True))
    if ins.loc is not None:
        body += f'  loc("{ins.loc}")'
    return body


def format_program(p: Program) -> str:
    """The whole program as canonical text, ending with a newline."""
    lines = [f".program {p.name}"]
    if p.blocks is not None:
        lines.append(f".blocks {p.blocks}")
    lines.extend(str(t) for t in p.tensors)
    for core in p.cores:
        lines.append("")
        lines.append(f".core {core.kind}")
        depth = 0
        for item in core.body:
            if isinstance(item, Label):
                lines.append("  " * depth + str(item))
                continue
            if item.op == "ENDLOOP":
                depth -= 1
            lines.append("  " * (depth + 1) + format_instr(item))
            if item.op == "LOOP":
                depth += 1
    return "\n".join(lines) + "\n"
