"""Flags between the pipes of a core (``pypto/block/sync.py``): event ids are reused where that
is safe, so kernels with many sibling loops fit the machine's 8 per pipe pair; compiled kernels
stay within the ids and run without a race on the simulator (which reports any access two
pipes make with no flag ordering them); an accumulator updated in place is ordered against
its store in the previous iteration."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import pypto as pto
from pypto import tile as tl
from pypto.graph.tracer import trace
from pypto.isa import parse
from pypto.npu import check_invariants, machine, simulate
from pypto.reference import compare
from pypto.reference.jax_bridge import sum_lengths

RNG = np.random.default_rng(5)
TINY = machine("tiny")
FLAG = re.compile(r"(?<!X)(?:SET|WAIT)_FLAG (\w+), (\w+), (\d+)")


def ids_used(isa: Any) -> dict[tuple[str, str], set[int]]:
    """The event ids of the ISA's ``SET_FLAG``/``WAIT_FLAG`` per (source, destination) pipe."""
    out: dict[tuple[str, str], set[int]] = {}
    for p, q, ev in FLAG.findall(str(isa)):
        out.setdefault((p, q), set()).add(int(ev))
    return out


def squeezed(n: int) -> Any:
    """``tiny`` with only ``n`` event ids per pipe pair."""
    return TINY.replace(event_ids=n, name=f"tiny_{n}_ids")


def passes(k: int) -> Any:
    """``k`` sibling loops over the columns of a row block, each loading double-buffered
    chunks, inside the grid loop: every loop's buffer ping-pongs across its runs, so each has
    a flag from V to MTE2 set at the kernel's start and drained at its end."""

    @pto.kernel(
        grid=lambda x: (x.shape[0] // 8,),
        out=lambda x: pto.ShapeDtype((x.shape[0], 8 * k), pto.float32),
    )
    def sums(x: tl.Ref, o: tl.Ref) -> None:
        i = tl.program_id(0)
        for p in range(k):
            s = tl.zeros((8, 1))
            for c in tl.range(x.shape[1] // 32):
                xc = tl.load(x, (i * 8, c * 32), (8, 32)).astype(pto.float32)
                s[...] = s + (xc * float(p + 1)).sum(axis=1)
            tl.store(o, (i * 8, p * 8), s + tl.zeros((8, 8)))

    return sums


def passes_ref(x: np.ndarray, k: int) -> np.ndarray:
    s = x.astype(np.float32).sum(axis=1, keepdims=True)
    return np.concatenate([np.repeat(s * (p + 1), 8, axis=1) for p in range(k)], axis=1)


def running(k: int) -> Any:
    """``k`` sibling loops, each updating an accumulator in place and storing it every
    iteration: the accumulator lives outside the loop, so each loop has its own flag from
    MTE3 to V, set up before it and drained after it (the next loop's set-up may run ahead of
    that drain on MTE3)."""

    @pto.kernel(
        grid=lambda x: (x.shape[0] // 8,),
        out=lambda x: pto.ShapeDtype((x.shape[0], k * x.shape[1]), pto.float32),
    )
    def cumsums(x: tl.Ref, o: tl.Ref) -> None:
        i = tl.program_id(0)
        n = x.shape[1]
        for p in range(k):
            acc = tl.zeros((8, 32))
            for c in tl.range(n // 32):
                xc = tl.load(x, (i * 8, c * 32), (8, 32)).astype(pto.float32)
                acc[...] = acc + xc * float(p + 1)
                tl.store(o, (i * 8, p * n + c * 32), acc)

    return cumsums


def running_ref(x: np.ndarray, k: int) -> np.ndarray:
    r, n = x.shape
    cs = x.astype(np.float32).reshape(r, n // 32, 32).cumsum(axis=1).reshape(r, n)
    return np.concatenate([cs * (p + 1) for p in range(k)], axis=1)


def test_sibling_loops_with_double_buffers_fit_the_event_ids() -> None:
    # 8 sibling loops in the grid loop: one id per nesting depth (3) plus one per carried flag
    # (8) was 11 ids from V to MTE2, more than tiny has; the 8 flags live all kernel long
    # need 8
    x = RNG.standard_normal((32, 128)).astype(np.float16)
    f = pto.jit(passes(8), machine="tiny")
    ids = ids_used(f.lower(x).isa)
    assert ids[("V", "MTE2")] == set(range(8))
    assert all(max(s) < TINY.event_ids for s in ids.values())
    prof = f.profile(x)  # races raise here
    check_invariants(prof)
    np.testing.assert_allclose(np.asarray(prof.outputs[0]), passes_ref(x, 8), rtol=1e-5)


def test_more_flags_live_at_once_than_ids_is_still_an_error() -> None:
    x = np.zeros((32, 128), np.float16)
    with pytest.raises(pto.TileError, match=r"needs 9 event ids between V and MTE2") as e:
        pto.jit(passes(9), machine="tiny").lower(x)
    assert "the machine has event_ids=8" in str(e.value)
    assert "machine.replace(event_ids=9) fits it" in str(e.value)


@pytest.mark.parametrize("k", [2, 6])
def test_sibling_loops_share_the_ids_of_their_carried_flags(k: int) -> None:
    # k = 6 took 10 ids from MTE3 to V (3 nesting depths, the grid loop's carried flag and
    # the 6 loops'), more than tiny has; the loops run one after the other, so their flags
    # share one id. k = 2 raced before the accumulator's in-place update was ordered after
    # the previous iteration's store.
    x = RNG.standard_normal((32, 128)).astype(np.float16)
    f = pto.jit(running(k), machine="tiny")
    isa = f.lower(x).isa
    ids = ids_used(isa)
    assert all(max(s) < TINY.event_ids for s in ids.values())
    if k == 6:
        assert len(ids[("MTE3", "V")]) <= 2  # the grid loop's carried flag and the loops' one
    prof = f.profile(x)
    check_invariants(prof)
    np.testing.assert_allclose(np.asarray(prof.outputs[0]), running_ref(x, k), rtol=1e-5)
    # the same text runs the same when parsed back
    ran = simulate(parse(str(isa)), "tiny", {"x": x})
    np.testing.assert_array_equal(ran.outputs["out"], np.asarray(prof.outputs[0]))


def test_sharing_an_id_between_overlapping_flags_would_race() -> None:
    # what the reuse must never do: two of the flags live all kernel long on one id
    x = RNG.standard_normal((32, 128)).astype(np.float16)
    isa = str(pto.jit(passes(3), machine=squeezed(3)).lower(x).isa)
    assert ids_used(isa)[("V", "MTE2")] == {0, 1, 2}
    simulate(parse(isa), "tiny", {"x": x})
    bad = isa.replace("V, MTE2, 1", "V, MTE2, 0")
    with pytest.raises(pto.SimulationError, match="data race"):
        simulate(parse(bad), "tiny", {"x": x})


def sdpa(q: Any, k: Any, v: Any) -> Any:
    return pto.scaled_dot_product_attention(q, k, v, causal=True)


def gemm_relu(a: Any, b: Any) -> Any:
    return pto.relu(a @ b)


def softmax(x: Any) -> Any:
    return pto.softmax(x, axis=-1)


QKV = tuple(RNG.standard_normal((1, 2, 256, 32)).astype(np.float16) for _ in range(3))
AB = (
    RNG.standard_normal((256, 512)).astype(np.float16),
    RNG.standard_normal((512, 256)).astype(np.float16),
)
X = (RNG.standard_normal((64, 4096)).astype(np.float16),)
KERNELS = {
    # name: (function, arguments, tiles, fewest event ids per pipe pair it compiles with)
    "attention": (sdpa, QKV, dict(attn=(128, 128, 1)), 3),
    # two query tiles per grid point, the loops' transfers double-buffered
    "attention_g2": (sdpa, QKV, dict(attn=(64, 32, 2)), 4),
    # the automatic tiles: pairs of 256-key steps, each two cube products (L1 → L0 moves)
    "attention_wide_pairs": (sdpa, QKV, None, 3),
    "gemm": (gemm_relu, AB, None, 1),
    "softmax": (softmax, X, None, 1),
}


def jit(fn: Any, m: Any, tile: Any) -> Any:
    return pto.jit(fn, machine=m, tile=tile) if tile else pto.jit(fn, machine=m)


def run(fn: Any, args: tuple[np.ndarray, ...], tile: Any, m: Any) -> Any:
    """Compile ``fn`` for ``m``, check its event ids, run it (races raise) and compare it
    with JAX; the lowered function."""
    f = jit(fn, m, tile)
    low = f.lower(*args)
    for pair, used in ids_used(low.isa).items():
        assert max(used) < m.event_ids, pair
    prof = f.profile(*args)
    check_invariants(prof)
    (k,) = sum_lengths(trace(fn, [pto.tensor(a) for a in args])[0])
    c = compare(fn.__name__, prof.outputs[0], np.asarray(pto.to_jax(fn)(*args)), k=k)
    assert c.ok, str(c)
    return low


@pytest.mark.parametrize("name", list(KERNELS))
def test_compiled_kernels_stay_within_the_event_ids_and_race_free(name: str) -> None:
    fn, args, tile, _ = KERNELS[name]
    low = run(fn, args, tile, TINY)
    if name == "attention_g2":
        (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
        assert att.header().endswith("attn_tile(bq=64, bk=32, g=2) on cluster")
        assert "x2 by" in str(low.block_ir)  # double buffers
    if name == "attention_wide_pairs":
        (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
        assert att.header().endswith("attn_tile(bq=128, bk=256, kc=128, g=2) on cluster")


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernels_on_fewer_event_ids_reuse_them_safely(name: str) -> None:
    # with fewer ids than the fixed layout takes, every pipe pair's flags are given the
    # fewest ids: the simulator checks that no wait is released by another flag's set
    fn, args, tile, fewest = KERNELS[name]
    run(fn, args, tile, squeezed(fewest))
    if fewest > 1:
        with pytest.raises(pto.TileError, match=f"needs {fewest} event ids"):
            jit(fn, squeezed(fewest - 1), tile).lower(*args)


def test_a_software_pipelines_loops_hand_their_flags_on() -> None:
    # attention's cube core: fill, steady and drain loops over the K/V steps of a point, on
    # the two L0C tiles. Each carried flag from the fixpipe to the cube has a set/wait pair
    # per tile (a product waits for its own tile's last store, not the other's), and the
    # loops hand it on: the steady loop's first products take the fill loop's last sets, so
    # nothing between the loops waits for the fixpipe to finish all of the loop before.
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 512, 128)).astype(np.float16) for _ in range(3))
    f = pto.jit(sdpa, machine="tiny", tile=dict(attn=(128, 256, 2)))
    isa = str(f.lower(q, k, v).isa)
    aic = isa.split(".core aic")[1].split(".core aiv")[0].splitlines()
    loops = [i for i, ln in enumerate(aic) if ln.startswith("    LOOP %j")]
    ends = [i for i, ln in enumerate(aic) if ln == "    ENDLOOP"]
    assert len(loops) == 3 and len(ends) == 3
    fill, steady, drain = (aic[a : b + 1] for a, b in zip(loops, ends, strict=True))
    # the carried flag: what the fill loop's first product waits for
    carried = next(ln for ln in fill if "WAIT_FLAG FIX, M," in ln).rsplit(", ", 1)[1]
    # one id for the three loops' carried flag; a set per L0C tile in each loop
    for body in (fill, steady, drain):
        sets = [ln for ln in body if ln.strip().startswith("SET_FLAG FIX, M,")]
        assert len([ln for ln in sets if ln.strip().endswith(f", {carried}")]) == 2
    between = aic[ends[0] + 1 : loops[1]] + aic[ends[1] + 1 : loops[2]]
    assert not [ln for ln in between if "WAIT_FLAG FIX, M" in ln]
    prof = f.profile(q, k, v)  # races raise here
    check_invariants(prof)
    want = np.asarray(pto.to_jax(sdpa)(q, k, v))
    (n,) = sum_lengths(trace(sdpa, [pto.tensor(a) for a in (q, k, v)])[0])
    c = compare("attention", prof.outputs[0], want, k=n)
    assert c.ok, str(c)
