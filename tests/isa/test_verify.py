"""The verifier: each ISA rule has a test on its error class and message."""

from __future__ import annotations

import pytest

from pypto.core.errors import PyptoError, SimulationError
from pypto.isa import CoreProgram, Instr, IsaError, Pipe, Program, parse, pipe_of
from pypto.npu import machine

HEAD = ".program p\n.tensor x f16[64,256] in\n.tensor y f32[64,64] out\n"


def core(kind: str, *lines: str) -> str:
    return HEAD + f".core {kind}\n" + "".join(f"  {x}\n" for x in lines)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (core("aiv", "TLOAD L1[0]:f16[16,256], x[0, 0]"), "tile is in L1, which the aiv core"),
        (core("aic", "TLOAD UB[0]:f16[16,256], x[0, 0]"), "tile is in UB, which the aic core"),
        (core("aiv", "TLOAD UB[0]:f32[16,256], x[0, 0]"), "x is f16, tile is f32"),
        (core("aiv", "TLOAD UB[0]:f16[16,512], x[0, 0]"), "larger than x's 2-D view 64x256"),
        (core("aiv", "TLOAD UB[0]:f16[16,256], x[60, 0]"), "rows 60..76 outside x (64 rows)"),
        (core("aiv", "TLOAD UB[0]:f16[16,256], z[0, 0]"), "no GM tensor named 'z'"),
        (core("aic", "TLOAD L0C[0]:f16[16,256], x[0, 0]"), "TLOAD cannot write L0C"),
        (core("aiv", "TSTORE y[0, 0], UB[0]:f16[16,64]"), "y is f32, tile is f16"),
        (core("aic", "TSTORE y[0, 0], L0C[0]:f16[16,64]"), "the fixpipe cannot convert f16"),
        (core("aic", "TSTORE y[0, 0], L1[0]:f32[16,64]"), "from UB or L0C, not L1"),
        (
            core("aiv", "TSTORE_S y[0, 0], UB[0]:f32[16,64], 0.5"),
            "TSTORE_S scales a float L0C tile on the fixpipe, not f32 in UB",
        ),
        (core("aic", "TSTORE_S y[0, 0], L0C[0]:f32[16,64], inf"), "TSTORE_S scale inf"),
        (core("aic", "TMOV L0A[0]:f16[16,16], L0B[0]:f16[16,16]"), "no TMOV path L0B → L0A"),
        (core("aic", "TMOV L0A[0]:f16[16,16], L1[0]:f16[16,32]"), "shapes [16, 16] and [16, 32]"),
        (core("aic", "TMOV UB[0]:f32[16,16], L0C[0]:f32[16,16]"), "name it, e.g. UB@aiv0"),
        (core("aiv", "TMOV L1[0]:f32[16,16], UB[0]:f32[16,16]"), "name it, L1@aic"),
        (
            core("aiv", "TADD UB@aiv1[0]:f32[16,16], UB[0]:f32[16,16], UB[0]:f32[16,16]"),
            "only a cross-core TMOV can",
        ),
        (
            core("aic", "TMATMUL L0C[0]:f32[16,16], L0A[0]:f16[16,32], L0B[0]:f16[16,16]"),
            "TMATMUL shapes: [16,32] @ [16,16]",
        ),
        (
            core("aic", "TMATMUL L0C[0]:f16[16,16], L0A[0]:f16[16,16], L0B[0]:f16[16,16]"),
            "accumulates in f32, not f16",
        ),
        (
            core("aic", "TMATMUL L0C[0]:f32[16,16], L0A[0]:f16[16,16], L0B[0]:f32[16,16]"),
            "the cube cannot multiply f16 by f32",
        ),
        (
            core("aic", "TMATMUL L0C[0]:f32[16,16], L1[0]:f16[16,16], L0B[0]:f16[16,16]"),
            "left operand must be in L0A",
        ),
        (core("aiv", "TEXP UB[0]:i32[8,8], UB[0x100]:i32[8,8]"), "TEXP needs a float dtype"),
        (
            core("aiv", "TADD UB[0]:f32[8,8], UB[0]:f32[8,8], UB[0]:f16[8,8]"),
            "operand 2 is f16, dst is f32",
        ),
        (
            core("aiv", "TADD UB[0]:f32[8,8], UB[0]:f32[8,8], UB[0]:f32[2,8]"),
            "shape [2, 8] does not broadcast to [8, 8]",
        ),
        (core("aiv", "TROWSUM UB[0]:f32[1,8], UB[0x100]:f32[8,8]"), "writes [8, 1], not [1, 8]"),
        (
            core("aiv", "TCMP UB[0]:f32[8,8], UB[0]:f32[8,8], UB[0]:f32[8,8], LT"),
            "writes a bool tile",
        ),
        (
            core("aiv", "TSEL UB[0]:f32[8,8], UB[0]:f32[8,8], UB[0]:f32[8,8], UB[0]:f32[8,8]"),
            "mask must be bool",
        ),
        (core("aiv", "TTRANS UB[0]:f32[8,4], UB[0x100]:f32[8,4]"), "writes its transpose"),
        (
            core("aiv", "TAND UB[0]:f32[8,8], UB[0x100]:f32[8,8], UB[0x200]:f32[8,8]"),
            "TAND works on integer tiles, got f32",
        ),
        (core("aiv", "TSHLS UB[0]:f16[8,8], UB[0x100]:f16[8,8], 2.0"), "TSHLS works on integer"),
        (core("aiv", "TNOT UB[0]:f32[8,8], UB[0x100]:f32[8,8]"), "TNOT needs an integer dtype"),
        (
            core("aiv", "TBITCAST UB[0]:f16[8,16], UB[0x100]:f32[8,16]"),
            "TBITCAST keeps the bits: f32 and f16 need one element size",
        ),
        (
            core("aiv", "TBITCAST UB[0]:i32[8,16], UB[0x200]:f32[8,8]"),
            "TBITCAST: shapes [8, 16] and [8, 8] differ",
        ),
        (
            core("aiv", "TGATHER UB[0]:f16[8,8], UB[0x100]:f16[8,8], UB[0x200]:f32[8,8]"),
            "TGATHER indices must be i32, got f32",
        ),
        (
            core("aiv", "TGATHER UB[0]:f16[8,8], UB[0x100]:f16[8,8], UB[0x200]:i32[8,4]"),
            "index tile [8, 4] must have the shape of dst [8, 8]",
        ),
        (
            core("aiv", "TGATHER UB[0]:i8[8,32], UB[0x100]:i8[8,32], UB[0x200]:i32[8,32]"),
            "2- or 4-byte elements of one dtype: src is i8",
        ),
        (
            core("aiv", "TGATHER UB[0]:f16[8,8], UB[0x100]:f32[8,8], UB[0x200]:i32[8,8]"),
            "src is f32, dst is f16",
        ),
        (
            core("aiv", "TSORT32 UB[0]:i32[8,64], UB[0x400]:i32[8,32], UB[0x800]:i32[8,32]"),
            "TSORT32 sorts f32 or f16 values: src is i32",
        ),
        (
            core("aiv", "TSORT32 UB[0]:f32[8,40], UB[0x400]:f32[8,20], UB[0x800]:i32[8,20]"),
            "TSORT32 sorts blocks of 32: src has 20 columns",
        ),
        (
            core("aiv", "TSORT32 UB[0]:f32[8,32], UB[0x400]:f32[8,32], UB[0x800]:i32[8,32]"),
            "writes its structures to [8,64], not [8, 32]",
        ),
        (
            core("aiv", "TSORT32 UB[0]:f16[8,128], UB[0x400]:f16[8,32], UB[0x800]:f32[8,32]"),
            "the index tile must be i32[8, 32] like src, got f32[8, 32]",
        ),
        (
            core("aiv", "TMRGSORT UB[0]:f32[8,64], UB[0x800]:f32[8,32], 32"),
            "TMRGSORT of runs of 32 structures: src [8, 32] and dst [8, 64]",
        ),
        (core("aiv", "TMRGSORT UB[0]:f16[8,64], UB[0x800]:f16[8,64], 0"), "runs of 0 structures"),
        (
            core("aiv", "TMRGSORT2 UB[0]:f32[8,96], UB[0x800]:f32[8,32], UB[0x1000]:f32[8,32]"),
            "TMRGSORT2 of [8, 32] and [8, 32] writes [8,64], not [8, 96]",
        ),
        (
            core("aiv", "TMRGSORT2 UB[0]:f32[8,64], UB[0x800]:f32[8,32], UB[0x1000]:f16[8,32]"),
            "TMRGSORT2 merges lists of whole structures of one dtype and row count",
        ),
        (
            core("aic", "TTRANS L1[0]:f16[32,16], L1[0x400]:f16[16,32]"),
            "TTRANS from L1 writes L0A or L0B, not L1",
        ),
        (core("aic", "TTRANS L0B[0]:f16[32,16], L1[0]:f16[16,16]"), "writes its transpose"),
        (
            core("aiv", "TEXTRACT_T UB[0]:f16[16,32], UB[0x400]:f16[32,16], 0, 0"),
            "TEXTRACT_T goes L1 → L0A/L0B, not UB → UB",
        ),
        (
            core("aic", "TEXTRACT_T L0A[0]:f16[16,32], L1[0]:f16[32,32], 0, 24"),
            "TEXTRACT_T columns 24..40 outside 32",
        ),
        (
            core("aic", "TEXTRACT_T L0A[0]:f16[16,64], L1[0]:f16[32,32], 0, 0"),
            "TEXTRACT_T of [16, 64] from a smaller tile [32, 32]",
        ),
        (
            core("aiv", "TEXTRACT UB[0]:f32[8,8], UB[0x100]:f32[8,16], 0, 12"),
            "columns 12..20 outside 16",
        ),
        (
            core("aiv", "TDIV UB[0]:i32[8,8], UB[0]:i32[8,8], UB[0]:i32[8,8]"),
            "TDIV needs a float dtype",
        ),
        (core("aic", "SET_FLAG MTE2, V, 0"), "the aic core has no V pipe"),
        (core("aiv", "SET_FLAG V, V, 0"), "orders two different pipes, got V → V"),
        (core("aic", "SLD %r, L1[0]:i32[16,1], 0"), "SLD reads an i32 tile in UB, not i32 in L1"),
        (core("aiv", "SET_FLAG MTE2, V, -1"), "event id -1 is negative"),
        (core("aic", "XSET_FLAG FIX, aic, 0"), "'aic' is not a peer of the aic core"),
        (core("aiv", "XSET_FLAG S, aic, 0"), "runs on a non-scalar pipe"),
        (core("aiv", "SMOV %blk, 1"), "%blk is read-only"),
        (core("aiv", "SMOV %a, %b"), "%b is never assigned"),
        (
            core("aiv", "LOOP %i, 0, 4, 1", "SADD %i, %i, 1", "ENDLOOP"),
            "%i is the register of an enclosing LOOP",
        ),
        (core("aiv", "LOOP %i, 0, 4, 0", "ENDLOOP"), "LOOP step must be positive"),
        (core("aiv", "JMP nowhere"), "no label 'nowhere'"),
        (core("aiv", "LOOP %i, 0, 4, 1", "in:", "ENDLOOP", "JMP in"), "crosses a LOOP boundary"),
        (core("aiv", "a:", "a:"), "label 'a' is defined twice"),
        (core("aiv", "SDIV %a, 4, 0"), "SDIV by zero"),
    ],
)
def test_verifier_rules(text: str, needle: str) -> None:
    with pytest.raises(IsaError) as e:
        parse(text)
    assert needle in str(e.value), str(e.value)
    assert isinstance(e.value, PyptoError)


def test_errors_name_core_index_and_instruction() -> None:
    with pytest.raises(IsaError) as e:
        parse(core("aiv", "SMOV %a, 1", "TEXP UB[0]:i32[8,8], UB[0x100]:i32[8,8]"))
    assert str(e.value).startswith("aiv #1 TEXP UB[0x0]:i32[8,8], UB[0x100]:i32[8,8]: ")


def test_program_level_rules() -> None:
    body = CoreProgram("aiv", ())
    with pytest.raises(IsaError, match="no core template"):
        Program("p", (), ()).verify()
    with pytest.raises(IsaError, match="at most one aic and one aiv"):
        Program("p", (), (body, body)).verify()
    with pytest.raises(IsaError, match=r"\.blocks 0 must be positive"):
        Program("p", (), (body,), blocks=0).verify()
    with pytest.raises(SimulationError, match="launches 4 clusters; tiny has 1"):
        Program("p", (), (body,), blocks=4).verify(machine("tiny"))


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (
            "TLOAD UB[0x2F000]:f16[16,256], x[0, 0]",
            "tile [0x2f000, 0x31000) is outside UB [0x0, 0x30000) on tiny",
        ),
        ("TLOAD UB[0x10]:f16[16,256], x[0, 0]", "tile address 0x10 is not 32-byte aligned"),
        ("TEXPANDS UB[0]:f32[256,256], 0.0", "needs 262144 bytes; UB holds 196608 bytes"),
        ("SET_FLAG MTE2, V, 8", "event id 8 outside 0..7"),
    ],
)
def test_machine_rules(line: str, needle: str | None) -> None:
    """A valid program that cannot run on a machine: a SimulationError naming pipe and index."""
    prog = parse(core("aiv", line))
    if needle is None:
        prog.verify(machine("tiny"))
        return
    with pytest.raises(SimulationError) as e:
        prog.verify(machine("tiny"))
    assert needle in str(e.value), str(e.value)
    assert str(e.value).startswith(f"{line.split()[0]}: every aiv core of tiny, pipe ")


def test_misaligned_address_suggests_aligned_ones() -> None:
    with pytest.raises(SimulationError) as e:
        parse(core("aiv", "TLOAD UB[0x10]:f16[16,256], x[0, 0]")).verify(machine("tiny"))
    assert "use 0x0 or 0x20" in str(e.value)


def test_every_instruction_belongs_to_one_pipe() -> None:
    prog = parse(
        core(
            "aic",
            "TLOAD L1[0]:f16[16,256], x[0, 0]",
            "TMOV L0A[0]:f16[16,256], L1[0]:f16[16,256]",
            "TMATMUL L0C[0]:f32[16,16], L0A[0]:f16[16,16], L0B[0]:f16[16,16]",
            "TSTORE y[0, 0], L0C[0]:f32[16,64]",
            "TMOV L1[0]:f16[16,16], L0C[0]:f32[16,16]",
            "SET_FLAG MTE2, MTE1, 0",
            "WAIT_FLAG MTE2, MTE1, 0",
            "SMOV %a, 1",
            "BARRIER",
        )
    )
    pipes = [pipe_of(i) for i in prog.core("aic").instructions()]
    assert pipes == [
        Pipe.MTE2,
        Pipe.MTE1,
        Pipe.M,
        Pipe.FIX,
        Pipe.FIX,
        Pipe.MTE2,
        Pipe.MTE1,
        Pipe.S,
        Pipe.S,
    ]
    v = parse(
        core("aiv", "TMOV UB[0]:f32[4,8], UB[0x100]:f32[4,8]", "TSTORE y[0, 0], UB[0]:f32[4,8]")
    )
    assert [pipe_of(i) for i in v.core("aiv").instructions()] == [Pipe.V, Pipe.MTE3]


def test_code_size_does_not_grow_with_tensor_size() -> None:
    def gemm_like(n: int) -> Program:
        return parse(
            f".program g\n.tensor x f16[{n},256] in\n.core aiv\n"
            f"  LOOP %i, 0, {n // 16}, 1\n    TLOAD UB[0]:f16[16,256], x[%i*16, 0]\n  ENDLOOP\n"
        )

    assert gemm_like(64).static_size() == gemm_like(65536).static_size() == 3


def test_unknown_opcode_in_a_built_program() -> None:
    prog = Program("p", (), (CoreProgram("aiv", (Instr("TFOO"),)),))
    with pytest.raises(IsaError, match="unknown opcode 'TFOO'"):
        prog.verify()


def test_one_instruction_is_checked_on_its_own() -> None:
    from pypto.isa import Program, parse_instr
    from pypto.isa.verify import verify_instr

    prog = Program("p", (), ())
    verify_instr(prog, "aiv", parse_instr("TEXP UB[0x0]:f32[8,8], UB[0x100]:f32[8,8]"))
    with pytest.raises(IsaError, match=r"^aiv TADD .*: TADD: operand 2 is f16, dst is f32"):
        verify_instr(
            prog, "aiv", parse_instr("TADD UB[0x0]:f32[8,8], UB[0x0]:f32[8,8], UB[0x100]:f16[8,8]")
        )
