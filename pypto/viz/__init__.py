"""Views of every level: graphs, listings and (as the levels land) timelines and rooflines."""

from pypto.viz.graph import GraphView, graph

__all__ = ["GraphView", "graph"]
