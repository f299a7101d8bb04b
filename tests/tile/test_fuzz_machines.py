"""Random programs on random machines: ``machine.replace`` accepts any valid core counts,
buffer sizes, vector width, sync resources, latencies and the direct cube-vector paths, and a
compiled program must follow them — eager mode's results, or a ``TileError`` that names what
does not fit and says what would. Never a crash in a lower level, never a wrong result."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import pypto as pto
from pypto.graph.tracer import trace
from pypto.reference import compare
from pypto.reference.jax_bridge import precisions, sum_lengths
from tests.graph.test_fuzz import BINARY, UNARY, build, programs
from tests.graph.test_fuzz_layout import build as build_layout
from tests.graph.test_fuzz_layout import programs as layout_programs
from tests.tile.test_fuzz_attention import case_size, cases, check_case

KiB = 1024


@st.composite
def machines(draw: st.DrawFn) -> Any:
    base = pto.npu.machine(draw(st.sampled_from(["tiny", "ascend910b"])))
    changes: dict[str, Any] = {"name": "fuzzed"}
    of = st.sampled_from
    options: dict[str, Any] = {
        "clusters": st.integers(1, 30),
        "aiv_per_cluster": st.integers(1, 2),
        "ub_bytes": of([16 * KiB, 48 * KiB, 96 * KiB, 128 * KiB, 256 * KiB]),
        "l1_bytes": of([64 * KiB, 128 * KiB, 256 * KiB, 1024 * KiB]),
        "l0a_bytes": of([8 * KiB, 16 * KiB, 32 * KiB, 128 * KiB]),
        "l0b_bytes": of([8 * KiB, 16 * KiB, 32 * KiB, 128 * KiB]),
        "l0c_bytes": of([16 * KiB, 32 * KiB, 64 * KiB, 256 * KiB]),
        "vector_bytes": of([32, 64, 128, 512]),
        "event_ids": st.integers(1, 16),
        "cross_flag_ids": st.integers(1, 16),
        "direct_cube_vector": st.booleans(),
        "l2_bytes": of([64 * KiB, 1024 * KiB, 8 * 1024 * KiB]),
        "dma_latency": st.integers(1, 500),
        "cross_flag_latency": st.integers(1, 500),
        "barrier_latency": st.integers(0, 5000),
        "gm_read": st.sampled_from([4.0, 32.0, 100.0]),
        "cube_m": of([8, 16, 32]),
        "cube_n": of([8, 16, 32]),
        "cube_k_f16": of([8, 16, 32]),
        "align_bytes": of([32, 64]),
        "l2_line_bytes": of([128, 512, 1024]),
    }
    for name in draw(st.sets(st.sampled_from(sorted(options)), max_size=10)):
        changes[name] = draw(options[name])
    return base.replace(**changes)


def _refused(e: pto.TileError, machine: Any, what: Any) -> None:
    """Only a machine with less than the chip's may refuse a program: its buffers' bytes or its
    event ids or cross-core flag ids, named with what would fit."""
    text = str(e)
    assert any(w in text for w in ("bytes", "event_ids=", "cross_flag_ids=")) and e.hint, (
        f"{e}\n{machine!r}\n{what}"
    )


def _agree_or_refuse(fn: Any, inputs: list[np.ndarray], machine: Any, what: Any) -> None:
    tensors = [pto.tensor(a) for a in inputs]
    try:
        npu = pto.jit(fn, machine=machine)(*tensors)
    except pto.TileError as e:
        _refused(e, machine, what)
        return
    eager = fn(*tensors)
    func = trace(fn, tensors)[0]
    n = len(func.eqns) + 1
    tols = zip(sum_lengths(func), precisions(func), strict=True)
    for i, (e, g, (k, p)) in enumerate(zip(eager, npu, tols, strict=True)):
        assert e.dtype == g.dtype and e.shape == g.shape
        c = compare(f"npu out[{i}]", g, np.asarray(e), k=k * n, precision=p)
        assert c.ok, f"{c}\n{machine!r}\n{what}"


@settings(max_examples=30)
@given(machines(), programs([1, 3, 16, 48, 100, 128, 256]))
def test_random_programs_on_random_machines(machine: Any, prog: Any) -> None:
    inputs, _, steps = prog
    assume(sum(a.size for a in inputs) <= 1 << 15)
    names = [(UNARY if t == "u" else BINARY)[o][0] for t, o, _, _ in steps[:15]]
    _agree_or_refuse(build(steps[:15]), inputs, machine, names)


@settings(max_examples=20)
@given(machines(), layout_programs([1, 3, 16, 48, 100, 130], limit=1 << 15))
def test_random_layout_programs_on_random_machines(machine: Any, prog: Any) -> None:
    inputs, steps = prog
    _agree_or_refuse(build_layout(steps), inputs, machine, steps)


@settings(max_examples=20)
@given(machines(), cases())
def test_random_attention_on_random_machines(machine: Any, case: dict[str, Any]) -> None:
    assume(case_size(case) <= 1 << 15)
    try:
        check_case(case, machine)
    except pto.TileError as e:
        _refused(e, machine, case)
