"""Where each tile of an output came from: its grid coloured by the core that stored each tile,
numbered in the order the stores completed.

The windows come from the trace (:meth:`pypto.npu.Profile.windows`): each TSTORE's GM row and
column with its registers evaluated, so the picture is what ran, not what the code intended.
"""

from __future__ import annotations

from typing import Any

from matplotlib import colormaps
from matplotlib.patches import Patch, Rectangle

from pypto.npu.profile import GmWindow, Profile
from pypto.viz.style import ViewFigure, new_figure, palette

__all__ = ["core_colours", "tiles"]


def core_colours(cores: list[str]) -> dict[str, Any]:
    """A distinct colour per core (a qualitative palette while it lasts, then a smooth one).

    >>> sorted(core_colours(["aiv0", "aiv1"]))
    ['aiv0', 'aiv1']
    """
    if len(cores) <= 10:
        pal = palette("tab10")
        return {c: pal[i] for i, c in enumerate(cores)}
    if len(cores) <= 20:
        pal = palette("tab20")
        return {c: pal[i] for i, c in enumerate(cores)}
    cmap = colormaps["turbo"]
    return {c: cmap(i / (len(cores) - 1)) for i, c in enumerate(cores)}


def _output_of(profile: Profile) -> str:
    if profile.request is None:
        raise ValueError("this profile does not know its program: name the tensor")
    outs = [t.name for t in profile.request.program.tensors if t.role in ("out", "inout")]
    if len(outs) != 1:
        raise ValueError(f"the program has {len(outs)} outputs ({', '.join(outs)}): name one")
    return outs[0]


def tiles(
    profile: Profile, tensor: str | None = None, *, numbers: bool | None = None
) -> ViewFigure:
    """Draw GM tensor ``tensor`` (default: the program's only output) in its 2-D view: a
    rectangle per stored window, coloured by the storing core, numbered 1, 2, … in order of
    completion (``numbers``: default when at most 300 tiles).

    >>> import pypto as pto, numpy as np
    >>> f = pto.jit(lambda x: pto.softmax(x), machine="tiny")
    >>> fig = tiles(f.profile(np.ones((64, 256), np.float32)))
    >>> [p.get_label() for p in fig.axes[0].get_legend().get_patches()]
    ['aiv0', 'aiv1']
    """
    name = tensor if tensor is not None else _output_of(profile)
    if not profile.traced:
        raise ValueError("this profile has no trace: simulate with trace=True to see its tiles")
    wins = profile.windows(name)
    if not wins:
        raise ValueError(f"no TSTORE wrote {name!r} in this run")
    assert profile.request is not None
    decl = profile.request.program.tensor(name)
    R, C = decl.view2d
    order = sorted(range(len(wins)), key=lambda i: (wins[i].event.end, wins[i].event.start))
    rank = {i: n + 1 for n, i in enumerate(order)}
    cores = [c for c in profile.cores if any(w.event.core == c for w in wins)]
    colour = core_colours(cores)
    show_numbers = len(wins) <= 300 if numbers is None else numbers

    # Keep the figure readable for tall or wide tensors: clamp the aspect, not the data.
    ratio = min(max(R / C, 0.25), 4.0) if C else 1.0
    fig = new_figure(8.0, (1.2 + 6.5 * ratio) if ratio < 1 else 7.5)
    ax = fig.add_subplot()
    for i, w in enumerate(wins):
        ax.add_patch(_rect(w, colour[w.event.core]))
        if show_numbers:
            ax.text(
                w.col + w.cols / 2,
                w.row + w.rows / 2,
                str(rank[i]),
                ha="center",
                va="center",
                fontsize=max(5.0, 11.0 - len(wins) ** 0.5 / 2),
                color="white",
                fontweight="bold",
            )
    ax.set_xlim(0, C)
    ax.set_ylim(R, 0)  # row 0 at the top, as the tensor prints
    ax.set_aspect("equal" if 0.25 <= R / max(C, 1) <= 4 else "auto")
    ax.set_xlabel("column")
    ax.set_ylabel("row" if len(decl.shape) <= 2 else "row (leading dimensions flattened)")
    dims = "x".join(map(str, decl.shape))
    ax.set_title(
        f"{name}: {decl.dtype.short}[{dims}] on {profile.machine.name} — {len(wins)} tiles "
        f"from {len(cores)} cores" + (", numbered in order of completion" if show_numbers else ""),
        fontsize=10,
    )
    ax.legend(
        handles=[Patch(facecolor=colour[c], label=c) for c in cores],
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=8,
        ncols=1 if len(cores) <= 24 else 2,
    )
    return fig


def _rect(w: GmWindow, colour: Any) -> Rectangle:
    return Rectangle(
        (w.col, w.row), w.cols, w.rows, facecolor=colour, edgecolor="white", linewidth=0.8
    )
