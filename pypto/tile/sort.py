"""The tile rules of ``argsort_last`` and ``permute_last``: each row sorted in UB.

The input is seen as ``[R, n]``; each grid point owns ``tr`` whole rows. A row is sorted by
the vector unit's sorting instructions (pto-isa's ``TSORT32`` and ``TMRGSORT``), which order
f32 keys *descending* in IEEE total order and carry an int32 index with each key as an 8-byte
(value, index) structure:

1. the keys: the row in f32, transformed so that a descending sort gives the wanted order —
   ``-(x + 0)`` for ascending (``+ 0`` makes ``-0.0`` equal to ``0.0``), ``x + 0`` for
   descending, ``x`` itself for IEEE total order (top_k's); NaN becomes the smallest key
   (ascending: last) or the largest (descending: first) by a ``TSEL``;
2. rows whose length is not a multiple of 32 are spread to a padded width (a ``TGATHER``) and
   the padding set to the smallest f32 bit pattern, so it sorts after every key (ties keep
   their order, and the padding comes last in the row);
3. ``TSORT32`` sorts each block of 32, carrying the column index; ``TMRGSORT`` merges groups
   of four sorted runs, runs of 32, 128, 512, … structures, until one run holds the row;
4. a ``TGATHER`` of the structures' odd words (their indices, read through an int32 view of the
   same buffer) gives the permutation, which is stored.

int32 keys do not all fit f32 exactly, so they take two passes, least significant digit
first: the low 12 bits, then the high 20 bits (arithmetic shift) gathered in the first pass's
order and sorted carrying its permutation. Both passes are stable, so the second keeps the
first's order among equal high parts — a radix sort of two digits.

``permute_last`` loads a row block and its permutation and gathers with one ``TGATHER``
(indices offset by each row's start).
"""

from __future__ import annotations

import math

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import TileError
from pypto.graph.ir import Eqn, Var
from pypto.isa.ir import Cond, Expr, Space
from pypto.ops.table import register_rule
from pypto.tile.ir import Kernel, Section, Stmt, TileVar, TLoad, TOp, TStore
from pypto.tile.layout import gather_dtype
from pypto.tile.lower import KernelRule, Lowering, relayout, window
from pypto.tile.scan import rows_per_tile

__all__: list[str] = []

_F32, _I32 = dt.float32, dt.int32
_SMALLEST = 0xFFFFFFFF
"""The padding's bits: a NaN with the sign set and every payload bit, below every other f32
in IEEE total order."""
_NAN_BITS = {"ascending": 0xFFC00000, "descending": 0x7FC00000}
"""A NaN key: the smallest (ascending sorts put NaN last) or the largest (descending: first)."""
_LO_BITS = 12
"""The low digit of an int32 key; the high one (20 bits) and the low one are exact in f32."""


def _bits_row(bits: int, n: int) -> np.ndarray:
    return np.full((1, n), bits, np.uint32).view(np.float32)


def _sort_bytes(n: int, npad: int, d: dt.DType, two: bool) -> int:
    """UB bytes one row needs: the input and the permutation twice (double buffers), the keys,
    the two structure buffers and the constant index rows (a second pass adds its keys, first
    permutation and gather indices)."""
    b = 2 * n * d.itemsize + 3 * n * 4 + npad * 4 * 3 + npad * 8 * 2
    if two:
        b += npad * 4 * 5
    return b


def _argsort(lw: Lowering, e: Eqn) -> None:
    (x,) = e.inputs
    assert isinstance(x, Var)
    order = dict(e.params)["order"]
    shape, d, loc = x.aval.shape, x.aval.dtype, e.loc
    n = shape[-1]
    R = math.prod(shape[:-1])
    out = lw.buffer(e.out)
    lw.view(out, (R, n))
    if R * n == 0:
        return
    npad = -(-n // 32) * 32
    two = d is _I32
    per_row = _sort_bytes(n, npad, d, two)
    cap = lw.machine.ub_bytes
    if per_row > cap:
        longest = max(32, (cap // _sort_bytes(32, 32, d, two)) * 32)
        raise TileError(
            f"a row of {n} {d.short} elements needs {per_row} bytes of UB to sort, "
            f"{lw.machine.name} gives a sort {cap} (tensor {x.aval})",
            op="argsort",
            hint=f"sort along an axis of at most about {longest} elements on the NPU, "
            "or use backend='interpret'",
        )
    tr = rows_per_tile(R, max(1, cap // per_row))
    grid = (("r", R // tr),)
    row = Expr.reg("r") * tr if R // tr > 1 else Expr()
    xbuf = lw.buffer(x)
    xv = lw.view(xbuf, (R, n))
    wdw = window(xv, n, (tr, n), row, Expr())
    if wdw is None:
        xbuf = relayout(lw, xbuf, (R, n), loc)
        wdw = (tr, n), row, Expr()

    pre: list[Stmt] = []
    consts: dict[str, TileVar] = {}

    def const(name: str, data: np.ndarray, dtype: dt.DType) -> TileVar:
        """A constant tile, loaded once per core."""
        if name not in consts:
            consts[name] = t = TileVar(name, Space.UB, dtype, (data.shape[0], data.shape[1]))
            pre.append(TLoad(t, lw.const_buffer("sort_" + name, data), Expr(), Expr(), loc))
        return consts[name]

    i, j = np.arange(tr, dtype=np.int32)[:, None], np.arange(npad, dtype=np.int32)[None, :]
    iota = const("iota", np.broadcast_to(j, (tr, npad)).copy(), _I32)
    # the odd words of each row's structures: their indices
    odd = (i * 2 * npad + 2 * j + 1).astype(np.int32)
    pick = const("pick", np.ascontiguousarray(odd[:, :n]), _I32)

    xt = TileVar("x", Space.UB, d, (tr, n))
    body: list[Stmt] = [TLoad(TileVar(xt.name, Space.UB, d, wdw[0]), xbuf, wdw[1], wdw[2], loc)]

    def op(name: str, dst: TileVar, *args: object) -> TileVar:
        body.append(TOp(name, dst, args, loc))  # type: ignore[arg-type]
        return dst

    def f32(src: TileVar, name: str) -> TileVar:
        if src.dtype is _F32:
            return src
        return op("TCVT", TileVar(name, Space.UB, _F32, src.shape), src)

    def keys(v: TileVar, name: str, negate: bool) -> TileVar:
        """``v``'s f32 sort keys at the padded width (padding smallest)."""
        k = TileVar(name, Space.UB, _F32, (tr, n))
        if negate:
            op("TMULS", k, op("TADDS", k, v, 0.0), -1.0)
        elif order != "total" and d.is_floating:
            op("TADDS", k, v, 0.0)
        else:
            k = v
        if d.is_floating and order != "total":
            nan = TileVar("nan", Space.UB, dt.bool_, (tr, n))
            op("TCMP", nan, v, v, Cond.NE)
            op("TSEL", k, nan, const("nanrow", _bits_row(_NAN_BITS[order], n), _F32), k)
        if npad == n:
            return k
        spread = np.minimum(i * n + j, i * n + n - 1).astype(np.int32)
        kp = TileVar(name + "p", Space.UB, _F32, (tr, npad))
        op("TGATHER", kp, k, const("spread", spread, _I32))
        cols = const("cols", np.arange(npad, dtype=np.int32)[None, :], _I32)
        pad = op("TCMPS", TileVar("pad", Space.UB, dt.bool_, (1, npad)), cols, float(n), Cond.GE)
        return op("TSEL", kp, pad, const("padrow", _bits_row(_SMALLEST, npad), _F32), kp)

    def sort_pass(k: TileVar, idx: TileVar) -> TileVar:
        """The structures of ``k``'s rows sorted descending, carrying ``idx``."""
        bufs = [TileVar(s, Space.UB, _F32, (tr, 2 * npad)) for s in ("s0", "s1")]
        op("TSORT32", bufs[0], k, idx)
        run, cur = 32, 0
        while run < npad:
            op("TMRGSORT", bufs[1 - cur], bufs[cur], run)
            run, cur = run * 4, 1 - cur
        return TileVar(bufs[cur].name, Space.UB, _I32, (tr, 2 * npad))

    neg = order == "ascending"
    if not two:
        structs = sort_pass(keys(f32(xt, "xf"), "k", neg), iota)
    else:
        lo = op("TANDS", TileVar("lo", Space.UB, _I32, (tr, n)), xt, float(2**_LO_BITS - 1))
        hi = op("TSHRS", TileVar("hi", Space.UB, _I32, (tr, n)), xt, float(_LO_BITS))
        first = sort_pass(keys(f32(lo, "lof"), "klo", neg), iota)
        perm1 = op(
            "TGATHER",
            TileVar("perm1", Space.UB, _I32, (tr, npad)),
            first,
            const("pick1", odd, _I32),
        )
        rowoff = const("rowoff", np.broadcast_to(i * npad, (tr, npad)).copy(), _I32)
        at = op("TADD", TileVar("at", Space.UB, _I32, (tr, npad)), perm1, rowoff)
        khi = keys(f32(hi, "hif"), "khi", neg)
        # the high keys in the first pass's order (the padding stays last)
        khi_s = op("TGATHER", TileVar("khis", Space.UB, _F32, (tr, npad)), khi, at)
        structs = sort_pass(khi_s, perm1)
    perm = op("TGATHER", TileVar("perm", Space.UB, _I32, (tr, n)), structs, pick)
    body.append(TStore(out, row, Expr(), perm, loc))
    lw.add_kernel(
        Kernel(
            lw.fresh("argsort"),
            "sort",
            grid,
            (Section("aiv", tuple(body), tuple(pre)),),
            (("rows", tr), ("cols", npad)),
            loc=loc,
        )
    )


def _permute(lw: Lowering, e: Eqn) -> None:
    x, idx = e.inputs
    assert isinstance(x, Var) and isinstance(idx, Var)
    shape, d, loc = x.aval.shape, x.aval.dtype, e.loc
    n = shape[-1]
    R = math.prod(shape[:-1])
    out = lw.buffer(e.out)
    lw.view(out, (R, n))
    if R * n == 0:
        return
    g = gather_dtype(d)
    per_row = n * (2 * d.itemsize + 2 * g.itemsize + 4 * 3)
    cap = lw.machine.ub_bytes // 2
    if per_row > cap:
        raise TileError(
            f"a row of {n} {d.short} elements needs {per_row} bytes of UB to reorder, "
            f"{lw.machine.name} gives it {cap} (tensor {x.aval})",
            op="sort",
            hint="sort along a shorter axis on the NPU, or use backend='interpret'",
        )
    tr = rows_per_tile(R, max(1, cap // per_row))
    grid = (("r", R // tr),)
    row = Expr.reg("r") * tr if R // tr > 1 else Expr()
    i = np.arange(tr, dtype=np.int32)[:, None]
    rowoff = TileVar("rowoff", Space.UB, _I32, (tr, n))
    data = np.broadcast_to(i * n, (tr, n)).copy()
    pre: list[Stmt] = [TLoad(rowoff, lw.const_buffer("perm_rows", data), Expr(), Expr(), loc)]
    body: list[Stmt] = []
    tiles = []
    for v, dd, name in ((x, d, "x"), (idx, _I32, "i")):
        buf = lw.buffer(v)
        view = lw.view(buf, (R, n))
        w = window(view, n, (tr, n), row, Expr())
        if w is None:
            buf = relayout(lw, buf, (R, n), loc)
            w = (tr, n), row, Expr()
        t = TileVar(name, Space.UB, dd, (tr, n))
        body.append(TLoad(TileVar(name, Space.UB, dd, w[0]), buf, w[1], w[2], loc))
        tiles.append(t)
    xt, it = tiles
    at = TileVar("at", Space.UB, _I32, (tr, n))
    body.append(TOp("TADD", at, (it, rowoff), loc))
    if g is not d:
        xg = TileVar("xg", Space.UB, g, (tr, n))
        body.append(TOp("TCVT", xg, (xt,), loc))
        xt = xg
    y = TileVar("y", Space.UB, g, (tr, n))
    body.append(TOp("TGATHER", y, (xt, at), loc))
    if g is not d:
        yd = TileVar("yd", Space.UB, d, (tr, n))
        body.append(TOp("TCVT", yd, (y,), loc))
        y = yd
    body.append(TStore(out, row, Expr(), y, loc))
    lw.add_kernel(
        Kernel(
            lw.fresh("permute"),
            "sort",
            grid,
            (Section("aiv", tuple(body), tuple(pre)),),
            (("rows", tr),),
            loc=loc,
        )
    )


register_rule("tile", "argsort_last")(KernelRule(_argsort))
register_rule("tile", "permute_last")(KernelRule(_permute))
