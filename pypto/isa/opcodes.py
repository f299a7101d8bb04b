"""The opcode table: every instruction's operand signature, group and pipe, defined once.

Signature letters: ``T`` tile, ``G`` GM window, ``E`` integer expression, ``R`` destination
register, ``F`` float literal, ``I`` integer literal, ``P`` pipe, ``K`` peer core
(``aic``/``aiv0``/``aiv1``), ``C`` condition (``EQ`` … ``GE``), ``L`` label.

>>> OPCODES["TMATMUL_ACC"].sig
'TTT'
>>> from pypto.isa import parse_instr
>>> str(pipe_of(parse_instr("TSTORE y[0, 0], L0C[0x0]:f32[16,16]")))
'FIX'
"""

from __future__ import annotations

from dataclasses import dataclass

from pypto.isa.ir import GmRef, Instr, IsaError, Pipe, Space, Tile

__all__ = [
    "BINARY",
    "BRANCHES",
    "OPCODES",
    "REDUCTIONS",
    "SCALAR_BINARY",
    "TILE_SCALAR",
    "UNARY",
    "OpSpec",
    "pipe_of",
]


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One opcode: its operand signature, its group and a one-line description."""

    name: str
    sig: str
    group: str
    """``scalar``, ``branch``, ``loop``, ``move``, ``cube``, ``vector``, ``sync``"""
    doc: str


UNARY: dict[str, str] = {
    "TEXP": "exp",
    "TLOG": "log",
    "TSQRT": "sqrt",
    "TRSQRT": "rsqrt",
    "TRECIP": "reciprocal",
    "TABS": "abs",
    "TNEG": "neg",
    "TRELU": "relu",
    "TTANH": "tanh",
    "TSIGMOID": "sigmoid",
    "TSIN": "sin",
    "TCOS": "cos",
    "TGELU": "gelu (tanh approximation)",
    "TNOT": "bitwise not (integers)",
}
BINARY: dict[str, str] = {
    "TADD": "add",
    "TSUB": "subtract",
    "TMUL": "multiply",
    "TDIV": "divide",
    "TMAX": "maximum",
    "TMIN": "minimum",
    "TPOW": "power",
    "TFMOD": "fmod (the sign of a; an integer a % 0 is 0)",
    "TAND": "bitwise and (integers)",
    "TOR": "bitwise or (integers)",
    "TXOR": "bitwise xor (integers)",
    "TSHL": "shift left (integers; 0 past the width)",
    "TSHR": "arithmetic shift right (integers; the sign past the width)",
}
TILE_SCALAR: dict[str, str] = {k + "S": v + " a scalar" for k, v in BINARY.items()}
REDUCTIONS: dict[str, tuple[str, int]] = {
    "TROWSUM": ("sum", 1),
    "TROWMAX": ("max", 1),
    "TROWMIN": ("min", 1),
    "TCOLSUM": ("sum", 0),
    "TCOLMAX": ("max", 0),
    "TCOLMIN": ("min", 0),
}
"""Reduction opcodes: (kind, reduced axis)."""
SCALAR_BINARY: dict[str, str] = {
    "SADD": "+",
    "SSUB": "-",
    "SMUL": "*",
    "SDIV": "// (floor)",
    "SMOD": "% (floor)",
    "SMIN": "min",
    "SMAX": "max",
}
BRANCHES: dict[str, str] = {
    "BEQ": "==",
    "BNE": "!=",
    "BLT": "<",
    "BLE": "<=",
    "BGT": ">",
    "BGE": ">=",
}


def _specs() -> dict[str, OpSpec]:
    out: list[OpSpec] = [
        OpSpec("SMOV", "RE", "scalar", "register ← expression"),
        OpSpec(
            "SLD",
            "RTE",
            "scalar",
            "register ← int32 element e (row-major) of a UB tile; the tile's writer must "
            "SET_FLAG to S and the scalar unit WAIT_FLAG before it",
        ),
        *(OpSpec(k, "REE", "scalar", f"register ← a {v} b") for k, v in SCALAR_BINARY.items()),
        OpSpec("JMP", "L", "branch", "jump to a label"),
        *(OpSpec(k, "EEL", "branch", f"jump to a label if a {v} b") for k, v in BRANCHES.items()),
        OpSpec("LOOP", "REEE", "loop", "for reg in range(start, stop, step) … ENDLOOP"),
        OpSpec("ENDLOOP", "", "loop", "end of the innermost LOOP"),
        OpSpec("TLOAD", "TG", "move", "GM window → L1/L0A/L0B/UB tile (MTE2)"),
        OpSpec("TSTORE", "GT", "move", "UB tile → GM (MTE3); L0C tile → GM with cast (FIX)"),
        OpSpec(
            "TSTORE_S",
            "GTF",
            "move",
            "L0C tile → GM times a scalar, then the cast (FIX: the fixpipe's scalar "
            "pre-quantisation scale, applied in f32 before rounding)",
        ),
        OpSpec(
            "TMOV",
            "TT",
            "move",
            "L1 → L0A/L0B/UB (MTE1); L0C → L1/UB with cast (FIX); UB → L1 (MTE3); UB → UB (V)",
        ),
        OpSpec(
            "TEXTRACT",
            "TTEE",
            "move",
            "sub-tile at (row, col) of a tile: L1 → L0A/L0B (MTE1), UB → UB (V)",
        ),
        OpSpec(
            "TEXTRACT_T",
            "TTEE",
            "move",
            "transposed sub-tile: dst[r, c] = src[row + c, col + r], L1 → L0A/L0B (MTE1)",
        ),
        OpSpec("TMATMUL", "TTT", "cube", "L0C ← L0A @ L0B (f16/bf16/f32 → f32, int8 → int32)"),
        OpSpec("TMATMUL_ACC", "TTT", "cube", "L0C += L0A @ L0B"),
        *(OpSpec(k, "TT", "vector", f"elementwise {v}") for k, v in UNARY.items()),
        *(OpSpec(k, "TTT", "vector", f"elementwise {v}") for k, v in BINARY.items()),
        *(OpSpec(k, "TTF", "vector", f"elementwise {v}") for k, v in TILE_SCALAR.items()),
        OpSpec("TCMP", "TTTC", "vector", "bool tile ← a <cond> b"),
        OpSpec("TCMPS", "TTFC", "vector", "bool tile ← a <cond> scalar"),
        OpSpec("TSEL", "TTTT", "vector", "dst ← mask ? a : b"),
        OpSpec(
            "TGATHER",
            "TTT",
            "vector",
            "dst[i, j] ← src[idx[i, j]]: idx holds int32 element indices into src (row-major)",
        ),
        OpSpec(
            "TSORT32",
            "TTT",
            "vector",
            "dst ← each block of 32 elements of src's rows sorted descending (IEEE total order; "
            "equal values keep their order) as 8-byte (value, index) structures, the index "
            "taken from idx (int32)",
        ),
        OpSpec(
            "TMRGSORT",
            "TTI",
            "vector",
            "dst ← each group of 4 consecutive sorted runs of n structures in src's rows merged "
            "into one run (descending; on equal values the earlier run first)",
        ),
        OpSpec(
            "TMRGSORT2",
            "TTT",
            "vector",
            "dst ← the sorted structure lists src0 and src1 merged, row by row (descending; on "
            "equal values src0's first)",
        ),
        OpSpec(
            "TCVT", "TT", "vector", "convert dtype (round to nearest even; float→int truncates)"
        ),
        OpSpec(
            "TBITCAST",
            "TT",
            "vector",
            "dst ← src's bits read as dst's dtype (the same element size; a vector copy)",
        ),
        OpSpec("TEXPANDS", "TF", "vector", "fill a tile with a scalar"),
        *(
            OpSpec(k, "TT", "vector", f"{v[0]} over {'columns' if v[1] else 'rows'}")
            for k, v in REDUCTIONS.items()
        ),
        OpSpec("TROWEXPAND", "TT", "vector", "broadcast a [r,1] tile across columns"),
        OpSpec("TCOLEXPAND", "TT", "vector", "broadcast a [1,c] tile across rows"),
        OpSpec("TTRANS", "TT", "vector", "transpose a tile: UB → UB (V), L1 → L0A/L0B (MTE1)"),
        OpSpec("SET_FLAG", "PPE", "sync", "on the source pipe: signal event id to the dest pipe"),
        OpSpec("WAIT_FLAG", "PPE", "sync", "on the dest pipe: wait for the source pipe's event"),
        OpSpec("XSET_FLAG", "PKE", "sync", "on a pipe: signal a cross-core flag to a cluster peer"),
        OpSpec("XWAIT_FLAG", "PKE", "sync", "on a pipe: wait for a cluster peer's flag"),
        OpSpec("PIPE_BARRIER", "", "sync", "front end waits until every pipe of the core drains"),
        OpSpec("BARRIER", "", "sync", "GM barrier: every core of the launch drains and meets"),
    ]
    return {s.name: s for s in out}


OPCODES: dict[str, OpSpec] = _specs()

GM_STORES = frozenset({"TSTORE", "TSTORE_S"})
"""The opcodes that write GM (``TSTORE_S`` is ``TSTORE`` with the fixpipe's scale)."""

_FIXED_PIPE: dict[str, Pipe] = {
    "TLOAD": Pipe.MTE2,
    "TSTORE_S": Pipe.FIX,
    "TMATMUL": Pipe.M,
    "TMATMUL_ACC": Pipe.M,
    "PIPE_BARRIER": Pipe.S,
    "BARRIER": Pipe.S,
}


def pipe_of(ins: Instr) -> Pipe:
    """The pipe an instruction runs on (moves: decided by their memory spaces)."""
    op = ins.op
    spec = OPCODES.get(op)
    if spec is None:
        raise IsaError(f"unknown opcode {op!r}")
    if spec.group in ("scalar", "branch", "loop"):
        return Pipe.S
    if spec.group == "vector":
        if op == "TTRANS" and isinstance(ins.args[1], Tile) and ins.args[1].space is Space.L1:
            return Pipe.MTE1  # the chip's transposing 2-D load into L0
        return Pipe.V
    if op in _FIXED_PIPE:
        return _FIXED_PIPE[op]
    a = ins.args
    if op == "SET_FLAG":
        return a[0]  # type: ignore[return-value]
    if op == "WAIT_FLAG":
        return a[1]  # type: ignore[return-value]
    if op in ("XSET_FLAG", "XWAIT_FLAG"):
        return a[0]  # type: ignore[return-value]
    if op == "TSTORE":
        src = a[1]
        assert isinstance(src, Tile) and isinstance(a[0], GmRef)
        return Pipe.FIX if src.space is Space.L0C else Pipe.MTE3
    # TMOV / TEXTRACT / TEXTRACT_T
    dst, src = a[0], a[1]
    assert isinstance(dst, Tile) and isinstance(src, Tile)
    if src.space is Space.L1:
        return Pipe.MTE1
    if src.space is Space.L0C:
        return Pipe.FIX
    if src.space is Space.UB and dst.space is Space.L1:
        return Pipe.MTE3
    return Pipe.V
