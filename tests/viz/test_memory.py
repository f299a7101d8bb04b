"""The memory view: a panel per buffer kind in use, curves that are the profile's occupancy and
stay under the capacity line drawn at the machine's buffer size."""

from __future__ import annotations

import numpy as np
import pytest

import pypto as pto
from pypto.npu import Profile, simulate
from pypto.viz.memory import KiB


def panels(fig) -> dict[str, object]:
    return {ax.get_title(loc="left").split()[0]: ax for ax in fig.axes}


def curves(ax) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {ln.get_label(): (ln.get_xdata(), ln.get_ydata()) for ln in ax.get_lines()}


def test_a_curve_per_core_under_the_capacity(matmul_relu: Profile) -> None:
    fig = pto.viz.memory(matmul_relu)
    used = sorted({space for _, space in matmul_relu.occupancy}, key="L1 L0A L0B L0C UB".index)
    assert list(panels(fig)) == used
    peaks = matmul_relu.peak_occupancy()
    for kind, ax in panels(fig).items():
        cap = matmul_relu.machine.buffer_bytes(kind) / KiB
        lines = curves(ax)
        assert np.all(np.asarray(lines.pop("capacity")[1]) == cap)
        assert set(lines) == {c for c, s in matmul_relu.occupancy if s == kind}
        for core, (t, level) in lines.items():
            assert np.all(level <= cap) and np.all(level >= 0)
            assert level.max() == peaks[(core, kind)] / KiB
            assert t[0] == 0 and t[-1] == matmul_relu.cycles
        assert ax.get_ylim()[1] > cap  # the capacity line is in view


def test_many_cores_show_max_and_mean(rms_norm_910b: Profile) -> None:
    fig = pto.viz.memory(rms_norm_910b)
    (ub,) = panels(fig).values()
    assert "max and mean over 48 vector cores" in ub.get_title(loc="left")
    lines = curves(ub)
    cap = lines.pop("capacity")[1][0]
    (_, top), (_, mean) = lines["max over 48 cores"], lines["mean"]
    assert np.all(top <= cap) and np.all(mean <= top)
    assert top.max() == max(rms_norm_910b.peak_occupancy().values()) / KiB


def test_untraced_profiles_are_refused() -> None:
    prof = simulate(
        ".program p\n.tensor y f32[8,64] out\n.core aiv\n  TEXPANDS UB[0x0]:f32[8,64], 1.0\n",
        "tiny",
        trace=False,
    )
    with pytest.raises(ValueError, match="trace=True"):
        pto.viz.memory(prof)
