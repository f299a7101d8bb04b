"""Text assembly: print → parse → print is identical, and parse errors say where and what."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pypto import dtypes as dt
from pypto.isa import (
    OPCODES,
    AsmSyntaxError,
    Cond,
    Expr,
    GmRef,
    Instr,
    Pipe,
    Reg,
    Space,
    Tile,
    format_instr,
    load,
    parse,
    parse_instr,
)

PROGRAMS = sorted((Path(__file__).parent.parent / "npu" / "programs").glob("*.pto"))


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_hand_written_programs_round_trip(path: Path) -> None:
    prog = load(path)
    text = str(prog)
    again = parse(text)
    assert str(again) == text
    assert again == prog


def test_the_canonical_text_of_a_program() -> None:
    src = """
    .program demo            # comments and spacing are not kept
    .blocks 2
    .tensor x   bf16[4,2,64] in
    .tensor y f32[8, 64] out
    .core aiv
      SMOV %r, %blk * 4 + %sub*2 - 1
      LOOP %i, 0, %r, 1
        TLOAD UB[%i * 512 + 64]:bf16[1,64], x[%i, 0]   loc("model.py:7")
      ENDLOOP
    top:
      BLT %r, 3, top
      TCMPS UB[0]:bool[8,64], UB[0x200]:f32[8,64], -1.5e-3, GE
    """
    expected = (
        ".program demo\n"
        ".blocks 2\n"
        ".tensor x bf16[4,2,64] in\n"
        ".tensor y f32[8,64] out\n"
        "\n"
        ".core aiv\n"
        "  SMOV %r, %blk*4+%sub*2-1\n"
        "  LOOP %i, 0, %r, 1\n"
        '    TLOAD UB[%i*0x200+0x40]:bf16[1,64], x[%i, 0]  loc("model.py:7")\n'
        "  ENDLOOP\n"
        "top:\n"
        "  BLT %r, 3, top\n"
        "  TCMPS UB[0x0]:bool[8,64], UB[0x200]:f32[8,64], -0.0015, GE\n"
    )
    assert str(parse(src)) == expected
    assert str(parse(expected)) == expected
    ins = parse(src).core("aiv").instructions()[2]
    assert ins.loc == "model.py:7"


# --- random instructions: every opcode, every operand form ---

regs = st.sampled_from(["i", "j", "blk", "sub", "k_2"])
exprs = st.builds(
    Expr.make,
    st.lists(st.tuples(regs, st.integers(-300, 300)), max_size=3),
    st.integers(-(2**20), 2**20),
)
dtypes = st.sampled_from([dt.float32, dt.float16, dt.bfloat16, dt.int32, dt.int8, dt.bool_])
tiles = st.builds(
    Tile,
    st.sampled_from([s for s in Space if s is not Space.GM]),
    exprs,
    dtypes,
    st.tuples(st.integers(1, 512), st.integers(1, 512)),
    st.sampled_from([None, "aic", "aiv0", "aiv1"]),
)
gms = st.builds(GmRef, st.sampled_from(["x", "w_1", "out"]), exprs, exprs)
floats = st.floats(allow_nan=False, width=32) | st.sampled_from([0.0, -0.0, 1e-30, 3.5])
KIND: dict[str, st.SearchStrategy] = {
    "T": tiles,
    "G": gms,
    "E": exprs,
    "R": st.builds(Reg, regs),
    "F": floats,
    "I": st.integers(0, 7),
    "P": st.sampled_from(list(Pipe)),
    "K": st.sampled_from(["aic", "aiv0", "aiv1"]),
    "C": st.sampled_from(list(Cond)),
    "L": st.sampled_from(["loop", "done_1"]),
}


@st.composite
def instructions(draw: st.DrawFn) -> Instr:
    spec = OPCODES[draw(st.sampled_from(sorted(OPCODES)))]
    args = tuple(draw(KIND[k]) for k in spec.sig)
    loc = draw(st.sampled_from([None, "f.py:3", "dir/m y.py:120"]))
    return Instr(spec.name, args, loc)


@given(instructions())
def test_any_instruction_round_trips(ins: Instr) -> None:
    text = format_instr(ins)
    again = parse_instr(text)
    assert again == ins
    assert format_instr(again) == text


@given(exprs)
def test_expressions_print_canonically(e: Expr) -> None:
    tile = Tile(Space.UB, e, dt.float32, (1, 8))  # tile addresses print in hexadecimal
    assert parse_instr(f"TEXPANDS {tile}, 0.0").args[0] == tile
    assert parse_instr(f"SMOV %d, {e}").args[1] == e


# --- parse errors: line, column and what was expected ---


@pytest.mark.parametrize(
    ("text", "line", "col", "needle"),
    [
        (
            ".program p\n.core aiv\n  TLAOD UB[0]:f16[1,16], x[0, 0]\n",
            3,
            3,
            "unknown opcode 'TLAOD'; did you mean TLOAD?",
        ),
        (
            ".program p\n.core aiv\n  TADD UB[0]:f16[1,16], UB[0]:f16[1,16]\n",
            3,
            40,
            "expected ',' after operand 2 of TADD",
        ),
        (
            ".program p\n.core aiv\n  TEXP UB[0]:f17[1,16], UB[0]:f16[1,16]\n",
            3,
            14,
            "unknown dtype 'f17'",
        ),
        (
            ".program p\n.core aiv\n  TEXP UB[0]:f16[1,16,2], UB[0]:f16[1,16]\n",
            3,
            17,
            "a tile is 2-D",
        ),
        (".program p\n.core aic\n  SET_FLAG MTE2, VEC, 0\n", 3, 18, "expected a pipe"),
        (
            ".program p\n.core aiv\n  SMOV %i, 3 +\n",
            3,
            15,
            "expected an integer or a register, found end of line",
        ),
        (".program p\n.core aiv\n  SMOV %i, 3 $\n", 3, 14, "unexpected character '$'"),
        (".program p\n.core aiv\n  ENDLOOP\n", 3, 3, "ENDLOOP without a matching LOOP"),
        (
            ".program p\n.core aiv\n  LOOP %i, 0, 4, 1\n  SMOV %j, 1\n",
            3,
            3,
            "LOOP without a matching ENDLOOP",
        ),
        (".tensor x f16[4] in\n", 1, 1, "expected '.program NAME' before anything else"),
        (".program p\n  SMOV %i, 1\n", 2, 3, "expected '.core aic' or '.core aiv'"),
        (".program p\n.tensor x f16[4] input\n", 2, 18, "expected a role (in, out, inout, tmp)"),
        (".program p\n.core gpu\n", 2, 7, "expected a core kind (aic or aiv)"),
        (".program p\n.core aiv\n.core aiv\n", 3, 7, "a second .core aiv template"),
        (".program p\n.cores aiv\n", 2, 1, "unknown directive '.cores'"),
        (
            ".program p\n.core aiv\n  TLOAD UB[0]:f16[1,16], UB[0, 0]\n",
            3,
            26,
            "expected a GM window",
        ),
        (
            ".program p\n.core aiv\n  PIPE_BARRIER ALL\n",
            3,
            16,
            "expected end of line (PIPE_BARRIER takes no operands)",
        ),
        ('.program p\n.core aiv\n  BARRIER  loc("a.py:1"\n', 3, 24, "expected ')'"),
    ],
)
def test_parse_errors_give_line_column_and_expectation(
    text: str, line: int, col: int, needle: str
) -> None:
    with pytest.raises(AsmSyntaxError) as e:
        parse(text)
    assert (e.value.line, e.value.column) == (line, col), str(e.value)
    assert needle in str(e.value)
    assert str(e.value).startswith(f"line {line}, column {col}:")


def test_the_error_shows_the_line_with_a_caret() -> None:
    with pytest.raises(AsmSyntaxError) as e:
        parse(".program p\n.core aiv\n  SMOV %i, 3 $\n")
    lines = str(e.value).splitlines()
    assert lines[1] == "      SMOV %i, 3 $"
    assert lines[2] == "    " + " " * 13 + "^"


def test_load_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "bad.pto"
    f.write_text(".program p\n.core aiv\n  NOPE\n")
    with pytest.raises(AsmSyntaxError, match=r"^bad\.pto: line 3, column 3"):
        load(f)
