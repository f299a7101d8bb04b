"""Shared helpers of the simulator tests: every simulated program goes through ``sim``, which
checks the invariants of DESIGN §4 on it (including a second, identical run)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pypto.isa import Program, load
from pypto.npu import Profile, check_invariants, simulate

PROGRAMS = Path(__file__).parent / "programs"


@pytest.fixture
def sim() -> Callable[..., Profile]:
    """``sim(program, machine="tiny", inputs=None, **options)``: simulate and check invariants."""

    def run(
        program: Program | str, machine: Any = "tiny", inputs: Any = None, **kw: Any
    ) -> Profile:
        prof = simulate(program, machine, inputs, **kw)
        check_invariants(prof)
        return prof

    return run


@pytest.fixture
def program() -> Callable[[str], Program]:
    """``program("gemm")``: the hand-written program ``tests/npu/programs/gemm.pto``."""

    def get(name: str) -> Program:
        return load(PROGRAMS / f"{name}.pto")

    return get
