"""Row kernels (elementwise, last-axis reductions, norms): golden Tile IR, tile shapes, errors,
and the Block IR and ISA they become."""

from __future__ import annotations

import re
from typing import Any

import jax
import numpy as np
import pytest

import pypto as pto
from pypto.isa import parse
from tests.tile.conftest import DTYPES, assert_same, sample


def strip(text: str) -> str:
    """The IR text without source-location comments (they name this file's lines)."""
    return re.sub(r"\s+#.*", "", text)


X = pto.random.normal(0, (64, 128), pto.float16)
W = pto.random.normal(1, (128,), pto.float16)

SOFTMAX = """\
tile_func @softmax {
  .tensor x f16[64,128] in
  .tensor out f16[64,128] out
  kernel @softmax grid(r=4) vec_tile(rows=16, cols=128) {
    .aiv
      %x1: UB f16[16,128] = tload %x[%r*16 : +16, 0 : +128]
      %t2: UB f16[16,1] = trowmax %x1
      %t3: UB f16[16,128] = tsub %x1, %t2
      %t4: UB f16[16,128] = texp %t3
      %t5: UB f16[16,1] = trowsum %t4
      %t6: UB f16[16,128] = tdiv %t4, %t5
      tstore %out[%r*16 : +16, 0 : +128], %t6
  }
  return %out
}"""

RMS_NORM = """\
tile_func @rms {
  .tensor x f16[64,128] in
  .tensor w f16[1,128] in
  .tensor out f16[64,128] out
  kernel @rms_norm grid(r=4) vec_tile(rows=16, cols=128) {
    .aiv
      pre {
        %x2: UB f16[1,128] = tload %w[0 : +1, 0 : +128]
      }
      %x1: UB f16[16,128] = tload %x[%r*16 : +16, 0 : +128]
      %t3: UB f16[16,128] = tmul %x1, %x1
      %t4: UB f32[16,128] = tcvt %t3
      %t5: UB f32[16,1] = trowsum %t4
      %t6: UB f32[16,1] = tdivs %t5, 128.0
      %t7: UB f16[16,1] = tcvt %t6
      %t8: UB f16[16,1] = tadds %t7, 1.0132789611816406e-06
      %t9: UB f16[16,1] = trsqrt %t8
      %t10: UB f16[16,128] = tmul %x1, %t9
      %t11: UB f16[16,128] = tmul %t10, %x2
      tstore %out[%r*16 : +16, 0 : +128], %t11
  }
  return %out
}"""


def softmax(x: Any) -> Any:
    return pto.softmax(x, -1)


def rms(x: Any, w: Any) -> Any:
    return pto.rms_norm(x, w)


def test_golden_softmax_tile_ir() -> None:
    low = pto.jit(softmax, machine="tiny", tile=dict(vec=(16, 128))).lower(X)
    assert strip(str(low.tile_ir)) == SOFTMAX


def test_golden_rms_norm_tile_ir() -> None:
    low = pto.jit(rms, machine="tiny", tile=dict(vec=(16, 128))).lower(X, W)
    assert strip(str(low.tile_ir)) == RMS_NORM


def test_every_level_prints_and_the_isa_round_trips() -> None:
    low = pto.jit(rms, machine="tiny").lower(X, W)
    low.tile_ir.verify()
    text = str(low.isa)
    assert str(parse(text)) == text
    block = str(low.block_ir)
    # buffers are allocated, the input tile alternates between two slots, pipes are ordered
    assert "x2 by %p_g] %x1" in block
    assert "WAIT_FLAG MTE2, V" in block and "SET_FLAG V, MTE3" in block


def test_tile_shapes_change_the_tile_ir_and_the_profile() -> None:
    texts, cycles = set(), set()
    for vec in ((4, 128), (16, 128), (32, 128)):
        with pto.tile_shapes(vec=vec):
            f = pto.jit(softmax, machine="tiny")
            texts.add(strip(str(f.lower(X).tile_ir)))
            cycles.add(f.profile(X, numerics=False).cycles)
    assert len(texts) == 3 and len(cycles) == 3


def test_set_vec_tile_shapes_is_global_until_reset() -> None:
    try:
        pto.set_vec_tile_shapes(8, 128)
        assert "vec_tile(rows=8, cols=128)" in str(
            pto.jit(softmax, machine="tiny").lower(X).tile_ir
        )
    finally:
        pto.reset_tile_shapes()
    assert "rows=8," not in str(pto.jit(softmax, machine="tiny").lower(X).tile_ir)


def test_elementwise_kernels_may_split_rows_into_column_tiles() -> None:
    x = pto.random.normal(0, (8, 4096), pto.float32)
    f = pto.jit(lambda x: pto.exp(x) * 2, machine="tiny", tile=dict(vec=(8, 512)))
    assert "grid(r=1, c=8)" in str(f.lower(x).tile_ir)
    np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(pto.exp(x) * 2))


@pytest.mark.parametrize(
    ("vec", "shape", "message"),
    [
        ((8, 96), (64, 4096), r"tile \[8, 96\] for kernel @exp .*does not divide its 4096 columns"),
        ((8, 64), (64, 128), r"splits rows of 128, but the kernel reduces over whole rows"),
        ((64, 8192), (64, 32768), r"needs 8388608 bytes of UB; tiny has 196608"),
    ],
)
def test_bad_vec_tiles_say_why_and_suggest_one_that_fits(
    vec: tuple[int, int], shape: tuple[int, int], message: str
) -> None:
    x = pto.ones(shape, pto.float32)
    fn = softmax if shape[1] == 128 else pto.exp
    with pytest.raises(pto.TileError, match=message) as info:
        pto.jit(fn, machine="tiny", tile=dict(vec=vec))(x)
    text = str(info.value)
    assert "hint: a tile that fits: pto.set_vec_tile_shapes(" in text
    assert "test_row_kernels.py" in text  # the user's line


def test_misaligned_column_tile_is_refused() -> None:
    with pytest.raises(pto.TileError, match=r"4 columns = 16 bytes, not a multiple of 32"):
        pto.jit(pto.exp, machine="tiny", tile=dict(vec=(8, 4)))(pto.ones((64, 128)))


def test_bad_tile_settings_are_refused_early() -> None:
    with pytest.raises(pto.TileError, match="positive integers"):
        pto.set_vec_tile_shapes(0, 8)
    with pytest.raises(pto.TileError, match="not a multiple of the L0 size"):
        pto.set_cube_tile_shapes([128, 200], [64, 256], [256, 256])
    with pytest.raises(pto.TileError, match="unknown tile setting"):
        pto.jit(softmax, tile=dict(rows=8)).lower(X)


def test_automatic_tiles_keep_every_vector_core_busy() -> None:
    x = pto.ones((4096, 256), pto.float16)
    low = pto.jit(softmax, machine="ascend910b").lower(x)
    (k,) = low.tile_ir.kernels
    assert k.points >= 48
    prof = pto.jit(softmax, machine="ascend910b").profile(x, numerics=False)
    busy = [v for (core, pipe), v in prof.busy.items() if pipe == "V"]
    assert len(busy) == 48 and min(busy) > 0


def test_reshapes_are_views_not_copies() -> None:
    x = pto.random.normal(0, (16, 64))
    f = pto.jit(lambda x: (x.reshape(4, 256) * 2).reshape(16, 64) + 1, machine="tiny")
    low = f.lower(x)
    # the two reshapes move no data: two kernels (mul, add), no copy between them
    assert [k.name for k in low.tile_ir.kernels] == ["mul", "add"]
    np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(x) * 2 + 1)


def test_groups_that_share_rows_merge_into_one_kernel_unless_unfused() -> None:
    def f(x: Any, w: Any, r: Any) -> Any:
        return pto.rms_norm(x + r, w)

    r = pto.random.normal(2, (64, 128), pto.float16)
    fused = pto.jit(f, machine="tiny")
    assert [k.name for k in fused.lower(X, W, r).tile_ir.kernels] == ["add_rms_norm"]
    unfused = pto.jit(f, machine="tiny", fuse=False).lower(X, W, r).tile_ir.kernels
    assert len(unfused) == 10  # one kernel per equation: the baseline
    np.testing.assert_array_equal(np.asarray(fused(X, W, r)), np.asarray(f(X, W, r)))
    assert (
        fused.profile(X, W, r, numerics=False).cycles
        < pto.jit(f, machine="tiny", fuse=False).profile(X, W, r, numerics=False).cycles
    )


def test_a_merged_scalar_output_is_stored_once_not_per_row() -> None:
    # the [1] result joins the [4, 1] kernel as a value broadcast down the rows; only one
    # element of it may reach its one-element output
    def f(x: Any, s: Any) -> Any:
        return pto.tanh(pto.tanh(s)), pto.tanh(x)

    x = pto.tensor(np.linspace(-1, 1, 4, dtype=np.float32).reshape(4, 1))
    s = pto.tensor(np.array([0.25], np.float32))
    jf = pto.jit(f, machine="tiny")
    assert len(jf.lower(x, s).tile_ir.kernels) == 1
    for got, want in zip(jf(x, s), f(x, s), strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_a_merged_row_output_with_a_scalar_operand_is_stored_as_one_row() -> None:
    # [2] + tanh([1, 1]) is one row; the scalar broadcast down the tile's rows makes a whole
    # tile of equal rows, of which one reaches the [1, 2] output
    def f(x: Any, v: Any, s: Any) -> Any:
        return x + x, v + pto.tanh(s)

    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 1, 2)
    v, s = np.array([0.5, -0.5], np.float32), np.array([[0.25]], np.float32)
    jf = pto.jit(f, machine="tiny")
    assert len(jf.lower(x, v, s).tile_ir.kernels) == 1
    assert_same(f, x, v, s)


def test_independent_kernels_overlap_and_dependent_ones_meet_at_a_barrier() -> None:
    def f(x: Any, y: Any) -> Any:
        a = pto.softmax(x, -1)  # kernel 1
        b = pto.exp(y) * 2  # kernel 2: independent of kernel 1
        return a, b, pto.exp(a.reshape(128, 64))  # kernel 3 reads kernel 1's output

    x = pto.random.normal(0, (64, 128))
    y = pto.random.normal(1, (32, 64))
    low = pto.jit(f, machine="tiny").lower(x, y)
    seps = [i.op for i in low.isa.core("aiv").instructions() if i.op.endswith("BARRIER")]
    assert seps[0] == "PIPE_BARRIER" and "BARRIER" in seps[1:]
    outs = pto.jit(f, machine="tiny")(x, y)
    for o, r in zip(outs, f(x, y), strict=True):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-6)


def test_block_verifier_catches_unbalanced_flags_and_overflowing_buffers() -> None:
    from dataclasses import replace

    from pypto.block.ir import BInstr
    from pypto.block.verify import BlockIRError
    from pypto.isa import parse_instr

    low = pto.jit(softmax, machine="tiny").lower(X)
    bf, m = low.block_ir, pto.npu.machine("tiny")
    bf.verify(m)
    (k,) = bf.kernels
    ((core, body),) = k.programs
    extra = BInstr(parse_instr("SET_FLAG MTE2, V, 0"))
    broken = replace(bf, kernels=(replace(k, programs=((core, (*body, extra)),)),))
    with pytest.raises(BlockIRError, match="set more often than waited"):
        broken.verify(m)
    with pytest.raises(BlockIRError, match="past UB"):
        bf.verify(m.replace(ub_bytes=16 * 1024, name="small"))


# ---------------------------------------------------------------- layout ops as windows
def rope(x: Any, cos: Any, sin: Any) -> Any:
    """Rotary embedding of a [16, 2*32] projection split into 2 heads (a decoder's q or k)."""
    t = x.reshape(16, 2, 32).transpose(1, 0, 2)
    t1, t2 = t[..., :16], t[..., 16:]
    return pto.concat([t1 * cos - t2 * sin, t1 * sin + t2 * cos], axis=-1)


ROPE = """\
tile_func @rope {
  .tensor x f16[16,64] in
  .tensor cos f16[16,16] in
  .tensor sin f16[16,16] in
  .tensor out f16[32,32] out
  kernel @transpose_slice_mul_mul_sub_mul_add_concat grid(r=2) vec_tile(rows=16, cols=16) {
    .aiv
      %ax0 = sdiv %r*16, 16
      %ax1 = smod %r*16, 16
      %x1: UB f16[16,16] = tload %x[%ax1 : +16, %ax0*32 : +16]
      %x2: UB f16[16,16] = tload %x[%ax1 : +16, %ax0*32+16 : +16]
      %px3 = smod %r*16, 16
      %x3: UB f16[16,16] = tload %cos[%px3 : +16, 0 : +16]
      %px4 = smod %r*16, 16
      %x4: UB f16[16,16] = tload %sin[%px4 : +16, 0 : +16]
      %t5: UB f16[16,16] = tmul %x1, %x3
      %t6: UB f16[16,16] = tmul %x2, %x4
      %t7: UB f16[16,16] = tsub %t5, %t6
      %t8: UB f16[16,16] = tmul %x1, %x4
      %t9: UB f16[16,16] = tmul %x2, %x3
      %t10: UB f16[16,16] = tadd %t8, %t9
      tstore %out[%r*16 : +16, 0 : +16], %t7
      tstore %out[%r*16 : +16, 16 : +16], %t10
  }
  return %out as [2, 16, 32]
}"""


def test_golden_rope_reads_heads_and_halves_through_windows() -> None:
    # head split, the two halves and the concatenation are the addresses of one kernel's
    # loads and stores: no copy kernels
    x = pto.random.normal(0, (16, 64), pto.float16)
    c = pto.random.normal(1, (16, 16), pto.float16)
    low = pto.jit(rope, machine="tiny").lower(x, c, c)
    assert strip(str(low.tile_ir)) == ROPE
    unfused = pto.jit(rope, machine="tiny", fuse=False).lower(x, c, c).tile_ir.kernels
    assert {"transpose", "slice", "concat"} <= {k.name.rstrip("0123456789") for k in unfused}


LAYOUT_CASES: dict[str, tuple[Any, list[tuple[int, ...]], list[str]]] = {
    "rope": (rope, [(16, 64), (16, 16), (16, 16)], ["transpose_slice_mul_mul_sub_mul_add_concat"]),
    "4-d transpose": (
        lambda x: pto.exp(x.transpose(2, 0, 1, 3)) * 2.0,
        [(3, 4, 5, 16)],
        ["transpose_exp_mul"],
    ),
    "another 4-d transpose": (
        lambda x: x.transpose(1, 2, 0, 3) + 1.0,
        [(3, 4, 8, 16)],
        ["transpose_add"],
    ),
    "overlapping slices": (lambda x: x[..., 8:24] * x[..., 0:16], [(6, 40)], ["slice_mul"]),
    "1-d slices": (lambda x: x[16:48] * x[0:32], [(64,)], ["slice_mul"]),
    "three pieces": (
        lambda x: pto.concat([x + 1, x * 2, -x], axis=-1),
        [(6, 16)],
        ["add_mul_neg_concat"],
    ),
    "a slice into softmax": (
        lambda x: pto.softmax(x[..., 16:48], axis=-1),
        [(32, 64)],
        ["slice_softmax"],
    ),
    # rows further down: a run of the first axis starts the window that many rows later
    "shifted rows": (lambda x: x[3:35] * x[0:32] + x[1:33], [(40, 16)], ["slice_mul_add"]),
    # strided and offset leading axes (a pooling window's offsets): each tile's first row's
    # leading indices, stepped, address the source
    "strided leading axes": (
        lambda x: pto.maximum(x[:, 0:7:2, 1:5], x[:, 1:8:2, 0:4]) * 2.0,
        [(3, 9, 6, 16)],
        ["slice_maximum_mul"],
    ),
    # a concatenation of windows is one kernel of loads and stores, not a copy per slice
    "a concat of windows": (
        lambda x: pto.concat([x[0:30], x[1:31], x[5:35]], axis=-1),
        [(36, 16)],
        ["slice_concat"],
    ),
    # stepping the last leading axis is not a rectangle of rows: the slice stays a copy
    "strided last leading axis": (
        lambda x: x[:, ::2] + 1.0,
        [(4, 12, 16)],
        ["slice", "add"],
    ),
    # the transpose is read by two later slices, one after the compute: it stays a copy
    "a transpose read twice": (
        lambda x, c: (lambda t: pto.concat([t[..., :8] * c, t[..., 8:]], axis=-1))(
            x.transpose(1, 0, 2)
        ),
        [(8, 3, 16), (8, 8)],
        ["transpose", "slice_mul_concat"],
    ),
    # a transposed value also used outside the kernel is stored from its tile
    "a transpose kept": (
        lambda x: (lambda t: (t * 2.0, t.sum(axis=0)))(x.transpose(1, 0, 2)),
        [(4, 8, 16)],
        ["transpose_mul", "sum_cols"],
    ),
}


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("case", list(LAYOUT_CASES))
def test_slices_transposes_and_concats_become_windows_of_row_kernels(
    case: str, dtype: str, machine: str
) -> None:
    fn, shapes, kernels = LAYOUT_CASES[case]
    args = [sample(s, DTYPES[dtype], seed=i) for i, s in enumerate(shapes)]
    low = pto.jit(fn, machine=machine).lower(*args)
    assert [k.name for k in low.tile_ir.kernels] == kernels
    assert_same(fn, *args, machine=machine)


def test_a_user_vec_tile_crossing_a_transposed_block_keeps_the_copy() -> None:
    # rows of 8 would straddle two blocks of 4 rows the window reads apart: the transpose
    # stays a copy kernel and the user's tile holds for the compute
    x = sample((4, 2, 16), pto.float32)
    fn = lambda x: x.transpose(1, 0, 2) * 2.0  # noqa: E731
    kernels = pto.jit(fn, machine="tiny", tile=dict(vec=(8, 16))).lower(x).tile_ir.kernels
    assert [k.name for k in kernels] == ["transpose", "mul"]
    assert kernels[1].header().endswith("vec_tile(rows=8, cols=16)")
    auto = pto.jit(fn, machine="tiny").lower(x).tile_ir.kernels
    assert [k.name for k in auto] == ["transpose_mul"]
    np.testing.assert_array_equal(
        np.asarray(pto.jit(fn, machine="tiny", tile=dict(vec=(8, 16)))(x)),
        np.asarray(x).transpose(1, 0, 2) * 2.0,
    )


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
def test_an_operand_repeating_over_leading_axes_with_one_wide_rows(machine: str) -> None:
    # [1, 2, 1] against [2, 2, 1]: the rows are one element wide, so the repeating operand is
    # a column like the result (it was refused as a full tile against a column result)
    a = sample((1, 2, 1), pto.float32)
    b = sample((2, 2, 1), pto.float32, seed=1)
    assert_same(lambda x, y: x + y, a, b, machine=machine)
    assert_same(lambda x, y: pto.exp(x) * y + x, a, b, machine=machine)


def test_a_lowering_error_names_the_line_of_its_op() -> None:
    import inspect

    def f(x: Any) -> Any:
        y = x + 1.0
        return pto.softmax(y, -1)

    first = inspect.getsourcelines(f)[1]
    with pytest.raises(pto.TileError, match="kernel @add") as info:
        pto.jit(f, machine="tiny", tile=dict(vec=(8, 96)))(pto.ones((64, 128)))
    # the add's line (the kernel's op), not this test's call line
    assert info.value.loc is not None and info.value.loc.line == first + 1


def test_a_relayout_takes_many_runs_per_grid_point_with_a_tail() -> None:
    # rows of 12 read as rows of 6 after a reshape: chunks of 12 elements (one row of 12, two
    # of 6), 1,031 of them (a prime: no count of chunks per point divides it); points take 85
    # chunks, the last fewer
    x = sample((1031, 12), pto.float32)
    fn = lambda x: pto.sum((x * 2.0).reshape(2062, 6), -1)  # noqa: E731
    kernels = pto.jit(fn, machine="tiny").lower(x).tile_ir.kernels
    (re,) = [k for k in kernels if k.name.startswith("relayout")]
    assert re.header() == "kernel @relayout grid(r=13) vec_tile(rows=2, cols=6)"
    got = np.asarray(pto.jit(fn, machine="tiny")(x))
    np.testing.assert_allclose(got, (np.asarray(x) * 2.0).reshape(2062, 6).sum(-1), rtol=1e-5)


def test_the_gradient_of_a_rotary_embedding_is_row_kernels_without_pads() -> None:
    # the backward of slicing t into halves pads each half's gradient with zeros and adds the
    # two: simplify makes that a concatenation, which the row kernel stores piece by piece
    def rope(t: Any, cos: Any, sin: Any) -> Any:
        t1, t2 = t[..., :16], t[..., 16:]
        return pto.concat([t1 * cos - t2 * sin, t1 * sin + t2 * cos], axis=-1)

    def loss(t: Any, cos: Any, sin: Any) -> Any:
        return (rope(t, cos, sin) ** 2).sum()

    rng = np.random.default_rng(0)
    t = rng.standard_normal((2, 16, 32)).astype(np.float32)
    cos, sin = (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(2))
    f = pto.jit(pto.grad(loss), machine="tiny")
    assert [k.kind for k in f.lower(t, cos, sin).tile_ir.kernels] == ["vector"] * 3
    want = jax.grad(pto.to_jax(loss))(t, cos, sin)
    np.testing.assert_allclose(np.asarray(f(t, cos, sin)), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_a_broadcast_is_an_op_of_the_row_kernel_that_reads_it() -> None:
    # a column, a row or one value broadcast to the kernel's rows is expanded in UB, not
    # copied through GM first (the softmax gradient's row sums, say)
    x, y = sample((4, 8, 1), pto.float32), sample((4, 8, 16), pto.float32, 1)
    s = sample((1,), pto.float32, 2)
    cases = [
        (lambda x, y: pto.broadcast_to(x, (4, 8, 16)) * y, (x, y)),
        (lambda y, s: pto.broadcast_to(s, (4, 8, 16)) + y, (y, s)),
        (lambda y: pto.sum(pto.broadcast_to(y[0, :1], (4, 8, 16)), -1), (y,)),
    ]
    for fn, args in cases:
        assert_same(fn, *args)
        last = pto.jit(fn, machine="tiny").lower(*args).tile_ir.kernels[-1]
        assert last.kind == "vector" and last.name.startswith("broadcast_to_")
    # a broadcast that only adds size-1 axes stays a view of its operand: no kernel
    f = pto.jit(lambda x: pto.broadcast_to(x, (4, 8, 1)).reshape(4, 8), machine="tiny")
    assert f.lower(x).tile_ir.kernels == ()


def test_a_softmax_backward_takes_its_matmuls_product_in_the_row_kernel_or_epilogue() -> None:
    # dP · P, the softmax backward's row-sum operand, is computed in the row kernel that loads
    # dP anyway: the matmul stores dP once, and no second full-size tensor goes through GM
    def f(a, b, p):
        dp = a @ b
        return p * (dp - (dp * p).sum(-1, keepdims=True))

    a, b = sample((64, 32), pto.float16), sample((32, 64), pto.float16, 1)
    p = sample((64, 64), pto.float16, 2)
    assert_same(f, a, b, p)
    low = pto.jit(f, machine="tiny").lower(a, b, p)
    assert [k.name for k in low.tile_ir.kernels] == ["matmul", "mul_sum_sub_mul"]
    mm = str(low.tile_ir.kernels[0])
    assert mm.count("tstore") == 1
    # in attention's gradient even the row sums leave the scores: Σ dP·P = Σ dO·O
    # (docs/autodiff.md), so dS = P·(dP - D) is the dP matmul's epilogue and no [Lq, Lk] row
    # kernel is left in the backward
    q = sample((2, 64, 32), pto.float16, 3)

    def loss(q):
        return pto.scaled_dot_product_attention(q, q, q, causal=True).astype(pto.float32).sum()

    low = pto.jit(pto.grad(loss), machine="tiny").lower(q)
    names = [k.name for k in low.tile_ir.kernels]
    assert names[:2] == ["matmul_mul_where", "max_sub_exp_sum_div"], names
    assert "matmul_sub_mul_where_mul" in names, names
    # the [Lq, Lk] tensors in GM (besides the rings' workspaces): S, P and dS only
    scores = re.findall(r"\.tensor (t\d*) f16\[128,64\] tmp", str(low.tile_ir))
    assert len(scores) == 3, scores


def test_a_literal_takes_the_kind_of_the_value_it_meets() -> None:
    # `1 - t` of a one-per-row value t (a row sum, a [1] operand) stays one value per row:
    # the literal was a whole-row constant, which made the result a row that the [1] output
    # could not hold (found by the gradient fuzzing: d tanh = 1 - tanh²)
    a, c = sample((2,), pto.float32), sample((2,), pto.float32, 1)
    b = sample((1,), pto.float32, 2)

    def f(a, b):
        t = pto.tanh(b)
        s = (c * a).sum(0, keepdims=True)
        return (s + s * t) * (1.0 - t), pto.where(s > 0.0, 2.0, t)

    assert_same(f, a, b)
    x = sample((4, 8), pto.float32, 3)
    assert_same(lambda x: 1.0 / (x.sum(-1, keepdims=True) + 3.0) - x, x)


def test_per_row_and_per_column_outputs_of_a_kernel_split_into_column_tiles() -> None:
    # a kernel whose rows split into column tiles (grid r by c) may also make a value with one
    # element per row ([R, 1]) or one row ([C]): the first column tile of each row stores the
    # former (every column tile storing it raced), and the first row tile of each column tile
    # the latter (only the very first tile stored it, leaving its other columns unwritten);
    # found by fuzzing on ascend910b
    x0, x1 = sample((2, 1), pto.float32), sample((16,), pto.float32, 1)
    x2 = sample((4, 16), pto.float32, 2)
    cases = [
        (lambda x0, x1: (x0 + x1, x0 + x0), (x0, x1)),
        (lambda x2, x1: (x2 + x1, x1 * 2.0), (x2, x1)),
    ]
    for fn, args in cases:
        assert_same(fn, *args, machine="ascend910b")
        k = pto.jit(fn, machine="ascend910b").lower(*args).tile_ir.kernels[0]
        assert "grid(r=" in k.header() and ", c=2)" in k.header(), k.header()


def test_ops_on_a_row_reduction_without_keepdims() -> None:
    """``sum(x, -1)`` of ``[16, 16]`` has the shape of one row, ``[16]``, but one value per
    row. An op on it in the same kernel took the shape's reading and stored the result as one
    value, from the first row only: ``mean(x, 1)`` of a square matrix was wrong everywhere
    but its first element, and so was ``x - sum(x, 1)``, where numpy broadcasts the sums
    along the rows. Ops among such values stay one value per row; against whole rows they
    are not a row kernel."""
    sq, wide = sample((16, 16), pto.float32), sample((16, 32), pto.float32, 1)
    b, cube = sample((16,), pto.float32, 2), sample((2, 8, 16), pto.float32, 3)
    cases = [
        (lambda x, b: pto.mean(x, 1), sq),
        (lambda x, b: pto.exp(pto.sum(x, 1) * 0.1) + b, sq),
        (lambda x, b: x - pto.sum(x, 1), sq),
        (lambda x, b: x * pto.max(x, 1), sq),
        (lambda x, b: (x + b, pto.sum(x, 1) + b), sq),
        (lambda x, b: pto.mean(x, -1) * b, wide),
        (lambda x, b: pto.tanh(pto.mean(x, -1)) * 3.0, cube),
    ]
    for fn, x in cases:
        assert_same(fn, x, b)
    # among themselves the values stay in the reduction's kernel
    assert len(pto.jit(cases[5][0], machine="tiny").lower(wide, b).tile_ir.kernels) == 1
