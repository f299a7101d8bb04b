"""Grid points dealt by cost: a kernel that declares a ``cost`` register (causal attention's
query tile) has its points dealt costliest first in windows, so every cluster gets the same
work; the Tile IR prints the declaration and the Block IR the order; numerics unchanged."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

import pypto as pto
from pypto.reference import compare


def sdpa(causal: bool) -> Any:
    def fn(q: Any, k: Any, v: Any) -> Any:
        return pto.scaled_dot_product_attention(q, k, v, causal=causal)

    return fn


def attention_kernel(low: Any) -> Any:
    (k,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    return k


def test_causal_attention_declares_its_cost_and_the_block_ir_deals_by_it() -> None:
    q = np.zeros((2, 3, 1024, 64), np.float16)
    low = pto.jit(sdpa(True), machine="ascend910b").lower(q, q, q)
    k = attention_kernel(low)
    assert k.cost == "q" and " cost(q) " in k.header()
    block = str(low.block_ir)
    # costliest first: the query tile counts down from the last one
    assert "SSUB %q, 7, %q" in block
    full = attention_kernel(pto.jit(sdpa(False), machine="ascend910b").lower(q, q, q))
    assert full.cost == "" and "cost(" not in full.header()
    assert "SSUB %q" not in str(pto.jit(sdpa(False), machine="ascend910b").lower(q, q, q).block_ir)


def cube_busy(shape: tuple[int, ...]) -> list[float]:
    q = np.zeros(shape, np.float16)
    prof = pto.jit(sdpa(True), machine="ascend910b").profile(q, q, q, numerics=False, trace=False)
    return [v for (core, pipe), v in prof.busy.items() if core.startswith("aic") and pipe == "M"]


def test_causal_tiles_are_spread_evenly_over_the_clusters() -> None:
    # 6 heads x 8 query tiles on 24 clusters: round-robin in row-major order gives cluster c
    # the query tile c mod 8 twice (1.78x the mean); by cost every cluster gets 9 K/V steps
    busy = cube_busy((2, 3, 1024, 64))
    assert len(busy) == 24
    assert max(busy) / min(busy) < 1.02
    # more heads than clusters: a full window (24 heads, 10 steps per cluster) and a
    # partial one (3 heads): the clusters differ by at most the costliest point (4 steps)
    busy = cube_busy((1, 27, 512, 64))
    step = sum(busy) / (27 * (1 + 2 + 3 + 4))
    assert max(busy) - min(busy) <= 4 * step * 1.01


def test_causal_numerics_with_the_cost_order() -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(0, 1, (1, 5, 512, 32)).astype(np.float16) for _ in range(3))
    out = pto.jit(sdpa(True), machine="ascend910b")(q, k, v)
    ref = np.asarray(pto.to_jax(sdpa(True))(q, k, v))
    c = compare("attention", np.asarray(out), ref, k=512)
    assert c.ok, str(c)


def test_full_windows_start_each_cluster_at_its_own_cost() -> None:
    # a full window (24 heads on 24 clusters): cluster w runs its rounds from cost value
    # ext-1-(w mod ext) on, so the clusters do not hand tiles over in step; each still gets
    # one point of every cost, and every point runs once (the results equal JAX)
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(0, 1, (1, 27, 512, 32)).astype(np.float16) for _ in range(3))
    f = pto.jit(sdpa(True), machine="ascend910b")
    prof = f.profile(q, k, v)
    ref = np.asarray(pto.to_jax(sdpa(True))(q, k, v))
    c = compare("attention", prof.outputs[0], ref, k=512)
    assert c.ok, str(c)
    # the score tiles each cluster's first vector core takes between its output tiles: the
    # sizes of its points, in order
    marks: dict[int, str] = {}
    for e in sorted(prof.events, key=lambda e: e.start):
        if e.core.startswith("aiv") and int(e.core[3:]) % 2 == 0:
            w = int(e.core[3:]) // 2
            if e.op == "TLOAD" and " ws_s[" in e.text:
                marks[w] = marks.get(w, "") + "S"
            elif e.op == "TSTORE" and " out[" in e.text:
                marks[w] = marks.get(w, "") + "O"
    att = attention_kernel(f.lower(q, k, v))
    ext = dict(att.grid)["q"]
    sizes = {w: [len(x) for x in m.split("O")[:ext]] for w, m in marks.items()}
    # costliest first from cluster 0 on, each later cluster one cost value further on
    assert sizes[0] == sorted(sizes[0], reverse=True) and len(set(sizes[0])) > 1
    for w in range(24):
        assert sizes[w] == sizes[0][w % ext :] + sizes[0][: w % ext], w
    busy = [v for (core, pipe), v in prof.busy.items() if core.startswith("aic") and pipe == "M"]
    step = sum(busy) / (27 * sum(range(1, ext + 1)))
    assert max(busy) - min(busy) <= ext * step * 1.01


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_vector_cores_read_the_next_points_queries_ahead(causal: bool) -> None:
    # the vector cores read, during each grid point, the query rows the cube core loads at
    # its cluster's next point (%nx_<reg> from the Block IR: by cost, then row-major over
    # the grid); each is read before the cube loads it, and nothing else is read ahead
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(0, 1, (1, 27, 512, 64)).astype(np.float16) for _ in range(3))
    prof = pto.jit(sdpa(causal), machine="ascend910b").profile(q, k, v, numerics=False, trace=True)
    cube: dict[int, list[tuple[float, int, int]]] = collections.defaultdict(list)
    ahead: dict[int, list[tuple[float, int, int]]] = collections.defaultdict(list)
    for w in prof.windows("q", "TLOAD"):
        core = w.event.core
        if core.startswith("aic"):
            cube[int(core[3:])].append((w.event.start, w.row, w.rows))
        else:
            assert "%nx_" in w.event.text  # (the next point's registers)
            ahead[int(core[3:]) // 2].append((w.event.start, w.row, w.rows))
    assert len(cube) == 24
    for c, points in cube.items():
        points.sort()
        read = sorted(ahead[c])
        # every query row of each point after the cluster's first, read ahead before the cube
        # loads it; and no other rows
        want = {(r + i, t) for t, r, n in points[1:] for i in range(n)}
        got = {(r + i, t) for t, r, n in read for i in range(n)}
        assert {r for r, _ in got} == {r for r, _ in want}
        first = {r: t for r, t in sorted(got, key=lambda x: -x[1])}
        assert all(first[r] < t for r, t in want)
