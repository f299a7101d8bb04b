"""Running a Tensor IR function: directly on numpy arrays, or by binding into the current trace.

:func:`run` is the ``backend="interpret"`` executor: each equation calls its op's numpy
implementation. :func:`evaluate` re-applies each equation through :func:`pypto.core.dispatch.bind`,
so evaluating on tracers inlines the function into an enclosing trace (``jit(grad(f))``); a
re-bound equation keeps its own source line and ``pto.hint``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from pypto.core import dispatch, hints
from pypto.core.errors import at_location
from pypto.graph.ir import Atom, Func, Lit, Var
from pypto.ops import api
from pypto.ops.table import OPS


def run(func: Func, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of ``func`` on numpy ``arrays`` (one per parameter)."""
    env: dict[Var, np.ndarray] = dict(zip(func.params, arrays, strict=True))
    for v, arr in func.consts:
        env[v] = arr

    def read(a: Atom) -> np.ndarray:
        return a.value if isinstance(a, Lit) else env[a]

    for e in func.eqns:
        impl = OPS[e.op].impl
        out = impl(*(read(a) for a in e.inputs), **e.kwargs)  # type: ignore[misc]
        env[e.out] = out if type(out) is np.ndarray else np.asarray(out)
    return [read(o) for o in func.outputs]


def evaluate(func: Func, values: Sequence[Any], groups: bool = False) -> list[Any]:
    """The outputs of ``func`` applied to pypto values, op by op in the current trace; with
    ``groups``, the equations of each of ``func``'s composites form one group there too."""
    env: dict[Var, Any] = dict(zip(func.params, values, strict=True))
    for v, arr in func.consts:
        env[v] = api.asvalue(arr)
    t = dispatch.current_trace()

    def read(a: Atom) -> Any:
        return t.const(a.value) if isinstance(a, Lit) else env[a]  # type: ignore[attr-defined]

    kinds = dict(func.groups)
    region = getattr(t, "region", None) if groups else None
    with contextlib.ExitStack() as open_group:
        current: str | None = None
        for e in func.eqns:
            if region is not None and e.group != current:
                open_group.close()
                current = e.group
                if current is not None:
                    open_group.enter_context(region(kinds[current]))
            with hints.hinted(e.hint), at_location(e.loc):
                env[e.out] = dispatch.bind(OPS[e.op], tuple(read(a) for a in e.inputs), e.kwargs)
    return [read(o) for o in func.outputs]


def call(func: Func, values: Sequence[Any]) -> list[Any]:
    """Apply ``func``: straight on numpy when every value is eager, else op by op (inlining)."""
    from pypto.eager.tensor import Tensor, _wrap

    if dispatch.is_eager() and all(type(v) is Tensor for v in values):
        return [_wrap(a) for a in run(func, [v._a for v in values])]
    return evaluate(func, values)
