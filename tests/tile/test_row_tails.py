"""Row kernels whose tile rows do not divide the row count: the last grid point takes the rest
(a partial last tile, with its own static shapes) instead of every tile holding one row."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import pypto as pto
from tests.tile.conftest import DTYPES, assert_same, sample
from tests.tile.test_row_kernels import RMS_NORM, SOFTMAX, X, rms, softmax, strip

MACHINES = ("tiny", "ascend910b")
FLOATS = ("f32", "f16", "bf16")
PARTIAL = "for %rp in 0..%last {"  # the partial tile's statements


def _check(fn: Any, *args: Any, machine: str) -> None:
    """The NPU result agrees with JAX within the numerics contract's tolerances."""
    report = pto.check(fn, *args, backends=("npu",), machine=machine, verbose=False)
    assert report.ok


def _kernel(fn: Any, *args: Any, machine: str, name: str = "") -> tuple[Any, str]:
    """The function's one kernel with more than one grid point (named ``name...``), and the
    Tile IR text."""
    tile_ir = pto.jit(fn, machine=machine).lower(*args).tile_ir
    (k,) = [k for k in tile_ir.kernels if k.points > 1 and k.name.startswith(name)]
    return k, strip(str(tile_ir))


def _rows(k: Any) -> int:
    return dict(k.tile)["rows"]


def _assert_tail(k: Any, text: str, R: int) -> None:
    """A few grid points of several rows, the last of them partial."""
    rows = _rows(k)
    assert rows > 1 and R % rows, (k.grid, k.tile)
    assert dict(k.grid)["r"] == -(-R // rows) and k.points <= R // 8, k.grid
    assert PARTIAL in text
    # the partial tile moves the rest of the rows from the last tile's first row
    assert f"%r*{rows} : +{R % rows}," in text


def ew(x: Any) -> Any:
    return pto.exp(x) * 2.0 - x


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("R", [1009, 1031])
def test_elementwise_over_a_prime_row_count(R: int, dtype: str, machine: str) -> None:
    x = sample((R, 64), DTYPES[dtype])
    assert_same(ew, x, machine=machine)  # bit for bit with eager mode, as any row kernel
    if machine == "ascend910b":  # (tiny keeps whole columns of 8: a divisor, as before)
        _assert_tail(*_kernel(ew, x, machine=machine), R)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_row_reductions_over_a_prime_row_count(dtype: str, machine: str) -> None:
    x = sample((1031, 96), DTYPES[dtype])
    fns = {
        "sum": lambda x: x.sum(-1),
        "max": lambda x: x.max(-1, keepdims=True),
        # one kernel (float16: a cast, the sum, a division, a cast)
        "mean": lambda x: x.mean(-1),
    }
    for op, fn in fns.items():
        _check(fn, x, machine=machine)
        _assert_tail(*_kernel(fn, x, machine=machine, name=op), 1031)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_over_a_prime_row_count(dtype: str, machine: str) -> None:
    # 512 columns on the 48 cores of ascend910b: one row per tile moves the rows at about the
    # HBM's rate already (a partial tile is only 1% faster), so it keeps the divisor there
    C = 512 if machine == "tiny" else 128
    x = sample((1031, C), DTYPES[dtype])
    _check(softmax, x, machine=machine)
    _assert_tail(*_kernel(softmax, x, machine=machine), 1031)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm_over_a_prime_row_count(dtype: str, machine: str) -> None:
    C = 256 if machine == "tiny" else 96
    x, w = sample((1009, C), DTYPES[dtype]), sample((C,), DTYPES[dtype], 1)
    _check(rms, x, w, machine=machine)
    _assert_tail(*_kernel(rms, x, w, machine=machine), 1009)


def chain(x: Any, s: Any, b: Any, c: Any) -> Any:
    # a scalar (broadcast down the tile's rows before the grid), a bias row, a per-row column
    return (x * s + b) * c - pto.max(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_a_chain_with_broadcast_operands(dtype: str, machine: str) -> None:
    d = DTYPES[dtype]
    x, s = sample((1009, 128), d), sample((), d, 1)
    b, c = sample((128,), d, 2), sample((1009, 1), d, 3)
    _check(chain, x, s, b, c, machine=machine)
    assert_same(chain, x, s, b, c, machine=machine)
    k, text = _kernel(chain, x, s, b, c, machine=machine)
    _assert_tail(k, text, 1009)
    rows, tail = _rows(k), 1009 % _rows(k)
    # the bias row is loaded once for both tiles; the scalar's column has a partial twin
    assert text.count("= tload %b[0 : +1, 0 : +128]") == 1
    assert re.search(rf"%s\d+: UB \w+\[{rows},1\] = tcolexpand", text)
    assert re.search(rf"%s\d+_p: UB \w+\[{tail},1\] = tcolexpand", text)


OTHERS = {
    "slice_concat": lambda x: pto.concat([x[:, :64] * 2.0, pto.exp(x[:, 64:])], -1),
    "argmax": lambda x: pto.argmax(x, axis=-1),
    "layer_norm": lambda x: pto.layer_norm(x, x[0], x[1]),
    "log_softmax": lambda x: pto.log_softmax(x, -1),
    "where": lambda x: pto.where(x > 0, x, x * 0.1),
}


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_windows_argmax_and_other_row_kernels(name: str) -> None:
    # a slice read through a window and a concatenation stored piece by piece, argmax's
    # index row and masks, a norm's two reductions: bit for bit with eager mode
    x = sample((1009, 128), pto.float16)
    assert_same(OTHERS[name], x, machine="ascend910b")
    tile_ir = pto.jit(OTHERS[name], machine="ascend910b").lower(x).tile_ir
    _assert_tail(max(tile_ir.kernels, key=lambda k: k.points), strip(str(tile_ir)), 1009)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [1009, 10007])
def test_mean_over_a_prime_middle_axis(p: int, dtype: str, machine: str) -> None:
    # (1, p, 1): the cast of float16/bfloat16 to float32 was one element per grid point, p
    # points (float32 has no cast: one sum kernel of one point)
    x = sample((1, p, 1), DTYPES[dtype])
    fn = lambda x: pto.mean(x, axis=1)  # noqa: E731
    _check(fn, x, machine=machine)
    if dtype == "f32":
        assert all(k.points == 1 for k in pto.jit(fn, machine=machine).lower(x).tile_ir.kernels)
    else:
        _assert_tail(*_kernel(fn, x, machine=machine), p)


def test_the_mean_and_the_elementwise_kernel_run_far_faster() -> None:
    # measured on ascend910b (cycles): the mean of (1, 10007, 1) float16 went from 26586 to
    # 7493 (its cast kernel from 10007 points to 48; three kernel barriers of 2000 cycles are
    # most of the rest), exp(x) * 2 over (1009, 64) float32 from 2386 to 940
    x = pto.ones((1, 10007, 1), pto.float16)
    mean = pto.jit(lambda x: pto.mean(x, axis=1), machine="ascend910b")
    assert mean.profile(x, numerics=False).cycles < 26586 / 3
    y = pto.ones((1009, 64), pto.float32)
    fn = lambda x: pto.exp(x) * 2.0  # noqa: E731
    auto = pto.jit(fn, machine="ascend910b").profile(y, numerics=False).cycles
    one_row = pto.jit(fn, machine="ascend910b", tile=dict(vec=(1, 64))).profile(y, numerics=False)
    assert auto * 2 < one_row.cycles


TAIL = """\
tile_func @rms {
  .tensor x f16[37,128] in
  .tensor w f16[1,128] in
  .tensor out f16[37,128] out
  kernel @rms_norm grid(r=3) vec_tile(rows=16, cols=128) {
    .aiv
      pre {
        %x2: UB f16[1,128] = tload %w[0 : +1, 0 : +128]
      }
      %last = smax %r-1, 0
      for %rf in %last..1 {
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
      for %rp in 0..%last {
        %x1_p: UB f16[5,128] = tload %x[%r*16 : +5, 0 : +128]
        %t3: UB f16[5,128] = tmul %x1_p, %x1_p
        %t4: UB f32[5,128] = tcvt %t3
        %t5: UB f32[5,1] = trowsum %t4
        %t6: UB f32[5,1] = tdivs %t5, 128.0
        %t7: UB f16[5,1] = tcvt %t6
        %t8: UB f16[5,1] = tadds %t7, 1.0132789611816406e-06
        %t9: UB f16[5,1] = trsqrt %t8
        %t10: UB f16[5,128] = tmul %x1_p, %t9
        %t11_p: UB f16[5,128] = tmul %t10, %x2
        tstore %out[%r*16 : +5, 0 : +128], %t11_p
      }
  }
  return %out
}"""


def test_golden_partial_tile_ir_of_a_user_tile() -> None:
    # a vec tile that does not divide the rows is taken (the kernel has no row constraints):
    # %last is 1 on the last grid point only, which runs the 5 remaining rows
    x, w = sample((37, 128), pto.float16), sample((128,), pto.float16, 1)
    f = pto.jit(rms, machine="tiny", tile=dict(vec=(16, 128)))
    low = f.lower(x, w)
    assert strip(str(low.tile_ir)) == TAIL
    np.testing.assert_array_equal(np.asarray(f(x, w)), np.asarray(pto.jit(rms)(x, w)))
    bufs = re.findall(r"\.buf UB\[[^\]]*\] %(\w+)", str(low.block_ir))
    # the vector-only tiles share one buffer per name; the tiles DMA moves have double
    # buffers of their own, alternating within their loop (the next point's load overlaps)
    assert bufs.count("t3") == 1 and bufs.count("t10") == 1
    lines = str(low.block_ir).splitlines()
    for name, loop in (("x1", "1"), ("t11", "1"), ("x1_p", "2"), ("t11_p", "2")):
        (line,) = [ln for ln in lines if ln.endswith(f"] %{name}")]
        assert f"x2 by %p_g_{loop}]" in line, line


def test_tiles_that_divide_the_rows_keep_their_tile_ir() -> None:
    # the golden texts of tests/tile/test_row_kernels.py, with user tiles and automatic ones
    w = sample((128,), pto.float16, 1)
    for fn, args, golden in ((softmax, (X,), SOFTMAX), (rms, (X, w), RMS_NORM)):
        low = pto.jit(fn, machine="tiny", tile=dict(vec=(16, 128))).lower(*args)
        assert strip(str(low.tile_ir)) == golden
        for machine in MACHINES:
            text = str(pto.jit(fn, machine=machine).lower(*args).tile_ir)
            assert "%last" not in text and PARTIAL not in text


def test_rows_that_repeat_keep_tiles_that_divide_them() -> None:
    # a [6, 8] operand repeating over a [4, 6, 8] input: tiles must not wrap its 6 rows, so
    # neither a user tile nor an automatic one ends in a partial tile
    x, t = sample((4, 6, 8), pto.float16), sample((6, 8), pto.float16, 1)
    f = pto.jit(lambda x, t: x * t, machine="tiny", tile=dict(vec=(5, 8)))
    with pytest.raises(pto.TileError, match=r"\[5, 8\].*does not divide the \[6\] rows"):
        f.lower(x, t)
    y, u = sample((4, 1009, 8), pto.float16), sample((1009, 8), pto.float16, 1)
    text = str(pto.jit(lambda x, t: x * t, machine="tiny").lower(y, u).tile_ir)
    assert PARTIAL not in text


def test_long_rows_keep_tiles_that_divide_the_rows() -> None:
    # the multi-pass kernel over rows too long for UB takes row tiles that divide the rows
    x = sample((7, 100003), pto.float32)
    text = str(pto.jit(softmax, machine="tiny").lower(x).tile_ir)
    assert PARTIAL not in text and "for %k" in text
