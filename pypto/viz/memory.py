"""Buffer occupancy over time: one panel per buffer kind (L1, L0A, L0B, L0C, UB), with its
capacity as a line.

Occupancy counts the bytes of a buffer that hold data between their first write and their last
access (:attr:`pypto.npu.Profile.occupancy`). With few cores each core gets its own curve; with
many, the panel shows the largest and the mean over the cores, and its title says so.
"""

from __future__ import annotations

import numpy as np

from pypto.npu.profile import Profile
from pypto.viz.style import ViewFigure, cycles_to_us, new_figure

__all__ = ["memory"]

_KINDS = ("L1", "L0A", "L0B", "L0C", "UB")
KiB = 1024


def _step_on(grid: np.ndarray, times: np.ndarray, level: np.ndarray) -> np.ndarray:
    """The step function (times, level) — zero before its first time — sampled on ``grid``."""
    i = np.searchsorted(times, grid, side="right") - 1
    return np.where(i >= 0, level[np.maximum(i, 0)], 0)


def memory(profile: Profile, *, max_curves: int = 4, width: float = 10.0) -> ViewFigure:
    """Draw the occupancy of each buffer kind over the run, in KiB, against its capacity.

    >>> import pypto as pto, numpy as np
    >>> f = pto.jit(lambda x: pto.softmax(x), machine="tiny")
    >>> fig = memory(f.profile(np.ones((32, 256), np.float32)))
    >>> [ax.get_title(loc="left") for ax in fig.axes]
    ['UB (per vector core, 192 KiB)']
    """
    occ = profile.occupancy
    if not occ:
        raise ValueError(
            "this profile has no occupancy: simulate with trace=True to draw buffer use"
        )
    kinds = [k for k in _KINDS if any(space == k for _, space in occ)]
    end = max(profile.cycles, 1.0)
    fig = new_figure(width, 0.6 + 1.9 * len(kinds))
    axes = fig.subplots(len(kinds), 1, sharex=True, squeeze=False)[:, 0]
    for ax, kind in zip(axes, kinds):
        cap = profile.machine.buffer_bytes(kind) / KiB
        series = [(core, t, lv / KiB) for (core, space), (t, lv) in occ.items() if space == kind]
        who = "cube core" if kind != "UB" else "vector core"
        if len(series) <= max_curves:
            for core, t, lv in series:
                # From 0 at cycle 0 to the last level at the end: the whole run on the axis.
                ax.step(np.r_[0.0, t, end], np.r_[0.0, lv, lv[-1:]], where="post", label=core)
            title = f"{kind} (per {who}, {cap:g} KiB)"
        else:
            grid = np.unique(np.concatenate([t for _, t, _ in series] + [np.array([0.0, end])]))
            levels = np.stack([_step_on(grid, t, lv) for _, t, lv in series])
            ax.step(grid, levels.max(axis=0), where="post", label=f"max over {len(series)} cores")
            ax.step(grid, levels.mean(axis=0), where="post", linestyle="--", label="mean")
            title = f"{kind} (max and mean over {len(series)} {who}s, {cap:g} KiB each)"
        ax.axhline(cap, color="#c0392b", linewidth=1.2, label="capacity")
        ax.set_ylim(0, cap * 1.08)
        ax.set_ylabel("KiB")
        ax.set_title(title, fontsize=9, loc="left")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1].set_xlim(0, end)
    axes[-1].set_xlabel("cycles")
    axes[0].secondary_xaxis("top", functions=cycles_to_us(profile.machine.clock_ghz)).set_xlabel(
        "µs"
    )
    fig.suptitle(f"{profile.program} on {profile.machine.name}: buffer occupancy", fontsize=10)
    return fig
