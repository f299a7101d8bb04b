"""Reference hand-written programs, parameterised by size (for tests, benchmarks and docs).

:func:`gemm` is the cube GEMM of CANN PyPTO's matmul performance guide: L1 tiles
``mL1 x kL1`` of A and ``kL1 x nL1`` of B (double-buffered), L0 steps of ``kL0`` (double-buffered
in L0A/L0B), a float32 accumulator in L0C written once per output tile through the fixpipe
(cast to the output dtype). Each wave of the launch gives every cube core one output tile, in
plain row-major order or with the cores grouped ``gm x gn`` so a wave covers a compact block
of C and reuses A and B in L2.

>>> from pypto.isa.samples import gemm
>>> p = gemm(256, 512, 512, tiles=((128, 128), (64, 256), (256, 256)), blocks=4)
>>> p.name, p.static_size()
('gemm_256x512x512_row', 48)
"""

from __future__ import annotations

from pypto.isa.ir import IsaError, Program
from pypto.isa.parser import parse

__all__ = ["gemm"]

Tiles = tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
GUIDE_TILES: Tiles = ((128, 128), (64, 256), (256, 256))
"""The guide's recommended A2/A3 fp16 tiling: m L0/L1 128/128, k 64/256, n 256/256."""


def gemm(
    M: int,
    N: int,
    K: int,
    *,
    tiles: Tiles = GUIDE_TILES,
    blocks: int = 24,
    order: str = "row",
    group: tuple[int, int] = (6, 4),
    out: str = "f16",
) -> Program:
    """``c = a @ b`` with ``a: f16[M,K]``, ``b: f16[K,N]``, ``c: out[M,N]`` on ``blocks`` cube
    cores; ``order`` is ``"row"`` (tile ``t = wave*blocks + blk``, row-major) or
    ``"grouped"`` (each wave is a ``group = (gm, gn)`` block of tiles, ``gm*gn == blocks``)."""
    (m0, m1), (k0, k1), (n0, n1) = tiles
    if (m0, n0) != (m1, n1):
        raise IsaError("this GEMM keeps the whole L1 m/n tile in L0 (mL0 == mL1, nL0 == nL1)")
    if M % m1 or N % n1 or K % k1 or k1 % k0:
        raise IsaError(f"M, N, K = {M}, {N}, {K} must be multiples of the tiles {tiles}")
    mt, nt = M // m1, N // n1
    ntiles = mt * nt
    waves = -(-ntiles // blocks)
    a_bytes, b_bytes = m1 * k1 * 2, k1 * n1 * 2
    slot = a_bytes + b_bytes
    a0, b0 = m0 * k0 * 2, k0 * n0 * 2
    if order == "row":
        where = f"""    SMUL %t, %j, {blocks}
    SADD %t, %t, %blk
    BGE %t, {ntiles}, next
    SDIV %tm, %t, {nt}
    SMOD %tn, %t, {nt}
"""
    elif order == "grouped":
        gm, gn = group
        if gm * gn != blocks or mt % gm or nt % gn:
            raise IsaError(f"group {group} must tile {blocks} cores and the {mt}x{nt} tile grid")
        where = f"""    SDIV %vm, %j, {nt // gn}
    SMOD %vn, %j, {nt // gn}
    SDIV %cm, %blk, {gn}
    SMOD %cn, %blk, {gn}
    SMOV %tm, %vm*{gm}+%cm
    SMOV %tn, %vn*{gn}+%cn
"""
    else:
        raise IsaError(f"order {order!r}: use 'row' or 'grouped'")
    skip = "  next:\n" if order == "row" else ""
    text = f"""
.program gemm_{M}x{N}x{K}_{order}
.blocks {blocks}
.tensor a f16[{M},{K}] in
.tensor b f16[{K},{N}] in
.tensor c {out}[{M},{N}] out

.core aic
  SET_FLAG MTE1, MTE2, 0
  SET_FLAG MTE1, MTE2, 1
  SET_FLAG M, MTE1, 0
  SET_FLAG M, MTE1, 1
  SET_FLAG FIX, M, 0
  SMOV %l1, 0
  SMOV %l0, 0
  LOOP %j, 0, {waves}, 1
{where}    WAIT_FLAG FIX, M, 0
    LOOP %kb, 0, {K // k1}, 1
      SMOD %s, %l1, 2
      WAIT_FLAG MTE1, MTE2, %s
      TLOAD L1[%s*{slot}]:f16[{m1},{k1}], a[%tm*{m1}, %kb*{k1}]
      TLOAD L1[%s*{slot}+{a_bytes}]:f16[{k1},{n1}], b[%kb*{k1}, %tn*{n1}]
      SET_FLAG MTE2, MTE1, %s
      WAIT_FLAG MTE2, MTE1, %s
      LOOP %kk, 0, {k1 // k0}, 1
        SMOD %q, %l0, 2
        WAIT_FLAG M, MTE1, %q
        TEXTRACT L0A[%q*{a0}]:f16[{m0},{k0}], L1[%s*{slot}]:f16[{m1},{k1}], 0, %kk*{k0}
        TEXTRACT L0B[%q*{b0}]:f16[{k0},{n0}], L1[%s*{slot}+{a_bytes}]:f16[{k1},{n1}], %kk*{k0}, 0
        SET_FLAG MTE1, M, %q
        WAIT_FLAG MTE1, M, %q
        BNE %kb+%kk, 0, accumulate
        TMATMUL L0C[0]:f32[{m0},{n0}], L0A[%q*{a0}]:f16[{m0},{k0}], L0B[%q*{b0}]:f16[{k0},{n0}]
        JMP multiplied
      accumulate:
        TMATMUL_ACC L0C[0]:f32[{m0},{n0}], L0A[%q*{a0}]:f16[{m0},{k0}], L0B[%q*{b0}]:f16[{k0},{n0}]
      multiplied:
        SET_FLAG M, MTE1, %q
        SADD %l0, %l0, 1
      ENDLOOP
      SET_FLAG MTE1, MTE2, %s
      SADD %l1, %l1, 1
    ENDLOOP
    SET_FLAG M, FIX, 0
    WAIT_FLAG M, FIX, 0
    TSTORE c[%tm*{m1}, %tn*{n1}], L0C[0]:f32[{m1},{n1}]
    SET_FLAG FIX, M, 0
{skip}  ENDLOOP
  WAIT_FLAG MTE1, MTE2, 0
  WAIT_FLAG MTE1, MTE2, 1
  WAIT_FLAG M, MTE1, 0
  WAIT_FLAG M, MTE1, 1
  WAIT_FLAG FIX, M, 0
"""
    return parse(text)
