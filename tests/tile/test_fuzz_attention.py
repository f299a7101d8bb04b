"""Randomized attention on the NPU path: leading axes (broadcast between q and k/v as in
grouped queries), query and key lengths that are not tile multiples, one query row, head dims
of q/k and v that differ, causal and boolean masks (a padding mask of one row, a full mask,
rows with every key masked), scales, the three float dtypes, both machines and the user's
attention tiles. Each case runs compiled for the simulated NPU against eager mode (and eager
against JAX): the flash-attention kernel, its pairs, wide steps, key splits and head windows
must give softmax(q kᵀ · scale) v whatever the shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import pypto as pto
from pypto.graph.tracer import trace
from pypto.reference import compare
from pypto.reference.jax_bridge import precisions, sum_lengths

LENGTHS = [1, 2, 5, 16, 17, 64, 100, 128, 130, 256, 300]
HEAD_DIMS = [1, 8, 16, 24, 32, 64, 100, 128]


# How q, k and v reach the attention: their own inputs; v the same tensor as k; one tensor for
# all three; q a window of the keys' rows; q, k and v slices of one fused projection's last
# axis; k given transposed ([.., d, lk]) and transposed back in the program.
OPERANDS = ["own", "own", "kv", "self", "window", "fused", "kt"]


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    dtype = draw(st.sampled_from([pto.float32, pto.float16, pto.bfloat16]))
    operands = draw(st.sampled_from(OPERANDS))
    lead = draw(st.lists(st.integers(1, 3), max_size=2))
    # k and v may broadcast over a leading axis of q (grouped queries)
    kv_lead = [1 if draw(st.integers(0, 3)) == 0 else n for n in lead]
    lq, lk = draw(st.sampled_from(LENGTHS)), draw(st.sampled_from(LENGTHS))
    d, dv = draw(st.sampled_from(HEAD_DIMS)), draw(st.sampled_from(HEAD_DIMS))
    if draw(st.booleans()) or operands in ("kv", "self", "fused"):
        dv = d
    if operands in ("self", "window", "fused"):
        kv_lead = lead
    if operands in ("self", "fused"):
        lq = lk
    offset = 0
    if operands == "window":
        lq = min(lq, lk)
        offset = draw(st.integers(0, lk - lq))
    mask = draw(st.sampled_from([None, None, "random", "padding", "rows"]))
    return {
        "dtype": dtype,
        "operands": operands,
        "q": (*lead, lq, d),
        "k": (*kv_lead, lk, d),
        "v": (*kv_lead, lk, dv),
        "offset": offset,
        "causal": draw(st.booleans()),
        "mask": mask,
        "scale": draw(st.sampled_from([None, None, 0.05, 1.0])),
        "seed": draw(st.integers(0, 2**16)),
    }


def _arrays(case: dict[str, Any]) -> list[np.ndarray]:
    """The program's inputs: its tensors (per ``operands``), then the mask if any."""
    rng = np.random.default_rng(case["seed"])

    def normal(shape: tuple[int, ...]) -> np.ndarray:
        return rng.normal(0, 1, shape).astype(np.float32).astype(case["dtype"].np)

    q, k, v = case["q"], case["k"], case["v"]
    out = {
        "own": lambda: [normal(q), normal(k), normal(v)],
        "kv": lambda: [normal(q), normal(k)],
        "self": lambda: [normal(k)],
        "window": lambda: [normal(k), normal(v)],
        "fused": lambda: [normal((*k[:-1], 3 * k[-1]))],
        "kt": lambda: [normal(q), np.swapaxes(normal(k), -1, -2).copy(), normal(v)],
    }[case["operands"]]()
    lq, lk = q[-2], k[-2]
    if case["mask"] == "random":
        out.append(rng.random((lq, lk)) > 0.3)
    elif case["mask"] == "padding":  # the last keys masked for every query
        out.append(np.arange(lk)[None, :] < max(1, lk - int(rng.integers(0, lk))))
    elif case["mask"] == "rows":  # a few query rows see no key at all: NaN as in JAX
        m = rng.random((lq, lk)) > 0.3
        m[rng.random(lq) < 0.2] = False
        out.append(m)
    return out


def _fn(case: dict[str, Any]) -> Any:
    n = {"own": 3, "kv": 2, "self": 1, "window": 2, "fused": 1, "kt": 3}[case["operands"]]
    lq, d = case["q"][-2:]
    off = case["offset"]

    def fn(*args: Any) -> Any:
        xs, mask = args[:n], (args[n] if len(args) > n else None)
        q, k, v = {
            "own": lambda: xs,
            "kv": lambda: (xs[0], xs[1], xs[1]),
            "self": lambda: (xs[0],) * 3,
            "window": lambda: (xs[0][..., off : off + lq, :], xs[0], xs[1]),
            "fused": lambda: (xs[0][..., :d], xs[0][..., d : 2 * d], xs[0][..., 2 * d :]),
            "kt": lambda: (xs[0], pto.transpose(xs[1], (*range(xs[1].ndim - 2), -1, -2)), xs[2]),
        }[case["operands"]]()
        return pto.scaled_dot_product_attention(
            q, k, v, mask, causal=case["causal"], scale=case["scale"]
        )

    return fn


def check_case(case: dict[str, Any], machine: Any, tile: Any = None) -> None:
    """The case compiled for ``machine`` (a name or a Machine) against eager mode, and eager
    against JAX on tiny; a TileError passes through unless the user's tiles caused it."""
    arrays = _arrays(case)
    fn = _fn(case)
    tensors = [pto.tensor(a) for a in arrays]
    eager = np.asarray(fn(*tensors))
    try:
        npu = np.asarray(pto.jit(fn, machine=machine, tile=tile)(*tensors))
    except pto.TileError as e:
        if tile is None:  # the automatic tiles always fit the chip (the caller judges others)
            raise
        assert e.hint, str(e)  # the user's tiles may be refused, saying what would fit
        return
    func = trace(fn, tensors)[0]
    (k,), (p,) = sum_lengths(func), precisions(func)
    # rows that see no key are NaN on every path (softmax over nothing), as in JAX
    assert np.array_equal(np.isnan(npu), np.isnan(eager)), f"NaN rows differ: {case}"
    # an output row is a weighted mean of v's rows: its rounding errors scale with the terms'
    # typical size, not with what is left of the mean when they cancel (a bf16 mean of 128
    # normal values came out near 1e-4)
    scale = max(float(np.abs(a.astype(np.float32)).mean()) for a in arrays if a.dtype != bool)
    c = compare("npu attention", npu, eager, k=2 * k, scale=scale, precision=p)
    assert c.ok, f"{c}\n{case}"
    if tile is None and machine == "tiny":
        ref = np.asarray(pto.to_jax(fn)(*arrays))
        c = compare("attention", eager, ref, k=2 * k, scale=scale, precision=p)
        assert c.ok, f"{c}\n{case}"


def case_size(case: dict[str, Any]) -> int:
    """Scores the case computes: its batch times query times key length."""
    return int(np.prod(case["q"][:-2], dtype=int)) * case["q"][-2] * case["k"][-2]


@settings(max_examples=30)
@given(cases())
def test_random_attention_on_tiny(case: dict[str, Any]) -> None:
    assume(case_size(case) <= 1 << 16)
    check_case(case, "tiny")


@settings(max_examples=40)
@given(cases())
def test_random_attention_on_ascend910b(case: dict[str, Any]) -> None:
    assume(case_size(case) <= 1 << 17)
    check_case(case, "ascend910b")


@settings(max_examples=25)
@given(
    cases(),
    st.sampled_from([16, 32, 64, 128, 256]),
    st.sampled_from([16, 32, 64, 128, 256, 512]),
    st.sampled_from([(), (1,), (2,), (2, 2), (1, 3)]),
)
def test_random_attention_with_the_users_tiles(
    case: dict[str, Any], bq: int, bk: int, more: tuple[int, ...]
) -> None:
    """The user's attention tiles (bq, bk[, g[, splits]]) give the same results, or a
    TileError that says why."""
    assume(case_size(case) <= 1 << 16)
    check_case(case, "ascend910b", tile={"attn": (bq, bk, *more)})
