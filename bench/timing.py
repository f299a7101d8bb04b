"""Interleaved timing: several candidates measured round-robin, reported as medians.

Each candidate is a statement and the names it uses, timed with :class:`timeit.Timer` (so the
loop is the same tight compiled loop for every candidate, and the garbage collector is off
while a batch runs). A batch runs the statement ``loops`` times, ``loops`` chosen per candidate
so one batch lasts about ``batch_seconds``. Batches of all candidates alternate, in an order
that changes from one round to the next, so drifting machine noise (another process, a slow
spell of the virtual CPU, a cache flushed) hits every candidate alike; the per-call time of a
candidate is the median over its batches.
"""

from __future__ import annotations

import itertools
import random
import statistics
import timeit
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Candidate:
    """``stmt`` (e.g. ``"f(a, b)"``) run with ``names`` as its globals."""

    stmt: str
    names: dict[str, Any]

    def timer(self) -> timeit.Timer:
        return timeit.Timer(self.stmt, globals=self.names)


@dataclass(frozen=True)
class Stats:
    """Seconds per call over the batches of one candidate (``samples`` in round order)."""

    median: float
    q1: float
    q3: float
    best: float
    loops: int
    batches: int
    samples: tuple[float, ...] = field(repr=False, default=())

    def as_dict(self) -> dict[str, float | int]:
        return {
            "median_s": self.median,
            "q1_s": self.q1,
            "q3_s": self.q3,
            "min_s": self.best,
            "loops": self.loops,
            "batches": self.batches,
        }


def calibrate(
    timer: timeit.Timer, batch_seconds: float, max_loops: int = 1_000_000
) -> tuple[int, float]:
    """(loops, seconds per call): enough loops for a batch of about ``batch_seconds``."""
    loops = 1
    while True:
        t = timer.timeit(loops)
        if t >= batch_seconds / 5 or loops >= max_loops:
            break
        loops *= 4 if t < batch_seconds / 50 else 2
    per_call = sorted([t, *timer.repeat(2, loops)])[1] / loops  # the median of three
    return max(1, min(max_loops, round(batch_seconds / per_call))), per_call


def _stats(per_call: list[float], loops: int) -> Stats:
    if len(per_call) >= 2:
        q1, _, q3 = statistics.quantiles(per_call, n=4, method="inclusive")
    else:
        q1 = q3 = per_call[0]
    return Stats(
        statistics.median(per_call), q1, q3, min(per_call), loops, len(per_call), tuple(per_call)
    )


def paired_ratio(num: Stats, den: Stats) -> float:
    """Median over rounds of ``num``'s time over ``den``'s in the same round.

    Batches of one round run back to back, so a slow spell of the machine scales both; this
    cross-checks the ratio of the two medians.
    """
    return statistics.median([n / d for n, d in zip(num.samples, den.samples, strict=True)])


def _orders(names: list[str]) -> Iterator[tuple[str, ...]]:
    """Endless run orders: all permutations in turn (few candidates), else seeded shuffles."""
    if len(names) <= 4:
        yield from itertools.cycle(itertools.permutations(names))
    rng = random.Random(0)
    while True:
        rng.shuffle(names)
        yield tuple(names)


def interleaved(
    candidates: dict[str, Candidate],
    repeats: int,
    batch_seconds: float,
    *,
    max_seconds: float | None = None,
    min_repeats: int = 11,
    warmup: int = 3,
) -> dict[str, Stats]:
    """Time every candidate ``repeats`` times, round-robin; seconds per call for each.

    With ``max_seconds``, fewer rounds (but at least ``min_repeats``) are run when the
    calibrated rounds would take longer than that (slow candidates, a loaded machine).

    Round ``r`` runs the candidates in the ``r``-th of their permutations (cyclically; seeded
    shuffles beyond four candidates), so each candidate follows each other one equally often;
    and every timed batch of more than one loop is preceded by one untimed call, so it starts
    with its own operands in the cache and the allocator settled rather than paying for
    whichever candidate ran before it.
    """
    timers = {k: c.timer() for k, c in candidates.items()}
    for t in timers.values():
        t.timeit(warmup)  # first calls: JAX compiles, caches fill, pages fault in
    loops: dict[str, int] = {}
    round_seconds = 0.0
    for k, t in timers.items():
        loops[k], per_call = calibrate(t, batch_seconds)
        round_seconds += (loops[k] + (loops[k] > 1)) * per_call
    if max_seconds is not None and repeats * round_seconds > max_seconds:
        repeats = max(min(repeats, min_repeats), int(max_seconds / round_seconds))
    samples: dict[str, list[float]] = {k: [] for k in timers}
    for _, order in zip(range(repeats), _orders(list(timers))):
        for k in order:
            if loops[k] > 1:  # a call longer than a batch hardly notices a cold start
                timers[k].timeit(1)
            samples[k].append(timers[k].timeit(loops[k]) / loops[k])
    return {k: _stats(samples[k], loops[k]) for k in timers}
