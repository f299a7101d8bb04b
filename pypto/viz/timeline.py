"""The timeline of a Profile: one lane per (core, pipe), instruction bars coloured by op.

On a machine with many cores (``ascend910b`` has 72) the lanes of every core would not fit,
so the view shows whole clusters picked evenly across the chip and says which in its title;
``cores=`` picks them by hand.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.artist import Artist

from pypto.isa.ir import PIPES_OF
from pypto.npu.profile import Profile
from pypto.viz.style import ViewFigure, core_cluster, cycles_to_us, new_figure, op_colours

__all__ = ["pick_cores", "timeline"]


def pick_cores(profile: Profile, max_cores: int = 9) -> list[str]:
    """The cores a timeline shows: all of them when at most ``max_cores``, else whole
    clusters spread evenly over the chip (first and last included).

    >>> import pypto as pto, numpy as np
    >>> f = pto.jit(lambda x: pto.exp(x), machine="ascend910b")
    >>> pick_cores(f.profile(np.ones((512, 64), np.float32)), max_cores=6)
    ['aiv0', 'aiv1', 'aiv24', 'aiv25', 'aiv46', 'aiv47']
    """
    if len(profile.cores) <= max_cores:
        return list(profile.cores)
    per = profile.machine.aiv_per_cluster
    clusters: dict[int, list[str]] = {}
    for c in profile.cores:
        clusters.setdefault(core_cluster(c, per), []).append(c)
    keys = sorted(clusters)
    size = max(len(v) for v in clusters.values())
    k = max(1, max_cores // size)
    picked = np.unique(np.linspace(0, len(keys) - 1, k).round().astype(int))
    return [c for i in picked.tolist() for c in clusters[keys[i]]]


def timeline(
    profile: Profile,
    *,
    cores: Sequence[str] | None = None,
    max_cores: int = 9,
    max_flags: int = 60,
    width: float = 12.0,
) -> ViewFigure:
    """Draw ``profile``'s trace: a lane per (core, pipe) the core used, a bar per instruction
    (coloured by op, legend on the right), flag arrows from each SET_FLAG to the wait it
    released when there are at most ``max_flags`` of them between the lanes shown; time in
    cycles below and in microseconds above.

    >>> import pypto as pto, numpy as np
    >>> f = pto.jit(lambda x: pto.softmax(x), machine="tiny")
    >>> fig = timeline(f.profile(np.ones((32, 256), np.float32)))
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['aiv0 MTE2', 'aiv0 V', 'aiv0 MTE3', 'aiv1 MTE2', 'aiv1 V', 'aiv1 MTE3']
    """
    if not profile.traced:
        raise ValueError("this profile has no trace: simulate with trace=True to draw a timeline")
    shown = list(cores) if cores is not None else pick_cores(profile, max_cores)
    unknown = [c for c in shown if c not in profile.cores]
    if unknown:
        raise ValueError(f"no core {unknown[0]!r} in this profile; cores: {profile.cores}")
    events = [e for e in profile.events if e.core in set(shown)]
    used = {(e.core, e.pipe) for e in events}
    lanes = [
        (c, p.value) for c in shown for p in PIPES_OF[c[:3]] if (c, p.value) in used
    ]  # pipes in the order data flows through the core
    lane_of = {ln: i for i, ln in enumerate(lanes)}
    colours = op_colours(e.op for e in events)

    fig = new_figure(width, 1.4 + 0.28 * max(len(lanes), 1))
    ax = fig.add_subplot()
    bars: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for e in events:
        bars.setdefault((lane_of[(e.core, e.pipe)], e.op), []).append((e.start, e.end - e.start))
    for (lane, op), spans in bars.items():
        ax.broken_barh(
            spans,
            (lane - 0.4, 0.8),
            facecolors=colours[op],
            label=op,
            edgecolor="white",
            linewidth=0.3,
        )

    flows = [
        f
        for f in profile.flows
        if (f.src_core, f.src_pipe) in lane_of and (f.dst_core, f.dst_pipe) in lane_of
    ]
    if flows and len(flows) <= max_flags:
        for f in flows:
            ax.annotate(
                "",
                xy=(f.wait_time, lane_of[(f.dst_core, f.dst_pipe)]),
                xytext=(f.set_time, lane_of[(f.src_core, f.src_pipe)]),
                arrowprops={"arrowstyle": "->", "color": "#c0392b", "lw": 0.7, "alpha": 0.7},
            )

    ax.set_yticks(range(len(lanes)), [f"{c} {p}" for c, p in lanes])
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlim(0, max(profile.cycles, 1.0))
    ax.set_xlabel("cycles")
    ax.secondary_xaxis("top", functions=cycles_to_us(profile.machine.clock_ghz)).set_xlabel("µs")
    ax.grid(axis="x", alpha=0.3)
    handles: dict[str, Artist] = {}
    for h, label in zip(*ax.get_legend_handles_labels()):
        handles.setdefault(label, h)
    ax.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=8,
    )
    title = (
        f"{profile.program} on {profile.machine.name}: {profile.cycles:,.0f} cycles "
        f"({profile.seconds * 1e6:,.2f} µs)"
    )
    notes = []
    if len(shown) < len(profile.cores):
        clusters = sorted({core_cluster(c, profile.machine.aiv_per_cluster) for c in shown})
        notes.append(
            f"showing {len(shown)} of {len(profile.cores)} cores "
            f"(clusters {', '.join(map(str, clusters))})"
        )
    if len(flows) > max_flags:
        notes.append(f"{len(flows)} flags, not drawn (more than {max_flags})")
    ax.set_title(title + ("\n" + "; ".join(notes) if notes else ""), fontsize=10)
    return fig
