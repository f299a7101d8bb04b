"""Split K on the NPU: a product whose output tiles are too few for the clusters, over a
long K, runs as several runs of K blocks on different clusters, whose float32 partial
products a vector kernel adds up and rounds once (``pypto/tile/matmul.py``, ``_lower_split``).

Results equal JAX's in every float dtype on both machines, for plain, transposed, batched and
broadcast operands, partial edge tiles and a shorter last run; the automatic choice splits
where the simulated time says it should and leaves square GEMMs alone; the user's
``split_k`` is checked with a message that names the run counts that work.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import pypto as pto
from pypto.core.errors import TileError
from pypto.graph.tracer import trace
from pypto.reference import compare
from pypto.reference.jax_bridge import sum_lengths

F = (pto.float32, pto.float16, pto.bfloat16)


def arr(shape: tuple[int, ...], d: pto.DType, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, shape).astype(np.float32).astype(d.np)


def headers(f: Any, *args: np.ndarray) -> list[str]:
    return [k.header() for k in f.lower(*args).tile_ir.kernels]


def check(fn: Any, args: list[np.ndarray], machine: str, **jit: Any) -> list[str]:
    """``fn`` on ``machine`` equals JAX's within the tolerance table; the kernel headers."""
    f = pto.jit(fn, machine=machine, **jit)
    (out,) = f.profile(*args).outputs
    ref = np.asarray(pto.to_jax(fn)(*args))
    func, _, _ = trace(fn, [pto.tensor(a) for a in args])
    (k,) = sum_lengths(func)
    assert out.shape == ref.shape
    c = compare("matmul", out, ref, k=k)
    assert c.ok, str(c)
    return headers(f, *args)


def mm(x: Any, y: Any) -> Any:
    return x @ y


def mm_tt(x: Any, y: Any) -> Any:
    return x.T @ y.T


def mm_ta(x: Any, y: Any) -> Any:
    return x.T @ y


CASES: dict[str, tuple[Any, tuple[int, ...], tuple[int, ...], int]] = {
    # name: (fn, a shape, b shape, split_k)
    "plain": (mm, (32, 1024), (1024, 48), 3),
    "shorter_last_run": (mm, (32, 1408), (1408, 32), 4),
    "edges": (mm, (40, 1200), (1200, 24), 2),
    "a_transposed": (mm_ta, (1024, 48), (1024, 32), 4),
    "both_transposed": (mm_tt, (1024, 40), (16, 1024), 2),
    "batched": (mm, (3, 16, 1024), (3, 1024, 32), 2),
    "broadcast_batch": (mm, (2, 3, 16, 512), (2, 1, 512, 32), 2),
    "folded_batch": (mm, (3, 16, 1024), (1024, 32), 4),
}


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
@pytest.mark.parametrize("d", F, ids=lambda d: d.short)
@pytest.mark.parametrize("name", sorted(CASES))
def test_split_products_equal_jax(name: str, d: pto.DType, machine: str) -> None:
    fn, sa, sb, split = CASES[name]
    args = [arr(sa, d, 1), arr(sb, d, 2)]
    heads = check(fn, args, machine, tile=dict(split_k=split))
    assert any(f"split={split}" in h and f"ks={split}" in h for h in heads), heads
    assert any(h.startswith("kernel @split_sum") for h in heads), heads


def test_golden_split_kernels() -> None:
    """Each run of each output tile is a grid point (``%ks`` outermost) whose K loop starts
    at the run and stops at its last block (``%kn``: the last run is shorter); its float32
    accumulator goes to the workspace at the run's rows, and the vector kernel adds the runs
    and rounds once. The vector cores of the matmul read the blocks of operands that come
    from HBM ahead of the cube."""
    a, b = np.zeros((32, 1024), np.float16), np.zeros((1024, 48), np.float16)
    f = pto.jit(mm, machine="tiny", tile=dict(split_k=3))
    text = str(f.lower(a, b).tile_ir)
    expected = [
        ".tensor splitk f32[96,48] tmp",
        "kernel @matmul grid(ks=3, m=1, n=1) cube_tile(m=32, k=128, n=48, m0=32, k0=128, "
        "n0=48, split=3) on cluster",
        ".aic",
        "%kn = smin -%ks*3+8, 3",
        "for %kb in 0..%kn {",
        "%a1: L1 f16[32,128] = tload %x[%m*32 : +32, %ks*384+%kb*128 : +128]",
        "%b1: L1 f16[128,48] = tload %y[%ks*384+%kb*128 : +128, %n*48 : +48]",
        "tstore %splitk[%ks*32+%m*32 : +32, %n*48 : +48], %acc_0_0",
        ".aiv",
        "for %pk in %sub..%kn step 2 {",
        "%pfa: UB f16[32,128] = tload %x[%m*32+%pr : +32, %ks*384+%pk*128 : +128]",
        "%pfb: UB f16[128,48] = tload %y[%ks*384+%pk*128+%pr : +128, %n*48 : +48]",
        "kernel @split_sum grid(r=2) vec_tile(rows=16, cols=48)",
        "%acc: UB f32[16,48] = tload %splitk[%r*16 : +16, 0 : +48]",
        "for %ks in 1..3 {",
        "%x: UB f32[16,48] = tload %splitk[%ks*32+%r*16 : +16, 0 : +48]",
        "%acc: UB f32[16,48] = tadd %acc, %x",
        "%y: UB f16[16,48] = tcvt %acc",
        "tstore %out[%r*16 : +16, 0 : +48], %y",
    ]
    pos = 0
    for line in expected:  # FileCheck-style: in this order
        at = text.find(line, pos)
        assert at >= 0, f"missing after offset {pos}: {line}\n{text}"
        pos = at + len(line)


def test_operands_an_earlier_kernel_wrote_are_not_read_ahead() -> None:
    a, b = np.zeros((32, 1024), np.float16), np.zeros((1024, 48), np.float16)

    def warm(x: Any, y: Any) -> Any:
        return (x * 2) @ y

    text = str(pto.jit(warm, machine="tiny", tile=dict(split_k=3)).lower(a, b).tile_ir)
    assert "%pfb: UB" in text and "%pfa: UB" not in text, text
    off = str(
        pto.jit(mm, machine="tiny", tile=dict(split_k=3, read_ahead=False)).lower(a, b).tile_ir
    )
    assert "%pf" not in off


def cycles(fn: Any, args: list[np.ndarray], **jit: Any) -> float:
    return pto.jit(fn, **jit).profile(*args, numerics=False).cycles


@pytest.mark.parametrize(
    "sa, sb, warm",
    [
        ((128, 65536), (65536, 128), False),
        ((256, 16384), (16384, 256), False),
        ((16384, 256), (16384, 128), True),
    ],
)
def test_the_automatic_choice_splits_long_thin_products(
    sa: tuple[int, ...], sb: tuple[int, ...], warm: bool
) -> None:
    """On ascend910b a product of a few output tiles over a long K splits, and runs faster
    than unsplit; operands from HBM and from an earlier kernel both."""

    def fn(x: Any, y: Any) -> Any:
        return (x * 2).T @ y if warm else x @ y

    args = [np.zeros(sa, np.float16), np.zeros(sb, np.float16)]
    heads = headers(pto.jit(fn), *args)
    assert any("split=" in h for h in heads), heads
    assert cycles(fn, args) < 0.9 * cycles(fn, args, tile=dict(split_k=1))


@pytest.mark.parametrize("shape", [(1024, 8192, 1024), (512, 4096, 512), (64, 512, 64)])
def test_products_that_fill_the_clusters_or_are_short_are_not_split(
    shape: tuple[int, int, int],
) -> None:
    M, K, N = shape
    args = [np.zeros((M, K), np.float16), np.zeros((K, N), np.float16)]
    assert not any("split" in h for h in headers(pto.jit(mm), *args))


def test_split_k_1_keeps_k_on_one_cluster() -> None:
    args = [np.zeros((128, 65536), np.float16), np.zeros((65536, 128), np.float16)]
    heads = headers(pto.jit(mm, tile=dict(split_k=1)), *args)
    assert len(heads) == 1 and "split" not in heads[0]


def test_user_tiles_and_split_together() -> None:
    args = [arr((64, 2048), pto.float16, 3), arr((2048, 64), pto.float16, 4)]
    cube = ([64, 64], [64, 256], [64, 64])
    heads = check(mm, args, "ascend910b", tile=dict(cube=cube, split_k=4))
    assert "cube_tile(m=64, k=256, n=64, m0=64, k0=64, n0=64, split=4)" in heads[0]


def test_an_epilogue_under_the_users_split_is_a_kernel_of_its_own() -> None:
    def fn(x: Any, y: Any, bias: Any) -> Any:
        return pto.nn.gelu(x @ y + bias)

    args = [
        arr((32, 1024), pto.float32, 5),
        arr((1024, 48), pto.float32, 6),
        arr((48,), pto.float32, 7),
    ]
    f = pto.jit(fn, machine="tiny", tile=dict(split_k=2))
    (out,) = f.profile(*args).outputs
    ref = np.asarray(pto.to_jax(fn)(*args))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    names = [re.match(r"kernel @(\S+)", h).group(1) for h in headers(f, *args)]  # type: ignore[union-attr]
    assert names[:2] == ["matmul", "split_sum"] and len(names) == 3, names


def test_a_hint_splits_one_product() -> None:
    def fn(x: Any, y: Any) -> Any:
        with pto.hint(tile=dict(split_k=2)):
            p = x @ y
        return p + x @ y

    args = [arr((32, 1024), pto.float16, 8), arr((1024, 48), pto.float16, 9)]
    heads = headers(pto.jit(fn, machine="tiny"), *args)
    assert sum("split=2" in h for h in heads) == 1, heads


@pytest.mark.parametrize("bad", [0, -2, True, 1.5, "2"])
def test_split_k_must_be_a_positive_integer(bad: Any) -> None:
    args = [np.zeros((32, 1024), np.float16), np.zeros((1024, 48), np.float16)]
    with pytest.raises(TileError, match=r"split_k=.* is not a positive integer") as e:
        pto.jit(mm, tile=dict(split_k=bad)).lower(*args)
    assert "split_k=1" in str(e.value)


def test_a_split_the_k_blocks_do_not_make_names_the_ones_that_do() -> None:
    args = [np.zeros((32, 1024), np.float16), np.zeros((1024, 48), np.float16)]
    cube = ([32, 32], [128, 256], [48, 48])  # 4 K blocks: 1, 2, 3 or 4 runs (3: 2+2, 2 runs)
    f = pto.jit(mm, machine="tiny", tile=dict(cube=cube, split_k=3))
    with pytest.raises(TileError) as e:
        f.lower(*args)
    msg = str(e.value)
    assert "split_k=3" in msg and "4 K blocks of 256" in msg and "split_k in [1, 2, 4]" in msg, msg
    assert "test_split_k.py" in msg


def test_a_split_the_product_cannot_take_is_an_error_not_a_slower_path() -> None:
    a, b = arr((3, 100, 256), pto.float16, 1), arr((3, 256, 16), pto.float16, 2)
    f = pto.jit(lambda x, y: x @ y, machine="tiny", tile=dict(split_k=5))
    with pytest.raises(TileError, match=r"split_k=5 .* 2 K blocks of 128") as e:
        f.lower(a, b)
    assert "split_k in [1, 2]" in str(e.value)
