"""Synchronisation insertion: ``SET_FLAG``/``WAIT_FLAG`` pairs wherever two pipes share a tile.

The pipes of a core run in parallel, each in order, so an instruction must wait only for
instructions of *other* pipes that touched the same tile buffer (read after write, write after
read, write after write). Per straight-line region:

* each dependency becomes a flag set on the source pipe right after the source instruction and
  waited on the destination pipe right before the destination; a later dependency between the
  same two pipes whose source is already covered by an earlier wait is dropped (the pipes run
  in order);
* a loop counts as one instruction of its parent region: waits go before it, sets after it;
* **loop-carried** dependencies (this iteration's last access on one pipe, the next
  iteration's first access on another) become a flag that is set ``slots`` times before the
  loop (one per buffer copy: a double buffer lets the producer run one tile ahead), waited
  and set once per iteration, and drained after the loop. When every buffer of such a flag
  lives inside the loop (a double buffer's slot counter runs on from one run of the loop to
  the next), the tokens are set at the kernel's start and drained at its end instead, and
  enclosing loops leave those buffers alone: a nested K loop then loads the next tile's first
  block while the cube finishes this tile. A pipe whose first access of the iteration reads
  an accumulator it writes later (updated in place) counts as writing it. A carried flag has
  a set/wait pair **per tile** (:func:`_chain`): the n-th wait of an iteration takes the n-th
  set of an earlier one, so where the tiles' last source accesses and first destination
  accesses come in the same order each tile waits for its own last use only;
* a **conditional** — a loop that runs at most once (:func:`_once`) — gets no carried flag:
  nothing carries from one of its iterations to the next;
* a loop right after a sibling (nothing touching a tile between) **takes over** the
  sibling's carried flag of the same pipes when the two have as many pairs and tokens and
  each shared tile is in a pair no later in the second loop than in the first: no drain
  after the first loop and no set-up before the second, whose first waits take the first
  loop's last sets. The region then orders those tiles between the two loops by that flag
  (:func:`_handed_over`) instead of a pair that waits for all of the first loop — a software
  pipeline's fill, steady and drain loops run into one another.

Flags are counting semaphores, so every set is matched by exactly one wait.

**The scalar unit** reads tiles too (``SLD``, an index that becomes an address). A pipe that
writes such a tile sets a flag the scalar unit waits on before its read (``MTE2 → S``); the
other way needs no flag, since the scalar unit finishes the read before it issues anything
that comes after it.

**Event ids.** Flags are grouped into *units* that share an id by construction: the pairs of
one region between two pipes whose set-to-wait spans overlap (made in the order of their
sources and of their destinations, so they pair up first in, first out as made), or one
carried flag with its set-up, per-iteration flags and drain (across the loops that took it
over, one after another). A unit's *span* is the program
text from its first flag instruction to its last; both ends lie in one region, so the span
is a run of consecutive items of that region (loops included whole).

Two units of one (source pipe, destination pipe) pair may share an id when their spans are
disjoint. A counting flag releases the n-th ``WAIT_FLAG`` of an id on the destination pipe
once the n-th ``SET_FLAG`` of that id has happened on the source pipe (each pipe runs in
order; the simulator pairs them first in, first out), so a wait is ordered after the set of
the same rank and after nothing else. Loops are structured, so each run of a span is one
contiguous stretch of the core's program order holding no flag of the id but its own, and it
sets as often as it waits (a carried flag's drain takes back its set-up tokens). Runs of
disjoint spans thus form consecutive, balanced blocks, in the same order on both pipes: the
ranks of a run's sets and of its waits are shifted by the same count, and every wait still
pairs with the set it was made for. A source pipe running ahead into a later span only adds
sets of higher rank: a wait of the earlier span may take such a token, but only after the
set of its own rank has happened, and each wait of the later span still needs its own rank's
set. Units whose spans overlap (a loop's carried flag and the pairs of its body; a double
buffer's flag set at the kernel's start and drained at its end, and every other unit of
its pipe pair) need different ids.

Ids are given per pipe pair. Where they fit the machine's ``event_ids``, the fixed layout: a
region's nesting depth for its own pairs (regions of equal depth are disjoint), one id above
the deepest region for each carried flag. Otherwise the spans are coloured greedily in
program order (interval colouring: as many ids as spans overlap at one point, the fewest
possible), so kernels with several sibling loops with double buffers fit while kernels that
fitted before keep their text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from pypto.block.ir import BInstr, BItem, BLoop, Buf
from pypto.core.errors import TileError
from pypto.isa.ir import Expr, Instr, Pipe, Reg
from pypto.isa.opcodes import pipe_of
from pypto.npu.machine import Machine

__all__ = ["insert_sync"]

Access = tuple[str, Pipe, bool]  # (buffer, pipe, is_write)


def _accesses(it: BItem) -> Iterator[Access]:
    if isinstance(it, _Wrapped):
        yield from _accesses(it.loop)
        return
    if isinstance(it, BLoop):
        for x in it.body:
            yield from _accesses(x)
        return
    if not it.reads and not it.writes:
        return
    p = pipe_of(it.instr)
    for k in it.reads:
        yield (k, p, False)
    for k in it.writes:
        yield (k, p, True)


@dataclass
class _Unit:
    """Flags that share one event id by construction (see the module's docstring)."""

    p: Pipe
    q: Pipe
    fixed: int  # its id in the fixed layout
    flags: list[BInstr] = field(default_factory=list)


def _set(p: Pipe, q: Pipe, ev: int) -> BInstr:
    return BInstr(Instr("SET_FLAG", (p, q, Expr.of(ev))))


def _wait(p: Pipe, q: Pipe, ev: int) -> BInstr:
    return BInstr(Instr("WAIT_FLAG", (p, q, Expr.of(ev))))


def _uset(u: _Unit) -> BInstr:
    """A ``SET_FLAG`` of unit ``u``, with its fixed-layout id (:func:`_assign` replaces it
    where that layout does not fit)."""
    x = _set(u.p, u.q, u.fixed)
    u.flags.append(x)
    return x


def _uwait(u: _Unit) -> BInstr:
    x = _wait(u.p, u.q, u.fixed)
    u.flags.append(x)
    return x


@dataclass
class _Ids:
    """Event ids: flag units, with their ids in the fixed layout (``depth`` for a region's own
    pairs, the rest for carried flags)."""

    limit: int
    depths: int
    carried: dict[tuple[Pipe, Pipe], int] = field(default_factory=dict)
    units: list[_Unit] = field(default_factory=list)
    # carried flags of double buffers hoisted to the kernel's start and end, and their buffers
    pre: list[BItem] = field(default_factory=list)
    post: list[BItem] = field(default_factory=list)
    hoisted: set[str] = field(default_factory=set)
    home: dict[str, int] = field(default_factory=dict)  # buffer -> id of its innermost loop

    def unit(self, p: Pipe, q: Pipe, fixed: int) -> _Unit:
        u = _Unit(p, q, fixed)
        self.units.append(u)
        return u

    def carry(self, p: Pipe, q: Pipe) -> _Unit:
        n = self.carried.get((p, q), self.depths)
        self.carried[(p, q)] = n + 1
        return self.unit(p, q, n)


def _depth(items: list[BItem]) -> int:
    d = 0
    for it in items:
        if isinstance(it, BLoop):
            d = max(d, 1 + _depth(list(it.body)))
    return d


def insert_sync(items: list[BItem], bufs: dict[str, Buf], m: Machine) -> list[BItem]:
    """``items`` with the flags that order every pair of pipes sharing a tile buffer."""
    depth = _depth(items)
    ids = _Ids(m.event_ids, depth + 1)
    ids.home = _homes(items)
    body = _region(items, bufs, ids, 0)
    return _assign([*ids.pre, *body, *ids.post], ids)


def _homes(items: list[BItem]) -> dict[str, int]:
    """For each buffer, the innermost loop (by id) that holds all of its accesses."""
    paths: dict[str, tuple[int, ...]] = {}

    def walk(its: tuple[BItem, ...] | list[BItem], path: tuple[int, ...]) -> None:
        for it in its:
            if isinstance(it, BLoop):
                walk(it.body, (*path, id(it)))
                continue
            for key in (*it.reads, *it.writes):
                old = paths.get(key)
                if old is None:
                    paths[key] = path
                else:
                    n = 0
                    while n < min(len(old), len(path)) and old[n] == path[n]:
                        n += 1
                    paths[key] = old[:n]

    walk(items, ())
    return {k: p[-1] for k, p in paths.items() if p}


def _region(items: list[BItem], bufs: dict[str, Buf], ids: _Ids, depth: int) -> list[BItem]:
    # inner loops first: their bodies get their own flags and carried flags; a loop right
    # after another (nothing touching a tile between) may take over its carried flags
    done: list[BItem] = []
    prev: int | None = None  # index in done of that loop
    for j, it in enumerate(items):
        if not isinstance(it, BLoop):
            done.append(it)
            if list(_accesses(it)):
                prev = None
            continue
        a = done[prev] if prev is not None else None
        lp = _loop(it, bufs, ids, depth + 1, _once(items[:j], it), a)
        if isinstance(lp, _Wrapped) and lp.links:
            assert prev is not None and isinstance(a, _Wrapped)
            gone = {id(x) for c in lp.links for x in a.carry[c].post}
            done[prev] = replace(a, post=tuple(x for x in a.post if id(x) not in gone))
            lp = replace(lp, src=prev)
        done.append(lp)
        prev = len(done) - 1 if isinstance(lp, _Wrapped) else None
    items = done
    before: dict[int, list[BItem]] = {}
    after: dict[int, list[BItem]] = {}
    state: dict[str, dict[Pipe, tuple[int, bool]]] = {}
    synced: dict[tuple[Pipe, Pipe], int] = {}
    # the pairs of one pipe pair whose spans overlap share a unit (their flags come in the
    # same order on both pipes); a pair set after the unit's last wait starts a new one
    units: dict[tuple[Pipe, Pipe], tuple[_Unit, int]] = {}  # -> (unit, index of its last wait)
    for j, it in enumerate(items):
        accs = list(_accesses(it))
        if not accs:
            continue
        need: dict[tuple[Pipe, Pipe], int] = {}
        for key, q, w in accs:
            for p, (i, pw) in state.get(key, {}).items():
                if p is not q and p is not Pipe.S and (w or pw) and i < j:
                    if _handed_over(items, i, j, p, q, key):
                        continue
                    need[(p, q)] = max(need.get((p, q), -1), i)
        for (p, q), i in sorted(need.items(), key=lambda x: (x[1], x[0])):
            if synced.get((p, q), -1) >= i:
                continue
            cur = units.get((p, q))
            u = cur[0] if cur is not None and i < cur[1] else ids.unit(p, q, depth)
            units[(p, q)] = (u, j)
            after.setdefault(i, []).append(_uset(u))
            before.setdefault(j, []).append(_uwait(u))
            synced[(p, q)] = i
        for key, q, w in accs:
            old = state.setdefault(key, {}).get(q)
            state[key][q] = (j, w or (old is not None and old[1]))
    out: list[BItem] = []
    for j, it in enumerate(items):
        out.extend(before.get(j, []))
        if isinstance(it, _Wrapped):
            out.extend(it.pre)
            out.append(it.loop)
            out.extend(it.post)
        else:
            out.append(it)
        out.extend(after.get(j, []))
    return out


@dataclass(frozen=True)
class _Carry:
    """A loop's carried flag of one pipe pair (not hoisted): its unit, the tokens of each
    set/wait pair, each tile's pair (index in the chain) and the drain's waits."""

    unit: _Unit
    tokens: int
    index: dict[str, int]
    post: tuple[BInstr, ...]


@dataclass(frozen=True)
class _Wrapped:
    """A loop with the flags that go right before and after it (carried-flag set-up/drain).

    ``links``: the pipe pairs whose carried flag this loop took over from the loop right
    before it (``src``, its index in the region): no drain after that loop and no set-up
    before this one, so this loop's first waits take that loop's last sets. A tile the first
    loop's source pipe leaves and this loop's destination pipe takes next is then ordered by
    those flags (:func:`_handed_over`), not by a pair that waits for all of the first loop."""

    loop: BLoop
    pre: tuple[BItem, ...]
    post: tuple[BItem, ...]
    carry: dict[tuple[Pipe, Pipe], _Carry] = field(default_factory=dict)
    links: frozenset[tuple[Pipe, Pipe]] = frozenset()
    src: int = -1

    @property
    def reads(self) -> tuple[str, ...]:
        return ()

    @property
    def writes(self) -> tuple[str, ...]:
        return ()


def _handed_over(items: list[BItem], i: int, j: int, p: Pipe, q: Pipe, key: str) -> bool:
    """Whether loop ``j`` took over loop ``i``'s carried flag of ``p → q`` and that flag
    orders ``key``: its pair in loop ``i`` comes no later than its pair in loop ``j`` (the
    sets of a pair follow the source's accesses of its tiles, in chain order)."""
    b = items[j]
    if not isinstance(b, _Wrapped) or b.src != i or (p, q) not in b.links:
        return False
    a = items[i]
    assert isinstance(a, _Wrapped)
    ka, kb = a.carry[(p, q)].index.get(key), b.carry[(p, q)].index.get(key)
    return ka is not None and kb is not None and ka <= kb


def _first_last(
    items: list[BItem],
) -> tuple[dict[str, dict[Pipe, tuple[int, bool]]], dict[str, dict[Pipe, tuple[int, bool]]]]:
    first: dict[str, dict[Pipe, tuple[int, bool]]] = {}
    last: dict[str, dict[Pipe, tuple[int, bool]]] = {}
    for j, it in enumerate(items):
        for key, p, w in _accesses(it):
            f = first.setdefault(key, {})
            if p not in f:
                f[p] = (j, w)
            old = last.setdefault(key, {}).get(p)
            last[key][p] = (j, w or (old is not None and old[1]))
    return first, last


def _once(before: list[BItem], loop: BLoop) -> bool:
    """Whether ``loop`` is a conditional: ``for %i in 0..%r`` with ``%r`` last set in
    ``before`` (its region, up to the loop) by ``SMIN %r, x, 1``, perhaps followed by
    ``SMAX %r, %r, 0`` (:func:`pypto.tile.ir.gate`), so it runs at most once, and with no
    double buffer of its own (whose slots alternate from one run to the next: a carried
    flag with a token per slot lets the next run's loads start early)."""
    if loop.parity is not None or loop.start != Expr() or len(loop.stop.terms) != 1:
        return False
    ((r, c),) = loop.stop.terms
    if c != 1 or loop.stop.const != 0:
        return False
    clamped = False  # an SMAX %r, %r, 0 seen (walking back): the SMIN before decides
    for it in reversed(before):
        if isinstance(it, BLoop):
            if any(_writes_reg(x, r) for x in _walk(it)):
                return False
            continue
        if not _writes_reg(it, r):
            continue
        op, args = it.instr.op, it.instr.args
        if op == "SMAX" and not clamped and args[1] == Expr.reg(r) and args[2] == Expr():
            clamped = True
            continue
        return op == "SMIN" and any(
            isinstance(a, Expr) and a.is_const and a.const <= 1 for a in args[1:]
        )
    return False


def _walk(loop: BLoop) -> Iterator[BInstr]:
    for it in loop.body:
        if isinstance(it, BLoop):
            yield from _walk(it)
        else:
            yield it


def _writes_reg(it: BInstr, r: str) -> bool:
    a = it.instr.args
    return it.instr.op.startswith("S") and bool(a) and isinstance(a[0], Reg) and a[0].name == r


def _loop(
    loop: BLoop,
    bufs: dict[str, Buf],
    ids: _Ids,
    depth: int,
    once: bool = False,
    before: BItem | None = None,
) -> BItem:
    """``loop`` with its body's flags and, unless it runs at most ``once`` (a conditional:
    the enclosing region orders it as one instruction, nothing carries from one iteration
    to the next), the carried flags between its iterations. A carried flag of the loop
    right ``before`` it (in the same region, nothing touching a tile between) with as many
    pairs and tokens, whose tiles come in pairs no later there than here, goes on into this
    loop (a software pipeline's fill, steady and drain loops: each tile waits for its own
    last use in the loop before, not for that whole loop)."""
    body = list(loop.body)
    inner = _region(body, bufs, ids, depth)
    if once:
        return BLoop(loop.reg, loop.start, loop.stop, loop.step, tuple(inner), loop.parity)
    first, last = _first_last(body)
    carried: dict[tuple[Pipe, Pipe], list[tuple[int, int, str]]] = {}  # -> (src, dst, tile)
    tok: dict[tuple[Pipe, Pipe], int] = {}  # -> tokens (the fewest slots among its tiles)
    persist: dict[tuple[Pipe, Pipe], list[str]] = {}  # pairs whose buffers all ping-pong here
    for key, ends in last.items():
        if key in ids.hoisted:
            continue  # an inner loop's double buffer, ordered across all its runs
        begins = first[key]
        b = bufs.get(key)
        tokens = b.slots if b is not None and b.parity == loop.parity else 1
        for p, (i, pw) in ends.items():
            for q, (j, qw) in begins.items():
                if p is q or p is Pipe.S:
                    continue
                if pw or qw:
                    # covered inside the iteration: p touches the tile before q's first access
                    pf = begins.get(p)
                    if pf is not None and pf[0] < j and (pf[1] or qw):
                        continue
                elif not ends[q][1] or any(
                    f < j and (r is p or rw) and r is not q for r, (f, rw) in begins.items()
                ):
                    # p reads, q's first access reads and a later one writes (an accumulator
                    # updated in place): a dependency unless, before q's first access, p
                    # reads the tile (an own pair of the body orders that before q's write)
                    # or another pipe writes it (ordered after p's last access by its own
                    # carried flag, before q's first by an own pair)
                    continue
                old = carried.get((p, q))
                carried.setdefault((p, q), []).append((i, j, key))
                tok[(p, q)] = min(tok.get((p, q), tokens), tokens)
                # every access inside this loop: its order across runs is the same flag's
                ok = ids.home.get(key) == id(loop) and (old is None or (p, q) in persist)
                if ok:
                    persist.setdefault((p, q), []).append(key)
                else:
                    persist.pop((p, q), None)
    if not carried:
        return BLoop(loop.reg, loop.start, loop.stop, loop.step, tuple(inner), loop.parity)
    # place carried waits/sets around the original items inside the synced body
    pos = _positions(inner, body)
    waits: dict[int, list[BItem]] = {}
    sets: dict[int, list[BItem]] = {}
    pre: list[BItem] = []
    post: list[BItem] = []
    carry: dict[tuple[Pipe, Pipe], _Carry] = {}
    links: set[tuple[Pipe, Pipe]] = set()
    prev = before if isinstance(before, _Wrapped) else None
    for (p, q), deps in sorted(carried.items()):
        chain = _chain(deps)
        index = {k: n for n, (_, _, ks) in enumerate(chain) for k in ks}
        tokens = tok[(p, q)] * len(chain)  # each pair's slots
        # Buffers that live inside this loop (a double buffer's slot counter runs on across
        # the loop's runs) keep one flag for all runs, its tokens set once per kernel: the
        # next run's first loads overlap this run's last compute, and enclosing loops add
        # no flag of their own between unrelated buffers.
        hoist = (p, q) in persist
        # (an outermost loop runs once: its own set-up and drain are the kernel's)
        out = hoist and depth > 1
        prior = prev.carry.get((p, q)) if prev is not None and not hoist else None
        if (
            prior is not None
            and prev is not None
            and prior.tokens == tok[(p, q)]
            # two slots: they must alternate from one loop into the next (one parity)
            and (prior.tokens == 1 or prev.loop.parity == loop.parity)
            and max(prior.index.values()) == len(chain) - 1
            and all(prior.index.get(k, n) <= n for k, n in index.items())
        ):
            # the loop before's last sets are this loop's first tokens
            u = prior.unit
            gone = {id(x) for x in prior.post}
            u.flags[:] = [x for x in u.flags if id(x) not in gone]
            links.add((p, q))
        else:
            u = ids.carry(p, q)
            (ids.pre if out else pre).extend(_uset(u) for _ in range(tokens))
        for i, j, _ in chain:
            waits.setdefault(pos[j], []).append(_uwait(u))
            sets.setdefault(pos[i], []).append(_uset(u))
        drain = [_uwait(u) for _ in range(tokens)]
        (ids.post if out else post).extend(drain)
        if hoist:
            ids.hoisted.update(persist[(p, q)])
        else:
            carry[(p, q)] = _Carry(u, tok[(p, q)], index, tuple(drain))
    new: list[BItem] = []
    for k, it in enumerate(inner):
        new.extend(waits.get(k, []))
        new.append(it)
        new.extend(sets.get(k, []))
    lp = BLoop(loop.reg, loop.start, loop.stop, loop.step, tuple(new), loop.parity)
    return _Wrapped(lp, tuple(pre), tuple(post), carry, frozenset(links))  # type: ignore[return-value]


def _chain(ends: list[tuple[int, int, str]]) -> list[tuple[int, int, tuple[str, ...]]]:
    """The carried dependencies of one pipe pair, one (last source access, first destination
    access, tile) per tile, as set/wait pairs of one counting flag, each with its tiles: the
    n-th wait of an iteration takes the n-th set of an earlier one, so the sets and the
    waits must come in the same order. Pairs that cross (or share an end) merge into one,
    from the later source to the earlier destination.

    >>> _chain([(5, 0, "s"), (9, 2, "o")])  # each tile waits for its own store only
    [(5, 0, ('s',)), (9, 2, ('o',))]
    >>> _chain([(9, 0, "s"), (5, 2, "o")])  # crossed: one wait covers both
    [(9, 0, ('o', 's'))]
    """
    out: list[tuple[int, int, tuple[str, ...]]] = []
    for i, j, k in sorted(ends):
        ks: tuple[str, ...] = (k,)
        while out and (j <= out[-1][1] or i == out[-1][0]):
            a, b, kk = out.pop()
            i, j, ks = max(a, i), min(b, j), (*kk, *ks)
        out.append((i, j, ks))
    return out


def _positions(inner: list[BItem], body: list[BItem]) -> dict[int, int]:
    """Index in ``inner`` (the body with its own flags) of each item of ``body``."""
    out: dict[int, int] = {}
    k = 0
    for j, it in enumerate(body):
        while True:
            x = inner[k]
            if (
                x is it
                or (isinstance(x, _Wrapped) and isinstance(it, BLoop))
                or (isinstance(x, BLoop) and isinstance(it, BLoop))
            ):
                out[j] = k
                k += 1
                break
            k += 1
    return out


def _assign(items: list[BItem], ids: _Ids) -> list[BItem]:
    """``items`` with every flag unit's event id: the fixed layout for a pipe pair where it
    fits, else the fewest ids that keep units with overlapping spans apart."""
    # each flag instruction's place in the program text, and the region it stands in
    where: dict[int, tuple[int, int]] = {}  # id(flag) -> (position, id of its region)
    n = 0

    def walk(its: tuple[BItem, ...] | list[BItem], region: int) -> None:
        nonlocal n
        for it in its:
            n += 1
            if isinstance(it, BLoop):
                walk(it.body, id(it))
                n += 1
            else:
                where[id(it)] = (n, region)

    walk(items, 0)
    pairs: dict[tuple[Pipe, Pipe], list[tuple[int, int, _Unit]]] = {}
    for u in ids.units:
        at = [where[id(x)] for x in u.flags]
        (a, ra), (b, rb) = min(at), max(at)
        assert ra == rb, "a flag unit's span must begin and end in one region"
        pairs.setdefault((u.p, u.q), []).append((a, b, u))
    ev: dict[int, tuple[Pipe, Pipe, int]] = {}  # id(flag) -> its pipes and new event id
    for (p, q), spans in pairs.items():
        if max(u.fixed for _, _, u in spans) < ids.limit:
            continue  # the fixed layout fits
        # interval colouring in order of the spans' starts: the smallest id no live span holds
        live: list[tuple[int, int]] = []  # (end, id)
        for a, b, u in sorted(spans, key=lambda s: (s[0], s[1])):
            live = [(e, k) for e, k in live if e >= a]
            taken = {k for _, k in live}
            k = next(k for k in range(len(live) + 1) if k not in taken)
            live.append((b, k))
            for x in u.flags:
                ev[id(x)] = (p, q, k)
        need = 1 + max(k for pp, qq, k in ev.values() if (pp, qq) == (p, q))
        if need > ids.limit:
            raise TileError(
                f"a kernel needs {need} event ids between {p} and {q} (flags live at once), "
                f"and the machine has event_ids={ids.limit}",
                op="lower",
                hint=f"machine.replace(event_ids={need}) fits it; in a hand-written kernel, "
                "fewer loops with double buffers need fewer",
            )
    if not ev:
        return items

    def redo(its: tuple[BItem, ...] | list[BItem]) -> list[BItem]:
        out: list[BItem] = []
        for it in its:
            if isinstance(it, BLoop):
                out.append(replace(it, body=tuple(redo(it.body))))
            elif id(it) in ev:
                out.append((_set if it.instr.op == "SET_FLAG" else _wait)(*ev[id(it)]))
            else:
                out.append(it)
        return out

    return redo(items)
