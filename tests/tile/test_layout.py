"""Layout ops on the NPU path (DMA windows, TTRANS, expands): bit-equal to the interpreter."""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pypto as pto
from pypto.core import dispatch
from pypto.ops import layout as layout_ops

from .conftest import DTYPES, assert_same, npu_and_interpret, sample

SHAPES = [(7,), (4, 6), (3, 5, 7), (2, 3, 4, 5), (1, 7, 1), (13, 1000)]
# every dtype on the small machine; two of them on the full chip (48 vector cores)
CASES = [(d, "tiny") for d in DTYPES] + [("f16", "ascend910b"), ("i8", "ascend910b")]


def _perms(n: int) -> list[tuple[int, ...]]:
    perms = list(itertools.permutations(range(n)))
    return perms if n <= 3 else perms[::5]


@pytest.mark.parametrize(("dtype", "machine"), CASES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_transpose(shape: tuple[int, ...], dtype: str, machine: str) -> None:
    x = sample(shape, DTYPES[dtype])
    for perm in _perms(len(shape)):
        assert_same(lambda x, p=perm: pto.transpose(x, p), x, machine=machine)


SLICES: list[Any] = [
    lambda x: x[1:],
    lambda x: x[::2],
    lambda x: x[::-1],
    lambda x: x[..., 1:-1],
    lambda x: x[..., ::3],
    lambda x: x[..., 1::2],
    lambda x: x[..., ::-2],
    lambda x: x[tuple(slice(None, None, -1) for _ in x.shape)],
    lambda x: x[tuple(slice(1, None, 2) for _ in x.shape)],
    lambda x: x[..., :1],
]


@pytest.mark.parametrize(("dtype", "machine"), CASES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_slice(shape: tuple[int, ...], dtype: str, machine: str) -> None:
    x = sample(shape, DTYPES[dtype])
    for f in SLICES:
        assert_same(f, x, machine=machine)


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
def test_a_reversed_last_axis_is_one_gather_per_tile(machine: str) -> None:
    """``x[..., ::-k]`` loads each tile's window forwards and reorders it with one TGATHER
    (a 512x1024 flip took 6.3 M instructions when it moved one element per DMA)."""
    x = sample((512, 1024), pto.float16)
    for f in (lambda x: pto.flip(x, -1), lambda x: x[:, 1000:3:-3]):
        assert_same(f, x, machine=machine)
        fn = pto.jit(f, machine=machine)
        assert "tgather" in str(fn.lower(x).tile_ir)
        prof = fn.profile(x, numerics=False, trace=False)
        assert prof.instructions < 5_000


@pytest.mark.parametrize(("dtype", "machine"), CASES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_concat_and_broadcast(shape: tuple[int, ...], dtype: str, machine: str) -> None:
    x = sample(shape, DTYPES[dtype])
    y = sample(shape, DTYPES[dtype], 1)
    for axis in range(len(shape)):
        assert_same(lambda x, y, a=axis: pto.concat([x, y, x], a), x, y, machine=machine)
    assert_same(lambda x: pto.concat([x[..., :1], x], -1), x, machine=machine)
    assert_same(lambda x: pto.broadcast_to(x, (3, *x.shape)), x, machine=machine)
    assert_same(lambda x: pto.broadcast_to(x[..., :1], (*x.shape[:-1], 5)), x, machine=machine)
    assert_same(
        lambda x: pto.broadcast_to(pto.expand_dims(x, -2), (*x.shape[:-1], 3, x.shape[-1])),
        x,
        machine=machine,
    )
    assert_same(lambda x: pto.broadcast_to(x[:1], x.shape), x, machine=machine)


def _pad(x: Any, config: Any) -> Any:
    return dispatch.bind(layout_ops.PAD, (x,), {"config": config})


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_pad(shape: tuple[int, ...], dtype: str) -> None:
    x = sample(shape, DTYPES[dtype])
    n = len(shape)
    for cfg in (
        ((1, 2, 0),) * n,
        ((0, 0, 0),) * (n - 1) + ((2, 1, 0),),
        ((1, 0, 1),) * n,
        ((0, 1, 0),) * (n - 1) + ((0, 0, 2),),
    )[: 2 if shape[-1] > 100 else 4]:  # interior padding of the last axis goes by element
        assert_same(lambda x, c=cfg: _pad(x, c), x)


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
def test_zero_size_and_scalars(machine: str) -> None:
    s = pto.tensor(np.float32(2.5))
    assert_same(lambda s: pto.broadcast_to(s, (3, 4)), s, machine=machine)
    assert_same(lambda s: pto.transpose(pto.reshape(s, (1, 1)), (1, 0)), s, machine=machine)
    assert_same(lambda s: pto.concat([pto.reshape(s, (1,)), pto.reshape(s, (1,))], 0), s)
    e = pto.zeros((0, 5))
    assert_same(lambda x: pto.transpose(x, (1, 0)), e, machine=machine)
    assert_same(lambda x: pto.concat([x, x], 0), e, machine=machine)
    x = sample((3, 4), pto.float32)
    assert_same(lambda x: x[:, 2:2], x, machine=machine)
    assert_same(lambda x: pto.broadcast_to(x, (0, 3, 4)), x, machine=machine)


def test_elementwise_broadcasts_beyond_rows() -> None:
    pairs = [
        ((2, 1, 5), (2, 3, 5)),
        ((3, 1, 5), (1, 4, 1)),
        ((2, 3, 4), (3, 1)),
        ((2, 3, 1, 5), (1, 3, 4, 5)),
        ((2, 1, 5), (5,)),
    ]
    for a, b in pairs:
        for dtype in ("f32", "bf16", "i32", "bool"):
            d = DTYPES[dtype]
            x, y = sample(a, d), sample(b, d, 1)
            assert_same(lambda x, y: pto.maximum(x, y), x, y)
            assert_same(lambda x, y: pto.where(x == y, x, y), x, y)
        x, y = sample(a, pto.float16), sample(b, pto.float16, 1)
        assert_same(lambda x, y: pto.exp(x) * y + 1, x, y)


def test_transpose_is_ttrans_and_keeps_code_size() -> None:
    def f(x: Any) -> Any:
        return x.T

    small = pto.jit(f).lower(sample((1024, 512), pto.float16))
    big = pto.jit(f).lower(sample((2048, 1024), pto.float16))
    assert "ttrans" in str(small.tile_ir)
    assert big.isa.static_size() == small.isa.static_size()


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((4, 6, 8), (6, 8)),
        ((2, 3, 4, 16), (4, 16)),
        ((2, 3, 4, 16), (3, 4, 16)),
        ((5, 3, 5), (3, 5)),
    ],
    ids=str,
)
def test_operand_repeating_over_leading_axes_is_read_in_place(
    a: tuple[int, ...], b: tuple[int, ...], machine: str
) -> None:
    # [T, C] against [B, T, C] (rotary tables against every head): the row kernel reads the
    # table's rows modulo T, with no broadcast copy of it first
    def f(x: Any, t: Any) -> Any:
        return x * t - t

    x, t = sample(a, pto.float16), sample(b, pto.float16, 1)
    assert_same(f, x, t, machine=machine)
    tile_ir = str(pto.jit(f, machine=machine).lower(x, t).tile_ir)
    assert "broadcast" not in tile_ir and tile_ir.count("kernel @") == 1, tile_ir
    assert "smod" in tile_ir


def test_vec_tile_must_divide_the_repeat_of_an_operand() -> None:
    x, t = sample((4, 6, 8), pto.float16), sample((6, 8), pto.float16, 1)
    f = pto.jit(lambda x, t: x * t, machine="tiny", tile=dict(vec=(4, 8)))
    with pytest.raises(pto.TileError, match=r"does not divide the \[6\] rows") as ei:
        f.lower(x, t)
    assert "set_vec_tile_shapes(6, 8)" in str(ei.value)


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
def test_head_split_and_merge_move_whole_tiles(machine: str) -> None:
    # [s, h*d] -> [h, s, d] and back, as attention splits and merges heads: the transposes read
    # and write the [s, h*d] layouts their neighbours use, [rows of s, d] per tile, with no
    # relayout copy of one row at a time.
    s_, h_, d_ = 256, 8, 64

    def f(x: Any) -> Any:
        q = (x * 2.0).reshape(s_, h_, d_).transpose(1, 0, 2)
        return (q + 1.0).transpose(1, 0, 2).reshape(s_, h_ * d_) * 3.0

    x = sample((s_, h_ * d_), pto.float32)
    assert_same(f, x, machine=machine)
    tile_ir = str(pto.jit(f, machine=machine).lower(x).tile_ir)
    assert "relayout" not in tile_ir
    transposes = [ln for ln in tile_ir.splitlines() if "kernel @transpose" in ln]
    assert len(transposes) == 2
    assert all("rows=1," not in ln for ln in transposes), transposes


def test_a_relayout_is_shared_by_the_kernels_that_read_it() -> None:
    # A 1-d take leaves one element per row; the two kernels below read its result as one
    # row, through a relayout copy that is made once, not once per reader (a second copy of
    # buffer t would be named t_re1).
    rng = np.random.default_rng(0)
    i = pto.tensor(rng.integers(0, 1024, 512).astype(np.int32))

    def f(i: Any) -> Any:
        s = pto.take(i, pto.argsort(i))
        return s[1:] == s[:-1], s[2:] == s[:-2]

    tile_ir = str(pto.jit(f, machine="tiny").lower(i).tile_ir)
    copies = re.findall(r"\.tensor (\w+_re\d*) ", tile_ir)
    assert copies and not any(re.fullmatch(r"\w+_re\d+", c) for c in copies), copies
    got = pto.jit(f, machine="tiny")(i)
    s = np.sort(np.asarray(i))
    np.testing.assert_array_equal(np.asarray(got[0]), s[1:] == s[:-1])
    np.testing.assert_array_equal(np.asarray(got[1]), s[2:] == s[:-2])


def test_a_column_is_read_as_a_row_from_the_same_bytes() -> None:
    # A 1-d take leaves its result as a column [n, 1]; a row kernel reads [1, c] pieces of it
    # as [c, 1] windows of the column (GM is dense), with no copy. Before, a relayout copy
    # moved one element per transfer: 53,658 cycles on ascend910b, 3,367 now.
    rng = np.random.default_rng(1)
    x = pto.tensor(rng.standard_normal(4096).astype(np.float32))
    i = pto.tensor(rng.integers(0, 4096, 512).astype(np.int32))

    def f(x: Any, i: Any) -> Any:
        return pto.take(x, i) * 2.0 + 1.0

    assert_same(f, x, i, machine="tiny")
    tile_ir = str(pto.jit(f).lower(x, i).tile_ir)
    assert "relayout" not in tile_ir
    assert re.search(r"UB f32\[\d+,1\] = tload %t\[", tile_ir), tile_ir


def test_a_relayout_moves_chunks_that_are_rectangles_of_both_layouts() -> None:
    # The index of a take is computed by a row kernel ([1, 3000]) and read by the take as a
    # column ([3000, 1]): one chunk of 3,000 elements, loaded as a row and stored as a column
    # from the same UB bytes (it was 3,000 transfers of one element each).
    x = pto.tensor(np.arange(4096, dtype=np.float32))
    i = pto.tensor((np.arange(3000, dtype=np.int32) * 7) % 4096)

    def f(x: Any, i: Any) -> Any:
        return pto.take(x, (i * 3) % 4096)

    assert_same(f, x, i, machine="tiny")
    kernels = pto.jit(f, machine="tiny").lower(x, i).tile_ir.kernels
    (k,) = [k for k in kernels if k.name.startswith("relayout")]
    assert k.header() == "kernel @relayout grid(r=1) vec_tile(rows=3000, cols=1)"
    text = str(pto.jit(f, machine="tiny").lower(x, i).tile_ir)
    assert "UB i32[1,3000] = tload" in text and "[%dr : +3000, %dc : +1], %run" in text, text


# ---------------------------------------------------------------- random layout chains
KINDS = ["T", "perm", "slice", "rev", "bcast", "concat", "reshape", "pad"]


def _apply(kind: str, x: Any, rnd: random.Random) -> Any:
    n = len(x.shape)
    if kind == "T" and n >= 2:
        return pto.transpose(x, (*range(n - 2), n - 1, n - 2))
    if kind == "perm" and n >= 2:
        return pto.transpose(x, tuple(rnd.sample(range(n), n)))
    if kind in ("slice", "rev"):
        a = rnd.randrange(n)
        idx = [slice(None)] * n
        if kind == "rev":
            idx[a] = slice(None, None, -1)
        else:
            idx[a] = slice(rnd.randrange(x.shape[a]), None, rnd.choice([1, 2, 3]))
        return x[tuple(idx)]
    if kind == "bcast" and n < 4:
        return pto.broadcast_to(x, (2, *x.shape))
    if kind == "concat":
        return pto.concat([x, x], rnd.randrange(n))
    if kind == "reshape" and n >= 2:
        return pto.reshape(x, (x.shape[0] * x.shape[1], *x.shape[2:]))
    if kind == "pad":
        cfg = [(0, 0, 0)] * n
        cfg[rnd.randrange(n)] = (rnd.randint(0, 2), rnd.randint(0, 2), rnd.randint(0, 1))
        return _pad(x, tuple(cfg))
    return x


@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    dtype=st.sampled_from(["f32", "f16", "i8", "bool"]),
    steps=st.lists(st.sampled_from(KINDS), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_random_layout_chains(shape: list[int], dtype: str, steps: list[str], seed: int) -> None:
    def chain(x: Any) -> Any:
        rnd = random.Random(seed)  # the same parameters on every trace
        for k in steps:
            if x.size > 2048:
                break
            x = _apply(k, x, rnd)
        return x

    assert_same(chain, sample(tuple(shape), DTYPES[dtype]))


@pytest.mark.parametrize(("dtype", "machine"), CASES)
def test_take(dtype: str, machine: str) -> None:
    for shape in [(7,), (4, 6), (3, 5, 7), (1, 7, 1)]:
        x = sample(shape, DTYPES[dtype])
        for a in range(len(shape)):
            n = shape[a]
            idx = pto.tensor(np.array([0, n - 1, -1, n // 2, -n], np.int32))
            assert_same(lambda x, i, a=a: pto.take(x, i, axis=a), x, idx, machine=machine)
            i8 = pto.reshape(idx[:4], (2, 2)).astype(pto.int8)
            assert_same(lambda x, i, a=a: pto.take(x, i, axis=a), x, i8, machine=machine)


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
def test_an_embedding_lookup_is_a_row_dma_per_index(machine: str) -> None:
    """A large table: the scalar unit loads each index (SLD) and one DMA moves its row, so
    the run reads the rows it takes, not the table; small tables gather in UB instead."""
    table = sample((32000, 256), pto.float16)
    ids = np.random.default_rng(4).integers(-32000, 32000, 200).astype(np.int32)
    ids[:3] = [0, 31999, -32000]
    f = pto.jit(lambda t, i: pto.take(t, i, axis=0), machine=machine)
    assert "SLD %ix" in str(f.lower(table, ids).isa)
    prof = f.profile(table, ids)
    np.testing.assert_array_equal(np.asarray(prof.outputs[0]), table.numpy()[ids])
    assert [e.op for e in prof.events].count("SLD") == 200
    assert prof.gm_read_bytes <= 200 * 512 + 200 * 4 * 8  # rows and index tiles, not the table
    # along a middle axis, with int8 indices (converted for the scalar unit)
    x = sample((3, 9000, 16), pto.float32)
    i8 = pto.tensor(np.array([5, -1, 100, 0, -128], np.int8))
    g = pto.jit(lambda x, i: pto.take(x, i, axis=1), machine=machine)
    assert "SLD %ix" in str(g.lower(x, i8).isa)
    assert_same(lambda x, i: pto.take(x, i, axis=1), x, i8, machine=machine)
    small = pto.jit(lambda t, i: pto.take(t, i, axis=0), machine=machine)
    assert "TGATHER" in str(small.lower(table[:64], ids % 64).isa)


@pytest.mark.parametrize("shape", [(32, 16, 2, 32), (3, 7, 3, 40), (4, 6, 2, 1024)], ids=str)
def test_take_of_rows_that_span_several_rows_of_the_operands_layout(
    shape: tuple[int, ...],
) -> None:
    """``take`` along axis 1 after a row kernel that laid ``tanh(x)`` out in rows of the last
    axis: each taken slice is several of those rows (one window of them), or, when its tile
    is narrower than the slice, a copy into whole slices first. The loads used to address
    the slices as rows of the layout (an ISA verifier error, or a load past the tensor)."""
    idx = pto.tensor(np.array([5, 0, 3, 3, -1], np.int32))
    assert_same(lambda x, i: pto.take(pto.tanh(x), i, axis=1) * 2, sample(shape, pto.float32), idx)


def test_grad_of_a_layout_chain() -> None:
    # the backward graph holds pad (slice's VJP), broadcasts, transposes and column sums
    def f(x: Any) -> Any:
        y = pto.transpose(x, (2, 0, 1))[:, ::2, 1:]
        z = pto.concat([y, y * 2], 0).sum(axis=(0, 2))
        idx = pto.tensor(np.array([1, 3], np.int32))
        return (z * z).sum() + pto.take(x, idx, axis=1).max(0).sum()

    got, want = npu_and_interpret(pto.grad(f), sample((6, 8, 5), pto.float32))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
def test_integer_array_indexing_is_a_take(machine: str) -> None:
    """``emb[ids]`` (an embedding lookup with traced ids), a list of columns and a numpy array
    after an int, compiled: one take each, equal to eager mode bit for bit."""
    emb = sample((50, 64), pto.float16, 1)
    ids = pto.tensor(np.array([[3, 49, 0], [-1, 7, 7]], np.int32))
    x = sample((6, 40, 8), pto.float32, 2)

    def fn(emb: Any, ids: Any, x: Any) -> Any:
        return emb[ids] * 2, x[:, [0, 39, 5]], x[1, :, np.array([2, 0])]

    got = pto.jit(fn, machine=machine)(emb, ids, x)
    for g, w in zip(got, fn(emb, ids, x), strict=True):
        assert g.shape == w.shape
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    eqns = pto.jit(fn, machine=machine).lower(emb, ids, x).tensor_ir
    assert str(eqns).count("= take ") == 3


def test_take_clamps_indices_known_only_as_it_runs() -> None:
    """An index out of range is an error eagerly; compiled, where the kernel learns it only
    as it runs, it clamps to the axis as JAX's gathers and the JAX reference do (it used to
    select no row: zeros)."""
    e = pto.tensor(np.arange(20.0, dtype=np.float32).reshape(5, 4))
    ids = pto.tensor(np.array([7, -6, -100, 2, -1], np.int32))
    with pytest.raises(pto.BoundsError):
        e[ids]
    got = pto.jit(lambda e, i: e[i], machine="tiny")(e, ids)
    want = pto.to_jax(lambda e, i: e[i])(np.asarray(e), np.asarray(ids))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert np.asarray(got)[:, 0].tolist() == [16, 0, 0, 8, 16]


def test_zero_size_constants_compile() -> None:
    """A constant with no elements (``pto.abs([])`` in a jitted function) failed to lower:
    it reached the lowering, which has no tiles for it (a zero-size input never did)."""
    for fn in (lambda: pto.abs([]), lambda: pto.tensor(np.zeros((2, 0, 3), np.float32)) * 2):
        got, want = pto.jit(fn, machine="tiny")(), fn()
        assert got.shape == want.shape and got.dtype == want.dtype
