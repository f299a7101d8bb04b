"""``pto.debug.print`` calls moved out of a staged program: ``jit`` takes the ``debug_print``
equations out before the tensor passes, so the passes and the lower levels see an ordinary
program whose last outputs are the printed values, and prints them once it has run
(:mod:`pypto.ops.debug_print`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pypto.graph.ir import Func, Lit
from pypto.ops.debug_print import format_values

__all__ = ["PrintPlan", "extract"]


@dataclass(frozen=True)
class PrintPlan:
    """A print moved out of a program: its format, keyword names, and its values: a constant,
    or None for the next of the program's extra outputs (at the end of its own, in order)."""

    fmt: str
    keys: tuple[str, ...]
    values: tuple[Any, ...]
    id: int = 0

    @property
    def count(self) -> int:
        """How many of the program's outputs this print takes."""
        return sum(v is None for v in self.values)

    def filled(self, outs: list[Any]) -> list[Any]:
        """The print's values, its outputs ``outs`` in the places of the Nones."""
        it = iter(outs)
        return [next(it) if v is None else v for v in self.values]

    def text(self, outs: list[Any]) -> str:
        return format_values(self.fmt, self.keys, self.filled(outs))


def extract(f: Func) -> tuple[Func, tuple[PrintPlan, ...]]:
    """``f`` without its ``debug_print`` equations, whose inputs are appended to its outputs
    in program order, and the plan that prints them from those outputs."""
    plans: list[PrintPlan] = []
    extra: list[Any] = []
    keep = []
    for e in f.eqns:
        if e.op != "debug_print":
            keep.append(e)
            continue
        kw = e.kwargs
        # (a constant stays in the plan: a program's outputs are computed values)
        vals = tuple(np.asarray(a.value) if isinstance(a, Lit) else None for a in e.inputs)
        plans.append(PrintPlan(kw["fmt"], tuple(kw.get("keys", ())), vals, kw.get("id", 0)))
        extra += [a for a in e.inputs if not isinstance(a, Lit)]
    if not plans:
        return f, ()
    return f.replace(eqns=tuple(keep), outputs=(*f.outputs, *extra)), tuple(plans)
