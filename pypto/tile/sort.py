"""The tile rules of ``argsort_last`` and ``gather_last``: rows sorted in UB, or through GM
when they are too long for it (:func:`_long_sort`).

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

``gather_last`` loads a row block and its indices and gathers with one ``TGATHER``
(indices clamped into the row unless they are a permutation, then offset by each row's
start). A reordering by a sort's permutation — ``gather_last(y, argsort_last(x))``: a
sort's values (``y`` is ``x``) or its VJP (``y`` the cotangent) — is gathered in the argsort
kernel instead, from rows in UB, and the permutation is stored only if something else reads
it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import SourceLoc, TileError
from pypto.graph.ir import Eqn, Lit, Var
from pypto.isa.ir import Cond, Expr, Space
from pypto.ops.table import register_rule
from pypto.tile.ir import For, Kernel, Section, SOp, Stmt, TileVar, TLoad, TOp, TStore
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


def _bits_col(bits: int, rows: int) -> np.ndarray:
    """A ``[rows, 1]`` f32 column of the bit pattern ``bits`` (a select broadcasts it)."""
    return np.full((rows, 1), bits, np.uint32).view(np.float32)


@dataclass
class _Build:
    """The statements of a sort kernel's grid point as they are built, before the GM buffers
    are known: constant tiles are listed with their data; loads and stores may name ``x``,
    ``y<i>``, ``perm:<w>`` and ``vals<i>:<w>`` (the input, a tensor to reorder, the
    permutation or a reordered tensor, their first ``w`` columns), which the rule maps to
    buffers."""

    d: dt.DType
    order: str
    loc: SourceLoc | None
    consts: dict[str, tuple[TileVar, np.ndarray]] = field(default_factory=dict)
    body: list[Stmt] = field(default_factory=list)
    width: int = 0
    """structures per row after the last :meth:`sort_pass`"""

    def const(self, name: str, data: np.ndarray, dtype: dt.DType) -> TileVar:
        """A constant tile, loaded once per core."""
        if name not in self.consts:
            t = TileVar(name, Space.UB, dtype, (data.shape[0], data.shape[1]))
            self.consts[name] = (t, data)
        return self.consts[name][0]

    def op(self, name: str, dst: TileVar, *args: object) -> TileVar:
        self.body.append(TOp(name, dst, args, self.loc))  # type: ignore[arg-type]
        return dst

    def f32(self, src: TileVar, name: str) -> TileVar:
        if src.dtype is _F32:
            return src
        return self.op("TCVT", TileVar(name, Space.UB, _F32, src.shape), src)

    def keys(self, v: TileVar, name: str, npad: int, in_place: bool) -> TileVar:
        """``v``'s f32 sort keys (module docstring) spread to ``npad`` columns, the padding
        smallest; computed in place when ``in_place`` (``v`` is the kernel's own copy)."""
        tr, n = v.shape
        op, d, order = self.op, self.d, self.order
        k = v if in_place else TileVar(name, Space.UB, _F32, (tr, n))
        if order == "ascending":
            op("TMULS", k, op("TADDS", k, v, 0.0), -1.0)
        elif order != "total" and d.is_floating:
            op("TADDS", k, v, 0.0)
        else:
            k = v
        if d.is_floating and order != "total":
            nan = TileVar("nan", Space.UB, dt.bool_, (tr, n))
            op("TCMP", nan, v, v, Cond.NE)
            col = self.const("nan_col", _bits_col(_NAN_BITS[order], tr), _F32)
            op("TSEL", k, nan, col, k)
        if npad == n:
            return k
        i, j = np.arange(tr, dtype=np.int32)[:, None], np.arange(npad, dtype=np.int32)[None, :]
        spread = np.minimum(i * n + j, i * n + n - 1).astype(np.int32)
        kp = TileVar(name + "p", Space.UB, _F32, (tr, npad))
        op("TGATHER", kp, k, self.const("spread", spread, _I32))
        cols = self.const("cols", np.arange(npad, dtype=np.int32)[None, :], _I32)
        pad = op("TCMPS", TileVar("pad", Space.UB, dt.bool_, (1, npad)), cols, float(n), Cond.GE)
        return op("TSEL", kp, pad, self.const("pad_col", _bits_col(_SMALLEST, tr), _F32), kp)

    def sort_pass(self, k: TileVar, idx: TileVar, top: int = 0) -> TileVar:
        """The structures of ``k``'s rows sorted descending, carrying ``idx`` (an ``i32`` view
        of them). With ``top``, only the first ``top`` of each row are wanted: once the runs
        are longer, each is cut to its first ``top`` structures (a ``TGATHER``) before the
        next merge, since a row's top ``top`` are among its runs' (the row's width must be
        a multiple of the runs' length then)."""
        tr, npad = k.shape
        bufs = [TileVar(s, Space.UB, _F32, (tr, 2 * npad)) for s in ("s0", "s1")]
        self.op("TSORT32", bufs[0], k, idx)
        run, cur, width = 32, 0, npad
        while run < width:
            src = TileVar(bufs[cur].name, Space.UB, _F32, (tr, 2 * width))
            dst = TileVar(bufs[1 - cur].name, Space.UB, _F32, (tr, 2 * width))
            self.op("TMRGSORT", dst, src, run)
            run, cur = run * 4, 1 - cur
            if top and top < run < width:
                runs = -(-width // run)
                i = np.arange(tr, dtype=np.int32)[:, None, None]
                j = np.arange(runs, dtype=np.int32)[None, :, None]
                w = np.arange(2 * top, dtype=np.int32)[None, None, :]
                cut = (i * 2 * width + j * 2 * run + w).reshape(tr, runs * 2 * top)
                src = TileVar(bufs[cur].name, Space.UB, _F32, (tr, 2 * width))
                dst = TileVar(bufs[1 - cur].name, Space.UB, _F32, (tr, runs * 2 * top))
                self.op("TGATHER", dst, src, self.const(f"cut{width}", cut, _I32))
                run, cur, width = top, 1 - cur, runs * top
        self.width = width
        return TileVar(bufs[cur].name, Space.UB, _I32, (tr, 2 * width))

    def ub_bytes(self, align: int, loads: tuple[str, ...] = ("x",)) -> int:
        """UB the tiles take without reuse, the tiles loaded from ``loads`` and every stored
        tile double-buffered: at least what the Block level allocates."""
        size: dict[str, int] = {}
        double: set[str] = set()
        for st in [TLoad(t, "", Expr(), Expr()) for t, _ in self.consts.values()] + self.body:
            for t in _tiles(st):
                size[t.name] = max(size.get(t.name, 0), -(-t.nbytes // align) * align)
            if isinstance(st, TStore) or (isinstance(st, TLoad) and st.tensor in loads):
                double |= {t.name for t in _tiles(st)}
        return sum(size.values()) + sum(size[n] for n in double)


def _tiles(st: Stmt) -> list[TileVar]:
    if isinstance(st, TLoad):
        return [st.dst]
    if isinstance(st, TStore):
        return [st.src]
    if isinstance(st, SOp):
        return [a for a in st.args if isinstance(a, TileVar)]
    if isinstance(st, For):
        return [t for s in st.body for t in _tiles(s)]
    assert isinstance(st, TOp)
    return [st.dst, *(a for a in st.args if isinstance(a, TileVar))]


def _sort_kernel(
    n: int,
    d: dt.DType,
    order: str,
    tr: int,
    row: Expr,
    keep: list[int],
    gathers: list[tuple[dt.DType | None, list[int]]],
    loc: SourceLoc | None,
) -> _Build:
    """One grid point's sort of the rows from ``row`` (module docstring). The permutation is
    stored once per width in ``keep`` (its first columns: ``n`` is the whole row, less a
    ``top_k``'s slice), to ``perm:<position in keep>``. Each entry ``(dtype, widths)`` of
    ``gathers`` reorders a tensor by the permutation and stores it likewise: the sorted rows
    themselves (``dtype`` None) or the rows of another tensor, loaded as ``y<i>``
    (``gather_last(y, argsort(x))``: a VJP's). When every width is less than ``n`` (a
    top-k), the merges keep only what the widest needs (:meth:`_Build.sort_pass`)."""
    widths = keep + [w for _, ws in gathers for w in ws]
    K = max(widths, default=0)
    top = 0
    npad = -(-n // 32) * 32
    if 0 < K < n and d is not _I32:
        top = 32  # the run length kept: 32 * 2^a >= K
        while top < K:
            top *= 2
        run = 32  # whole runs of the first merged length of at least ``top``
        while run < top:
            run *= 4
        npad = -(-n // run) * run
    b = _Build(d, order, loc)
    op = b.op
    i, j = np.arange(tr, dtype=np.int32)[:, None], np.arange(npad, dtype=np.int32)[None, :]
    iota = b.const("iota", np.broadcast_to(j, (tr, npad)).copy(), _I32)
    xt = TileVar("x", Space.UB, d, (tr, n))
    b.body.append(TLoad(xt, "x", row, Expr(), loc))
    if d is not _I32:
        xf = b.f32(xt, "xf")
        structs = b.sort_pass(b.keys(xf, "k", npad, xf is not xt), iota, top)
    else:
        # the odd words of each row's structures: their indices
        odd = (i * 2 * npad + 2 * j + 1).astype(np.int32)
        lo = op("TANDS", TileVar("lo", Space.UB, _I32, (tr, n)), xt, float(2**_LO_BITS - 1))
        hi = op("TSHRS", TileVar("hi", Space.UB, _I32, (tr, n)), xt, float(_LO_BITS))
        first = b.sort_pass(b.keys(b.f32(lo, "lof"), "klo", npad, True), iota)
        pick1 = b.const("pick1", odd, _I32)
        perm1 = op("TGATHER", TileVar("perm1", Space.UB, _I32, (tr, npad)), first, pick1)
        rowoff = b.const("rowoff", np.broadcast_to(i * npad, (tr, npad)).copy(), _I32)
        at = op("TADD", TileVar("at", Space.UB, _I32, (tr, npad)), perm1, rowoff)
        khi = b.keys(b.f32(hi, "hif"), "khi", npad, True)
        # the high keys in the first pass's order (the padding stays last)
        khi_s = op("TGATHER", TileVar("khis", Space.UB, _F32, (tr, npad)), khi, at)
        structs = b.sort_pass(khi_s, perm1)
    m = K if top else n  # the permutation's columns the kernel needs
    width = b.width
    jm = np.arange(m, dtype=np.int32)[None, :]
    pick = b.const("pick", (i * 2 * width + 2 * jm + 1).astype(np.int32), _I32)

    def store(t: TileVar, ws: list[int], what: str) -> None:
        for pos, w in enumerate(ws):
            out = t
            if w < m:  # a slice of the leading columns: only they leave UB
                tw = TileVar(f"{t.name}_{w}", Space.UB, t.dtype, (tr, w))
                out = op("TEXTRACT", tw, t, Expr(), Expr())
            b.body.append(TStore(f"{what}:{pos}", row, Expr(), out, loc))

    perm = op("TGATHER", TileVar("perm", Space.UB, _I32, (tr, m)), structs, pick)
    store(perm, keep, "perm")
    if gathers:
        rows = b.const("perm_rows", np.broadcast_to(i * n, (tr, m)).copy(), _I32)
        # in place when the permutation is not stored (nothing else then reads it)
        at = op("TADD", perm if not keep else TileVar("vat", Space.UB, _I32, (tr, m)), perm, rows)
    for gi, (yd, ws) in enumerate(gathers):
        src, sd = xt, d
        if yd is not None:
            src, sd = TileVar(f"y{gi}", Space.UB, yd, (tr, n)), yd
            b.body.append(TLoad(src, src.name, row, Expr(), loc))
        g = gather_dtype(sd)
        if g is not sd:
            src = op("TCVT", TileVar(f"g{gi}", Space.UB, g, (tr, n)), src)
        vals = op("TGATHER", TileVar(f"vals{gi}", Space.UB, g, (tr, m)), src, at)
        if g is not sd:
            vals = op("TCVT", TileVar(f"valsd{gi}", Space.UB, sd, (tr, m)), vals)
        store(vals, ws, f"vals{gi}")
    return b


def _made_before(lw: Lowering, v: Var | Lit, e: Eqn) -> bool:
    """Whether ``v`` holds its values when ``e``'s kernel runs: an input, a constant, or the
    result of an equation before ``e`` (lowered already)."""
    made = [i for i, eq in enumerate(lw.func.eqns) if eq.out is v]
    return not made or made[0] < next(i for i, eq in enumerate(lw.func.eqns) if eq is e)


def _rows_window(
    lw: Lowering, v: Var, R: int, w: int, tr: int, row: Expr, loc: SourceLoc | None
) -> tuple[str, tuple[tuple[int, int], Expr, Expr]]:
    """The buffer and GM window of ``tr`` whole rows of ``v`` seen as ``[R, w]`` from ``row``
    (a relaid copy when its layout has no such window)."""
    buf = lw.buffer(v)
    wdw = window(lw.view(buf, (R, w)), w, (tr, w), row, Expr())
    if wdw is None:
        buf = relayout(lw, buf, (R, w), loc)
        wdw = (tr, w), row, Expr()
    return buf, wdw


def _readers(lw: Lowering, v: Var) -> list[Eqn]:
    return [r for r in lw.func.eqns if v in r.inputs and id(r) not in lw.skip]


def _prefix(r: Eqn, v: Var) -> int | None:
    """The width of the leading columns that ``r`` keeps of ``v``, when it is a slice of
    whole leading axes and a prefix of the last."""
    if r.op != "slice" or r.inputs[0] is not v:
        return None
    *lead, last = dict(r.params)["index"]
    if any(ix != (0, size, 1) for ix, size in zip(lead, v.aval.shape[:-1], strict=True)):
        return None
    return last[1] if last[0] == 0 and last[2] == 1 and last[1] > 0 else None


def _plan_stores(lw: Lowering, v: Var, readers: list[Eqn], n: int) -> list[tuple[int, Eqn | None]]:
    """Where a kernel stores ``v`` (rows of ``n``): ``[(n, None)]`` for whole rows into ``v``'s
    buffer; or, when nothing but slices of its first columns reads it, ``(width, slice)`` for
    each, into the slice's buffer (the slice is then done); nothing when nothing reads it."""
    if v in lw.outputs_of:
        return [(n, None)]
    widths = [_prefix(r, v) for r in readers]
    if None in widths:
        return [(n, None)]
    return [(w, r) for r, w in zip(readers, widths, strict=True) if w is not None]


def _argsort(lw: Lowering, e: Eqn) -> None:
    (x,) = e.inputs
    assert isinstance(x, Var)
    order = dict(e.params)["order"]
    shape, d, loc = x.aval.shape, x.aval.dtype, e.loc
    n = shape[-1]
    R = math.prod(shape[:-1])
    if R * n == 0:
        lw.view(lw.buffer(e.out), (R, n))
        return
    m = lw.machine
    # a tensor reordered by this permutation (a sort's values: this input; a sort's VJP: the
    # cotangent) is gathered here, from rows in UB, when its tiles fit too
    readers = _readers(lw, e.out)
    fused = [
        r
        for r in readers
        if r.op == "gather_last"
        and r.inputs[1] is e.out
        and r.inputs[0].aval.shape == shape
        and _made_before(lw, r.inputs[0], e)
    ]

    def sources(rs: list[Eqn]) -> list[dt.DType | None]:
        return [None if r.inputs[0] is x else r.inputs[0].aval.dtype for r in rs]

    def fits(
        n: int,
        tr: int,
        rs: list[Eqn],
        keep: list[int] | None = None,
        gathers: list[tuple[dt.DType | None, list[int]]] | None = None,
    ) -> bool:
        """Whether the kernel's tiles fit UB (whole rows stored, unless widths are given)."""
        keep = [n] if keep is None else keep
        gathers = [(y, [n]) for y in sources(rs)] if gathers is None else gathers
        k = _sort_kernel(n, d, order, tr, Expr(), keep, gathers, loc)
        loads = ("x", *(f"y{i}" for i in range(len(rs))))
        return k.ub_bytes(m.align_bytes, loads) <= m.ub_bytes

    if not fits(n, 1, []):
        _long_sort(lw, e, readers, fused)
        return
    while fused and not fits(n, 1, fused):
        fused = fused[:-1]
    # where each result goes: whole rows into its buffer, or only the columns that the
    # slices reading it keep (top_k's) into theirs
    plans = [(e.out, _plan_stores(lw, e.out, [r for r in readers if r not in fused], n))]
    plans += [(r.out, _plan_stores(lw, r.out, _readers(lw, r.out), n)) for r in fused]
    perm_w = [w for w, _ in plans[0][1]]
    gathers = [
        (y, [w for w, _ in pl]) for y, (_, pl) in zip(sources(fused), plans[1:], strict=True)
    ]
    if not fits(n, 1, fused, perm_w, gathers):  # a top-k's narrower sort takes more padding
        perm_w = [n]
        gathers = [(y, [n]) for y, _ in gathers]
        plans = [(v, [(n, None)]) for v, _ in plans]
    tr = 1
    for t in sorted({t for t in range(1, min(R, 1024) + 1) if R % t == 0}, reverse=True):
        if fits(n, t, fused, perm_w, gathers):
            tr = t
            break
    gm: dict[str, str] = {}
    for what, (v, plan) in zip(["perm", *(f"vals{i}" for i in range(len(fused)))], plans):
        for pos, (w, sl) in enumerate(plan):
            buf = lw.buffer(v if sl is None else sl.out)
            lw.view(buf, (R, w))
            gm[f"{what}:{pos}"] = buf
            if sl is not None:
                lw.skip.add(id(sl))
    for r in fused:
        lw.skip.add(id(r))
    row = Expr.reg("r") * tr if R // tr > 1 else Expr()
    k = _sort_kernel(n, d, order, tr, row, perm_w, gathers, loc)
    windows = {"x": _rows_window(lw, x, R, n, tr, row, loc)}
    for gi, r in enumerate(fused):
        src = r.inputs[0]
        assert isinstance(src, Var)
        windows[f"y{gi}"] = _rows_window(lw, src, R, n, tr, row, loc)
    body: list[Stmt] = []
    for st in k.body:
        if isinstance(st, TLoad):  # an input's window
            buf, wdw = windows[st.tensor]
            st = TLoad(replace(st.dst, shape=wdw[0]), buf, wdw[1], wdw[2], loc)
        elif isinstance(st, TStore):
            st = TStore(gm[st.tensor], st.row, st.col, st.src, loc)
        body.append(st)
    pre: list[Stmt] = [
        TLoad(t, lw.const_buffer("sort_" + t.name, data), Expr(), Expr(), loc)
        for t, data in k.consts.values()
    ]
    lw.add_kernel(
        Kernel(
            lw.fresh("argsort"),
            "sort",
            (("r", R // tr),),
            (Section("aiv", tuple(body), tuple(pre)),),
            (("rows", tr), ("cols", -(-n // 32) * 32)),
            loc=loc,
        )
    )


LONG_BLOCK = 2048
"""Rows too long to sort in UB are sorted in blocks of this many elements, which are then
merged pairwise through GM in chunks of this many structures (or fewer, a power of two, when
the machine's UB does not hold a block's tiles)."""


def _long_sort(lw: Lowering, e: Eqn, readers: list[Eqn], fused: list[Eqn]) -> None:
    """Sort rows that do not fit UB (float keys): blocks sorted in UB, merged through GM.

    1. Each block of ``C`` elements is sorted in UB (a short last block padded with the
       smallest key) and its structures stored to a GM workspace row of ``N = C·2^p``
       structures; blocks past the row hold the smallest key.
    2. ``p`` merge passes double the sorted runs. A grid point writes ``C`` structures of a
       merged pair of runs ``A`` and ``B``, from output position ``d``: the scalar unit finds
       how many of them come from ``A`` by a binary search on the merge path (each step loads
       ``A[m]`` and ``B[d - m - 1]``, compares them in IEEE total order on the vector unit and
       reads the answer with ``SLD``); then ``C`` structures of each run from there are loaded,
       those past the run's end masked to the smallest key (a mask loaded at an offset the
       scalar unit computes), and ``TMRGSORT2`` merges them: the first ``C`` are the output.
       Ties go to ``A``, the earlier run, in both the search and the merge: the sort is
       stable.
    3. The indices (or, for a sort's values, the values carried in their place) are read
       out of the structures of the first ``n``.
    """
    (x,) = e.inputs
    assert isinstance(x, Var)
    order = dict(e.params)["order"]
    outs: list[tuple[Var | None, Var]] = []
    if e.out in lw.outputs_of or len(fused) < len(readers):
        outs.append((None, e.out))
    for r in fused:
        y = r.inputs[0]
        assert isinstance(y, Var)
        outs.append((y, r.out))
        lw.skip.add(id(r))
    _long_kernels(lw, x, order, outs, e.loc)


Src = tuple[str, dt.DType, str]
"""A GM buffer of ``[R, n]`` rows, its dtype and which part of each element: ``""`` the
value, ``"lo"`` / ``"hi"`` an int32's low 12 bits / the rest (arithmetic shift)."""


def _long_kernels(
    lw: Lowering,
    x: Var,
    order: str,
    outs: list[tuple[Var | None, Var]],
    loc: SourceLoc | None,
) -> None:
    """The kernels of :func:`_long_sort` sorting by the keys ``x``, one sort per result
    ``(carried, out)``: ``out`` gets the permutation (``carried`` None) or the tensor
    ``carried`` reordered by it.

    int32 keys are a radix sort of two stable sorts: by the low digit, carrying the index
    (the first permutation) and, in a second sort, the high digit (now in that order); then
    by those high digits, carrying the first permutation (the result). A tensor to reorder
    is first carried through a sort by the low digit too."""
    shape, d = x.aval.shape, x.aval.dtype
    n, R = shape[-1], math.prod(shape[:-1])
    row = Expr.reg("r")
    xbuf, _ = _rows_window(lw, x, R, n, 1, row, loc)

    def temp(dtype: dt.DType) -> str:
        b = lw.new_buffer("sort_tmp", dtype, R * n)
        lw.view(b, (R, n))
        return b

    first: str | None = None
    high: str | None = None
    if d is _I32:  # the first digit's sorts
        first, high = temp(_I32), temp(_I32)
        _long_pass(lw, (xbuf, d, "lo"), order, None, first, R, n, loc)
        _long_pass(lw, (xbuf, d, "lo"), order, (xbuf, d, "hi"), high, R, n, loc)
    for y, out in outs:
        dst = lw.buffer(out)
        lw.view(dst, (R, n))
        carried: Src | None = None
        if y is not None:  # the tensor whose values the structures carry
            ybuf = xbuf if y is x else _rows_window(lw, y, R, n, 1, row, loc)[0]
            carried = (ybuf, y.aval.dtype, "")
        if d is not _I32:
            _long_pass(lw, (xbuf, d, ""), order, carried, dst, R, n, loc)
            continue
        assert first is not None and high is not None
        if carried is None:
            carried = (first, _I32, "")
        else:  # the tensor in the first digit's order
            moved = temp(carried[1])
            _long_pass(lw, (xbuf, d, "lo"), order, carried, moved, R, n, loc)
            carried = (moved, carried[1], "")
        _long_pass(lw, (high, _I32, ""), order, carried, dst, R, n, loc)


def _long_pass(
    lw: Lowering,
    key: Src,
    order: str,
    carried: Src | None,
    dst: str,
    R: int,
    n: int,
    loc: SourceLoc | None,
) -> None:
    """One stable sort of rows of ``n`` by ``key``: blocks, merges, and ``dst`` gets the
    permutation (``carried`` None) or the carried values in the sorted order."""
    C = _long_block(lw, key, order, carried, loc)
    p = max(1, math.ceil(math.log2(-(-n // C))))
    N = C << p
    W = 2 * (N + C)  # words of a workspace row: the structures, and a guard a window may read
    ws = [lw.new_buffer("sort_ws", _F32, R * W) for _ in range(2)]
    for w in ws:
        lw.view(w, (R, W))
    _long_blocks(lw, key, ws[0], order, R, n, N, C, carried, loc)
    for q in range(p):
        _long_merge(lw, ws[q % 2], ws[1 - q % 2], R, N, C << q, C, loc)
    cd = None if carried is None else _carry_dtype(carried)
    _long_extract(lw, ws[p % 2], dst, R, n, C, cd, loc)


def _long_block(
    lw: Lowering, key: Src, order: str, carried: Src | None, loc: SourceLoc | None
) -> int:
    """The largest block (a power of two up to :data:`LONG_BLOCK`) whose sort, padded tail
    and merge kernels fit the machine's UB."""
    m = lw.machine
    C = LONG_BLOCK
    while C >= 32:
        kernels = [
            _block_build(key, order, carried, w, C, Expr(), "iota", "ws", loc) for w in (C, C - 1)
        ]
        kernels.append(_merge_build("ws", "ws2", "mask", C, C, loc))
        if all(k.ub_bytes(m.align_bytes, _loads(k)) <= m.ub_bytes for k in kernels):
            return C
        C //= 2
    raise TileError(
        f"{m.name}'s {m.ub_bytes} bytes of UB do not hold the tiles of a sort of 32 elements",
        op="argsort",
        hint="use a machine with more UB, or backend='interpret'",
    )


def _loads(b: _Build) -> tuple[str, ...]:
    """Every tensor the kernel loads from: its tiles may all be double-buffered."""
    out: list[str] = []
    stack = list(b.body)
    while stack:
        st = stack.pop()
        if isinstance(st, For):
            stack.extend(st.body)
        elif isinstance(st, TLoad):
            out.append(st.tensor)
    return tuple(out)


def _carry_dtype(c: Src) -> dt.DType:
    return _I32 if c[2] else c[1]


def _kernel(lw: Lowering, name: str, grid: tuple[tuple[str, int], ...], b: _Build, C: int) -> None:
    pre: list[Stmt] = [
        TLoad(t, lw.const_buffer("sort_" + t.name, data), Expr(), Expr(), b.loc)
        for t, data in b.consts.values()
    ]
    lw.add_kernel(
        Kernel(
            lw.fresh(name),
            "sort",
            grid,
            (Section("aiv", tuple(b.body), tuple(pre)),),
            (("rows", 1), ("cols", C)),
            loc=b.loc,
        )
    )


def _long_blocks(
    lw: Lowering,
    key: Src,
    ws: str,
    order: str,
    R: int,
    n: int,
    N: int,
    C: int,
    carried: Src | None,
    loc: SourceLoc | None,
) -> None:
    """Step 1: the sorted blocks' structures into ``ws``, carrying each element's index (a GM
    table read at the block's offset) or, with ``carried``, a value as 32 bits: f32 (floats,
    exact) or i32 (integers)."""
    full, tail = n // C, n % C
    iota = lw.const_buffer("sort_index", np.arange(N, dtype=np.int32).reshape(1, N))
    if full:
        b = _block_build(key, order, carried, C, C, Expr.reg("c") * C, iota, ws, loc)
        _kernel(lw, "sort_blocks", (("r", R), ("c", full)), b, C)
    if tail:
        b = _block_build(key, order, carried, tail, C, Expr.of(full * C), iota, ws, loc)
        _kernel(lw, "sort_tail", (("r", R),), b, C)
    pad_blocks = N // C - (full + (1 if tail else 0))
    if pad_blocks:
        b = _Build(key[1], order, loc)
        sent = b.const(
            "sentinels", np.full((1, 2 * C), _SMALLEST, np.uint32).view(np.float32), _F32
        )
        first = full + (1 if tail else 0)
        b.body.append(TStore(ws, Expr.reg("r"), (Expr.reg("c") + first) * (2 * C), sent, loc))
        _kernel(lw, "sort_pad", (("r", R), ("c", pad_blocks)), b, C)


def _block_build(
    key: Src,
    order: str,
    carried: Src | None,
    width: int,
    C: int,
    col: Expr,
    iota: str,
    ws: str,
    loc: SourceLoc | None,
) -> _Build:
    """One block of ``width`` elements (padded to ``C``) of a long sort, at column ``col``."""
    kbuf, kd, kpart = key
    row = Expr.reg("r")

    def part(b: _Build, t: TileVar, which: str) -> TileVar:
        """The digit ``which`` of the int32 tile ``t`` (``t`` itself for ``""``)."""
        if not which:
            return t
        dst = TileVar(t.name + which, Space.UB, _I32, t.shape)
        if which == "lo":
            return b.op("TANDS", dst, t, float(2**_LO_BITS - 1))
        return b.op("TSHRS", dst, t, float(_LO_BITS))

    b = _Build(_I32 if kpart else kd, order, loc)
    xt = TileVar("x", Space.UB, kd, (1, width))
    b.body.append(TLoad(xt, kbuf, row, col, loc))
    kt = part(b, xt, kpart)
    xf = b.f32(kt, "xf")
    own = carried is not None and carried[0] == kbuf and not carried[2] and not kpart
    keys = b.keys(xf, "k", C, xf is not xt and not own)
    if order == "total":
        # the smallest key marks padding and what lies past a run's end: a NaN with those
        # very bits is taken as the next one up (a merge gives ties to the earlier run)
        k32 = TileVar(keys.name, Space.UB, _I32, keys.shape)
        at = b.op("TCMPS", TileVar("lowest", Space.UB, dt.bool_, keys.shape), k32, -1.0, Cond.EQ)
        up = b.const("next_col", _bits_col(_SMALLEST - 1, 1), _F32)
        b.op("TSEL", keys, at, up, keys)
    if carried is None:
        carry = TileVar("ix", Space.UB, _I32, (1, C))
        b.body.append(TLoad(carry, iota, Expr(), col, loc))
    else:
        cbuf, cd, cpart = carried
        if own:
            ct, wide = xt, xf
        else:
            ct = xt if cbuf == kbuf else TileVar("cy", Space.UB, cd, (1, width))
            if ct is not xt:
                b.body.append(TLoad(ct, cbuf, row, col, loc))
            ct = part(b, ct, cpart)
            wide = b.f32(ct, "cf") if ct.dtype.is_floating else ct
        if not wide.dtype.is_floating and wide.dtype is not _I32:  # int8, bool as int32
            wide = b.op("TCVT", TileVar("ci", Space.UB, _I32, (1, width)), ct)
        carry = TileVar(wide.name, Space.UB, _I32, (1, width))  # its 32 bits
        if width < C:
            spread = b.consts["spread"][0]
            carry = b.op("TGATHER", TileVar("cv", Space.UB, _I32, (1, C)), carry, spread)
    s = b.sort_pass(keys, carry)
    b.body.append(TStore(ws, row, col * 2, TileVar(s.name, Space.UB, _F32, (1, 2 * C)), loc))
    return b


def _long_merge(
    lw: Lowering, src: str, dst: str, R: int, N: int, L: int, C: int, loc: SourceLoc | None
) -> None:
    """Step 2, one pass: runs of ``L`` structures merged pairwise, ``C`` outputs per point."""
    mask = lw.const_buffer(
        "sort_window_mask", np.repeat(np.array([True, False]), 2 * C).reshape(1, 4 * C)
    )
    b = _merge_build(src, dst, mask, L, C, loc)
    _kernel(lw, "sort_merge", (("r", R), ("t", N // C)), b, C)


def _merge_build(src: str, dst: str, mask: str, L: int, C: int, loc: SourceLoc | None) -> _Build:
    """A grid point of a merge pass (:func:`_long_sort`, step 2)."""
    per_pair = 2 * L // C
    b = _Build(dt.float32, "total", loc)
    row, t = Expr.reg("r"), Expr.reg("t")
    reg = Expr.reg

    def sop(name: str, dst: str, *args: Expr | TileVar) -> None:
        b.body.append(SOp(name, dst, tuple(args), loc))

    sop("SDIV", "ms_q", t, Expr.of(per_pair))  # the pair
    sop("SMOD", "ms_d", t, Expr.of(per_pair))
    sop("SMUL", "ms_d", reg("ms_d"), Expr.of(C))  # the first output position in the pair
    sop("SMUL", "ms_a", reg("ms_q"), Expr.of(2 * L))  # where A starts; B starts L later
    sop("SSUB", "ms_lo", reg("ms_d"), Expr.of(L))
    sop("SMAX", "ms_lo", reg("ms_lo"), Expr())
    sop("SMIN", "ms_hi", reg("ms_d"), Expr.of(L))
    # the merge path: lo = the number of A's structures before output d
    step: list[Stmt] = []
    b.body, outer = step, b.body
    sop("SADD", "ms_m", reg("ms_lo"), reg("ms_hi"))
    sop("SDIV", "ms_m", reg("ms_m"), Expr.of(2))
    sop("SSUB", "ms_go", reg("ms_hi"), reg("ms_lo"))
    sop("SMIN", "ms_go", reg("ms_go"), Expr.of(1))  # 0 once the search has converged
    sop("SMIN", "ms_ia", reg("ms_m"), Expr.of(L - 1))
    sop("SSUB", "ms_ib", reg("ms_d"), reg("ms_m"))
    sop("SSUB", "ms_ib", reg("ms_ib"), Expr.of(1))
    sop("SMAX", "ms_ib", reg("ms_ib"), Expr())
    sop("SMIN", "ms_ib", reg("ms_ib"), Expr.of(L - 1))
    ka = TileVar("ka", Space.UB, _F32, (1, 1))
    kb = TileVar("kb", Space.UB, _F32, (1, 1))
    step.append(TLoad(ka, src, row, (reg("ms_a") + reg("ms_ia")) * 2, loc))
    step.append(TLoad(kb, src, row, (reg("ms_a") + reg("ms_ib")) * 2 + 2 * L, loc))
    keys = [_total_order(b, TileVar(k.name, Space.UB, _I32, (1, 1)), k.name) for k in (ka, kb)]
    ge = b.op("TCMP", TileVar("ge", Space.UB, dt.bool_, (1, 1)), keys[0], keys[1], Cond.GE)
    c = b.op("TCVT", TileVar("gei", Space.UB, _I32, (1, 1)), ge)
    sop("SLD", "ms_c", c, Expr())
    # A[m] goes first: lo = m + 1; else hi = m (only while the search runs)
    sop("SMUL", "ms_up", reg("ms_go"), reg("ms_c"))
    sop("SADD", "ms_x", reg("ms_m"), Expr.of(1))
    sop("SSUB", "ms_x", reg("ms_x"), reg("ms_lo"))
    sop("SMUL", "ms_x", reg("ms_x"), reg("ms_up"))
    sop("SADD", "ms_lo", reg("ms_lo"), reg("ms_x"))
    sop("SSUB", "ms_dn", reg("ms_go"), reg("ms_up"))
    sop("SSUB", "ms_x", reg("ms_hi"), reg("ms_m"))
    sop("SMUL", "ms_x", reg("ms_x"), reg("ms_dn"))
    sop("SSUB", "ms_hi", reg("ms_hi"), reg("ms_x"))
    b.body = outer
    steps = math.ceil(math.log2(L + 1)) + 1
    b.body.append(For("ms_s", Expr(), Expr.of(steps), 1, tuple(step)))
    sop("SSUB", "ms_j", reg("ms_d"), reg("ms_lo"))  # B's structures before output d
    sent = b.const("sentinels", np.full((1, 2 * C), _SMALLEST, np.uint32).view(np.float32), _F32)
    lists = []
    for name, start, base in (("A", "ms_lo", Expr()), ("B", "ms_j", Expr.of(2 * L))):
        # the structures of the run from ``start``: those past its end are masked
        sop("SSUB", "ms_v", Expr.of(L), reg(start))
        sop("SMIN", "ms_v", reg("ms_v"), Expr.of(C))
        win = TileVar(name, Space.UB, _F32, (1, 2 * C))
        keep = TileVar("m" + name, Space.UB, dt.bool_, (1, 2 * C))
        b.body.append(TLoad(win, src, row, (reg("ms_a") + reg(start)) * 2 + base, loc))
        b.body.append(TLoad(keep, mask, Expr(), Expr.of(2 * C) - reg("ms_v") * 2, loc))
        lists.append(b.op("TSEL", win, keep, win, sent))
    merged = b.op("TMRGSORT2", TileVar("M", Space.UB, _F32, (1, 4 * C)), *lists)
    out = TileVar(merged.name, Space.UB, _F32, (1, 2 * C))
    b.body.append(TStore(dst, row, (reg("ms_a") + reg("ms_d")) * 2, out, loc))
    return b


def _total_order(b: _Build, v: TileVar, name: str) -> TileVar:
    """int32 keys ordered as the f32 bits ``v`` in IEEE total order: a negative one's other
    bits flipped (``~v`` with the sign set again)."""
    op, shape = b.op, v.shape
    neg = op("TCMPS", TileVar(name + "n", Space.UB, dt.bool_, shape), v, 0.0, Cond.LT)
    flip = op("TNOT", TileVar(name + "f", Space.UB, _I32, shape), v)
    op("TXORS", flip, flip, -2147483648.0)
    return op("TSEL", TileVar(name + "k", Space.UB, _I32, shape), neg, flip, v)


def _long_extract(
    lw: Lowering,
    ws: str,
    dst: str,
    R: int,
    n: int,
    C: int,
    carried: dt.DType | None,
    loc: SourceLoc | None,
) -> None:
    """Step 3: the second word of the first ``n`` structures of each row: the indices, or the
    values they carry, converted back to their dtype ``carried``."""
    full, tail = n // C, n % C
    row = Expr.reg("r")

    def chunk(width: int, col: Expr) -> _Build:
        b = _Build(dt.float32, "total", loc)
        s = TileVar("s", Space.UB, _F32, (1, 2 * C))
        b.body.append(TLoad(s, ws, row, col * 2, loc))
        pick = b.const("pick", (2 * np.arange(width, dtype=np.int32) + 1).reshape(1, width), _I32)
        out = b.op("TGATHER", TileVar("w2", Space.UB, _F32, (1, width)), s, pick)
        if carried is None or not carried.is_floating:  # indices, or integers as int32
            out = TileVar(out.name, Space.UB, _I32, (1, width))
        if carried is not None and carried not in (_F32, _I32):
            out = b.op("TCVT", TileVar("v", Space.UB, carried, (1, width)), out)
        b.body.append(TStore(dst, row, col, out, loc))
        return b

    if full:
        _kernel(lw, "sort_out", (("r", R), ("c", full)), chunk(C, Expr.reg("c") * C), C)
    if tail:
        _kernel(lw, "sort_out_tail", (("r", R),), chunk(tail, Expr.of(full * C)), C)


def _gather(lw: Lowering, e: Eqn) -> None:
    x, idx = e.inputs
    assert isinstance(x, Var) and isinstance(idx, Var)
    shape, d, loc = x.aval.shape, x.aval.dtype, e.loc
    n, k = shape[-1], idx.aval.shape[-1]
    R = math.prod(shape[:-1])
    out = lw.buffer(e.out)
    lw.view(out, (R, k))
    if R * k == 0:
        return
    g = gather_dtype(d)
    # the row and the indices double-buffered, the offsets, the flat indices, the row in its
    # gather dtype, the gathered values and the stored result double-buffered
    per_row = n * (2 * d.itemsize + g.itemsize) + k * (2 * 4 + 4 + 4 + g.itemsize + 2 * d.itemsize)
    cap = lw.machine.ub_bytes
    made = [eq for eq in lw.func.eqns if eq.out is idx]
    if per_row > cap and made and made[0].op == "argsort_last" and k == n:
        # a permutation from a sort of rows too long for UB: sort again, carrying ``x``
        keys = made[0].inputs[0]
        assert isinstance(keys, Var)
        _long_kernels(lw, keys, dict(made[0].params)["order"], [(x, e.out)], loc)
        return
    if per_row > cap:
        raise TileError(
            f"gathering {k} of {n} {d.short} elements per row needs {per_row} bytes of UB, "
            f"{lw.machine.name} has {cap} (tensor {x.aval}, indices {idx.aval})",
            op="take_along_axis",
            hint="gather along a shorter axis on the NPU, or use backend='interpret'",
        )
    tr = rows_per_tile(R, max(1, cap // per_row))
    grid = (("r", R // tr),)
    row = Expr.reg("r") * tr if R // tr > 1 else Expr()
    i = np.arange(tr, dtype=np.int32)[:, None]
    rowoff = TileVar("rowoff", Space.UB, _I32, (tr, k))
    data = np.broadcast_to(i * n, (tr, k)).copy()
    pre: list[Stmt] = [TLoad(rowoff, lw.const_buffer("gather_rows", data), Expr(), Expr(), loc)]
    body: list[Stmt] = []
    tiles = []
    for v, dd, name, w in ((x, d, "x", n), (idx, _I32, "i", k)):
        buf, wdw = _rows_window(lw, v, R, w, tr, row, loc)
        body.append(TLoad(TileVar(name, Space.UB, dd, wdw[0]), buf, wdw[1], wdw[2], loc))
        tiles.append(TileVar(name, Space.UB, dd, (tr, w)))
    xt, it = tiles
    at = TileVar("at", Space.UB, _I32, (tr, k))
    src = it
    if not dict(e.params)["perm"]:  # out-of-range indices are clamped, as JAX's "clip"
        body.append(TOp("TMAXS", at, (it, 0.0), loc))
        body.append(TOp("TMINS", at, (at, float(n - 1)), loc))
        src = at
    body.append(TOp("TADD", at, (src, rowoff), loc))
    if g is not d:
        xg = TileVar("xg", Space.UB, g, (tr, n))
        body.append(TOp("TCVT", xg, (xt,), loc))
        xt = xg
    y = TileVar("y", Space.UB, g, (tr, k))
    body.append(TOp("TGATHER", y, (xt, at), loc))
    if g is not d:
        yd = TileVar("yd", Space.UB, d, (tr, k))
        body.append(TOp("TCVT", yd, (y,), loc))
        y = yd
    body.append(TStore(out, row, Expr(), y, loc))
    lw.add_kernel(
        Kernel(
            lw.fresh("gather"),
            "sort",
            grid,
            (Section("aiv", tuple(body), tuple(pre)),),
            (("rows", tr),),
            loc=loc,
        )
    )


register_rule("tile", "argsort_last")(KernelRule(_argsort))
register_rule("tile", "gather_last")(KernelRule(_gather))
