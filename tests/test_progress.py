"""Progress for long compile and simulation stages."""

from __future__ import annotations

from pypto.core import progress
from pypto.isa.samples import gemm
from pypto.npu import simulate


def test_the_simulator_reports_simulated_time_as_it_goes() -> None:
    prog = gemm(2048, 2048, 2048)
    seen: list[float] = []
    prof = simulate(prog, "ascend910b", numerics=False, trace=False, progress=seen.append)
    assert seen and seen == sorted(seen) and seen[-1] <= prof.cycles


def test_stage_bars_step_through_their_names(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYPTO_PROGRESS", "1")
    with progress.stages("compile f", ["trace", "tile"]) as step:
        step("trace")
        step("tile")
    with progress.counter("simulate", "cycle") as at:
        at(10.0)
        at(25.0)
    monkeypatch.setenv("PYPTO_PROGRESS", "0")
    assert not progress.enabled()
