"""Canonical text of the Tensor IR (DESIGN §3); :mod:`pypto.graph.parser` reads it back."""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.graph.ir import Atom, Func, Lit, Var, literal_text

INLINE_CONST_LIMIT = 16  # constants with more elements are printed by reference (@name)


def param_text(v: Any) -> str:
    if isinstance(v, dt.DType):
        return v.short
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        inner = ", ".join(param_text(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if v is None:
        return "none"
    return repr(v)


def const_text(a: np.ndarray) -> str:
    text = (
        np.array2string(
            a.astype(np.float32) if a.dtype.kind == "V" or a.dtype == np.float16 else a,
            separator=", ",
            threshold=10**9,
            max_line_width=10**9,
            floatmode="unique",
        )
        .replace("True", "true")
        .replace("False", "false")
    )
    # one line without numpy's column padding (it puts each row of a 2-D array on a line of
    # its own, whatever the width)
    return re.sub(r" +([,\]])", r"\1", re.sub(r"\[ +", "[", re.sub(r"\s+", " ", text)))


class Namer:
    """Assigns ``%name`` to vars in order of definition: parameter hints, then numbers."""

    def __init__(self) -> None:
        self.names: dict[Var, str] = {}
        self.used: set[str] = set()
        self.count: dict[str, int] = {}

    def define(self, v: Var, prefix: str = "") -> str:
        if v.hint and v.hint not in self.used and not v.hint[0].isdigit():
            name = v.hint
        else:
            while True:
                k = self.count.get(prefix, 0)
                self.count[prefix] = k + 1
                name = f"{prefix}{k}"
                if name not in self.used:
                    break
        self.used.add(name)
        self.names[v] = name
        return name

    def atom(self, a: Atom) -> str:
        if isinstance(a, Lit):
            return f"{literal_text(a.value)}:{a.aval.dtype.short}"
        return "%" + self.names[a]


def print_func(f: Func, consts_out: dict[str, np.ndarray] | None = None) -> str:
    """The canonical text. Large constants go to ``consts_out`` by name when it is given."""
    n = Namer()
    args = ", ".join(f"%{n.define(p)}: {p.aval}" for p in f.params)
    rets = ", ".join(str(o.aval) for o in f.outputs)
    lines = [f"func @{f.name}({args}) -> ({rets}) {{"]
    for v, arr in f.consts:
        name = n.define(v, "c")
        if arr.size <= INLINE_CONST_LIMIT:
            body = const_text(arr)
        else:
            body = f"@{name}"
            if consts_out is not None:
                consts_out[name] = arr
        lines.append(f"  %{name}: {v.aval} = const {body}")
    groups = dict(f.groups)
    current: str | None = None
    for e in f.eqns:
        if e.group != current:
            if current is not None:
                lines.append("  }")
            if e.group is not None:
                lines.append(f"  group @{e.group} {groups[e.group]} {{")
            current = e.group
        ind = "    " if current is not None else "  "
        ins = ", ".join(n.atom(a) for a in e.inputs)
        ps = " ".join(f"{k}={param_text(v)}" for k, v in e.params)
        out = n.define(e.out)
        text = f"{ind}%{out}: {e.out.aval} = {e.op} {ins}" + (f" [{ps}]" if ps else "")
        if e.hint:
            text += " hint(" + ", ".join(f"{k}={param_text(v)}" for k, v in e.hint) + ")"
        if e.loc is not None:
            text = f"{text:<60} # {os.path.basename(e.loc.file)}:{e.loc.line}"
        lines.append(text.rstrip())
    if current is not None:
        lines.append("  }")
    lines.append("  return " + ", ".join(n.atom(o) for o in f.outputs))
    lines.append("}")
    return "\n".join(lines)
