"""Helpers shared by the tensor passes: substitution of atoms and group clean-up."""

from __future__ import annotations

from dataclasses import replace

from pypto.graph.ir import Atom, Eqn, Func, Var


def subst(e: Eqn, sub: dict[Var, Atom]) -> Eqn:
    if not sub or not any(isinstance(a, Var) and a in sub for a in e.inputs):
        return e
    return replace(e, inputs=tuple(sub.get(a, a) if isinstance(a, Var) else a for a in e.inputs))


def finish(f: Func, eqns: list[Eqn], sub: dict[Var, Atom]) -> Func:
    """The function with ``eqns``, outputs substituted, and groups that still have members."""
    outs = tuple(sub.get(o, o) if isinstance(o, Var) else o for o in f.outputs)
    used = {e.group for e in eqns}
    groups = tuple(g for g in f.groups if g[0] in used)
    return f.replace(eqns=tuple(eqns), outputs=outs, groups=groups)
