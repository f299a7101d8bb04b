"""The roofline: each profile a point at its intensity and throughput, under its machine's
roofs (cube and vector peaks, HBM bandwidth), in the panel of the work it did."""

from __future__ import annotations

import numpy as np
import pytest

import pypto as pto
from pypto.npu import Profile, machine
from pypto.viz.roofline import cube_peaks, vector_peak

from .conftest import run_program


def points(ax) -> dict[str, tuple[float, float]]:
    return {
        ln.get_label(): (ln.get_xdata()[0], ln.get_ydata()[0])
        for ln in ax.get_lines()
        if ln.get_marker() == "o"
    }


def roof_lines(ax) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(ln.get_xdata(), ln.get_ydata()) for ln in ax.get_lines() if ln.get_marker() != "o"]


def under(x: float, y: float, roof: tuple[np.ndarray, np.ndarray]) -> bool:
    at = np.exp(np.interp(np.log(x), np.log(roof[0]), np.log(roof[1])))
    return y <= at * (1 + 1e-9)


def test_points_sit_under_the_roofs(
    gemm_910b: Profile, rms_norm_910b: Profile, matmul_relu: Profile
) -> None:
    profs = {"gemm": gemm_910b, "rms_norm": rms_norm_910b, "matmul_relu": matmul_relu}
    fig = pto.viz.roofline(*profs.values(), labels=list(profs))
    cube, vector = fig.axes
    assert (cube.get_title(), vector.get_title()) == ("cube", "vector")
    assert cube.get_xscale() == cube.get_yscale() == "log"
    cube_pts, vec_pts = points(cube), points(vector)
    assert set(cube_pts) == {"gemm", "matmul_relu"}  # the profiles that used the cube
    assert set(vec_pts) == {"rms_norm", "matmul_relu"}
    for name, (x, y) in cube_pts.items():
        p = profs[name]
        assert (x, y) == pytest.approx((p.flops / p.hbm_bytes, p.flops / p.seconds))
        m = p.machine
        assert y <= min(cube_peaks(m)["fp16"], x * m.hbm_gbps * 1e9)
    for name, (x, y) in vec_pts.items():
        p = profs[name]
        assert (x, y) == pytest.approx((p.vector_bytes / p.hbm_bytes, p.vector_bytes / p.seconds))
        m = p.machine
        assert y <= min(vector_peak(m), x * m.hbm_gbps * 1e9)
    # ... and under the drawn roofs: the lowest roof line over each point is above it.
    for ax, pts in ((cube, cube_pts), (vector, vec_pts)):
        for x, y in pts.values():
            assert any(under(x, y, r) for r in roof_lines(ax))


def test_the_roofs_are_the_machines(gemm_910b: Profile) -> None:
    m = machine("ascend910b")
    ax = pto.viz.roofline(gemm_910b).axes[0]
    tops = [float(y[-1]) for _, y in roof_lines(ax)]
    assert cube_peaks(m)["fp16"] == pytest.approx(364e12, rel=0.01)
    assert cube_peaks(m)["fp16"] in tops and cube_peaks(m)["int8"] in tops
    x, y = roof_lines(ax)[0]  # the HBM line
    assert np.allclose(y / x, m.hbm_gbps * 1e9)
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "fp16 peak 363.7 TFLOP/s" in texts and "HBM 1.6 TB/s" in texts


def test_a_custom_machine_gets_its_own_roofs() -> None:
    slow = machine("tiny").replace(name="slow", hbm_gbps=50.0)
    a = run_program("vadd_db", "tiny")
    b = run_program("vadd_db", slow)
    ax = pto.viz.roofline(a, b).axes[0]
    pts = points(ax)
    assert set(pts) == {"vadd_db (tiny)", "vadd_db (slow)"}
    assert pts["vadd_db (slow)"][1] < pts["vadd_db (tiny)"][1]  # below what two cores can pull
    assert pts["vadd_db (slow)"][1] <= pts["vadd_db (slow)"][0] * 50e9
    texts = " ".join(t.get_text() for t in ax.texts)
    assert "HBM 0.05 TB/s" in texts and "HBM 1.6 TB/s" in texts


def test_mistakes(gemm_910b: Profile) -> None:
    with pytest.raises(ValueError, match="at least one"):
        pto.viz.roofline()
    with pytest.raises(ValueError, match="2 labels for 1"):
        pto.viz.roofline(gemm_910b, labels=["a", "b"])
