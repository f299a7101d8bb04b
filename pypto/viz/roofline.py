"""The roofline (Williams, Waterman & Patterson, CACM 2009): each profile as a point under the
machine's roofs, log-log.

The cube and the vector unit do different work, counted in different units (FLOPs of
matmuls; bytes through the vector unit, as the machine's vector rate is given in bytes per
cycle), so they get a panel each, with the same HBM roof:

- cube: x = FLOPs per HBM byte (``flops / hbm_bytes``), y = FLOP/s; roofs at the fp16 and
  int8 cube peaks;
- vector: x = vector bytes per HBM byte, y = vector bytes/s; roof at the vector peak.

A profile appears in each panel where it did that kind of work. ``hbm_bytes`` is the HBM
traffic the run measured (L2 misses and writes), so a point's distance below the slanted roof
is bandwidth left unused, and its distance left of the ridge says it cannot reach the peak.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes

from pypto.npu.machine import Machine
from pypto.npu.profile import Profile
from pypto.viz.style import ViewFigure, new_figure, palette

__all__ = ["cube_peaks", "roofline", "vector_peak"]


def cube_peaks(m: Machine) -> dict[str, float]:
    """The cube roofs in FLOP/s (2 FLOPs per MAC): ``fp16`` (and bf16) and ``int8``.

    >>> from pypto.npu import machine
    >>> round(cube_peaks(machine("ascend910b"))["fp16"] / 1e12)
    364
    """
    per_k = {"fp16": m.cube_k_f16, "int8": m.cube_k_i8}
    return {k: 2.0 * m.cube_m * m.cube_n * k0 * m.n_aic * m.hz for k, k0 in per_k.items()}


def vector_peak(m: Machine) -> float:
    """The vector roof in bytes/s: every vector core's unit full every cycle."""
    return float(m.vector_bytes * m.n_aiv * m.hz)


def _hbm(m: Machine) -> float:
    return m.hbm_gbps * 1e9


def roofline(
    *profiles: Profile, labels: Sequence[str] | None = None, width: float = 11.0
) -> ViewFigure:
    """Place each profile under its machine's roofs (one set of roofs per distinct machine).

    >>> import pypto as pto, numpy as np
    >>> f = pto.jit(lambda x: pto.softmax(x), machine="tiny")
    >>> fig = roofline(f.profile(np.ones((64, 256), np.float32)), labels=["softmax"])
    >>> [ax.get_title() for ax in fig.axes]
    ['vector']
    """
    if not profiles:
        raise ValueError("roofline() needs at least one profile")
    if labels is not None and len(labels) != len(profiles):
        raise ValueError(f"{len(labels)} labels for {len(profiles)} profiles")
    machines: dict[str, Machine] = {}
    for p in profiles:
        machines.setdefault(p.machine.name, p.machine)
    if labels is None:
        several = len(machines) > 1
        labels = [p.program + (f" ({p.machine.name})" if several else "") for p in profiles]
    colours = palette("tab10")
    panels = []
    if any(p.flops > 0 for p in profiles):
        panels.append("cube")
    if any(p.vector_bytes > 0 for p in profiles):
        panels.append("vector")
    if not panels:
        raise ValueError("none of these profiles did cube or vector work")
    fig = new_figure(width, 5.0)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels):
        pts = []
        for i, p in enumerate(profiles):
            work = p.flops if panel == "cube" else p.vector_bytes
            if work <= 0 or p.hbm_bytes <= 0 or p.cycles <= 0:
                continue
            pts.append((work / p.hbm_bytes, work / p.seconds, i))
        _roofs(ax, panel, list(machines.values()), [x for x, _, _ in pts])
        for x, y, i in pts:
            p = profiles[i]
            ax.plot([x], [y], "o", color=colours[i % 10], markersize=7, label=labels[i])
            ax.annotate(
                f"{labels[i]}\n{p.efficiency:.0%} of roofline ({p.bound})",
                (x, y),
                textcoords="offset points",
                xytext=(6, -14),
                fontsize=8,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(panel)
        if panel == "cube":
            ax.set_xlabel("arithmetic intensity (FLOP per HBM byte)")
            ax.set_ylabel("FLOP/s")
        else:
            ax.set_xlabel("vector bytes per HBM byte")
            ax.set_ylabel("vector bytes/s")
        ax.grid(which="both", alpha=0.25)
        ax.legend(fontsize=8, loc="lower right")
    return fig


def _roofs(ax: Axes, panel: str, machines: list[Machine], xs: list[float]) -> None:
    """Draw the roofs of each machine over a range that shows the points and the ridges."""
    ridges = []
    peaks: list[tuple[Machine, str, float]] = []
    for m in machines:
        tops = cube_peaks(m) if panel == "cube" else {"vector": vector_peak(m)}
        for name, top in tops.items():
            peaks.append((m, name, top))
            ridges.append(top / _hbm(m))
    lo = min([*xs, *ridges]) / 10
    hi = max([*xs, *ridges]) * 10
    x = np.geomspace(lo, hi, 256)
    styles = ("-", "--", ":", "-.")
    for j, m in enumerate(machines):
        ls = styles[j % len(styles)]
        tag = f"{m.name} " if len(machines) > 1 else ""
        ax.plot(x, x * _hbm(m), color="#888888", linestyle=ls, linewidth=0.8)
        for mm, name, top in peaks:
            if mm is not m:
                continue
            main = name in ("fp16", "vector")
            unit = "TFLOP/s" if panel == "cube" else "TB/s"
            ax.plot(
                x,
                np.minimum(top, x * _hbm(m)),
                color="#222222" if main else "#999999",
                linestyle=ls,
                linewidth=1.6 if main else 0.9,
            )
            ax.annotate(
                f"{tag}{name} peak {top / 1e12:,.1f} {unit}",
                (hi, top),
                textcoords="offset points",
                xytext=(-4, 3),
                ha="right",
                fontsize=8,
            )
    # Machines that differ elsewhere often share the HBM figure: label each bandwidth once.
    for gbps in sorted({m.hbm_gbps for m in machines}):
        ax.annotate(
            f"HBM {gbps / 1000:g} TB/s",
            (lo * 3, lo * 3 * gbps * 1e9),
            textcoords="offset points",
            xytext=(2, 6),
            fontsize=8,
        )
    ax.set_xlim(lo, hi)
