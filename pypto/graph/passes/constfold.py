"""Constant folding: equations whose operands are all constants become constants."""

from __future__ import annotations

import numpy as np

from pypto.core.passes import ir_pass
from pypto.graph.ir import Atom, Func, Lit, Var
from pypto.graph.passes.util import finish, subst
from pypto.ops.table import OPS

FOLD_LIMIT = 1 << 16  # elements; larger results stay computed at run time


@ir_pass("constant_fold")
def constant_fold(f: Func) -> Func:
    values: dict[Var, np.ndarray] = dict(f.consts)
    consts = list(f.consts)
    sub: dict[Var, Atom] = {}
    eqns = []
    for e in f.eqns:
        e = subst(e, sub)
        if (
            OPS[e.op].kind != "effect"
            and e.out.aval.size <= FOLD_LIMIT
            and all(isinstance(a, Lit) or a in values for a in e.inputs)
        ):
            args = [a.value if isinstance(a, Lit) else values[a] for a in e.inputs]
            out = np.asarray(OPS[e.op].impl(*args, **e.kwargs))  # type: ignore[misc]
            if out.ndim == 0:
                sub[e.out] = Lit(out)
            else:
                values[e.out] = out
                consts.append((e.out, out))
            continue
        eqns.append(e)
    return finish(f.replace(consts=tuple(consts)), eqns, sub)
