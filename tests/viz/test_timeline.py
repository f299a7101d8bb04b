"""The timeline: its lanes are the (core, pipe) pairs used, its bars the trace events, its
arrows the flags; many cores are shown as whole clusters and the title says which."""

from __future__ import annotations

import numpy as np
import pytest

import pypto as pto
from pypto.isa.ir import PIPES_OF
from pypto.npu import Profile, simulate
from pypto.viz.timeline import pick_cores

FILL = """
.program fill
.tensor y f32[16,64] out
.core aiv
  TEXPANDS UB[0x0]:f32[8,64], 1.5
  SET_FLAG V, MTE3, 0
  WAIT_FLAG V, MTE3, 0
  TSTORE y[%sub*8, 0], UB[0x0]:f32[8,64]
"""


def lanes(fig) -> list[tuple[str, str]]:
    return [tuple(t.get_text().split()) for t in fig.axes[0].get_yticklabels()]


def bars(fig) -> dict[str, list[tuple[float, float, float]]]:
    """op → [(lane y centre, start, end)] read back from the drawn rectangles."""
    out: dict[str, list[tuple[float, float, float]]] = {}
    for coll in fig.axes[0].collections:
        for path in coll.get_paths():
            (x0, y0), (x1, y1) = path.vertices.min(axis=0), path.vertices.max(axis=0)
            out.setdefault(coll.get_label(), []).append(((y0 + y1) / 2, x0, x1))
    return out


def test_lanes_are_the_cores_times_the_pipes_they_used(matmul_relu: Profile) -> None:
    fig = pto.viz.timeline(matmul_relu)
    used = {(e.core, e.pipe) for e in matmul_relu.events}
    assert set(lanes(fig)) == used and len(lanes(fig)) == len(used)
    # Lanes go core by core, pipes in the order data flows through the core.
    for core in matmul_relu.cores:
        order = [p for c, p in lanes(fig) if c == core]
        assert order == [p.value for p in PIPES_OF[core[:3]] if (core, p.value) in used]


def test_a_bar_per_event_at_its_lane_and_times(matmul_relu: Profile) -> None:
    fig = pto.viz.timeline(matmul_relu)
    row = {ln: i for i, ln in enumerate(lanes(fig))}
    drawn = bars(fig)
    expected: dict[str, list[tuple[float, float, float]]] = {}
    for e in matmul_relu.events:
        expected.setdefault(e.op, []).append((row[(e.core, e.pipe)], e.start, e.end))
    assert set(drawn) == set(expected)  # one legend entry, one colour per op
    for op in expected:
        assert np.allclose(sorted(drawn[op]), sorted(expected[op]))
    colours = {c.get_label(): tuple(c.get_facecolor()[0]) for c in fig.axes[0].collections}
    assert len(set(colours.values())) == len(colours)


def test_time_axes_in_cycles_and_microseconds(softmax_tiny: Profile) -> None:
    ax = pto.viz.timeline(softmax_tiny).axes[0]
    assert ax.get_xlim() == (0, softmax_tiny.cycles)
    assert ax.get_xlabel() == "cycles"
    (top,) = ax.child_axes
    assert top.get_xlabel() == "µs"
    fwd = top._functions[0]
    assert fwd(softmax_tiny.cycles) == pytest.approx(softmax_tiny.seconds * 1e6)
    assert f"{softmax_tiny.cycles:,.0f} cycles" in ax.get_title()


def test_flag_arrows_when_few() -> None:
    prof = simulate(FILL, "tiny")
    ax = pto.viz.timeline(prof).axes[0]
    row = {ln: i for i, ln in enumerate(lanes(ax.figure))}
    arrows = sorted((a.xyann, a.xy) for a in ax.texts)
    assert len(prof.flows) == 2
    assert arrows == sorted(
        ((f.set_time, row[(f.src_core, f.src_pipe)]), (f.wait_time, row[(f.dst_core, f.dst_pipe)]))
        for f in prof.flows
    )


def test_many_flags_are_counted_not_drawn(matmul_relu: Profile) -> None:
    ax = pto.viz.timeline(matmul_relu, max_flags=10).axes[0]
    assert not ax.texts
    assert f"{len(matmul_relu.flows)} flags, not drawn" in ax.get_title()


def test_many_cores_show_whole_clusters_and_say_so(rms_norm_910b: Profile) -> None:
    fig = pto.viz.timeline(rms_norm_910b)
    shown = pick_cores(rms_norm_910b)
    assert shown[:2] == ["aiv0", "aiv1"] and shown[-2:] == ["aiv46", "aiv47"]
    assert len(shown) == 8  # 4 clusters of 2 vector cores fit in 9
    assert {c for c, _ in lanes(fig)} == set(shown)
    used = {(e.core, e.pipe) for e in rms_norm_910b.events if e.core in shown}
    assert set(lanes(fig)) == used
    assert "showing 8 of 48 cores (clusters 0, 8, 15, 23)" in fig.axes[0].get_title()


def test_cores_by_hand_and_mistakes(rms_norm_910b: Profile) -> None:
    fig = pto.viz.timeline(rms_norm_910b, cores=["aiv5"])
    assert {c for c, _ in lanes(fig)} == {"aiv5"}
    with pytest.raises(ValueError, match="no core 'aic0'"):
        pto.viz.timeline(rms_norm_910b, cores=["aic0"])
    with pytest.raises(ValueError, match="trace=True"):
        pto.viz.timeline(simulate(FILL, "tiny", trace=False))


def test_shows_inline_as_png(softmax_tiny: Profile) -> None:
    assert pto.viz.timeline(softmax_tiny)._repr_png_().startswith(b"\x89PNG")
