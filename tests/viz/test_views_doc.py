"""docs/views.md: its examples run, and what it says about the many-core timeline holds."""

from __future__ import annotations

import re
from pathlib import Path

import pypto as pto

from .conftest import run_program

DOC = Path(__file__).parent.parent.parent / "docs" / "views.md"


def test_the_examples_run() -> None:
    ns: dict[str, object] = {}
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 11
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), ns)


def test_the_many_core_title_it_quotes() -> None:
    prof = run_program("matmul_relu", "ascend910b", numerics=False)
    title = pto.viz.timeline(prof).axes[0].get_title()
    quoted = re.search(r'"(showing [^"]*)"', " ".join(DOC.read_text().split())).group(1)
    assert quoted in title
