"""The Tile IR as a graph: kernels as clusters, each core type's section and every loop nested
inside, tile statements coloured by the memory space they write, GM buffers between kernels.

Edges follow the data: a GM buffer to the loads that read it, a tile to the statements that
use it (from its latest definition before the use, in program order), a store to its buffer.
"""

from __future__ import annotations

import graphviz

from pypto.tile.ir import For, Kernel, SOp, Stmt, TileFunc, TileVar, TLoad, TOp, TStore
from pypto.viz.style import SPACE_COLOURS

__all__ = ["tile_graph"]


def tile_graph(f: TileFunc, rankdir: str = "TB") -> graphviz.Digraph:
    """Draw ``f``: one cluster per kernel (its header as the label), sub-clusters per core type,
    ``pre``/``post`` blocks and ``for`` loops; GM buffers as cylinders.

    >>> import pypto as pto
    >>> low = pto.jit(lambda x: pto.exp(x) + 1, machine="tiny").lower(pto.ones((16, 64)))
    >>> src = tile_graph(low.tile_ir).source
    >>> [ln.strip() for ln in src.splitlines() if ln.strip().startswith("subgraph cluster_k0")]
    ['subgraph cluster_k0 {', 'subgraph cluster_k0_aiv {']
    """
    g = graphviz.Digraph(f.name, graph_attr={"rankdir": rankdir, "fontname": "Helvetica"})
    g.attr("node", fontname="Helvetica", fontsize="10")
    g.attr("edge", fontname="Helvetica", fontsize="9", color="#555555")
    for b in f.buffers:
        g.node(
            f"gm_{b.name}",
            f"{b.name}\n{b.dtype.short}[{','.join(map(str, b.shape))}] {b.role}",
            shape="cylinder",
            style="filled",
            fillcolor=SPACE_COLOURS["GM"],
        )
    for ki, k in enumerate(f.kernels):
        _kernel(g, k, ki)
    return g


def _kernel(g: graphviz.Digraph, k: Kernel, ki: int) -> None:
    kc = graphviz.Digraph(f"cluster_k{ki}")
    rings = "".join(f"\n{r}" for r in k.rings)
    kc.attr(
        label=k.header() + rings + (f"\n{k.loc}" if k.loc else ""),
        style="rounded",
        color="#666666",
        fontsize="10",
        labeljust="l",
    )
    for sec in k.sections:
        sc = graphviz.Digraph(f"cluster_k{ki}_{sec.core}")
        sc.attr(label=f".{sec.core}", style="rounded,filled", fillcolor="#f7f7f7", color="#aaaaaa")
        defs: dict[str, str] = {}
        prefix = f"k{ki}_{sec.core}"
        for part, stmts in (("pre", sec.pre), ("body", sec.body), ("post", sec.post)):
            if not stmts:
                continue
            if part == "body":
                _stmts(g, sc, stmts, f"{prefix}_b", defs)
            else:
                pc = graphviz.Digraph(f"cluster_{prefix}_{part}")
                pc.attr(label=part, style="dashed", color="#999999")
                _stmts(g, pc, stmts, f"{prefix}_{part}", defs)
                sc.subgraph(pc)
        kc.subgraph(sc)
    g.subgraph(kc)


def _tile_label(t: TileVar) -> str:
    return f"%{t.name}: {t.space} {t.dtype.short}[{t.shape[0]},{t.shape[1]}]"


def _stmts(
    g: graphviz.Digraph,
    target: graphviz.Digraph,
    stmts: tuple[Stmt, ...],
    prefix: str,
    defs: dict[str, str],
) -> None:
    """Add ``stmts`` to ``target`` (a cluster); edges go on the top graph ``g`` so they may
    cross clusters."""
    for i, s in enumerate(stmts):
        name = f"{prefix}_{i}"
        if isinstance(s, For):
            lc = graphviz.Digraph(f"cluster_{name}")
            step = f" step {s.step}" if s.step != 1 else ""
            lc.attr(label=f"for %{s.reg} in {s.start}..{s.stop}{step}", style="solid")
            _stmts(g, lc, s.body, name, defs)
            target.subgraph(lc)
            continue
        if isinstance(s, SOp):
            target.node(name, s.text(), shape="plaintext", fontsize="8", fontcolor="#666666")
            for t in s.tiles:  # SLD: the scalar unit reads an index tile
                _use(g, defs, t, name)
            continue
        loc = f"\n{s.loc}" if s.loc else ""
        if isinstance(s, TLoad):
            r, c = s.dst.shape
            label = f"tload %{s.tensor}[{s.row} : +{r}, {s.col} : +{c}]\n{_tile_label(s.dst)}"
            target.node(name, label + loc, **_box(s.dst.space.value))
            g.edge(f"gm_{s.tensor}", name)
            defs[s.dst.name] = name
        elif isinstance(s, TStore):
            r, c = s.src.shape
            label = f"tstore %{s.tensor}[{s.row} : +{r}, {s.col} : +{c}]"
            target.node(name, label + loc, **_box("GM"))
            _use(g, defs, s.src, name)
            g.edge(name, f"gm_{s.tensor}")
        elif isinstance(s, TOp):
            target.node(name, f"{s.op.lower()}\n{_tile_label(s.dst)}{loc}", **_box(s.dst.space))
            for a in s.args:
                if isinstance(a, TileVar):
                    _use(g, defs, a, name)
            defs[s.dst.name] = name


def _use(g: graphviz.Digraph, defs: dict[str, str], t: TileVar, name: str) -> None:
    src = defs.get(t.name)
    if src is not None and src != name:
        g.edge(src, name, label=t.space.value, fontsize="8")


def _box(space: str) -> dict[str, str]:
    return {"shape": "box", "style": "rounded,filled", "fillcolor": SPACE_COLOURS[space]}
