"""The simulated NPU: runs an ISA program on a machine, functionally and in time.

Each core has a front end (its scalar unit, the generated code of :mod:`pypto.npu.compile`)
that runs the template and issues tile instructions, one per ``issue_cycles``, into per-pipe
queues. Each pipe runs its queue in order; the pipes of a core run in parallel. An instruction
starts when it has been issued, its pipe is free and (for ``WAIT_FLAG``/``XWAIT_FLAG``) the
matching set has happened. Durations come from the machine's cost table, except GM transfers,
whose bandwidth is shared with the other cores transferring at that moment and which hit or miss
in L2 (:mod:`pypto.npu.memory`).

Scheduling is event driven with as little global ordering as the model needs: a pipe runs ahead
through instructions that only depend on its own core (their timing cannot change); only GM
transfers, which share bandwidth and L2 with every core, wait on the global event heap so that
they start in time order.

In full mode the buffers are byte arrays of the machine's capacities and every instruction
reads and writes them with numpy at its addresses; happens-before (program order on a pipe,
flags, barriers) is tracked with vector clocks, so two accesses to overlapping bytes from
different pipes or cores with no flag ordering them raise a data-race error naming both.

See :func:`simulate` for an example.
"""

from __future__ import annotations

import bisect
import heapq
import operator
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import SimulationError
from pypto.core.gcpause import gc_paused
from pypto.isa.ir import PEERS, Expr, GmRef, Instr, Program, Space, Tile
from pypto.isa.parser import parse
from pypto.npu.compile import (
    FLAG_SPACE,
    K_DMA_RD,
    NPIPES,
    PIPE_ORDER,
    Compiled,
    compile_program,
)
from pypto.npu.machine import Machine
from pypto.npu.machine import machine as get_machine
from pypto.npu.memory import L2, Fluid
from pypto.npu.profile import Profile, RunRequest
from pypto.npu.semantics import SPACE_NO, Widened, build_access, build_exec, flush_l0c

__all__ = ["simulate"]

_READY, _IDLE, _BLOCKED, _SCHED, _BUSY = range(5)


class _Stop(Exception):
    """Raised inside the event loop when the debugger's ``stop_after`` count is reached."""


_RUNNING, _FE_BLOCKED, _DONE = range(3)
_SPACE_NAME = {v: k.value for k, v in SPACE_NO.items()}
GM_ROWS, GM_COLS = 16, 512
"""The blocks of a GM tensor's 2-D view that race detection keeps its accesses by."""
_first = operator.itemgetter(0)  # a shadow entry's first byte


class _Core:
    """One core of the launch: its front end, queues, flags and (full mode) buffers."""

    __slots__ = (
        "block_sid",
        "block_t",
        "cluster",
        "count",
        "fe",
        "fe_t",
        "flags",
        "fwait",
        "gen",
        "idx",
        "kind",
        "mem",
        "name",
        "peers",
        "pending",
        "pipes",
        "resume",
        "stall",
        "sub",
        "tags",
    )

    def __init__(self, idx: int, kind: str, cluster: int, sub: int, name: str, nsids: int) -> None:
        self.count = [0] * nsids
        """times each instruction ran on this core"""
        self.idx = idx
        self.kind = kind
        self.cluster = cluster
        self.sub = sub
        self.name = name
        self.gen: Any = None
        self.fe = _RUNNING
        self.resume: float | None = None
        self.block_sid = -1
        self.block_t = 0.0
        self.fe_t = 0.0
        self.stall = 0.0
        self.flags: dict[int, deque[tuple[Any, ...]]] = {}
        self.fwait: dict[int, int] = {}
        self.mem: list[Any] = []
        self.pending: dict[int, Any] = {}
        """L0C accumulations not yet multiplied out (see :mod:`pypto.npu.semantics`)"""
        self.tags: list[dict[int, Any]] = [{} for _ in SPACE_NO]
        """per buffer: provenance tags of its tiles (see :mod:`pypto.npu.semantics`)"""
        self.peers: dict[str, _Core] = {}
        self.pipes: list[int] = []

    def describe(self) -> str:
        if self.kind == "aic":
            return f"{self.name} (cube core of cluster {self.cluster})"
        return f"{self.name} (vector core {self.sub} of cluster {self.cluster})"


class _Engine:
    def __init__(
        self,
        cp: Compiled,
        inputs: Mapping[str, Any],
        *,
        numerics: bool,
        races: bool,
        poison: bool,
        trace: bool,
        blocks: int,
        stop_after: int | None = None,
        progress: Callable[[float], None] | None = None,
    ) -> None:
        self.cp = cp
        self.stop_after = stop_after
        self.progress = progress
        self.executed = 0
        self.stopped: tuple[int, int, float] | None = None
        m = self.m = cp.machine
        self.numerics = numerics
        self.races = races
        self.tracing = trace
        self.blocks = blocks
        prog = cp.program
        cores: list[_Core] = []
        for cl in range(blocks):
            members: dict[str, _Core] = {}
            if prog.has_core("aic"):
                c = _Core(len(cores), "aic", cl, 0, f"aic{cl}", len(cp.instrs))
                cores.append(c)
                members["aic"] = c
            if prog.has_core("aiv"):
                for s in range(m.aiv_per_cluster):
                    c = _Core(
                        len(cores), "aiv", cl, s, f"aiv{cl * m.aiv_per_cluster + s}", len(cp.instrs)
                    )
                    cores.append(c)
                    members[f"aiv{s}"] = c
            for c in members.values():
                c.peers = members
        self.cores = cores
        n = len(cores) * NPIPES
        self.queues: list[deque[tuple[Any, ...]]] = [deque() for _ in range(n)]
        self.free = [0.0] * n
        self.state = [_IDLE] * n
        self.busy = [0.0] * n
        self.vc: list[dict[int, int]] = [{gp: 0} for gp in range(n)]
        self.ready: list[int] = []
        self.heap: list[tuple[float, int, int, Any, Any]] = []
        self.seq = 0
        self.now = 0.0
        self.res = (Fluid(m.hbm_bytes_per_cycle), Fluid(m.l2_bytes_per_cycle))
        self.l2 = L2(cp.gm_bytes, m.l2_bytes, m.l2_line_bytes)
        self.inflight: dict[int, list[Any]] = {}
        self.xflags: dict[tuple[int, int, int], deque[tuple[Any, ...]]] = {}
        self.xwait: dict[tuple[int, int, int], list[int]] = {}
        self.arrived: dict[int, float] = {}
        self.hbm_read = 0.0
        self.hbm_write = 0.0
        self.l2_hit = 0.0
        self.gm_read = 0.0
        self.tr: list[tuple[int, tuple[Any, ...], float, float]] = []
        self.flag_latency = m.flag_latency
        self.flows: list[tuple[int, int, float, int, int, float]] = []
        self.shadow: dict[Any, list[tuple[Any, ...]]] = {}
        self.shadow_gm: dict[int, dict[Any, list[tuple[Any, ...]]]] = {}
        self.shadow_span: dict[int, int] = {}  # the longest range in each buffer's shadow
        self.gm2d: list[np.ndarray] = []
        self.exec: list[Any] = [None] * len(cp.instrs)
        self.acc: list[Any] = [None] * len(cp.instrs)
        if numerics:
            self._setup_memory(inputs, poison)
        if races:
            self.acc = [build_access(cp, s) for s in range(len(cp.instrs))]
        self.fx = numerics or races or stop_after is not None
        for c in cores:
            # A core whose template only has scalar instructions still needs something to pull
            # its front end: the (otherwise empty) queue of pipe S.
            used = sorted({cp.pipe_no[s] for s in cp.sids_of[c.kind]} - {0}) or [0]
            c.pipes = [c.idx * NPIPES + p for p in used]
            c.gen = cp.frontends[c.kind](
                c.cluster,
                blocks,
                c.sub,
                self.queues[c.idx * NPIPES : (c.idx + 1) * NPIPES],
                self._fault_fn(c),
                self._peek_fn(c),
                self._sflag_fn(c),
            )
            for gp in c.pipes:
                self.state[gp] = _READY
                self.ready.append(gp)
        self.ready.reverse()

    # --- set-up ---
    def _setup_memory(self, inputs: Mapping[str, Any], poison: bool) -> None:
        cp, m = self.cp, self.m
        fill = 0xFF if poison else 0
        gm = np.full(cp.gm_bytes, fill, dtype=np.uint8)
        self.gm = gm
        for i, t in enumerate(cp.program.tensors):
            b = cp.tensor_base[i]
            v = gm[b : b + t.nbytes].view(t.dtype.np).reshape(t.view2d)
            self.gm2d.append(v)
            if t.role in ("in", "inout"):
                v[...] = np.asarray(inputs[t.name]).reshape(t.view2d)
        for c in self.cores:
            spaces = ("L1", "L0A", "L0B", "L0C") if c.kind == "aic" else ("UB",)
            c.mem = [None] * 5
            for sp in spaces:
                cap = m.buffer_bytes(sp)
                c.mem[SPACE_NO[Space(sp)]] = (
                    np.full(cap, 0xFF, np.uint8) if poison else np.zeros(cap, np.uint8)
                )
        immutable = frozenset(range(len(cp.program.tensors))) - cp.written_tensors
        widened = Widened(self.gm2d, immutable)
        self.exec = [build_exec(cp, s, self.gm2d, widened) for s in range(len(cp.instrs))]

    def _fault_fn(self, core: _Core) -> Any:
        cp = self.cp

        def fault(sid: int, what: str, slot: int, value: int) -> None:
            ins = cp.instrs[sid]
            pipe = PIPE_ORDER[cp.pipe_no[sid]]
            head = f"{core.describe()}, pipe {pipe}, {cp.where(sid)}"
            if what == "addr":
                t = _tile_at_slot(ins, slot)
                cap = self.m.buffer_bytes(t.space.value)
                if value % self.m.align_bytes and 0 <= value <= cap - t.nbytes:
                    msg = (
                        f"tile address {hex(value)} in {t.space} is not "
                        f"{self.m.align_bytes}-byte aligned"
                    )
                else:
                    msg = (
                        f"tile {t.dtype.short}[{t.rows},{t.cols}] at {hex(value)} "
                        f"({t.nbytes} bytes) is outside {t.space} [0x0, {hex(cap)})"
                    )
            elif what in ("row", "col"):
                g = _gm_of(ins)
                decl = cp.program.tensor(g.tensor)
                rows, cols = decl.view2d
                t = _tile_at_slot(ins, 0 if ins.op == "TLOAD" else 2)
                if what == "row":
                    msg = (
                        f"GM window rows {value}..{value + t.rows} are outside {g.tensor} "
                        f"({rows} rows)"
                    )
                else:
                    msg = (
                        f"GM window columns {value}..{value + t.cols} are outside {g.tensor} "
                        f"({cols} columns)"
                    )
            elif what in ("ext_row", "ext_col"):
                msg = f"{ins.op} offset {value} puts the sub-tile outside its source tile"
            elif what == "flag":
                msg = f"flag id {value} is out of range"
            elif what == "div0":
                msg = "division by zero"
            elif what == "sld":
                t = _tile_at_slot(ins, 0)
                msg = f"SLD element {value} is outside the {t.rows * t.cols} of its tile"
            else:
                msg = f"LOOP step {value} must be positive"
            raise SimulationError(f"{head}: {msg}", op=ins.op)

        return fault

    # --- the scalar unit's loads and flags ---
    def _peek_fn(self, core: _Core) -> Any:
        """``SLD``: the int32 at a UB byte address, read when the front end issues it (0 in
        timing-only mode, which keeps no buffers); race detection sees a read on pipe S."""
        gs = core.idx * NPIPES
        ub = SPACE_NO[Space.UB]
        key = core.idx * 8 + ub

        def peek(sid: int, t: float, addr: int) -> int:
            core.count[sid] += 1
            if self.races:
                self._check_races(gs, (sid, t), t, [(key, addr, addr + 4, 0, 1, False)])
            if self.tracing:
                self.tr.append((gs, (sid, t), t, t + self.m.issue_cycles))
            if not self.numerics:
                return 0
            return int(core.mem[ub][addr : addr + 4].view(np.int32)[0])

        return peek

    def _sflag_fn(self, core: _Core) -> Any:
        """``SET_FLAG S, <pipe>``: set by the front end at its issue cycle."""
        gs = core.idx * NPIPES

        def sflag(sid: int, t: float, key: int) -> None:
            core.count[sid] += 1
            snap = None
            if self.races:
                vc = self.vc[gs]
                snap = dict(vc)
                vc[gs] += 1
            rec = (t + 1 + self.flag_latency, snap, gs, sid, t)
            core.flags.setdefault(key, deque()).append(rec)
            if self.tracing:
                self.tr.append((gs, (sid, t, key), t, t + 1))
            w = core.fwait.pop(key, None)
            if w is not None:
                self.state[w] = _READY
                self.ready.append(w)

        return sflag

    def _fe_take(self, core: _Core, sid: int, t: float, rec: tuple[Any, ...]) -> float:
        """The front end's ``WAIT_FLAG <pipe>, S`` takes flag record ``rec``: the cycle it
        goes on from."""
        gs = core.idx * NPIPES
        end = max(t, rec[0]) + 1
        core.count[sid] += 1
        if self.races:
            _join(self.vc[gs], rec[1])
        if self.tracing:
            self.tr.append((gs, (sid, t), t, end))
            self.flows.append((rec[2], rec[3], rec[4], gs, sid, end - 1))
        return end

    def _fe_wake(self, core: _Core, key: int) -> None:
        """The flag the blocked front end waits for was set: resume it."""
        rec = core.flags[key].popleft()
        core.resume = self._fe_take(core, core.block_sid, core.block_t, rec)
        core.fe = _RUNNING
        state = self.state
        for gp in core.pipes:
            if state[gp] == _IDLE:
                state[gp] = _READY
                self.ready.append(gp)

    # --- the event loop ---
    def finish_counts(self) -> None:
        """Add the busy time of the fixed-duration instructions (count x duration) and total
        the counts over cores (``self.count``)."""
        cp = self.cp
        total = [0] * len(cp.instrs)
        for c in self.cores:
            base = c.idx * NPIPES
            for sid, n in enumerate(c.count):
                if n:
                    total[sid] += n
                    if cp.kind[sid] < K_DMA_RD:
                        self.busy[base + cp.pipe_no[sid]] += n * cp.dur[sid]
        self.count = total

    def run(self) -> None:
        heap = self.heap
        ready = self.ready
        run = self._run
        progress = self.progress
        events = 0
        with np.errstate(all="ignore"):
            try:
                while True:
                    while ready:
                        run(ready.pop())
                    if not heap:
                        break
                    if progress is not None:
                        events += 1
                        if not events & 4095:
                            progress(self.now)
                    ev = heapq.heappop(heap)
                    self.now = ev[0]
                    if ev[2] == 0:
                        run(ev[3])
                    else:
                        self._resource(ev[3], ev[4])
            except _Stop:
                pass
            if self.numerics:
                for c in self.cores:
                    if c.pending:
                        flush_l0c(c, 0, self.m.l0c_bytes)
        if self.stopped is None:
            self._check_done()
        self.finish_counts()

    def snapshot(self) -> dict[tuple[str, str], np.ndarray]:
        """Copies of every buffer (bytes) and every GM tensor (typed), for the debugger."""
        out: dict[tuple[str, str], np.ndarray] = {}
        for c in self.cores:
            for name, no in SPACE_NO.items():
                buf = c.mem[no] if c.mem else None
                if buf is not None:
                    out[(c.name, name.value)] = buf.copy()
        for t, v in zip(self.cp.program.tensors, self.gm2d):
            out[("GM", t.name)] = v.reshape(t.shape).copy()
        return out

    def _push(self, t: float, kind: int, a: Any, b: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    def _pull(self, core: _Core, q: deque[tuple[Any, ...]]) -> bool:
        gen = core.gen
        while not q:
            if core.fe != _RUNNING:
                return False
            try:
                if core.resume is not None:
                    r = gen.send(core.resume)
                    core.resume = None
                else:
                    r = next(gen)
            except StopIteration as stop:
                core.fe = _DONE
                core.fe_t, core.stall = stop.value
                return False
            if type(r) is tuple:
                if len(r) == 3:  # WAIT_FLAG <pipe>, S
                    sid, t, key = r
                    dq = core.flags.get(key)
                    if dq:
                        core.resume = self._fe_take(core, sid, t, dq.popleft())
                        continue
                    core.fwait[key] = -1
                    core.fe = _FE_BLOCKED
                    core.block_sid, core.block_t = sid, t
                    return False
                core.fe = _FE_BLOCKED
                core.block_sid, core.block_t = r
                return False
        return True

    def _run(self, gp: int) -> None:
        """Run pipe ``gp`` as far as it can go without waiting on another core's timing.

        This is the simulator's inner loop: everything it touches is a local variable, and the
        instruction kinds are compared as the small ints of :mod:`pypto.npu.compile`
        (0 local, 1 SET_FLAG, 2 WAIT_FLAG, 3 XSET_FLAG, 4 XWAIT_FLAG, 5/6 GM transfers)."""
        q = self.queues[gp]
        core = self.cores[gp // NPIPES]
        t = self.free[gp]
        cp = self.cp
        kinds = cp.kind
        durs = cp.dur
        # Per-core execution counts; the busy time of fixed-duration instructions follows
        # from them at the end (count x duration), so the loop does not add it up.
        count = core.count
        fx = self.fx
        races = self.races
        trace = self.tr.append if self.tracing else None
        flags = core.flags
        flag_latency = self.flag_latency
        while True:
            if not q and not self._pull(core, q):
                self.state[gp] = _IDLE
                self.free[gp] = t
                if core.fe == _FE_BLOCKED:
                    self._maybe_drained(core)
                return
            item = q.popleft()  # put back with appendleft when the pipe must wait
            sid = item[0]
            k = kinds[sid]
            start = item[1]
            if start < t:
                start = t
            if k == 0:
                if fx:
                    self._effects(core, gp, sid, item, start)
                t = start + durs[sid]
                if trace:
                    trace((gp, item, start, t))
                count[sid] += 1
                continue
            if k == 2 or k == 4:
                if k == 2:
                    key: Any = item[2]
                    dq = flags.get(key)
                else:
                    key = (self._peer(core, sid).idx, core.idx, item[2])
                    dq = self.xflags.get(key)
                if not dq:
                    q.appendleft(item)
                    if k == 2:
                        core.fwait[key] = gp
                    else:
                        self.xwait.setdefault(key, []).append(gp)
                    self.state[gp] = _BLOCKED
                    self.free[gp] = t
                    return
                rec = dq.popleft()
                if rec[0] > start:
                    start = rec[0]
                t = start + durs[sid]
                if races:
                    _join(self.vc[gp], rec[1])
                if trace:
                    trace((gp, item, start, t))
                    self.flows.append((rec[2], rec[3], rec[4], gp, sid, start))
                count[sid] += 1
                continue
            if k == 1 or k == 3:
                t = start + durs[sid]
                snap = None
                if races:
                    vc = self.vc[gp]
                    snap = dict(vc)
                    vc[gp] += 1
                if k == 1:
                    key = item[2]
                    rec = (t + flag_latency, snap, gp, sid, start)
                    dq = flags.get(key)
                    if dq is None:
                        flags[key] = deque((rec,))
                    else:
                        dq.append(rec)
                    w = core.fwait.pop(key, None)
                    if w is not None:
                        if w < 0:
                            self._fe_wake(core, key)
                        else:
                            self.state[w] = _READY
                            self.ready.append(w)
                else:
                    xkey = (core.idx, self._peer(core, sid).idx, item[2])
                    self.xflags.setdefault(xkey, deque()).append(
                        (t + self.m.cross_flag_latency, snap, gp, sid, start)
                    )
                    for w in self.xwait.pop(xkey, ()):
                        self.state[w] = _READY
                        self.ready.append(w)
                if trace:
                    trace((gp, item, start, t))
                count[sid] += 1
                continue
            # A GM transfer: it must start in global time order. If no other pipe is running
            # and no event comes before it, that order is already known: start it now.
            if start > self.now:
                heap = self.heap
                if not self.ready and (not heap or start <= heap[0][0]):
                    self.now = start
                    self.free[gp] = t
                    self._start_dma(core, gp, sid, item, start)
                    return
                q.appendleft(item)
                self.state[gp] = _SCHED
                self.free[gp] = t
                self._push(start, 0, gp)
                return
            self.free[gp] = t
            self._start_dma(core, gp, sid, item, self.now)
            return

    def _peer(self, core: _Core, sid: int) -> _Core:
        name = self.cp.peer[sid]
        assert name is not None
        if (name == "aiv" + str(core.sub) and core.kind == "aiv") or name not in core.peers:
            reason = "itself" if name in core.peers else "a core this machine's cluster lacks"
            raise SimulationError(
                f"{core.describe()}, {self.cp.where(sid)}: the peer {name} is {reason}",
                op=self.cp.instrs[sid].op,
                hint="cluster peers: " + ", ".join(p for p in PEERS if p in core.peers),
            )
        return core.peers[name]

    # --- GM transfers ---
    def _start_dma(self, core: _Core, gp: int, sid: int, item: tuple[Any, ...], now: float) -> None:
        cp, m = self.cp, self.m
        info = cp.dma[sid]
        assert info is not None
        rs = info.gm_slot
        addr = info.base + item[rs] * info.row_stride + item[rs + 1] * info.itemsize
        lines = self.l2.window_lines(addr, info.rows, info.row_bytes, info.row_stride)
        rd = cp.kind[sid] == K_DMA_RD
        n, nhit = self.l2.access(lines, write=not rd)
        if self.fx:
            self._effects(core, gp, sid, item, now)
        phases: list[tuple[int, float, float]] = []
        if rd:
            miss = float((n - nhit) * m.l2_line_bytes)
            hit = info.nbytes * nhit / n
            self.hbm_read += miss
            self.l2_hit += hit
            self.gm_read += info.nbytes
            if miss:
                phases.append((0, miss, m.gm_read))
            if hit:
                phases.append((1, hit, m.l2_read))
        else:
            # Write-back L2 (pypto.npu.memory): each line this write dirties carries its
            # eventual write-back to HBM (a whole line, as the cache writes it); lines already
            # dirty absorb their share of the tile in L2.
            fresh = float((n - nhit) * m.l2_line_bytes)
            self.hbm_write += fresh
            if fresh:
                phases.append((0, fresh, info.cap))
            if nhit:
                phases.append((1, info.nbytes * nhit / n, info.cap))
        self.state[gp] = _BUSY
        self.inflight[gp] = [sid, item, now, phases, 0]
        ri, nbytes, cap = phases[0]
        self._flow(ri, nbytes, cap, gp)

    def _flow(self, ri: int, nbytes: float, cap: float, gp: int) -> None:
        res = self.res[ri]
        nxt = res.add(self.now, nbytes, cap, gp)
        self._push(nxt, 1, ri, res.version)

    def _resource(self, ri: int, version: int) -> None:
        res = self.res[ri]
        if version != res.version:
            return
        done, nxt = res.complete(self.now)
        if nxt != float("inf"):
            self._push(nxt, 1, ri, res.version)
        for gp in done:
            fl = self.inflight[gp]
            fl[4] += 1
            if fl[4] < len(fl[3]):
                ri2, nbytes, cap = fl[3][fl[4]]
                self._flow(ri2, nbytes, cap, gp)
                continue
            del self.inflight[gp]
            sid, item, start = fl[0], fl[1], fl[2]
            end = self.now + self.m.dma_latency
            if self.tracing:
                self.tr.append((gp, item, start, end))
            self.busy[gp] += end - start
            self.cores[gp // NPIPES].count[sid] += 1
            self.free[gp] = end
            self.state[gp] = _READY
            self.ready.append(gp)

    # --- barriers ---
    def _maybe_drained(self, core: _Core) -> None:
        state = self.state
        if any(state[gp] != _IDLE for gp in core.pipes):
            return
        op = self.cp.instrs[core.block_sid].op
        if op == "WAIT_FLAG":
            return  # the scalar unit waits for a flag, not for its pipes to drain
        t = max([core.block_t, *(self.free[gp] for gp in core.pipes)])
        if op == "PIPE_BARRIER":
            if self.races:
                self._join_all(sorted({*core.pipes, core.idx * NPIPES}))
            self._release(core, t)
            return
        self.arrived[core.idx] = t
        if len(self.arrived) == len(self.cores):
            at = max(self.arrived.values()) + self.m.barrier_latency
            self.arrived = {}
            if self.races:
                self._join_all(
                    sorted({gp for c in self.cores for gp in (*c.pipes, c.idx * NPIPES)})
                )
            for c in self.cores:
                self._release(c, at)

    def _release(self, core: _Core, t: float) -> None:
        if self.tracing:
            self.tr.append((core.idx * NPIPES, (core.block_sid, core.block_t), core.block_t, t))
        core.count[core.block_sid] += 1
        core.resume = t
        core.fe = _RUNNING
        for gp in core.pipes:
            self.state[gp] = _READY
            self.ready.append(gp)

    def _join_all(self, gps: list[int]) -> None:
        merged: dict[int, int] = {}
        for gp in gps:
            _join(merged, self.vc[gp])
        for gp in gps:
            vc = dict(merged)
            vc[gp] = merged.get(gp, 0) + 1
            self.vc[gp] = vc

    # --- functional effects and races ---
    def _effects(self, core: _Core, gp: int, sid: int, item: tuple[Any, ...], start: float) -> None:
        if self.races:
            acc = self.acc[sid]
            if acc is not None:
                self._check_races(gp, item, start, acc(core, item))
        if self.numerics:
            ex = self.exec[sid]
            if ex is not None:
                ex(core, item)
        if self.stop_after is not None:
            self.executed += 1
            if self.executed >= self.stop_after:
                self.stopped = (gp, sid, start)
                raise _Stop

    def _check_races(self, gp: int, item: tuple[Any, ...], start: float, ranges: list[Any]) -> None:
        # A shadow entry keeps the instruction's queue item, (sid, issue cycle, ...): the
        # race report needs its program order (see _race). A buffer's entries are kept in
        # order of their first byte, so an access scans only those that can reach it (the
        # first byte within the buffer's longest range before its end): a vector kernel of
        # many small tiles keeps hundreds of them live in UB. A GM tensor's entries
        # (key < 0) are kept per block of GM_ROWS x GM_COLS of its 2-D view, each entry in
        # every block it touches: a tensor stored tile by tile in many small tiles that
        # nothing overwrites keeps every tile's entry, and a flat list made each access
        # scan them all.
        vc = self.vc[gp]
        ep = vc[gp]
        for key, r0, r1, c0, c1, w in ranges:
            entry = (r0, r1, c0, c1, gp, ep, w, item, start)
            if key >= 0:
                seq = self.shadow.setdefault(key, [])
                span = self.shadow_span.get(key, 0)
                if r1 - r0 > span:
                    span = self.shadow_span[key] = r1 - r0
                if len(seq) <= 8:  # a few tiles (a GEMM's buffers): scan them all
                    lo, hi = 0, len(seq)
                else:
                    lo = bisect.bisect_right(seq, r0 - span, key=_first)
                    hi = bisect.bisect_left(seq, r1, lo, key=_first)
                keep = self._scan(key, seq[lo:hi], entry, vc)
                keep.insert(bisect.bisect_right(keep, r0, key=_first), entry)
                seq[lo:hi] = keep
                continue
            shadow = self.shadow_gm.setdefault(key, {})
            for br in range(r0 // GM_ROWS, (r1 - 1) // GM_ROWS + 1):
                for bc in range(c0 // GM_COLS, (c1 - 1) // GM_COLS + 1):
                    keep = self._scan(key, shadow.get((br, bc), ()), entry, vc)
                    keep.append(entry)
                    shadow[br, bc] = keep

    def _scan(self, key: int, seq: Any, entry: tuple[Any, ...], vc: dict[int, int]) -> list[Any]:
        """The shadow entries of ``seq`` that the access ``entry`` leaves (it supersedes those
        it covers, as a write or as the same pipe's read); a race with any is an error."""
        r0, r1, c0, c1, gp, _, w, item, start = entry
        keep = []
        for e in seq:
            if e[0] < r1 and r0 < e[1] and e[2] < c1 and c0 < e[3]:
                if (
                    e[4] != gp
                    and (w or e[6])
                    and vc.get(e[4], -1) < e[5]
                    # an SLD completes as the scalar unit issues it: whatever the core
                    # issues after it is ordered after it
                    and not (e[4] == gp - gp % NPIPES and item[1] > e[7][1])
                ):
                    raise self._race(key, (r0, r1, c0, c1), (gp, item, w, start), e)
                if (r0 <= e[0] and e[1] <= r1 and c0 <= e[2] and e[3] <= c1) and (
                    w or (not e[6] and e[4] == gp)
                ):
                    continue
            keep.append(e)
        return keep

    def _race(
        self,
        key: int,
        rng: tuple[int, int, int, int],
        cur: tuple[int, tuple[Any, ...], bool, float],
        e: Any,
    ) -> SimulationError:
        """The error for a race between the access ``cur`` (global pipe, queue item, writes,
        start) and the earlier-checked shadow entry ``e``.

        On one core the two are named in program order: the order the core's front end issued
        them, which its issue cycles give (strictly increasing, across loop iterations too).
        That is the order the program meant, whatever order a missing flag let them start in,
        so the first one is the one the second must wait for: the write before a read (RAW),
        the read before a write that overwrites it (WAR). On two cores there is no program
        order between them; they are named in the order they started."""
        cp = self.cp
        a, b = (e[4], e[7], e[6], e[8]), cur
        ca, cb = a[0] // NPIPES, b[0] // NPIPES
        if (b[1][1] < a[1][1]) if ca == cb else ((b[3], b[1][0]) < (a[3], a[1][0])):
            a, b = b, a
        sa, sb = a[1][0], b[1][0]

        def who(g: int, s: int, write: bool) -> str:
            c = self.cores[g // NPIPES]
            verb = "writes" if write else "reads"
            pipe = PIPE_ORDER[g % NPIPES]
            return f"{cp.instrs[s].op} ({c.name}, pipe {pipe}, {cp.where(s)}) {verb}"

        def short(s: int, note: str = "") -> str:
            return f"the {cp.instrs[s].op} ({cp.core_kind[s]} #{cp.local_index[s]}{note})"

        r0, r1, c0, c1 = max(rng[0], e[0]), min(rng[1], e[1]), max(rng[2], e[2]), min(rng[3], e[3])
        if key < 0:
            t = cp.program.tensors[-1 - key]
            what = f"GM tensor {t.name} rows {r0}..{r1}, columns {c0}..{c1}"
        else:
            c = self.cores[key // 8]
            what = f"{_SPACE_NAME[key % 8]} of {c.describe()} bytes [{hex(r0)}, {hex(r1)})"
        p1, p2 = PIPE_ORDER[a[0] % NPIPES], PIPE_ORDER[b[0] % NPIPES]
        if ca != cb:
            hint = self._cross_hint((a[0], sa, a[2]), (b[0], sb, b[2]))
        elif p1 == p2:
            hint = "they are on one pipe of one core: this cannot happen"
        else:
            # Later in the template yet first in program order: an earlier loop iteration.
            again = ", an earlier loop iteration" if cp.local_index[sa] > cp.local_index[sb] else ""
            hint = (
                f"order them with SET_FLAG {p1}, {p2} after {short(sa, again)} "
                f"and WAIT_FLAG {p1}, {p2} before {short(sb)}"
            )
        return SimulationError(
            f"data race on {what}: {who(a[0], sa, a[2])} while {who(b[0], sb, b[2])}, "
            "and no flag orders the two",
            op=cp.instrs[cur[1][0]].op,
            hint=hint,
        )

    def _cross_hint(self, a: tuple[int, int, bool], b: tuple[int, int, bool]) -> str:
        """How to order two accesses (global pipe, instruction, writes) on different cores.
        Nothing says which one the program meant first, so both directions are spelled out
        (a write before a read first: a producer and its consumer) — a flag from one cluster
        peer to the other — or, between cores of two clusters, a BARRIER."""
        cp = self.cp
        if b[2] and not a[2]:
            a, b = b, a
        (ga, sa, _), (gb, sb, _) = a, b
        ca, cb = self.cores[ga // NPIPES], self.cores[gb // NPIPES]
        if ca.cluster != cb.cluster:
            return (
                f"{ca.name} and {cb.name} are in different clusters, which cross-core flags do "
                "not reach: put a BARRIER between the two (every core meets there)"
            )

        def peer(c: _Core) -> str:
            return "aic" if c.kind == "aic" else f"aiv{c.sub}"

        def at(c: _Core, s: int) -> str:
            return f"the {cp.instrs[s].op} ({c.name}, {cp.core_kind[s]} #{cp.local_index[s]})"

        def way(x: tuple[_Core, int, int], y: tuple[_Core, int, int]) -> str:
            (cx, gx, sx), (cy, gy, sy) = x, y
            px, py = PIPE_ORDER[gx % NPIPES], PIPE_ORDER[gy % NPIPES]
            return (
                f"XSET_FLAG {px}, {peer(cy)}, <id> after {at(cx, sx)} and "
                f"XWAIT_FLAG {py}, {peer(cx)}, <id> before {at(cy, sy)}"
            )

        first, second = (ca, ga, sa), (cb, gb, sb)
        return (
            f"order them with a cross-core flag: if {at(ca, sa)} must come first, "
            f"{way(first, second)}; if {at(cb, sb)} must, {way(second, first)}"
        )

    # --- the end ---
    def _check_done(self) -> None:
        stuck: list[str] = []
        cp = self.cp
        for c in self.cores:
            for gp in c.pipes:
                q = self.queues[gp]
                if not q:
                    continue
                sid = q[0][0]
                ins = cp.instrs[sid]
                pipe = PIPE_ORDER[gp % NPIPES]
                if ins.op == "WAIT_FLAG":
                    why = (
                        f"waits for SET_FLAG {ins.args[0]}, {ins.args[1]}, "
                        f"{q[0][2] % FLAG_SPACE} that never happens"
                    )
                elif ins.op == "XWAIT_FLAG":
                    why = f"waits for a flag {q[0][2]} from {ins.args[1]} that is never set"
                else:
                    why = "waits behind it"
                stuck.append(f"{c.describe()} pipe {pipe} at {cp.where(sid)} {why}")
            if c.fe == _FE_BLOCKED:
                op = cp.instrs[c.block_sid].op
                if op == "BARRIER":
                    stuck.append(
                        f"{c.describe()} waits at {cp.where(c.block_sid)}: "
                        f"{len(self.arrived)} of {len(self.cores)} cores arrived"
                    )
                elif op == "WAIT_FLAG":
                    ins = cp.instrs[c.block_sid]
                    key = next(k for k, w in c.fwait.items() if w < 0)
                    stuck.append(
                        f"{c.describe()} pipe S at {cp.where(c.block_sid)} waits for SET_FLAG "
                        f"{ins.args[0]}, {ins.args[1]}, {key % FLAG_SPACE} that never happens"
                    )
                else:
                    stuck.append(f"{c.describe()} waits at {cp.where(c.block_sid)}")
        if stuck:
            raise SimulationError(
                "deadlock: no instruction can proceed.\n    "
                + "\n    ".join(stuck[:12])
                + (f"\n    ... and {len(stuck) - 12} more" if len(stuck) > 12 else ""),
                hint="every WAIT_FLAG needs a matching SET_FLAG on the source pipe; every core of "
                "the launch must reach each BARRIER",
            )


def _join(into: dict[int, int], other: dict[int, int] | None) -> None:
    if other:
        for k, v in other.items():
            if into.get(k, -1) < v:
                into[k] = v


def _tile_at_slot(ins: Instr, slot: int) -> Tile:
    """The tile whose address is expression ``slot`` of the instruction."""
    s = 0
    for a in ins.args:
        if isinstance(a, Tile):
            if s == slot:
                return a
            s += 1
        elif isinstance(a, GmRef):
            s += 2
        elif isinstance(a, Expr):
            s += 1
    raise AssertionError("no tile at that slot")


def _gm_of(ins: Instr) -> GmRef:
    return next(a for a in ins.args if isinstance(a, GmRef))


def _kind(d: np.dtype[Any]) -> str:
    return "f" if d.kind == "f" or d == dt.bfloat16.np else "i" if d.kind in "iu" else d.kind


def _check_inputs(prog: Program, inputs: Mapping[str, Any], numerics: bool) -> dict[str, Any]:
    known = {t.name: t for t in prog.tensors}
    for name in inputs:
        if name not in known:
            raise SimulationError(
                f"program {prog.name!r} has no tensor {name!r}",
                hint="tensors: " + ", ".join(known),
            )
    out: dict[str, Any] = {}
    for t in prog.tensors:
        if t.role not in ("in", "inout"):
            continue
        if t.name not in inputs:
            if numerics:
                raise SimulationError(
                    f"program {prog.name!r} needs input {t.name!r} "
                    f"({t.dtype.short}[{','.join(map(str, t.shape))}])",
                    hint="pass numerics=False for a timing-only run without data",
                )
            continue
        a = np.asarray(inputs[t.name])
        if a.shape != t.shape:
            raise SimulationError(
                f"input {t.name!r} has shape {list(a.shape)}; the program declares "
                f"{t.dtype.short}[{','.join(map(str, t.shape))}]"
            )
        if a.dtype != t.dtype.np:
            # Within a kind (float, integer, bool) inputs convert, as float64 → float32 does.
            if _kind(a.dtype) != _kind(np.dtype(t.dtype.np)):
                raise SimulationError(
                    f"input {t.name!r} is {a.dtype}; the program declares {t.dtype.name}"
                )
            a = a.astype(t.dtype.np)
        out[t.name] = a
    return out


def simulate(
    program: Program | str,
    machine: Machine | str = "tiny",
    inputs: Mapping[str, Any] | None = None,
    *,
    numerics: bool = True,
    races: bool | None = None,
    poison: bool = False,
    trace: bool = True,
    blocks: int | None = None,
    stop_after: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> Profile:
    """Run ``program`` (a :class:`~pypto.isa.Program` or its text) on ``machine``.

    ``inputs`` maps the names of the ``in``/``inout`` tensors to arrays. ``numerics=False``
    runs timing only (no data; ``outputs`` is None). ``races`` (default: with numerics)
    checks every access for data races; ``poison`` fills uninitialised buffers and outputs with
    NaN (all bits set) so reading them shows; ``trace=False`` keeps only aggregate counts;
    ``blocks`` overrides the program's cluster count. Returns a :class:`~pypto.npu.Profile`.

    ``stop_after=n`` is the stepping debugger: the run stops right after the n-th tile
    instruction (load, store, move or compute, in the simulator's deterministic order) and the
    profile's ``buffers`` hold every buffer and GM tensor at that point (``prof.stopped`` names
    the instruction). Replaying with a larger ``n`` steps forward. ``progress`` is called now
    and then with the simulated time so far (in cycles), for progress bars on long runs.

    >>> import numpy as np
    >>> from pypto.npu import simulate
    >>> prog = '''
    ... .program double
    ... .tensor x f32[16,64] in
    ... .tensor y f32[16,64] out
    ... .core aiv
    ...   TLOAD UB[0x0]:f32[8,64], x[%sub*8, 0]
    ...   SET_FLAG MTE2, V, 0
    ...   WAIT_FLAG MTE2, V, 0
    ...   TADD UB[0x1000]:f32[8,64], UB[0x0]:f32[8,64], UB[0x0]:f32[8,64]
    ...   SET_FLAG V, MTE3, 0
    ...   WAIT_FLAG V, MTE3, 0
    ...   TSTORE y[%sub*8, 0], UB[0x1000]:f32[8,64]
    ... '''
    >>> x = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    >>> prof = simulate(prog, "tiny", {"x": x})
    >>> bool((prof.outputs["y"] == 2 * x).all()), prof.instructions
    (True, 14)
    """
    prog = parse(program) if isinstance(program, str) else program
    m = get_machine(machine)
    if races is None:
        races = numerics
    given = dict(inputs or {})
    arrays = _check_inputs(prog, given, numerics)
    nblk = blocks if blocks is not None else (prog.blocks or m.clusters)
    if nblk <= 0 or nblk > m.clusters:
        raise SimulationError(
            f"program {prog.name!r} launches {nblk} clusters; {m.name} has {m.clusters}",
            hint="loop over work with %blk and %nblk so any cluster count works",
        )
    if stop_after is not None and (not numerics or stop_after <= 0):
        raise SimulationError(
            f"stop_after={stop_after}: the debugger needs numerics=True and a positive count"
        )
    opts: dict[str, Any] = dict(
        numerics=numerics,
        races=races,
        poison=poison,
        trace=trace,
        blocks=nblk,
        stop_after=stop_after,
    )
    with gc_paused():
        cp = compile_program(prog, m)
        eng = _Engine(cp, arrays, progress=progress, **opts)
        eng.run()
    outputs = None
    if numerics:
        # Views of the run's GM (no copy): nothing else holds or writes it once the run is over.
        outputs = {
            t.name: eng.gm2d[i].reshape(t.shape)
            for i, t in enumerate(prog.tensors)
            if t.role in ("out", "inout")
        }
    buffers = eng.snapshot() if stop_after is not None else None
    request = RunRequest(prog, m, arrays, opts)
    prof = Profile.from_engine(eng, cp, outputs, request, buffers)
    for c in eng.cores:  # the cores of a cluster name each other: free their buffers now
        c.peers = {}
        c.gen = None
    return prof
