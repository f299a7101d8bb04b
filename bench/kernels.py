"""Hand-written tile kernels beside the compiled tensor code they replace, on ``ascend910b``.

Each pair is simulated timing-only (``numerics=False``) like the lowering group:

- **flash attention** (:func:`pypto.tile.examples.flash_attention`, ``bq`` 128, ``bk`` 64)
  against ``pto.scaled_dot_product_attention`` (not causal) on batch·heads 128, seq 2048,
  head dim 128 (the keys are passed transposed to the kernel; the transpose is not timed);
- **rms_norm + matmul** (:func:`pypto.tile.examples.rms_norm_matmul`, 128 x 256 output tiles,
  ``bk`` 64) against ``pto.matmul(pto.rms_norm(x, g), w)`` on 4096 x 4096 x 4096.

``result`` is each row's efficiency (roofline cycles of its own program / simulated cycles);
``vs compiled`` is the compiled program's simulated time over the hand-written one's (above
1: the kernel is faster). These rows have no target: they show what a kernel written at the
Tile level costs next to the compiler's, and docs/performance.md says what limits each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import pypto as pto
from bench import Column, Group, Row, Settings, register
from bench.lowering import (
    MACHINE,
    TIMES,
    _opt,
    _us_text,
    profile_row,
    shape_text,
    sim_timeout,
    without_progress,
)
from pypto.tile.examples import flash_attention, rms_norm_matmul

F16 = np.float16


def _pair(
    name: str,
    shape: str,
    kernel: Callable[..., Any],
    kargs: tuple[Any, ...],
    compiled: Callable[..., Any],
    cargs: tuple[Any, ...],
    timeout: float | None,
) -> Iterator[Row]:
    hand = profile_row(f"{name}: hand-written kernel", shape, kernel, kargs, 0.0, timeout=timeout)
    comp = profile_row(f"{name}: compiled", shape, compiled, cargs, 0.0, timeout=timeout)
    for r in (hand, comp):
        r.update(target="", met=None, kind="kernel")
    if "error" not in hand and "error" not in comp:
        hand["vs_compiled"] = comp["cycles"] / hand["cycles"]
        comp["vs_compiled"] = 1.0
    yield hand
    yield comp


def _rows(settings: Settings) -> Iterator[Row]:
    return without_progress(_measure(settings))


def _measure(settings: Settings) -> Iterator[Row]:
    limit = sim_timeout(settings)
    bh, s, d = (4, 128, 64) if settings.quick else (128, 2048, 128)
    bq, bk = (64, 32) if settings.quick else (128, 64)
    scale = 1.0 / float(np.sqrt(d))
    q, kt = np.zeros((bh, s, d), F16), np.zeros((bh, d, s), F16)
    yield from _pair(
        "flash attention",
        f"b·h {bh} s{s} d{d}",
        lambda q, kt, v: flash_attention(q, kt, v, bq=bq, bk=bk, scale=scale),
        (q, kt, q),
        lambda q, k, v: pto.scaled_dot_product_attention(q, k, v, scale=scale),
        (q[None], q[None], q[None]),
        limit,
    )
    del q, kt
    n = 256 if settings.quick else 4096
    tile = dict(bm=64, bn=64, bk=64) if settings.quick else dict(bm=128, bn=256, bk=64)
    x, g, w = np.zeros((n, n), F16), np.ones(n, F16), np.zeros((n, n), F16)
    yield from _pair(
        "rms_norm + matmul",
        shape_text(n, n, n),
        lambda x, g, w: rms_norm_matmul(x, g, w, **tile),
        (x, g, w),
        lambda x, g, w: pto.matmul(pto.rms_norm(x, g), w),
        (x, g, w),
        limit,
    )


register(
    Group(
        name="kernels",
        title=f"Hand-written tile kernels beside their compiled counterparts on {MACHINE}",
        columns=(
            Column("benchmark", "benchmark"),
            Column("shape", "shape"),
            Column("efficiency", "result", _opt(str), "right"),
            Column("vs compiled", "vs_compiled", _opt(lambda v: f"{v:.2f}{TIMES}"), "right"),
            Column("simulated", "simulated_us", _opt(_us_text), "right"),
            Column("roofline", "roofline_us", _opt(_us_text), "right"),
            Column("bound", "bound", _opt(str)),
            Column("pipes busy", "pipes", _opt(str)),
            Column("sim wall", "sim_wall_s", _opt(lambda v: f"{v:.1f} s"), "right"),
        ),
        run=_rows,
        notes=(
            "efficiency = roofline cycles of the row's own program / simulated cycles "
            "(timing-only); vs compiled = compiled cycles / this row's cycles.",
        ),
    )
)
