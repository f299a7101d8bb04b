"""Every simulation fault is a SimulationError naming core, pipe and instruction (both, for a
race) — including a race created by removing one flag from a correct program."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import pypto as pto
from pypto.core.errors import SimulationError
from pypto.isa import parse
from pypto.npu import machine, simulate

PROGRAMS = Path(__file__).parent / "programs"

RNG = np.random.default_rng(3)


def text(name: str) -> str:
    return (PROGRAMS / f"{name}.pto").read_text()


def without(src: str, line: str) -> str:
    """The program with the first line containing ``line`` removed."""
    lines = src.splitlines()
    i = next(k for k, x in enumerate(lines) if x.strip() == line)
    return "\n".join(lines[:i] + lines[i + 1 :]) + "\n"


def inputs_for(src: str) -> dict[str, np.ndarray]:
    prog = parse(src)
    return {
        t.name: RNG.standard_normal(t.shape).astype(t.dtype.np)
        for t in prog.tensors
        if t.role in ("in", "inout")
    }


def one(body: str, tensors: str = ".tensor x f16[64,256] in\n.tensor y f16[64,256] out\n") -> str:
    return ".program p\n" + tensors + ".core aiv\n" + body


def test_the_error_class_is_public() -> None:
    assert pto.SimulationError is SimulationError
    assert issubclass(SimulationError, pto.PyptoError)


def test_removing_a_flag_creates_a_race_naming_both_instructions() -> None:
    src = without(text("vadd_db"), "WAIT_FLAG MTE2, V, %b")
    with pytest.raises(SimulationError) as e:
        simulate(src, "tiny", inputs_for(src))
    msg = str(e.value)
    assert msg.startswith("T")
    core = re.search(r"data race on UB of (aiv[01]) \(vector core [01] of cluster 0\)", msg)
    assert core, msg
    c = core.group(1)
    assert f"TLOAD ({c}, pipe MTE2, aiv #" in msg and f"TADD ({c}, pipe V, aiv #" in msg
    assert "`TLOAD UB[%a]:f16[16,256], x[%t*16, 0]`" in msg
    assert "no flag orders the two" in msg
    assert "SET_FLAG MTE2, V after the TLOAD (aiv #" in msg
    assert "WAIT_FLAG MTE2, V before the TADD (aiv #" in msg


def race(src: str) -> tuple[str, str, list[tuple[int, float]]]:
    """The race ``src`` makes: its message, its hint, and (index, start) of the core's TLOADs
    and TADDSs in a run without the race check (which does not change the timing)."""
    with pytest.raises(SimulationError) as e:
        simulate(src, "tiny", inputs_for(src))
    c = re.search(r"data race on UB of (aiv[01]) ", str(e.value))
    assert c, str(e.value)
    events = simulate(src, "tiny", inputs_for(src), races=False).events
    starts = [
        (ev.instr_index, ev.start)
        for ev in events
        if ev.core == c.group(1) and ev.op in ("TLOAD", "TADDS")
    ]
    assert e.value.hint is not None
    return str(e.value), e.value.hint, starts


def started(starts: list[tuple[int, float]], i: int) -> float:
    return next(t for k, t in starts if k == i)


def test_load_add_reload_is_correct_with_all_its_flags(sim) -> None:
    src = text("load_add_reload")
    x = inputs_for(src)["x"]
    prof = sim(src, "tiny", {"x": x})
    np.testing.assert_array_equal(prof.outputs["y"], x + np.float16(1))


def test_a_read_after_write_whose_read_starts_first() -> None:
    # The TADDS no longer waits for the load of its input; the load is behind a large one on
    # MTE2, so the read starts first. The hint still orders the load before the read.
    msg, hint, starts = race(without(text("load_add_reload"), "WAIT_FLAG MTE2, V, 0"))
    assert started(starts, 3) < started(starts, 1)
    assert "TLOAD (aiv" in msg and "pipe MTE2, aiv #1 `TLOAD UB[0x0]:f16[16,256]" in msg
    assert re.search(r"writes while TADDS \(aiv[01], pipe V, aiv #3 `TADDS UB\[0x2000\]", msg)
    assert msg.index("aiv #1") < msg.index("aiv #3")
    assert hint == (
        "order them with SET_FLAG MTE2, V after the TLOAD (aiv #1) "
        "and WAIT_FLAG MTE2, V before the TADDS (aiv #3)"
    )


def test_a_read_after_write_whose_write_starts_first() -> None:
    src = without(text("load_add_reload"), "TLOAD UB[0x8000]:f16[64,256], x[0, 0]")
    msg, hint, starts = race(without(src, "WAIT_FLAG MTE2, V, 0"))
    assert started(starts, 0) < started(starts, 2)
    assert re.search(r"TLOAD \(aiv[01], pipe MTE2, aiv #0 .* writes while TADDS", msg)
    assert hint == (
        "order them with SET_FLAG MTE2, V after the TLOAD (aiv #0) "
        "and WAIT_FLAG MTE2, V before the TADDS (aiv #2)"
    )


def test_a_write_after_read_whose_write_starts_first_waits_for_the_read() -> None:
    # The reload no longer waits for the TADDS to have read the tile, and starts first.
    msg, hint, starts = race(without(text("load_add_reload"), "WAIT_FLAG V, MTE2, 0"))
    assert started(starts, 6) < started(starts, 4)
    assert re.search(r"TADDS \(aiv[01], pipe V, aiv #4 .* reads while TLOAD .*aiv #6", msg)
    assert hint == (
        "order them with SET_FLAG V, MTE2 after the TADDS (aiv #4) "
        "and WAIT_FLAG V, MTE2 before the TLOAD (aiv #6)"
    )


def test_a_write_after_read_across_loop_iterations() -> None:
    # The double-buffered loop reloads a slot without waiting for the TADD of two iterations
    # before: first in program order, though later in the template.
    src = without(text("vadd_db"), "WAIT_FLAG V, MTE2, %b")
    with pytest.raises(SimulationError) as e:
        simulate(src, "tiny", inputs_for(src))
    assert re.search(
        r"TADD \(aiv[01], pipe V, aiv #15 .* reads while TLOAD .*aiv #10", str(e.value)
    )
    assert e.value.hint == (
        "order them with SET_FLAG V, MTE2 after the TADD (aiv #15, an earlier loop iteration) "
        "and WAIT_FLAG V, MTE2 before the TLOAD (aiv #10)"
    )


def test_the_correct_program_has_no_race(sim) -> None:
    src = text("vadd_db")
    sim(src, "tiny", inputs_for(src))


def test_a_missing_cross_core_flag_races_on_the_gm_workspace() -> None:
    src = without(text("matmul_relu"), "XWAIT_FLAG MTE2, aic, %s")
    with pytest.raises(SimulationError) as e:
        simulate(src, "tiny", inputs_for(src))
    msg = str(e.value)
    assert "data race on GM tensor ws rows" in msg
    assert "TSTORE (aic0, pipe FIX" in msg and "TLOAD (aiv" in msg and "pipe MTE2" in msg
    assert "cross-core flag" in msg
    # no program order across cores: both directions, the write (the producer's) first; the
    # second half of the first one is the line this program lost
    sub = re.search(r"TLOAD \((aiv[01]), pipe MTE2", msg)
    assert sub is not None
    hint = e.value.hint or ""
    store = re.search(r"the TSTORE \(aic0, aic #(\d+)\)", hint)
    load = re.search(rf"the TLOAD \({sub[1]}, aiv #(\d+)\)", hint)
    assert store is not None and load is not None
    want = (
        f"if the TSTORE (aic0, aic #{store[1]}) must come first, XSET_FLAG FIX, {sub[1]}, <id> "
        f"after the TSTORE (aic0, aic #{store[1]}) and XWAIT_FLAG MTE2, aic, <id> before the "
        f"TLOAD ({sub[1]}, aiv #{load[1]}); if the TLOAD ({sub[1]}, aiv #{load[1]}) must, "
        f"XSET_FLAG MTE2, aic, <id> after"
    )
    assert want in hint, hint


XCLUSTER = """
.program xcluster
.tensor part f32[4,64] tmp
.tensor out f32[1,64] out
.core aiv
  SMOV %v, %blk*2+%sub
  TEXPANDS UB[0x0]:f32[1,64], 1.0
  SET_FLAG V, MTE3, 0
  WAIT_FLAG V, MTE3, 0
  TSTORE part[%v, 0], UB[0x0]:f32[1,64]
  BARRIER
  BNE %v, 0, done
  TLOAD UB[0x100]:f32[1,64], part[2, 0]
  SET_FLAG MTE2, MTE3, 0
  WAIT_FLAG MTE2, MTE3, 0
  TSTORE out[0, 0], UB[0x100]:f32[1,64]
done:
"""


def test_a_race_across_clusters_asks_for_a_barrier() -> None:
    """Vector core 0 reads the row cluster 1's first vector core wrote: with the GM barrier the
    row is there; with a core-local PIPE_BARRIER instead the two race, and cross-core flags do
    not reach another cluster, so the hint is a BARRIER."""
    two = machine("tiny").replace(clusters=2)
    prof = simulate(XCLUSTER, two, {})
    assert prof.outputs is not None
    np.testing.assert_array_equal(prof.outputs["out"], np.ones((1, 64), np.float32))
    with pytest.raises(SimulationError) as e:
        simulate(XCLUSTER.replace("  BARRIER", "  PIPE_BARRIER"), two, {})
    assert "data race on GM tensor part rows 2..3" in str(e.value)
    assert "TSTORE (aiv2, pipe MTE3" in str(e.value) and "TLOAD (aiv0, pipe MTE2" in str(e.value)
    assert e.value.hint == (
        "aiv2 and aiv0 are in different clusters, which cross-core flags do not reach: put a "
        "BARRIER between the two (every core meets there)"
    )


def test_a_missing_flag_in_the_gemm_races_on_l0a() -> None:
    src = without(text("gemm"), "WAIT_FLAG MTE1, M, %q")
    with pytest.raises(SimulationError, match=r"data race on L0A of aic0") as e:
        simulate(src, "tiny", inputs_for(src))
    assert "TEXTRACT (aic0, pipe MTE1" in str(e.value) and "TMATMUL" in str(e.value)


def test_races_can_be_switched_off(sim) -> None:
    src = without(text("vadd_db"), "WAIT_FLAG MTE2, V, %b")
    sim(src, "tiny", inputs_for(src), races=False)


def test_a_wait_that_is_never_satisfied_is_a_deadlock() -> None:
    src = without(text("vadd_db"), "SET_FLAG MTE3, V, 1")
    with pytest.raises(SimulationError, match=r"^deadlock: no instruction can proceed") as e:
        simulate(src, "tiny", numerics=False)
    msg = str(e.value)
    assert "aiv0 (vector core 0 of cluster 0) pipe V at aiv #" in msg
    assert "`WAIT_FLAG MTE3, V, %b` waits for SET_FLAG MTE3, V, 1 that never happens" in msg


def test_a_barrier_not_every_core_reaches_is_a_deadlock() -> None:
    src = one("  BEQ %sub, 1, skip\n  BARRIER\nskip:\n", tensors="")
    with pytest.raises(SimulationError, match="deadlock") as e:
        simulate(src, "tiny")
    assert "waits at aiv #1 `BARRIER`: 1 of 2 cores arrived" in str(e.value)


def test_a_cross_core_wait_without_a_set_is_a_deadlock() -> None:
    src = ".program p\n.core aic\n  XWAIT_FLAG MTE2, aiv1, 3\n.core aiv\n  SMOV %a, 1\n"
    with pytest.raises(SimulationError, match=r"waits for a flag 3 from aiv1 that is never set"):
        simulate(src, "tiny")


def test_a_dynamic_address_outside_a_buffer() -> None:
    src = one("  SMOV %a, 0x2F000\n  TLOAD UB[%a]:f16[16,256], x[0, 0]\n")
    with pytest.raises(SimulationError) as e:
        simulate(src, "tiny", numerics=False)
    msg = str(e.value)
    assert msg.startswith("TLOAD: aiv0 (vector core 0 of cluster 0), pipe MTE2, aiv #1 `TLOAD")
    assert "tile f16[16,256] at 0x2f000 (8192 bytes) is outside UB [0x0, 0x30000)" in msg


def test_a_dynamic_misaligned_address() -> None:
    src = one("  SMOV %a, %sub*16+16\n  TLOAD UB[%a]:f16[16,256], x[0, 0]\n")
    with pytest.raises(SimulationError, match=r"tile address 0x10 in UB is not 32-byte aligned"):
        simulate(src, "tiny", numerics=False)


def test_a_dynamic_gm_window_outside_its_tensor() -> None:
    src = one("  SMOV %r, %sub*56\n  TLOAD UB[0]:f16[16,256], x[%r, 0]\n")
    with pytest.raises(SimulationError, match=r"aiv1 .* GM window rows 56..72 are outside x"):
        simulate(src, "tiny", numerics=False)


def test_a_tile_that_does_not_fit_its_buffer() -> None:
    src = one("  TEXPANDS UB[0]:f32[256,256], 0.0\n", tensors="")
    with pytest.raises(SimulationError, match="needs 262144 bytes; UB holds 196608 bytes"):
        simulate(src, "tiny")


def test_a_static_address_outside_a_buffer() -> None:
    src = one("  TEXPANDS UB[0x2FFE0]:f32[1,64], 0.0\n", tensors="")
    with pytest.raises(SimulationError, match=r"outside UB \[0x0, 0x30000\) on tiny"):
        simulate(src, "tiny")


def test_the_direct_cube_vector_path_needs_a_machine_that_has_it(sim, program) -> None:
    p = program("matmul_relu_direct")
    a = RNG.standard_normal((256, 64)).astype(np.float16)
    b = RNG.standard_normal((64, 64)).astype(np.float16)
    with pytest.raises(SimulationError, match="tiny has no path from the cube core"):
        simulate(p, "tiny", {"a": a, "b": b})
    a5ish = machine("tiny").replace(direct_cube_vector=True, name="a5ish")
    prof = sim(p, a5ish, {"a": a, "b": b})
    want = np.maximum(a.astype(np.float32) @ b.astype(np.float32), 0)
    np.testing.assert_allclose(prof.outputs["y"], want, rtol=1e-5, atol=1e-4)
    assert prof.gm_read_bytes == a.nbytes + b.nbytes  # nothing through GM in between


def test_a_flag_to_oneself_is_an_error() -> None:
    src = ".program p\n.core aiv\n  XSET_FLAG V, aiv0, 0\n"
    with pytest.raises(SimulationError, match="the peer aiv0 is itself"):
        simulate(src, "tiny")


def test_a_peer_the_cluster_lacks() -> None:
    src = ".program p\n.core aiv\n  XSET_FLAG V, aic, 0\n"
    with pytest.raises(SimulationError, match=r"the peer aic is a core this machine's cluster"):
        simulate(src, "tiny")


def test_dynamic_division_by_zero_and_flag_range() -> None:
    with pytest.raises(SimulationError, match=r"aiv #1 `SDIV %b, 1, %a`.*division by zero"):
        simulate(one("  SMOV %a, 0\n  SDIV %b, 1, %a\n", tensors=""), "tiny")
    with pytest.raises(SimulationError, match="flag id 9 is out of range"):
        simulate(one("  SMOV %a, 9\n  SET_FLAG V, MTE3, %a\n", tensors=""), "tiny")


def test_uninitialised_reads_are_poisoned_with_nan_when_asked(sim) -> None:
    src = one(
        "  TLOAD UB[0x0]:f16[16,256], x[%sub*16, 0]\n"
        "  SET_FLAG MTE2, V, 0\n"
        "  WAIT_FLAG MTE2, V, 0\n"
        "  TADD UB[0x4000]:f16[16,256], UB[0x0]:f16[16,256], UB[0x2000]:f16[16,256]\n"
        "  SET_FLAG V, MTE3, 0\n"
        "  WAIT_FLAG V, MTE3, 0\n"
        "  TSTORE y[%sub*16, 0], UB[0x4000]:f16[16,256]\n"
    )
    x = np.ones((64, 256), np.float16)
    plain = sim(src, "tiny", {"x": x})
    np.testing.assert_array_equal(plain.outputs["y"][:32], x[:32])  # UB starts as zeros
    poisoned = sim(src, "tiny", {"x": x}, poison=True)
    assert np.isnan(poisoned.outputs["y"]).all()  # the unread rows and the poisoned sums


@pytest.mark.parametrize(
    ("inputs", "needle"),
    [
        ({}, "needs input 'x' (f16[64,256])"),
        ({"x": np.zeros((64, 255), np.float16)}, "input 'x' has shape [64, 255]"),
        ({"x": np.zeros((64, 256), np.float16), "w": 1}, "has no tensor 'w'"),
        ({"x": np.zeros((64, 256), np.int32)}, "input 'x' is int32; the program declares float16"),
    ],
)
def test_bad_inputs(inputs: dict, needle: str) -> None:
    with pytest.raises(SimulationError) as e:
        simulate(one("  SMOV %a, 1\n"), "tiny", inputs)
    assert needle in str(e.value)


def test_launching_more_clusters_than_the_machine_has() -> None:
    with pytest.raises(SimulationError, match="launches 5 clusters; tiny has 1"):
        simulate(one("  SMOV %a, 1\n", tensors=""), "tiny", blocks=5)


XBLOCKS = """
.program xblocks
.tensor part f32[64,1024] tmp
.tensor out f32[4,64] out
.core aiv
  SMOV %v, %blk*2+%sub
  TEXPANDS UB[0x0]:f32[8,600], 1.0
  SET_FLAG V, MTE3, 0
  WAIT_FLAG V, MTE3, 0
  TSTORE part[%v*12+10, 300], UB[0x0]:f32[8,600]
  BARRIER
  BNE %v, 0, done
  TLOAD UB[0x5000]:f32[4,64], part[22, 800]
  SET_FLAG MTE2, MTE3, 0
  WAIT_FLAG MTE2, MTE3, 0
  TSTORE out[0, 0], UB[0x5000]:f32[4,64]
done:
"""


def test_races_on_windows_across_the_blocks_race_detection_keeps_gm_by() -> None:
    """Race detection keeps a GM tensor's accesses per block of its rows and columns; windows
    spanning several blocks (rows 22..30 and columns 300..900 cross both kinds of boundary)
    still meet every access they overlap."""
    two = machine("tiny").replace(clusters=2)
    prof = simulate(XBLOCKS, two, {})
    assert prof.outputs is not None
    np.testing.assert_array_equal(prof.outputs["out"], np.ones((4, 64), np.float32))
    with pytest.raises(SimulationError) as e:
        simulate(XBLOCKS.replace("  BARRIER", "  PIPE_BARRIER"), two, {})
    msg = str(e.value)
    assert "data race on GM tensor part rows 22..26, columns 800..864" in msg, msg
    assert "TSTORE (aiv1, pipe MTE3" in msg and "TLOAD (aiv0, pipe MTE2" in msg, msg


# ---------------------------------------------------------------- the scalar unit's loads
def embedding_inputs(n: int = 1000) -> dict[str, np.ndarray]:
    return {
        "table": RNG.standard_normal((n, 128)).astype(np.float16),
        "ids": RNG.integers(0, n, (128, 1)).astype(np.int32),
    }


def test_a_scalar_load_without_its_flag_races_with_the_load_it_reads() -> None:
    src = without(text("embedding"), "WAIT_FLAG MTE2, S, 0")
    with pytest.raises(SimulationError) as e:
        simulate(src, "tiny", embedding_inputs())
    msg = str(e.value)
    assert "data race on UB of aiv" in msg and "bytes [0x0, 0x4)" in msg
    assert "TLOAD (aiv0, pipe MTE2, aiv #" in msg and "SLD (aiv0, pipe S, aiv #" in msg
    assert "SET_FLAG MTE2, S after the TLOAD" in str(e.value.hint)
    assert "WAIT_FLAG MTE2, S before the SLD" in str(e.value.hint)


def test_a_load_issued_after_a_scalar_load_needs_no_flag(sim) -> None:
    """The scalar unit finishes an SLD before it issues anything else, so the next block's ids
    may overwrite the tile without a S -> MTE2 flag (embedding.pto keeps one anyway)."""
    src = "".join(
        ln for ln in text("embedding").splitlines(keepends=True) if "FLAG S, MTE2" not in ln
    )
    assert "S, MTE2" not in src
    inputs = embedding_inputs()
    prof = sim(src, "tiny", inputs)
    np.testing.assert_array_equal(prof.outputs["y"], inputs["table"][inputs["ids"][:, 0]])


def test_a_scalar_wait_that_is_never_satisfied_is_a_deadlock() -> None:
    src = without(text("embedding"), "SET_FLAG MTE2, S, 0")
    with pytest.raises(SimulationError, match="deadlock") as e:
        simulate(src, "tiny", embedding_inputs())
    assert (
        "aiv0 (vector core 0 of cluster 0) pipe S at aiv #9 `WAIT_FLAG MTE2, S, 0` waits for "
        "SET_FLAG MTE2, S, 0 that never happens"
    ) in str(e.value)


def test_a_loaded_index_outside_the_table_and_an_element_outside_the_tile() -> None:
    inputs = embedding_inputs()
    inputs["ids"][37] = 1000
    with pytest.raises(SimulationError) as e:
        simulate(text("embedding"), "tiny", inputs)
    assert "`TLOAD UB[%a+0x100]:f16[1,128], table[%row, 0]`" in str(e.value)
    assert "GM window rows 1000..1001 are outside table (1000 rows)" in str(e.value)
    assert "test_errors.py:" in str(e.value)  # the user's line, not the generated front end's
    src = text("embedding").replace(
        "SLD %row, UB[0x0]:i32[16,1], %i", "SLD %row, UB[0x0]:i32[16,1], %i+1"
    )
    with pytest.raises(SimulationError, match="SLD element 16 is outside the 16 of its tile"):
        simulate(src, "tiny", embedding_inputs())


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("SLD %r, UB[0x0]:f32[16,1], 0", "SLD reads an i32 tile in UB, not f32 in UB"),
        ("SLD %r, UB[0x0]:i32[16,1], 16", "SLD element 16 is outside the 16 of its tile"),
        ("WAIT_FLAG S, S, 0", "orders two different pipes, got S → S"),
    ],
)
def test_scalar_load_and_flag_rules(line: str, needle: str) -> None:
    with pytest.raises(pto.PyptoError, match=re.escape(needle)):
        parse(one(f"  {line}\n")).verify(machine("tiny"))
