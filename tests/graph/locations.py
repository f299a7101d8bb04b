"""The source lines printed IR shows: the ``# file:line`` comment of each equation."""

from __future__ import annotations

import re
import sys

from pypto.graph.ir import Func


def line() -> int:
    """The caller's line number (where a test expects an error or an equation to point)."""
    return sys._getframe(1).f_lineno


def printed_lines(func: Func, file: str) -> list[tuple[str, int]]:
    """(op, line) of every equation of ``func``'s printed text; each must be placed in ``file``."""
    out = []
    for text in str(func).splitlines():
        text = text.strip()
        if not text.startswith("%") or " = const " in text:
            continue
        m = re.fullmatch(r"%\w+: \S+ = (\w+) .*# (\S+):(\d+)", text)
        assert m is not None and m[2] == file, text
        out.append((m[1], int(m[3])))
    return out
