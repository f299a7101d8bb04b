"""Views of every level and of Profiles: graphs, the ISA listing, timelines, buffer occupancy,
tile maps and rooflines.

Each view is a plain function returning an object that also works outside notebooks — a
:class:`GraphView` (graphviz), an :class:`HtmlView` or a matplotlib Figure — and shows itself
inline in Jupyter.
"""

from pypto.viz.graph import GraphView, graph
from pypto.viz.isa import isa
from pypto.viz.memory import memory
from pypto.viz.roofline import roofline
from pypto.viz.style import HtmlView, ViewFigure
from pypto.viz.tiles import tiles
from pypto.viz.timeline import timeline

__all__ = [
    "GraphView",
    "HtmlView",
    "ViewFigure",
    "graph",
    "isa",
    "memory",
    "roofline",
    "tiles",
    "timeline",
]
