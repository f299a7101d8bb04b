"""Hand-written tile kernels (``@pto.kernel``): interpret mode and the NPU path agree on every
kernel here, both equal JAX, the Tile IR is what the body says, and mistakes point at the
kernel's own lines."""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pypto as pto
from pypto import tile as tl
from pypto.reference import compare
from pypto.tile.examples import flash_attention, rms_norm_matmul

RNG = np.random.default_rng(7)
HERE = "test_kernel.py"


def normal(shape: tuple[int, ...], d: Any = np.float16, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32).astype(d)


def line_of(fn: Any, text: str) -> int:
    """The line of ``fn``'s source that contains ``text``."""
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


def agree(kernel_out: Any, npu_out: Any, want: Any, k: int, what: str) -> None:
    """Interpret mode and the NPU path agree, and both match the reference."""
    a, b = np.asarray(kernel_out), np.asarray(npu_out)
    ab = compare(f"{what}: npu vs interpret", b, a, k=k)
    assert ab.ok, str(ab)
    for name, x in (("interpret", a), ("npu", b)):
        c = compare(f"{what}: {name} vs JAX", x, np.asarray(want), k=k)
        assert c.ok, str(c)


# ---------------------------------------------------------------- the example kernels
@pytest.mark.parametrize("dtype", [pto.float16, pto.bfloat16, pto.float32])
def test_flash_attention_kernel_equals_jax_in_interpret_mode_and_on_the_npu(dtype: Any) -> None:
    q, k, v = (normal((2, 128, 64), dtype.np) for _ in range(3))
    kt = np.swapaxes(k, -1, -2).copy()
    tile = dict(bq=64, bk=32, scale=0.125)
    interp = flash_attention(q, kt, v, **tile)
    npu = pto.jit(lambda q, kt, v: flash_attention(q, kt, v, **tile), machine="tiny")(q, kt, v)
    f32 = jnp.float32
    s = jnp.einsum("bqd,bkd->bqk", q.astype(f32), k.astype(f32)) * 0.125
    want = jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v.astype(f32))
    agree(interp, npu, want.astype(q.dtype), 64 + 128, f"flash attention {dtype.name}")


def test_flash_attention_kernel_next_to_tensor_ops_on_the_big_chip() -> None:
    q, k, v = (normal((4, 128, 64)) for _ in range(3))

    def attn(q: Any, k: Any, v: Any) -> Any:
        kt = pto.transpose(k, (0, 2, 1))  # a compiled layout kernel feeds the hand-written one
        return flash_attention(q, kt, v, bq=64, bk=64, scale=0.125) * 2.0

    f = pto.jit(attn)
    prof = f.profile(q, k, v)
    compiled = pto.jit(lambda q, k, v: pto.scaled_dot_product_attention(q, k, v, scale=0.125) * 2)
    want = compiled(q, k, v)
    c = compare("kernel vs compiled sdpa", prof.outputs[0].numpy(), want.numpy(), k=192)
    assert c.ok, str(c)
    names = [kn.name for kn in f.lower(q, k, v).tile_ir.kernels]
    assert "flash_attention" in names and len(names) == 3
    # the cube and both vector cores of every busy cluster did work
    cores = {e.core for e in prof.events if e.op in ("TMATMUL", "TEXP")}
    assert {c for c in cores if c.startswith("aic")} and {c for c in cores if "aiv" in c}


@pytest.mark.parametrize("dtype", [pto.float16, pto.bfloat16])
def test_rms_norm_matmul_kernel_equals_jax_and_the_compiled_pair(dtype: Any) -> None:
    x, g = normal((64, 128), dtype.np), normal((128,), dtype.np)
    w = normal((128, 64), dtype.np, 0.1)
    tile = dict(bm=32, bn=32, bk=32)
    interp = rms_norm_matmul(x, g, w, **tile)
    npu = pto.jit(lambda x, g, w: rms_norm_matmul(x, g, w, **tile), machine="tiny")(x, g, w)
    f32 = jnp.float32
    xf = x.astype(f32)
    y = (xf * jax.lax.rsqrt(jnp.mean(xf * xf, -1, keepdims=True) + 1e-6) * g.astype(f32)).astype(
        x.dtype
    )
    want = (y.astype(f32) @ w.astype(f32)).astype(x.dtype)
    agree(interp, npu, want, 2 * 128, f"rms_norm_matmul {dtype.name}")
    compiled = pto.jit(lambda x, g, w: pto.matmul(pto.rms_norm(x, g), w), machine="tiny")
    c = compare("kernel vs compiled", np.asarray(npu), compiled(x, g, w).numpy(), k=256)
    assert c.ok, str(c)


def test_pto_check_runs_a_kernel_on_every_backend() -> None:
    x, g, w = normal((32, 64)), normal((64,)), normal((64, 32), scale=0.1)
    report = pto.check(lambda x, g, w: rms_norm_matmul(x, g, w, bm=16, bn=32, bk=16), x, g, w)
    assert report.ok and len(report.rows) >= 3


# ---------------------------------------------------------------- kernels written here
@pto.kernel(grid=lambda x: (x.shape[0] // 8,), out=lambda x: pto.ShapeDtype(x.shape, x.dtype))
def softmax_rows(x: tl.Ref, o: tl.Ref) -> None:
    """Row softmax over column chunks of 32: a running max and sum, then a second pass."""
    i = tl.program_id(0)
    n = x.shape[1]
    m = tl.full((8, 1), -1e30)
    s = tl.zeros((8, 1))
    for c in tl.range(n // 32):
        xc = tl.load(x, (i * 8, c * 32), (8, 32)).astype(pto.float32)
        m_new = tl.maximum(m, xc.max(axis=1))
        s[...] = s * tl.exp(m - m_new) + tl.exp(xc - m_new).sum(axis=1)
        m[...] = m_new
    for c in tl.range(n // 32):
        xc = tl.load(x, (i * 8, c * 32), (8, 32)).astype(pto.float32)
        tl.store(o, (i * 8, c * 32), (tl.exp(xc - m) / s).astype(o.dtype))


@pytest.mark.parametrize("dtype", [pto.float32, pto.float16])
def test_a_vector_kernel_with_loops_agrees_with_softmax(dtype: Any) -> None:
    x = normal((32, 128), dtype.np, 3.0)
    interp = softmax_rows(x)
    npu = pto.jit(softmax_rows, machine="tiny")(x)
    want = jax.nn.softmax(x.astype(np.float32), axis=-1).astype(x.dtype)
    agree(interp, npu, want, 128, f"softmax_rows {dtype.name}")


def test_the_tile_ir_of_a_kernel_is_what_its_body_says() -> None:
    x = np.zeros((16, 32), np.float32)
    tf = pto.jit(lambda x: softmax_rows(x), machine="tiny").lower(x).tile_ir
    text = re.sub(r"  # \S+:\d+", "", str(tf.kernels[0]))
    assert text.splitlines()[0] == "kernel @softmax_rows grid(pid0=2) {"
    assert "for %k0 in 0..1 {" in text and "for %k1 in 0..1 {" in text
    assert "%ld0: UB f32[8,32] = tload %x[%pid0*8 : +8, %k0*32 : +32]" in text
    assert "= trowmax " in text and "= tmov " in text
    assert "tstore %out[%pid0*8 : +8, %k1*32 : +32]" in text
    # every statement carries the kernel's own line
    body = str(tf.kernels[0]).splitlines()[2:-1]
    locs = {m.group(0) for ln in body for m in [re.search(r"# (\S+):(\d+)", ln)] if m}
    assert locs and all(HERE in x for x in locs)


def test_print_works_in_interpret_mode(capsys: Any) -> None:
    @pto.kernel(grid=(2,), out=pto.ShapeDtype((2, 4), pto.float32))
    def show(x: tl.Ref, o: tl.Ref) -> None:
        i = tl.program_id(0)
        t = tl.load(x, (i, 0), (1, 4))
        print("point", i, t)
        tl.store(o, (i, 0), t + 1.0)

    out = show(np.arange(8, dtype=np.float32).reshape(2, 4))
    printed = capsys.readouterr().out
    assert "point 0 Tile(UB f32[1,4])\n[[0. 1. 2. 3.]]" in printed
    assert "point 1" in printed and "[[4. 5. 6. 7.]]" in printed
    np.testing.assert_array_equal(out.numpy(), np.arange(1, 9, dtype=np.float32).reshape(2, 4))


def test_a_kernel_runs_in_the_interpreter_backend_too() -> None:
    x = normal((16, 64), np.float32)
    a = pto.jit(softmax_rows, backend="interpret")(x)
    np.testing.assert_array_equal(a.numpy(), softmax_rows(x).numpy())


# ---------------------------------------------------------------- mistakes
def _oob(x: tl.Ref, o: tl.Ref) -> None:
    i = tl.program_id(0)
    t = tl.load(x, (i * 8 + 4, 0), (8, 16))  # the last point reads past the end
    tl.store(o, (i * 8, 0), t)


oob = pto.kernel(_oob, grid=(2,), out=lambda x: x)


def test_an_out_of_bounds_load_names_the_grid_point_and_the_line() -> None:
    x = np.zeros((16, 16), np.float32)
    with pytest.raises(pto.TileError) as e:
        oob(x)
    msg = str(e.value)
    assert "load of a [8, 16] tile at row 12, column 0 of x (viewed as [16,16])" in msg
    assert "grid point (1,) of (2,)" in msg
    assert f"{HERE}:{line_of(_oob, 'reads past')}" in msg
    # compiled: the same window is refused at trace time, with the range it reaches
    with pytest.raises(pto.TileError, match=r"up to 12.*reaches outside") as e2:
        pto.jit(oob, machine="tiny")(x)
    assert f"{HERE}:{line_of(_oob, 'reads past')}" in str(e2.value)


def test_python_control_flow_on_a_program_id_is_refused_when_compiled() -> None:
    @pto.kernel(grid=(2,), out=lambda x: x)
    def branchy(x: tl.Ref, o: tl.Ref) -> None:
        i = tl.program_id(0)
        t = tl.load(x, (i, 0), (1, 8))
        if i == 0:
            t = t * 2.0
        tl.store(o, (i, 0), t)

    x = np.ones((2, 8), np.float32)
    assert branchy(x).numpy()[0, 0] == 2.0  # interpret mode: plain Python
    with pytest.raises(pto.TraceError, match="Python control flow on a program id") as e:
        pto.jit(branchy, machine="tiny")(x)
    assert HERE in str(e.value) and "pto.tile.range" in str(e.value)


def test_a_tile_made_in_a_loop_cannot_leak_out_of_it() -> None:
    @pto.kernel(grid=(1,), out=lambda x: x)
    def leaky(x: tl.Ref, o: tl.Ref) -> None:
        acc = tl.zeros((4, 8))
        for j in tl.range(2):
            acc = acc + tl.load(x, (j * 4, 0), (4, 8))  # rebinds: not carried
        tl.store(o, (0, 0), acc)

    with pytest.raises(pto.TraceError, match=r"made inside a pto.tile.range loop") as e:
        pto.jit(leaky, machine="tiny")(np.ones((8, 8), np.float32))
    assert "acc[...] = ..." in str(e.value)


def test_tiles_do_not_promote_and_stores_keep_the_output_dtype() -> None:
    @pto.kernel(grid=(1,), out=lambda x: x)
    def mixed(x: tl.Ref, o: tl.Ref) -> None:
        t = tl.load(x, (0, 0), (2, 8))
        tl.store(o, (0, 0), t + t.astype(pto.float32))

    with pytest.raises(pto.DTypeError, match=r"add of f16 and f32 tiles") as e:
        mixed(np.ones((2, 8), np.float16))
    assert "astype" in str(e.value)

    @pto.kernel(grid=(1,), out=lambda x: x)
    def wide(x: tl.Ref, o: tl.Ref) -> None:
        tl.store(o, (0, 0), tl.load(x, (0, 0), (2, 8)).astype(pto.float32))

    with pytest.raises(pto.DTypeError, match=r"storing a f32 tile into o \(f16\)"):
        wide(np.ones((2, 8), np.float16))


def test_an_output_left_partly_unwritten_is_an_error() -> None:
    @pto.kernel(grid=(1,), out=lambda x: x)
    def half(x: tl.Ref, o: tl.Ref) -> None:
        tl.store(o, (0, 0), tl.load(x, (0, 0), (1, 8)))

    with pytest.raises(pto.TileError, match=r"left 8 of 16 elements .* row 1, column 0"):
        half(np.ones((2, 8), np.float32))


def test_grad_through_a_kernel_asks_for_a_custom_vjp() -> None:
    x = normal((32, 128), np.float32)
    with pytest.raises(pto.TraceError, match="hand-written kernel @softmax_rows") as e:
        pto.grad(lambda x: softmax_rows(x).sum())(x)
    assert "custom_vjp" in str(e.value)


def test_the_tile_language_outside_a_kernel_and_bad_static_arguments() -> None:
    with pytest.raises(pto.TraceError, match=r"only meaningful inside a @pto\.kernel body"):
        tl.zeros((2, 2))
    with pytest.raises(pto.TraceError, match=r"static argument bq=\[64\]"):
        flash_attention(
            np.zeros((1, 64, 16), np.float16),
            np.zeros((1, 16, 64), np.float16),
            np.zeros((1, 64, 16), np.float16),
            bq=[64],
        )


def test_cube_and_vector_tiles_stay_in_their_spaces() -> None:
    @pto.kernel(grid=(1,), out=lambda a, b: pto.ShapeDtype((16, 16), pto.float32))
    def wrong(a: tl.Ref, b: tl.Ref, o: tl.Ref) -> None:
        x = tl.load(a, (0, 0), (16, 16), space="L0A")
        tl.store(o, (0, 0), tl.exp(x))

    a = np.ones((16, 16), np.float16)
    with pytest.raises(pto.TileError, match="a L0A tile cannot reach the vector cores"):
        wrong(a, a)


def test_the_tile_ir_in_docs_expert_md_is_current() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "expert.md").read_text()
    part = doc[doc.index("### Flash attention by hand") :]
    shown = part[part.index("```text\n") + 8 : part.index("\n```", part.index("```text"))]
    q = np.zeros((1, 128, 64), np.float16)
    kt = np.zeros((1, 64, 128), np.float16)
    tile = dict(bq=64, bk=64, scale=0.125)
    f = pto.jit(lambda q, kt, v: flash_attention(q, kt, v, **tile), machine="tiny")
    now = re.sub(rf"  # {HERE}:\d+", "", str(f.lower(q, kt, q).tile_ir.kernels[0]))
    assert shown == now, "docs/expert.md shows a stale Tile IR: paste the printed kernel"


def test_a_kernel_call_prints_and_parses_back_in_the_tensor_ir() -> None:
    from pypto.graph.parser import parse

    x, g, w = (
        np.zeros((32, 64), np.float16),
        np.zeros(64, np.float16),
        np.zeros((64, 32), np.float16),
    )
    f = pto.make_graph(lambda x, g, w: rms_norm_matmul(x, g, w, bm=16, bn=32, bk=16) * 2)(x, g, w)
    text = str(f)
    assert "= kernel_call %x, %g, %w [kernel='rms_norm_matmul' bm=16 bn=32 bk=16]" in text
    assert str(parse(text).verify()) == text


# ---------------------------------------------------------------- gradients through a kernel
@pto.custom_vjp
def kernel_softmax(x: Any) -> Any:
    return softmax_rows(x)


def _softmax_fwd(x: Any) -> Any:
    y = softmax_rows(x)
    return y, y


def _softmax_bwd(y: Any, g: Any) -> Any:
    return (y * (g - (g * y).sum(axis=-1, keepdims=True)),)


kernel_softmax.defvjp(_softmax_fwd, _softmax_bwd)


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
def test_jit_grad_through_a_kernel_with_a_custom_vjp_equals_jax(machine: str) -> None:
    x = normal((16, 64), np.float32, 2.0)
    w = normal((16, 64), np.float32)

    def loss(x: Any, w: Any) -> Any:
        return (kernel_softmax(x * 1.5) * w).sum()

    g = pto.jit(pto.grad(loss), machine=machine)(x, w)
    want = jax.grad(lambda x, w: (jax.nn.softmax(x * 1.5, axis=-1) * w).sum())(x, w)
    c = compare("grad through the kernel", g.numpy(), np.asarray(want), k=64)
    assert c.ok, str(c)
    # the forward really runs the hand-written kernel on the NPU
    low = pto.jit(pto.grad(loss), machine=machine).lower(x, w)
    assert any(k.name.startswith("softmax_rows") for k in low.tile_ir.kernels)
    eager = pto.grad(loss)(x, w)  # eagerly: interpret mode forward, the same backward
    np.testing.assert_allclose(eager.numpy(), g.numpy(), rtol=1e-5, atol=1e-6)


def test_index_arithmetic_is_affine_or_by_a_positive_integer() -> None:
    @pto.kernel(grid=(4,), out=lambda x: x)
    def halves(x: tl.Ref, o: tl.Ref, *, d: int = 2) -> None:
        i = tl.program_id(0)
        t = tl.load(x, (i // d * 2 + i % d, 0), (1, 8))  # the row i, the long way round
        tl.store(o, (i, 0), t)

    x = normal((4, 8), np.float32)
    np.testing.assert_array_equal(pto.jit(halves, machine="tiny")(x).numpy(), x)
    with pytest.raises(pto.TraceError, match="an index divided by 0"):
        pto.jit(lambda x: halves(x, d=0), machine="tiny")(x)
    with pytest.raises(pto.TraceError, match="product of two indices"):

        @pto.kernel(grid=(2,), out=lambda x: x)
        def square(x: tl.Ref, o: tl.Ref) -> None:
            i = tl.program_id(0)
            tl.store(o, (i * i, 0), tl.load(x, (i, 0), (1, 8)))

        pto.jit(square, machine="tiny")(np.zeros((2, 8), np.float32))


# ---------------------------------------------------------------- gather
def _rows_by_index(x: tl.Ref, ix: tl.Ref, o: tl.Ref) -> None:
    # row ix[r] of an [8, 16] block, for each r: element indices ix[r] * 16 + column
    cols = tl.load(ix, (0, 0), (4, 16))
    picked = tl.gather(tl.load(x, (0, 0), (8, 16)), cols)  # gather of the rows
    tl.store(o, (0, 0), picked)


rows_by_index = pto.kernel(
    _rows_by_index, grid=(1,), out=lambda x, ix: pto.ShapeDtype((4, 16), x.dtype)
)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_gather_picks_elements_by_index_in_interpret_mode_and_on_the_npu(dtype: Any) -> None:
    x = (RNG.standard_normal((8, 16)) * 100).astype(dtype)
    rows = np.array([7, 0, 3, 3])
    ix = (rows[:, None] * 16 + np.arange(16)[::-1]).astype(np.int32)  # each row reversed
    want = x[rows][:, ::-1]
    np.testing.assert_array_equal(rows_by_index(x, ix).numpy(), want)
    np.testing.assert_array_equal(pto.jit(rows_by_index, machine="tiny")(x, ix).numpy(), want)


def test_gather_index_and_dtype_errors_name_the_line() -> None:
    x = np.zeros((8, 16), np.float32)
    ix = np.full((4, 16), 128, np.int32)
    with pytest.raises(pto.TileError) as e:
        rows_by_index(x, ix)
    assert "gather index 128 is outside the 128 elements of a [8, 16] tile" in str(e.value)
    assert f"{HERE}:{line_of(_rows_by_index, 'gather of the rows')}" in str(e.value)
    with pytest.raises(pto.SimulationError, match="index 128 is outside the 128 elements") as e2:
        pto.jit(rows_by_index, machine="tiny")(x, ix)
    assert "TGATHER" in str(e2.value) and "pipe V" in str(e2.value)
    with pytest.raises(pto.DTypeError, match="TGATHER moves 2- or 4-byte elements"):
        rows_by_index(x.astype(np.int8), np.zeros((4, 16), np.int32))
    with pytest.raises(pto.DTypeError, match="gather indices must be an i32 tile, got f32"):
        rows_by_index(x, np.zeros((4, 16), np.float32))
