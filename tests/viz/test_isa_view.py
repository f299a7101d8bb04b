"""The ISA listing: one row per instruction, in program order, with its pipe's class and colour,
its index in the core template and its source line."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import pypto as pto
from pypto.isa import load
from pypto.isa.opcodes import pipe_of
from pypto.viz.style import PIPE_COLOURS

PROGRAMS = Path(__file__).parent.parent / "npu" / "programs"
ROW = re.compile(
    r"<tr class='pto-instr pto-pipe-(\w+)'><td class='pto-index'>(\d+)</td>"
    r"<td class='pto-pipe'>\w+</td><td class='pto-text'>( *)([^<]*)</td>"
    r"<td class='pto-loc'[^>]*>([^<]*)</td></tr>"
)


def test_one_row_per_instruction_with_its_pipe() -> None:
    prog = load(PROGRAMS / "matmul_relu.pto")
    html = pto.viz.isa(prog).html
    rows = ROW.findall(html)
    instrs = [(c.kind, i, ins) for c in prog.cores for i, ins in enumerate(c.instructions())]
    assert len(rows) == len(instrs) == prog.static_size()
    assert html.count("<tr class='pto-instr") == len(rows)
    for (pipe, index, _, text, _), (_, i, ins) in zip(rows, instrs):
        assert pipe == pipe_of(ins).value and int(index) == i
        assert text.replace("&#x27;", "'") == str(ins)
    assert {p for p, *_ in rows} == {"S", "MTE2", "M", "FIX", "V", "MTE3"}
    for pipe, colour in PIPE_COLOURS.items():
        assert f"tr.pto-pipe-{pipe} td.pto-pipe" in html and colour in html
    assert html.count("<tr class='pto-core'>") == 2


def test_loops_indent_and_source_lines_show() -> None:
    f = pto.jit(lambda x: pto.softmax(x), machine="tiny")
    low = f.lower(np.ones((32, 256), np.float32))
    rows = ROW.findall(pto.viz.isa(low).html)
    depth = [(text.split()[0], len(pad) // 2) for _, _, pad, text, _ in rows]
    assert ("LOOP", 0) in depth and ("TEXP", 1) in depth
    assert ("ENDLOOP", 0) in depth
    locs = {text.split()[0]: loc for _, _, _, text, loc in rows}
    assert locs["TEXP"] == next(i.loc for i in low.isa.core("aiv").instructions() if i.op == "TEXP")
    assert locs["TEXP"].startswith("test_isa_view.py:")
    assert all("loc(" not in text for *_, text, _ in rows)  # the location has its own column


def test_takes_program_text_and_refuses_the_rest() -> None:
    text = (PROGRAMS / "vadd_db.pto").read_text()
    view = pto.viz.isa(text)
    assert view._repr_html_() == view.html and repr(view).startswith(".program vadd_db")
    with pytest.raises(TypeError, match="Program"):
        pto.viz.isa(42)
