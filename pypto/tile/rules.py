"""Row-kernel rules of the elementwise and reduction primitives, registered into the op table.

Each rule turns one equation into vector tile instructions on the equation's declared dtype,
so a fused chain rounds exactly where eager mode does (float16/bfloat16 math is done in
float32 by the vector unit and rounded once per instruction, as the numpy implementations do).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.graph.ir import Eqn, Lit
from pypto.isa.ir import Cond
from pypto.ops.table import register_rule
from pypto.tile.ir import TileVar
from pypto.tile.lower import RowBuilder, RowRule

UNARY_OPS = {
    "exp": "TEXP",
    "log": "TLOG",
    "sqrt": "TSQRT",
    "rsqrt": "TRSQRT",
    "reciprocal": "TRECIP",
    "tanh": "TTANH",
    "sigmoid": "TSIGMOID",
    "sin": "TSIN",
    "cos": "TCOS",
    "neg": "TNEG",
    "abs": "TABS",
    "bitwise_not": "TNOT",
}
BINARY_OPS = {
    "add": "TADD",
    "sub": "TSUB",
    "mul": "TMUL",
    "div": "TDIV",
    "maximum": "TMAX",
    "minimum": "TMIN",
    "pow": "TPOW",
    "fmod": "TFMOD",
    "bitwise_and": "TAND",
    "bitwise_or": "TOR",
    "bitwise_xor": "TXOR",
    "left_shift": "TSHL",
    "right_shift": "TSHR",
}
COMMUTES = ("add", "mul", "maximum", "minimum")
# On bool tensors add is "or" and mul is "and": max and min of 0/1 integers.
BOOL_AS = {"add": "TMAX", "mul": "TMIN", "maximum": "TMAX", "minimum": "TMIN"}
COMPARE_OPS = {
    "equal": Cond.EQ,
    "not_equal": Cond.NE,
    "less": Cond.LT,
    "less_equal": Cond.LE,
    "greater": Cond.GT,
    "greater_equal": Cond.GE,
}
FLIP = {Cond.LT: Cond.GT, Cond.LE: Cond.GE, Cond.GT: Cond.LT, Cond.GE: Cond.LE}
REDUCE_OPS = {"sum": "TROWSUM", "max": "TROWMAX", "min": "TROWMIN"}


def _value(x: Lit) -> float:
    return float(x.value.item())


def _tile(b: RowBuilder, x: TileVar | Lit, dtype: dt.DType, *like: Any) -> TileVar:
    """``x`` as a tile; a literal as a constant tile of the kind its operation's other
    operands (``like``) have where that is a column or one value, so ``1 - t`` of a row sum
    ``t`` stays one value per row instead of becoming a whole row."""
    if isinstance(x, TileVar):
        return b.narrow(x, *like)
    tiles = [a for a in like if isinstance(a, TileVar)]
    kind = b.result_kind(*tiles) if tiles else None
    return b.lit(_value(x), dtype, kind if kind in ("col", "one") else None)


def _unary(opcode: str) -> Any:
    def rule(b: RowBuilder, e: Eqn, args: list[Any]) -> TileVar:
        (x,) = args
        x = _tile(b, x, e.out.aval.dtype)
        return b.op(opcode, b.new(e.out.aval.dtype, b.result_kind(x)), x)

    return rule


def _binary(name: str, opcode: str) -> Any:
    def rule(b: RowBuilder, e: Eqn, args: list[Any]) -> TileVar:
        x, y = args
        d = e.out.aval.dtype
        if d is dt.bool_:
            return _bool_binary(b, BOOL_AS[name], x, y)
        if isinstance(y, Lit) and isinstance(x, TileVar) and opcode != "TPOW":
            v = _value(y)
            if name == "pow" and v == 2.0:
                return b.op("TMUL", b.new(d, b.kind(x)), x, x)
            if name == "sub":  # x - v == x + (-v) exactly
                return b.op("TADDS", b.new(d, b.kind(x)), x, -v)
            return b.op(opcode + "S", b.new(d, b.kind(x)), x, v)
        if name == "pow" and isinstance(y, Lit) and _value(y) == 2.0:
            assert isinstance(x, TileVar)
            return b.op("TMUL", b.new(d, b.kind(x)), x, x)
        if isinstance(x, Lit) and isinstance(y, TileVar) and name in COMMUTES:
            return b.op(opcode + "S", b.new(d, b.kind(y)), y, _value(x))
        xt, yt = _tile(b, x, d, y), _tile(b, y, d, x)
        return b.op(opcode, b.new(d, b.result_kind(xt, yt)), xt, yt)

    return rule


def _bool_binary(b: RowBuilder, opcode: str, x: Any, y: Any) -> TileVar:
    xs = [_tile(b, x, dt.bool_, y), _tile(b, y, dt.bool_, x)]
    wide = [b.op("TCVT", b.new(dt.int8, b.kind(a)), a) for a in xs]
    r = b.op(opcode, b.new(dt.int8, b.result_kind(*wide)), *wide)
    return b.op("TCVT", b.new(dt.bool_, b.kind(r)), r)


def _compare(cond: Cond) -> Any:
    def rule(b: RowBuilder, e: Eqn, args: list[Any]) -> TileVar:
        x, y = args
        d = (x if isinstance(x, TileVar) else y).dtype
        if d is dt.bool_:  # compare bools as 0/1 integers
            x, y = (
                b.op("TCVT", b.new(dt.int8, b.kind(a)), a) if isinstance(a, TileVar) else a
                for a in (x, y)
            )
            d = dt.int8
        if isinstance(y, Lit) and isinstance(x, TileVar):
            return b.op("TCMPS", b.new(dt.bool_, b.kind(x)), x, _value(y), cond)
        if isinstance(x, Lit) and isinstance(y, TileVar):
            return b.op("TCMPS", b.new(dt.bool_, b.kind(y)), y, _value(x), FLIP.get(cond, cond))
        xt, yt = _tile(b, x, d, y), _tile(b, y, d, x)
        return b.op("TCMP", b.new(dt.bool_, b.result_kind(xt, yt)), xt, yt, cond)

    return rule


def _broadcast(b: RowBuilder, e: Eqn, args: list[Any]) -> TileVar:
    """``broadcast_to`` inside a row kernel: the operand's tile (a column, a row or one value
    of the tile's rows) expanded to the result's kind, in UB — no broadcast copy in GM."""
    (x,) = args
    d = e.out.aval.dtype
    want = b.plan.kinds[e.out]
    t = _tile(b, x, d)
    if want == "row":  # a one value spread across a row: from its [1, 1] tile
        t = b.one(t) or t
    if b.kind(t) == want or want == "one":
        return t
    if b.kind(t) == "one" and want != "row" and b.tr > 1:
        t = b.op("TCOLEXPAND", b.new(d, "col"), t)  # down the rows first
        if want == "col":
            return t
    if b.kind(t) == "row":
        return b.op("TCOLEXPAND", b.new(d, want), t)
    return b.op("TROWEXPAND", b.new(d, want), t)  # a column (or one value) across the row


def _where(b: RowBuilder, e: Eqn, args: list[Any]) -> TileVar:
    c, x, y = args
    d = e.out.aval.dtype
    ct = _tile(b, c, dt.bool_, x, y)
    xt, yt = _tile(b, x, d, c, y), _tile(b, y, d, c, x)
    if d is dt.bool_:  # select on 0/1 integers
        xi = b.op("TCVT", b.new(dt.int8, b.kind(xt)), xt)
        yi = b.op("TCVT", b.new(dt.int8, b.kind(yt)), yt)
        r = b.op("TSEL", b.new(dt.int8, b.result_kind(ct, xi, yi)), ct, xi, yi)
        return b.op("TCVT", b.new(dt.bool_, b.kind(r)), r)
    return b.op("TSEL", b.new(d, b.result_kind(ct, xt, yt)), ct, xt, yt)


def _cast(b: RowBuilder, e: Eqn, args: list[Any]) -> TileVar:
    (x,) = args
    d = e.out.aval.dtype
    if isinstance(x, Lit):
        return b.lit(_value(x), d)
    if x.dtype is d:
        return x
    return b.op("TCVT", b.new(d, b.kind(x)), x)


def _bitcast(b: RowBuilder, e: Eqn, args: list[Any]) -> TileVar:
    (x,) = args
    d = e.out.aval.dtype
    if isinstance(x, Lit):
        bits = np.asarray(x.value, e.inputs[0].aval.dtype.np).view(d.np)
        return b.lit(float(bits.item()), d)
    return b.op("TBITCAST", b.new(d, b.kind(x)), x)


def _identity(b: RowBuilder, e: Eqn, args: list[Any]) -> TileVar:
    """``stop_gradient``, ``checkpoint_name``, ``optimization_barrier``: the operand. (The
    tensor passes drop them once the graph is differentiated and CSE has run; a graph
    lowered without them still gets the value.)"""
    (x,) = args
    if isinstance(x, Lit):
        return b.lit(_value(x), e.out.aval.dtype)
    return x


def _reduce(opcode: str) -> Any:
    def rule(b: RowBuilder, e: Eqn, args: list[Any]) -> TileVar:
        (x,) = args
        d = e.out.aval.dtype
        if x.dtype is not d or d is dt.bool_:
            # sums of integers and bools accumulate in int32; max/min of bools as int8
            wide = dt.int8 if d is dt.bool_ else d
            x = b.op("TCVT", b.new(wide, b.kind(x)), x)
            r = b.op(opcode, b.new(wide, "col"), x)
            return r if wide is d else b.op("TCVT", b.new(d, "col"), r)
        return b.op(opcode, b.new(d, "col"), x)

    return rule


def _argmax(b: RowBuilder, e: Eqn, args: list[Any]) -> TileVar:
    import numpy as np

    (x,) = args
    if x.dtype is dt.bool_:
        x = b.op("TCVT", b.new(dt.int8, b.kind(x)), x)
    n = b.plan.C
    iota = b.lw.const_buffer("iota", np.arange(n, dtype=np.int32).reshape(1, n))
    idx = b.new(dt.int32, "row", "i")
    from pypto.isa.ir import Expr
    from pypto.tile.ir import TLoad

    b.pre.append(TLoad(idx, iota, Expr(), Expr(), b.loc))
    b.in_pre.add(idx.name)
    m = b.op("TROWMAX", b.new(x.dtype, "col"), x)
    hit = b.op("TCMP", b.new(dt.bool_, "full"), x, m, Cond.EQ)
    # NaN is the maximum, as in numpy: a row holding NaN points at its first NaN
    nan = b.op("TCMP", b.new(dt.bool_, "full"), x, x, Cond.NE)
    hit = b.op("TCVT", b.new(dt.int8, "full"), hit)
    nan8 = b.op("TCVT", b.new(dt.int8, "full"), nan)
    any_nan = b.op("TROWMAX", b.new(dt.int8, "col"), nan8)
    pick = b.op(
        "TSEL",
        b.new(dt.int8, "full"),
        b.op("TCMPS", b.new(dt.bool_, "col"), any_nan, 0.0, Cond.NE),
        nan8,
        hit,
    )
    big = b.lit(n, dt.int32)
    sel = b.op(
        "TSEL",
        b.new(dt.int32, "full"),
        b.op("TCMPS", b.new(dt.bool_, "full"), pick, 0.0, Cond.NE),
        idx,
        big,
    )
    return b.op("TROWMIN", b.new(dt.int32, "col"), sel)


for _name, _code in UNARY_OPS.items():
    register_rule("tile", _name)(RowRule(_unary(_code)))
for _name, _code in BINARY_OPS.items():
    register_rule("tile", _name)(RowRule(_binary(_name, _code)))
for _name, _cond in COMPARE_OPS.items():
    register_rule("tile", _name)(RowRule(_compare(_cond)))
for _name, _code in REDUCE_OPS.items():
    register_rule("tile", _name)(RowRule(_reduce(_code), reduces=True))
register_rule("tile", "where")(RowRule(_where))
register_rule("tile", "broadcast_to")(RowRule(_broadcast))
register_rule("tile", "cast")(RowRule(_cast))
register_rule("tile", "bitcast_convert_type")(RowRule(_bitcast))
for _name in ("stop_gradient", "checkpoint_name", "optimization_barrier"):
    register_rule("tile", _name)(RowRule(_identity))
# argmax keeps five one-byte masks and an int32 index tile per element
register_rule("tile", "argmax")(RowRule(_argmax, reduces=True, scratch=16))
