"""The shared memory system: an LRU model of L2 and fluid bandwidth sharing of HBM and L2.

**L2.** GM is cut into lines of ``l2_line_bytes``. Each GM transfer touches a set of lines;
those resident in L2 hit, the rest miss and are filled from HBM (a whole line each). The cache
is LRU over lines with the machine's capacity, tracked in numpy: every transfer stamps its lines
with a new tick, and the oldest ticks are evicted (whole ticks at a time, so the eviction error
is at most one transfer) once more lines are resident than fit.

Writes allocate their lines (so a tile one core writes to a GM workspace hits L2 when another
core reads it) and L2 is write-back, as on the chip: a dirty line goes back to HBM once, when it
is replaced, however often it was written while resident. The model charges that write-back when
a write *dirties* a line (a clean or absent one), not at its eviction; a write to a line that is
already dirty in L2 costs only L2 bandwidth. The HBM bytes are those of a write-back cache
flushed at the end; only their place in time differs. So a GM workspace ring that one core
rewrites and another reads stays in L2, while an output written once costs HBM once.

**Bandwidth.** HBM and L2 are each a *fluid* server of fixed bandwidth shared among the
transfers active at that moment, max-min fair under each transfer's per-core rate cap
(processor sharing, as on a shared link). Transfers with the same cap progress identically, so
each cap class keeps one virtual clock and a heap of finish marks: an arrival or departure costs
O(classes + log n), not O(n).

>>> fl = Fluid(bandwidth=100.0)
>>> fl.add(0.0, 1000.0, cap=80.0, token="a")  # alone: its cap binds
12.5
>>> fl.add(5.0, 300.0, cap=80.0, token="b")   # two share 100: 50 each
11.0
>>> fl.complete(11.0)
(['b'], 14.75)
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

__all__ = ["L2", "Fluid"]


class L2:
    """LRU over GM lines with write-back (see the module doc).

    ``access`` returns how many lines were touched and how many hit; for a write, a "hit" is a
    line that was already dirty in L2 (no further HBM traffic).

    >>> l2 = L2(gm_bytes=4096, capacity_bytes=1024, line_bytes=512)
    >>> l2.access(slice(0, 2), write=True)   # dirties two absent lines: both go to HBM
    (2, 0)
    >>> l2.access(slice(0, 2), write=True)   # rewritten while dirty: absorbed by L2
    (2, 2)
    >>> l2.access(slice(2, 4))               # two reads evict them...
    (2, 0)
    >>> l2.access(slice(0, 1), write=True)   # ...so this write dirties a line again
    (1, 0)
    """

    def __init__(self, gm_bytes: int, capacity_bytes: int, line_bytes: int) -> None:
        self.line = line_bytes
        self.shift = line_bytes.bit_length() - 1
        self.capacity = max(1, capacity_bytes // line_bytes)
        self.stamp = np.full(-(-gm_bytes // line_bytes) + 1, -1, dtype=np.int64)
        self.hist = np.zeros(1024, dtype=np.int64)
        self.tick = 0
        self.boundary = 1
        """lines stamped with a tick below this are evicted"""
        self.resident = 0
        self.dirty = np.zeros(self.stamp.size, dtype=bool)
        """per line: written since it was filled (meaningful only while resident)"""
        self.written = False
        self._patterns: dict[tuple[int, int, int, int], np.ndarray] = {}

    def window_lines(self, addr: int, rows: int, row_bytes: int, stride: int) -> np.ndarray | slice:
        """The distinct lines of a 2-D GM window (a slice when they are contiguous)."""
        sh = self.shift
        first = addr >> sh
        if rows == 1 or stride == row_bytes:
            return slice(first, ((addr + (rows - 1) * stride + row_bytes - 1) >> sh) + 1)
        line = self.line
        if not stride & (line - 1) and (addr & (line - 1)) + row_bytes <= line:
            # One line per row, rows a whole number of lines apart: a strided slice.
            step = stride >> sh
            return slice(first, first + (rows - 1) * step + 1, step)
        # The pattern relative to the first line depends only on the offset within the line
        # (and on the geometry): cache it.
        key = (rows, row_bytes, stride, addr & (self.line - 1))
        rel = self._patterns.get(key)
        if rel is None:
            off = key[3]
            starts = off + stride * np.arange(rows, dtype=np.int64)
            lo = starts >> sh
            hi = (starts + row_bytes - 1) >> sh
            width = int((hi - lo).max()) + 1
            rel = (lo[:, None] + np.arange(width, dtype=np.int64)[None, :]).ravel()
            if width > 1:
                rel = rel[rel <= np.repeat(hi, width)]
            if stride < row_bytes + self.line:
                rel = np.unique(rel)  # rows may share a line
            self._patterns[key] = rel
        return rel + first

    def access(self, lines: np.ndarray | slice, write: bool = False) -> tuple[int, int]:
        """(lines touched, lines that hit); the lines become the most recently used.

        For a read a hit is a resident line; for a write, a line already dirty (the others
        are the lines this write dirties, each of which costs one write-back to HBM).
        """
        stamp = self.stamp
        hist = self.hist
        dirty = self.dirty
        old = stamp[lines]
        n = old.size
        lo, hi = int(old.min()), int(old.max())
        boundary = self.boundary
        # The common cases (all miss; all hit, last touched together) cost two reductions.
        if hi < boundary:
            nhit = 0
            if write:
                dirty[lines] = True
            elif self.written:
                dirty[lines] = False  # filled from HBM: clean, whatever it was before
        elif lo >= boundary:
            nhit = n
            if lo == hi:
                hist[lo] -= n
            else:
                np.subtract.at(hist, old, 1)
            if write:
                nhit = int(np.count_nonzero(dirty[lines]))
                dirty[lines] = True
        else:
            resident = old >= boundary
            hit = old[resident]
            nhit = hit.size
            np.subtract.at(hist, hit, 1)
            if write:
                nhit = int(np.count_nonzero(dirty[lines] & resident))
                dirty[lines] = True
            elif self.written:
                dirty[lines] &= resident
        if write:
            self.written = True
        self.tick += 1
        tick = self.tick
        if tick >= hist.size:
            hist = self.hist = np.concatenate([hist, np.zeros(hist.size, dtype=np.int64)])
        stamp[lines] = tick
        hist[tick] = n
        self.resident += n - nhit
        while self.resident > self.capacity:
            self.resident -= int(hist[self.boundary])
            hist[self.boundary] = 0
            self.boundary += 1
        return n, nhit


class _Class:
    """The transfers of one rate cap on a fluid server."""

    __slots__ = ("cap", "heap", "n", "rate", "v")

    def __init__(self, cap: float) -> None:
        self.cap = cap
        self.n = 0
        self.v = 0.0
        self.rate = 0.0
        self.heap: list[tuple[float, int, Any]] = []


class Fluid:
    """A shared bandwidth server with max-min fair sharing (see the module doc).

    ``add`` returns the time of the next completion on this server (``inf`` if none); the
    caller schedules an event then and calls ``complete(now)`` which returns the finished
    tokens and the next completion time. ``version`` changes whenever the next completion does,
    so a caller can drop stale events. Callers must not add transfers while ``complete`` runs:
    it returns the finished tokens instead of calling back.
    """

    def __init__(self, bandwidth: float) -> None:
        self.bw = bandwidth
        self.classes: dict[float, _Class] = {}
        self.order: list[_Class] = []
        """the classes by increasing cap (water-filling order)"""
        self.t = 0.0
        self.seq = 0
        self.version = 0
        self.active = 0
        self.bytes = 0.0

    def _advance(self, now: float) -> None:
        dt = now - self.t
        if dt > 0:
            for c in self.classes.values():
                if c.n:
                    c.v += c.rate * dt
        self.t = now

    def _rates(self) -> None:
        remaining = self.bw
        left = self.active
        for c in self.order:
            if not c.n:
                continue
            share = remaining / left
            c.rate = c.cap if c.cap < share else share
            remaining -= c.rate * c.n
            left -= c.n

    def _next(self) -> float:
        best = float("inf")
        for c in self.classes.values():
            if c.n:
                t = self.t + (c.heap[0][0] - c.v) / c.rate
                if t < best:
                    best = t
        self.version += 1
        return best

    def add(self, now: float, nbytes: float, cap: float, token: Any) -> float:
        """Start a transfer of ``nbytes`` at ``now`` capped at ``cap`` bytes/cycle."""
        self._advance(now)
        c = self.classes.get(cap)
        if c is None:
            c = self.classes[cap] = _Class(cap)
            self.order = sorted(self.classes.values(), key=lambda k: k.cap)
        self.seq += 1
        heapq.heappush(c.heap, (c.v + nbytes, self.seq, token))
        c.n += 1
        self.active += 1
        self.bytes += nbytes
        self._rates()
        return self._next()

    def complete(self, now: float) -> tuple[list[Any], float]:
        """Finish every transfer done by ``now``: (their tokens, the next completion time)."""
        self._advance(now)
        done: list[Any] = []
        for c in self.classes.values():
            h = c.heap
            # Finish marks within a rounding error of the byte clock are done, and so are those
            # whose time still to go the cycle clock cannot resolve (late in a long run, one
            # ulp of ``now`` outweighs the byte tolerance; waiting would be "now" forever).
            while h and (
                h[0][0] <= c.v + 1e-9 * max(1.0, abs(c.v))
                or (c.rate > 0 and now + (h[0][0] - c.v) / c.rate <= now)
            ):
                _, _, token = heapq.heappop(h)
                c.n -= 1
                self.active -= 1
                done.append(token)
            if not c.n:
                c.v = 0.0
                h.clear()
        self._rates()
        return done, self._next()
