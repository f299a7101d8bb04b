"""The hand-written assembly programs of tests/npu/programs give numpy's results."""

from __future__ import annotations

import numpy as np
import pytest

from pypto import dtypes as dt
from pypto.core.tolerance import tolerance
from pypto.isa.samples import gemm
from pypto.npu import machine

RNG = np.random.default_rng(7)
FOUR = machine("ascend910b").replace(clusters=4, name="four")
MACHINES = ["tiny", FOUR]


def f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


@pytest.mark.parametrize("m", MACHINES, ids=["tiny", "four"])
def test_double_buffered_vector_add(sim, program, m) -> None:
    x = RNG.standard_normal((512, 256)).astype(np.float16)
    y = RNG.standard_normal((512, 256)).astype(np.float16)
    prof = sim(program("vadd_db"), m, {"x": x, "y": y})
    np.testing.assert_array_equal(prof.outputs["z"], x + y)


@pytest.mark.parametrize("m", MACHINES, ids=["tiny", "four"])
def test_gemm_with_l1_l0_tiling_and_k_accumulation(sim, program, m) -> None:
    a = RNG.standard_normal((128, 256)).astype(np.float16)
    b = RNG.standard_normal((256, 128)).astype(np.float16)
    prof = sim(program("gemm"), m, {"a": a, "b": b})
    rtol, atol = tolerance(dt.float32, k=256)
    np.testing.assert_allclose(prof.outputs["c"], f32(a) @ f32(b), rtol=rtol, atol=atol * 16)
    assert prof.flops == 2 * 128 * 256 * 128


def test_a_transposing_l1_to_l0b_move_multiplies_by_the_transpose(sim, program) -> None:
    a = RNG.standard_normal((64, 32)).astype(np.float16)
    b = RNG.standard_normal((48, 32)).astype(np.float16)
    prof = sim(program("matmul_bt"), "tiny", {"a": a, "b": b})
    rtol, atol = tolerance(dt.float32, k=32)
    np.testing.assert_allclose(prof.outputs["c"], f32(a) @ f32(b).T, rtol=rtol, atol=atol)
    (tt,) = [e for e in prof.events if e.op == "TTRANS"]
    m = machine("tiny")
    # on the cube core's MTE1 at the L1 -> L0B rate, like any move into L0B
    assert tt.pipe == "MTE1"
    assert tt.end - tt.start == m.local_latency + 48 * 32 * 2 / m.l1_l0b


def test_transposed_sub_tiles_feed_both_cube_operands(sim, program) -> None:
    a = RNG.standard_normal((64, 64)).astype(np.float16)
    b = RNG.standard_normal((48, 64)).astype(np.float16)
    prof = sim(program("matmul_tt"), "tiny", {"a": a, "b": b})
    rtol, atol = tolerance(dt.float32, k=64)
    np.testing.assert_allclose(prof.outputs["c"], f32(a).T @ f32(b).T, rtol=rtol, atol=atol)
    moves = [e for e in prof.events if e.op == "TEXTRACT_T"]
    m = machine("tiny")
    assert len(moves) == 4 and {e.pipe for e in moves} == {"MTE1"}
    # priced like any move into L0A/L0B: by the bytes it writes
    assert moves[0].end - moves[0].start == m.local_latency + 64 * 32 * 2 / m.l1_l0a


@pytest.mark.parametrize("m", MACHINES, ids=["tiny", "four"])
def test_cube_to_vector_hand_off_in_a_cluster(sim, program, m) -> None:
    a = RNG.standard_normal((256, 64)).astype(np.float16)
    b = RNG.standard_normal((64, 64)).astype(np.float16)
    bias = RNG.standard_normal((1, 64)).astype(np.float32)
    prof = sim(program("matmul_relu"), m, {"a": a, "b": b, "bias": bias})
    want = np.maximum(f32(a) @ f32(b) + bias, 0)
    rtol, atol = tolerance(dt.float32, k=64)
    np.testing.assert_allclose(prof.outputs["y"], want, rtol=rtol, atol=atol * 8)
    # The vector cores read the workspace the cube core wrote: those reads hit L2.
    assert prof.l2_hit_bytes >= 256 * 64 * 4


@pytest.mark.parametrize(
    "m", ["tiny", machine("ascend910b").replace(clusters=3, name="three")], ids=["tiny", "three"]
)
def test_multi_core_reduction(sim, program, m) -> None:
    x = RNG.standard_normal((1024, 64)).astype(np.float32)
    prof = sim(program("colsum"), m, {"x": x})
    rtol, atol = tolerance(dt.float32, k=1024)
    np.testing.assert_allclose(prof.outputs["out"][0], x.sum(axis=0), rtol=rtol, atol=atol * 32)


@pytest.mark.parametrize("name", ["vadd_db", "gemm", "matmul_relu", "colsum"])
def test_timing_only_runs_time_exactly_like_full_runs(sim, program, name) -> None:
    p = program(name)
    inputs = {
        t.name: RNG.standard_normal(t.shape).astype(t.dtype.np)
        for t in p.tensors
        if t.role in ("in", "inout")
    }
    full = sim(p, "tiny", inputs)
    fast = sim(p, "tiny", numerics=False)
    assert fast.outputs is None
    assert (fast.cycles, fast.instructions) == (full.cycles, full.instructions)
    assert [(e.pipe, e.start, e.end) for e in fast.events] == [
        (e.pipe, e.start, e.end) for e in full.events
    ]


def test_programs_read_no_uninitialised_data(sim, program) -> None:
    # With poison, any byte read before it was written is NaN; the results stay exact.
    x = RNG.standard_normal((512, 256)).astype(np.float16)
    y = RNG.standard_normal((512, 256)).astype(np.float16)
    prof = sim(program("vadd_db"), "tiny", {"x": x, "y": y}, poison=True)
    np.testing.assert_array_equal(prof.outputs["z"], x + y)
    a = RNG.standard_normal((256, 64)).astype(np.float16)
    b = RNG.standard_normal((64, 64)).astype(np.float16)
    bias = np.zeros((1, 64), np.float32)
    prof = sim(program("matmul_relu"), "tiny", {"a": a, "b": b, "bias": bias}, poison=True)
    assert np.isfinite(prof.outputs["y"]).all()


@pytest.mark.parametrize(("order", "blocks", "group"), [("row", 3, (1, 1)), ("grouped", 4, (2, 2))])
def test_the_guide_gemm_sample(sim, order: str, blocks: int, group: tuple[int, int]) -> None:
    # Row order on 3 cores leaves the last wave partly idle (8 tiles): the skip branch.
    a = RNG.standard_normal((512, 512)).astype(np.float16)
    b = RNG.standard_normal((512, 1024)).astype(np.float16)
    m = machine("ascend910b").replace(clusters=blocks, name=f"c{blocks}")
    prog = gemm(512, 1024, 512, blocks=blocks, order=order, group=group)
    prof = sim(prog, m, {"a": a, "b": b})
    want = (f32(a) @ f32(b)).astype(np.float16)
    np.testing.assert_allclose(f32(prof.outputs["c"]), f32(want), rtol=2e-3, atol=2e-2)
    assert prof.flops == 2 * 512 * 1024 * 512


@pytest.mark.parametrize("m", MACHINES, ids=["tiny", "four"])
def test_embedding_rows_addressed_by_scalar_loads(sim, program, m) -> None:
    """The scalar unit reads each index from UB (SLD, after a MTE2 -> S flag) and the row DMA
    takes it as its GM row: a gather with one transfer per index."""
    table = RNG.standard_normal((1000, 128)).astype(np.float16)
    ids = RNG.integers(0, 1000, (128, 1)).astype(np.int32)
    prof = sim(program("embedding"), m, {"table": table, "ids": ids}, poison=True)
    np.testing.assert_array_equal(prof.outputs["y"], table[ids[:, 0]])
    # each row is one load and one store; the scalar unit's loads and flags are counted too
    ops = [e.op for e in prof.events]
    assert [ops.count(op) for op in ("SLD", "TLOAD", "TSTORE")] == [128, 128 + 8, 128]
    on_s = {e.op for e in prof.events if e.pipe == "S"}
    assert on_s == {"SLD", "SET_FLAG", "WAIT_FLAG"}


def test_timing_only_scalar_loads_read_zero(sim, program) -> None:
    """Timing-only mode keeps no buffers: every SLD reads 0, so every row is row 0 (all but
    the first hit L2) and the run is no slower than with distinct rows."""
    table = RNG.standard_normal((1000, 128)).astype(np.float16)
    ids = RNG.permutation(1000)[:128].reshape(128, 1).astype(np.int32)
    full = sim(program("embedding"), "tiny", {"table": table, "ids": ids})
    fast = sim(program("embedding"), "tiny", numerics=False)
    same = sim(program("embedding"), "tiny", {"table": table, "ids": np.zeros_like(ids)})
    assert fast.cycles == same.cycles <= full.cycles
    assert fast.instructions == full.instructions
