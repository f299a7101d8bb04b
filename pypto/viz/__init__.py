"""Views of every level and of Profiles: graphs, the ISA listing, timelines, buffer occupancy,
tile maps and rooflines; and the widgets over them.

Each view is a plain function returning an object that also works outside notebooks — a
:class:`GraphView` (graphviz), an :class:`HtmlView` or a matplotlib Figure — and shows itself
inline in Jupyter. The widgets (ipywidgets) combine them: :func:`steps` walks the tensor passes,
:func:`explore` puts every level and view of a function in tabs, :func:`tune` recompiles on
every change of a knob (its work is the pure :func:`tune_once`). Outside a notebook the widgets
print as text.
"""

from pypto.viz.explore import Explorer, explore
from pypto.viz.graph import GraphView, graph
from pypto.viz.isa import isa
from pypto.viz.memory import memory
from pypto.viz.roofline import roofline
from pypto.viz.steps import PassSteps, passes, steps
from pypto.viz.style import HtmlView, ViewFigure
from pypto.viz.tiles import tiles
from pypto.viz.timeline import timeline
from pypto.viz.tune import Tuner, TuneResult, TuneSettings, tune, tune_once

__all__ = [
    "Explorer",
    "GraphView",
    "HtmlView",
    "PassSteps",
    "TuneResult",
    "TuneSettings",
    "Tuner",
    "ViewFigure",
    "explore",
    "graph",
    "isa",
    "memory",
    "passes",
    "roofline",
    "steps",
    "tiles",
    "timeline",
    "tune",
    "tune_once",
]
