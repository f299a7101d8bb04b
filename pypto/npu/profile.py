"""What a simulation measured: cycles, roofline, utilisation, trace events, buffer occupancy.

The roofline (Williams, Waterman & Patterson, CACM 2009) is the program's lower bound on the
machine: the largest of cube work / cube peak, vector work / vector peak and compulsory HBM bytes
(each L2 line of an input the program reads comes from HBM once, each line of an output goes
there once) / HBM bandwidth, all over the whole chip.
``efficiency = roofline_cycles / cycles`` is at most 1.

>>> from pypto.npu import simulate
>>> prof = simulate('''
... .program fill
... .tensor y f32[16,64] out
... .core aiv
...   TEXPANDS UB[0x0]:f32[8,64], 1.5
...   SET_FLAG V, MTE3, 0
...   WAIT_FLAG V, MTE3, 0
...   TSTORE y[%sub*8, 0], UB[0x0]:f32[8,64]
... ''', "tiny")
>>> prof.bound, 0 < prof.efficiency <= 1
('vector', True)
>>> [e.op for e in prof.events if e.core == "aiv0"]
['TEXPANDS', 'SET_FLAG', 'WAIT_FLAG', 'TSTORE']
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from pypto.isa.ir import PIPES_OF, Program
from pypto.isa.opcodes import GM_STORES
from pypto.npu.machine import Machine

if TYPE_CHECKING:
    from pypto.npu.compile import Compiled

__all__ = ["Flow", "GmWindow", "Profile", "RunRequest", "TraceEvent"]

_PIPES = ("S", "MTE1", "MTE2", "MTE3", "M", "V", "FIX")
_NP = len(_PIPES)
_SPACES = ("L1", "L0A", "L0B", "L0C", "UB")


class _CoreInfo:
    """What the trace needs of a core: its index, name and cluster peers (by index)."""

    __slots__ = ("idx", "name", "peers")

    def __init__(self, core: Any) -> None:
        self.idx: int = core.idx
        self.name: str = core.name
        self.peers: dict[str, _PeerRef] = {k: _PeerRef(v.idx) for k, v in core.peers.items()}


class _PeerRef:
    __slots__ = ("idx",)

    def __init__(self, idx: int) -> None:
        self.idx = idx


class TraceEvent(NamedTuple):
    """One executed instruction on one pipe."""

    core: str
    pipe: str
    op: str
    start: float
    """cycle it started"""
    end: float
    instr_index: int
    """its index in the core template"""
    text: str
    loc: str | None
    """the user's source location, where the code generator recorded it"""


class Flow(NamedTuple):
    """A flag: the SET_FLAG (or XSET_FLAG) and the wait it released, by core, pipe and cycle."""

    src_core: str
    src_pipe: str
    set_time: float
    dst_core: str
    dst_pipe: str
    wait_time: float


class GmWindow(NamedTuple):
    """The GM window one traced TLOAD/TSTORE moved, in its tensor's 2-D view, with the
    registers of the instruction's GM operand evaluated as they were at run time."""

    event: TraceEvent
    row: int
    col: int
    rows: int
    cols: int


@dataclass(frozen=True)
class RunRequest:
    """Everything a run depended on, so it can be repeated (the determinism check)."""

    program: Program
    machine: Machine
    inputs: dict[str, Any]
    options: dict[str, Any]


@dataclass(eq=False)
class Profile:
    """The result of :func:`pypto.npu.simulate` (every field of DESIGN §4).

    Times are in cycles of the machine's clock; ``seconds`` converts. ``utilization`` is the
    busy fraction of each pipe kind over the cores that have it; ``busy`` is per core and pipe.
    ``events`` are the per-instruction trace (register arithmetic is neither counted nor
    traced; pipe S shows barrier waits, the scalar unit's flags and its ``SLD`` loads).
    ``occupancy`` gives, per core and buffer, the bytes holding data between their first
    write and last access, over time.
    """

    program: str
    machine: Machine
    cycles: float
    roofline_cycles: float
    bound: str
    flops: float
    hbm_bytes: float
    hbm_read_bytes: float
    hbm_write_bytes: float
    l2_hit_bytes: float
    gm_read_bytes: float
    vector_bytes: float
    instructions: int
    utilization: dict[str, float]
    busy: dict[tuple[str, str], float]
    outputs: dict[str, np.ndarray] | None
    cores: list[str]
    request: RunRequest | None = field(default=None, repr=False)
    bounds: dict[str, float] = field(default_factory=dict)
    buffers: dict[tuple[str, str], np.ndarray] | None = field(default=None, repr=False)
    """With ``stop_after``: every buffer's bytes by (core, space) and every GM tensor by
    ("GM", name), at the stop."""
    stopped: TraceEvent | None = None
    """With ``stop_after``: the instruction the run stopped after."""
    _trace: tuple[Any, ...] = field(default=(), repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def seconds(self) -> float:
        return self.cycles / self.machine.hz

    @property
    def efficiency(self) -> float:
        return self.roofline_cycles / self.cycles if self.cycles else 0.0

    @property
    def l2_hit_rate(self) -> float:
        """Fraction of GM bytes read that hit L2."""
        return self.l2_hit_bytes / self.gm_read_bytes if self.gm_read_bytes else 0.0

    @property
    def tflops(self) -> float:
        return self.flops / self.seconds / 1e12 if self.cycles else 0.0

    @classmethod
    def from_engine(
        cls,
        eng: Any,
        cp: Compiled,
        outputs: dict[str, np.ndarray] | None,
        request: RunRequest,
        buffers: dict[tuple[str, str], np.ndarray] | None = None,
    ) -> Profile:
        m = cp.machine
        cores = eng.cores
        fe_end = max((c.fe_t for c in cores), default=0.0)
        cycles = max([fe_end, *eng.free]) if eng.free else fe_end
        count = eng.count
        flops = float(sum(n * f for n, f in zip(count, cp.flops) if n))
        cube = sum(n * c for n, c in zip(count, cp.cube_cycles) if n) / m.n_aic
        vbytes = float(sum(n * b for n, b in zip(count, cp.vec_bytes) if n))
        vec = vbytes / m.vector_bytes / m.n_aiv
        # Compulsory traffic: every GM line of an input the program touches comes from HBM
        # once, every line of an output goes there once. Lines never touched (a slice of a
        # large tensor, rows a take skips) are not counted: the bound stays a lower bound.
        compulsory = 0
        stamp, shift = eng.l2.stamp, eng.l2.shift
        for t, base in zip(cp.program.tensors, cp.tensor_base, strict=True):
            if t.role not in ("in", "inout", "out"):
                continue
            lines = stamp[base >> shift : (base + t.nbytes + m.l2_line_bytes - 1) >> shift]
            touched = min(t.nbytes, int(np.count_nonzero(lines >= 0)) * m.l2_line_bytes)
            compulsory += touched * (2 if t.role == "inout" else 1)
        hbm = compulsory / m.hbm_bytes_per_cycle
        bounds = {"cube": cube, "vector": vec, "hbm": hbm}
        bound = max(bounds, key=lambda k: bounds[k])
        if bounds[bound] == 0:
            bound = "none"
        busy: dict[tuple[str, str], float] = {}
        per_kind: dict[str, list[float]] = {}
        instructions = 0
        for c in cores:
            s_busy = c.fe_t - c.stall
            instructions += round(s_busy / m.issue_cycles)
            for p in PIPES_OF[c.kind]:
                pi = _PIPES.index(p.value)
                b = s_busy if pi == 0 else eng.busy[c.idx * _NP + pi]
                busy[(c.name, p.value)] = b
                per_kind.setdefault(p.value, []).append(b)
        util = {p: (sum(v) / (len(v) * cycles) if cycles else 0.0) for p, v in per_kind.items()}
        trace = (eng.tr, eng.flows, cp.program, [_CoreInfo(c) for c in cores])
        stopped = None
        if eng.stopped is not None:
            gp, sid, at = eng.stopped
            ins = cp.instrs[sid]
            stopped = TraceEvent(
                cores[gp // _NP].name,
                _PIPES[gp % _NP],
                ins.op,
                at,
                at,
                cp.local_index[sid],
                str(ins),
                ins.loc,
            )
        return cls(
            program=cp.program.name,
            machine=m,
            cycles=float(cycles),
            roofline_cycles=float(bounds[bound]) if bound != "none" else 0.0,
            bound=bound,
            flops=flops,
            hbm_bytes=eng.hbm_read + eng.hbm_write,
            hbm_read_bytes=eng.hbm_read,
            hbm_write_bytes=eng.hbm_write,
            l2_hit_bytes=eng.l2_hit,
            gm_read_bytes=eng.gm_read,
            vector_bytes=vbytes,
            instructions=instructions,
            utilization=util,
            busy=busy,
            outputs=outputs,
            cores=[c.name for c in cores],
            request=request,
            bounds=bounds,
            buffers=buffers,
            stopped=stopped,
            _trace=trace if eng.tracing else (),
        )

    # --- the trace ---
    @property
    def traced(self) -> bool:
        return bool(self._trace)

    def _compiled(self) -> Compiled:
        from pypto.npu.compile import compile_program

        return compile_program(self._trace[2], self.machine)

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(global pipe, sid, start, end, order) arrays of the trace, sorted by start."""
        if "arrays" not in self._cache:
            tr = self._trace[0]
            n = len(tr)
            gp = np.fromiter((e[0] for e in tr), dtype=np.int64, count=n)
            sid = np.fromiter((e[1][0] for e in tr), dtype=np.int64, count=n)
            start = np.fromiter((e[2] for e in tr), dtype=np.float64, count=n)
            end = np.fromiter((e[3] for e in tr), dtype=np.float64, count=n)
            order = np.lexsort((gp, start))
            self._cache["arrays"] = (gp[order], sid[order], start[order], end[order], order)
        return self._cache["arrays"]

    @property
    def events(self) -> list[TraceEvent]:
        """Every traced instruction, by start time."""
        if "events" not in self._cache:
            if not self._trace:
                self._cache["events"] = []
                return []
            gp, sid, start, end, _ = self._arrays()
            cp = self._compiled()
            names = self.cores
            texts = [str(i) for i in cp.instrs]
            self._cache["events"] = [
                TraceEvent(
                    names[g // _NP],
                    _PIPES[g % _NP],
                    cp.instrs[s].op,
                    float(a),
                    float(b),
                    cp.local_index[s],
                    texts[s],
                    cp.instrs[s].loc,
                )
                for g, s, a, b in zip(gp.tolist(), sid.tolist(), start, end)
            ]
        return self._cache["events"]

    @property
    def flows(self) -> list[Flow]:
        """Every flag that released a wait, in the order the waits were released."""
        if not self._trace:
            return []
        names = self.cores
        return [
            Flow(names[sg // _NP], _PIPES[sg % _NP], st, names[wg // _NP], _PIPES[wg % _NP], wt)
            for sg, _ss, st, wg, _ws, wt in self._trace[1]
        ]

    def windows(self, tensor: str, op: str = "TSTORE") -> list[GmWindow]:
        """The windows of GM tensor ``tensor`` that the traced ``op`` (``"TSTORE"``, which
        counts the fixpipe's scaled ``TSTORE_S`` too, or ``"TLOAD"``) instructions moved, by
        start time.

        The trace keeps each instruction's evaluated operands, so this reads them back
        rather than making the simulator record more.

        >>> from pypto.npu import simulate
        >>> prof = simulate('''
        ... .program fill
        ... .tensor y f32[16,64] out
        ... .core aiv
        ...   TEXPANDS UB[0x0]:f32[8,64], 1.5
        ...   SET_FLAG V, MTE3, 0
        ...   WAIT_FLAG V, MTE3, 0
        ...   TSTORE y[%sub*8, 0], UB[0x0]:f32[8,64]
        ... ''', "tiny")
        >>> sorted((w.event.core, w.row, w.col, w.rows, w.cols) for w in prof.windows("y"))
        [('aiv0', 0, 0, 8, 64), ('aiv1', 8, 0, 8, 64)]
        """
        if op not in ("TLOAD", "TSTORE"):
            raise ValueError(f"windows() reads TLOAD or TSTORE instructions, not {op!r}")
        ops = GM_STORES if op == "TSTORE" else {op}
        if not self._trace:
            return []
        cp = self._compiled()
        prog = cp.program
        ti = prog.tensors.index(prog.tensor(tensor))
        wanted = [
            s
            for s, ins in enumerate(cp.instrs)
            if ins.op in ops and (d := cp.dma[s]) is not None and d.tensor == ti
        ]
        _, sid, _, _, order = self._arrays()
        tr, events = self._trace[0], self.events
        out: list[GmWindow] = []
        for i in np.flatnonzero(np.isin(sid, wanted)).tolist():
            info = cp.dma[int(sid[i])]
            assert info is not None
            item = tr[order[i]][1]
            r, c = item[info.gm_slot], item[info.gm_slot + 1]
            out.append(
                GmWindow(events[i], int(r), int(c), info.rows, info.row_bytes // info.itemsize)
            )
        return out

    @property
    def occupancy(self) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
        """Per (core, buffer): (times, bytes) — a step function of the bytes between their first
        write and last access (from the trace's addresses, so timing-only runs have it too;
        untraced runs do not)."""
        if "occ" not in self._cache:
            self._cache["occ"] = self._occupancy()
        return self._cache["occ"]

    def _occupancy(self) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
        from pypto.npu.semantics import build_access

        if not self._trace:
            return {}
        tr, cores = self._trace[0], self._trace[3]
        cp = self._compiled()
        align = self.machine.align_bytes
        first: dict[int, np.ndarray] = {}
        last: dict[int, np.ndarray] = {}
        acc_of: dict[int, Any] = {}
        for g, item, a, b in tr:
            sid = item[0]
            if g % _NP == 0:
                continue
            if sid not in acc_of:
                acc_of[sid] = build_access(cp, sid)
            acc = acc_of[sid]
            if acc is None:
                continue
            for key, r0, r1, _, _, w in acc(cores[g // _NP], item):
                if key < 0:
                    continue
                if key not in first:
                    cap = self.machine.buffer_bytes(_SPACES[key % 8]) // align
                    first[key] = np.full(cap, np.inf)
                    last[key] = np.full(cap, -np.inf)
                b0, b1 = r0 // align, -(-r1 // align)
                if w:
                    np.minimum(first[key][b0:b1], a, out=first[key][b0:b1])
                np.maximum(last[key][b0:b1], b, out=last[key][b0:b1])
        out: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
        for key in sorted(first):
            f, la = first[key], last[key]
            live = np.isfinite(f)
            t0 = f[live]
            t1 = np.maximum(la[live], t0)
            times = np.concatenate([t0, t1])
            delta = np.concatenate([np.full(t0.size, align), np.full(t1.size, -align)])
            order = np.lexsort((-delta, times))
            times, level = times[order], np.cumsum(delta[order])
            # One point per distinct time: the level after everything at that time.
            keep = np.ones(times.size, dtype=bool)
            keep[:-1] = times[1:] != times[:-1]
            times, level = times[keep], level[keep]
            out[(cores[key // 8].name, _SPACES[key % 8])] = (times, level)
        return out

    def tile(
        self, core: str, space: str, addr: int, dtype: Any, shape: tuple[int, int]
    ) -> np.ndarray:
        """The contents of a tile at the debugger's stop, e.g.
        ``prof.tile("aiv0", "UB", 0x4000, "f16", (16, 256))``."""
        if self.buffers is None:
            raise ValueError("no buffers: run simulate(..., stop_after=n) to stop and look")
        from pypto import dtypes as dt

        d = dt.dtype(dtype)
        nbytes = shape[0] * shape[1] * d.itemsize
        return self.buffers[(core, space)][addr : addr + nbytes].view(d.np).reshape(shape)

    def peak_occupancy(self) -> dict[tuple[str, str], int]:
        """The largest occupancy of each (core, buffer), in bytes."""
        return {k: int(v[1].max()) if v[1].size else 0 for k, v in self.occupancy.items()}

    def to_chrome_trace(self, path: str | Path | None = None) -> dict[str, Any]:
        """The trace as Chrome trace-event JSON (pid = core, tid = pipe, flow arrows for flags,
        counters for buffer occupancy); written to ``path`` if given. Opens in Perfetto."""
        us = 1.0 / (self.machine.clock_ghz * 1000.0)
        ev: list[dict[str, Any]] = []
        for pid, name in enumerate(self.cores):
            ev.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
            ev.append(
                {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}
            )
            kind = "aic" if name.startswith("aic") else "aiv"
            for p in PIPES_OF[kind]:
                tid = _PIPES.index(p.value)
                ev.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": pid,
                        "tid": tid,
                        "args": {"name": p.value},
                    }
                )
        if self._trace:
            gp, sid, start, end, _ = self._arrays()
            cp = self._compiled()
            texts = [str(i) for i in cp.instrs]
            for g, s, a, b in zip(gp.tolist(), sid.tolist(), start.tolist(), end.tolist()):
                ins = cp.instrs[s]
                args: dict[str, Any] = {"index": cp.local_index[s], "text": texts[s]}
                if ins.loc:
                    args["loc"] = ins.loc
                ev.append(
                    {
                        "ph": "X",
                        "name": ins.op,
                        "cat": _PIPES[g % _NP],
                        "pid": g // _NP,
                        "tid": g % _NP,
                        "ts": a * us,
                        "dur": (b - a) * us,
                        "args": args,
                    }
                )
            for k, (sg, _ss, st, wg, _ws, wt) in enumerate(self._trace[1]):
                ev.append(
                    {
                        "ph": "s",
                        "id": k,
                        "name": "flag",
                        "cat": "flag",
                        "pid": sg // _NP,
                        "tid": sg % _NP,
                        "ts": st * us,
                    }
                )
                ev.append(
                    {
                        "ph": "f",
                        "bp": "e",
                        "id": k,
                        "name": "flag",
                        "cat": "flag",
                        "pid": wg // _NP,
                        "tid": wg % _NP,
                        "ts": wt * us,
                    }
                )
            names = {n: i for i, n in enumerate(self.cores)}
            for (core, space), (times, level) in self.occupancy.items():
                for t, v in zip(times.tolist(), level.tolist()):
                    ev.append(
                        {
                            "ph": "C",
                            "name": f"{space} bytes",
                            "pid": names[core],
                            "ts": t * us,
                            "args": {"bytes": int(v)},
                        }
                    )
        doc = {"traceEvents": ev, "displayTimeUnit": "ns"}
        if path is not None:
            Path(path).write_text(json.dumps(doc))
        return doc

    def summary(self) -> str:
        """A few lines for humans."""
        util = ", ".join(f"{p} {u:.0%}" for p, u in sorted(self.utilization.items()))
        return (
            f"{self.program} on {self.machine.name}: {self.cycles:,.0f} cycles "
            f"({self.seconds * 1e6:,.2f} us), roofline {self.roofline_cycles:,.0f} "
            f"({self.bound}-bound), efficiency {self.efficiency:.1%}\n"
            f"  {self.instructions:,} instructions, {self.flops / 1e9:,.3f} GFLOP, "
            f"HBM {self.hbm_bytes / 1e6:,.3f} MB, L2 hit rate {self.l2_hit_rate:.1%}\n"
            f"  utilization: {util}"
        )

    def __str__(self) -> str:
        return self.summary()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from pypto.core.display import bar, table

        rows = [
            ("cycles", f"{self.cycles:,.0f} ({self.seconds * 1e6:,.2f} µs)"),
            ("roofline", f"{self.roofline_cycles:,.0f} cycles, {self.bound}-bound"),
            ("efficiency", bar(self.efficiency)),
            ("FLOPs", f"{self.flops / 1e9:,.3f} G ({self.tflops:,.1f} TFLOPS)"),
            ("HBM traffic", f"{self.hbm_bytes / 1e6:,.3f} MB"),
            ("L2 hit rate", f"{self.l2_hit_rate:.1%}"),
            ("instructions", f"{self.instructions:,}"),
        ]
        rows += [(f"{p} busy", bar(u)) for p, u in sorted(self.utilization.items())]
        title = f"Profile of {self.program} on {self.machine.name}"
        return {"text/plain": self.summary(), "text/html": table(rows, title)}
