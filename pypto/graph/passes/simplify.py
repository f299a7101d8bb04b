"""Algebraic simplification as a list of local patterns, applied to a fixpoint.

x·1, 1·x, x+0, 0+x, x-0, x/1 → x (when that keeps the shape and dtype); double negation;
transpose∘transpose → one transpose (or nothing); reshape chains → one reshape; reshape,
broadcast_to or cast to what the value already is → the value; broadcast chains → one
broadcast; cast chains whose first step is exact → one cast; a one-element constant broadcast
as an operand of arithmetic whose other operand is full-size → the constant itself (and a cast
of such a broadcast → the broadcast of the cast constant); the sum of two zero-paddings
that tile one axis between them → a concatenation (the gradient of slicing a value into
parts comes out so); ``relu``'s select, where(x <= 0, 0, x) → maximum(x, 0).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.passes import ir_pass
from pypto.core.rewrite import PatternMatcher, Rule
from pypto.graph.ir import Atom, Eqn, Func, Lit, Var
from pypto.graph.passes.util import finish, subst
from pypto.ops.table import OPS


class Ctx:
    """What a rule may look at: the equation that produced a var, and the constants."""

    def __init__(self, consts: tuple[tuple[Var, np.ndarray], ...] = ()) -> None:
        self.producer: dict[Var, Eqn] = {}
        self.consts = {v: a for v, a in consts if a.size == 1}

    def prod(self, a: Atom, op: str) -> Eqn | None:
        e = self.producer.get(a) if isinstance(a, Var) else None
        return e if e is not None and e.op == op else None

    def scalar(self, a: Atom) -> Lit | None:
        """``a`` as a 0-d literal when it is a one-element constant (or a reshape of one)."""
        if isinstance(a, Lit):
            return a
        c = self.consts.get(a) if isinstance(a, Var) else None
        if c is not None:
            return Lit(c.reshape(()))
        p = self.prod(a, "reshape")
        return self.scalar(p.inputs[0]) if p is not None and a.aval.size == 1 else None

    def broadcast_scalar(self, a: Atom) -> Lit | None:
        """The literal a ``broadcast_to`` of a one-element constant spreads, if ``a`` is one."""
        p = self.prod(a, "broadcast_to")
        return self.scalar(p.inputs[0]) if p is not None else None


def _is(a: Atom, value: float) -> bool:
    return isinstance(a, Lit) and a.value.item() == value


def _keeps(e: Eqn, a: Atom) -> bool:
    return a.aval == e.out.aval


def _identity(op: str, value: float, side: int | None) -> Rule:
    """``op`` with the neutral ``value`` on one side (or either, side None) → the other side."""

    def fn(e: Eqn, ctx: Ctx) -> Atom | None:
        x, y = e.inputs
        if side in (None, 1) and _is(y, value) and _keeps(e, x):
            return x
        if side in (None, 0) and _is(x, value) and _keeps(e, y):
            return y
        return None

    return Rule(f"{op}-identity", op, fn)


def _double_neg(e: Eqn, ctx: Ctx) -> Atom | None:
    p = ctx.prod(e.inputs[0], "neg")
    return p.inputs[0] if p else None


def _transpose_chain(e: Eqn, ctx: Ctx) -> Any:
    perm = e.kwargs["perm"]
    if perm == tuple(range(len(perm))):
        return e.inputs[0]
    p = ctx.prod(e.inputs[0], "transpose")
    if p is None:
        return None
    inner = p.kwargs["perm"]
    comp = tuple(inner[i] for i in perm)
    if comp == tuple(range(len(comp))):
        return p.inputs[0]
    return replace(e, inputs=p.inputs, params=(("perm", comp),))


def _reshape_chain(e: Eqn, ctx: Ctx) -> Any:
    if e.inputs[0].aval.shape == e.out.aval.shape:
        return e.inputs[0]
    p = ctx.prod(e.inputs[0], "reshape")
    if p is None:
        return None
    if p.inputs[0].aval.shape == e.out.aval.shape:
        return p.inputs[0]
    return replace(e, inputs=p.inputs)


def _broadcast_chain(e: Eqn, ctx: Ctx) -> Any:
    if e.inputs[0].aval.shape == e.out.aval.shape:
        return e.inputs[0]
    p = ctx.prod(e.inputs[0], "broadcast_to")
    return replace(e, inputs=p.inputs) if p else None


def exact_cast(src: dt.DType, dst: dt.DType) -> bool:
    """Whether every value of ``src`` is exactly representable in ``dst``."""
    if src is dst or src is dt.bool_:
        return True
    if dst is dt.float32:
        return src in (dt.float16, dt.bfloat16, dt.int8)
    if dst in (dt.float16, dt.bfloat16, dt.int32):
        return src is dt.int8
    return False


def _cast_chain(e: Eqn, ctx: Ctx) -> Any:
    x = e.inputs[0]
    if x.aval.dtype is e.out.aval.dtype:
        return x
    p = ctx.prod(x, "cast")
    if p is None or not exact_cast(p.inputs[0].aval.dtype, x.aval.dtype):
        return None
    if p.inputs[0].aval.dtype is e.out.aval.dtype:
        return p.inputs[0]
    return replace(e, inputs=p.inputs)


def _cast_broadcast_scalar(e: Eqn, ctx: Ctx) -> Any:
    """cast(broadcast_to(c)) of a one-element constant ``c`` → broadcast_to(c cast): the
    cast of one number rather than of every element (a gradient's cotangent of 1.0, spread
    over a sum's input and cast to the input's dtype, comes out so)."""
    p = ctx.prod(e.inputs[0], "broadcast_to")
    c = ctx.scalar(p.inputs[0]) if p is not None else None
    if p is None or c is None:
        return None
    # the cast op's own conversion of the number, as constant folding would compute it
    v = OPS["cast"].impl(np.asarray(c.value), **e.kwargs)  # type: ignore[misc]
    return replace(e, op="broadcast_to", inputs=(Lit(np.asarray(v)),), params=p.params)


def _scalar_operand(e: Eqn, ctx: Ctx) -> Any:
    """An operand that is a one-element constant broadcast to the result's shape → the
    constant itself, when the other operand has that shape already (so the result does
    not change): no full-size tensor of one repeated number is made, and ``x·1`` and
    ``x+0`` then go by the identity rules."""
    x, y = e.inputs
    for i, (a, other) in enumerate(((x, y), (y, x))):
        c = ctx.broadcast_scalar(a)
        if c is not None and _keeps(e, other) and c.aval.dtype is e.inputs[i].aval.dtype:
            ins = (c, y) if i == 0 else (x, c)
            return replace(e, inputs=ins)
    return None


def _span(p: Eqn) -> tuple[int, int, int] | None:
    """(axis, first, end) of the one axis a pad widens without interior padding, or None."""
    axes = [i for i, (lo, hi, mid) in enumerate(p.kwargs["config"]) if lo or hi or mid]
    if len(axes) != 1 or p.kwargs.get("value", 0):
        return None
    ax = axes[0]
    lo, _, mid = p.kwargs["config"][ax]
    if mid:
        return None
    return ax, lo, lo + p.inputs[0].aval.shape[ax]


def _pads_to_concat(e: Eqn, ctx: Ctx) -> Any:
    """pad(a) + pad(b) where a and b fill complementary ranges of one axis → concat(a, b):
    exact (every element is one of them plus zero), but for the sign of a zero."""
    x, y = e.inputs
    px, py = ctx.prod(x, "lax_pad"), ctx.prod(y, "lax_pad")
    if px is None or py is None or not (_keeps(e, x) and _keeps(e, y)):
        return None
    sx, sy = _span(px), _span(py)
    if sx is None or sy is None or sx[0] != sy[0]:
        return None
    (ax, a0, a1), (_, b0, b1) = sx, sy
    n = e.out.aval.shape[ax]
    if (a0, a1, b0, b1) == (0, b0, a1, n):
        parts = (px.inputs[0], py.inputs[0])
    elif (b0, b1, a0, a1) == (0, a0, b1, n):
        parts = (py.inputs[0], px.inputs[0])
    else:
        return None
    return replace(e, op="concat", inputs=parts, params=(("axis", ax),))


_SCALAR_OPERAND_OPS = ("add", "sub", "mul", "div", "maximum", "minimum")


def _relu_select(e: Eqn, ctx: Ctx) -> Any:
    """where(x <= 0, 0, x) → maximum(x, 0): ``relu`` is written as the select so that its
    gradient at 0 is JAX's (none), but its value is the one-instruction maximum, which a
    matmul's epilogue takes as it is. Equal for every x, NaN included, but for the sign of a
    zero."""
    c, zero, x = e.inputs
    p = ctx.prod(c, "less_equal")
    if p is None or not _is(zero, 0) or p.inputs[0] is not x or not _is(p.inputs[1], 0):
        return None
    if not _keeps(e, x):
        return None
    return replace(e, op="maximum", inputs=(x, zero), params=())


PATTERNS = PatternMatcher(
    [
        *(Rule("scalar-operand", op, _scalar_operand) for op in _SCALAR_OPERAND_OPS),
        Rule("cast-broadcast-scalar", "cast", _cast_broadcast_scalar),
        _identity("mul", 1, None),
        _identity("add", 0, None),
        _identity("sub", 0, 1),
        _identity("div", 1, 1),
        Rule("double-neg", "neg", _double_neg),
        Rule("transpose-chain", "transpose", _transpose_chain),
        Rule("reshape-chain", "reshape", _reshape_chain),
        Rule("broadcast-chain", "broadcast_to", _broadcast_chain),
        Rule("cast-chain", "cast", _cast_chain),
        Rule("pads-to-concat", "add", _pads_to_concat),
        Rule("relu-select", "where", _relu_select),
    ]
)


@ir_pass("simplify")
def simplify(f: Func) -> Func:
    for _ in range(8):  # each sweep shortens chains; a few sweeps reach the fixpoint
        ctx = Ctx(f.consts)
        sub: dict[Var, Atom] = {}
        eqns = []
        changed = False
        for e in f.eqns:
            e = subst(e, sub)
            hit = PATTERNS.rewrite(e.op, e, ctx)
            if hit is not None:
                changed = True
                out = hit[1]
                if isinstance(out, Eqn):
                    e = out
                else:
                    sub[e.out] = out
                    continue
            ctx.producer[e.out] = e
            eqns.append(e)
        f = finish(f, eqns, sub)
        if not changed:
            break
    return f
