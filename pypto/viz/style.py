"""What the views share: pipe colours, op colours, the inline figure and HTML wrappers.

Every view returns an object that works outside notebooks (a matplotlib Figure you can
``savefig``, an HTML string) and shows itself inline through ``_repr_*``. Figures are built
without pyplot, so views never touch pyplot's global figure list or need a GUI backend.

>>> fig = new_figure(2, 1)
>>> fig._repr_png_()[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
True
>>> PIPE_COLOURS["M"]
'#e8743b'
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = [
    "PIPE_COLOURS",
    "PIPE_ORDER",
    "SPACE_COLOURS",
    "HtmlView",
    "ViewFigure",
    "core_cluster",
    "cycles_to_us",
    "new_figure",
    "op_colours",
    "palette",
]

PIPE_ORDER = ("S", "MTE2", "MTE1", "M", "FIX", "V", "MTE3")
"""Pipes in the order data flows through a core: load, move, compute, store."""

# One colour per pipe, shared by the ISA listing and the graphs, so a pipe looks the same
# everywhere; compute pipes are warm, data movement cool, the scalar unit grey.
PIPE_COLOURS: dict[str, str] = {
    "S": "#9e9e9e",
    "MTE2": "#4a90d9",
    "MTE1": "#5bc0de",
    "M": "#e8743b",
    "FIX": "#b07cc6",
    "V": "#59a14f",
    "MTE3": "#1f5f9e",
}

# Memory spaces of the Tile IR drawing: cube buffers in warm tones, the vector UB green, GM white.
SPACE_COLOURS: dict[str, str] = {
    "GM": "#ffffff",
    "L1": "#fde0c5",
    "L0A": "#f9c49a",
    "L0B": "#f7b28a",
    "L0C": "#f4978e",
    "UB": "#c5e0b4",
}

_SYNC_OPS = ("SET_FLAG", "WAIT_FLAG", "XSET_FLAG", "XWAIT_FLAG", "PIPE_BARRIER", "BARRIER")
_SYNC_GREYS = ("#d0d0d0", "#a8a8a8", "#c4b8a8", "#9c8f80", "#707070", "#505050")


class ViewFigure(Figure):
    """A matplotlib Figure that shows itself inline as PNG (``_repr_png_``) in notebooks."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", bbox_inches="tight", dpi=100)
        return buf.getvalue()


def new_figure(width: float, height: float) -> ViewFigure:
    """A figure with its own Agg canvas (no pyplot state, no display needed)."""
    fig = ViewFigure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


class HtmlView:
    """An HTML view: ``.html`` is the markup, ``.text`` the plain text it shows."""

    def __init__(self, html: str, text: str) -> None:
        self.html = html
        self.text = text

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return self.text


def palette(name: str) -> list[tuple[float, float, float, float]]:
    """The colours of a qualitative matplotlib colormap (``"tab10"`` ...), in order.

    >>> len(palette("tab10"))
    10
    """
    cmap = colormaps[name]
    return [cmap(i) for i in range(cmap.N)]


def op_colours(ops: Iterable[str]) -> dict[str, Any]:
    """A colour per op: synchronisation in greys (it is overhead, not work), the rest from
    a qualitative palette in the order given."""
    # tab10 first: the first ten ops get clearly distinct hues.
    pal = [*palette("tab10"), *palette("Set3"), *palette("tab20b")]
    out: dict[str, Any] = {}
    i = 0
    for op in ops:
        if op in out:
            continue
        if op in _SYNC_OPS:
            out[op] = _SYNC_GREYS[_SYNC_OPS.index(op)]
        else:
            out[op] = pal[i % len(pal)]
            i += 1
    return out


def core_cluster(name: str, aiv_per_cluster: int) -> int:
    """The cluster a core belongs to: ``aic3`` → 3, ``aiv7`` → 3 with two vector cores each.

    >>> core_cluster("aiv7", 2), core_cluster("aic3", 2)
    (3, 3)
    """
    n = int(name[3:])
    return n if name.startswith("aic") else n // aiv_per_cluster


def cycles_to_us(clock_ghz: float) -> tuple[Any, Any]:
    """The (forward, inverse) pair for a secondary axis from cycles to microseconds."""
    per_us = clock_ghz * 1000.0
    return (lambda c: c / per_us, lambda u: u * per_us)
