"""The tile map: a rectangle per stored window, coloured by the core whose TSTORE wrote it (as
the trace's events say), numbered in order of completion; Profile.windows underneath."""

from __future__ import annotations

import numpy as np
import pytest

import pypto as pto
from pypto.npu import Profile, simulate


def drawn(fig) -> tuple[list[tuple[int, int, int, int, tuple]], dict[str, tuple]]:
    """((row, col, rows, cols, colour) per rectangle, core → legend colour)."""
    ax = fig.axes[0]
    rects = [
        (int(p.get_y()), int(p.get_x()), int(p.get_height()), int(p.get_width()), p.get_facecolor())
        for p in ax.patches
    ]
    legend = {p.get_label(): p.get_facecolor() for p in ax.get_legend().get_patches()}
    return rects, legend


def test_colours_are_the_storing_cores(matmul_relu: Profile) -> None:
    fig = pto.viz.tiles(matmul_relu)  # the only output, y
    rects, legend = drawn(fig)
    assert len(rects) == 16 and set(legend) == {"aiv0", "aiv1"}
    # The program gives vector core s rows [32t + 16s, +16): the colour says the same.
    for row, col, rows, cols, colour in rects:
        assert (col, rows, cols) == (0, 16, 64)
        assert colour == legend[f"aiv{(row // 16) % 2}"]
    # ... and so does each TSTORE event of y in the trace, by its time.
    stores = [e for e in matmul_relu.events if e.op == "TSTORE" and e.text.startswith("TSTORE y")]
    windows = matmul_relu.windows("y")
    assert sorted((w.event.core, w.event.start) for w in windows) == sorted(
        (e.core, e.start) for e in stores
    )


def test_numbers_are_the_order_of_completion(matmul_relu: Profile) -> None:
    ax = pto.viz.tiles(matmul_relu).axes[0]
    windows = matmul_relu.windows("y")
    label_at = {(t.get_position()[1], t.get_position()[0]): int(t.get_text()) for t in ax.texts}
    ends = {(w.row + w.rows / 2, w.col + w.cols / 2): w.event.end for w in windows}
    assert sorted(label_at.values()) == list(range(1, 17))
    by_number = sorted(label_at, key=label_at.get)
    assert [ends[k] for k in by_number] == sorted(ends.values())


def test_many_cores_cover_the_tensor_once(rms_norm_910b: Profile) -> None:
    fig = pto.viz.tiles(rms_norm_910b, "out")
    rects, legend = drawn(fig)
    cover = np.zeros((1024, 256), dtype=int)
    for row, col, rows, cols, _ in rects:
        cover[row : row + rows, col : col + cols] += 1
    assert np.all(cover == 1)
    colour_of = {(w.row, w.col): legend[w.event.core] for w in rms_norm_910b.windows("out")}
    assert all(colour_of[(r, c)] == colour for r, c, _, _, colour in rects)
    assert len(legend) == 48 and len(set(legend.values())) == 48
    assert "64 tiles from 48 cores" in fig.axes[0].get_title()  # 16-row tiles


def test_cube_stores_through_fix(gemm_910b: Profile) -> None:
    rects, legend = drawn(pto.viz.tiles(gemm_910b))
    # gemm.pto: tile t = blk (4 tiles, 24 cube cores) at rows 64*(t//2), cols 64*(t%2).
    assert sorted((r, c, legend[f"aic{2 * (r // 64) + c // 64}"]) for r, c, *_ in rects) == sorted(
        (r, c, colour) for r, c, _, _, colour in rects
    )
    assert len(rects) == 4 and set(legend) == {"aic0", "aic1", "aic2", "aic3"}


def test_windows_of_loads_and_stores() -> None:
    prof = simulate(
        """
        .program copy
        .tensor x f32[16,128] in
        .tensor y f32[16,128] out
        .core aiv
          TLOAD UB[0x0]:f32[8,64], x[%sub*8, 64]
          SET_FLAG MTE2, MTE3, 0
          WAIT_FLAG MTE2, MTE3, 0
          TSTORE y[8-%sub*8, 0], UB[0x0]:f32[8,64]
        """,
        "tiny",
        {"x": np.ones((16, 128), np.float32)},
    )
    loads = sorted((w.event.core, w.row, w.col, w.rows, w.cols) for w in prof.windows("x", "TLOAD"))
    assert loads == [("aiv0", 0, 64, 8, 64), ("aiv1", 8, 64, 8, 64)]
    stores = sorted((w.event.core, w.row, w.col) for w in prof.windows("y"))
    assert stores == [("aiv0", 8, 0), ("aiv1", 0, 0)]
    assert all(w.event.op == "TSTORE" for w in prof.windows("y"))
    assert prof.windows("x") == []
    with pytest.raises(ValueError, match="TLOAD or TSTORE"):
        prof.windows("x", "TADD")


def test_mistakes(matmul_relu: Profile) -> None:
    with pytest.raises(ValueError, match="no TSTORE wrote 'a'"):
        pto.viz.tiles(matmul_relu, "a")
    two = simulate(
        ".program two\n.tensor y f32[8,64] out\n.tensor z f32[8,64] out\n.core aiv\n"
        "  TEXPANDS UB[0x0]:f32[8,64], 1.0\n",
        "tiny",
    )
    with pytest.raises(ValueError, match="2 outputs"):
        pto.viz.tiles(two)
