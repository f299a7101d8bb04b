"""Tracing: running a Python function on tracers records its ops as a Tensor IR :class:`Func`.

Tracers share the one Tensor surface with eager tensors, so user code is the same in both modes.
Values from outside the trace become constants; tracers of an enclosing trace (a closure inside
``jit(grad(f))``) become extra parameters, bound again when the function is evaluated.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core import dispatch, hints
from pypto.core.errors import PyptoError, TraceError, op_location, strip_internal_frames
from pypto.eager.tensor import Tensor
from pypto.graph import pytree
from pypto.graph.ir import Atom, Eqn, Func, Lit, Var
from pypto.ops.surface import TensorSurface
from pypto.ops.table import AVal, Op, Value


class Tracer(TensorSurface):
    """A value being traced: an atom of the function under construction."""

    __slots__ = ("atom", "trace")

    def __init__(self, trace: GraphTrace, atom: Atom) -> None:
        self.trace = trace
        self.atom = atom

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return self.atom.aval.shape

    @property
    def dtype(self) -> dt.DType:  # type: ignore[override]
        return self.atom.aval.dtype

    @property
    def aval(self) -> AVal:
        return self.atom.aval

    def __repr__(self) -> str:
        return f"Tracer({self.atom.aval})"


class GraphTrace:
    """Records op applications into equations."""

    def __init__(self) -> None:
        self.eqns: list[Eqn] = []
        self.consts: list[tuple[Var, np.ndarray]] = []
        self._const_of: dict[int, Var] = {}
        self.free: list[tuple[Var, Any]] = []  # lifted tracers of enclosing traces
        self._free_of: dict[int, Var] = {}
        self._region: str | None = None
        self.groups: list[tuple[str, str]] = []

    # -- values entering the trace
    def const(self, array: np.ndarray) -> Tracer:
        if array.ndim == 0:
            return Tracer(self, Lit(array))
        v = Var(AVal(array.shape, dt.from_numpy(array.dtype)))
        self.consts.append((v, array))
        return Tracer(self, v)

    def atom(self, x: Any) -> Atom:
        if type(x) is Tracer:
            if x.trace is self:
                return x.atom
            return self._lift(x)
        if isinstance(x, Tensor):
            a = x._a
            if a.ndim == 0:
                return Lit(a)
            v = self._const_of.get(id(a))
            if v is None:
                v = Var(AVal(a.shape, dt.from_numpy(a.dtype)))
                self.consts.append((v, a))
                self._const_of[id(a)] = v
            return v
        raise TraceError(f"cannot use {type(x).__name__} as a traced value")

    def _lift(self, x: Tracer) -> Var:
        v = self._free_of.get(id(x))
        if v is None:
            v = Var(x.aval)
            self.free.append((v, x))
            self._free_of[id(x)] = v
        return v

    # -- ops
    def process(self, op: Op, args: tuple[Any, ...], params: dict[str, Any]) -> Tracer:
        atoms = tuple(self.atom(a) for a in args)
        avals = [a.aval for a in atoms]
        shape = op.shape_rule(*avals, **params)  # type: ignore[misc]
        dtype = op.dtype_rule(*avals, **params)  # type: ignore[misc]
        out = Var(AVal(tuple(shape), dtype))
        self.eqns.append(
            Eqn(
                op.name,
                atoms,
                tuple(params.items()),
                out,
                op_location(),
                self._region,
                hints.current(),
            )
        )
        return Tracer(self, out)

    def composite(self, op: Op, args: tuple[Any, ...], params: dict[str, Any]) -> Any:
        with self.region(op.name) if op.region else contextlib.nullcontext():
            try:
                return op.decompose(*args, **params)  # type: ignore[misc]
            except PyptoError as e:
                raise e.with_traceback(strip_internal_frames(e.__traceback__)) from None

    @contextlib.contextmanager
    def region(self, kind: str) -> Iterator[None]:
        """Record the equations made inside as one group of ``kind`` (a composite's); inside
        an open group they join it (groups do not nest)."""
        if self._region is not None:
            yield
            return
        gid = f"{kind}{sum(1 for _, k in self.groups if k == kind)}"
        start = len(self.eqns)
        self._region = gid
        try:
            yield
        finally:
            self._region = None
        if len(self.eqns) > start:
            self.groups.append((gid, kind))

    def output_atom(self, x: Any) -> Atom:
        if isinstance(x, Value):
            return self.atom(x)
        if isinstance(x, bool | int | float):
            return Lit(np.asarray(x, dt.result_type(x).np))
        return self.atom(_as_tensor(x))


class Spec(Value):
    """A shape-and-dtype stand-in for an argument: traces without data (like jax.ShapeDtypeStruct).

    >>> import pypto as pto
    >>> print(trace(pto.exp, [Spec(AVal((2,), dt.float16))])[0].eqns[0].out.aval)
    f16[2]
    """

    __slots__ = ("dtype", "shape")

    def __init__(self, aval: AVal) -> None:
        self.shape = aval.shape
        self.dtype = aval.dtype


class ShapeDtypeStruct(Spec):
    """A shape and a dtype, as ``jax.ShapeDtypeStruct``: what :func:`pypto.eval_shape`
    returns, and an argument that traces without data (``jit(f).lower``, ``make_graph``).

    >>> import pypto as pto
    >>> pto.ShapeDtypeStruct((2, 3), pto.float16)
    ShapeDtypeStruct(shape=(2, 3), dtype=float16)
    """

    __slots__ = ()

    def __init__(self, shape: Sequence[int], dtype: Any) -> None:
        super().__init__(AVal(tuple(int(d) for d in shape), dt.dtype(dtype)))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    def __repr__(self) -> str:
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype})"


def _as_tensor(x: Any) -> Tensor:
    from pypto.eager.tensor import tensor

    return tensor(x)


def _arg_value(trace: GraphTrace, leaf: Any, hint: str) -> Tracer:
    if isinstance(leaf, Value):
        aval = AVal(tuple(leaf.shape), leaf.dtype)  # type: ignore[attr-defined]
    elif isinstance(leaf, bool | int | float):
        aval = AVal((), dt.result_type(leaf))
    else:
        a = _as_tensor(leaf)
        aval = AVal(a.shape, a.dtype)
    return Tracer(trace, Var(aval, hint=hint))


def trace(
    fn: Callable[..., Any],
    args: Sequence[Any],
    name: str | None = None,
    arg_names: Sequence[str] | None = None,
) -> tuple[Func, pytree.TreeDef, list[Any]]:
    """Trace ``fn(*args)``: the Func, the output structure, and the lifted free values.

    The Func's parameters are the flattened leaves of ``args``, then one per free value.
    """
    leaves, in_tree = pytree.flatten(tuple(args))
    names = leaf_names(in_tree, arg_names)
    t = GraphTrace()
    tracers = [_arg_value(t, leaf, names[i]) for i, leaf in enumerate(leaves)]
    with dispatch.pushed(t):
        out = fn(*pytree.unflatten(in_tree, tracers))
        out_leaves, out_tree = pytree.flatten(out)
        outs = tuple(t.output_atom(o) for o in out_leaves)
    params = tuple(x.atom for x in tracers) + tuple(v for v, _ in t.free)
    func = Func(
        re.sub(r"\W", "", str(name or getattr(fn, "__name__", "f"))) or "f",
        params,  # type: ignore[arg-type]
        tuple(t.eqns),
        outs,
        tuple(t.consts),
        tuple(t.groups),
    )
    return func, out_tree, [x for _, x in t.free]


def leaf_names(tree: pytree.TreeDef, arg_names: Sequence[str] | None) -> list[str]:
    names: list[str] = []
    for i, child in enumerate(tree.children):
        base = arg_names[i] if arg_names is not None and i < len(arg_names) else f"a{i}"
        n = child.num_leaves
        names.extend(
            [base] if n == 1 and child.kind == "leaf" else [f"{base}_{j}" for j in range(n)]
        )
    return names
