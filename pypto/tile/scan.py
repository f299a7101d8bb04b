"""The tile rule of ``scan_add``: running sums along the last axis, in UB.

The input is seen as ``[R, n]``. Each grid point owns ``tr`` rows and walks them in chunks of
``w`` columns (a ``for %c`` loop; a narrower last chunk after it). A chunk is loaded and
scanned where it lies, ``⌈log₂ w⌉`` steps of ``y += shift(y, k)`` for ``k = 1, 2, 4, …``:
the shift is one ``TGATHER`` of ``y`` at ``index - k`` (a constant index tile moved by a
``TADDS``), and a ``TSEL`` zeroes the first ``k`` columns it has no partner for. The last
column of the chunk's sums, ``[tr, 1]``, is carried into the next chunk (``TADD`` with a
column broadcast) — the rows never go back to GM between steps, and the whole scan is one
kernel instead of ``⌈log₂ n⌉`` passes over GM.
"""

from __future__ import annotations

import math

import numpy as np

from pypto import dtypes as dt
from pypto.graph.ir import Eqn, Var
from pypto.isa.ir import Cond, Expr, Space
from pypto.ops.table import register_rule
from pypto.tile.ir import For, Kernel, Section, Stmt, TileVar, TLoad, TOp, TStore
from pypto.tile.layout import tile_bytes
from pypto.tile.lower import KernelRule, Lowering, relayout, window

__all__: list[str] = []


def rows_per_tile(R: int, cap: int) -> int:
    """The largest divisor of ``R`` up to ``cap`` (so every grid point has whole tiles)."""
    return max(t for t in range(1, max(1, min(R, cap)) + 1) if R % t == 0)


def _scan(lw: Lowering, e: Eqn) -> None:
    (x,) = e.inputs
    assert isinstance(x, Var)
    shape = x.aval.shape
    d = x.aval.dtype
    n = shape[-1]
    R = math.prod(shape[:-1])
    loc = e.loc
    out = lw.buffer(e.out)
    lw.view(out, (R, n))
    if R * n == 0:
        return
    xbuf = lw.buffer(x)
    xv = lw.view(xbuf, (R, n))
    # a chunk and each of its four working copies (sums, shifted sums, indices, and the
    # constant index tile) in half a copy tile, so that they and the double buffers fit UB
    tb = tile_bytes(lw.machine) // 2
    w = min(n, max(1, tb // 4 // 4))
    tr = rows_per_tile(R, max(1, tb // (w * 4)))
    grid = (("r", R // tr),) if R // tr > 1 else (("r", 1),)
    row = Expr.reg("r") * tr if R // tr > 1 else Expr()
    pre: list[Stmt] = []
    carry = TileVar("carry", Space.UB, d, (tr, 1))

    def chunk(width: int, col: Expr, tag: str, last: bool) -> list[Stmt]:
        """Scan the ``[tr, width]`` chunk at column ``col``, add the carry, store it and (but
        for the last chunk) carry its last column."""
        nonlocal xbuf, xv
        base = TileVar("base" + tag, Space.UB, dt.int32, (tr, width))
        cols = TileVar("cols" + tag, Space.UB, dt.int32, (1, width))
        zero = TileVar("zero" + tag, Space.UB, d, (1, width))
        flat = np.arange(tr * width, dtype=np.int32).reshape(tr, width)
        pre.extend(
            [
                TLoad(base, lw.const_buffer("scan_idx", flat), Expr(), Expr(), loc),
                TLoad(cols, lw.const_buffer("scan_col", flat[:1]), Expr(), Expr(), loc),
                TOp("TEXPANDS", zero, (0.0,), loc),
            ]
        )
        xt = TileVar("x" + tag, Space.UB, d, (tr, width))
        wdw = window(xv, n, (tr, width), row, col)
        if wdw is None:
            xbuf = relayout(lw, xbuf, (R, n), loc)
            xv = (R, n)
            wdw = (tr, width), row, col
        st: list[Stmt] = [TLoad(TileVar(xt.name, Space.UB, d, wdw[0]), xbuf, wdw[1], wdw[2], loc)]
        y = TileVar("y" + tag, Space.UB, d, (tr, width))
        idx = TileVar("idx" + tag, Space.UB, dt.int32, (tr, width))
        sh = TileVar("sh" + tag, Space.UB, d, (tr, width))
        m = TileVar("m" + tag, Space.UB, dt.bool_, (1, width))
        src, k = xt, 1
        while k < width:
            # y[:, c] += y[:, c - k] for c >= k: the element k to the left, gathered (the
            # first k columns read a clamped index and are zeroed)
            st += [
                TOp("TADDS", idx, (base, float(-k)), loc),
                TOp("TMAXS", idx, (idx, 0.0), loc),
                TOp("TGATHER", sh, (src, idx), loc),
                TOp("TCMPS", m, (cols, float(k), Cond.GE), loc),
                TOp("TSEL", sh, (m, sh, zero), loc),
                TOp("TADD", y, (src, sh), loc),
            ]
            src, k = y, k * 2
        st += [TOp("TADD", y, (src, carry), loc), TStore(out, row, col, y, loc)]
        if not last:
            st.append(TOp("TEXTRACT", carry, (y, Expr(), Expr.of(width - 1)), loc))
        return st

    body: list[Stmt] = [TOp("TEXPANDS", carry, (0.0,), loc)]
    main, tail = n // w, n % w
    if main == 1 and not tail:  # whole rows in one chunk: nothing to carry
        body += chunk(w, Expr(), "", last=True)
    elif main:
        inner = chunk(w, Expr.reg("c") * w, "", last=False)
        body.append(For("c", Expr(), Expr.of(main), 1, tuple(inner)))
    if tail:
        body += chunk(tail, Expr.of(main * w), "t", last=True)
    lw.add_kernel(
        Kernel(
            lw.fresh("cumsum"),
            "scan",
            grid,
            (Section("aiv", tuple(body), tuple(pre)),),
            (("rows", tr), ("cols", w)),
            loc=loc,
        )
    )


register_rule("tile", "scan_add")(KernelRule(_scan))
