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


def softmax_lowered():
    f = pto.jit(lambda x: pto.softmax(x * 2) + 1, machine="tiny")
    return f.lower(pto.ones((32, 256)))


def test_tile_ir_kernels_loops_and_memory_spaces() -> None:
    from pypto.tile.ir import For, TLoad, TOp, TStore, walk

    low = softmax_lowered()
    tf = low.tile_ir
    src = pto.viz.graph(low, level="tile").dot.source
    kernels = re.findall(r"subgraph (cluster_k\d+) \{", src)
    assert len(kernels) == len(tf.kernels)
    for k in tf.kernels:
        assert k.header() in src
    stmts = [
        s for k in tf.kernels for sec in k.sections for s in walk(sec.pre + sec.body + sec.post)
    ]
    loops = sum(isinstance(s, For) for s in stmts)
    assert len(re.findall(r"label=\"for %", src)) == loops
    tiles = [s for s in stmts if isinstance(s, TLoad | TStore | TOp)]
    assert src.count("shape=box") == len(tiles)
    for s in tiles:
        if isinstance(s, TOp):
            assert f"%{s.dst.name}: {s.dst.space} " in src
    for b in tf.buffers:
        assert re.search(rf"gm_{b.name} \[label=\"{b.name}\n", src)
    n_loads = sum(isinstance(s, TLoad) for s in tiles)
    assert len(re.findall(r"gm_\w+ -> ", src)) == n_loads  # GM → each load
    assert len(re.findall(r" -> gm_\w+", src)) == sum(isinstance(s, TStore) for s in tiles)


def test_block_ir_per_core_type_with_sync_edges() -> None:
    from pypto.block.ir import BInstr, BLoop

    low = softmax_lowered()
    bf = low.block_ir
    src = pto.viz.graph(low, level="block").dot.source

    def instrs(items):
        for it in items:
            if isinstance(it, BLoop):
                yield from instrs(it.body)
            else:
                assert isinstance(it, BInstr)
                yield it.instr

    waits = sum(
        ins.op == "WAIT_FLAG" for k in bf.kernels for _, body in k.programs for ins in instrs(body)
    )
    for i, k in enumerate(bf.kernels):
        for core, _ in k.programs:
            assert f"subgraph cluster_k{i}_{core} {{" in src
    sync = re.findall(r"(\w+) -> (\w+) \[[^\]]*class=sync", src)
    # Every wait is released by at least one set of its flag (the program balances them).
    assert len({w for _, w in sync}) == waits
    for s, w in sync:
        assert re.search(rf"\b{s} \[label=\"SET_FLAG", src)
        assert re.search(rf"\b{w} \[label=\"WAIT_FLAG", src)
    assert 'class="pipe-V"' in src or "class=pipe-V" in src


def test_block_ir_cross_core_flags() -> None:
    from pypto.block.ir import BInstr, BlockFunc, BlockKernel
    from pypto.isa import parse_instr

    def prog(*lines: str) -> tuple[BInstr, ...]:
        return tuple(BInstr(parse_instr(ln)) for ln in lines)

    k = BlockKernel(
        "handover",
        (
            ("aic", prog("XSET_FLAG FIX, aiv0, 1", "XSET_FLAG FIX, aiv1, 1")),
            ("aiv", prog("XWAIT_FLAG MTE2, aic, 1", "XWAIT_FLAG MTE2, aic, 0")),
        ),
        dist="cluster",
    )
    src = pto.viz.graph(BlockFunc("f", (), (k,), (), ())).dot.source
    x = re.findall(r"(\w+) -> (\w+) \[[^\]]*class=xsync", src)
    # Both sets (to aiv0 and aiv1: one template) release the wait on id 1, none the one on 0.
    assert sorted(x) == [("k0_aic_0", "k0_aiv_0"), ("k0_aic_1", "k0_aiv_0")]


def test_levels_fall_back_to_their_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GraphView, "has_dot", staticmethod(lambda: False))
    low = softmax_lowered()
    for level, head in (("tile", "tile_func @"), ("block", "block_func @")):
        bundle = pto.viz.graph(low, level=level)._repr_mimebundle_()
        assert "image/svg+xml" not in bundle and head in bundle["text/html"]
        assert bundle["text/plain"].startswith(head)
    with pytest.raises(ValueError, match="one of tensor, tile, block"):
        pto.viz.graph(low, level="isa")


@pytest.mark.skipif(not GraphView.has_dot(), reason="Graphviz's dot is not installed")
def test_tile_and_block_render_svg() -> None:
    low = softmax_lowered()
    assert "tload" in pto.viz.graph(low.tile_ir).svg()
    assert "WAIT_FLAG" in pto.viz.graph(low.block_ir).svg()
