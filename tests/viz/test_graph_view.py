"""The Tensor IR drawing: nodes, edges and clusters mirror the IR; it renders with Graphviz."""

from __future__ import annotations

import re

import pytest

import pypto as pto
from pypto.viz import GraphView


def lowered():
    f = pto.jit(lambda x, w, b: pto.softmax(pto.gelu(x @ w + b)) * 2)
    return f.lower(pto.ones((4, 8)), pto.ones((8, 16)), pto.zeros(16))


def test_nodes_edges_and_clusters_mirror_the_ir() -> None:
    low = lowered()
    f = low.tensor_ir
    view = pto.viz.graph(low)
    src = view.dot.source
    eqn_nodes = set(re.findall(r"^\s*(e\d+) \[", src, re.M))
    assert len(eqn_nodes) == len(f.eqns)
    assert len(re.findall(r"subgraph cluster_", src)) == len(f.groups)
    for gid, kind in f.groups:
        assert f"{gid}: {kind}" in src
    var_edges = sum(1 for e in f.eqns for a in e.inputs if hasattr(a, "hint"))
    out_edges = len(f.outputs)
    lit_edges = sum(1 for e in f.eqns for a in e.inputs if not hasattr(a, "hint"))
    assert src.count("->") == var_edges + out_edges + lit_edges
    assert "test_graph_view.py:" in src  # source lines on the nodes
    assert '"x\nf32[4,8]"' in src or "x\nf32[4,8]" in src


@pytest.mark.skipif(not GraphView.has_dot(), reason="Graphviz's dot is not installed")
def test_renders_svg_in_notebooks() -> None:
    bundle = pto.viz.graph(lowered())._repr_mimebundle_()
    assert bundle["text/plain"].startswith("func @")
    svg = bundle["image/svg+xml"]
    assert svg.lstrip().startswith("<?xml") or "<svg" in svg[:500]
    assert "softmax" in svg and "matmul" in svg


def test_without_dot_it_shows_the_text_and_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GraphView, "has_dot", staticmethod(lambda: False))
    bundle = pto.viz.graph(lowered())._repr_mimebundle_()
    assert "image/svg+xml" not in bundle
    assert "apt-get install graphviz" in bundle["text/html"] and "func @" in bundle["text/html"]


def test_refuses_what_it_cannot_draw() -> None:
    with pytest.raises(TypeError, match="Func"):
        pto.viz.graph(42)
