"""Parse the canonical text of the Tensor IR back into a :class:`Func`.

>>> import pypto as pto
>>> from pypto.graph.parser import parse
>>> f = parse('''func @f(%x: f32[2,3]) -> (f32[2]) {
...   %0: f32[2,3] = exp %x
...   %1: f32[2] = sum %0 [axes=(1,) keepdims=false]
...   return %1
... }''')
>>> print(f.eqns[1].op, f.eqns[1].kwargs)
sum {'axes': (1,), 'keepdims': False}
"""

from __future__ import annotations

import ast
import re
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import SourceLoc
from pypto.graph.ir import Atom, Eqn, Func, IRError, Lit, Var
from pypto.ops.table import AVal

_TYPE = re.compile(r"([a-z0-9]+)\[([0-9,]*)\]")
_FUNC = re.compile(r"func @(\w+)\((.*)\) -> \((.*)\) \{$")
_CONST = re.compile(r"%(\w+): (\S+) = const (.*)$")
_EQN = re.compile(r"%(\w+): (\S+) = (\w+)(?: (.*?))?(?:\s+# (\S+):(\d+))?$")
_GROUP = re.compile(r"group @(\w+) (\w+) \{$")


class _Lines:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def err(self, i: int, col: int, expected: str) -> IRError:
        line = self.lines[i] if i < len(self.lines) else ""
        return IRError(
            f"parse error at line {i + 1}, column {col + 1}: expected {expected}\n"
            f"    {line}\n    {' ' * col}^"
        )


def parse_aval(s: str) -> AVal:
    m = _TYPE.fullmatch(s)
    if m is None:
        raise ValueError(s)
    shape = tuple(int(x) for x in m.group(2).split(",") if x)
    return AVal(shape, dt.dtype(m.group(1)))


def _param_value(key: str, text: str) -> Any:
    if key == "dtype":
        return dt.dtype(text)
    if text.strip() in ("nan", "-nan"):
        return float("nan")
    # the IR's spellings of Python's constants, outside the string literals (a format
    # string may say "inf")
    parts = _STRING.split(text)
    for i in range(0, len(parts), 2):
        py = re.sub(r"\bnone\b", "None", parts[i])
        py = re.sub(r"\binf\b", "1e999", py)  # what repr prints for an infinite float
        py = re.sub(r"\btrue\b", "True", py)
        parts[i] = re.sub(r"\bfalse\b", "False", py)
    return ast.literal_eval("".join(parts))


_STRING = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
"""A Python string literal as ``repr`` prints one (the split keeps it as its own part)."""


def _split_params(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        eq = text.index("=", i)
        key = text[i:eq].strip()
        depth = 0
        j = eq + 1
        while j < len(text) and not (text[j] == " " and depth == 0):
            if text[j] in "'\"":  # a string literal: spaces and brackets in it are its own
                m = _STRING.match(text, j)
                j = m.end() if m else j + 1
                continue
            depth += (text[j] in "([") - (text[j] in ")]")
            j += 1
        out.append((key, text[eq + 1 : j]))
        i = j + 1
    return out


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += (ch in "([") - (ch in ")]")
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse(text: str, consts: dict[str, np.ndarray] | None = None) -> Func:
    """Parse a function printed by :func:`pypto.graph.printer.print_func`.

    Constants printed by reference (``const @c0``) are looked up in ``consts``.
    """
    src = _Lines(text)
    lines = src.lines
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines):
        raise src.err(0, 0, "'func @name(...)'")
    m = _FUNC.match(lines[i].strip())
    if m is None:
        raise src.err(i, 0, "'func @name(%arg: type, ...) -> (types) {'")
    name = m.group(1)
    env: dict[str, Var] = {}
    params: list[Var] = []
    for part in _split_top(m.group(2)):
        pm = re.fullmatch(r"%(\w+): (\S+)", part)
        if pm is None:
            raise src.err(i, lines[i].find(part), "'%name: type'")
        v = Var(parse_aval(pm.group(2)), hint=pm.group(1))
        env[pm.group(1)] = v
        params.append(v)
    const_list: list[tuple[Var, np.ndarray]] = []
    eqns: list[Eqn] = []
    groups: list[tuple[str, str]] = []
    group: str | None = None

    def atom(tok: str, li: int) -> Atom:
        if tok.startswith("%"):
            v = env.get(tok[1:])
            if v is None:
                raise src.err(li, max(lines[li].find(tok), 0), f"a defined value, not {tok}")
            return v
        if ":" in tok:
            val, ty = tok.rsplit(":", 1)
            d = dt.dtype(ty)
            py = {"true": True, "false": False}.get(val)
            return Lit(np.asarray(py if py is not None else float(val), d.np))
        raise src.err(li, max(lines[li].find(tok), 0), "'%name' or a literal like '2.5:f32'")

    for li in range(i + 1, len(lines)):
        line = lines[li].strip()
        col = len(lines[li]) - len(lines[li].lstrip())
        if not line:
            continue
        if line.startswith("return"):
            outs = tuple(atom(t, li) for t in _split_top(line[len("return") :]))
            return Func(name, tuple(params), tuple(eqns), outs, tuple(const_list), tuple(groups))
        if line == "}":
            if group is None:
                raise src.err(li, col, "'return' before the closing brace")
            group = None
            continue
        gm = _GROUP.match(line)
        if gm:
            group = gm.group(1)
            groups.append((gm.group(1), gm.group(2)))
            continue
        cm = _CONST.match(line)
        if cm:
            aval = parse_aval(cm.group(2))
            body = cm.group(3).strip()
            if body.startswith("@"):
                if consts is None or body[1:] not in consts:
                    raise src.err(li, col + line.find("@"), f"constant {body} in `consts`")
                arr = np.asarray(consts[body[1:]])
            else:
                arr = np.asarray(
                    _param_value("", body),
                    dtype=np.float64 if aval.dtype.is_floating else aval.dtype.np,
                ).astype(aval.dtype.np)
            v = Var(aval)
            env[cm.group(1)] = v
            const_list.append((v, arr.reshape(aval.shape)))
            continue
        em = _EQN.match(line)
        if em is None:
            raise src.err(li, col, "'%name: type = op operands [params]'")
        rest = em.group(4) or ""
        hint: tuple[tuple[str, Any], ...] = ()
        h = rest.rfind(" hint(")
        if h >= 0 and rest.endswith(")"):
            pairs = _split_top(rest[h + len(" hint(") : -1])
            hint = tuple(
                sorted((k, _param_value(k, v)) for k, v in (p.split("=", 1) for p in pairs))
            )
            rest = rest[:h]
        ps: list[tuple[str, Any]] = []
        if rest.endswith("]") and "[" in rest:
            b = rest.index(" [") if " [" in rest else rest.index("[")
            ptxt = rest[b:].strip()[1:-1]
            rest = rest[:b]
            ps = [(k, _param_value(k, v)) for k, v in _split_params(ptxt)]
        ins = tuple(atom(t, li) for t in _split_top(rest))
        try:
            aval = parse_aval(em.group(2))
        except (ValueError, Exception):
            raise src.err(li, col + line.find(":") + 2, "a type like 'f32[2,3]'") from None
        out = Var(aval)
        env[em.group(1)] = out
        loc = SourceLoc(em.group(5), int(em.group(6))) if em.group(5) else None
        eqns.append(Eqn(em.group(3), ins, tuple(ps), out, loc, group, hint))
    raise src.err(len(lines) - 1, 0, "'return ...' and '}'")
