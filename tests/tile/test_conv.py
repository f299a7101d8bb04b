"""Stride-1 convolutions on the NPU: one matmul over shifted rows of the padded input.

The composite (``pypto/ops/conv.py``) writes a stride-1 convolution's patches as a
concatenation of row windows of the flattened, padded input, one per kernel offset. The
matmul rule reads that concatenation in place: each part of A's K is a window of the input
``shift`` rows down, so no patches are written. When two blocks of every part's rows fit L1,
the cube core loads each tile's rows once and cuts every kernel offset's L0 steps from them
(the image-to-column load of the chip); otherwise each K block's window is loaded on its own.
Results equal JAX's in every float dtype on both machines.
"""

from __future__ import annotations

import re
from typing import Any

import jax
import numpy as np
import pytest

import pypto as pto
from pypto.ops import conv as conv_mod
from pypto.reference import compare

F = (pto.float32, pto.float16, pto.bfloat16)


def arr(shape: tuple[int, ...], d: pto.DType, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(0.0, 1.0, shape).astype(np.float32).astype(d.np)


def kernels(f: Any, *args: np.ndarray) -> list[str]:
    return re.findall(r"kernel @(\S+)", str(f.lower(*args).tile_ir))


def check(fn: Any, x: np.ndarray, w: np.ndarray, machine: str, k: int, **jit: Any) -> str:
    """``fn`` on ``machine`` equals JAX's; the Tile IR text, for the caller to inspect."""
    f = pto.jit(fn, machine=machine, **jit)
    (out,) = f.profile(x, w).outputs
    ref = np.asarray(pto.to_jax(fn)(x, w))
    assert out.shape == ref.shape
    c = compare("conv_general_dilated", out, ref, k=k)
    assert c.ok, str(c)
    return str(f.lower(x, w).tile_ir)


NHWC = ("NHWC", "HWIO", "NHWC")

CASES = {
    # name: (x shape, w shape, kwargs), every one stride 1
    "nhwc_3x3_same": (
        (2, 9, 9, 16),
        (3, 3, 16, 32),
        {"padding": "SAME", "dimension_numbers": NHWC},
    ),
    "nchw_dilated": (
        (1, 32, 10, 12),
        (16, 32, 3, 2),
        {"padding": ((2, 2), (1, 0)), "rhs_dilation": (2, 1)},
    ),
    "nwc_1d_valid": (
        (2, 40, 48),
        (5, 48, 16),
        {"padding": "VALID", "dimension_numbers": ("NWC", "WIO", "NWC")},
    ),
    "ndhwc_3d_valid": (  # three digits: part p = 4·d + 2·h + w, shift 49·d + 7·h + w
        (1, 7, 7, 7, 16),
        (2, 2, 2, 16, 16),
        {"padding": "VALID", "dimension_numbers": ("NDHWC", "DHWIO", "NDHWC")},
    ),
    "transposed": (  # lhs dilation: the zeros are in the padded input the rows are cut from
        (1, 7, 6, 16),
        (2, 2, 16, 16),
        {"padding": ((1, 1), (1, 1)), "lhs_dilation": (2, 1), "dimension_numbers": NHWC},
    ),
}


def conv_fn(kw: dict[str, Any]) -> Any:
    def fn(x: Any, w: Any) -> Any:
        return pto.lax.conv_general_dilated(x, w, (1,) * (x.ndim - 2), **kw)

    return fn


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
@pytest.mark.parametrize("d", F, ids=lambda d: d.short)
@pytest.mark.parametrize("name", sorted(CASES))
def test_stride_one_convolutions_read_the_input_in_place(
    name: str, d: pto.DType, machine: str
) -> None:
    xs, ws, kw = CASES[name]
    x, w = arr(xs, d, 1), arr(ws, d, 2)
    fn = conv_fn(kw)
    text = check(fn, x, w, machine, k=int(np.prod(ws)) // max(ws))
    names = re.findall(r"kernel @(\S+)", text)
    # no patches: the padding (when any), the product, the crop (when any); no concat
    assert not any("concat" in n or n.startswith("slice_") for n in names), names
    assert sum(n.startswith("matmul") for n in names) == 1, names


def test_golden_cube_code_cuts_every_offset_from_one_block() -> None:
    """3x3 SAME over an 8x8 NHWC image of 16 features (padded 10x10, one more image of
    zeros): the cube loads 64 + 22 rows of the padded input per tile and cuts the nine
    offsets' steps at rows ``10·pq + pd1`` of that block (``pt = 3·pq + pd1``)."""
    fn = conv_fn({"padding": "SAME", "dimension_numbers": NHWC})
    x, w = arr((1, 8, 8, 16), pto.float16, 3), arr((3, 3, 16, 16), pto.float16, 4)
    f = pto.jit(fn, machine="tiny")
    text = str(f.lower(x, w).tile_ir)
    (kernel,) = re.findall(r"kernel @matmul.*?\n  }", text, re.S)
    want = [
        r"%b1: L1 f16\[144,16\] = tload %w\[0 : \+144, %n\*16 : \+16\]",
        r"for %kc in 0..1 \{",
        r"%a1: L1 f16\[(\d+),16\] = tload %t\d*\[%m\*(\d+) : \+\1, %kc\*16 : \+16\]",
        r"for %pt in 0..9 \{",
        r"%pd1 = smod %pt, 3",
        r"%pq = sdiv %pt, 3",
        r"textract %a1, %pq\*10\+%pd1, %kk\*16",
        r"textract %b1, %pt\*16\+%kc\*16\+%kk\*16, 0",
    ]
    at = 0
    for pat in want:  # in this order, as FileCheck's CHECK lines
        found = re.compile(pat).search(kernel, at)
        assert found, f"{pat!r} not found after offset {at} in\n{kernel}"
        at = found.end()
    rows, m1 = (int(v) for v in re.search(want[2], kernel).groups())  # type: ignore[union-attr]
    assert rows == m1 + 22  # the tile's rows and the span of the offsets: 2·10 + 2
    (out,) = f.profile(x, w).outputs
    c = compare("conv_general_dilated", out, np.asarray(pto.to_jax(fn)(x, w)), k=144)
    assert c.ok, str(c)


def test_each_k_block_is_loaded_on_its_own_when_the_rows_do_not_fit_l1() -> None:
    """A 3x3 window over rows of 4,000 positions spans 8,002 rows: two such blocks of 64
    features are more than L1, so each K block's window is loaded at its shift."""
    fn = conv_fn({"padding": "SAME", "dimension_numbers": NHWC})
    x, w = arr((1, 3, 4000, 64), pto.float16, 5), arr((3, 3, 64, 16), pto.float16, 6)
    text = check(fn, x, w, "ascend910b", k=576)
    (kernel,) = re.findall(r"kernel @matmul.*?\n  }", text, re.S)
    assert re.search(r"tload %t\d*\[%m\*\d+\+%pq\*4002\+%pd1 : ", kernel), kernel
    assert "for %pt" not in kernel


def test_tiles_that_straddle_the_offsets_fall_back_to_patches() -> None:
    """Cube tiles whose K blocks cross from one offset's features into the next cannot read
    the parts in place: the patches are written by one row kernel of windows, still right."""
    fn = conv_fn({"padding": "SAME", "dimension_numbers": NHWC})
    x, w = arr((1, 8, 8, 16), pto.float16, 7), arr((3, 3, 16, 16), pto.float16, 8)
    text = check(fn, x, w, "tiny", k=144, tile={"cube": ([100, 100], [48, 48], [16, 16])})
    names = re.findall(r"kernel @(\S+)", text)
    assert names == ["pad_zero", "pad", "slice_concat", "matmul", "slice"], names


def test_unaligned_features_write_the_patches() -> None:
    """8 float16 features are 16 bytes: the shifted rows would start off the 32-byte grid, so
    the patches are written instead (and the result is the same)."""
    fn = conv_fn({"padding": "SAME", "dimension_numbers": NHWC})
    x, w = arr((1, 8, 8, 8), pto.float16, 9), arr((3, 3, 8, 16), pto.float16, 10)
    text = check(fn, x, w, "tiny", k=72)
    assert "textract %a1, %pq" not in text


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_shifted_rows_equal_patches_and_jax(name: str, monkeypatch: Any) -> None:
    """Eagerly, the shifted-rows form and the strided patches give JAX's result (float32)."""
    xs, ws, kw = CASES[name]
    x, w = arr(xs, pto.float32, 11), arr(ws, pto.float32, 12)
    strides = (1,) * (len(xs) - 2)
    want = np.asarray(jax.lax.conv_general_dilated(x, w, strides, **kw))
    shifted = pto.lax.conv_general_dilated(x, w, strides, **kw).numpy()
    monkeypatch.setattr(conv_mod, "SHIFT_WASTE", 0.0)  # every convolution cuts patches
    patches = pto.lax.conv_general_dilated(x, w, strides, **kw).numpy()
    np.testing.assert_allclose(shifted, want, rtol=2e-5, atol=2e-4)
    np.testing.assert_allclose(patches, want, rtol=2e-5, atol=2e-4)


def test_the_shifted_form_is_taken_only_within_its_waste() -> None:
    """A 3x3 SAME window over a 4x4 image computes 36 grid positions for 16 outputs (2.25 times):
    more than :data:`SHIFT_WASTE`, so it cuts strided patches; over 8x8 (100 for 64: 1.56 times)
    it concatenates shifted rows of the padded input, one more image of zeros below it."""
    fn = conv_fn({"padding": "SAME", "dimension_numbers": NHWC})
    w = arr((3, 3, 16, 16), pto.float32, 13)
    small = str(pto.jit(fn).lower(arr((1, 4, 4, 16), pto.float32, 14), w).tensor_ir)
    big = str(pto.jit(fn).lower(arr((1, 8, 8, 16), pto.float32, 14), w).tensor_ir)
    assert "f32[1,16,9,4,4] = concat" in small and "transpose %x" in small
    assert "f32[2,10,10,16] = lax_pad %x" in big and "transpose" not in big
    assert "f32[100,144] = concat" in big and "f32[100,16] = matmul" in big


def conv_loss(kw: dict[str, Any]) -> Any:
    def loss(x: Any, w: Any) -> Any:
        y = pto.lax.conv_general_dilated(x, w, (1,) * (x.ndim - 2), **kw)
        return (y.astype(pto.float32) ** 2).sum()

    return loss


@pytest.mark.parametrize("machine", ["tiny", "ascend910b"])
@pytest.mark.parametrize("d", [pto.float32, pto.float16], ids=lambda d: d.short)
@pytest.mark.parametrize("name", ["nhwc_3x3_same", "nchw_dilated", "nwc_1d_valid"])
def test_the_input_gradient_is_a_product_over_shifted_rows_too(
    name: str, d: pto.DType, machine: str
) -> None:
    """Autodiff's sum of the product's parts, each padded its offset's rows down, is
    rewritten (``shifted_sums``) into one product over shifted rows of the padded cotangent,
    with the offsets going up: the cube reads it in place. Both gradients equal
    ``jax.grad``'s."""
    xs, ws, kw = CASES[name]
    x, w = arr(xs, d, 21), (arr(ws, d, 22).astype(np.float32) * 0.2).astype(d.np)
    f = pto.jit(pto.grad(conv_loss(kw), argnums=(0, 1)), machine=machine)
    got = f(x, w)
    want = jax.grad(pto.to_jax(conv_loss(kw)), argnums=(0, 1))(x, w)
    for g, r, what in zip(got, want, ("x", "w"), strict=True):
        r = np.asarray(r)
        c = compare("conv_general_dilated", np.asarray(g), r, k=int(np.prod(ws)))
        assert c.ok, f"d{what}: {c}"
    ir = f.lower(x, w)
    assert sum(e.op == "lax_pad" for e in ir.tensor_ir.eqns) <= 3  # no pad per offset
    kernels = re.findall(r"kernel @(\S+) .*?\n  }", str(ir.tile_ir), re.S)
    assert not any(k.startswith(("add", "concat")) for k in kernels), kernels
    # the input gradient's product reads shifted rows in place (the forward's patches are
    # the weight gradient's operand too, so they are written once, by one row kernel)
    text = str(ir.tile_ir)
    assert text.count("for %pt in") + len(re.findall(r"\+%pq\*\d+", text)) >= 1
