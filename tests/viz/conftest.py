"""Profiles the view tests share (simulated once per module: the views only read them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pypto as pto
from pypto.isa import load
from pypto.npu import Profile, simulate

PROGRAMS = Path(__file__).parent.parent / "npu" / "programs"
RNG = np.random.default_rng(5)


def run_program(name: str, machine: str = "tiny", **kw: object) -> Profile:
    """Simulate ``tests/npu/programs/<name>.pto`` with random inputs."""
    prog = load(PROGRAMS / f"{name}.pto")
    inputs = {
        t.name: RNG.standard_normal(t.shape).astype(t.dtype.np)
        for t in prog.tensors
        if t.role in ("in", "inout")
    }
    return simulate(prog, machine, inputs, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def softmax_tiny() -> Profile:
    f = pto.jit(lambda x: pto.softmax(x), machine="tiny")
    return f.profile(RNG.standard_normal((64, 256)).astype(np.float32))


@pytest.fixture(scope="module")
def rms_norm_910b() -> Profile:
    f = pto.jit(lambda x: pto.rms_norm(x, pto.ones(x.shape[-1])), machine="ascend910b")
    return f.profile(RNG.standard_normal((1024, 256)).astype(np.float32), numerics=False)


@pytest.fixture(scope="module")
def matmul_relu() -> Profile:
    """MPMD on one cluster: the cube core hands tiles to both vector cores."""
    return run_program("matmul_relu")


@pytest.fixture(scope="module")
def gemm_910b() -> Profile:
    return run_program("gemm", "ascend910b")
