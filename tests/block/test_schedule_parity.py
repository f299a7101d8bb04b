"""Double buffers across sibling loops: a tile that sibling loops make one after another (a
software pipeline's fill, steady and drain loops) alternates its slots with every iteration
of any of them, through one parity register they all count; a loop whose own tiles
alternate keeps its counter, and a tile that needs it alternates with the enclosing loop."""

from __future__ import annotations

import re

import numpy as np

import pypto as pto
from pypto.block.schedule import _parities, _Var
from pypto.isa.ir import Space


def test_attention_pipelines_k_v_and_p_through_one_parity() -> None:
    q = np.zeros((2, 512, 128), np.float16)
    f = pto.jit(
        lambda q, k, v: pto.scaled_dot_product_attention(q, k, v, causal=True),
        machine="tiny",
        tile=dict(attn=(128, 256, 2)),
    )
    low = f.lower(q, q, q)
    found = re.findall(r"\.buf L1\[[^]]* x2 by %(\w+)\] %(\w+)", str(low.block_ir))
    bufs = {name: par for par, name in found}
    # the query pair alternates with the grid; K, V and P with the K/V steps of all loops
    assert bufs["q1"] == "p_g"
    par = bufs["k1"]
    assert par != "p_g" and bufs["v1"] == par and bufs["p1"] == par
    aic = str(low.isa).split(".core aiv")[0]
    loops = aic.split("LOOP %j, ")[1:]
    assert len(loops) == 3
    cnt = "n" + par[1:]
    for body in loops:
        body = body.split("ENDLOOP")[0]
        assert f"SMOD %{par}, %{cnt}, 2" in body and f"SADD %{cnt}, %{cnt}, 1" in body


def var(name: str, *accesses: tuple[tuple[str, ...], bool]) -> _Var:
    v = _Var(name, Space.L1, 1024, 0, 0, io=True)
    for path, fresh in accesses:
        v.loops.append(path)
        v.fresh.append(fresh)
    return v


A, B, C = ("g", "1"), ("g", "2"), ("g", "3")


def test_sibling_loops_that_make_their_own_tiles_share_a_parity() -> None:
    k = var("k", (A, True), (A, False), (B, True), (B, False))
    v = var("v", (B, True), (C, True), (C, False))
    tiles, loops = _parities({"k": k, "v": v})
    # transitively one group: every loop counts the same register
    assert tiles == {"k": "p_g_1", "v": "p_g_1"}
    assert loops == {A: "p_g_1", B: "p_g_1", C: "p_g_1"}


def test_a_tile_read_in_a_loop_before_it_is_written_there_alternates_with_the_parent() -> None:
    # an accumulator made in one loop and finished in another is one tile, not a sequence
    acc = var("acc", (A, True), (B, False))
    assert _parities({"acc": acc})[0] == {"acc": "p_g"}


def test_a_loop_with_tiles_of_its_own_keeps_its_counter() -> None:
    own = var("own", (B, True), (B, False))
    k = var("k", (A, True), (B, True))
    tiles, loops = _parities({"own": own, "k": k})
    assert tiles == {"own": "p_g_2", "k": "p_g"}
    assert loops[B] == "p_g_2" and loops[("g",)] == "p_g"
