"""The text assembly parser: the inverse of :mod:`pypto.isa.printer`.

Errors are :class:`~pypto.isa.ir.AsmSyntaxError` with the 1-based line and column and what was
expected there.

>>> from pypto.isa import parse_instr
>>> parse_instr("TADD UB[0x0]:f16[16,16], UB[0x200]:f16[16,16]")  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
pypto.isa.ir.AsmSyntaxError: line 1, column 46: expected ',' after operand 2 of TADD ...
    TADD UB[0x0]:f16[16,16], UB[0x200]:f16[16,16]
                                                 ^
...
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from pypto import dtypes as dt
from pypto.core.errors import DTypeError
from pypto.isa.ir import (
    CORE_KINDS,
    PEERS,
    ROLES,
    AsmSyntaxError,
    Cond,
    CoreProgram,
    Expr,
    GmRef,
    Instr,
    Item,
    Label,
    Operand,
    Pipe,
    Program,
    Reg,
    Space,
    TensorDecl,
    Tile,
)
from pypto.isa.opcodes import OPCODES

__all__ = ["load", "parse", "parse_instr"]

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<str>"[^"\n]*")
  | (?P<num>0[xX][0-9a-fA-F]+|\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?|\d+)
  | (?P<reg>%[A-Za-z_][A-Za-z0-9_]*)
  | (?P<name>\.?[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[\[\],:@+\-*()])
    """,
    re.VERBOSE,
)
_KIND_WORDS = {
    "T": "a tile like UB[0x0]:f16[16,256]",
    "G": "a GM window like x[%row, 0]",
    "E": "an integer expression",
    "R": "a register like %i",
    "F": "a number",
    "I": "an integer",
    "P": "a pipe (" + ", ".join(p.value for p in Pipe) + ")",
    "K": "a cluster peer (" + ", ".join(PEERS) + ")",
    "C": "a condition (" + ", ".join(c.value for c in Cond) + ")",
    "L": "a label",
}
_ON_CHIP = {s.value: s for s in Space if s is not Space.GM}
_DIRECTIVES = (".program", ".blocks", ".tensor", ".core")


class _Tok:
    __slots__ = ("col", "kind", "text")

    def __init__(self, kind: str, text: str, col: int) -> None:
        self.kind = kind
        self.text = text
        self.col = col


class _Line:
    """The tokens of one source line, with a cursor."""

    def __init__(self, text: str, lineno: int) -> None:
        self.text = text
        self.lineno = lineno
        self.toks: list[_Tok] = []
        code = _strip_comment(text)
        pos = 0
        while pos < len(code):
            m = _TOKEN.match(code, pos)
            if m is None:
                raise self.error_at(pos + 1, f"unexpected character {code[pos]!r}")
            kind = m.lastgroup
            assert kind is not None
            if kind != "ws":
                self.toks.append(_Tok(kind, m.group(), pos + 1))
            pos = m.end()
        self.i = 0
        self.end_col = len(code.rstrip()) + 1

    def error_at(self, col: int, msg: str) -> AsmSyntaxError:
        return AsmSyntaxError(msg, line=self.lineno, column=col, text=self.text.rstrip())

    def error(self, expected: str) -> AsmSyntaxError:
        tok = self.peek()
        found = f"{tok.text!r}" if tok else "end of line"
        col = tok.col if tok else self.end_col
        return self.error_at(col, f"expected {expected}, found {found}")

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def at(self, text: str) -> bool:
        t = self.peek()
        return t is not None and t.text == text

    def take(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, text: str, what: str | None = None) -> _Tok:
        if not self.at(text):
            raise self.error(what or repr(text))
        return self.take()

    def expect_kind(self, kind: str, what: str) -> _Tok:
        t = self.peek()
        if t is None or t.kind != kind:
            raise self.error(what)
        return self.take()

    def done(self) -> bool:
        return self.i >= len(self.toks)


def _strip_comment(text: str) -> str:
    # '#' starts a comment except inside a loc("...") string.
    in_str = False
    for i, ch in enumerate(text):
        if ch == '"':
            in_str = not in_str
        elif ch == "#" and not in_str:
            return text[:i]
    return text


def _int(tok: _Tok, ln: _Line) -> int:
    t = tok.text
    if t[:2] in ("0x", "0X"):
        return int(t, 16)
    if not t.isdigit():
        raise ln.error_at(tok.col, f"expected an integer, found {t!r}")
    return int(t)


def _parse_int(ln: _Line) -> int:
    neg = False
    if ln.at("-"):
        ln.take()
        neg = True
    tok = ln.expect_kind("num", "an integer")
    v = _int(tok, ln)
    return -v if neg else v


def _parse_expr(ln: _Line) -> Expr:
    terms: list[tuple[str, int]] = []
    const = 0
    sign = 1
    if ln.at("-"):
        ln.take()
        sign = -1
    while True:
        t = ln.peek()
        if t is not None and t.kind == "num":
            v = _int(ln.take(), ln)
            if ln.at("*"):
                ln.take()
                r = ln.expect_kind("reg", "a register after '*'")
                terms.append((r.text[1:], sign * v))
            else:
                const += sign * v
        elif t is not None and t.kind == "reg":
            name = ln.take().text[1:]
            coef = 1
            if ln.at("*"):
                ln.take()
                coef = _parse_int(ln)
            terms.append((name, sign * coef))
        else:
            raise ln.error("an integer or a register")
        if ln.at("+"):
            ln.take()
            sign = 1
        elif ln.at("-"):
            ln.take()
            sign = -1
        else:
            return Expr.make(terms, const)


def _parse_dtype(ln: _Line) -> dt.DType:
    tok = ln.expect_kind("name", "a dtype (f32, f16, bf16, i32, i8, bool)")
    try:
        return dt.dtype(tok.text)
    except DTypeError:
        raise ln.error_at(
            tok.col, f"unknown dtype {tok.text!r}; expected one of f32, f16, bf16, i32, i8, bool"
        ) from None


def _parse_shape(ln: _Line) -> tuple[int, ...]:
    ln.expect("[", "'[' opening a shape")
    dims = [_int(ln.expect_kind("num", "a dimension"), ln)]
    while ln.at(","):
        ln.take()
        dims.append(_int(ln.expect_kind("num", "a dimension"), ln))
    ln.expect("]", "']' closing the shape")
    return tuple(dims)


def _parse_tile(ln: _Line) -> Tile:
    t = ln.peek()
    if t is None or t.text not in _ON_CHIP:
        raise ln.error("a tile (" + "/".join(_ON_CHIP) + "[addr]:dtype[rows,cols])")
    space = _ON_CHIP[ln.take().text]
    peer = None
    if ln.at("@"):
        ln.take()
        p = ln.peek()
        if p is None or p.text not in PEERS:
            raise ln.error(_KIND_WORDS["K"])
        peer = ln.take().text
    ln.expect("[", "'[' before the tile address")
    addr = _parse_expr(ln)
    ln.expect("]", "']' after the tile address")
    ln.expect(":", "':' before the tile type")
    dtype = _parse_dtype(ln)
    nxt = ln.peek()
    col = nxt.col if nxt else ln.end_col
    shape = _parse_shape(ln)
    if len(shape) != 2:
        raise ln.error_at(col, f"a tile is 2-D [rows,cols], got {len(shape)} dimensions")
    return Tile(space, addr, dtype, (shape[0], shape[1]), peer)


def _parse_gm(ln: _Line) -> GmRef:
    t = ln.peek()
    if t is None or t.kind != "name" or t.text in _ON_CHIP:
        raise ln.error(_KIND_WORDS["G"])
    name = ln.take().text
    ln.expect("[", "'[' after the tensor name")
    row = _parse_expr(ln)
    ln.expect(",", "',' between the row and column of the GM window")
    col = _parse_expr(ln)
    ln.expect("]", "']' closing the GM window")
    return GmRef(name, row, col)


def _parse_float(ln: _Line) -> float:
    sign = 1.0
    if ln.at("-") or ln.at("+"):
        sign = -1.0 if ln.take().text == "-" else 1.0
    t = ln.peek()
    if t is not None and t.kind == "num":
        ln.take()
        return sign * (float(int(t.text, 16)) if t.text[:2] in ("0x", "0X") else float(t.text))
    if t is not None and t.text in ("inf", "nan"):
        ln.take()
        return sign * float(t.text)
    raise ln.error(_KIND_WORDS["F"])


def _parse_word(ln: _Line, kind: str) -> Operand:
    t = ln.peek()
    if t is None or t.kind != "name":
        raise ln.error(_KIND_WORDS[kind])
    text = t.text
    if kind == "P":
        if text not in Pipe.__members__:
            raise ln.error(_KIND_WORDS[kind])
        ln.take()
        return Pipe(text)
    if kind == "C":
        if text not in Cond.__members__:
            raise ln.error(_KIND_WORDS[kind])
        ln.take()
        return Cond(text)
    if kind == "K":
        if text not in PEERS:
            raise ln.error(_KIND_WORDS[kind])
        ln.take()
        return text
    ln.take()
    return text  # label


def _parse_operand(ln: _Line, kind: str) -> Operand:
    if kind == "T":
        return _parse_tile(ln)
    if kind == "G":
        return _parse_gm(ln)
    if kind == "E":
        return _parse_expr(ln)
    if kind == "R":
        return Reg(ln.expect_kind("reg", _KIND_WORDS["R"]).text[1:])
    if kind == "F":
        return _parse_float(ln)
    if kind == "I":
        return _parse_int(ln)
    return _parse_word(ln, kind)


def _parse_instr_line(ln: _Line) -> Instr:
    tok = ln.expect_kind("name", "an opcode or a label")
    op = tok.text
    spec = OPCODES.get(op)
    if spec is None:
        close = difflib.get_close_matches(op.upper(), list(OPCODES), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ln.error_at(tok.col, f"unknown opcode {op!r}{hint}")
    args: list[Operand] = []
    for i, kind in enumerate(spec.sig):
        if i:
            ln.expect(",", f"',' after operand {i} of {op} (signature {spec.sig})")
        args.append(_parse_operand(ln, kind))
    loc = None
    if ln.at("loc"):
        ln.take()
        ln.expect("(", "'(' after loc")
        loc = ln.expect_kind("str", 'a quoted location like "file.py:12"').text[1:-1]
        ln.expect(")", "')' closing loc(...)")
    if not ln.done():
        what = "end of line" if spec.sig else f"end of line ({op} takes no operands)"
        raise ln.error(what)
    return Instr(op, tuple(args), loc)


def parse_instr(text: str) -> Instr:
    """One instruction from its text.

    >>> str(parse_instr("TLOAD UB[%buf*0x2000]:f16[16,128], x[%r*16, 0]"))
    'TLOAD UB[%buf*0x2000]:f16[16,128], x[%r*16, 0]'
    """
    return _parse_instr_line(_Line(text, 1))


def parse(text: str) -> Program:
    """A :class:`~pypto.isa.ir.Program` from its text assembly (verified).

    >>> p = parse(".program p\\n.tensor x f32[4,8] in\\n.core aiv\\n  SMOV %i, %blk*4+1\\n")
    >>> print(p, end="")
    .program p
    .tensor x f32[4,8] in
    <BLANKLINE>
    .core aiv
      SMOV %i, %blk*4+1
    """
    name: str | None = None
    blocks: int | None = None
    tensors: list[TensorDecl] = []
    cores: list[CoreProgram] = []
    body: list[Item] | None = None
    kind = ""
    loops: list[tuple[int, str]] = []
    seen_kinds: set[str] = set()

    def close_core() -> None:
        if body is not None:
            if loops:
                at, raw_line = loops[-1]
                col = len(raw_line) - len(raw_line.lstrip()) + 1
                raise AsmSyntaxError(
                    "LOOP without a matching ENDLOOP", line=at, column=col, text=raw_line.rstrip()
                )
            cores.append(CoreProgram(kind, tuple(body)))

    lineno = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        ln = _Line(raw, lineno)
        if ln.done():
            continue
        first = ln.peek()
        assert first is not None
        if first.text.startswith("."):
            directive = ln.take().text
            if directive != ".program" and name is None and directive in _DIRECTIVES:
                raise ln.error_at(first.col, "expected '.program NAME' before anything else")
            if directive == ".program":
                if name is not None:
                    raise ln.error_at(first.col, "a second .program directive")
                name = ln.expect_kind("name", "a program name").text
            elif directive == ".blocks":
                if body is not None:
                    raise ln.error_at(first.col, ".blocks must come before the first .core")
                blocks = _int(ln.expect_kind("num", "the number of clusters"), ln)
            elif directive == ".tensor":
                if body is not None:
                    raise ln.error_at(first.col, ".tensor must come before the first .core")
                tname = ln.expect_kind("name", "a tensor name")
                if tname.text in _ON_CHIP:
                    raise ln.error_at(tname.col, f"{tname.text!r} is a memory space, not a name")
                dtype = _parse_dtype(ln)
                shape = _parse_shape(ln)
                role_tok = ln.peek()
                if role_tok is None or role_tok.text not in ROLES:
                    raise ln.error("a role (" + ", ".join(ROLES) + ")")
                ln.take()
                tensors.append(TensorDecl(tname.text, dtype, shape, role_tok.text))
            elif directive == ".core":
                close_core()
                k = ln.peek()
                if k is None or k.text not in CORE_KINDS:
                    raise ln.error("a core kind (aic or aiv)")
                if k.text in seen_kinds:
                    raise ln.error_at(k.col, f"a second .core {k.text} template")
                kind = ln.take().text
                seen_kinds.add(kind)
                body = []
                loops = []
            else:
                raise ln.error_at(
                    first.col,
                    f"unknown directive {directive!r}; "
                    "expected .program, .blocks, .tensor or .core",
                )
            if not ln.done():
                raise ln.error("end of line")
            continue
        if name is None:
            raise ln.error_at(first.col, "expected '.program NAME' before anything else")
        if body is None:
            raise ln.error_at(first.col, "expected '.core aic' or '.core aiv' before instructions")
        if first.kind == "name" and len(ln.toks) >= 2 and ln.toks[1].text == ":":
            ln.take()
            ln.take()
            if not ln.done():
                raise ln.error("end of line after the label")
            body.append(Label(first.text))
            continue
        ins = _parse_instr_line(ln)
        if ins.op == "LOOP":
            loops.append((lineno, raw))
        elif ins.op == "ENDLOOP":
            if not loops:
                raise ln.error_at(first.col, "ENDLOOP without a matching LOOP")
            loops.pop()
        body.append(ins)
    if name is None:
        raise AsmSyntaxError("expected '.program NAME'", line=max(lineno, 1), column=1)
    close_core()
    return Program(name, tuple(tensors), tuple(cores), blocks).verify()


def load(path: str | Path) -> Program:
    """Parse a ``.pto`` file; a syntax error names the file."""
    p = Path(path)
    try:
        return parse(p.read_text())
    except AsmSyntaxError as e:
        e.args = (f"{p.name}: {e.args[0]}",)
        raise
