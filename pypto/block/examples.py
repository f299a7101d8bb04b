"""Hand-written Block programs (``pto.block.program``) for tests, docs and benchmarks.

:func:`matmul_scale_relu` is the cube → vector pipeline of a cluster, written the way a system
developer writes it: the cube core computes ``tm``-row tiles of ``a @ w`` into L0C; the
fixpipe moves each one out, and a cross-core flag hands it to the cluster's two vector cores,
which take half the rows each, scale them, apply ReLU and store them. On an A2/A3-class chip
the tile goes through a two-slot GM workspace ring (``TSTORE`` by the fixpipe, ``TLOAD`` by each
vector core); with ``direct=True`` (a machine with ``direct_cube_vector``, A5-style) the
fixpipe writes each half straight into a vector core's UB. Every buffer is double-buffered (two
slots chosen by the loop's parity), so the cube computes tile t+1 while the vector cores finish
tile t.

>>> import numpy as np
>>> from pypto.block.examples import matmul_scale_relu
>>> p = matmul_scale_relu(128, 64, 64)
>>> a = np.ones((128, 64), np.float16); w = np.ones((64, 64), np.float16)
>>> float(np.asarray(p(a, w))[0, 0])
32.0
"""

from __future__ import annotations

from typing import Any

from pypto import dtypes as dt
from pypto.block.program import BlockProgram, Builder, GmTensor, In, Out, program
from pypto.npu.machine import Machine

__all__ = ["matmul_scale_relu"]


def matmul_scale_relu(
    M: int = 256,
    N: int = 64,
    K: int = 64,
    *,
    tm: int = 32,
    alpha: float = 0.5,
    direct: bool = False,
    machine: Machine | str = "tiny",
    grid: int = 1,
) -> BlockProgram:
    """``y = relu(alpha * (a @ w))`` with ``a: f16[M,K]``, ``w: f16[K,N]``, ``y: f32[M,N]`` on
    ``grid`` clusters; the output tiles ``t = blk, blk+nblk, …`` of ``tm`` rows go round-robin
    to the clusters. ``direct`` hands tiles over L0C → UB (the machine needs that path)."""
    half = tm // 2
    tiles = M // tm
    f16, f32 = dt.float16, dt.float32
    # the vector cores' pipe that receives the hand-off: MTE2 loads from GM, or V reads UB
    recv = "V" if direct else "MTE2"

    @program(In((M, K), f16), In((K, N), f16), Out((M, N), f32), machine=machine, grid=grid)
    def matmul_scale_relu(b: Builder, a: GmTensor, w: GmTensor, y: GmTensor) -> None:
        wt = b.aic.buffer("L0B", (K, N), f16)
        at = b.aic.buffer("L0A", (tm, K), f16, slots=2)
        acc = b.aic.buffer("L0C", (tm, N), f32, slots=2)
        xin = b.aiv.buffer("UB", (half, N), f32, slots=2)
        yout = b.aiv.buffer("UB", (half, N), f32, slots=2)
        if not direct:
            ws = b.workspace((grid * 2 * tm, N), f32)  # a two-slot ring per cluster

        def ring(s: Any) -> Any:  # first row of ring slot s of this cluster
            return b.blk * (2 * tm) + s * tm

        with b.aic:
            b.tload(wt, w[0, 0])
            b.set_flag("MTE2", "M", 2)
            b.wait_flag("MTE2", "M", 2)
            for slot in (0, 1):
                b.set_flag("M", "MTE2", slot)  # L0A slot is free
                b.set_flag("FIX", "M", slot)  # L0C slot is free
            with b.range(b.blk, tiles, b.nblk) as t:
                s = t.parity
                b.wait_flag("M", "MTE2", s)
                b.tload(at[s], a[t * tm, 0])
                b.set_flag("MTE2", "M", s)
                b.wait_flag("MTE2", "M", s)
                b.wait_flag("FIX", "M", s)
                b.tmatmul(acc[s], at[s], wt)
                b.set_flag("M", "MTE2", s)
                b.set_flag("M", "FIX", s)
                b.wait_flag("M", "FIX", s)
                b.xwait_flag("FIX", "aiv", s)  # both vector cores are done with slot s
                if direct:
                    b.tmov(xin[s].on("aiv0"), acc[s].rows(0, half))
                    b.tmov(xin[s].on("aiv1"), acc[s].rows(half, half))
                else:
                    b.tstore(ws[ring(s), 0], acc[s])
                b.set_flag("FIX", "M", s)
                b.xset_flag("FIX", "aiv", s)  # slot s holds tile t
            for slot in (0, 1):
                b.wait_flag("M", "MTE2", slot)
                b.wait_flag("FIX", "M", slot)
                b.xwait_flag("FIX", "aiv", slot)

        with b.aiv:
            for slot in (0, 1):
                b.xset_flag(recv, "aic", slot)  # the hand-off slot starts free
                b.set_flag("MTE3", "V", slot)  # yout slot is free
                if not direct:
                    b.set_flag("V", "MTE2", slot)  # xin slot is free
            with b.range(b.blk, tiles, b.nblk) as t:
                s = t.parity
                b.xwait_flag(recv, "aic", s)
                if not direct:
                    b.wait_flag("V", "MTE2", s)
                    b.tload(xin[s], ws[ring(s) + b.sub * half, 0])
                    b.xset_flag("MTE2", "aic", s)
                    b.set_flag("MTE2", "V", s)
                    b.wait_flag("MTE2", "V", s)
                b.wait_flag("MTE3", "V", s)
                b.tmuls(yout[s], xin[s], alpha)
                if direct:
                    b.xset_flag("V", "aic", s)
                else:
                    b.set_flag("V", "MTE2", s)
                b.trelu(yout[s], yout[s])
                b.set_flag("V", "MTE3", s)
                b.wait_flag("V", "MTE3", s)
                b.tstore(y[t * tm + b.sub * half, 0], yout[s])
                b.set_flag("MTE3", "V", s)
            for slot in (0, 1):
                b.wait_flag("MTE3", "V", slot)
                if not direct:
                    b.wait_flag("V", "MTE2", slot)

    return matmul_scale_relu
