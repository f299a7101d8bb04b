"""Graph drawings of the IR levels (Graphviz).

``graph(ir)`` returns a :class:`GraphView`: it holds a ``graphviz.Digraph`` (``.dot``), shows as
SVG in notebooks, and falls back to the IR's text with a one-line hint when Graphviz's ``dot``
program is not installed. It draws the Tensor IR (here), the Tile IR
(:mod:`pypto.viz.tile_graph`) and the Block IR (:mod:`pypto.viz.block_graph`).
"""

from __future__ import annotations

import html
import os
import shutil
from typing import Any

import graphviz

from pypto.graph.ir import Func, Lit, Var

# Fill colours per op kind: matmul work stands out from vector work and data movement.
KIND_COLOURS = {
    "matmul": "#f4b183",
    "reduce": "#9dc3e6",
    "elementwise": "#c5e0b4",
    "layout": "#e7e6e6",
}


class GraphView:
    """A drawing: ``.dot`` is the graphviz source object; ``.text`` the IR text it shows."""

    def __init__(self, dot: graphviz.Digraph, text: str) -> None:
        self.dot = dot
        self.text = text

    @staticmethod
    def has_dot() -> bool:
        return shutil.which("dot") is not None

    def svg(self) -> str:
        return self.dot.pipe(format="svg").decode()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        bundle = {"text/plain": self.text}
        if self.has_dot():
            bundle["image/svg+xml"] = self.svg()
        else:
            bundle["text/html"] = (
                "<div><i>Graphviz's <code>dot</code> is not installed (Debian: apt-get install "
                f"graphviz); showing the text.</i><pre>{html.escape(self.text)}</pre></div>"
            )
        return bundle

    def __repr__(self) -> str:
        return self.text


def _label(*lines: str) -> str:
    return "\n".join(lines)


LEVELS = ("tensor", "tile", "block")


def graph(ir: Any, *, level: str = "tensor", rankdir: str = "TB") -> GraphView:
    """Draw one IR level.

    ``ir`` is a Tensor IR ``Func``, a ``TileFunc``, a ``BlockFunc``, or a ``Lowered`` (then
    ``level`` picks ``"tensor"``, ``"tile"`` or ``"block"``). The Tensor IR has a node per
    equation (op, type, source line), fusion groups as clusters, parameters and outputs at the
    edges; the Tile IR has kernels as clusters with their loop nests, tiles coloured by memory
    space and GM buffers between kernels; the Block IR has a cluster per kernel and core type,
    instructions coloured by pipe and the flags as edges between them.

    >>> import pypto as pto
    >>> v = graph(pto.make_graph(lambda x: pto.exp(x) + 1)(pto.ones(3)))
    >>> v.dot.source.count("->")  # x → exp → add ← 1, add → out
    4
    >>> low = pto.jit(lambda x: pto.exp(x), machine="tiny").lower(pto.ones((8, 64)))
    >>> graph(low, level="block").text.startswith("block_func @")
    True
    """
    from pypto.block.ir import BlockFunc
    from pypto.tile.ir import TileFunc

    if level not in LEVELS:
        raise ValueError(f"level {level!r}: one of {', '.join(LEVELS)}")
    if hasattr(ir, "tensor_ir") and not isinstance(ir, Func | TileFunc | BlockFunc):
        ir = getattr(ir, f"{level}_ir")
    if isinstance(ir, Func):
        return GraphView(_tensor_ir(ir, rankdir), str(ir))
    if isinstance(ir, TileFunc):
        from pypto.viz.tile_graph import tile_graph

        return GraphView(tile_graph(ir, rankdir), str(ir))
    if isinstance(ir, BlockFunc):
        from pypto.viz.block_graph import block_graph

        return GraphView(block_graph(ir, rankdir), str(ir))
    raise TypeError(
        "graph() draws a Tensor IR Func, a TileFunc, a BlockFunc or a Lowered, "
        f"not {type(ir).__name__}"
    )


def _tensor_ir(f: Func, rankdir: str) -> graphviz.Digraph:
    from pypto.ops.table import OPS

    g = graphviz.Digraph(f.name, graph_attr={"rankdir": rankdir, "fontname": "Helvetica"})
    g.attr("node", fontname="Helvetica", fontsize="10")
    g.attr("edge", fontname="Helvetica", fontsize="9", color="#555555")
    node: dict[Var, str] = {}
    for i, p in enumerate(f.params):
        name = f"p{i}"
        node[p] = name
        g.node(
            name,
            _label(p.hint or name, str(p.aval)),
            shape="ellipse",
            style="filled",
            fillcolor="#ffffff",
        )
    for i, (v, _) in enumerate(f.consts):
        name = f"c{i}"
        node[v] = name
        g.node(name, _label("const", str(v.aval)), shape="note", fontsize="9")
    groups = dict(f.groups)
    by_group: dict[str | None, list[int]] = {}
    for i, e in enumerate(f.eqns):
        by_group.setdefault(e.group, []).append(i)
    for gid, idxs in by_group.items():
        target = g
        sub: graphviz.Digraph | None = None
        if gid is not None:
            sub = graphviz.Digraph(f"cluster_{gid}")
            sub.attr(
                label=f"{gid}: {groups.get(gid, '')}",
                style="rounded,filled",
                fillcolor="#f7f7f7",
                color="#999999",
                fontsize="10",
            )
            target = sub
        for i in idxs:
            e = f.eqns[i]
            name = f"e{i}"
            node[e.out] = name
            loc = f"{os.path.basename(e.loc.file)}:{e.loc.line}" if e.loc else ""
            params = " ".join(f"{k}={v}" for k, v in e.params if k != "index")
            lines = [
                e.op + (f" [{params}]" if params and len(params) < 40 else ""),
                str(e.out.aval),
            ] + ([loc] if loc else [])
            target.node(
                name,
                _label(*lines),
                shape="box",
                style="rounded,filled",
                fillcolor=KIND_COLOURS.get(OPS[e.op].kind, "#ffffff"),
                tooltip=loc or e.op,
            )
        if sub is not None:
            g.subgraph(sub)
    for i, e in enumerate(f.eqns):
        for a in e.inputs:
            if isinstance(a, Var) and a in node:
                g.edge(node[a], f"e{i}")
            elif isinstance(a, Lit):
                lit = f"l{i}_{id(a)}"
                v = a.value.item()
                text = f"{v:.4g}" if isinstance(v, float) else str(v)
                g.node(lit, text, shape="plaintext", fontsize="8")
                g.edge(lit, f"e{i}", style="dotted")
    for j, o in enumerate(f.outputs):
        name = f"out{j}"
        g.node(name, f"out[{j}]\n{o.aval}", shape="ellipse", style="bold")
        if isinstance(o, Var) and o in node:
            g.edge(node[o], name)
    return g
