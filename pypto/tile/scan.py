"""The tile rules of ``scan`` and ``scan_affine``: running reductions and linear recurrences
along the last axis, in UB.

The input is seen as ``[R, n]``. Each grid point owns ``tr`` rows and walks them in chunks of
``w`` columns (a ``for %c`` loop; a narrower last chunk after it), from the row's end when the
scan is reversed. A chunk is loaded and scanned where it lies, ``⌈log₂ w⌉`` steps of
``y = op(y, shift(y, k))`` for ``k = 1, 2, 4, …``: the shift is one ``TGATHER`` of ``y`` at
``index - k`` (``index + k`` reversed; a constant index tile moved by a ``TADDS``), and a
``TSEL`` puts ``op``'s identity (0 for add, 1 for mul, ∓inf or the integer limits for max and
min) in the ``k`` columns it has no partner for. The chunk's last column in the scan's order,
``[tr, 1]``, is carried into the next chunk (``op`` with a column broadcast) — the rows never
go back to GM between steps, and the whole scan is one kernel instead of ``⌈log₂ n⌉`` passes
over GM.

``scan_affine`` scans pairs ``(A, B)`` of coefficients and terms the same way: a pair and its
right neighbour compose as ``(A₁·A₂, A₂·B₁ + B₂)`` (two gathers per step, identity ``(1, 0)``),
and a chunk after the first adds ``A·carry`` to its ``B`` (the first chunk is peeled off the
loop: the first ``a`` in the scan's order is never read, not even times a zero carry, so an
infinite one does not make a NaN).
"""

from __future__ import annotations

import math

import numpy as np

from pypto import dtypes as dt
from pypto.graph.ir import Eqn, Var
from pypto.isa.ir import Cond, Expr, Space
from pypto.ops.scan import identity
from pypto.ops.table import register_rule
from pypto.tile.ir import For, Kernel, Section, Stmt, TileVar, TLoad, TOp, TStore
from pypto.tile.layout import tile_bytes
from pypto.tile.lower import KernelRule, Lowering, relayout, window

__all__: list[str] = []


def rows_per_tile(R: int, cap: int) -> int:
    """The largest divisor of ``R`` up to ``cap`` (so every grid point has whole tiles)."""
    return max(t for t in range(1, max(1, min(R, cap)) + 1) if R % t == 0)


_OP = {"add": "TADD", "mul": "TMUL", "max": "TMAX", "min": "TMIN"}


def _scan(lw: Lowering, e: Eqn) -> None:
    affine = e.op == "scan_affine"
    ins = e.inputs
    assert all(isinstance(x, Var) for x in ins)
    shape = ins[0].aval.shape
    d = e.out.aval.dtype
    op = "add" if affine else e.kwargs["op"]
    rev = bool(e.kwargs["reverse"])
    n = shape[-1]
    R = math.prod(shape[:-1])
    loc = e.loc
    out = lw.buffer(e.out)
    lw.view(out, (R, n))
    if R * n == 0:
        return
    bufs = [lw.buffer(x) for x in ins]  # type: ignore[arg-type]
    views = [lw.view(b, (R, n)) for b in bufs]
    # a chunk and each of its working copies (four for a scan: results, shifted results,
    # indices, the constant index tile; seven for pairs) in half a copy tile, so that they and
    # the double buffers fit UB
    tb = tile_bytes(lw.machine) // 2
    w = min(n, max(1, tb // 4 // (8 if affine else 4)))
    tr = rows_per_tile(R, max(1, tb // (2 if affine else 1) // (w * 4)))
    grid = (("r", R // tr),) if R // tr > 1 else (("r", 1),)
    row = Expr.reg("r") * tr if R // tr > 1 else Expr()
    pre: list[Stmt] = []
    consts: set[str] = set()
    carry = TileVar("carry", Space.UB, d, (tr, 1))

    def load(i: int, tag: str, width: int, col: Expr) -> tuple[TileVar, Stmt]:
        """Operand ``i``'s ``[tr, width]`` chunk at column ``col`` (relaid out once when its
        layout has no such window)."""
        wdw = window(views[i], n, (tr, width), row, col)
        if wdw is None:
            bufs[i] = relayout(lw, bufs[i], (R, n), loc)
            views[i] = (R, n)
            wdw = (tr, width), row, col
        t = TileVar(tag, Space.UB, d, (tr, width))
        return t, TLoad(TileVar(tag, Space.UB, d, wdw[0]), bufs[i], wdw[1], wdw[2], loc)

    def chunk(width: int, col: Expr, tag: str, last: bool, first: bool) -> list[Stmt]:
        """Scan the ``[tr, width]`` chunk at column ``col``, combine it with the carry (but in a
        peeled first chunk), store it and (but for the last chunk) carry its last column."""
        base = TileVar("base" + tag, Space.UB, dt.int32, (tr, width))
        cols = TileVar("cols" + tag, Space.UB, dt.int32, (1, width))
        fill = TileVar(("zero" if op == "add" else "ident") + tag, Space.UB, d, (1, width))
        one = TileVar("one" + tag, Space.UB, d, (1, width))
        if tag not in consts:  # a peeled first chunk shares the loop's tiles
            consts.add(tag)
            flat = np.arange(tr * width, dtype=np.int32).reshape(tr, width)
            pre.extend(
                [
                    TLoad(base, lw.const_buffer("scan_idx", flat), Expr(), Expr(), loc),
                    TLoad(cols, lw.const_buffer("scan_col", flat[:1]), Expr(), Expr(), loc),
                    TOp("TEXPANDS", fill, (identity(op, d),), loc),
                ]
            )
            if affine:
                pre.append(TOp("TEXPANDS", one, (1.0,), loc))
        idx = TileVar("idx" + tag, Space.UB, dt.int32, (tr, width))
        m = TileVar("m" + tag, Space.UB, dt.bool_, (1, width))
        if affine:
            a, la = load(0, "a" + tag, width, col)
            b, lb = load(1, "b" + tag, width, col)
            st: list[Stmt] = [la, lb]
        else:
            x, lx = load(0, "x" + tag, width, col)
            st = [lx]
        y = TileVar("y" + tag, Space.UB, d, (tr, width))
        sh = TileVar("sh" + tag, Space.UB, d, (tr, width))
        ya = TileVar("ya" + tag, Space.UB, d, (tr, width))
        sha = TileVar("sha" + tag, Space.UB, d, (tr, width))
        need_a = affine and not first  # the coefficients' products meet the carry
        src, srca = (b, a) if affine else (x, x)
        k = 1
        while k < width:
            # y[:, c] = op(y[:, c - k], y[:, c]) for c >= k: the element k to the left,
            # gathered (the first k columns read a clamped index and take the identity);
            # reversed, the element k to the right, and the last k columns
            if rev:
                st += [
                    TOp("TADDS", idx, (base, float(k)), loc),
                    TOp("TMINS", idx, (idx, float(tr * width - 1)), loc),
                    TOp("TGATHER", sh, (src, idx), loc),
                    TOp("TCMPS", m, (cols, float(width - 1 - k), Cond.LE), loc),
                ]
            else:
                st += [
                    TOp("TADDS", idx, (base, float(-k)), loc),
                    TOp("TMAXS", idx, (idx, 0.0), loc),
                    TOp("TGATHER", sh, (src, idx), loc),
                    TOp("TCMPS", m, (cols, float(k), Cond.GE), loc),
                ]
            st.append(TOp("TSEL", sh, (m, sh, fill), loc))
            if affine:
                # (A, B) after its left partner: B + A·B_left, A·A_left
                st += [TOp("TMUL", sh, (srca, sh), loc), TOp("TADD", y, (src, sh), loc)]
                if need_a or 2 * k < width:
                    st += [
                        TOp("TGATHER", sha, (srca, idx), loc),
                        TOp("TSEL", sha, (m, sha, one), loc),
                        TOp("TMUL", ya, (srca, sha), loc),
                    ]
                    srca = ya
            else:
                st.append(TOp(_OP[op], y, (src, sh), loc))
            src, k = y, k * 2
        if affine:
            if not first:  # h = B + A·carry
                st += [TOp("TMUL", sh, (srca, carry), loc), TOp("TADD", y, (src, sh), loc)]
                src = y
        else:
            st.append(TOp(_OP[op], y, (src, carry), loc))
            src = y
        st.append(TStore(out, row, col, src, loc))
        if not last:  # the chunk's last column in the scan's order
            end = Expr() if rev else Expr.of(width - 1)
            st.append(TOp("TEXTRACT", carry, (src, Expr(), end), loc))
        return st

    body: list[Stmt] = [] if affine else [TOp("TEXPANDS", carry, (identity(op, d),), loc)]
    # chunks of w in the scan's order (from the row's end when reversed), then the rest
    main, tail = n // w, n % w

    def at(c: Expr) -> Expr:
        """The first column of the ``c``-th chunk in the scan's order."""
        return Expr.of(n - w) - c * w if rev else c * w

    if main == 1 and not tail:  # whole rows in one chunk: nothing to carry
        body += chunk(w, Expr(), "", last=True, first=affine)
    elif main:
        lead = 0
        if affine:  # the first chunk has no carry to take
            body += chunk(w, at(Expr()), "", last=main == 1 and not tail, first=True)
            lead = 1
        if main > lead:
            inner = chunk(w, at(Expr.reg("c")), "", last=False, first=False)
            body.append(For("c", Expr.of(lead), Expr.of(main), 1, tuple(inner)))
    if tail:
        col = Expr() if rev else Expr.of(main * w)
        body += chunk(tail, col, "t", last=True, first=not main and affine)
    lw.add_kernel(
        Kernel(
            lw.fresh("scan"),
            "scan",
            grid,
            (Section("aiv", tuple(body), tuple(pre)),),
            (("rows", tr), ("cols", w)),
            loc=loc,
        )
    )


for _name in ("scan", "scan_affine"):
    register_rule("tile", _name)(KernelRule(_scan))
