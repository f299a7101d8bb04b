"""The timing model against closed forms: one pipe sums its durations; double buffering turns
≈3nt into ≈(n+2)t; the cube formula; multi-core speed-up is linear until HBM binds."""

from __future__ import annotations

import itertools
import math

import pytest

from pypto.isa.samples import gemm
from pypto.npu import machine

TINY = machine("tiny")


def test_one_pipe_is_the_sum_of_its_durations(sim) -> None:
    prog = """
    .program vchain
    .core aiv
      TEXPANDS UB[0x0]:f32[32,64], 1.0
      TADD UB[0x2000]:f32[32,64], UB[0x0]:f32[32,64], UB[0x0]:f32[32,64]
      TEXP UB[0x4000]:f32[32,64], UB[0x2000]:f32[32,64]
      TDIV UB[0x6000]:f32[32,64], UB[0x4000]:f32[32,64], UB[0x2000]:f32[32,64]
      TROWSUM UB[0x8000]:f32[32,1], UB[0x6000]:f32[32,64]
      TCVT UB[0x9000]:f16[32,64], UB[0x6000]:f32[32,64]
      TMULS UB[0x9000]:f16[32,64], UB[0x9000]:f16[32,64], 0.5
    """
    m = TINY
    units = math.ceil(32 * 64 * 4 / m.vector_bytes)
    half = math.ceil(32 * 64 * 2 / m.vector_bytes)
    lat = m.vector_latency
    want = [
        lat + units,
        lat + units,
        lat + units * m.vec_factor_transcendental,
        lat + units * m.vec_factor_div,
        lat + units,
        lat + units,
        lat + half,
    ]
    prof = sim(prog, m)
    for core in ("aiv0", "aiv1"):
        ev = [e for e in prof.events if e.core == core]
        assert [e.end - e.start for e in ev] == want
        assert all(a.end == b.start for a, b in itertools.pairwise(ev))  # back to back
        assert prof.busy[(core, "V")] == sum(want)
    assert prof.cycles == m.issue_cycles + sum(want)


STREAM_HEAD = """
.program {name}
.tensor x f16[{rows},256] in
.tensor y f16[{rows},256] out
.core aiv
"""

SINGLE = """
  SET_FLAG MTE3, MTE2, 0
  LOOP %i, 0, {n}, 1
    SMOV %r, %sub*{per}+%i*16
    WAIT_FLAG MTE3, MTE2, 0
    TLOAD UB[0x0]:f16[16,256], x[%r, 0]
    SET_FLAG MTE2, V, 0
    WAIT_FLAG MTE2, V, 0
    TEXP UB[0x0]:f16[16,256], UB[0x0]:f16[16,256]
    SET_FLAG V, MTE3, 0
    WAIT_FLAG V, MTE3, 0
    TSTORE y[%r, 0], UB[0x0]:f16[16,256]
    SET_FLAG MTE3, MTE2, 0
  ENDLOOP
  WAIT_FLAG MTE3, MTE2, 0
"""

DOUBLE = """
  SET_FLAG V, MTE2, 0
  SET_FLAG V, MTE2, 1
  SET_FLAG MTE3, V, 0
  SET_FLAG MTE3, V, 1
  LOOP %i, 0, {n}, 1
    SMOD %b, %i, 2
    SMOV %r, %sub*{per}+%i*16
    WAIT_FLAG V, MTE2, %b
    TLOAD UB[%b*0x2000]:f16[16,256], x[%r, 0]
    SET_FLAG MTE2, V, %b
    WAIT_FLAG MTE2, V, %b
    WAIT_FLAG MTE3, V, %b
    TEXP UB[%b*0x2000+0x4000]:f16[16,256], UB[%b*0x2000]:f16[16,256]
    SET_FLAG V, MTE2, %b
    SET_FLAG V, MTE3, %b
    WAIT_FLAG V, MTE3, %b
    TSTORE y[%r, 0], UB[%b*0x2000+0x4000]:f16[16,256]
    SET_FLAG MTE3, V, %b
  ENDLOOP
  WAIT_FLAG V, MTE2, 0
  WAIT_FLAG V, MTE2, 1
  WAIT_FLAG MTE3, V, 0
  WAIT_FLAG MTE3, V, 1
"""


def stream(body: str, n: int) -> str:
    name = "single" if body is SINGLE else "double"
    return STREAM_HEAD.format(name=name, rows=2 * 16 * n) + body.format(n=n, per=16 * n)


# Copy-in, compute and copy-out of a 16x256 f16 tile all take t = 8192 B / 32 B/cycle = 256
# cycles on this machine; start-up latencies are zero so the closed forms are exact up to the
# one-cycle flags.
BALANCED = TINY.replace(
    name="balanced",
    dma_latency=0,
    vector_latency=0,
    flag_latency=0,
    ub_gm=32.0,
    vec_factor_transcendental=8.0,
)
T = 256


@pytest.mark.parametrize("n", [4, 8, 16])
def test_double_buffering_turns_3nt_into_n_plus_2_t(sim, n: int) -> None:
    single = sim(stream(SINGLE, n), BALANCED, numerics=False)
    double = sim(stream(DOUBLE, n), BALANCED, numerics=False)
    assert single.cycles == pytest.approx(3 * n * T, rel=0.02)
    assert double.cycles == pytest.approx((n + 2) * T, rel=0.02)
    # Without double buffering each unit is busy a third of the time.
    assert single.utilization["V"] == pytest.approx(1 / 3, rel=0.02)
    assert double.utilization["V"] == pytest.approx(n / (n + 2), rel=0.03)


def test_each_stage_takes_t(sim) -> None:
    prof = sim(stream(SINGLE, 2), BALANCED, numerics=False)
    durs = {e.op: e.end - e.start for e in prof.events}
    assert durs["TLOAD"] == durs["TEXP"] == durs["TSTORE"] == T


@pytest.mark.parametrize(
    ("dtype", "acc", "m", "k", "n"),
    [
        ("f16", "f32", 16, 16, 16),
        ("f16", "f32", 128, 64, 256),
        ("bf16", "f32", 17, 33, 15),
        ("f16", "f32", 128, 128, 128),
        ("i8", "i32", 32, 64, 32),
        ("i8", "i32", 48, 40, 16),
    ],
)
def test_cube_cycle_formula(sim, dtype: str, acc: str, m: int, k: int, n: int) -> None:
    mat = f"L0C[0x0]:{acc}[{m},{n}], L0A[0x0]:{dtype}[{m},{k}], L0B[0x0]:{dtype}[{k},{n}]"
    prog = f".program mm\n.core aic\n  TMATMUL {mat}\n  TMATMUL_ACC {mat}\n"
    prof = sim(prog, TINY)
    k0 = TINY.cube_k_i8 if dtype == "i8" else TINY.cube_k_f16
    fractals = math.ceil(m / 16) * math.ceil(k / k0) * math.ceil(n / 16)
    ev = prof.events
    assert [e.end - e.start for e in ev] == [TINY.cube_latency + fractals] * 2
    assert ev[1].start == ev[0].end
    assert prof.flops == 2 * 2 * m * k * n


COPY = """
.program copy
.tensor x f16[6144,256] in
.tensor y f16[6144,256] out
.core aiv
  SMOV %v, %blk*2+%sub
  SMUL %nv, %nblk, 2
  SET_FLAG MTE3, MTE2, 0
  SET_FLAG MTE3, MTE2, 1
  SMOV %j, 0
  LOOP %t, %v, 384, %nv
    SMOD %b, %j, 2
    WAIT_FLAG MTE3, MTE2, %b
    TLOAD UB[%b*0x2000]:f16[16,256], x[%t*16, 0]
    SET_FLAG MTE2, MTE3, %b
    WAIT_FLAG MTE2, MTE3, %b
    TSTORE y[%t*16, 0], UB[%b*0x2000]:f16[16,256]
    SET_FLAG MTE3, MTE2, %b
    SADD %j, %j, 1
  ENDLOOP
  WAIT_FLAG MTE3, MTE2, 0
  WAIT_FLAG MTE3, MTE2, 1
"""


def test_speed_up_is_linear_until_hbm_binds_then_flat(sim) -> None:
    # A streaming copy: each vector core reads at most 32 B/cycle (L2 misses) and writes
    # 64 B/cycle half the time, so it asks ~64 B/cycle of the shared ~865 B/cycle: HBM binds
    # at about 13.5 vector cores (~7 clusters). Start-up latencies are zero here so the knee is
    # sharp (with them, more cores also hide more latency and the knee softens).
    m = machine("ascend910b").replace(dma_latency=0)
    cycles = {b: sim(COPY, m, numerics=False, blocks=b).cycles for b in (1, 2, 4, 6, 12, 24)}
    for b in (2, 4, 6):
        assert cycles[1] / cycles[b] == pytest.approx(b, rel=0.03)
    hbm_bound = 2 * 6144 * 256 * 2 / m.hbm_bytes_per_cycle
    for b in (12, 24):
        assert cycles[b] == pytest.approx(hbm_bound, rel=0.02)
    assert cycles[12] / cycles[24] == pytest.approx(1.0, abs=0.01)


def test_speed_up_with_latencies_never_exceeds_either_limit(sim) -> None:
    m = machine("ascend910b")
    one = sim(COPY, m, numerics=False, blocks=1).cycles
    hbm_bound = 2 * 6144 * 256 * 2 / m.hbm_bytes_per_cycle
    last = one
    for b in (2, 6, 24):
        c = sim(COPY, m, numerics=False, blocks=b).cycles
        assert c <= last  # more cores never slow it down
        assert one / c <= b * 1.001  # never better than linear
        assert c >= hbm_bound  # never faster than HBM allows
        last = c


L2_PROG = """
.program reread
.tensor x f16[64,256] in
.core aiv
  LOOP %i, 0, 2, 1
    TLOAD UB[0x0]:f16[64,256], x[0, 0]
    SET_FLAG MTE2, V, 0
    WAIT_FLAG MTE2, V, 0
  ENDLOOP
"""


def test_l2_hits_are_cheaper_than_hbm(sim) -> None:
    prof = sim(L2_PROG, TINY, numerics=False, blocks=1)
    loads = [e for e in prof.events if e.op == "TLOAD" and e.core == "aiv0"]
    # aiv1 reads the same lines too; whichever comes second hits, and its second read hits.
    first, second = loads
    nbytes = 64 * 256 * 2
    assert first.end - first.start >= TINY.dma_latency + nbytes / TINY.gm_read
    assert second.end - second.start == pytest.approx(TINY.dma_latency + nbytes / TINY.l2_read)
    assert prof.l2_hit_rate >= 0.5


def test_a_small_l2_misses_again(sim) -> None:
    small = TINY.replace(l2_bytes=16 * 1024, name="small-l2")
    prog = L2_PROG.replace("f16[64,256] in", "f16[128,256] in").replace(
        "LOOP %i, 0, 2, 1\n    TLOAD UB[0x0]:f16[64,256], x[0, 0]",
        "LOOP %i, 0, 4, 1\n    SMOD %h, %i, 2\n    TLOAD UB[0x0]:f16[64,256], x[%h*64, 0]",
    )
    prof = sim(prog, small, numerics=False, blocks=1)
    assert prof.l2_hit_rate == 0.0
    big = sim(prog, TINY, numerics=False, blocks=1)
    assert big.l2_hit_rate >= 0.5 and big.cycles < prof.cycles


def test_tile_order_and_swizzling_change_the_time_once_l2_is_small(sim) -> None:
    # 32 output tiles on 4 cube cores. In row order a wave is one row of 4 tiles, sharing A
    # only; grouped 2x2 a wave shares both A and B. With an L2 too small to keep data between
    # waves only the sharing within a wave hits, as in the guide's single-round hit ratio:
    # 1 - (1/(nDim*nL1) + 1/(mDim*mL1)) / (1/nL1 + 1/mL1).
    def ratio(m_dim: int, n_dim: int) -> float:
        return 1 - (1 / (n_dim * 256) + 1 / (m_dim * 128)) / (1 / 256 + 1 / 128)

    m = machine("ascend910b").replace(clusters=4, name="four")
    small = m.replace(l2_bytes=1 << 20, name="four-small-l2")
    big_row = sim(gemm(1024, 1024, 1024, blocks=4, order="row"), m, numerics=False)
    big_grp = sim(
        gemm(1024, 1024, 1024, blocks=4, order="grouped", group=(2, 2)), m, numerics=False
    )
    row = sim(gemm(1024, 1024, 1024, blocks=4, order="row"), small, numerics=False)
    grp = sim(
        gemm(1024, 1024, 1024, blocks=4, order="grouped", group=(2, 2)), small, numerics=False
    )
    assert big_row.cycles == pytest.approx(big_grp.cycles, rel=0.01)  # all of A and B fit
    assert row.l2_hit_rate == pytest.approx(ratio(1, 4), abs=0.01)
    assert grp.l2_hit_rate == pytest.approx(ratio(2, 2), abs=0.01)
    assert grp.cycles < 0.85 * row.cycles


WB_PROG = """
.program rewrite
.tensor w f16[128,256] out
.core aiv
  LOOP %i, 0, 4, 1
    TSTORE w[%sub*64, 0], UB[0x0]:f16[64,256]
    SET_FLAG MTE3, V, 0
    WAIT_FLAG MTE3, V, 0
  ENDLOOP
"""


def test_l2_is_write_back_a_rewritten_workspace_stays_on_chip(sim) -> None:
    prof = sim(WB_PROG, TINY, numerics=False, blocks=1)
    nbytes = 64 * 256 * 2
    # Each vector core's tile dirties its lines once: one write-back each, not four.
    assert prof.hbm_write_bytes == 2 * nbytes
    stores = [e for e in prof.events if e.op == "TSTORE" and e.core == "aiv0"]
    assert len(stores) == 4
    for later in stores[1:]:  # absorbed by L2 at the core's own rate
        assert later.end - later.start == pytest.approx(TINY.dma_latency + nbytes / TINY.ub_gm)


def test_l2_write_back_is_paid_again_once_the_lines_were_evicted(sim) -> None:
    # After each write of its tile, each core reads 64 KiB elsewhere: with a 32 KiB L2 the
    # dirty lines are gone (written back) by the next write, which dirties them again.
    prog = WB_PROG.replace(
        ".tensor w f16[128,256] out", ".tensor w f16[128,256] out\n.tensor x f16[256,256] in"
    ).replace(
        "    SET_FLAG MTE3, V, 0\n",
        "    SET_FLAG MTE3, MTE2, 0\n    WAIT_FLAG MTE3, MTE2, 0\n"
        "    TLOAD UB[0x8000]:f16[128,256], x[%sub*128, 0]\n"
        "    SET_FLAG MTE2, MTE3, 0\n    WAIT_FLAG MTE2, MTE3, 0\n"
        "    SET_FLAG MTE3, V, 0\n",
    )
    small = TINY.replace(l2_bytes=32 * 1024, name="small-l2")
    nbytes = 64 * 256 * 2
    assert sim(prog, small, numerics=False, blocks=1).hbm_write_bytes == 8 * nbytes
    assert sim(prog, TINY, numerics=False, blocks=1).hbm_write_bytes == 2 * nbytes
