"""The ISA listing as HTML: one table row per instruction, coloured by its pipe, indented by
loop depth, with its index in the core template (the ``instr_index`` of trace events) and the
user's source line where the code generator recorded one.
"""

from __future__ import annotations

import html
from typing import Any

from pypto.isa.ir import Instr, Label, Program
from pypto.isa.opcodes import pipe_of
from pypto.viz.style import PIPE_COLOURS, PIPE_ORDER, HtmlView

__all__ = ["isa"]

_CSS = """
.pto-isa { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px;
  border-collapse: collapse; }
.pto-isa td { padding: 1px 8px; white-space: pre; text-align: left; }
.pto-isa tr.pto-core td { font-weight: bold; padding-top: 8px; }
.pto-isa tr.pto-label td { color: #555; }
.pto-isa td.pto-index, .pto-isa td.pto-loc { color: #666; }
.pto-isa span.pto-swatch { padding: 0 6px; margin-right: 4px; }
""" + "".join(
    f".pto-isa tr.pto-pipe-{p} td.pto-pipe, .pto-isa span.pto-pipe-{p} "
    f"{{ background: {c}; color: white; }}\n"
    f".pto-isa tr.pto-pipe-{p} td.pto-text {{ border-left: 4px solid {c}; }}\n"
    for p, c in PIPE_COLOURS.items()
)


def _program(obj: Any) -> Program:
    if isinstance(obj, Program):
        return obj
    if isinstance(obj, str):
        from pypto.isa import parse

        return parse(obj)
    prog = getattr(obj, "isa", None)
    if isinstance(prog, Program):
        return prog
    raise TypeError(
        f"isa() lists a Program, its text or a Lowered (with .isa), not {type(obj).__name__}"
    )


def _text(ins: Instr) -> str:
    """The instruction without its loc(...) suffix (the location has its own column)."""
    return str(Instr(ins.op, ins.args)) if ins.loc else str(ins)


def isa(program_or_lowered: Program | str | Any) -> HtmlView:
    """List a PTO program as HTML (``.html``; ``.text`` is its text assembly).

    >>> v = isa('''
    ... .program copy
    ... .tensor x f32[8,64] in
    ... .tensor y f32[8,64] out
    ... .core aiv
    ...   TLOAD UB[0x0]:f32[8,64], x[0, 0]  loc("model.py:3")
    ...   SET_FLAG MTE2, MTE3, 0
    ...   WAIT_FLAG MTE2, MTE3, 0
    ...   TSTORE y[0, 0], UB[0x0]:f32[8,64]
    ... ''')
    >>> v.html.count("<tr class='pto-instr pto-pipe-MTE2'>"), "model.py:3" in v.html
    (2, True)
    """
    prog = _program(program_or_lowered)
    rows: list[str] = []
    for core in prog.cores:
        rows.append(f"<tr class='pto-core'><td colspan='4'>.core {core.kind}</td></tr>")
        depth, index = 0, 0
        for item in core.body:
            if isinstance(item, Label):
                rows.append(
                    f"<tr class='pto-label'><td></td><td></td>"
                    f"<td class='pto-text'>{html.escape(str(item))}</td><td></td></tr>"
                )
                continue
            if item.op == "ENDLOOP":
                depth -= 1
            pipe = pipe_of(item).value
            loc = html.escape(item.loc) if item.loc else ""
            rows.append(
                f"<tr class='pto-instr pto-pipe-{pipe}'>"
                f"<td class='pto-index'>{index}</td><td class='pto-pipe'>{pipe}</td>"
                f"<td class='pto-text'>{'  ' * depth}{html.escape(_text(item))}</td>"
                f"<td class='pto-loc' title='source line'>{loc}</td></tr>"
            )
            if item.op == "LOOP":
                depth += 1
            index += 1
    tensors = "<br>".join(html.escape(str(t)) for t in prog.tensors)
    legend = " ".join(f"<span class='pto-swatch pto-pipe-{p}'>{p}</span>" for p in PIPE_ORDER)
    body = (
        f"<div class='pto-isa'><style>{_CSS}</style>"
        f"<div><b>.program {html.escape(prog.name)}</b> &nbsp; {legend}</div>"
        f"<div style='color:#555'>{tensors}</div>"
        f"<table class='pto-isa'>{''.join(rows)}</table></div>"
    )
    return HtmlView(body, str(prog))
