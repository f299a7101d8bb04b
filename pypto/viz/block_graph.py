"""The Block IR as a graph: per kernel, one cluster per core type (its buffers as a note, its
loops nested), an instruction per node coloured by its pipe, and the synchronisation drawn as
edges between pipes.

Program order runs top to bottom (light edges). Sync edges join a ``WAIT_FLAG`` to the
``SET_FLAG`` s of the same (source pipe, destination pipe, event id) that release it: the
latest such set before the wait in program order and, inside a loop, the last such set after
it in a loop around both (the previous iteration's). Cross-core flags join ``XSET_FLAG`` on
one core type to the matching ``XWAIT_FLAG`` on the other, dashed.
Scalar instructions (loop counters, index arithmetic) are left out; the loops show them.
"""

from __future__ import annotations

import itertools

import graphviz

from pypto.block.ir import BInstr, BItem, BlockFunc, BlockKernel, BLoop
from pypto.isa.ir import GmRef, Instr, Pipe, Tile
from pypto.isa.opcodes import pipe_of
from pypto.viz.style import PIPE_COLOURS

__all__ = ["block_graph"]

_FLAG_OPS = ("SET_FLAG", "WAIT_FLAG")


def block_graph(f: BlockFunc, rankdir: str = "TB") -> graphviz.Digraph:
    """Draw ``f``: a cluster per kernel and core type, pipe-coloured instruction nodes, sync
    edges (``class="sync"``, labelled ``SRC→DST #id``) and cross-core edges (``class="xsync"``).

    >>> import pypto as pto
    >>> low = pto.jit(lambda x: pto.exp(x) + 1, machine="tiny").lower(pto.ones((16, 64)))
    >>> src = block_graph(low.block_ir).source
    >>> "cluster_k0_aiv" in src and 'class=sync' in src
    True
    """
    g = graphviz.Digraph(f.name, graph_attr={"rankdir": rankdir, "fontname": "Helvetica"})
    g.attr("node", fontname="Helvetica", fontsize="9", shape="box", style="rounded,filled")
    g.attr("edge", fontname="Helvetica", fontsize="8")
    for ki, k in enumerate(f.kernels):
        _kernel(g, k, ki)
    return g


def _kernel(g: graphviz.Digraph, k: BlockKernel, ki: int) -> None:
    who = "clusters" if k.dist == "cluster" else "vector cores"
    kc = graphviz.Digraph(f"cluster_k{ki}")
    kc.attr(label=f"block @{k.name} ({k.grid} tiles over the {who})", style="rounded")
    kc.attr(color="#666666", fontsize="10", labeljust="l")
    xsets: list[tuple[str, str, str, str]] = []  # (node, from core, to core, id)
    xwaits: list[tuple[str, str, str, str]] = []
    for core, body in k.programs:
        cc = graphviz.Digraph(f"cluster_k{ki}_{core}")
        cc.attr(label=f".{core}", style="rounded,filled", fillcolor="#f7f7f7", color="#aaaaaa")
        bufs = [str(b) for c, bs in k.buffers if c == core for b in bs]
        if bufs:
            cc.node(
                f"k{ki}_{core}_bufs",
                "\\l".join(bufs) + "\\l",
                shape="note",
                style="filled",
                fillcolor="#ffffff",
                fontname="Courier",
                fontsize="8",
            )
        order: list[tuple[str, Instr, tuple[str, ...]]] = []
        _items(cc, body, f"k{ki}_{core}", order, ())
        for (a, _, _), (b, _, _) in itertools.pairwise(order):
            g.edge(a, b, color="#dddddd", arrowhead="none", weight="10")
        _sync_edges(g, order)
        for node, ins, _ in order:
            if ins.op == "XSET_FLAG":
                xsets.append((node, core, _peer_kind(str(ins.args[1])), str(ins.args[2])))
            elif ins.op == "XWAIT_FLAG":
                xwaits.append((node, _peer_kind(str(ins.args[1])), core, str(ins.args[2])))
        kc.subgraph(cc)
    for wn, src, dst, fid in xwaits:
        for sn, s_src, s_dst, s_id in xsets:
            if (s_src, s_dst, s_id) == (src, dst, fid):
                g.edge(sn, wn, style="dashed", color="#c0392b", constraint="false", **_cls("xsync"))
    g.subgraph(kc)


def _peer_kind(peer: str) -> str:
    return "aic" if peer == "aic" else "aiv"


def _cls(name: str) -> dict[str, str]:
    # graphviz's `class` attribute lands in the SVG, so the edges can be styled and found.
    return {"class": name}


def _items(
    target: graphviz.Digraph,
    items: tuple[BItem, ...],
    prefix: str,
    order: list[tuple[str, Instr, tuple[str, ...]]],
    loops: tuple[str, ...],
) -> None:
    """Add the nodes of ``items`` to ``target`` and append (node, instruction, enclosing
    loops) to ``order`` in program order."""
    for i, it in enumerate(items):
        name = f"{prefix}_{i}"
        if isinstance(it, BLoop):
            lc = graphviz.Digraph(f"cluster_{name}")
            lc.attr(label=f"loop %{it.reg} in {it.start}..{it.stop} step {it.step}", style="solid")
            _items(lc, it.body, name, order, (*loops, name))
            target.subgraph(lc)
            continue
        assert isinstance(it, BInstr)
        ins = it.instr
        pipe = pipe_of(ins)
        if pipe is Pipe.S and ins.op not in ("PIPE_BARRIER", "BARRIER"):
            continue
        target.node(
            name,
            _label(ins),
            fillcolor=PIPE_COLOURS[pipe.value],
            fontcolor="white",
            tooltip=str(ins),
            **_cls(f"pipe-{pipe.value}"),
        )
        order.append((name, ins, loops))


def _label(ins: Instr) -> str:
    """The op and a short form of its operands: tiles as space and shape, GM windows by
    tensor, flags as ``SRC→DST #id``."""
    op = ins.op
    a = ins.args
    if op in _FLAG_OPS:
        return f"{op}\n{a[0]}→{a[1]} #{a[2]}"
    if op in ("XSET_FLAG", "XWAIT_FLAG"):
        return f"{op}\n{a[0]} {'→' if op == 'XSET_FLAG' else '←'} {a[1]} #{a[2]}"
    parts = []
    for x in a:
        if isinstance(x, Tile):
            parts.append(f"{x.space} {x.dtype.short}[{x.rows},{x.cols}]")
        elif isinstance(x, GmRef):
            parts.append(x.tensor)
    pipe = pipe_of(ins).value
    return f"{op} ({pipe})" + (f"\n{', '.join(parts)}" if parts else "")


def _sync_edges(g: graphviz.Digraph, order: list[tuple[str, Instr, tuple[str, ...]]]) -> None:
    sets: dict[tuple[str, str, str], list[int]] = {}
    for i, (_, ins, _) in enumerate(order):
        if ins.op == "SET_FLAG":
            sets.setdefault(_key(ins), []).append(i)
    for i, (node, ins, loops) in enumerate(order):
        if ins.op != "WAIT_FLAG":
            continue
        key = _key(ins)
        cands = sets.get(key, [])
        release = [j for j in cands if j < i][-1:]
        carried = [j for j in cands if j > i and set(order[j][2]) & set(loops)]
        for j in release + carried[-1:]:
            g.edge(
                order[j][0],
                node,
                label=f"{key[0]}→{key[1]} #{key[2]}",
                color="#c0392b",
                fontcolor="#c0392b",
                constraint="false",
                **_cls("sync"),
            )


def _key(ins: Instr) -> tuple[str, str, str]:
    return (str(ins.args[0]), str(ins.args[1]), str(ins.args[2]))
