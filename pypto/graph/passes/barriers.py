"""Barrier removal: every ``optimization_barrier`` becomes its operand.

A barrier is there for CSE: ``pto.checkpoint`` recomputes part of the forward pass inside the
backward one from barrier'd inputs, and without the barrier CSE would merge that recomputation
with the forward values, undoing it. Once CSE has run for good (this pass comes after it, just
before fusion) the barrier has done its job; kept, it would only cost a copy below.
"""

from __future__ import annotations

from pypto.core.passes import ir_pass
from pypto.graph.ir import Atom, Func, Var
from pypto.graph.passes.util import finish, subst


@ir_pass("drop_barriers")
def drop_barriers(f: Func) -> Func:
    if not any(e.op == "optimization_barrier" for e in f.eqns):
        return f
    sub: dict[Var, Atom] = {}
    eqns = []
    for e in f.eqns:
        e = subst(e, sub)
        if e.op == "optimization_barrier":
            sub[e.out] = e.inputs[0]
        else:
            eqns.append(e)
    return finish(f, eqns, sub)
