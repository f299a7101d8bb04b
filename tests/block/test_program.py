"""Block programs written by hand (``pto.block.program``): the cube → vector pipeline of the
examples equals numpy, deadlocks and races name the lines that wrote the instructions, and
misuse names the user's line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pypto as pto
from pypto import dtypes as dt
from pypto.block import In, InOut, Out, ProgramError, program
from pypto.block.examples import matmul_scale_relu
from pypto.block.verify import BlockIRError
from pypto.core.tolerance import tolerance
from pypto.isa import parse
from pypto.isa.ir import Instr
from pypto.npu import check_invariants, machine, simulate

SRC = Path(__file__).read_text().splitlines()
HERE = Path(__file__).name
FOUR = machine("ascend910b").replace(clusters=4, name="four")
RNG = np.random.default_rng(11)
f16, f32 = pto.float16, pto.float32


def at(marker: str) -> str:
    """``test_program.py:N`` of the line that ends with ``# marker``."""
    n = next(i + 1 for i, s in enumerate(SRC) if s.rstrip().endswith(f"# {marker}"))
    return f"{HERE}:{n}"


def want(a: np.ndarray, w: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    return np.maximum(alpha * (a.astype(np.float32) @ w.astype(np.float32)), 0)


@pytest.mark.parametrize(
    ("m", "grid", "M"), [("tiny", 1, 256), (FOUR, 4, 512), (FOUR, 3, 256)], ids=str
)
def test_cube_to_vector_pipeline_equals_numpy(m, grid, M) -> None:
    p = matmul_scale_relu(M, 64, 64, machine=m, grid=grid)
    a = RNG.standard_normal((M, 64)).astype(np.float16)
    w = RNG.standard_normal((64, 64)).astype(np.float16)
    prof = p.profile(a, w)
    check_invariants(prof)
    rtol, atol = tolerance(dt.float32, k=64)
    np.testing.assert_allclose(np.asarray(prof.outputs[0]), want(a, w), rtol=rtol, atol=atol)
    np.testing.assert_array_equal(np.asarray(p(a, w)), np.asarray(prof.outputs[0]))
    assert prof.flops == 2 * M * 64 * 64
    # every cluster of the launch ran its share of the tiles on all three of its cores
    assert {e.core for e in prof.events} == {f"{k}{i}" for i in range(grid) for k in ("aic",)} | {
        f"aiv{i}" for i in range(2 * grid)
    }


def test_double_buffering_overlaps_cube_and_vector() -> None:
    p = matmul_scale_relu(512, 64, 64)
    prof = p.profile(np.ones((512, 64), np.float16), np.ones((64, 64), np.float16))
    cube = [(e.start, e.end) for e in prof.events if e.op == "TMATMUL"]
    vec = [(e.start, e.end) for e in prof.events if e.op == "TMULS"]
    # some matmul runs while a vector core scales an earlier tile
    assert any(c0 < v1 and v0 < c1 for c0, c1 in cube for v0, v1 in vec)


def test_levels_are_real_and_carry_the_source() -> None:
    p = matmul_scale_relu()
    assert p.block_ir.verify(p.machine) is p.block_ir
    text = str(p.isa)
    assert str(parse(text)) == text  # the ISA text round-trips
    assert ".blocks 1" in text
    for core in p.isa.cores:
        for ins in core.body:
            assert isinstance(ins, Instr) and ins.loc and ins.loc.startswith("examples.py:")
    # loops stay loops: code size does not grow with the tensor sizes
    assert matmul_scale_relu(1024).isa.static_size() == p.isa.static_size()
    block = str(p.block_ir)
    assert ".buf L0A[0x0, +0x1000 x2 by %p_t] %at" in block
    assert "loop %t in %blk..8 step %nblk {" in block
    # the text is the program: re-parsed, it runs the same on the simulator
    a = RNG.standard_normal((256, 64)).astype(np.float16)
    w = RNG.standard_normal((64, 64)).astype(np.float16)
    ran = simulate(parse(text), "tiny", {"a": a, "w": w})
    prof = p.profile(a, w)
    assert ran.cycles == prof.cycles
    np.testing.assert_array_equal(ran.outputs["y"], np.asarray(prof.outputs[0]))


def test_call_takes_numpy_and_tensors_and_displays() -> None:
    p = matmul_scale_relu(64, 64, 64)
    a = pto.ones((64, 64), f16)
    w = np.full((64, 64), 0.5, np.float16)
    y = p(a, w.astype(np.float32))  # float inputs convert to the declared float16
    assert isinstance(y, pto.Tensor) and y.shape == (64, 64)
    np.testing.assert_array_equal(y.numpy(), np.full((64, 64), 16.0, np.float32))
    bundle = p._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert "Block IR" in bundle["text/html"] and "PTO ISA" in bundle["text/html"]
    assert bundle["text/plain"].startswith("@matmul_scale_relu(a: f16[64,64] in")
    assert "%acc" in bundle["text/html"]
    assert pto.block.program is program


def handoff(*drop: str) -> pto.block.BlockProgram:
    """One cube tile handed to the vector cores through GM, minus the syncs named in ``drop``."""

    @program(In((32, 64), f16), In((64, 64), f16), Out((32, 64), f32), machine="tiny", grid=1)
    def handoff(b, a, w, y):
        ws = b.workspace((32, 64), f32)
        l0a = b.aic.buffer("L0A", (32, 64), f16)
        l0b = b.aic.buffer("L0B", (64, 64), f16)
        acc = b.aic.buffer("L0C", (32, 64), f32)
        ub = b.aiv.buffer("UB", (16, 64), f32)
        with b.aic:
            b.tload(l0a, a[0, 0])
            b.tload(l0b, w[0, 0])
            b.set_flag("MTE2", "M", 0)
            b.wait_flag("MTE2", "M", 0)
            b.tmatmul(acc, l0a, l0b)
            b.set_flag("M", "FIX", 0)
            b.wait_flag("M", "FIX", 0)
            b.tstore(ws[0, 0], acc)  # STORE-WS
            if "xset" not in drop:
                b.xset_flag("FIX", "aiv", 0)
        with b.aiv:
            if "xwait" not in drop:
                b.xwait_flag("MTE2", "aic", 0)  # XWAIT
            b.tload(ub, ws[b.sub * 16, 0])  # LOAD-WS
            if "set" not in drop:
                b.set_flag("MTE2", "V", 0)
            if "wait" not in drop:
                b.wait_flag("MTE2", "V", 0)  # WAIT-LOADED
            b.trelu(ub, ub)  # RELU
            b.set_flag("V", "MTE3", 0)
            b.wait_flag("V", "MTE3", 0)
            b.tstore(y[b.sub * 16, 0], ub)

    return handoff


def test_handoff_is_correct_with_all_its_flags() -> None:
    a = RNG.standard_normal((32, 64)).astype(np.float16)
    w = RNG.standard_normal((64, 64)).astype(np.float16)
    prof = handoff().profile(a, w)
    check_invariants(prof)
    rtol, atol = tolerance(dt.float32, k=64)
    np.testing.assert_allclose(np.asarray(prof.outputs[0]), want(a, w, 1.0), rtol=rtol, atol=atol)


def test_deadlock_names_the_wait_that_is_never_satisfied() -> None:
    p = handoff("xset")  # the cube core never signals: both vector cores wait forever
    a, w = np.ones((32, 64), np.float16), np.ones((64, 64), np.float16)
    with pytest.raises(pto.SimulationError) as e:
        p(a, w)
    msg = str(e.value)
    assert "deadlock" in msg
    assert f"(source {at('XWAIT')}) waits for a flag 0 from aic that is never set" in msg
    assert "aiv0 (vector core 0 of cluster 0)" in msg and "aiv1 (vector core 1" in msg


def test_race_within_a_core_names_both_lines() -> None:
    p = handoff("set", "wait")  # TRELU no longer waits for the load into UB
    a, w = np.ones((32, 64), np.float16), np.ones((64, 64), np.float16)
    with pytest.raises(pto.SimulationError) as e:
        p(a, w)
    msg = str(e.value)
    assert "data race on UB of aiv" in msg
    # both instructions, each with its line (named in the order they started)
    assert f"TLOAD UB[0x0]:f32[16,64], ws[%sub*16, 0]` (source {at('LOAD-WS')})" in msg
    assert f"TRELU UB[0x0]:f32[16,64], UB[0x0]:f32[16,64]` (source {at('RELU')})" in msg
    assert "no flag orders the two" in msg


def test_race_across_cores_names_both_lines() -> None:
    p = handoff("xset", "xwait")  # the vector cores read the workspace with no hand-off flag
    a, w = np.ones((32, 64), np.float16), np.ones((64, 64), np.float16)
    with pytest.raises(pto.SimulationError) as e:
        p(a, w)
    msg = str(e.value)
    assert "data race on GM tensor ws" in msg
    assert f"TSTORE ws[0, 0], L0C[0x0]:f32[32,64]` (source {at('STORE-WS')})" in msg
    assert f"TLOAD UB[0x0]:f32[16,64], ws[%sub*16, 0]` (source {at('LOAD-WS')})" in msg
    assert "order them with a cross-core flag" in msg


def test_an_unmatched_wait_is_refused_before_running() -> None:
    with pytest.raises(BlockIRError) as e:
        handoff("set")
    msg = str(e.value)
    assert "flag MTE2 -> V event 0 is set less often than waited" in msg
    assert f"WAIT_FLAG at {at('WAIT-LOADED')}" in msg


def test_misuse_a_space_the_core_does_not_have() -> None:
    with pytest.raises(ProgramError) as e:

        @program(Out((16, 64), f32))
        def bad(b, y):
            b.aic.buffer("UB", (16, 64), f32)  # UB-ON-AIC

    msg = str(e.value)
    assert "the aic core has no UB; its buffers are L1, L0A, L0B, L0C" in msg
    assert at("UB-ON-AIC") in msg


def test_misuse_a_buffer_larger_than_the_machine_has() -> None:
    with pytest.raises(pto.TileError) as e:

        @program(Out((16, 64), f32), machine="tiny")
        def bad(b, y):
            b.aiv.buffer("UB", (128, 128), f32)
            b.aiv.buffer("UB", (256, 128), f32, slots=2)  # TOO-BIG

    msg = str(e.value)
    assert "UB buffer f32[256,128] x2 needs 262144 bytes at 0x10000" in msg
    assert "UB of each aiv core on tiny has 196608 bytes (131072 available from 0x10000)" in msg
    assert at("TOO-BIG") in msg


def test_misuse_an_instruction_outside_a_section() -> None:
    with pytest.raises(ProgramError) as e:

        @program(In((16, 64), f32), Out((16, 64), f32))
        def bad(b, x, y):
            ub = b.aiv.buffer("UB", (16, 64), f32)
            b.tload(ub, x[0, 0])  # OUTSIDE

    msg = str(e.value)
    assert "b.tload outside a core section" in msg and "`with b.aiv:`" in msg
    assert at("OUTSIDE") in msg


def test_misuse_an_instruction_that_breaks_an_isa_rule() -> None:
    with pytest.raises(ProgramError) as e:

        @program(In((16, 64), f32), Out((16, 64), f32))
        def bad(b, x, y):
            ub = b.aiv.buffer("UB", (16, 64), f32)
            h = b.aiv.buffer("UB", (16, 64), f16)
            with b.aiv:
                b.tadd(ub, ub, h)  # MIXED

    msg = str(e.value)
    assert "TADD: operand 2 is f16, dst is f32" in msg
    assert at("MIXED") in msg


def test_misuse_another_cores_buffer() -> None:
    with pytest.raises(ProgramError) as e:

        @program(In((16, 64), f32), Out((16, 64), f32))
        def bad(b, x, y):
            l1 = b.aic.buffer("L1", (16, 64), f32)
            with b.aiv:
                b.tload(l1, x[0, 0])  # FOREIGN

    msg = str(e.value)
    assert "b.tload in the aiv section names %l1, a buffer of the aic core" in msg
    assert at("FOREIGN") in msg


def test_misuse_wrong_inputs_on_call() -> None:
    p = matmul_scale_relu(64, 64, 64)
    with pytest.raises(pto.ShapeError) as e:
        p(np.ones((32, 64), np.float16), np.ones((64, 64), np.float16))  # WRONG-SHAPE
    msg = str(e.value)
    assert "input 'a' has shape [32, 64]; @matmul_scale_relu declares f16[64,64]" in msg
    assert at("WRONG-SHAPE") in msg
    with pytest.raises(pto.ShapeError, match=r"takes 2 inputs \(a, w\), got 1"):
        p(np.ones((64, 64), np.float16))
    with pytest.raises(pto.DTypeError, match="input 'w' is int32; @matmul_scale_relu declares"):
        p(np.ones((64, 64), np.float16), np.ones((64, 64), np.int32))


def test_misuse_specs_that_do_not_match_the_parameters() -> None:
    with pytest.raises(ProgramError) as e:

        @program(In((16, 64), f32))  # SPECS
        def bad(b, x, y):
            pass

    msg = str(e.value)
    assert "@bad has 2 tensor parameters (x, y) and 1 tensor specs" in msg
    assert at("SPECS") in msg


def test_every_opcode_but_branches_is_a_builder_method() -> None:
    from pypto.block import Builder
    from pypto.isa.opcodes import BRANCHES, OPCODES

    structured = {"LOOP", "ENDLOOP", "JMP", *BRANCHES}
    for op in OPCODES:
        assert hasattr(Builder, op.lower()) is (op not in structured), op


def test_direct_hand_off_through_the_fixpipe_into_ub() -> None:
    a5 = machine("tiny").replace(direct_cube_vector=True, name="tiny_a5")
    p = matmul_scale_relu(256, 64, 64, direct=True, machine=a5)
    assert "ws" not in {t.name for t in p.isa.tensors}  # no GM workspace
    assert "TMOV UB@aiv1[%p_t*0x1000]:f32[16,64], L0C[%p_t*0x2000+0x1000]:f32[16,64]" in str(p.isa)
    a = RNG.standard_normal((256, 64)).astype(np.float16)
    w = RNG.standard_normal((64, 64)).astype(np.float16)
    prof = p.profile(a, w)
    check_invariants(prof)
    rtol, atol = tolerance(dt.float32, k=64)
    np.testing.assert_allclose(np.asarray(prof.outputs[0]), want(a, w), rtol=rtol, atol=atol)


def test_misuse_a_path_the_machine_does_not_have() -> None:
    with pytest.raises(ProgramError) as e:
        matmul_scale_relu(direct=True)  # tiny hands tiles over through GM only
    msg = str(e.value)
    assert "tiny has no path from the cube core to a vector core's buffers" in msg
    assert "at examples.py:" in msg and "hint: on A2/A3" in msg


def test_the_docs_show_the_real_levels() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "expert.md").read_text()
    section = doc[doc.index("## Block level: `pto.block`") :]
    section = section[: section.find("\n## ")] if "\n## " in section else section
    levels = section[section.index("### The two levels") : section.index("### When it goes")]
    blocks = [b.split("```")[0] for b in levels.split("```text\n")[1:]]
    assert len(blocks) == 2
    p = matmul_scale_relu(256, 64, 64)
    for text, level in zip(blocks, (str(p.block_ir), str(p.isa)), strict=True):
        for line in text.splitlines():
            if line.strip() != "...":
                assert line in level.splitlines(), line
    assert repr(p) in section
    # the profile summary shown for the call (timing does not depend on the data)
    a, w = np.zeros((256, 64), np.float16), np.zeros((64, 64), np.float16)
    assert str(p.profile(a, w)) in section


def test_registers_manual_slots_and_rows() -> None:
    @program(In((64, 64), f32), Out((64, 64), f32), machine="tiny")
    def triple(b, x, y):
        ub = b.aiv.buffer("UB", (8, 64), f32, slots=2)
        with b.aiv:
            j = b.reg(0)
            s = b.reg()
            for slot in (0, 1):
                b.set_flag("MTE3", "MTE2", slot)
            with b.range(4) as r:
                b.smod(s, j, 2)
                b.wait_flag("MTE3", "MTE2", s)
                b.tload(ub[s], x[b.sub * 32 + r * 8, 0])
                b.set_flag("MTE2", "V", s)
                b.wait_flag("MTE2", "V", s)
                b.tmuls(ub[s], ub[s], 3.0)
                b.set_flag("V", "MTE3", s)
                b.wait_flag("V", "MTE3", s)
                b.tstore(y[b.sub * 32 + r * 8, 0], ub[s].rows(0, 4))
                b.tstore(y[b.sub * 32 + r * 8 + 4, 0], ub[s].rows(4, 4))
                b.set_flag("MTE3", "MTE2", s)
                b.sadd(j, j, 1)
            for slot in (0, 1):
                b.wait_flag("MTE3", "MTE2", slot)

    text = str(triple.isa)
    assert "SMOV %j, 0" in text and "SMOD %s, %j, 2" in text and "LOOP %r, 0, 4, 1" in text
    assert "TSTORE y[%sub*32+%r*8+4, 0], UB[%s*0x800+0x400]:f32[4,64]" in text
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    prof = triple.profile(x)
    check_invariants(prof)
    np.testing.assert_allclose(np.asarray(prof.outputs[0]), 3 * x, rtol=1e-6)


def test_misuse_a_register_of_the_other_section() -> None:
    with pytest.raises(ProgramError) as e:

        @program(In((64, 64), f32), Out((64, 64), f32))
        def bad(b, x, y):
            ub = b.aiv.buffer("UB", (8, 64), f32)
            l1 = b.aic.buffer("L1", (8, 64), f32)
            with b.aic, b.range(8) as t:
                b.tload(l1, x[t * 8, 0])
            with b.aiv:
                b.tload(ub, x[t * 8, 0])  # OTHER-SECTION

    msg = str(e.value)
    assert "%t is not a register of the aiv section" in msg
    assert at("OTHER-SECTION") in msg


def test_inout_tensors_and_timing_only_runs() -> None:
    @program(In((32, 64), f32), InOut((32, 64), f32), machine="tiny")
    def accumulate(b, x, y):
        ux = b.aiv.buffer("UB", (16, 64), f32)
        uy = b.aiv.buffer("UB", (16, 64), f32)
        with b.aiv:
            b.tload(ux, x[b.sub * 16, 0])
            b.tload(uy, y[b.sub * 16, 0])
            b.set_flag("MTE2", "V", 0)
            b.wait_flag("MTE2", "V", 0)
            b.tadd(uy, uy, ux)
            b.set_flag("V", "MTE3", 0)
            b.wait_flag("V", "MTE3", 0)
            b.tstore(y[b.sub * 16, 0], uy)

    assert ".tensor y f32[32,64] inout" in str(accumulate.isa)
    x = RNG.standard_normal((32, 64)).astype(np.float32)
    y = RNG.standard_normal((32, 64)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(accumulate(x, y)), x + y)
    prof = accumulate.profile(numerics=False)
    assert prof.outputs is None and prof.cycles > 0


def test_a_block_program_addresses_rows_by_scalar_loads() -> None:
    """``b.sld``: the vector core reads each id from UB into a register that addresses the
    row to copy (an embedding lookup written by hand)."""

    @program(In((500, 64), f32), In((16, 1), dt.int32), Out((16, 64), f32), grid=1)
    def lookup(b, table, ids, y):
        ix = b.aiv.buffer("UB", (8, 1), dt.int32)
        row = b.aiv.buffer("UB", (1, 64), f32)
        with b.aiv:
            r = b.reg()
            b.tload(ix, ids[b.sub * 8, 0])
            b.set_flag("MTE2", "S", 0)
            b.wait_flag("MTE2", "S", 0)
            with b.range(0, 8, 1) as i:
                b.sld(r, ix, i)
                b.tload(row, table[r, 0])
                b.set_flag("MTE2", "MTE3", 0)
                b.wait_flag("MTE2", "MTE3", 0)
                b.tstore(y[b.sub * 8 + i, 0], row)
                b.set_flag("MTE3", "MTE2", 0)
                b.wait_flag("MTE3", "MTE2", 0)

    table = RNG.standard_normal((500, 64)).astype(np.float32)
    ids = RNG.integers(0, 500, (16, 1)).astype(np.int32)
    prof = lookup.profile(table, ids)
    check_invariants(prof)
    np.testing.assert_array_equal(np.asarray(prof.outputs[0]), table[ids[:, 0]])
    assert "SLD %" in str(lookup.isa)


def test_a_block_program_sorts_rows_with_the_sorting_unit() -> None:
    """``b.tsort32`` and ``b.tmrgsort`` sort each 128-wide row descending into structures; the
    structures viewed as int32 give the indices (their odd elements) by ``b.tgather``."""

    @program(In((16, 128), f32), In((1, 128), dt.int32), Out((16, 128), dt.int32), grid=1)
    def argsort_desc(b, x, iota, y):
        keys = b.aiv.buffer("UB", (8, 128), f32)
        ix = b.aiv.buffer("UB", (8, 128), dt.int32)
        s0 = b.aiv.buffer("UB", (8, 256), f32)
        s1 = b.aiv.buffer("UB", (8, 256), f32)
        pick = b.aiv.buffer("UB", (8, 128), dt.int32)
        out = b.aiv.buffer("UB", (8, 128), dt.int32)
        with b.aiv:
            b.tload(keys, x[b.sub * 8, 0])
            for r in range(8):  # every row carries its column numbers
                b.tload(ix.rows(r, 1), iota[0, 0])
            b.set_flag("MTE2", "V", 0)
            b.wait_flag("MTE2", "V", 0)
            b.tsort32(s0, keys, ix)
            b.tmrgsort(s1, s0, 32)  # runs of 128 structures: the whole row
            b.texpands(pick, 0.0)  # pick[r, j] = 256 r + 2 j + 1: built from the indices
            b.tmuls(pick, ix, 2.0)
            b.tadds(pick, pick, 1.0)
            for r in range(8):
                b.tadds(pick.rows(r, 1), pick.rows(r, 1), float(256 * r))
            b.tgather(out, s1.view(dt.int32), pick)
            b.set_flag("V", "MTE3", 0)
            b.wait_flag("V", "MTE3", 0)
            b.tstore(y[b.sub * 8, 0], out)

    x = RNG.integers(-20, 20, (16, 128)).astype(np.float32)  # ties: equal keys keep order
    iota = np.arange(128, dtype=np.int32).reshape(1, 128)
    prof = argsort_desc.profile(x, iota)
    check_invariants(prof)
    want = np.argsort(-x, axis=1, kind="stable")
    np.testing.assert_array_equal(np.asarray(prof.outputs[0]), want)
    with pytest.raises(ProgramError, match="view as f16 of a f32 tile: the widths differ"):
        program(In((8, 8), f32), Out((8, 8), f32), grid=1)(
            lambda b, x, y: b.aiv.buffer("UB", (8, 8), f32).view(dt.float16)
        )
