"""Matmuls whose cube tiles do not divide M or N: the last tile row or column is partial and
runs on its real extent. Results equal JAX's within the tolerance table, in every float dtype
on both machines, and the cube issues exactly ``2*M*N*K`` flops (no padded work)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto as pto
from pypto.graph.tracer import trace
from pypto.reference import compare
from pypto.reference.jax_bridge import sum_lengths

F = (pto.float32, pto.float16, pto.bfloat16)


def arr(shape: tuple[int, ...], d: pto.DType, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, shape).astype(np.float32).astype(d.np)


def tiles(f: Any, *args: np.ndarray) -> dict[str, int]:
    """The cube tile sizes in the header of the (only) matmul kernel."""
    (k,) = [k for k in f.lower(*args).tile_ir.kernels if "cube_tile" in k.header()]
    return {a: int(v) for a, v in re.findall(r"\b(m|k|n)=(\d+)", k.header())}


def check_edges(a: np.ndarray, b: np.ndarray, machine: str) -> None:
    """``a @ b`` on ``machine`` takes partial edge tiles and equals JAX."""

    def fn(x: Any, y: Any) -> Any:
        return x @ y

    f = pto.jit(fn, machine=machine)
    m_rows = int(np.prod(a.shape[:-1])) if b.ndim == 2 else a.shape[-2]
    n = b.shape[-1]
    t = tiles(f, a, b)
    assert m_rows % t["m"] or n % t["n"], t  # the edge path, not dividing tiles
    prof = f.profile(a, b)
    (out,) = prof.outputs
    ref = np.asarray(pto.to_jax(fn)(a, b))
    func, _, _ = trace(fn, [pto.tensor(a), pto.tensor(b)])
    (k,) = sum_lengths(func)
    assert out.shape == ref.shape
    c = compare("matmul", out, ref, k=k)
    assert c.ok, str(c)
    # partial tiles run on their real extent: the cube's work is the matmul's, no padding
    batch = int(np.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))) if b.ndim > 2 else 1
    assert prof.flops == 2 * batch * m_rows * n * a.shape[-1]


@pytest.mark.parametrize("d", F, ids=lambda d: d.short)
@pytest.mark.parametrize(
    "m,k,n",
    [(523, 48, 131), (40, 64, 1031), (523, 32, 1031)],
    ids=["m-edge", "n-edge", "both"],
)
def test_edges_tiny(d: pto.DType, m: int, k: int, n: int) -> None:
    # primes above the largest tile: no tile divides them
    check_edges(arr((m, k), d), arr((k, n), d, seed=1), "tiny")


@pytest.mark.parametrize("d", F, ids=lambda d: d.short)
@pytest.mark.parametrize("m,k,n", [(1031, 64, 523), (1009, 80, 1031)])
def test_edges_ascend910b(d: pto.DType, m: int, k: int, n: int) -> None:
    check_edges(arr((m, k), d), arr((k, n), d, seed=1), "ascend910b")


def test_edges_batched() -> None:
    d = pto.float16
    # a 2-D right operand folds the batch into M (3 * 523 rows); a 3-D one is a grid axis
    check_edges(arr((3, 523, 32), d), arr((32, 70), d, seed=1), "tiny")
    check_edges(arr((2, 523, 32), d), arr((2, 32, 70), d, seed=1), "tiny")


def test_awkward_gemm_one_wave() -> None:
    """1000 x 3000 x 700 on 24 cube cores: edge tiles make one wave of 24 (equal tiles that
    divide the axes made 40, two waves)."""
    a = np.zeros((1000, 3000), np.float16)
    b = np.zeros((3000, 700), np.float16)
    f = pto.jit(lambda x, y: x @ y, machine="ascend910b")
    t = tiles(f, a, b)
    assert -(-1000 // t["m"]) * -(-700 // t["n"]) == 24
    prof = f.profile(a, b, numerics=False, trace=False)
    assert prof.flops == 2 * 1000 * 3000 * 700
    assert [s.core for s in f.lower(a, b).tile_ir.kernels[0].sections] == ["aic", "aiv"]
    assert prof.efficiency > 0.6


@pytest.mark.parametrize("swizzle", [None, 1], ids=["bands", "row-major"])
@pytest.mark.parametrize("epilogue", [False, True], ids=["plain", "silu"])
def test_several_waves_read_every_block_ahead(epilogue: bool, swizzle: Any) -> None:
    """Two waves of tiles with a partial last tile column (and, under the epilogue, row): the
    vector cores read all of A and B ahead of the cube, about once (B in the first band, A
    once per band — in row-major order a band is one tile row; an edge tile's window shifts
    back inside the operand, so it overlaps its neighbour), and no window past an edge; the
    results are the same bit for bit without the reads, equal JAX, and take fewer cycles."""
    M, K, N = 1000, 2048, 1100
    a, b = arr((M, K), pto.float16), arr((K, N), pto.float16, seed=1)

    def fn(x: Any, y: Any) -> Any:
        return pto.silu(x @ y) if epilogue else x @ y

    runs = {}
    for ahead in (True, False):
        f = pto.jit(fn, machine="ascend910b", tile=dict(read_ahead=ahead, swizzle=swizzle))
        (k,) = f.lower(a, b).tile_ir.kernels
        assert ("pfa" in str(k)) == ahead
        runs[ahead] = (f.profile(a, b, trace=True), k.header())
    (on, header), (off, _) = runs[True], runs[False]
    t = {x: int(v) for x, v in re.findall(r"\b(m|k|n)=(\d+)", header)}
    assert N % t["n"] and (M % t["m"] or not epilogue), header  # partial edge tiles
    assert on.outputs is not None and off.outputs is not None
    got = on.outputs[0].numpy()
    np.testing.assert_array_equal(got, off.outputs[0].numpy())
    c = compare("read-ahead", got, np.asarray(pto.to_jax(fn)(a, b)).astype(got.dtype), k=K)
    assert c.ok, str(c)

    def covered(tensor: str, shape: tuple[int, int]) -> float:
        """How many times the vector cores' windows cover ``tensor`` on average; every
        element at least once, no window outside it."""
        seen = np.zeros(shape, np.int32)
        for w in on.windows(tensor, "TLOAD"):
            if w.event.core.startswith("aiv"):
                assert w.row + w.rows <= shape[0] and w.col + w.cols <= shape[1], w
                seen[w.row : w.row + w.rows, w.col : w.col + w.cols] += 1
        assert seen.min() >= 1
        return float(seen.mean())

    assert 1.0 <= covered("x", (M, K)) < 1.2 and 1.0 <= covered("y", (K, N)) < 1.2
    assert on.cycles < off.cycles


@pytest.mark.parametrize("d", F, ids=lambda d: d.short)
def test_one_wave_reads_ahead_on_vector_cores(d: pto.DType) -> None:
    """One tile per cube core: the vector cores read A and B ahead (reads only, so the race
    check has nothing to order) and the result still equals JAX."""
    a, b = arr((523, 640), d), arr((640, 331), d, seed=1)
    f = pto.jit(lambda x, y: x @ y, machine="ascend910b")
    (k,) = f.lower(a, b).tile_ir.kernels
    assert [s.core for s in k.sections] == ["aic", "aiv"]
    check_edges(a, b, "ascend910b")


def check_epilogue(fn: Any, args: tuple[np.ndarray, ...], machine: str) -> Any:
    """``fn`` (a matmul and its epilogue) is one cluster kernel with partial edge tiles on
    ``machine`` and equals JAX; returns that kernel."""
    f = pto.jit(fn, machine=machine)
    (k,) = [k for k in f.lower(*args).tile_ir.kernels if "cube_tile" in k.header()]
    sizes = {a: int(v) for a, v in re.findall(r"\b(m|k|n)=(\d+)", k.header())}
    a, b = args[0], args[1]
    assert a.shape[-2] % sizes["m"] or b.shape[-1] % sizes["n"], k.header()
    assert [s.core for s in k.sections] == ["aic", "aiv"] and k.rings  # the epilogue's hand-off
    out = np.asarray(f(*args))
    ref = np.asarray(pto.to_jax(fn)(*args))
    assert out.dtype == ref.dtype
    # judged in the inputs' dtype, the precision the epilogue computes in before a last cast
    c = compare("epilogue", out.astype(a.dtype), ref.astype(a.dtype), k=a.shape[-1])
    assert c.ok, str(c)
    return k


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
@pytest.mark.parametrize("d", F, ids=lambda d: d.short)
def test_edges_with_an_epilogue(d: pto.DType, machine: str) -> None:
    # bias + gelu, a residual (a full operand), a scalar, and a cast: every extent of the
    # tile (full, partial rows, partial columns, both) has its own vector code. 1042 = 2 x 521
    # has no even divisor in 16..512 and 1031 is prime: no dividing tiles
    a, b = arr((1042, 96), d), arr((96, 1031), d, 1)
    bias, res = arr((1031,), d, 2), arr((1042, 1031), d, 3)

    def fn(a: Any, b: Any, bias: Any, res: Any) -> Any:
        return (pto.gelu(a @ b + bias) * 0.5 + res).astype(pto.float32)

    k = check_epilogue(fn, (a, b, bias, res), machine)
    aiv = str(k).split(".aiv")[1]
    assert "%em = smax" in aiv and "%en = smax" in aiv


@pytest.mark.parametrize("d", F, ids=lambda d: d.short)
def test_edges_with_an_epilogue_batched_rows_only(d: pto.DType) -> None:
    # a batched product whose rows leave a partial tile (N divides), epilogue in place
    a, b = arr((3, 1042, 64), d), arr((3, 64, 256), d, 1)

    def fn(a: Any, b: Any) -> Any:
        return pto.relu(a @ b) - 1.0

    k = check_epilogue(fn, (a, b), "ascend910b")
    aiv = str(k).split(".aiv")[1]
    assert "%em = smax" in aiv and "%en" not in aiv


def test_edges_with_an_epilogue_are_faster_than_dividing_tiles() -> None:
    # 1000 x 700 x 3000 with bias and gelu: tiles that divide it are 100 x 75 at most, which
    # the cube's 16-wide fractal pads; edge tiles of 128 run the same kernel in fewer cycles
    a, b, c = (np.zeros(s, np.float16) for s in ((1000, 700), (700, 3000), (3000,)))

    def fn(a: Any, b: Any, c: Any) -> Any:
        return pto.gelu(a @ b + c)

    f = pto.jit(fn, machine="ascend910b")
    (k,) = f.lower(a, b, c).tile_ir.kernels
    assert "cube_tile(m=128," in k.header(), k.header()
    edges = f.profile(a, b, c, numerics=False).cycles
    with pto.tile_shapes(cube=((100, 100), (140, 700), (75, 75))):
        dividing = pto.jit(fn, machine="ascend910b").profile(a, b, c, numerics=False).cycles
    assert edges < 0.8 * dividing, (edges, dividing)


EPILOGUES = {
    "bias_relu": lambda y, bias, res: pto.relu(y + bias),
    "residual": lambda y, bias, res: y * 0.5 + res,
    "gelu_cast": lambda y, bias, res: pto.gelu(y - bias).astype(pto.float32),
}


@settings(max_examples=12)
@given(
    m=st.integers(2, 300),
    k=st.integers(1, 80),
    n=st.integers(1, 300),
    epi=st.sampled_from(sorted(EPILOGUES)),
    d=st.sampled_from([pto.float16, pto.float32]),
)
def test_random_matmul_epilogues_equal_jax(m: int, k: int, n: int, epi: str, d: pto.DType) -> None:
    # whatever tiles the chooser takes (dividing, edge or none fused), the result is JAX's
    a, b = arr((m, k), d), arr((k, n), d, 1)
    bias, res = arr((n,), d, 2), arr((m, n), d, 3)

    def fn(a: Any, b: Any, bias: Any, res: Any) -> Any:
        return EPILOGUES[epi](a @ b, bias, res)

    out = np.asarray(pto.jit(fn, machine="tiny")(a, b, bias, res))
    ref = np.asarray(pto.to_jax(fn)(a, b, bias, res))
    c = compare("epilogue", out.astype(a.dtype), ref.astype(a.dtype), k=k)
    assert out.shape == ref.shape and c.ok, f"{m}x{k}x{n} {epi} {d}: {c}"
