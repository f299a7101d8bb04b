"""Common-subexpression elimination: one equation per (op, operands, params, hint)."""

from __future__ import annotations

from typing import Any

from pypto.core.passes import ir_pass
from pypto.graph.ir import Atom, Func, Lit, Var
from pypto.graph.passes.util import finish, subst


def _key(a: Atom) -> Any:
    return a.key() if isinstance(a, Lit) else id(a)


@ir_pass("cse")
def cse(f: Func) -> Func:
    seen: dict[Any, Var] = {}
    sub: dict[Var, Atom] = {}
    eqns = []
    for e in f.eqns:
        e = subst(e, sub)
        k = (e.op, tuple(_key(a) for a in e.inputs), e.params, e.hint)
        prev = seen.get(k)
        if prev is not None:
            sub[e.out] = prev
            continue
        seen[k] = e.out
        eqns.append(e)
    return finish(f, eqns, sub)
