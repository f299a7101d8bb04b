"""Inlining: every ``custom_vjp_call`` becomes the equations of its function's body, and
every ``stop_gradient`` and ``checkpoint_name`` its operand.

The call exists so that autodiff can apply the user's backward (or a ``pto.checkpoint``'s
recomputation), ``stop_gradient`` so that it treats a value as a constant and
``checkpoint_name`` so that a checkpoint policy can name it; once the graph is differentiated,
the body's ordinary ops are what the later passes fuse and the levels below lower, and a
stopped or named value is the value.
The results of one call (one equation each) share one copy of the body; groups of the body
(composites) get fresh names in the caller.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from pypto.core.hints import merge
from pypto.core.passes import ir_pass
from pypto.graph.custom_vjp import custom_vjp
from pypto.graph.ir import Atom, Eqn, Func, Lit, Var
from pypto.graph.passes.util import finish, subst
from pypto.ops.custom_vjp_call import find


def has_calls(f: Func) -> bool:
    """Whether ``f`` has anything for :func:`inline` to do."""
    return any(e.op in _CALLS for e in f.eqns)


_CALLS = ("custom_vjp_call", "stop_gradient", "checkpoint_name")


def _key(a: Atom) -> Any:
    return a.key() if isinstance(a, Lit) else id(a)


class _Splicer:
    """The caller's new equations, constants and groups, with the bodies spliced in."""

    def __init__(self, f: Func) -> None:
        self.eqns: list[Eqn] = []
        self.consts: list[tuple[Var, np.ndarray]] = list(f.consts)
        self.groups: list[tuple[str, str]] = list(f.groups)

    def fresh_group(self, kind: str) -> str:
        used = {g for g, _ in self.groups}
        k = sum(1 for _, k in self.groups if k == kind)
        while f"{kind}{k}" in used:
            k += 1
        self.groups.append((f"{kind}{k}", kind))
        return f"{kind}{k}"

    def splice(self, body: Func, inputs: tuple[Atom, ...], call: Eqn) -> list[Atom]:
        """Append ``body`` applied to ``inputs``; its outputs in the caller."""
        env: dict[Var, Atom] = dict(zip(body.params, inputs, strict=True))
        for v, arr in body.consts:
            env[v] = nv = Var(v.aval)
            self.consts.append((nv, arr))
        gmap: dict[str, str] = {}
        for e in body.eqns:
            if call.group is not None:
                group: str | None = call.group  # groups do not nest: the caller's wins
            elif e.group is not None:
                if e.group not in gmap:
                    gmap[e.group] = self.fresh_group(dict(body.groups)[e.group])
                group = gmap[e.group]
            else:
                group = None
            out = Var(e.out.aval)
            ins = tuple(env.get(a, a) if isinstance(a, Var) else a for a in e.inputs)
            hint = merge(call.hint, e.hint)  # the call's pto.hint, the body's own inside
            self.eqns.append(replace(e, inputs=ins, out=out, group=group, hint=hint))
            env[e.out] = out
        return [env.get(o, o) if isinstance(o, Var) else o for o in body.outputs]


@ir_pass("inline")
def inline(f: Func) -> Func:
    if not has_calls(f):
        return f
    s = _Splicer(f)
    sub: dict[Var, Atom] = {}
    done: dict[Any, list[Atom]] = {}  # (fn, operands) -> the spliced body's outputs
    for e in f.eqns:
        e = subst(e, sub)
        if e.op in ("stop_gradient", "checkpoint_name"):
            sub[e.out] = e.inputs[0]
            continue
        if e.op != "custom_vjp_call":
            s.eqns.append(e)
            continue
        kw = e.kwargs
        key = (kw["fn"], tuple(_key(a) for a in e.inputs))
        outs = done.get(key)
        if outs is None:
            c = find(kw["fn"])
            assert isinstance(c, custom_vjp)
            body = inline(c.body(tuple(a.aval for a in e.inputs))[0])
            outs = done[key] = s.splice(body, e.inputs, e)
        sub[e.out] = outs[kw.get("result", 0)]
    return finish(f.replace(consts=tuple(s.consts), groups=tuple(s.groups)), s.eqns, sub)
