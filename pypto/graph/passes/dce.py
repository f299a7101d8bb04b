"""Dead-code elimination: drop equations (and constants) no output depends on."""

from __future__ import annotations

from pypto.core.passes import ir_pass
from pypto.graph.ir import Func, Var
from pypto.graph.passes.util import finish
from pypto.ops.table import OPS


@ir_pass("dce")
def dce(f: Func) -> Func:
    live: set[Var] = {o for o in f.outputs if isinstance(o, Var)}
    keep = []
    for e in reversed(f.eqns):
        if e.out in live or OPS[e.op].kind == "effect":  # (a print: used by nobody, kept)
            keep.append(e)
            live.update(a for a in e.inputs if isinstance(a, Var))
    keep.reverse()
    consts = tuple((v, a) for v, a in f.consts if v in live)
    return finish(f.replace(consts=consts), keep, {})
