"""The op table: every op of pypto is one :class:`Op` record, defined once.

A primitive carries its shape rule, dtype rule, numpy implementation (obeying the numerics
contract), JAX reference and cost rule. A composite carries its decomposition into primitives
and its JAX reference. Levels below ``ops`` (autodiff, tile lowering, ...) fill the op's
``rules`` slot for their level with :func:`register_rule`, and declare with :func:`require_rule`
that every op they handle must have one, so a test can name any op that lacks a rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pypto import dtypes as dt

Shape = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AVal:
    """The abstract value of a tensor: its shape and dtype."""

    shape: Shape
    dtype: dt.DType

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{self.dtype.short}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True, slots=True)
class Cost:
    """Work of one op application for the roofline: FLOPs on the cube or vector unit, bytes."""

    flops: int = 0
    unit: str = "vector"  # "cube", "vector" or "none" (pure data movement / metadata)
    bytes_in: int = 0
    bytes_out: int = 0


ShapeRule = Callable[..., Shape]
DTypeRule = Callable[..., dt.DType]
CostRule = Callable[..., Cost]


class Value:
    """Base of every tensor-like value an op can take: eager tensors and graph tracers."""

    __slots__ = ()


PRIMITIVE_RULES = ("shape", "dtype", "numpy", "jax", "cost")
COMPOSITE_RULES = ("decompose", "jax")


@dataclass(frozen=True, eq=False)
class Op:
    """One op. ``kind`` groups ops that lower alike: elementwise, reduce, matmul, layout, composite.

    ``shape_rule(*avals, **params)`` and ``dtype_rule(*avals, **params)`` describe the result;
    ``impl(*arrays, **params)`` computes it with numpy; ``jax_impl`` is the reference;
    ``decompose(*tensors, **params)`` (composites) writes it in terms of other ops.
    """

    name: str
    kind: str
    doc: str
    shape_rule: ShapeRule | None = None
    dtype_rule: DTypeRule | None = None
    impl: Callable[..., Any] | None = None
    jax_impl: Callable[..., Any] | None = None
    cost_rule: CostRule | None = None
    decompose: Callable[..., Any] | None = None
    differentiable: bool = True
    dtypes: tuple[dt.DType, ...] = dt.ALL
    vector_factor: int = 1  # vector work per element relative to an add (transcendentals > 1)
    rules: dict[str, Callable[..., Any]] = field(default_factory=dict)
    # a composite traced as one group of equations; False for one that only rearranges its
    # operands around other composites, which then group (and fuse) as they would alone
    region: bool = True

    @property
    def is_composite(self) -> bool:
        return self.decompose is not None

    def has_rule(self, level: str) -> bool:
        builtin = {
            "shape": self.shape_rule,
            "dtype": self.dtype_rule,
            "numpy": self.impl,
            "jax": self.jax_impl,
            "cost": self.cost_rule,
            "decompose": self.decompose,
        }
        if level in builtin:
            return builtin[level] is not None
        return level in self.rules

    def __repr__(self) -> str:
        return f"<op {self.name}>"


OPS: dict[str, Op] = {}

# level name -> predicate saying which ops that level needs a rule for
_REQUIRED: dict[str, Callable[[Op], bool]] = {}


def register(op: Op) -> Op:
    """Add ``op`` to the table; a name is registered once."""
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} registered twice")
    OPS[op.name] = op
    return op


def register_rule(level: str, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the rule of op ``name`` for ``level`` (e.g. ``"vjp"``, ``"tile"``)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        OPS[name].rules[level] = fn
        return fn

    return deco


def require_rule(level: str, which: Callable[[Op], bool]) -> None:
    """Declare that every op for which ``which(op)`` holds must have a rule for ``level``."""
    _REQUIRED[level] = which


def required_rules(op: Op) -> tuple[str, ...]:
    """The rule levels ``op`` must have: its own kind's builtins plus every declared level."""
    base = COMPOSITE_RULES if op.is_composite else PRIMITIVE_RULES
    extra = tuple(lvl for lvl, which in _REQUIRED.items() if which(op))
    return base + extra


def missing_rules() -> dict[str, list[str]]:
    """op name -> the levels it lacks a rule for (empty when the table is complete)."""
    out: dict[str, list[str]] = {}
    for op in OPS.values():
        miss = [lvl for lvl in required_rules(op) if not op.has_rule(lvl)]
        if miss:
            out[op.name] = miss
    return out
