"""Matmul on the NPU path: every dtype, 2-D and batched, awkward sizes, fused epilogues on the
vector cores of the cluster, cube tile settings and their errors — against JAX within the
tolerance table (bit for bit against the interpreter where the summation order agrees)."""

from __future__ import annotations

import textwrap
from typing import Any

import jax
import ml_dtypes
import numpy as np
import pytest

import pypto as pto
from pypto.graph.tracer import trace
from pypto.reference import compare
from pypto.reference.jax_bridge import sum_lengths

MACHINES = ("tiny", "ascend910b")
F = (pto.float32, pto.float16, pto.bfloat16)


def arr(shape: tuple[int, ...], d: pto.DType, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if d in (pto.int8, pto.int32):
        return rng.integers(-100, 100, shape).astype(d.np)
    return rng.normal(0.0, 1.0, shape).astype(np.float32).astype(d.np)


def check(fn: Any, *args: np.ndarray, machine: str = "tiny") -> pto.Tensor:
    """The NPU result of ``fn`` equals JAX's within the tolerance table."""
    tensors = [pto.tensor(a) for a in args]
    out = pto.jit(fn, machine=machine)(*tensors)
    ref = np.asarray(pto.to_jax(fn)(*args))
    func, _, _ = trace(fn, tensors)
    (k,) = sum_lengths(func)
    assert out.shape == ref.shape
    c = compare("matmul", out, ref, k=k)
    assert c.ok, str(c)
    return out


def assert_same_products(got: Any, want: Any, a: np.ndarray, b: np.ndarray) -> None:
    """``got`` equals ``want`` but for the float32 products' summation order: BLAS orders a dot
    product by the operands' shapes (tile or whole matrix) and the CPU kernel it picks, and a
    product on the other side of a rounding boundary moves by one unit of the output dtype at
    the products' magnitude (and an epilogue may round it once more); a float32 sum itself
    moves by up to k units of float32."""
    got, want = np.asarray(got), np.asarray(want)
    mag = 2.0 ** np.ceil(np.log2(float(np.abs(a.astype(np.float32) @ b.astype(np.float32)).max())))
    eps32 = float(np.finfo(np.float32).eps)
    atol = max(2 * float(ml_dtypes.finfo(got.dtype).eps) * mag, a.shape[-1] * eps32 * mag)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=0, atol=atol)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("d", [*F, pto.int8, pto.int32], ids=lambda d: d.name)
def test_2d_every_dtype(d: pto.DType, machine: str) -> None:
    check(lambda a, b: a @ b, arr((48, 64), d), arr((64, 80), d, 1), machine=machine)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("d", [*F, pto.int8, pto.int32], ids=lambda d: d.name)
def test_batched_every_dtype(d: pto.DType, machine: str) -> None:
    check(lambda a, b: a @ b, arr((2, 3, 32, 48), d), arr((2, 3, 48, 16), d, 1), machine=machine)


@pytest.mark.parametrize(
    ("sa", "sb"),
    [
        ((2, 1, 32, 48), (3, 48, 16)),  # batch dims broadcast both ways
        ((4, 32, 48), (48, 16)),  # a 2-D right operand: the batch folds into M
        ((48,), (48, 16)),  # vector @ matrix
        ((32, 48), (48,)),  # matrix @ vector
        ((48,), (3, 48, 16)),  # vector @ batched
    ],
    ids=["broadcast", "fold", "vecmat", "matvec", "vec-batched"],
)
def test_shapes(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    check(lambda a, b: a @ b, arr(sa, pto.float16), arr(sb, pto.float16, 1))


@pytest.mark.parametrize("machine", MACHINES)
def test_awkward_sizes(machine: str) -> None:
    # no power of two divides 100 x 300 x 70 beyond 4: the tiles are equal divisors
    check(lambda a, b: a @ b, arr((100, 300), pto.float16), arr((300, 70), pto.float16, 1))


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_epilogue_bias_gelu(d: pto.DType, machine: str) -> None:
    def fn(x: Any, w: Any, b: Any) -> Any:
        return pto.gelu(x @ w + b)

    args = (arr((64, 32), d), arr((32, 96), d, 1), arr((96,), d, 2))
    out = check(fn, *args, machine=machine)
    # the epilogue rounds where eager mode does, so the NPU equals the interpreter (up to the
    # products' summation order)
    want = pto.jit(fn, backend="interpret")(*(pto.tensor(a) for a in args))
    assert_same_products(out, want, args[0], args[1])


@pytest.mark.parametrize("machine", MACHINES)
def test_epilogue_residual_and_cast(machine: str) -> None:
    d = pto.bfloat16
    check(
        lambda x, w, r: ((x @ w) + r).astype(pto.float32) * 2.0,
        arr((2, 32, 48), d),
        arr((48, 64), d, 1),
        arr((2, 32, 64), d, 2),
        machine=machine,
    )


def test_epilogue_is_one_cluster_kernel() -> None:
    x, w, b = arr((64, 32), pto.float16), arr((32, 96), pto.float16, 1), arr((96,), pto.float16)
    low = pto.jit(lambda x, w, b: pto.relu(x @ w + b), machine="tiny").lower(x, w, b)
    (k,) = low.tile_ir.kernels
    assert k.dist == "cluster" and [s.core for s in k.sections] == ["aic", "aiv"]
    isa = str(low.isa)
    # MPMD hand-off through the GM ring: cross-core flags, no barrier inside the kernel
    assert "XSET_FLAG FIX, aiv0" in isa and "XWAIT_FLAG MTE2, aic" in isa
    assert "BARRIER" not in isa


def test_matmul_output_used_by_epilogue_and_returned() -> None:
    x, w = pto.tensor(arr((32, 32), pto.float16)), pto.tensor(arr((32, 64), pto.float16, 1))

    def fn(x: Any, w: Any) -> Any:
        y = x @ w
        return y, pto.tanh(y)

    got = pto.jit(fn, machine="tiny")(x, w)
    want = pto.jit(fn, backend="interpret")(x, w)
    for g, v in zip(got, want, strict=True):
        assert_same_products(g, v, x.numpy(), w.numpy())


GOLDEN = """\
kernel @matmul_add_gelu grid(m=1, n=2) cube_tile(m=64, k=32, n=32, m0=64, k0=32, n0=32) on cluster {
  ring %ws aic->aiv x2 by %slot
  .aic
    %lin = smov %m*2+%n
    %it = sdiv %lin, %nblk
    %slot = smod %it, 2
    for %kb in 0..1 {
      %a1: L1 f16[64,32] = tload %x[%m*64 : +64, %kb*32 : +32]
      %b1: L1 f16[32,32] = tload %w[%kb*32 : +32, %n*32 : +32]
      for %kk in 0..1 {
        %a0_0: L0A f16[64,32] = textract %a1, 0, %kk*32
        %b0_0: L0B f16[32,32] = textract %b1, %kk*32, 0
        %acc_0_0: L0C f32[64,32] = tmatmul %a0_0, %b0_0
      }
    }
    tstore %ws[%blk*128+%slot*64 : +64, 0 : +32], %acc_0_0
  .aiv
    %lin = smov %m*2+%n
    %it = sdiv %lin, %nblk
    %slot = smod %it, 2
    %mm: UB f16[32,32] = tload %ws[%blk*128+%slot*64+%sub*32 : +32, 0 : +32]
    %x1: UB f16[1,32] = tload %b[0 : +1, %n*32 : +32]
    %t2: UB f16[32,32] = tadd %mm, %x1
    %t3: UB f16[32,32] = tmul %t2, %t2
    %t4: UB f16[32,32] = tmul %t3, %t2
    %t5: UB f16[32,32] = tmuls %t4, 0.044708251953125
    %t6: UB f16[32,32] = tadd %t2, %t5
    %t7: UB f16[32,32] = tmuls %t6, 0.7978515625
    %t8: UB f16[32,32] = ttanh %t7
    %t9: UB f16[32,32] = tadds %t8, 1.0
    %t10: UB f16[32,32] = tmuls %t9, 0.5
    %t11: UB f16[32,32] = tmul %t2, %t10
    tstore %out[%m*64+%sub*32 : +32, %n*32 : +32], %t11
}"""


def _text(k: Any) -> str:
    return "\n".join(ln.split("  #")[0] for ln in str(k).splitlines())


def _mlp_args() -> tuple[np.ndarray, ...]:
    return arr((64, 32), pto.float16), arr((32, 64), pto.float16, 1), arr((64,), pto.float16, 2)


def test_golden_matmul_bias_gelu() -> None:
    f = pto.jit(lambda x, w, b: pto.gelu(x @ w + b), machine="tiny")
    with pto.tile_shapes(cube=([64, 64], [32, 32], [32, 32])):
        low = f.lower(*_mlp_args())
        (k,) = low.tile_ir.kernels
    assert _text(k) == textwrap.dedent(GOLDEN)


def test_cube_tiles_change_tile_ir_and_cycles() -> None:
    a, b = arr((128, 256), pto.float16), arr((256, 128), pto.float16, 1)
    texts, cycles = [], []
    for cube in (([64, 64], [32, 64], [64, 64]), ([128, 128], [64, 256], [128, 128])):
        f = pto.jit(lambda x, y: x @ y, machine="tiny", tile=dict(cube=cube))
        texts.append(str(f.lower(a, b).tile_ir))
        prof = f.profile(a, b)
        cycles.append(prof.cycles)
        assert_same_products(prof.outputs[0], a @ b, a, b)
    assert texts[0] != texts[1]
    assert "cube_tile(m=64, k=64, n=64, m0=64, k0=32, n0=64)" in texts[0]
    assert "cube_tile(m=128, k=256, n=128, m0=128, k0=64, n0=128)" in texts[1]
    assert cycles[0] != cycles[1]


@pytest.mark.parametrize(
    ("cube", "words"),
    [
        (
            ([128, 128], [512, 512], [128, 128]),
            ["L0A needs 131072 bytes (two 128x256 f16 tiles)", "tiny has 65536"],
        ),
        (([48, 48], [64, 64], [64, 64]), ["m=[48, 48] does not divide m = 128"]),
        (([64, 64], [8, 64], [64, 64]), ["k0 = 8 f16 elements = 16 bytes", "multiple of 32"]),
        (([128, 128], [64, 64], [512, 512]), ["L0C needs 262144", "L0B needs"]),
    ],
    ids=["l0a", "divide", "align", "l0c"],
)
def test_cube_tile_errors(cube: Any, words: list[str]) -> None:
    a, b = arr((128, 256), pto.float16), arr((256, 512), pto.float16, 1)
    f = pto.jit(lambda x, y: x @ y, machine="tiny", tile=dict(cube=cube))
    with pytest.raises(pto.TileError) as ei:
        f.lower(a, b)
    msg = str(ei.value)
    for w in words:
        assert w in msg, msg
    assert "tiles that fit: pto.set_cube_tile_shapes(" in msg


def test_cube_tile_error_hint_fits() -> None:
    a, b = arr((128, 256), pto.float16), arr((256, 256), pto.float16, 1)
    f = pto.jit(
        lambda x, y: x @ y, machine="tiny", tile=dict(cube=([128, 128], [512, 512], [128, 128]))
    )
    with pytest.raises(pto.TileError) as ei:
        f.lower(a, b)
    hint = str(ei.value).split("set_cube_tile_shapes(")[1].split(")")[0]
    fit = eval(f"({hint})")  # the suggested tiles compile and run
    g = pto.jit(lambda x, y: x @ y, machine="tiny", tile=dict(cube=fit))
    assert_same_products(g(a, b), pto.tensor(a) @ pto.tensor(b), a, b)


def test_user_cube_tiles_for_a_product_whose_epilogue_no_tiling_fits() -> None:
    # tanh(x xᵀ · 0.3) with x [3, 1]: no cube tiles carry the epilogue (3 rows do not split
    # between the two vector cores), so the product and its epilogue lower apart; with the
    # user's cube tiles too, as without them. It used to raise "no cube tiles fit", with no
    # hint (found by fuzzing user tiles)
    x = arr((3, 1), pto.float32)
    kernels = []
    for tile in (None, dict(cube=([16, 16], [16, 16], [16, 16]))):
        f = pto.jit(lambda x: pto.tanh(x @ x.T * 0.3), machine="ascend910b", tile=tile)
        kernels.append([k.kind for k in f.lower(x).tile_ir.kernels])
        np.testing.assert_allclose(np.asarray(f(x)), np.tanh(x @ x.T * 0.3), rtol=1e-6)
    assert kernels[0] == kernels[1] and kernels[0][-2:] == ["matmul", "vector"], kernels


def test_grad_of_mlp_on_npu_equals_jax() -> None:
    def mlp(x: Any, w1: Any, b1: Any, w2: Any) -> Any:
        h = pto.gelu(x @ w1 + b1)
        return ((h @ w2) ** 2).mean()

    args = (
        arr((16, 32), pto.float32),
        arr((32, 48), pto.float32, 1) * np.float32(0.2),
        arr((48,), pto.float32, 2),
        arr((48, 8), pto.float32, 3) * np.float32(0.2),
    )
    got = pto.jit(pto.grad(mlp, argnums=(1, 2, 3)), machine="tiny")(*args)
    want = jax.grad(pto.to_jax(mlp), argnums=(1, 2, 3))(*args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("d", [pto.int8, pto.float16], ids=lambda d: d.name)
def test_odd_rows_with_a_vector_part(d: pto.DType) -> None:
    # an odd M cannot be halved between the vector cores: int8 runs all on the vector cores,
    # an epilogue is left unfused
    check(lambda a, b: a @ b, arr((7, 33), d), arr((33, 5), d, 1), machine="ascend910b")
    if d.is_floating:
        check(lambda a, b: pto.gelu(a @ b), arr((5, 8), d), arr((8, 3), d, 1))


@pytest.mark.parametrize("machine", MACHINES)
def test_wide_tile_epilogue_in_column_chunks(machine: str) -> None:
    # A 128 x 256 output tile's epilogue of several ops does not fit UB in one piece: each
    # vector core finishes its 64 x 256 half in column chunks, reading the ring slot once.
    def fn(x: Any, w: Any, b: Any, r: Any) -> Any:
        return pto.silu(x @ w + b) * r

    d = pto.float16
    args = (arr((256, 256), d), arr((256, 512), d, 1), arr((512,), d, 2), arr((256, 512), d, 3))
    with pto.tile_shapes(cube=([128, 128], [64, 256], [256, 256])):
        tile_ir = str(pto.jit(fn, machine=machine).lower(*args).tile_ir)
        out = check(fn, *args, machine=machine)
    loads = [ln for ln in tile_ir.splitlines() if "tload %ws" in ln]
    assert "cube_tile(m=128, k=256, n=256" in tile_ir and len(loads) > 1
    cols = [ln.split(",")[-1].split(":")[0].strip() for ln in loads]
    assert cols[0] == "0" and len(set(cols)) == len(cols)  # chunks side by side
    want = pto.jit(fn, backend="interpret")(*(pto.tensor(a) for a in args))
    assert_same_products(out, want, args[0], args[1])


def kernels(fn: Any, *args: np.ndarray, machine: str = "tiny") -> list[Any]:
    return list(pto.jit(fn, machine=machine).lower(*map(pto.tensor, args)).tile_ir.kernels)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_transposed_operands_are_read_by_the_cube_core(d: pto.DType, machine: str) -> None:
    # x @ w.T (a weight stored [out, in]), a.T @ b and both, as a backward pass has them
    x, w = arr((96, 64), d), arr((80, 64), d, 1)
    at, b = arr((64, 96), d, 2), arr((64, 80), d, 3)
    cases = [
        (lambda x, w: x @ w.T, x, w),
        (lambda a, b: a.T @ b, at, b),
        (lambda a, w: a.T @ w.T, at, w),
        (lambda x, w: pto.gelu(x @ w.T + 1.0), x, w),
    ]
    for fn, p, q in cases:
        check(fn, p, q, machine=machine)
        (k,) = kernels(fn, p, q, machine=machine)
        assert k.kind == "matmul" and "textract_t" in str(k)


def test_transposed_operands_in_batches_reuse_and_edge_tiles() -> None:
    d = pto.float16
    # batched (the last two axes of each batch), an A block kept for several output tiles,
    # and tiles that leave a partial last row and column
    q, k = arr((4, 64, 32), d), arr((4, 48, 32), d, 1)
    check(lambda q, k: q @ k.transpose((0, 2, 1)), q, k)
    check(lambda a, b: a.transpose((0, 2, 1)) @ b, arr((4, 32, 64), d), arr((4, 32, 48), d, 1))
    (km,) = kernels(lambda x, w: x @ w.T, arr((128, 256), d), arr((192, 256), d, 1))
    assert "reuse=" in km.header()
    check(lambda x, w: x @ w.T, arr((128, 256), d), arr((192, 256), d, 1))
    edge = (lambda x, w: x @ w.T, arr((1000, 3000), d), arr((700, 3000), d, 1))
    check(*edge, machine="ascend910b")
    (ke,) = kernels(*edge, machine="ascend910b")
    assert "%emp" in str(ke) or "%enp" in str(ke)  # the partial tile's code


def test_a_transpose_read_elsewhere_or_folded_stays_a_kernel() -> None:
    d = pto.float16
    x, w = arr((32, 64), d), arr((48, 64), d, 1)

    def twice(x: Any, w: Any) -> Any:
        t = w.T
        return x @ t, t * 2.0

    assert [k.kind for k in kernels(twice, x, w)].count("layout") == 1
    out = pto.jit(twice, machine="tiny")(x, w)
    ref = pto.to_jax(twice)(x, w)
    for o, r in zip(out, ref, strict=True):
        np.testing.assert_allclose(np.asarray(o, np.float32), np.asarray(r, np.float32), atol=0.1)
    # A with batch dims folded into M (2-D B) is not one window of its transpose's source
    fold = (lambda a, b: a.transpose((0, 2, 1)) @ b, arr((2, 32, 16), d), arr((32, 24), d, 1))
    check(*fold)
    assert "layout" in [k.kind for k in kernels(*fold)]


def test_grad_of_a_linear_layer_reads_its_transposes_in_place() -> None:
    def loss(x: Any, w: Any) -> Any:
        return (pto.tanh(x @ w.T) ** 2).sum()

    x, w = arr((64, 32), pto.float32), arr((48, 32), pto.float32, 1) * np.float32(0.2)
    f = pto.jit(pto.grad(loss, argnums=(0, 1)), machine="tiny")
    got = f(x, w)
    want = jax.grad(pto.to_jax(loss), argnums=(0, 1))(x, w)
    for g, wv in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(wv), rtol=1e-4, atol=1e-4)
    # wᵀ (forward) is read in place, and dw = (xᵀ g)ᵀ is computed as gᵀ x: no copy kernels
    ks = f.lower(x, w).tile_ir.kernels
    assert [k.kind for k in ks] == ["matmul", "matmul", "matmul"]


@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_a_transposed_product_is_computed_transposed(d: pto.DType) -> None:
    a, b = arr((64, 32), d), arr((32, 48), d, 1)
    a3, b3 = arr((3, 64, 32), d, 2), arr((3, 32, 48), d, 3)
    cases = [
        (lambda a, b: (a @ b).T, a, b),
        (lambda a, b: (a.T @ b).T, arr((32, 64), d, 4), b),
        (lambda a, b: (a @ b).transpose((0, 2, 1)), a3, b3),
        (lambda a, b: (a @ b).transpose((0, 2, 1)), a3, b),
    ]
    for fn, p, q in cases:
        check(fn, p, q)
        (k,) = kernels(fn, p, q)
        assert k.kind == "matmul"
    # the product also read elsewhere is stored as it is, and transposed by a kernel
    both = (lambda a, b: ((a @ b).T, (a @ b) * 2.0), a, b)
    assert "layout" in [k.kind for k in kernels(*both)]


@pytest.mark.parametrize("machine", MACHINES)
def test_an_epilogue_over_one_row_is_stored_once(machine: str) -> None:
    # both vector cores take the single row from the ring; two stores of it would race
    check(lambda x, w: pto.tanh(x @ w), arr((1, 16), pto.float16), arr((16, 32), pto.float16, 1))
    x3, w3 = arr((3, 1, 16), pto.float16, 2), arr((3, 16, 32), pto.float16, 3)
    check(lambda x, w: pto.gelu(x @ w) * 2.0, x3, w3, machine=machine)


def test_a_transpose_read_by_several_matmuls_is_read_in_place_by_each() -> None:
    # xᵀ serves both weight gradients: each matmul reads x itself through TEXTRACT_T
    def loss(x: Any, w1: Any, w2: Any) -> Any:
        return (pto.tanh(x @ w1) * (x @ w2)).sum()

    x = arr((64, 32), pto.float32)
    w1, w2 = (arr((32, 48), pto.float32, s) * np.float32(0.2) for s in (1, 2))
    f = pto.jit(pto.grad(loss, argnums=(1, 2)), machine="tiny")
    got = f(x, w1, w2)
    want = jax.grad(pto.to_jax(loss), argnums=(1, 2))(x, w1, w2)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)
    kinds = [k.kind for k in f.lower(x, w1, w2).tile_ir.kernels]
    assert "layout" not in kinds and kinds.count("matmul") == 4


@pytest.mark.parametrize("machine", MACHINES)
def test_an_epilogue_may_read_an_operand_repeating_over_the_batch(machine: str) -> None:
    # scores of every head, scaled and masked by one [s, s] mask: one cluster kernel, the
    # mask read at the output row modulo s
    q, k = arr((4, 256, 64), pto.float16), arr((4, 64, 256), pto.float16, 1)
    mask = np.tril(np.ones((256, 256), bool))

    def scores(q: Any, k: Any, m: Any) -> Any:
        return pto.where(m, (q @ k) * 0.125, -1e4)

    check(scores, q, k, mask, machine=machine)
    ks = kernels(scores, q, k, mask, machine=machine)
    assert [x.kind for x in ks] == ["matmul"] and "smod" in str(ks[0])


def test_an_epilogue_the_matmul_cannot_take_is_still_one_row_kernel() -> None:
    # a matrix-vector product keeps no epilogue on its cluster: the matmul stores its result
    # and the epilogue's ops run as one row kernel, not one kernel each
    def f(x: Any, v: Any) -> Any:
        return pto.tanh(x @ v + 1.0) * 0.5

    x, v = arr((64, 32), pto.float32), arr((32,), pto.float32, 1)
    check(f, x, v)
    ks = kernels(f, x, v)
    assert ks[0].kind == "matmul" and ks[-1].name == "add_tanh_mul"


@pytest.mark.parametrize("machine", MACHINES)
def test_batched_products_read_head_splits_in_place(machine: str) -> None:
    # q kᵀ and p v over heads split from [s, h*d] (or [b, s, h, d]): each batch index steps
    # the columns of the stored projection; no transpose kernels
    d = pto.float16
    x, y = arr((64, 2 * 32), d), arr((64, 2 * 32), d, 1)

    def split(t: Any) -> Any:
        return t.reshape(64, 2, 32).transpose((1, 0, 2))

    def scores(x: Any, y: Any) -> Any:
        return split(x) @ split(y).transpose((0, 2, 1))

    def mix(x: Any, y: Any) -> Any:
        return pto.tanh(scores(x, y) * 0.1) @ split(y)

    x4 = arr((2, 64, 2, 32), d, 2)

    def four(x: Any) -> Any:
        return x.transpose((0, 2, 1, 3)) @ x.transpose((0, 2, 3, 1))

    for fn, args in ((scores, (x, y)), (mix, (x, y)), (four, (x4,))):
        check(fn, *args, machine=machine)
        assert {k.kind for k in kernels(fn, *args, machine=machine)} == {"matmul"}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_a_batched_product_stores_through_the_head_merge_after_it(
    d: pto.DType, machine: str
) -> None:
    # [h, s, d] products merged back to [s, h*d]: the fixpipe stores each head's tiles at its
    # columns of the merged result, and the merge is no kernel
    p, v = arr((4, 64, 96), d), arr((4, 96, 32), d, 1)

    def fn(p: Any, v: Any) -> Any:
        return (p @ v).transpose(1, 0, 2).reshape(64, 128)

    check(fn, p, v, machine=machine)
    (k,) = pto.jit(fn, machine=machine).lower(p, v).tile_ir.kernels
    assert k.kind == "matmul" and "%b0*32" in str(k)  # head b0 at columns b0*32


@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_a_transposed_operand_after_a_row_kernel_is_read_in_place(d: pto.DType) -> None:
    # `w.T` comes between the row kernel making A and the matmul: the row kernel is lowered
    # first and the transpose waits for the matmul, which reads w's blocks transposed
    x, w = arr((128, 256), d), arr((192, 256), d, 1)

    def fn(x: Any, w: Any) -> Any:
        return (pto.exp(x) * 0.5) @ w.T

    check(fn, x, w)
    kinds = [k.name for k in pto.jit(fn, machine="tiny").lower(x, w).tile_ir.kernels]
    assert kinds == ["exp_mul", "matmul"]


def _read_ahead_blocks(prof: Any, tensor: str, rows: int, cols: int) -> list[tuple[int, int]]:
    """The (row block, column block) of every ``[rows, cols]`` block of ``tensor`` that the
    vector cores read, once per block they touched (a block read in several windows counts
    once per read of its first rows)."""
    out = []
    for w in prof.windows(tensor, "TLOAD"):
        if w.event.core.startswith("aiv") and w.row % rows == 0:
            out.append((w.row // rows, w.col // cols))
    return sorted(out)


@pytest.mark.parametrize(
    "epilogue,transposed",
    [(False, False), (True, False), (True, True)],
    ids=["plain", "epilogue", "at"],
)
def test_vector_cores_read_operands_ahead_of_the_cube(epilogue: bool, transposed: bool) -> None:
    """Several waves of tiles on ascend910b: the vector cores read each A block once per band
    and each B block once (as the cube core reads them: A transposed in place too), into a
    scratch tile nothing uses, so the cube's loads hit L2; the result is the same bit for
    bit, the cube cores' MTE2 time and the run's cycles fall, and
    ``tile=dict(read_ahead=False)`` leaves the reads out."""
    a, b = arr((1024, 1024), pto.float16), arr((1024, 1024), pto.float16, seed=1)
    cube = ([128, 128], [64, 256], [256, 256])  # 8 x 4 tiles (more than 24 clusters), 4 K blocks

    def fn(x: Any, y: Any) -> Any:
        p = (x.T if transposed else x) @ y
        return pto.relu(p) if epilogue else p

    runs = {}
    for ahead in (True, False):
        f = pto.jit(fn, machine="ascend910b", tile=dict(cube=cube, read_ahead=ahead))
        (k,) = f.lower(a, b).tile_ir.kernels
        text = str(k)
        assert ("pfa" in text and "pfb" in text) == ahead, text
        runs[ahead] = (f.profile(a, b, trace=True), text)
    on, off = runs[True][0], runs[False][0]
    assert on.outputs is not None and off.outputs is not None
    got = on.outputs[0].numpy()
    np.testing.assert_array_equal(got, off.outputs[0].numpy())
    ref = np.asarray(pto.to_jax(fn)(a, b))
    c = compare("read-ahead", got, ref.astype(got.dtype), k=1024)
    assert c.ok, str(c)
    # bands of 4 tile rows (8 rows: 2 bands) walked column by column; B (2 MiB) stays in L2
    # (x stored [K, M] when read transposed: its blocks are [256, 128] at (k, m))
    ax = (256, 128) if transposed else (128, 256)
    once = sorted((k, m) if transposed else (m, k) for m in range(8) for k in range(4))
    assert _read_ahead_blocks(on, "x", *ax) == once
    assert _read_ahead_blocks(on, "y", 256, 256) == sorted(
        (k, n) for k in range(4) for n in range(4)
    )
    assert not _read_ahead_blocks(off, "x", *ax) and not _read_ahead_blocks(off, "y", 256, 256)

    def cube_mte2(p: Any) -> float:
        return sum(
            v for (core, pipe), v in p.busy.items() if core.startswith("aic") and pipe == "MTE2"
        )

    assert cube_mte2(on) < 0.9 * cube_mte2(off)
    assert on.cycles < off.cycles

    # an L2 too small for A, B and C together: a plain product's vector cores, which would run
    # ahead through the whole grid, read nothing; under an epilogue they read B in every band.
    # The code is the same, only its loop bounds differ
    small = pto.npu.machine("ascend910b").replace(l2_bytes=4 << 20, name="ascend910b-4mib")
    f = pto.jit(fn, machine=small, tile=dict(cube=cube))
    prof = f.profile(a, b, trace=True)
    assert [len(c.body) for c in f.lower(a, b).isa.cores] == [
        len(c.body)
        for c in pto.jit(fn, machine="ascend910b", tile=dict(cube=cube)).lower(a, b).isa.cores
    ]
    twice = sorted([(k, n) for k in range(4) for n in range(4)] * 2)
    assert _read_ahead_blocks(prof, "x", *ax) == (once if epilogue else [])
    assert _read_ahead_blocks(prof, "y", 256, 256) == (twice if epilogue else [])


def test_an_epilogue_reads_ahead_for_its_clusters_next_tile() -> None:
    """Under an epilogue the vector cores reach a tile's code only when the cube has finished
    the one before, too late to read that tile's first blocks ahead of it: they read for the
    tile their cluster runs next (and for their first), so a product with an epilogue runs
    as fast as without one."""
    a, b = np.zeros((2048, 4096), np.float16), np.zeros((4096, 11008), np.float16)
    plain = pto.jit(lambda x, y: x @ y, machine="ascend910b")
    silu = pto.jit(lambda x, y: pto.silu(x @ y), machine="ascend910b")
    (k,) = silu.lower(a, b).tile_ir.kernels
    aiv = str(k).split(".aiv")[1]
    assert "%t = sadd %t, %nblk" in aiv and "%t = ssub %t, %nblk" in aiv
    p0 = plain.profile(a, b, numerics=False)
    p1 = silu.profile(a, b, numerics=False)
    assert p1.cycles < 1.005 * p0.cycles


# ---- a rotary embedding as the projection's epilogue


def rotary(seq: int, heads: int, hd: int) -> Any:
    """A Q or K projection split into heads and rotated (LLaMA's rotate-half form)."""
    half = hd // 2

    def fn(x: Any, w: Any, cos: Any, sin: Any) -> Any:
        t = (x @ w).reshape(seq, heads, hd).transpose((1, 0, 2))
        t1, t2 = t[..., :half], t[..., half:]
        return pto.concat([t1 * cos - t2 * sin, t1 * sin + t2 * cos], axis=-1)

    return fn


def rotary_args(d: pto.DType, seq: int = 64, heads: int = 4, hd: int = 32) -> tuple[Any, ...]:
    n = heads * hd
    w = arr((n, n), d, 1) * np.asarray(n**-0.5, d.np)
    return arr((seq, n), d), w, arr((seq, hd // 2), d, 2), arr((seq, hd // 2), d, 3)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("d", F, ids=lambda d: d.name)
def test_rotary_embedding_is_the_projections_epilogue(d: pto.DType, machine: str) -> None:
    fn, args = rotary(64, 4, 32), rotary_args(d)
    out = check(fn, *args, machine=machine)
    # the epilogue rounds where eager mode does: the interpreter's result up to the products'
    # summation order
    want = pto.jit(fn, backend="interpret")(*(pto.tensor(a) for a in args))
    assert_same_products(out, want, args[0], args[1])
    # one cluster kernel: neither the product nor its head split goes to GM
    (k,) = kernels(fn, *args, machine=machine)
    assert k.kind == "matmul" and k.dist == "cluster" and k.name == "matmul_mul_sub_add"


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(
    ("seq", "heads", "hd", "d"),
    [(32, 4, 8, pto.float16), (48, 3, 32, pto.bfloat16), (16, 8, 64, pto.float32)],
    ids=["hd8", "three-heads", "hd64"],
)
def test_rotary_epilogue_shapes(seq: int, heads: int, hd: int, d: pto.DType, machine: str) -> None:
    # narrow heads (4-column halves), a head count that splits tiles unevenly, wide heads
    fn, args = rotary(seq, heads, hd), rotary_args(d, seq, heads, hd)
    want = pto.jit(fn, backend="interpret")(*(pto.tensor(a) for a in args))
    assert_same_products(pto.jit(fn, machine=machine)(*args), want, args[0], args[1])
    assert [k.name for k in kernels(fn, *args, machine=machine)] == ["matmul_mul_sub_add"]


ROTARY_GOLDEN = (
    "kernel @matmul_mul_sub_add grid(m=1, n=2) "
    + """\
cube_tile(m=32, k=64, n=64, m0=32, k0=64, n0=64) on cluster {
  ring %ws aic->aiv x2 by %slot
  .aic
    %lin = smov %m*2+%n
    %it = sdiv %lin, %nblk
    %slot = smod %it, 2
    for %kb in 0..2 {
      %a1: L1 f16[32,64] = tload %x[%m*32 : +32, %kb*64 : +64]
      %b1: L1 f16[64,64] = tload %w[%kb*64 : +64, %n*64 : +64]
      for %kk in 0..1 {
        %a0_0: L0A f16[32,64] = textract %a1, 0, %kk*64
        %b0_0: L0B f16[64,64] = textract %b1, %kk*64, 0
        %z = smin %kb+%kk, 1
        for %i0 in %z..1 {
          %acc_0_0: L0C f32[32,64] = tmatmul %a0_0, %b0_0
        }
        for %i1 in 0..%z {
          %acc_0_0: L0C f32[32,64] = tmatmul_acc %a0_0, %b0_0
        }
      }
    }
    tstore %ws[%blk*64+%slot*32 : +32, 0 : +64], %acc_0_0
  .aiv
    %lin = smov %m*2+%n
    %it = sdiv %lin, %nblk
    %slot = smod %it, 2
    %w1: UB f16[16,16] = tload %ws[%blk*64+%slot*32+%sub*16 : +16, 0 : +16]
    %w2: UB f16[16,16] = tload %ws[%blk*64+%slot*32+%sub*16 : +16, 16 : +16]
    %px3 = smod %n*64+%m*32+%sub*16, 32
    %x3: UB f16[16,16] = tload %cos[%px3 : +16, 0 : +16]
    %px4 = smod %n*64+%m*32+%sub*16, 32
    %x4: UB f16[16,16] = tload %sin[%px4 : +16, 0 : +16]
    %t5: UB f16[16,16] = tmul %w1, %x3
    %t6: UB f16[16,16] = tmul %w2, %x4
    %t7: UB f16[16,16] = tsub %t5, %t6
    %t8: UB f16[16,16] = tmul %w1, %x4
    %t9: UB f16[16,16] = tmul %w2, %x3
    %t10: UB f16[16,16] = tadd %t8, %t9
    tstore %out[%n*64+%m*32+%sub*16 : +16, 0 : +16], %t7
    tstore %out[%n*64+%m*32+%sub*16 : +16, 16 : +16], %t10
    %w1: UB f16[16,16] = tload %ws[%blk*64+%slot*32+%sub*16 : +16, 32 : +16]
    %w2: UB f16[16,16] = tload %ws[%blk*64+%slot*32+%sub*16 : +16, 48 : +16]
    %t5: UB f16[16,16] = tmul %w1, %x3
    %t6: UB f16[16,16] = tmul %w2, %x4
    %t7: UB f16[16,16] = tsub %t5, %t6
    %t8: UB f16[16,16] = tmul %w1, %x4
    %t9: UB f16[16,16] = tmul %w2, %x3
    %t10: UB f16[16,16] = tadd %t8, %t9
    tstore %out[%n*64+%m*32+%sub*16+32 : +16, 0 : +16], %t7
    tstore %out[%n*64+%m*32+%sub*16+32 : +16, 16 : +16], %t10
}"""
)


def test_golden_rotary_epilogue() -> None:
    # two heads of 32 columns per [32, 64] tile: each vector core takes its 16 rows of both
    # halves of each head from the ring, loads cos and sin once per tile, and stores both
    # halves of the rotated head at its rows of the [heads * seq, 32] result
    fn, args = rotary(32, 4, 32), rotary_args(pto.float16, seq=32)
    tile = dict(cube=([32, 32], [64, 64], [64, 64]), read_ahead=False)
    (k,) = pto.jit(fn, machine="tiny", tile=tile).lower(*args).tile_ir.kernels
    assert _text(k) == textwrap.dedent(ROTARY_GOLDEN)


def test_a_rotary_epilogue_needs_whole_heads_and_an_unread_product() -> None:
    fn, args = rotary(64, 4, 32), rotary_args(pto.float16)
    # cube tiles narrower than a head: the product is stored and rotated by a row kernel
    narrow = pto.jit(fn, machine="tiny", tile=dict(cube=([64, 64], [32, 32], [16, 16])))
    want = pto.jit(fn, backend="interpret")(*(pto.tensor(a) for a in args))
    assert_same_products(narrow(*args), want, args[0], args[1])
    assert [k.kind for k in narrow.lower(*args).tile_ir.kernels] == ["matmul", "vector"]

    # the projection also returned: stored as it is, and rotated by a row kernel
    def both(x: Any, w: Any, cos: Any, sin: Any) -> Any:
        return fn(x, w, cos, sin), x @ w

    got = pto.jit(both, machine="tiny")(*args)
    want = pto.jit(both, backend="interpret")(*(pto.tensor(a) for a in args))
    for g, wv in zip(got, want, strict=True):
        assert_same_products(g, wv, args[0], args[1])
    assert [k.kind for k in kernels(both, *args)] == ["matmul", "vector"]


def test_grad_through_a_rotary_epilogue() -> None:
    fn, args = rotary(64, 4, 32), rotary_args(pto.float32)

    def loss(x: Any, w: Any, cos: Any, sin: Any) -> Any:
        return (fn(x, w, cos, sin) ** 2).sum()

    got = pto.jit(pto.grad(loss, argnums=(0, 1)), machine="tiny")(*args)
    want = jax.grad(pto.to_jax(loss), argnums=(0, 1))(*args)
    for g, wv in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(wv), rtol=1e-4, atol=1e-4)


def test_decoder_block_rotates_q_and_k_in_their_projections() -> None:
    from pypto.models import decoder, decoder_jax, params, rope_tables

    p = params(128, 256)
    cos, sin = rope_tables(64, 32)
    x = arr((64, 128), pto.float32)
    f = pto.jit(decoder, machine="tiny")
    names = [k.name for k in f.lower(x, p, cos, sin).tile_ir.kernels]
    assert names[1:3] == ["matmul_mul_sub_add", "matmul_mul_sub_add1"]
    got = np.asarray(f(x, p, cos, sin))
    want = np.asarray(decoder_jax(x, p, cos, sin))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_rotary_epilogue_keeps_apart_ops_hinted_two_ways() -> None:
    # the projection hinted onto 2 clusters and its rotation onto 4 vector cores: the two
    # cannot be one kernel, so they stay two (and lower without a hint conflict)
    half = 16

    def fn(x: Any, w: Any, cos: Any, sin: Any) -> Any:
        with pto.hint(cores=2):
            y = x @ w
        with pto.hint(cores=4):
            t = y.reshape(64, 4, 32).transpose((1, 0, 2))
            t1, t2 = t[..., :half], t[..., half:]
            return pto.concat([t1 * cos - t2 * sin, t1 * sin + t2 * cos], axis=-1)

    args = rotary_args(pto.float16)
    ks = kernels(fn, *args, machine="ascend910b")
    assert [k.kind for k in ks] == ["matmul", "vector"]
    want = pto.jit(fn, backend="interpret")(*(pto.tensor(a) for a in args))
    assert_same_products(pto.jit(fn, machine="ascend910b")(*args), want, args[0], args[1])


@pytest.mark.parametrize("d", [pto.float16, pto.bfloat16], ids=lambda d: d.name)
def test_without_cube_tiles_half_precision_still_accumulates_in_float32(d: pto.DType) -> None:
    """A machine whose L0C holds no 16 x 16 accumulator runs matmuls on the vector cores; they
    accumulate float16/bfloat16 products in float32 and round once, as the cube does (they
    summed in the operands' dtype: 12% off at K = 2048)."""
    m = pto.npu.machine("tiny").replace(l0c_bytes=512, name="tiny-no-l0c")
    a, b = arr((16, 2048), d, 11), arr((2048, 32), d, 12)
    f = pto.jit(lambda x, y: x @ y, machine=m)
    assert "vec_tile" in f.lower(a, b).tile_ir.kernels[0].header()
    out = np.asarray(f(a, b)).astype(np.float32)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(d.np).astype(np.float32)
    # one rounding of a float32 sum: within one unit of the result dtype (summation order)
    ulp = np.abs(want) * (2.0**-10 if d is pto.float16 else 2.0**-7) + 1e-6
    assert (np.abs(out - want) <= ulp).all()
