"""Machine configurations: the figures of DESIGN §4, custom machines and their validation."""

from __future__ import annotations

import pickle

import pytest

import pypto.npu as npu
from pypto.core.errors import PyptoError
from pypto.npu import MACHINES, Machine, MachineError, machine

KiB = 1024
MiB = 1024 * KiB


def test_ascend910b_has_every_figure_of_the_design() -> None:
    m = machine("ascend910b")
    assert (m.n_aic, m.n_aiv, m.clusters, m.aiv_per_cluster) == (24, 48, 24, 2)
    assert m.clock_ghz == 1.85
    assert (m.cube_m, m.cube_k_f16, m.cube_n, m.cube_k_i8) == (16, 16, 16, 32)
    assert m.cube_tflops_f16 == pytest.approx(363.7, abs=0.1)
    assert m.vector_bytes == 256
    assert (m.l1_bytes, m.l0a_bytes, m.l0b_bytes, m.l0c_bytes) == (
        512 * KiB,
        64 * KiB,
        64 * KiB,
        128 * KiB,
    )
    assert m.ub_bytes == 192 * KiB and m.align_bytes == 32
    assert m.l2_bytes == 192 * MiB
    assert m.hbm_bytes == 64 * 1024 * MiB
    assert 1200 <= m.hbm_gbps <= 1600
    assert m.l2_gbps > 3 * m.hbm_gbps
    rates = (m.gm_read, m.l2_read, m.l2_write, m.l1_l0a, m.l1_l0b, m.l1_ub, m.l0c_ub, m.ub_gm)
    assert rates == (32, 110, 86, 512, 256, 128, 256, 64)
    assert not m.direct_cube_vector


def test_tiny_is_the_same_chip_with_one_cluster() -> None:
    tiny, big = machine("tiny"), machine("ascend910b")
    assert (tiny.n_aic, tiny.n_aiv) == (1, 2)
    assert tiny.replace(name="ascend910b", clusters=24) == big
    assert set(MACHINES) == {"ascend910b", "tiny"}


def test_machines_are_frozen_picklable_and_reachable() -> None:
    m = npu.machine("tiny")
    with pytest.raises(AttributeError):
        m.clusters = 3  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(m)) == m
    assert machine(m) is m
    assert hash(m) == hash(machine("tiny"))


def test_replace_makes_a_validated_custom_machine() -> None:
    m = machine("ascend910b").replace(clusters=8, hbm_gbps=800.0, name="half")
    assert (m.n_aic, m.n_aiv, m.name) == (8, 16, "half")
    assert m.hbm_bytes_per_cycle == pytest.approx(800e9 / 1.85e9)


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"clusters": 0}, "clusters = 0 must be a positive integer"),
        ({"ub_bytes": 100}, "ub_bytes = 100 is not a multiple of align_bytes = 32"),
        ({"align_bytes": 24}, "align_bytes = 24 must be a power of two"),
        ({"hbm_gbps": -1.0}, "hbm_gbps = -1.0 must be a positive number"),
        ({"dma_latency": -5}, "dma_latency = -5 must be a non-negative integer"),
        ({"aiv_per_cluster": 3}, "at most 2 vector cores"),
        ({"l2_line_bytes": 96}, "l2_line_bytes = 96 must be a power of two"),
        ({"clusters": 2.5}, "clusters = 2.5 must be a positive integer"),
    ],
)
def test_invalid_machines_are_rejected_with_the_field_named(changes: dict, needle: str) -> None:
    with pytest.raises(MachineError, match="machine 'tiny'") as e:
        machine("tiny").replace(**changes)
    assert needle in str(e.value)
    assert isinstance(e.value, PyptoError) and isinstance(e.value, ValueError)


def test_replace_rejects_unknown_fields_with_a_suggestion() -> None:
    with pytest.raises(MachineError, match="has no field 'ub_size'") as e:
        machine("tiny").replace(ub_size=1)
    assert "did you mean ub_bytes" in str(e.value)


def test_unknown_machine_name_reads_well() -> None:
    with pytest.raises(MachineError, match="unknown machine 'ascend910'") as e:
        machine("ascend910")
    msg = str(e.value)
    assert "did you mean 'ascend910b'" in msg and "known machines: ascend910b, tiny" in msg


def test_buffer_capacities_by_space_name() -> None:
    m = machine("tiny")
    assert [m.buffer_bytes(s) for s in ("L1", "L0A", "L0B", "L0C", "UB")] == [
        512 * KiB,
        64 * KiB,
        64 * KiB,
        128 * KiB,
        192 * KiB,
    ]
    assert isinstance(m, Machine)
