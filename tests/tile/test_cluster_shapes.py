"""Cluster kernels on machines whose clusters have one vector core instead of two: the
vector core takes every row of each hand-off (with two, each takes half). These kernels
computed only the first half of the rows there, silently."""

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
