"""Provenance tags (pypto/npu/semantics.py): a matmul operand whose bytes are an input's window
moved unchanged reads the input widened once; anything that overwrites those bytes must drop
the tag, so the result always equals multiplying the bytes the buffers hold."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from pypto.isa.samples import gemm

RNG = np.random.default_rng(11)
F32 = np.float32

HEAD = """
.program prov
.tensor a f16[16,32] in
.tensor b f16[32,16] in
.tensor c {out}[16,16] out
.core aic
  TLOAD L1[0x0]:f16[16,32], a[0, 0]
  TLOAD L1[0x400]:f16[32,16], b[0, 0]
  SET_FLAG MTE2, MTE1, 0
  WAIT_FLAG MTE2, MTE1, 0
  TEXTRACT L0A[0x0]:f16[16,16], L1[0x0]:f16[16,32], 0, 0
  TEXTRACT L0B[0x0]:f16[16,16], L1[0x400]:f16[32,16], 0, 0
  TEXTRACT L0A[0x200]:f16[16,16], L1[0x0]:f16[16,32], 0, 16
  TEXTRACT L0B[0x200]:f16[16,16], L1[0x400]:f16[32,16], 16, 0
  SET_FLAG MTE1, M, 0
  WAIT_FLAG MTE1, M, 0
"""


def test_adjacent_windows_form_one_product(sim) -> None:
    a = RNG.standard_normal((16, 32)).astype(np.float16)
    b = RNG.standard_normal((32, 16)).astype(np.float16)
    prog = (
        HEAD.format(out="f32")
        + """
  TMATMUL L0C[0x0]:f32[16,16], L0A[0x0]:f16[16,16], L0B[0x0]:f16[16,16]
  TMATMUL_ACC L0C[0x0]:f32[16,16], L0A[0x200]:f16[16,16], L0B[0x200]:f16[16,16]
  SET_FLAG M, FIX, 0
  WAIT_FLAG M, FIX, 0
  TSTORE c[0, 0], L0C[0x0]:f32[16,16]
"""
    )
    got = sim(prog, "tiny", {"a": a, "b": b}).outputs["c"]
    np.testing.assert_allclose(got, a.astype(F32) @ b.astype(F32), rtol=1e-6, atol=1e-5)


def test_overwritten_operand_is_not_read_from_the_input(sim) -> None:
    # a @ b goes through the fixpipe into L1 over a's tile; multiplying again must use the
    # new bytes of L1, not the input a they replaced.
    a = RNG.integers(-3, 4, (16, 32)).astype(np.float16)
    b = RNG.integers(-3, 4, (32, 16)).astype(np.float16)
    prog = (
        HEAD.format(out="f32")
        + """
  TMATMUL L0C[0x0]:f32[16,16], L0A[0x0]:f16[16,16], L0B[0x0]:f16[16,16]
  SET_FLAG M, FIX, 0
  WAIT_FLAG M, FIX, 0
  SET_FLAG M, MTE1, 0
  WAIT_FLAG M, MTE1, 0
  TMOV L1[0x0]:f16[16,16], L0C[0x0]:f32[16,16]
  SET_FLAG FIX, MTE1, 0
  WAIT_FLAG FIX, MTE1, 0
  TEXTRACT L0A[0x0]:f16[16,16], L1[0x0]:f16[16,32], 0, 0
  SET_FLAG FIX, M, 0
  WAIT_FLAG FIX, M, 0
  SET_FLAG MTE1, M, 1
  WAIT_FLAG MTE1, M, 1
  TMATMUL L0C[0x0]:f32[16,16], L0A[0x0]:f16[16,16], L0B[0x0]:f16[16,16]
  SET_FLAG M, FIX, 1
  WAIT_FLAG M, FIX, 1
  TSTORE c[0, 0], L0C[0x0]:f32[16,16]
"""
    )
    got = sim(prog, "tiny", {"a": a, "b": b}).outputs["c"]
    a32, b32 = a.astype(F32), b.astype(F32)
    p = (a32[:, :16] @ b32[:16]).astype(np.float16)
    # TMOV wrote p row-major over the first 16*16 elements of the f16[16,32] tile at L1[0x0];
    # the window (0, 0) of that tile is its columns 0..15.
    tile = a.copy().reshape(-1)
    tile[:256] = p.reshape(-1)
    window = tile.reshape(16, 32)[:, :16]
    np.testing.assert_array_equal(got, window.astype(F32) @ b32[:16])


def test_reinterpreted_bytes_are_not_read_from_the_input(sim) -> None:
    # The matmul reads f16 bytes as bf16: the tag (f16) does not apply.
    a = RNG.standard_normal((16, 32)).astype(np.float16)
    b = RNG.standard_normal((32, 16)).astype(np.float16)
    bf = ml_dtypes.bfloat16
    prog = (
        HEAD.format(out="f32")
        + """
  TMATMUL L0C[0x0]:f32[16,16], L0A[0x0]:bf16[16,16], L0B[0x0]:bf16[16,16]
  SET_FLAG M, FIX, 0
  WAIT_FLAG M, FIX, 0
  TSTORE c[0, 0], L0C[0x0]:f32[16,16]
"""
    )
    got = sim(prog, "tiny", {"a": a, "b": b}).outputs["c"]
    a16 = np.ascontiguousarray(a[:, :16]).view(bf).astype(F32)
    b16 = np.ascontiguousarray(b[:16]).view(bf).astype(F32)
    np.testing.assert_allclose(got, a16 @ b16, rtol=1e-5, atol=1e-5)


def test_gemm_sample_matches_numpy(sim) -> None:
    a = RNG.standard_normal((256, 512)).astype(np.float16)
    b = RNG.standard_normal((512, 512)).astype(np.float16)
    p = gemm(256, 512, 512, blocks=1)
    got = sim(p, "tiny", {"a": a, "b": b}).outputs["c"].astype(F32)
    want = (a.astype(F32) @ b.astype(F32)).astype(np.float16).astype(F32)
    # one float32 accumulation rounded once; the order of the sum may differ by a float32 ulp,
    # which can move the float16 result by at most one ulp
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
