"""The Tensor IR: SSA over whole tensors, like a jaxpr.

A :class:`Func` has parameters, a tuple of :class:`Eqn` (one op application each, producing
one :class:`Var`), constants and outputs. Nodes are immutable; passes build new functions.
0-d constants appear inline as literals (``2.5:f32``); larger constants are bound to vars at
the top of the function.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import PyptoError, SourceLoc
from pypto.ops.table import OPS, AVal


class IRError(PyptoError):
    """An ill-formed IR (found by :func:`verify` or the parser)."""


@dataclass(frozen=True, eq=False, slots=True)
class Var:
    """An SSA value. Identity is the object; the printer numbers vars in order."""

    aval: AVal
    hint: str = ""  # a preferred printed name (parameter names)

    def __repr__(self) -> str:
        return f"Var({self.aval})"


@dataclass(frozen=True, eq=False, slots=True)
class Lit:
    """A 0-d constant written inline."""

    value: np.ndarray

    @property
    def aval(self) -> AVal:
        return AVal((), dt.from_numpy(self.value.dtype))

    def key(self) -> tuple[str, str]:
        return (self.aval.dtype.name, literal_text(self.value))


Atom = Var | Lit


@dataclass(frozen=True, eq=False, slots=True)
class Eqn:
    """``out = op(*inputs, **params)`` at the user's source line ``loc``.

    ``hint`` holds the ``pto.hint`` in force when the op was traced (tile shape, cores,
    swizzle); passes copy equations with :func:`dataclasses.replace`, so it stays with the op.
    """

    op: str
    inputs: tuple[Atom, ...]
    params: tuple[tuple[str, Any], ...]
    out: Var
    loc: SourceLoc | None = None
    group: str | None = None  # the fusion group (kernel) this eqn belongs to
    hint: tuple[tuple[str, Any], ...] = ()  # lowering overrides from ``pto.hint``, key-sorted

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.params)


@dataclass(frozen=True, eq=False, repr=False)
class Func:
    """A traced function: parameters, constants, equations and outputs."""

    name: str
    params: tuple[Var, ...]
    eqns: tuple[Eqn, ...]
    outputs: tuple[Atom, ...]
    consts: tuple[tuple[Var, np.ndarray], ...] = ()
    groups: tuple[tuple[str, str], ...] = field(default=())  # (group id, kind) in order

    def __str__(self) -> str:
        from pypto.graph.printer import print_func

        return print_func(self)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        from pypto.core.display import pre

        return pre(str(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}

    def replace(self, **kw: Any) -> Func:
        from dataclasses import replace

        return replace(self, **kw)

    def verify(self) -> Func:
        verify(self)
        return self


def literal_text(v: np.ndarray) -> str:
    x = v.item()
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    return repr(float(x))


def verify(f: Func) -> None:
    """Check SSA form and that every equation's types follow its op's rules (like check_jaxpr)."""
    defined: set[Var] = set()
    for p in f.params:
        if p in defined:
            raise IRError(f"parameter defined twice in @{f.name}")
        defined.add(p)
    for v, arr in f.consts:
        if v in defined:
            raise IRError(f"constant defined twice in @{f.name}")
        if tuple(arr.shape) != v.aval.shape or dt.from_numpy(arr.dtype) is not v.aval.dtype:
            raise IRError(f"constant {v.aval} holds {arr.dtype}{list(arr.shape)}")
        defined.add(v)
    for i, e in enumerate(f.eqns):
        op = OPS.get(e.op)
        if op is None or op.is_composite:
            raise IRError(f"eqn {i}: unknown primitive {e.op!r}")
        for a in e.inputs:
            if isinstance(a, Var) and a not in defined:
                raise IRError(f"eqn {i} ({e.op}): uses a value before it is defined")
        avals = [a.aval for a in e.inputs]
        kw = e.kwargs
        try:
            shape = op.shape_rule(*avals, **kw)  # type: ignore[misc]
            dtype = op.dtype_rule(*avals, **kw)  # type: ignore[misc]
        except PyptoError as err:
            raise IRError(f"eqn {i} ({e.op}): {err.detail}") from None
        if AVal(tuple(shape), dtype) != e.out.aval:
            raise IRError(
                f"eqn {i} ({e.op}): declared {e.out.aval}, rules give {AVal(tuple(shape), dtype)}"
            )
        if e.out in defined:
            raise IRError(f"eqn {i} ({e.op}): redefines a value (not SSA)")
        defined.add(e.out)
    for a in f.outputs:
        if isinstance(a, Var) and a not in defined:
            raise IRError(f"@{f.name}: returns an undefined value")
    known = {g for g, _ in f.groups}
    for i, e in enumerate(f.eqns):
        if e.group is not None and e.group not in known:
            raise IRError(f"eqn {i} ({e.op}): unknown group {e.group}")
