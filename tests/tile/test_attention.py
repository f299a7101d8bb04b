"""Attention on the NPU path as flash attention: one cluster kernel, the score matrix never in
GM; causal, masked, rectangular and batched cases against JAX within the tolerance table; the
golden Tile IR; jit(grad(causal attention)) against jax.grad."""

from __future__ import annotations

import re
import textwrap
from dataclasses import replace
from typing import Any

import jax
import numpy as np
import pytest

import pypto as pto
from pypto.graph.tracer import trace
from pypto.reference import compare
from pypto.reference.jax_bridge import sum_lengths
from pypto.tile.ir import For, TileIRError, TStore

MACHINES = ("tiny", "ascend910b")
F = (pto.float32, pto.float16, pto.bfloat16)


def arr(shape: tuple[int, ...], d: pto.DType, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, shape).astype(np.float32).astype(d.np)


def check(fn: Any, *args: np.ndarray, machine: str = "tiny", tile: Any = None) -> Any:
    tensors = [pto.tensor(a) for a in args]
    f = pto.jit(fn, machine=machine, tile=tile)
    out = f(*tensors)
    ref = np.asarray(pto.to_jax(fn)(*args))
    func, _, _ = trace(fn, tensors)
    (k,) = sum_lengths(func)
    assert out.shape == ref.shape
    c = compare("attention", out, ref, k=k)
    assert c.ok, str(c)
    return f.lower(*tensors)


def steady(kernel: Any) -> str:
    """The text of the cube core's steady loop: one K/V step's S products and the P V
    products of the step LAG behind (the fill and drain loops repeat one kind each)."""
    aic = str(kernel).split(".aiv")[0].splitlines()
    (i,) = [i for i, ln in enumerate(aic) if re.fullmatch(r"    for %j in [1-9]\d*\.\..*", ln)]
    end = aic.index("    }", i)
    return "\n".join(aic[i : end + 1])


def sdpa(causal: bool) -> Any:
    def fn(q: Any, k: Any, v: Any) -> Any:
        return pto.scaled_dot_product_attention(q, k, v, causal=causal)

    return fn


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_sdpa(d: pto.DType, causal: bool, machine: str) -> None:
    q, k, v = (arr((2, 2, 64, 32), d, s) for s in range(3))
    low = check(sdpa(causal), q, k, v, machine=machine)
    att = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    assert len(att) == 1 and att[0].dist == "cluster"
    # the scores stay on chip, and K is transposed on its way into L0B (TTRANS, no kᵀ in
    # GM): the rings' slots are the only workspaces, but for the partial results of a grid
    # whose keys split over the clusters (8 points on ascend910b's 24: test_decoding below)
    splits = dict(att[0].tile).get("splits", 1)
    assert (splits > 1) == (machine == "ascend910b" and not causal)
    rings = {r.tensor for r in att[0].rings}
    others = [b for b in low.tile_ir.buffers if b.role == "tmp" and b.name not in rings]
    assert len(others) == (3 if splits > 1 else 0)
    assert len(low.tile_ir.kernels) == (2 if splits > 1 else 1)


def test_rectangular_and_masked() -> None:
    d = pto.float16
    q, k, v = arr((2, 128, 32), d), arr((2, 96, 32), d, 1), arr((2, 96, 48), d, 2)
    mask = np.random.default_rng(3).random((128, 96)) > 0.3
    check(sdpa(False), q, k, v)
    check(lambda q, k, v, m: pto.scaled_dot_product_attention(q, k, v, m), q, k, v, mask)


def biased(q: Any, k: Any, v: Any, b: Any, m: Any = None) -> Any:
    s = (q @ k.swapaxes(-1, -2)) * 0.125 + b
    if m is not None:
        s = pto.where(m, s, -np.inf)
    return pto.softmax(s, -1) @ v


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_a_bias_is_added_in_the_flash_kernel(d: pto.DType, machine: str) -> None:
    # the vector cores load each K/V step's tile of the bias and add it to the scaled scores
    # before the masks; the bias broadcasts over the batch, and splits with the keys
    q, k, v = (arr((2, 2, 128, 32), d, s) for s in range(3))
    bias = arr((2, 1, 128, 128), d, 7)  # [heads, 1, Lq, Lk] over [batch, heads, ..]
    mask = np.random.default_rng(3).random((128, 128)) > 0.2
    att = only_attention(check(biased, q, k, v, bias, machine=machine))
    assert "tadd" in str(att).split(".aiv")[1]
    only_attention(check(biased, q, k, v, bias, mask, machine=machine))
    # decoding: one query row per head, its keys split over the clusters on the chip
    q1, k1 = arr((2, 2, 1, 32), d), arr((2, 2, 512, 32), d, 1)
    att = only_attention(check(biased, q1, k1, k1, arr((2, 1, 1, 512), d, 2), machine=machine))
    assert (dict(att.tile).get("splits", 1) > 1) == (machine == "ascend910b")


@pytest.mark.parametrize("attn", [(32, 64, 2), (64, 32, 1), (32, 128, 1)])
def test_a_bias_under_tiles_set_by_hand(attn: tuple[int, int, int]) -> None:
    # pairs of query tiles (each adds its own rows of the bias), several K/V steps per query
    # tile, and several query tiles per K/V step
    d = pto.float16
    q, k, v = (arr((2, 2, 128, 32), d, s) for s in range(3))
    att = only_attention(check(biased, q, k, v, arr((2, 2, 128, 128), d, 7), tile=dict(attn=attn)))
    t = dict(att.tile)
    assert (t["bq"], t["bk"], t.get("g", 1)) == attn


@pytest.mark.parametrize("machine", MACHINES)
def test_a_shared_bias_reads_once_per_tile_and_rides_in_the_f32_copys_buffer(machine: str) -> None:
    # a bias shared by the batch rows puts them innermost in the grid (the clusters reading
    # one bias tile run at once); where it fits, the bias tile is loaded into the buffer of
    # P V's f32 copy (read before the softmax, the copy made after it): no UB of its own
    d = pto.float16
    q, k, v = (arr((2, 2, 128, 32), d, s) for s in range(3))
    bias = arr((1, 2, 128, 128), d, 7)  # one per head, shared by the batch
    att = only_attention(check(biased, q, k, v, bias, machine=machine, tile=dict(attn=(64, 32, 1))))
    assert att.header().startswith("kernel @attention grid(b1=2, b0=2, q=2")  # (, kv=2: split)
    aiv = str(att).split(".aiv")[1]
    assert re.search(r"%otf: UB f16\[32,32\] = tload %\w+\[%b1\*128", aiv)
    assert "%otf: UB f32[32,32] = tcvt %ot" in aiv and "%bias" not in aiv
    # 128 keys a step: the f16 bias tile is larger than the f32 copy and has its own buffer
    att = only_attention(
        check(biased, q, k, v, bias, machine=machine, tile=dict(attn=(32, 128, 1)))
    )
    assert "%bias: UB f16[16,128] = tload" in str(att)


@pytest.mark.parametrize("machine", MACHINES)
def test_dot_product_attention_with_a_bias_is_one_kernel(machine: str) -> None:
    # jax.nn's layout, grouped heads, a causal mask and a per-head bias: one flash kernel,
    # the bias read in place (its head split is a view)
    d = pto.float16
    q, kv = arr((2, 64, 4, 32), d, 1), arr((2, 64, 2, 32), d, 2)
    bias = arr((2, 4, 64, 64), d, 3)

    def fn(q: Any, k: Any, v: Any, b: Any) -> Any:
        return pto.dot_product_attention(q, k, v, bias=b, is_causal=True)

    only_attention(check(fn, q, kv, kv, bias, machine=machine))


def test_a_bias_the_kernel_does_not_take_runs_as_kernels_of_their_own() -> None:
    # a bias broadcast along the keys (not loaded by tiles), and a scale after the bias
    # (which would scale the bias too): the scores go through GM, with the same results
    d = pto.float16
    q, k, v = (arr((2, 64, 32), d, s) for s in range(3))
    low = check(biased, q, k, v, arr((2, 64, 1), d, 3))
    assert all(k.kind != "attention" for k in low.tile_ir.kernels)

    def late_scale(q: Any, k: Any, v: Any, b: Any) -> Any:
        return pto.softmax((q @ k.swapaxes(-1, -2) + b) * 0.125, -1) @ v

    low = check(late_scale, q, k, v, arr((2, 64, 64), d, 3))
    assert all(k.kind != "attention" for k in low.tile_ir.kernels)


def test_queries_that_are_a_slice_of_the_keys() -> None:
    """q = x[:, :1] with k = v = x: the slice's copy kernel gives x a layout of whole rows,
    which the attention kernel asserted against; it now reads a copy in its own layout."""
    x = arr((2, 128, 64), pto.float16)
    for machine in MACHINES:
        check(lambda x: pto.scaled_dot_product_attention(x[:, :1], x, x), x, machine=machine)
        check(lambda x: pto.scaled_dot_product_attention(x[:, 5:37], x, x), x, machine=machine)


def test_long_causal_several_kv_tiles() -> None:
    q = arr((1, 256, 64), pto.float16)
    low = check(lambda q: pto.scaled_dot_product_attention(q, q, q, causal=True), q)
    (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    # several query tiles, two per grid point sharing each K/V tile
    assert dict(att.grid)["q"] * dict(att.tile).get("g", 1) > 1


@pytest.mark.parametrize("machine", MACHINES)
def test_one_query_row_as_in_decoding(machine: str) -> None:
    # both vector cores compute the single row: each hands its P over in a row of its own
    # and only the first stores the output (two stores of one row would race)
    d = pto.float16
    q, k, v = arr((4, 1, 64), d), arr((4, 96, 64), d, 1), arr((4, 96, 64), d, 2)
    low = check(sdpa(False), q, k, v, machine=machine)
    # (on the chip the 4 points split their keys over the clusters and a vector kernel
    # combines the runs' partial results: test_decoding_splits_the_keys_over_the_clusters)
    combine = ["vector"] if machine == "ascend910b" else []
    assert [k.kind for k in low.tile_ir.kernels] == ["attention", *combine]
    check(sdpa(True), q, q, q, machine=machine)


def test_matmul_softmax_matmul_is_attention() -> None:
    q, k, v = (arr((2, 64, 32), pto.float16, s) for s in range(3))

    def fn(q: Any, k: Any, v: Any) -> Any:
        return pto.softmax((q @ k.transpose((0, 2, 1))) * 0.125, -1) @ v

    low = check(fn, q, k, v)
    assert [k.kind for k in low.tile_ir.kernels][-1] == "attention"


def heads(h: int, causal: bool = True) -> Any:
    """Attention over ``[L, H*D]`` projections: head split, attention, head merge."""

    def fn(q: Any, k: Any, v: Any) -> Any:
        lq, lk = q.shape[0], k.shape[0]

        def split(t: Any, n: int) -> Any:
            return t.reshape(n, h, t.shape[1] // h).transpose(1, 0, 2)

        a = pto.scaled_dot_product_attention(
            split(q, lq), split(k, lk), split(v, lk), causal=causal
        )
        return a.transpose(1, 0, 2).reshape(lq, v.shape[1])

    return fn


def only_attention(low: Any) -> Any:
    """The attention kernel of a lowering with no other kernel and no workspace but its
    rings; where a grid too small for the clusters splits its keys, also the kernel that
    combines the runs and their partial results (test_decoding_splits_the_keys_...)."""
    att, *rest = low.tile_ir.kernels
    assert att.kind == "attention"
    splits = dict(att.tile).get("splits", 1)
    assert [k.name for k in rest] == (["attention_combine"] if splits > 1 else [])
    rings = {r.tensor for r in att.rings}
    others = [b.name for b in low.tile_ir.buffers if b.role == "tmp" and b.name not in rings]
    assert len(others) == (3 if splits > 1 else 0)
    return att


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_head_split_and_merge_are_windows_of_the_attention_kernel(
    d: pto.DType, causal: bool, machine: str
) -> None:
    q, k, v = (arr((64, 4 * 32), d, s) for s in range(3))
    low = check(heads(4, causal), q, k, v, machine=machine)
    only_attention(low)
    # each head's tiles are columns h*32.. of the [L, H*D] buffers, read and written in place
    # (written by the combine of the runs where the keys split)
    text = "\n".join(str(k) for k in low.tile_ir.kernels)
    assert "%b0*32 : +32]" in text and "tstore %out[" in text


def test_head_windows_in_four_dims_and_other_layouts() -> None:
    d = pto.float16
    # [B, L, H, D] -> [B, H, L, D]: rows step by batch, columns by head
    x = [arr((2, 64, 2, 16), d, s) for s in range(3)]

    def bhld(q: Any, k: Any, v: Any) -> Any:
        t = [a.transpose(0, 2, 1, 3) for a in (q, k, v)]
        return pto.scaled_dot_product_attention(*t, causal=True).transpose(0, 2, 1, 3)

    only_attention(check(bhld, *x))
    # K and V with fewer keys than queries, a different head dim for V
    q, k, v = arr((64, 2 * 16), d), arr((32, 2 * 16), d, 1), arr((32, 2 * 24), d, 2)
    only_attention(check(heads(2, causal=False), q, k, v))


def test_a_head_split_read_elsewhere_stays_a_copy() -> None:
    q = arr((64, 2 * 16), pto.float16)

    def fn(q: Any) -> Any:
        t = q.reshape(64, 2, 16).transpose(1, 0, 2)
        return pto.scaled_dot_product_attention(t, t, t, causal=True), t * 2.0

    tensors = [pto.tensor(q)]
    out = pto.jit(fn, machine="tiny")(*tensors)
    ref = pto.to_jax(fn)(q)
    for o, r in zip(out, ref, strict=True):
        np.testing.assert_allclose(np.asarray(o, np.float32), np.asarray(r, np.float32), atol=2e-2)
    kinds = [k.kind for k in pto.jit(fn, machine="tiny").lower(*tensors).tile_ir.kernels]
    assert "attention" in kinds


GOLDEN = """\
kernel @attention grid(q=1) cost(q) attn_tile(bq=32, bk=32) on cluster {
  ring %ws_s aic->aiv x2 by %ss
  ring %ws_p aiv->aic x4 by %sp
  ring %ws_o aic->aiv x2 by %so
  .aic
    pre {
      %cs = smov 0
      %cp = smov 0
    }
    %q0: L0A f16[32,16] = tload %q[%q*32 : +32, 0 : +16]
    %jf = smin %q+1, 4
    %jd = smax %q+1, 4
    for %j in 0..%jf {
      %ss = smod %cs, 2
      %k1: L1 f16[32,16] = tload %q[%j*32 : +32, 0 : +16]
      %k0: L0B f16[16,32] = ttrans %k1
      %s: L0C f32[32,32] = tmatmul %q0, %k0
      tstore %ws_s[%blk*64+%ss*32 : +32, 0 : +32], %s, scale 0.25
      %cs = sadd %cs, 1
    }
    for %j in 4..%q+1 {
      %ss = smod %cs, 2
      %sp = smod %cp, 4
      %so = smod %cp, 2
      %k1: L1 f16[32,16] = tload %q[%j*32 : +32, 0 : +16]
      %k0: L0B f16[16,32] = ttrans %k1
      %v0: L0B f16[32,16] = tload %q[%j*32-128 : +32, 0 : +16]
      %s: L0C f32[32,32] = tmatmul %q0, %k0
      tstore %ws_s[%blk*64+%ss*32 : +32, 0 : +32], %s, scale 0.25
      %p0: L0A f16[32,32] = tload %ws_p[%blk*128+%sp*32 : +32, 0 : +32]
      %o: L0C f32[32,16] = tmatmul %p0, %v0
      tstore %ws_o[%blk*64+%so*32 : +32, 0 : +16], %o
      %cs = sadd %cs, 1
      %cp = sadd %cp, 1
    }
    for %j in %jd..%q+5 {
      %sp = smod %cp, 4
      %so = smod %cp, 2
      %v0: L0B f16[32,16] = tload %q[%j*32-128 : +32, 0 : +16]
      %p0: L0A f16[32,32] = tload %ws_p[%blk*128+%sp*32 : +32, 0 : +32]
      %o: L0C f32[32,16] = tmatmul %p0, %v0
      tstore %ws_o[%blk*64+%so*32 : +32, 0 : +16], %o
      %cp = sadd %cp, 1
    }
  .aiv
    pre {
      %cs = smov 0
      %cp = smov 0
      %ninf: UB f16[1,32] = texpands -inf
    }
    %tril: UB bool[16,32] = tload %c[%sub*16 : +16, 0 : +32]
    %m: UB f32[16,1] = texpands -60000.0
    %l: UB f32[16,1] = texpands 0.0
    %alpha: UB f32[16,1] = texpands 1.0
    %alpha1: UB f32[16,1] = texpands 1.0
    %alpha2: UB f32[16,1] = texpands 1.0
    %alpha3: UB f32[16,1] = texpands 1.0
    %acc: UB f32[16,16] = texpands 0.0
    for %j in 0..%q+5 {
      %hs = smin %q-%j+1, 1
      %hs = smax %hs, 0
      %hp = smax %j-3, 0
      %hp = smin %hp, 1
      %alpha4: UB f32[16,1] = tmov %alpha3
      %alpha3: UB f32[16,1] = tmov %alpha2
      %alpha2: UB f32[16,1] = tmov %alpha1
      %alpha1: UB f32[16,1] = tmov %alpha
      for %ihs in 0..%hs {
        %ss = smod %cs, 2
        %sp = smod %cs, 4
        %x: UB f16[16,32] = tload %ws_s[%blk*64+%ss*32+%sub*16 : +16, 0 : +32]
        %dg = smin %j-%q+1, 1
        %dg = smax %dg, 0
        for %idg in 0..%dg {
          %x: UB f16[16,32] = tsel %tril, %x, %ninf
        }
        %mj: UB f16[16,1] = trowmax %x
        %mjf: UB f32[16,1] = tcvt %mj
        %mn: UB f32[16,1] = tmax %m, %mjf
        %alpha: UB f32[16,1] = tsub %m, %mn
        %alpha: UB f32[16,1] = texp %alpha
        %m: UB f32[16,1] = tmov %mn
        %mnx: UB f16[16,1] = tcvt %mn
        %x: UB f16[16,32] = tsub %x, %mnx
        %x: UB f16[16,32] = texp %x
        %rs: UB f16[16,1] = trowsum %x
        %rsf: UB f32[16,1] = tcvt %rs
        %l: UB f32[16,1] = tmul %l, %alpha
        %l: UB f32[16,1] = tadd %l, %rsf
        tstore %ws_p[%blk*128+%sp*32+%sub*16 : +16, 0 : +32], %x
        %cs = sadd %cs, 1
      }
      for %ihp in 0..%hp {
        %so = smod %cp, 2
        %ot: UB f16[16,16] = tload %ws_o[%blk*64+%so*32+%sub*16 : +16, 0 : +16]
        %otf: UB f32[16,16] = tcvt %ot
        %acc: UB f32[16,16] = tmul %acc, %alpha4
        %acc: UB f32[16,16] = tadd %acc, %otf
        %cp = sadd %cp, 1
      }
      %pq = smin -%j+2, 1
      %pq = smax %pq, 0
      %pq = smin %pq, %j
      %pq = smin %pq, %nx
      for %ipq in 0..%pq {
        for %pr in 0..16 step 16 {
          %pfq: UB f16[16,16] = tload %q[%nx_q*32+%sub*16+%pr : +16, 0 : +16]
        }
      }
    }
    %acc: UB f32[16,16] = tdiv %acc, %l
    %ot: UB f16[16,16] = tcvt %acc
    tstore %out[%q*32+%sub*16 : +16, 0 : +16], %ot
}"""


def test_golden_attention() -> None:
    q = arr((32, 16), pto.float16)
    f = pto.jit(lambda q: pto.scaled_dot_product_attention(q, q, q, causal=True), machine="tiny")
    k = f.lower(q).tile_ir.kernels[-1]
    text = "\n".join(ln.split("  #")[0] for ln in str(k).splitlines())
    assert text == textwrap.dedent(GOLDEN)


def test_grad_of_causal_attention_on_npu_equals_jax() -> None:
    def loss(q: Any, k: Any, v: Any) -> Any:
        return (pto.scaled_dot_product_attention(q, k, v, causal=True) ** 2).sum()

    args = tuple(arr((2, 32, 16), pto.float32, s) for s in range(3))
    got = pto.jit(pto.grad(loss, argnums=(0, 1, 2)), machine="tiny")(*args)
    want = jax.grad(pto.to_jax(loss), argnums=(0, 1, 2))(*args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_pairs_of_query_tiles_share_each_kv_tile(d: pto.DType) -> None:
    # one cluster, no mask: two query tiles per point halve the K/V loads
    q, k, v = arr((2, 256, 32), d), arr((2, 192, 32), d, 1), arr((2, 192, 48), d, 2)
    low = check(sdpa(False), q, k, v)
    (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    assert dict(att.tile).get("g") == 2
    body = steady(att)
    assert body.count("ttrans") == 1 and body.count("tmatmul") == 4  # one K load, two tiles


@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_causal_pairs_mask_the_step_past_the_first_tiles_diagonal(d: pto.DType) -> None:
    # the first tile of a pair runs its partner's last K/V steps with every score masked,
    # leaving its softmax and output unchanged
    q, k, v = (arr((1, 512, 32), d, s) for s in range(3))
    low = check(sdpa(True), q, k, v, tile=dict(attn=(64, 64, 2)))
    (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    assert dict(att.tile).get("g") == 2 and dict(att.grid)["q"] > 1
    assert "for %idz in 0..%dz" in str(att)


def test_pairing_is_chosen_by_the_busiest_cluster() -> None:
    # 6 heads x 8 causal query tiles on 24 clusters: single tiles balance exactly (9 steps
    # each), pairs could not (a pair of the last tiles is 16 steps)
    q = np.zeros((2, 3, 1024, 64), np.float16)
    low = pto.jit(sdpa(True), machine="ascend910b").lower(q, q, q)
    (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    assert "g" not in dict(att.tile)
    # (the benchmark's size: test_the_benchmarks_causal_attention_takes_pairs_of_wide_steps)


def test_attention_tiles_can_be_set_and_change_the_kernel() -> None:
    q, k, v = (arr((2, 256, 32), pto.float16, s) for s in range(3))
    fn = sdpa(True)
    for attn, header in [
        ((64, 32, 2), "attn_tile(bq=64, bk=32, g=2)"),
        ((128, 64), "attn_tile(bq=128, bk=64)"),
    ]:
        f = pto.jit(fn, machine="tiny", tile=dict(attn=attn))
        (att,) = [k for k in f.lower(q, k, v).tile_ir.kernels if k.kind == "attention"]
        assert att.header().endswith(header + " on cluster"), att.header()
        c = compare("attention", np.asarray(f(q, k, v)), np.asarray(pto.to_jax(fn)(q, k, v)), k=256)
        assert c.ok, str(c)
    # tiles larger than the sequence shrink to it
    short = arr((2, 64, 32), pto.float16)
    f = pto.jit(fn, machine="tiny", tile=dict(attn=(512, 512)))
    (att,) = [k for k in f.lower(short, short, short).tile_ir.kernels if k.kind == "attention"]
    assert "attn_tile(bq=64, bk=64)" in att.header()


@pytest.mark.parametrize(
    ("attn", "message"),
    [
        ((96, 32), r"bq=96 does not divide the 256 queries"),
        ((64, 48), r"bk=48 does not divide the 256 keys"),
        ((64, 32, 3), r"must be \(bq, bk\), \(bq, bk, g\) or \(bq, bk, g, s\)"),
        ((256, 256), r"L0A needs 147456 bytes; tiny has 65536"),
        ((256, 128, 2), r"g=2 needs an even number of query tiles"),
        ((32, 128, 2), r"g=2 under a causal mask needs bk <= bq or bk = 2 bq"),
    ],
)
def test_bad_attention_tiles_say_why_and_suggest_tiles_that_fit(
    attn: tuple[int, ...], message: str
) -> None:
    q = arr((2, 256, 32), pto.float16)
    with pytest.raises(pto.TileError, match=message) as info:
        pto.jit(sdpa(True), machine="tiny", tile=dict(attn=attn)).lower(q, q, q)
    text = str(info.value)
    assert "test_attention.py" in text
    if "must be" not in message:
        assert "hint: tiles that fit: tile=dict(attn=(128, 256, 2))" in text


def test_bad_splits_say_why() -> None:
    q = arr((1, 2, 256, 32), pto.float16)
    for fn, attn, message in [
        (sdpa(True), (64, 64, 1, 2), "a causal mask or a mask operand keeps one run per point"),
        (sdpa(False), (64, 64, 1, 3), "s=3 does not divide the 4 K/V steps of 64 keys"),
    ]:
        with pytest.raises(pto.TileError, match=message) as info:
            pto.jit(fn, machine="tiny", tile=dict(attn=attn)).lower(q, q, q)
        assert "test_attention.py" in str(info.value)
        assert "hint: leave s out" in str(info.value)
    # a split the user asks for holds on any machine (tiny has one cluster)
    f = pto.jit(sdpa(False), machine="tiny", tile=dict(attn=(64, 64, 1, 2)))
    att, comb = f.lower(q, q, q).tile_ir.kernels
    assert "kv=2" in att.header() and comb.name == "attention_combine"
    c = compare(
        "attention", np.asarray(f(q, q, q)), np.asarray(pto.to_jax(sdpa(False))(q, q, q)), k=256
    )
    assert c.ok, str(c)


def test_a_hint_sets_the_attention_tiles_of_its_kernel() -> None:
    q = arr((2, 256, 32), pto.float16)

    def f(q: Any) -> Any:
        with pto.hint(tile=dict(attn=(64, 64, 2))):
            return pto.scaled_dot_product_attention(q, q, q, causal=True)

    (att,) = [k for k in pto.jit(f, machine="tiny").lower(q).tile_ir.kernels]
    assert "attn_tile(bq=64, bk=64, g=2)" in att.header()


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
@pytest.mark.parametrize(
    ("shape", "attn"),
    [((1, 2, 512, 128), (64, 256)), ((2, 384, 64), (64, 192))],
    ids=["4-tiles-a-step", "3-tiles-a-step"],
)
def test_causal_steps_wider_than_the_query_tile(
    shape: tuple[int, ...], attn: tuple[int, int], d: pto.DType, machine: str
) -> None:
    # bk > bq under a causal mask: the diagonal falls inside a K/V step, at query tile
    # %u = q mod (bk/bq) of it, and every u occurs (4 and 3 query tiles per step); the
    # step's keys past the diagonal are masked
    q, k, v = (arr(shape, d, s) for s in range(3))
    low = check(sdpa(True), q, k, v, machine=machine, tile=dict(attn=attn))
    (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    text = str(att)
    assert "%nq = sdiv" in text and "%u = smod" in text
    kc = dict(att.tile).get("kc", attn[1])
    if shape[-1] == 128:  # L0 holds a step of 256 keys only in products of 128 (f32: 64)
        assert kc == (64 if d is pto.float32 else 128)
    body = steady(att)
    assert body.count("textract_t") == attn[1] // kc if kc < attn[1] else "ttrans" in body
    assert body.count("tmatmul_acc") == attn[1] // kc - 1


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
@pytest.mark.parametrize(
    ("shape", "attn"), [((1, 2, 512, 128), (64, 128, 2)), ((2, 512, 64), (32, 64, 2))]
)
def test_causal_pairs_with_steps_of_both_tiles(
    shape: tuple[int, ...], attn: tuple[int, int, int], d: pto.DType, machine: str
) -> None:
    # two query tiles per point and K/V steps as wide as both (bk = 2 bq): both tiles reach
    # their diagonal in the point's last step, tile t at rows t*bq of a [bk, bk] mask
    q, k, v = (arr(shape, d, s) for s in range(3))
    low = check(sdpa(True), q, k, v, machine=machine, tile=dict(attn=attn))
    (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    text = str(att)
    assert dict(att.tile)["g"] == 2 and "%nq = sadd %q, 1" in text
    aiv = text.split(".aiv")[1]
    assert aiv.count("= tload %tril") == 2  # each tile's rows, at its diagonal step


def test_the_benchmarks_attention_takes_pairs_of_wide_steps() -> None:
    # b4 h32 s2048 d128: 256-key steps in two products of 128 for pairs of query tiles, with
    # and without a mask
    q = np.zeros((4, 32, 2048, 128), np.float16)
    for causal in (True, False):
        f = pto.jit(sdpa(causal), machine="ascend910b")
        (att,) = [k for k in f.lower(q, q, q).tile_ir.kernels if k.kind == "attention"]
        assert dict(att.tile) == {"bq": 128, "bk": 256, "kc": 128, "g": 2}


@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_wide_kv_steps_accumulate_p_v_over_their_chunks(d: pto.DType) -> None:
    # K given transposed (no transpose in the group) and a boolean mask operand:
    # each 256-key step goes through L0 in chunks and hands one P V tile over
    q, v = arr((2, 256, 128), d), arr((2, 512, 128), d, 2)
    kt = arr((2, 128, 512), d, 1)
    mask = np.random.default_rng(3).random((2, 256, 512)) < 0.8

    def fn(q: Any, kt: Any, v: Any, mask: Any) -> Any:
        s = pto.where(mask, (q @ kt) * 0.125, -np.inf)
        return pto.softmax(s, axis=-1) @ v

    # f32: a query tile of 64 rows, products of 64 keys (L0B)
    tiles = (
        {"bq": 64, "bk": 256, "kc": 64} if d is pto.float32 else {"bq": 128, "bk": 256, "kc": 128}
    )
    nc = tiles["bk"] // tiles["kc"]
    # set, and chosen on one cluster (on 24 the choice keeps every cluster busy first)
    for machine, attn in (("ascend910b", (tiles["bq"], 256)), ("tiny", None)):
        low = check(fn, q, kt, v, mask, machine=machine, tile=attn and dict(attn=attn))
        (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
        assert dict(att.tile) == tiles
        body = steady(att)
        # one K and one P transfer per step, cut into nc chunks each (plus P's and V's)
        assert body.count("tmatmul_acc") == nc - 1 and body.count("textract") == 3 * nc


@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_wide_steps_with_a_mask_operand_and_for_one_query_row(d: pto.DType) -> None:
    # a causal mask and a boolean mask operand on 256-key steps of 64-row query tiles; and a
    # decoding shape (one query row against 1024 keys) whose steps go through L0 in chunks
    q, k, v = (arr((1, 2, 512, 128), d, s) for s in range(3))
    mask = np.random.default_rng(5).random((1, 2, 512, 512)) < 0.9

    def masked(q: Any, k: Any, v: Any, m: Any) -> Any:
        return pto.scaled_dot_product_attention(q, k, v, m, causal=True)

    low = check(masked, q, k, v, mask, machine="ascend910b", tile=dict(attn=(64, 256)))
    (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    assert dict(att.tile)["bk"] == 256 and "%u = smod" in str(att)
    q1 = arr((1, 4, 1, 128), d)
    k1, v1 = arr((1, 4, 1024, 128), d, 1), arr((1, 4, 1024, 128), d, 2)
    low = check(sdpa(False), q1, k1, v1, machine="ascend910b", tile=dict(attn=(1, 256)))
    (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    assert dict(att.tile)["bq"] == 1 and dict(att.tile)["kc"] < dict(att.tile)["bk"]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_pairs_of_chunked_steps_take_the_two_sets_of_l0_tiles_in_turn(causal: bool) -> None:
    # a pair of query tiles with 256-key steps in products of 128 (D = kc = Dv): in the loops
    # that make one kind of product the consecutive products alternate between q0/k0/s and
    # p0/v0/o, so each product's operands move in while the one before multiplies
    q, k, v = (arr((2, 512, 128), pto.float16, s) for s in range(3))
    low = check(sdpa(causal), q, k, v, tile=dict(attn=(128, 256, 2)))
    (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    assert dict(att.tile) == {"bq": 128, "bk": 256, "kc": 128, "g": 2}
    aic = str(att).split(".aiv")[0]
    fill = aic[aic.index("for %j in 0..%jf") : aic.index("for %j in 4..")]
    assert fill.count("%s: L0C f32[128,128] = tmatmul %q0, %k0") == 2
    assert fill.count("%o: L0C f32[128,128] = tmatmul %p0, %v0") == 2
    # the drain: P V of the first tile accumulates in s, of the second in o
    drain = aic[aic.index("for %j in %jd..") :]
    assert drain.count("= tmatmul %q0, %k0") == 2 and drain.count("= tmatmul_acc %p0, %v0") == 2
    stores = re.findall(r"tstore %ws_o\[[^]]*\], %(\w+)", drain)
    assert stores == ["s", "o"]


def loop_text(isa: str, core: str, head: str) -> str:
    """The lines of ``core``'s ISA from the loop whose ``LOOP`` line starts with ``head`` to
    its ``ENDLOOP``."""
    lines = isa.split(f".core {core}")[1].split(".core")[0].splitlines()
    (i,) = [i for i, ln in enumerate(lines) if ln.strip().startswith(head)]
    pad = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    end = lines.index(pad + "ENDLOOP", i)
    return "\n".join(lines[i : end + 1])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_each_query_tile_of_a_pair_is_handed_over_on_its_own(causal: bool) -> None:
    # the rings hold both query tiles of a point in a slot, as two parts: the vector cores
    # start the first tile's softmax while the cube makes the second tile's S, and the cube
    # loads the first tile's P while they make the second's (a flag after each part)
    q, k, v = (arr((2, 512, 128), pto.float16, s) for s in range(3))
    low = check(sdpa(causal), q, k, v, tile=dict(attn=(128, 256, 2)))
    (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
    for ring in ("ws_s aic->aiv x2 by %ss", "ws_p aiv->aic x4 by %sp", "ws_o aic->aiv x2 by %so"):
        assert f"ring %{ring} in 2 parts" in str(att)
    isa = str(low.isa)
    soft = loop_text(isa, "aiv", "LOOP %ihs")
    p_stores = [i for i, ln in enumerate(soft.splitlines()) if "TSTORE ws_p" in ln]
    assert len(p_stores) == 2
    for i in p_stores:  # each store of P is followed by its flag to the cube core
        assert soft.splitlines()[i + 1].strip() == "XSET_FLAG MTE3, aic, %sp+2"
    # the cube core waits for each tile's P right before loading it
    steady_loop = loop_text(isa, "aic", "LOOP %j, 4,")
    p_loads = [ln for ln in steady_loop.splitlines() if "TLOAD" in ln and "ws_p" in ln]
    assert len(p_loads) == 2
    assert steady_loop.count("XWAIT_FLAG MTE2, aiv0, %sp+2") == 2


def test_the_fixpipe_scales_the_scores() -> None:
    # 1/sqrt(d) multiplies S on the fixpipe (TSTORE_S, in f32 before the one rounding): the
    # vector cores make no pass for it; with a scale of 1 the stores are plain
    q, k, v = (arr((1, 2, 256, 64), pto.float16, s) for s in range(3))

    def unscaled(q: Any, k: Any, v: Any) -> Any:
        return pto.scaled_dot_product_attention(q, k, v, scale=1.0)

    for fn, scaled in ((sdpa(True), True), (unscaled, False)):
        isa = str(check(fn, q, k, v).isa)
        aic, aiv = isa.split(".core aic")[1].split(".core aiv")
        s_stores = [ln for ln in aic.splitlines() if "ws_s[" in ln]
        assert s_stores and all(
            ln.strip().startswith("TSTORE_S " if scaled else "TSTORE ") for ln in s_stores
        )
        if scaled:
            assert all("L0C" in ln and "f32[" in ln and "], 0.125" in ln for ln in s_stores)
        assert "TMULS" not in aiv
    # the tile viewer's windows of the ring: stores count the scaled ones
    wins = pto.jit(sdpa(True), machine="tiny").profile(q, k, v).windows("ws_s")
    assert wins and {w.event.op for w in wins} == {"TSTORE_S"}


def test_the_pipeline_is_as_deep_as_the_cross_core_flags_allow() -> None:
    # S and P V take two ring slots each and P one per step of lag: 4 steps on the chip's 8
    # cross-core flag ids, 3 on a machine with 7, 1 with 5 — the same results
    q, k, v = (arr((1, 2, 512, 32), pto.float16, s) for s in range(3))
    for ids, lag in ((8, 4), (7, 3), (5, 1)):
        m = pto.npu.machine("tiny").replace(cross_flag_ids=ids, name=f"tiny-{ids}")
        low = check(sdpa(True), q, k, v, machine=m)
        (att,) = [k for k in low.tile_ir.kernels if k.kind == "attention"]
        assert f"ring %ws_p aiv->aic x{lag} by %sp" in str(att)


@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
@pytest.mark.parametrize("rows", [1, 16])
def test_decoding_splits_the_keys_over_the_clusters(d: pto.DType, rows: int) -> None:
    # a few query rows against a long cache: 4 grid points for 24 clusters. Each point's
    # keys split into runs on several clusters; each run leaves its unnormalised output, row
    # max and row sum, and a vector kernel combines the runs (flash-decoding)
    q, k, v = arr((1, 4, rows, 128), d), arr((1, 4, 2048, 128), d, 1), arr((1, 4, 2048, 128), d, 2)
    low = check(sdpa(False), q, k, v, machine="ascend910b")
    att, comb = low.tile_ir.kernels
    splits = dict(att.tile)["splits"]
    assert dict(att.grid)["kv"] == splits > 1 and dict(comb.tile)["splits"] == splits
    assert comb.kind == "vector" and comb.name == "attention_combine"
    # faster than one run per point (timing only)
    qz, kz = np.zeros((1, 4, rows, 128), d.np), np.zeros((1, 4, 2048, 128), d.np)
    split = pto.jit(sdpa(False), machine="ascend910b").profile(qz, kz, kz, numerics=False)
    t = dict(att.tile)
    one = dict(attn=(t["bq"], t["bk"], t.get("g", 1), 1))  # the same tiles, one run per point
    single = pto.jit(sdpa(False), machine="ascend910b", tile=one)
    assert "kv=" not in single.lower(qz, kz, kz).tile_ir.kernels[0].header()
    assert split.cycles < 0.8 * single.profile(qz, kz, kz, numerics=False).cycles
    # a causal mask or a mask operand keeps one run per point (the runs' work would differ)
    low = check(sdpa(True), q, k[..., :rows, :], v[..., :rows, :], machine="ascend910b")
    assert len(low.tile_ir.kernels) == 1


def test_decoding_splits_with_the_heads_merged_in_place() -> None:
    # one query row per head, its output merged back into [1, h*d] as a model does: the
    # runs' combine stores straight into the merge's result (no copy kernel either)
    d = pto.float16
    q, k, v = arr((8, 1, 64), d), arr((8, 1024, 64), d, 1), arr((8, 1024, 64), d, 2)

    def fn(q: Any, k: Any, v: Any) -> Any:
        return pto.scaled_dot_product_attention(q, k, v).transpose((1, 0, 2)).reshape(1, 512)

    low = check(fn, q, k, v, machine="ascend910b")
    att, comb = low.tile_ir.kernels
    assert "kv=" in att.header() and comb.name == "attention_combine"
    assert "%b0*64" in str(comb)  # head %b0's columns of the merged row


def test_the_tile_verifier_lets_only_the_fixpipe_scale_a_store() -> None:
    # a scale on the vector cores' store of P (UB → GM) is a Tile IR error naming the tile
    q = arr((1, 1, 64, 32), pto.float16)
    tf = pto.jit(sdpa(False), machine="tiny").lower(q, q, q).tile_ir
    (att,) = [k for k in tf.kernels if k.kind == "attention"]
    aiv = next(s for s in att.sections if s.core == "aiv")

    def scaled(stmts: tuple[Any, ...]) -> tuple[Any, ...]:
        out = []
        for s in stmts:
            if isinstance(s, TStore) and s.tensor.startswith("ws_p"):
                s = replace(s, scale=0.5)
            elif isinstance(s, For):
                s = replace(s, body=scaled(s.body))
            out.append(s)
        return tuple(out)

    bad_aiv = replace(aiv, body=scaled(aiv.body))
    bad = replace(att, sections=tuple(bad_aiv if s is aiv else s for s in att.sections))
    bad_tf = replace(tf, kernels=tuple(bad if k is att else k for k in tf.kernels))
    with pytest.raises(TileIRError, match=r"tstore of %x: UB f16\[32,64\] with a scale"):
        bad_tf.verify()
    tf.verify()
