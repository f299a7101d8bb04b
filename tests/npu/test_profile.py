"""The Profile: every field of DESIGN §4, occupancy, source locations and the Chrome trace."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from pypto.npu import Profile, TraceEvent, check_invariants, machine

RNG = np.random.default_rng(11)


def gemm_inputs() -> dict[str, np.ndarray]:
    return {
        "a": RNG.standard_normal((128, 256)).astype(np.float16),
        "b": RNG.standard_normal((256, 128)).astype(np.float16),
    }


def test_every_field_of_the_design(sim, program) -> None:
    prof = sim(program("gemm"), "tiny", gemm_inputs())
    assert isinstance(prof, Profile)
    m = machine("tiny")
    assert prof.cycles > 0 and prof.seconds == pytest.approx(prof.cycles / 1.85e9)
    assert prof.flops == 2 * 128 * 256 * 128
    # On one cube core the cube bound is MACs / 4096 per cycle.
    assert prof.bound == "cube"
    assert prof.roofline_cycles == pytest.approx(128 * 256 * 128 / 4096)
    assert prof.efficiency == pytest.approx(prof.roofline_cycles / prof.cycles) and (
        0 < prof.efficiency <= 1
    )
    assert prof.hbm_bytes == prof.hbm_read_bytes + prof.hbm_write_bytes
    assert prof.hbm_write_bytes == 128 * 128 * 4
    assert prof.hbm_read_bytes >= (128 * 256 + 256 * 128) * 2  # each input at least once
    assert 0 <= prof.l2_hit_rate <= 1
    assert set(prof.utilization) == {"S", "MTE2", "MTE1", "M", "FIX"}
    assert all(0 <= u <= 1 for u in prof.utilization.values())
    assert prof.busy[("aic0", "M")] == pytest.approx(prof.utilization["M"] * prof.cycles)
    assert prof.instructions > prof.program.count("\n")  # dynamic, with loops
    assert prof.outputs is not None and prof.outputs["c"].shape == (128, 128)
    assert prof.cores == ["aic0"]
    assert "gemm on tiny" in str(prof) and "cube-bound" in prof.summary()
    assert m.name == prof.machine.name


def test_trace_events_name_core_pipe_op_times_and_source(sim) -> None:
    prog = """
    .program located
    .tensor x f32[16,64] in
    .tensor y f32[16,64] out
    .core aiv
      TLOAD UB[0x0]:f32[8,64], x[%sub*8, 0]  loc("model.py:3")
      SET_FLAG MTE2, V, 0
      WAIT_FLAG MTE2, V, 0
      TEXP UB[0x0]:f32[8,64], UB[0x0]:f32[8,64]  loc("model.py:4")
      SET_FLAG V, MTE3, 0
      WAIT_FLAG V, MTE3, 0
      TSTORE y[%sub*8, 0], UB[0x0]:f32[8,64]  loc("model.py:5")
    """
    x = RNG.standard_normal((16, 64)).astype(np.float32)
    prof = sim(prog, "tiny", {"x": x})
    np.testing.assert_allclose(prof.outputs["y"], np.exp(x), rtol=1e-6)
    ev = [e for e in prof.events if e.core == "aiv1"]
    assert [(e.pipe, e.op, e.loc) for e in ev] == [
        ("MTE2", "TLOAD", "model.py:3"),
        ("MTE2", "SET_FLAG", None),
        ("V", "WAIT_FLAG", None),
        ("V", "TEXP", "model.py:4"),
        ("V", "SET_FLAG", None),
        ("MTE3", "WAIT_FLAG", None),
        ("MTE3", "TSTORE", "model.py:5"),
    ]
    assert all(isinstance(e, TraceEvent) and e.end > e.start for e in ev)
    assert [e.instr_index for e in ev] == list(range(7))
    assert ev[3].text == 'TEXP UB[0x0]:f32[8,64], UB[0x0]:f32[8,64]  loc("model.py:4")'
    starts = [e.start for e in prof.events]
    assert starts == sorted(starts)


def test_occupancy_over_time(sim, program) -> None:
    x = RNG.standard_normal((512, 256)).astype(np.float16)
    prof = sim(program("vadd_db"), "tiny", {"x": x, "y": x})
    occ = prof.occupancy
    assert set(occ) == {("aiv0", "UB"), ("aiv1", "UB")}
    times, level = occ[("aiv0", "UB")]
    assert np.all(np.diff(times) >= 0) and level[-1] == 0
    # Two slots of three 8 KiB tiles.
    assert prof.peak_occupancy()[("aiv0", "UB")] == 2 * 3 * 16 * 256 * 2


def test_gemm_occupies_its_cube_buffers(sim, program) -> None:
    prof = sim(program("gemm"), "tiny", gemm_inputs())
    peak = prof.peak_occupancy()
    assert peak[("aic0", "L1")] == 2 * 0x8000
    assert peak[("aic0", "L0A")] == peak[("aic0", "L0B")] == 2 * 0x1000
    assert peak[("aic0", "L0C")] == 64 * 64 * 4


def test_chrome_trace(sim, program, tmp_path) -> None:
    a = RNG.standard_normal((256, 64)).astype(np.float16)
    b = RNG.standard_normal((64, 64)).astype(np.float16)
    bias = np.zeros((1, 64), np.float32)
    prof = sim(program("matmul_relu"), "tiny", {"a": a, "b": b, "bias": bias})
    path = tmp_path / "trace.json"
    doc = prof.to_chrome_trace(path)
    assert json.loads(path.read_text()) == doc
    assert doc["displayTimeUnit"] == "ns"
    ev = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    assert procs == {0: "aic0", 1: "aiv0", 2: "aiv1"}
    threads = {(e["pid"], e["args"]["name"]) for e in ev if e["name"] == "thread_name"}
    assert (0, "FIX") in threads and (1, "V") in threads and (2, "MTE3") in threads
    xs = [e for e in ev if e["ph"] == "X"]
    assert len(xs) == len(prof.events)
    us = 1 / 1850.0
    first = prof.events[0]
    assert xs[0]["ts"] == pytest.approx(first.start * us) and xs[0]["name"] == first.op
    assert {e["tid"] for e in xs if e["pid"] == 0} <= {0, 1, 2, 4, 6}
    starts = [e for e in ev if e["ph"] == "s"]
    ends = [e for e in ev if e["ph"] == "f"]
    assert len(starts) == len(ends) > 0
    assert sorted(e["id"] for e in starts) == sorted(e["id"] for e in ends)
    cross = [
        (s, f) for s, f in zip(starts, ends) if s["pid"] != f["pid"]
    ]  # cube -> vector flags draw arrows between cores
    assert cross
    assert all(f["bp"] == "e" and f["ts"] >= s["ts"] for s, f in zip(starts, ends))
    counters = [e for e in ev if e["ph"] == "C"]
    assert {e["name"] for e in counters} >= {"UB bytes", "L0A bytes", "L0C bytes"}


def test_timing_only_profiles_have_no_outputs_but_the_same_trace(sim, program) -> None:
    prof = sim(program("gemm"), "tiny", numerics=False)
    full = sim(program("gemm"), "tiny", gemm_inputs())
    assert prof.outputs is None
    assert prof.events == full.events
    assert prof.peak_occupancy() == full.peak_occupancy()  # occupancy comes from addresses


def test_untraced_runs_keep_the_aggregates(sim, program) -> None:
    from pypto.npu import simulate

    full = sim(program("gemm"), "tiny", numerics=False)
    bare = simulate(program("gemm"), "tiny", numerics=False, trace=False)
    assert not bare.traced and bare.events == [] and bare.to_chrome_trace()["traceEvents"]
    assert (bare.cycles, bare.flops, bare.busy) == (full.cycles, full.flops, full.busy)
    check_invariants(bare)


def test_profiles_pickle(sim, program) -> None:
    prof = sim(program("vadd_db"), "tiny", numerics=False)
    again = pickle.loads(pickle.dumps(prof))
    assert again.cycles == prof.cycles and again.events == prof.events


def test_invariant_violations_are_caught(sim, program) -> None:
    prof = sim(program("vadd_db"), "tiny", numerics=False)
    prof.busy[("aiv0", "V")] = prof.cycles * 2
    with pytest.raises(AssertionError, match=r"busy .* > makespan"):
        check_invariants(prof, rerun=False)
    prof = sim(program("vadd_db"), "tiny", numerics=False)
    prof.roofline_cycles = prof.cycles * 3
    with pytest.raises(AssertionError, match="beat the roofline lower bound"):
        check_invariants(prof, rerun=False)


def test_the_stepping_debugger_stops_after_any_instruction(sim, program) -> None:
    from pypto.npu import simulate

    x = RNG.standard_normal((512, 256)).astype(np.float16)
    y = RNG.standard_normal((512, 256)).astype(np.float16)
    p = program("vadd_db")
    full = sim(p, "tiny", {"x": x, "y": y})
    for n in (1, 3):
        stop = sim(p, "tiny", {"x": x, "y": y}, stop_after=n)
        again = simulate(p, "tiny", {"x": x, "y": y}, stop_after=n)
        assert stop.stopped == again.stopped  # deterministic replay
        assert stop.stopped is not None and stop.stopped.op in ("TLOAD", "TADD", "TSTORE")
        assert stop.cycles <= full.cycles
    # After the first three tile instructions some core has loaded its first x and y tiles.
    stop = sim(p, "tiny", {"x": x, "y": y}, stop_after=3)
    assert stop.buffers is not None and ("GM", "z") in stop.buffers
    loaded = [
        c
        for c in ("aiv0", "aiv1")
        if np.array_equal(stop.tile(c, "UB", 0x0, "f16", (16, 256)), x[16 * int(c[-1]) :][:16])
    ]
    assert loaded
    with pytest.raises(Exception, match="debugger needs numerics"):
        simulate(p, "tiny", stop_after=2, numerics=False)


def test_the_hbm_bound_counts_only_the_lines_a_program_touches() -> None:
    """A slice of a large input reads a few of its lines: counting the whole tensor as
    compulsory traffic would put the roofline above the simulated time (efficiency > 1)."""
    import pypto as pto

    x = np.ones((2048, 2048), np.float32)
    small = pto.jit(lambda x: x[0:8, 0:64] * 2).profile(x, numerics=False)
    check_invariants(small)
    assert 0 < small.efficiency <= 1
    m = small.machine
    lines = 8 * -(-64 * 4 // m.l2_line_bytes)  # eight rows of the input, the 2 KiB output
    want = (lines * m.l2_line_bytes + 8 * 64 * 4) / m.hbm_bytes_per_cycle
    assert small.roofline_cycles == pytest.approx(want)
    whole = pto.jit(lambda x: x * 2).profile(x, numerics=False)
    assert whole.roofline_cycles == pytest.approx(2 * x.nbytes / m.hbm_bytes_per_cycle, rel=1e-6)
