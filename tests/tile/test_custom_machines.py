"""Compiled programs on machines other than the two built in, found by fuzzing custom
machines: clusters of one vector core, and a UB smaller than the chip's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pypto as pto
from pypto.graph.tracer import trace
from pypto.reference import compare
from pypto.reference.jax_bridge import precisions, sum_lengths
from pypto.tile.examples import flash_attention

from .conftest import sample

ONE = pto.npu.machine("tiny").replace(name="one_aiv", aiv_per_cluster=1)
# two such clusters, every buffer a quarter of the chip's: other tiles and chunked epilogues
SMALL = ONE.replace(
    name="one_aiv_small",
    clusters=2,
    ub_bytes=49152,
    l1_bytes=131072,
    l0a_bytes=16384,
    l0b_bytes=16384,
    l0c_bytes=32768,
)


def _heads(x: Any) -> Any:
    return x.reshape((1, 1, *x.shape))


PROGRAMS = {
    "matmul + gelu, then a plain matmul": lambda x, w, v: pto.gelu(x @ w) @ v,
    "matmul + residual": lambda x, w, v: v + (x @ w) @ v * 0.5,
    "attention": lambda x, w, v: pto.scaled_dot_product_attention(_heads(x), _heads(v), _heads(v)),
    "causal attention": lambda x, w, v: pto.scaled_dot_product_attention(
        _heads(v), _heads(v), _heads(x), causal=True
    ),
}


@pytest.mark.parametrize("machine", [ONE, SMALL], ids=lambda m: m.name)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_cluster_kernels_with_one_vector_core_per_cluster(name: str, machine: Any) -> None:
    """The vector core takes every row of each hand-off (with two, each takes half): these
    kernels computed only the first half of the rows, silently."""
    fn = PROGRAMS[name]
    args = [sample((48, 128), pto.float16, 1), sample((128, 48), pto.float16, 2)]
    args.append(sample((48, 128), pto.float16, 3))
    got = pto.jit(fn, machine=machine)(*args)
    want = fn(*args)
    func = trace(fn, args)[0]
    ((k,), (p,)) = sum_lengths(func), precisions(func)
    c = compare(name, got, np.asarray(want), k=k, precision=p)
    assert c.ok, str(c)


def test_a_hand_written_cluster_kernel_with_one_vector_core_per_cluster() -> None:
    q, k, v = (sample((2, 128, 64), pto.float16, s) for s in (4, 5, 6))
    kt = np.swapaxes(np.asarray(k), -1, -2).copy()

    def attn(q: Any, kt: Any, v: Any) -> Any:
        return flash_attention(q, kt, v, bq=64, bk=32, scale=0.125)

    got = pto.jit(attn, machine=ONE)(q, kt, v)
    c = compare("flash_attention", got, np.asarray(attn(q, kt, v)), k=192)
    assert c.ok, str(c)


@pytest.mark.parametrize("ub", [49152, 16384])
def test_layout_and_reduction_kernels_fit_a_smaller_ub(ub: int) -> None:
    """Copy, transpose, take and column-reduction tiles are a sixth of UB at most (32 KiB on
    the chip): with 48 KiB of UB a transpose asked for 65,536 bytes and a column sum for
    57,600, although the user had chosen no tiles."""
    m = pto.npu.machine("tiny").replace(name=f"ub{ub}", ub_bytes=ub, clusters=2)
    x, y = sample((128, 128), pto.float32), sample((256, 96), pto.bfloat16, 1)
    z = sample((64, 64, 32), pto.float16, 2)
    cases = [
        (lambda x: pto.concat([x.T, x], 0)[1:, ::2] * 2, x),
        (lambda x: (pto.sum(x, 0), pto.max(x, -1), pto.argmax(x, 0)), y),
        (lambda x: pto.take(x, np.array([3, 1, 60]), axis=1) + 1, z),
    ]
    for fn, a in cases:
        got, want = pto.jit(fn, machine=m)(a), fn(a)
        gs, ws = (v if isinstance(v, tuple) else (v,) for v in (got, want))
        func = trace(fn, [a])[0]
        for i, (g, w, k, p) in enumerate(
            zip(gs, ws, sum_lengths(func), precisions(func), strict=True)
        ):
            c = compare(f"out[{i}]", g, np.asarray(w), k=k, precision=p)
            assert c.ok, str(c)


def test_attention_with_too_few_cross_core_flags_runs_as_separate_kernels() -> None:
    """Flash attention's rings take 5 cross-core flag ids at least: on a machine with 4 its
    matmuls and softmax run as kernels of their own (same results); asked for attention tiles,
    it says what the one kernel needs."""
    m = pto.npu.machine("tiny").replace(name="four_flags", cross_flag_ids=4)
    q = sample((2, 128, 64), pto.float16, 7)

    def fn(q: Any) -> Any:
        return pto.scaled_dot_product_attention(q, q, q, causal=True)

    f = pto.jit(fn, machine=m)
    assert "attention" not in [k.kind for k in f.lower(q).tile_ir.kernels]
    c = compare("attention", f(q), np.asarray(fn(q)), k=256, precision=pto.float16)
    assert c.ok, str(c)
    with pytest.raises(pto.TileError, match=r"cross_flag_ids=4") as info:
        pto.jit(fn, machine=m, tile=dict(attn=(64, 64))).lower(q)
    assert "5 cross-core flag ids at least" in str(info.value)
    assert "machine.replace(cross_flag_ids=5)" in str(info.value)


def test_too_few_flag_ids_for_a_kernel_say_how_many_it_needs() -> None:
    """A matmul epilogue's ring of two slots on a machine with one cross-core flag id, and a
    plain matmul (its L1 loads and L0 moves overlap) on a machine with one event id: refused,
    naming the machine's field and the value that fits (the messages said "more than 1" and
    gave no fix)."""
    x = sample((64, 64), pto.float16)
    one_x = pto.npu.machine("tiny").replace(name="one_xflag", cross_flag_ids=1)
    with pytest.raises(pto.TileError, match=r"cross_flag_ids=1") as info:
        pto.jit(lambda x: pto.gelu(x @ x), machine=one_x).lower(x)
    assert info.value.hint == "machine.replace(cross_flag_ids=2) fits it"
    one_ev = pto.npu.machine("tiny").replace(name="one_event", event_ids=1)
    with pytest.raises(pto.TileError, match=r"needs 2 event ids .* event_ids=1") as info:
        pto.jit(lambda x: x @ x, machine=one_ev).lower(x)
    assert "machine.replace(event_ids=2) fits it" in str(info.value.hint)
