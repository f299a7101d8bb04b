"""Cross-core synchronisation: ``XSET_FLAG``/``XWAIT_FLAG`` around the GM workspace rings of a
cluster kernel (MPMD hand-offs between the cube core and its vector cores, no global barrier).

A :class:`~pypto.tile.ir.Ring` is a GM workspace with ``slots`` copies; on every grid point the
writing core fills the copy ``%slot`` and the reading cores empty it. Two flags per slot order
them, as in ``tests/npu/programs/matmul_relu.pto``:

* **full** (writer → readers): set on the store pipe after the writer's last store of the slot,
  waited on the load pipe before the reader's first load of it (the accesses one item list
  makes directly are one use of a slot; each loop body holding accesses is another);
* **free** (readers → writer): set on the load pipe after the reader's last load, waited on the
  store pipe before the writer's first store. Each reader sets every slot free once before the
  grid, and the writer drains those tokens after it, so every set meets exactly one wait and
  the next kernel starts with no flag pending.

The cube core talks to each vector core of its cluster (``aiv0``, ``aiv1``); a vector core
talks to ``aic``. Ring ``i`` uses flag ids ``base_i .. base_i + slots - 1`` (bases in ring
order), so rings in both directions never share an id.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.block.ir import BInstr, BItem, BLoop
from pypto.core.errors import TileError
from pypto.isa.ir import Expr, GmRef, Instr, Pipe
from pypto.isa.opcodes import GM_STORES, pipe_of
from pypto.npu.machine import Machine
from pypto.tile.ir import Kernel, Ring

__all__ = ["add_cross_flags"]


def _peers(core: str, m: Machine) -> list[str]:
    return [f"aiv{i}" for i in range(m.aiv_per_cluster)] if core == "aic" else ["aic"]


def _touches(it: BItem, ring: Ring, op: str) -> bool:
    if isinstance(it, BLoop):
        return any(_touches(x, ring, op) for x in it.body)
    ins = it.instr
    if ins.op != op and not (op == "TSTORE" and ins.op in GM_STORES):
        return False
    g = ins.args[0] if op == "TSTORE" else ins.args[1]
    return isinstance(g, GmRef) and g.tensor == ring.tensor


def _pipe(items: tuple[BItem, ...] | list[BItem], op: str, ring: Ring) -> Pipe:
    for it in items:
        if isinstance(it, BLoop):
            if _touches(it, ring, op):
                return _pipe(it.body, op, ring)
        elif _touches(it, ring, op):
            return pipe_of(it.instr)
    raise AssertionError(f"no {op} of ring %{ring.tensor}")


def _flag(op: str, pipe: Pipe, peer: str, ev: Expr) -> BInstr:
    return BInstr(Instr(op, (pipe, peer, ev)))


def _part(it: BItem, op: str, ring: Ring) -> int:
    """The row block of a ring slot an access touches, as its row's constant term (the
    block's first row; the registers pick the slot and a vector core's rows in it); 0 for a
    ring of one part."""
    assert isinstance(it, BInstr)
    g = it.instr.args[0] if op == "TSTORE" else it.instr.args[1]
    assert isinstance(g, GmRef)
    return g.row.const if ring.parts > 1 else 0


def _wrap(
    items: list[BItem], ring: Ring, op: str, pipe: Pipe, peers: list[str], ev: Expr
) -> list[BItem]:
    """Wait before the first and set after the last of the ring accesses that ``items`` makes
    itself (one use of a slot: e.g. the stores of one tile's accumulators), or of each of
    its ``parts`` row blocks in turn; loops holding accesses get their own flags inside."""
    items = [
        replace(it, body=tuple(_wrap(list(it.body), ring, op, pipe, peers, ev)))
        if isinstance(it, BLoop) and _touches(it, ring, op)
        else it
        for it in items
    ]
    hits = [i for i, it in enumerate(items) if isinstance(it, BInstr) and _touches(it, ring, op)]
    if not hits:
        return items
    groups: list[list[int]] = []  # the accesses of each row block, blocks in program order
    for i in hits:
        if groups and _part(items[groups[-1][0]], op, ring) == _part(items[i], op, ring):
            groups[-1].append(i)
        else:
            groups.append([i])
    assert len(groups) == ring.parts, f"ring %{ring.tensor}: {len(groups)} of {ring.parts} parts"
    waits = {g[0] for g in groups}
    sets = {g[-1] for g in groups}
    out: list[BItem] = []
    for i, it in enumerate(items):
        if i in waits:
            out.extend(_flag("XWAIT_FLAG", pipe, p, ev) for p in peers)
        out.append(it)
        if i in sets:
            out.extend(_flag("XSET_FLAG", pipe, p, ev) for p in peers)
    return out


def add_cross_flags(k: Kernel, core: str, items: list[BItem], m: Machine) -> list[BItem]:
    """``items`` (one section's scheduled program) with the flags of ``k``'s rings."""
    base = 0
    peers = _peers(core, m)
    need = sum(r.slots for r in k.rings)
    if need > m.cross_flag_ids:
        raise TileError(
            f"kernel @{k.name} hands tiles over through {len(k.rings)} ring(s) of {need} "
            f"slots in all, a cross-core flag id each, and the machine has "
            f"cross_flag_ids={m.cross_flag_ids}",
            op="lower",
            loc=k.loc,
            hint=f"machine.replace(cross_flag_ids={need}) fits it",
        )
    for ring in k.rings:
        ev = Expr.reg(ring.slot) + base
        writer = core == ring.src
        op = "TSTORE" if writer else "TLOAD"
        pipe = _pipe(items, op, ring)
        items = _wrap(items, ring, op, pipe, peers, ev)
        # every slot free once per part to start with; the writer drains them at the end
        ids = [Expr.of(base + s) for s in range(ring.slots) for _ in range(ring.parts)]
        if writer:
            items = [*items, *(_flag("XWAIT_FLAG", pipe, p, e) for e in ids for p in peers)]
        else:
            items = [*(_flag("XSET_FLAG", pipe, p, e) for e in ids for p in peers), *items]
        base += ring.slots
    return items
