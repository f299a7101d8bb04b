"""Tensor IR → Tile IR: every fusion group becomes one kernel over tiles.

The driver of this level is :func:`lower_func`. It gives every value a GM buffer (a reshape is
a view of its operand's buffer, not a copy), fixes each buffer's 2-D layout (rows x columns
as the kernels see it) and asks the op table's ``"tile"`` rules to build the kernels:

* a :class:`RowRule` lowers one equation inside a **row kernel**: a fused group whose values
  are all, in the 2-D view ``[R, C]`` of the group's main shape, full ``[R, C]``, per-row
  ``[R, 1]`` (reductions over the last axis), per-column ``[1, C]`` (broadcast rows such as a
  bias) or scalars. Each grid point owns a ``[rows, cols]`` tile of ``[R, C]``; elementwise
  ops, last-axis reductions and their broadcasts (softmax, layer_norm, rms_norm, epilogues)
  run on the vector cores without leaving UB;
* a :class:`KernelRule` builds whole kernels for one equation (matmul, layout ops, reductions
  over other axes).

Groups that are not row kernels are split into single equations, each lowered by its rule.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import SourceLoc, TileError, at_location
from pypto.graph.ir import Eqn, Func, Lit, Var
from pypto.isa.ir import Expr, Space, TensorDecl
from pypto.npu.machine import Machine
from pypto.ops.table import OPS, register_rule, require_rule
from pypto.tile.config import TileConfig, from_hint
from pypto.tile.cores import spread
from pypto.tile.ir import (
    For,
    Kernel,
    Section,
    SOp,
    Stmt,
    TileFunc,
    TileVar,
    TLoad,
    TOp,
    TStore,
    walk,
)

__all__ = [
    "GROUP_RULES",
    "GROUP_WINDOWS",
    "KernelRule",
    "Lowering",
    "RowBuilder",
    "RowRule",
    "lower_func",
]

# Every primitive lowers to tiles: the op-table coverage test names any op without a rule.
# Calls (custom_vjp_call) are not lowered: the tensor passes inline their bodies first.
require_rule("tile", lambda op: not op.is_composite and op.kind not in ("call", "effect"))


@dataclass(frozen=True)
class RowRule:
    """Lowers one equation inside a row kernel: ``fn(builder, eqn, operands) -> TileVar``."""

    fn: Callable[..., TileVar]
    reduces: bool = False  # reduces over the last axis (the kernel keeps whole rows)
    scratch: int = 0
    """UB bytes of temporaries per tile element beyond the equation's own value (argmax's
    masks and index tiles), for the estimate that picks the tile and one pass or several"""

    def __call__(self, *args: Any) -> TileVar:
        return self.fn(*args)


@dataclass(frozen=True)
class KernelRule:
    """Builds the kernels of one equation: ``fn(lowering, eqn) -> None``."""

    fn: Callable[..., None]

    def __call__(self, *args: Any) -> None:
        self.fn(*args)


Operand = TileVar | Lit


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` in increasing order."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass
class Lowering:
    """The state of lowering one function: buffers, their 2-D layouts and the kernels so far."""

    func: Func
    machine: Machine
    cfg: TileConfig
    buffers: dict[str, tuple[dt.DType, int, str]] = field(default_factory=dict)
    """name -> (dtype, size, role)"""
    views: dict[str, tuple[int, int]] = field(default_factory=dict)
    var_buf: dict[Var, str] = field(default_factory=dict)
    kernels: list[Kernel] = field(default_factory=list)
    consts: list[tuple[str, np.ndarray]] = field(default_factory=list)
    outputs_of: set[Var] = field(default_factory=set)
    windows: dict[Var, Eqn] = field(default_factory=dict)
    """layout equations (transposes) the group being lowered reads through: value -> eqn"""
    skip: set[int] = field(default_factory=set)
    """ids of later equations a kernel already did (a transpose its stores wrote through)"""
    relaid: dict[tuple[str, tuple[int, int]], str] = field(default_factory=dict)
    """(buffer, layout) -> its relayout copy, made once for all the kernels that read it"""
    _names: dict[str, int] = field(default_factory=dict)

    # ---- names and buffers ----
    def fresh(self, hint: str) -> str:
        n = self._names.get(hint, 0)
        self._names[hint] = n + 1
        return hint if n == 0 and hint not in self.buffers else f"{hint}{n}"

    def new_buffer(self, hint: str, dtype: dt.DType, size: int, role: str = "tmp") -> str:
        name = self.fresh(hint)
        while name in self.buffers:
            name = self.fresh(hint)
        self.buffers[name] = (dtype, size, role)
        return name

    def buffer(self, v: Var) -> str:
        """The buffer holding ``v`` (created on first use, as a workspace or an output)."""
        b = self.var_buf.get(v)
        if b is None:
            role = "out" if v in self.outputs_of else "tmp"
            b = self.new_buffer("out" if role == "out" else "t", v.aval.dtype, v.aval.size, role)
            self.var_buf[v] = b
        return b

    def view(self, buf: str, default: tuple[int, int]) -> tuple[int, int]:
        """The buffer's 2-D layout; the first kernel to touch it fixes it to ``default``."""
        v = self.views.get(buf)
        if v is None:
            self.views[buf] = v = default
        return v

    def add_kernel(self, k: Kernel) -> None:
        self.kernels.append(k)

    def const_buffer(self, hint: str, data: np.ndarray) -> str:
        """A read-only GM buffer holding ``data`` (index tables and the like)."""
        for name, arr in self.consts:
            if arr.dtype == data.dtype and arr.shape == data.shape and np.array_equal(arr, data):
                return name
        name = self.new_buffer(hint, dt.from_numpy(data.dtype), data.size, "in")
        rows, cols = (
            (1, data.size) if data.ndim <= 1 else (data.size // data.shape[-1], data.shape[-1])
        )
        self.views[name] = (rows, cols)
        self.consts.append((name, data.reshape(rows, cols)))
        return name

    def workers(self, dist: str = "aiv") -> int:
        m = self.machine
        return m.clusters * m.aiv_per_cluster if dist == "aiv" else m.clusters

    def result(self) -> TileFunc:
        decls = []
        for name, (d, size, role) in self.buffers.items():
            shape = self.views.get(name) or (1, size)
            decls.append(TensorDecl(name, d, shape, role))
        params = tuple(self.var_buf[p] for p in self.func.params)
        outs = []
        for o in self.func.outputs:
            if isinstance(o, Var):
                outs.append((self.var_buf[o], o.aval.shape))
            else:  # a literal output: a one-element constant buffer
                arr = np.asarray(o.value).reshape(1, 1)
                outs.append((self.const_buffer("lit", arr), ()))
        return TileFunc(
            self.func.name,
            tuple(decls),
            tuple(self.kernels),
            params,
            tuple(outs),
            tuple(self.consts),
        )


# ---------------------------------------------------------------- windows over GM layouts
def window(
    view: tuple[int, int], cols: int, tile: tuple[int, int], row: Expr, col: Expr
) -> tuple[tuple[int, int], Expr, Expr] | None:
    """The GM window that holds the ``tile`` at (``row``, ``col``) of a logical ``[*, cols]``
    view of a buffer laid out as ``view``: (window shape, row, col), or None when the tile's
    bytes are not one rectangle of the layout. ``row`` must be a multiple of the tile rows."""
    _, c1 = view
    tr, tc = tile
    if c1 == cols:
        return (tr, tc), row, col
    if cols % c1 == 0:
        k = cols // c1
        if tc == cols:
            return (tr * k, c1), row * k, Expr()
        # part of one logical row: whole rows of the layout when they hold it (a [1, n] tile
        # of a column is n rows of one element, the same dense bytes)
        if tr != 1 or tc % c1 or not _divides(c1, col):
            return None
        return (tc // c1, c1), row * k + _div(col, c1), Expr()
    if c1 % cols == 0:
        k = c1 // cols
        if tc != cols or tr % k or not _divides(k, row):
            return None
        return (tr // k, c1), _div(row, k), Expr()
    return None


def _divides(k: int, e: Expr) -> bool:
    """Whether ``e`` is a multiple of ``k`` for every value of its registers."""
    return not (any(c % k for _, c in e.terms) or e.const % k)


def _div(e: Expr, k: int) -> Expr:
    """``e / k`` for an ``e`` that :func:`_divides` by ``k``."""
    return Expr.make([(r, c // k) for r, c in e.terms], e.const // k)


def relayout(lw: Lowering, buf: str, view: tuple[int, int], loc: SourceLoc | None) -> str:
    """A copy of ``buf`` laid out as ``view``, made once per buffer and layout however many
    kernels read it so.

    GM buffers and UB tiles are dense, so the copy moves chunks of ``L`` consecutive elements
    that are a rectangle of both layouts: whole rows of a layout whose rows ``L`` covers, part
    of one row of a layout whose rows it divides. Each chunk is loaded in the source's shape and
    stored in the target's from the same UB bytes: a column ``[N, 1]`` becomes a row ``[1, N]``
    in chunks of up to 16 KiB, not one element per transfer."""
    done = lw.relaid.get((buf, view))
    if done is not None:
        return done
    d, size, _ = lw.buffers[buf]
    src = lw.views[buf]
    out = lw.new_buffer(buf + "_re", d, size)
    lw.views[out] = view
    lw.relaid[(buf, view)] = out
    # chunks of at most 16 KiB (DMA is at full rate from there; whole long rows need not fit UB)
    fits = [
        n
        for n in divisors(size)
        if (n * d.itemsize <= 16384 or n == 1)
        and all(n % c == 0 or c % n == 0 for c in (src[1], view[1]))
    ]
    L = max(fits)  # 1 always qualifies
    runs = size // L
    per = max(1, min(runs, 1024 // L))
    points = -(-runs // per)
    shapes = [(max(1, L // c), min(L, c)) for c in (src[1], view[1])]
    t_in, t_out = (TileVar("run", Space.UB, d, sh) for sh in shapes)
    body: list[Stmt] = []
    stop = Expr.of(per)
    if runs % per:
        # the last point takes the remaining runs (a prime count of short runs would
        # otherwise be one run per point)
        body += [
            SOp("SSUB", "rn", (Expr.of(runs), Expr.reg("r") * per)),
            SOp("SMIN", "rn", (Expr.reg("rn"), Expr.of(per))),
        ]
        stop = Expr.reg("rn")
    inner: list[Stmt] = [
        SOp("SMUL", "e", (Expr.reg("r") * per + Expr.reg("i"), Expr.of(L))),
        SOp("SDIV", "sr", (Expr.reg("e"), Expr.of(src[1]))),
        SOp("SMOD", "sc", (Expr.reg("e"), Expr.of(src[1]))),
        TLoad(t_in, buf, Expr.reg("sr"), Expr.reg("sc"), loc),
        SOp("SDIV", "dr", (Expr.reg("e"), Expr.of(view[1]))),
        SOp("SMOD", "dc", (Expr.reg("e"), Expr.of(view[1]))),
        TStore(out, Expr.reg("dr"), Expr.reg("dc"), t_out, loc),
    ]
    from pypto.tile.ir import For

    body.append(For("i", Expr(), stop, 1, tuple(inner)))
    lw.add_kernel(
        Kernel(
            lw.fresh("relayout"),
            "layout",
            (("r", points),),
            (Section("aiv", tuple(body)),),
            (("rows", shapes[1][0]), ("cols", shapes[1][1])),
            loc=loc,
        )
    )
    return out


# ---------------------------------------------------------------- row kernels
KINDS = ("full", "col", "row", "one")


def _kind_of(shape: tuple[int, ...], S: tuple[int, ...]) -> str | None:
    if len(shape) > len(S):
        return None
    s = (1,) * (len(S) - len(shape)) + tuple(shape)
    if s == S:
        return "full" if S[-1] != 1 or math.prod(S) == 1 else "col"
    if all(x == 1 for x in s):
        return "one"
    if s[-1] == 1 and s[:-1] == S[:-1]:
        return "col"
    if all(x == 1 for x in s[:-1]) and s[-1] == S[-1]:
        return "row"
    j = next(i for i, x in enumerate(s) if x != 1)
    if s[j:] == S[j:] and j < len(S) - 1:
        # broadcast over leading axes only, e.g. [T, C] against [B, T, C]: whole tiles of its
        # rows, repeating every prod(T) rows of the view
        return "rep"
    return None


def _flat_col(a: Any, S: tuple[int, ...], inside: set[Var], kinds: dict[Any, str]) -> bool:
    """Whether ``a`` is a value of the group that holds one value per row in the shape
    ``S[:-1]`` (a row reduction without keepdims, or an op on one)."""
    return (
        isinstance(a, Var)
        and a in inside
        and kinds.get(a) == "col"
        and a.aval.shape == S[:-1]
        and len(S) > 1
    )


LAYOUT_OPS = ("slice", "transpose", "concat")
"""Layout ops a row kernel takes as address patterns of its loads and stores (no compute)."""


@dataclass(frozen=True)
class Window:
    """A row-kernel input read straight from another buffer: ``src`` with its leading axes
    permuted by ``perm`` (the last axis stays last), from column ``lo`` (a last-axis slice)
    and from row ``row`` of its rows (a slice of the first axis, unpermuted sources only)."""

    src: Var
    perm: tuple[int, ...]
    lo: int
    row: int = 0
    lead: tuple[tuple[int, int], ...] = ()
    """a strided slice of the (unpermuted) source's leading axes: (start, step) per axis, the
    last one's step 1 (so a tile's rows within one block of it are one rectangle)"""


@dataclass
class RowPlan:
    eqns: list[Eqn]
    S: tuple[int, ...]
    R: int
    C: int
    kinds: dict[Any, str]  # Var -> kind
    inputs: list[Var]
    outputs: list[Var]
    reduces: bool
    dtypes: list[dt.DType]
    period: dict[Any, int] = field(default_factory=dict)
    """inputs broadcast over leading axes ("full" tiles): the rows after which they repeat"""
    windows: dict[Any, Window] = field(default_factory=dict)
    """inputs read through a slice and/or a leading-axes transpose of another buffer"""
    cats: dict[Any, tuple[Var, ...]] = field(default_factory=dict)
    """outputs concatenated along the last axis from full values: stored piece by piece"""
    _spans: dict[Any, tuple[int, int]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def spans(self) -> dict[Any, tuple[int, int]]:
        """(the equation that makes it, the last one that reads it) of each value, by position
        in ``eqns``; a value read but not made here counts from 0 (kept: the tile choice asks
        for every candidate shape)."""
        if self._spans is None:
            spans: dict[Any, tuple[int, int]] = {}
            for i, e in enumerate(self.eqns):
                spans.setdefault(e.out, (i, i))
                for a in e.inputs:
                    spans[a] = (spans[a][0] if a in spans else 0, i)
            self._spans = spans
        return self._spans

    def row_blocks(self) -> list[int]:
        """Row counts the tile rows must divide: a tile never wraps a broadcast operand's
        period, nor crosses a block of rows a transposed window reads as one rectangle."""
        blocks = set(self.period.values())
        for w in self.windows.values():
            if w.perm[:-1] != tuple(range(len(w.perm) - 1)) or w.lead:
                blocks.add(self.S[-2])
        return sorted(blocks)


def matmul_reads_in_place(perm: tuple[int, ...]) -> bool:
    """Whether a matmul reads an operand ``transpose(src, perm)`` straight from ``src``: the
    source's last axis is one of the operand's last two (plain or transposed blocks; leading
    axes anyhow, as for head splits). The matmul rule and the pass that moves such
    transposes next to their readers both ask this."""
    return len(perm) >= 2 and len(perm) - 1 in perm[-2:]


def transposed_view(
    shape: tuple[int, ...], pos: tuple[int, ...]
) -> tuple[tuple[int, int], list[tuple[bool, int]]] | None:
    """For an operand ``[*batch, L, D]`` whose axis ``i`` is axis ``pos[i]`` of a contiguous
    value of ``shape`` (D its last axis too): that value's 2-D view, rows through L's axis,
    and per batch axis whether it steps columns or rows, and by how many. Every ``[rows, D]``
    tile of the operand is then one rectangle of the view. None when D moves."""
    n = len(shape)
    if len(pos) != n or pos[-1] != n - 1:
        return None
    a = pos[-2]
    axes = []
    for i in range(n - 2):
        j = pos[i]
        if j < a:
            axes.append((False, math.prod(shape[j + 1 : a + 1])))
        else:
            axes.append((True, math.prod(shape[j + 1 :])))
    return (math.prod(shape[: a + 1]), math.prod(shape[a + 1 :])), axes


def batch_window(
    shape: tuple[int, ...], pos: tuple[int, ...], xbatch: tuple[int, ...], batch: tuple[int, ...]
) -> tuple[tuple[int, int], Expr, Expr]:
    """An operand ``[*xbatch, L, D]`` read through a value of ``shape`` (:func:`transposed_view`):
    that value's 2-D view, and the row and column where the grid point's tiles start — the
    kernel's ``%b<j>`` registers run over the dims of ``batch`` with more than one value, and
    each steps the rows or the columns of the view (nothing where the operand broadcasts)."""
    lay = transposed_view(shape, pos)
    assert lay is not None
    view, axes = lay
    keep = [i for i, n in enumerate(batch) if n > 1]
    row, col = Expr(), Expr()
    for j, i in enumerate(keep):
        xi = i - (len(batch) - len(xbatch))
        if xi < 0 or xbatch[xi] == 1:
            continue
        steps_cols, stride = axes[xi]
        if steps_cols:
            col = col + Expr.reg(f"b{j}") * stride
        else:
            row = row + Expr.reg(f"b{j}") * stride
    return view, row, col


Via = tuple[Var, tuple[int, ...]]
"""An operand read or written through another buffer: that buffer's value (of its own
logical shape) and, for each axis of the operand, the axis of that value it is."""


def via_fits(lw: Lowering, via: Via, xbatch: tuple[int, ...], batch: tuple[int, ...]) -> bool:
    """Whether an operand with batch dims ``xbatch`` (the kernel's ``batch``: none
    broadcast) can be read or written through ``via``: its tiles are rectangles of that
    value's buffer in its 2-D view."""
    src, pos = via
    lay = transposed_view(src.aval.shape, pos)
    if lay is None or xbatch != batch:
        return False
    buf = lw.var_buf.get(src)
    return buf is None or lw.views.get(buf, lay[0]) == lay[0]


def window_out(lw: Lowering, out: Var) -> tuple[Eqn, Via] | None:
    """The head merge after a kernel (its output's only reader is a transpose that keeps the
    last axis last): the kernel stores its tiles straight into the transpose's result."""
    if out in lw.outputs_of:
        return None
    readers = [e for e in lw.func.eqns if out in e.inputs]
    if len(readers) != 1 or readers[0].op != "transpose":
        return None
    tr = readers[0]
    perm = tuple(tr.kwargs["perm"])
    via = (tr.out, tuple(perm.index(i) for i in range(len(perm))))
    batch = out.aval.shape[:-2]
    if tr.inputs[0] is not out or not via_fits(lw, via, batch, batch):
        return None
    return tr, via


def _main_shape(eqns: list[Eqn]) -> tuple[int, ...] | None:
    """The shape a row kernel tiles: the largest value its compute reads or writes (layout
    ops' sources and concatenations are read and written through windows, not tiled)."""
    compute = [e for e in eqns if e.op not in LAYOUT_OPS]
    if compute:
        vals = [e.out.aval.shape for e in compute]
        vals += [a.aval.shape for e in compute for a in e.inputs if isinstance(a, Var)]
    else:
        vals = [e.out.aval.shape for e in eqns if e.op != "concat"]
    if not vals:
        return None
    return max(vals, key=lambda s: math.prod(s))


def _window_of(
    e: Eqn,
    S: tuple[int, ...],
    inside: set[Var],
    wide: dict[Var, Window],
    windows: dict[Any, Window],
) -> Window | None:
    """The window a slice or transpose reads, or None when it is not one."""
    x = e.inputs[0]
    if not isinstance(x, Var) or x.aval.ndim != len(S) or not S:
        return None
    n = len(S)
    if e.op == "transpose":
        perm = tuple(e.kwargs["perm"])
        if x in inside or perm[-1] != n - 1:
            return None
        return Window(x, perm, 0)
    index = tuple(e.kwargs["index"])
    base = wide.get(x) or windows.get(x)
    if base is None:
        if x in inside:
            return None
        base = Window(x, tuple(range(n)), 0)
    xs = x.aval.shape
    lo, hi, step = index[-1]
    if step != 1 or hi - lo != S[-1]:
        return None
    if base.lead:
        return None  # a slice of a strided window: copied (not composed)
    lead, inner = index[:-1], index[1:-1]
    if not lead or (
        lead[0][2] == 1 and all(i == (0, d, 1) for i, d in zip(inner, xs[1:-1], strict=True))
    ):
        # whole leading axes, or a run of the first one: the window starts that many rows
        # down (a shifted-rows convolution's taps), when the source's rows are its own
        r0, r1 = (lead[0][0], lead[0][1]) if lead else (0, 0)
        if lead and (r1 - r0 != S[0] or (r0 and base.perm != tuple(range(n)))):
            return None
        return Window(base.src, base.perm, base.lo + lo, base.row + r0 * math.prod(xs[1:-1]))
    # strided or offset leading axes (pooling's window offsets): one (start, step) each, read
    # per tile from its leading indices; the last leading axis must step by 1
    plain = base.perm == tuple(range(n)) and not base.row and not base.lead
    if n < 3 or not plain or lead[-1][2] != 1 or any(i[2] < 1 for i in lead):
        return None
    return Window(base.src, base.perm, base.lo + lo, 0, tuple((i[0], i[2]) for i in lead))


def plan_row(lw: Lowering, eqns: list[Eqn], used_outside: set[Var]) -> RowPlan | None:
    """The row-kernel plan of a group, or None when some value does not fit the row model.

    Slices along the last axis and transposes of the leading axes of values from outside the
    group become windows of the kernel's loads, and a concatenation along the last axis of
    the group's values the placement of its stores: no copy kernels of their own."""
    found = _main_shape(eqns)
    if found is None:
        return None
    S: tuple[int, ...] = found if found else (1,)
    C = S[-1]
    R = math.prod(S) // C if C else 0
    if R == 0 or C == 0:
        return None
    kinds: dict[Any, str] = {}
    period: dict[Any, int] = {}
    inside = {e.out for e in eqns}
    inputs: list[Var] = []
    reduces = False
    windows: dict[Any, Window] = {}
    wide: dict[Var, Window] = {}  # transposes wider than a tile row, read through slices
    cats: dict[Any, tuple[Var, ...]] = {}
    for e in eqns:
        if any(a in cats or a in wide for a in e.inputs if isinstance(a, Var) and e.op != "slice"):
            return None  # a concatenation or a wide transpose is read only through windows
        if e.op in ("slice", "transpose"):
            w = _window_of(e, S, inside, wide, windows)
            if w is None:
                return None
            if e.out.aval.shape == S:
                windows[e.out] = w
                kinds[e.out] = _kind_of(S, S) or "full"
                inputs.append(e.out)
            elif e.op == "transpose" and e.out.aval.shape[:-1] == S[:-1]:
                if e.out in used_outside:
                    return None
                wide[e.out] = w
            else:
                return None
            continue
        if e.op == "concat":
            parts = tuple(p for p in e.inputs if isinstance(p, Var))
            axis = e.kwargs["axis"] % max(1, len(S))
            if (
                axis != len(S) - 1
                or len(parts) != len(e.inputs)
                or any(kinds.get(p) != "full" or p.aval.shape != S for p in parts)
                or e.out.aval.shape != (*S[:-1], len(parts) * C)
            ):
                return None
            cats[e.out] = parts
            continue
        rule = OPS[e.op].rules.get("tile")
        if not isinstance(rule, RowRule):
            return None
        if e.op == "broadcast_to" and e.inputs[0].aval.size == e.out.aval.size:
            return None  # it only adds size-1 axes: a view of its operand, no kernel at all
        if not rule.reduces and any(_flat_col(a, S, inside, kinds) for a in e.inputs):
            # An op on a row reduction without keepdims ([.., R] of [.., R, C]): its shape no
            # longer says it holds one value per row. Against the whole rows numpy would
            # broadcast it along the last axis (a value per column: not a row kernel); among
            # values of its own shape it stays one per row, and so does its result.
            for a in e.inputs:
                if not isinstance(a, Var):
                    continue
                k = "col" if a.aval.shape == S[:-1] else "one" if a.aval.size == 1 else None
                if k is None or kinds.setdefault(a, k) != k:
                    return None
                if a not in inside and a not in inputs:
                    inputs.append(a)
            if e.out.aval.shape != S[:-1]:
                return None
            kinds[e.out] = "col"
            continue
        for a in e.inputs:
            if isinstance(a, Var) and a not in inside and a not in kinds:
                k = _kind_of(a.aval.shape, S)
                if k is None:
                    return None
                if k == "rep":
                    period[a] = a.aval.size // C
                    k = _kind_of(S, S) or "full"  # full size ("col" when rows are one wide)
                kinds[a] = k
                inputs.append(a)
        if rule.reduces:
            x = e.inputs[0]
            axes = e.kwargs.get("axes", (e.kwargs.get("axis"),))
            if (
                not isinstance(x, Var)
                or kinds.get(x) != "full"
                or x.aval.shape != S
                or tuple(axes) != (len(S) - 1,)
            ):
                return None
            kinds[e.out] = "col"
            reduces = True
        else:
            k = _kind_of(e.out.aval.shape, S)
            if k is None or k == "rep":
                return None
            ins = [kinds[a] for a in e.inputs if isinstance(a, Var)]
            if "full" in ins and k != "full":
                return None
            kinds[e.out] = k
    if any(v not in used_outside for v in cats):
        return None
    outputs = [e.out for e in eqns if e.out in used_outside]
    dtypes = [v.aval.dtype for v in list(kinds)]
    return RowPlan(eqns, S, R, C, kinds, inputs, outputs, reduces, dtypes, period, windows, cats)


class RowBuilder:
    """Emits the statements of one row kernel; rules call :meth:`op`, :meth:`lit` ..."""

    def __init__(
        self, lw: Lowering, plan: RowPlan, tr: int, tc: int, step: int | None = None
    ) -> None:
        """Tiles of ``[tr, tc]``; grid point ``%r`` starts at row ``%r * step`` (``step`` is the
        full tile's rows when this builder emits a partial last tile of ``tr`` rows)."""
        self.lw = lw
        self.plan = plan
        self.tr, self.tc = tr, tc
        self.grid_c = plan.C // tc
        self.pre: list[Stmt] = []
        self.body: list[Stmt] = []
        self.post: list[Stmt] = []
        self.tiles: dict[Any, TileVar] = {}
        self.in_pre: set[str] = set()
        self.scalar_of: dict[str, TileVar] = {}
        """a one-value operand's ``[tr, 1]`` column (what :meth:`load` returns) -> its
        ``[1, 1]`` tile, for the ops that combine it with rows (:meth:`narrow`)"""
        self.spread: dict[str, TOp] = {}
        """elementwise ops on such columns only: each value is still one value, spread"""
        self.axes: set[str] = set()  # leading-axis index registers already computed
        self._n = 0
        self.loc: SourceLoc | None = None
        self.row = Expr.reg("r") * (step or tr)
        self.col = Expr.reg("c") * tc if self.grid_c > 1 else Expr()

    def shape(self, kind: str) -> tuple[int, int]:
        return {
            "full": (self.tr, self.tc),
            "col": (self.tr, 1),
            "row": (1, self.tc),
            "one": (1, 1),
        }[kind]

    def new(self, dtype: dt.DType, kind: str, hint: str = "t") -> TileVar:
        self._n += 1
        return TileVar(f"{hint}{self._n}", Space.UB, dtype, self.shape(kind))

    def kind(self, t: TileVar) -> str:
        r, c = t.shape
        if (r, c) == (self.tr, self.tc) and not (self.tc == 1 and r != 1):
            return "full"
        if c == 1 and r == self.tr and r != 1:
            return "col"
        if r == 1 and c == self.tc and c != 1:
            return "row"
        if (r, c) == (1, 1):
            return "one" if (self.tr, self.tc) != (1, 1) else "full"
        return "full"

    def op(self, opcode: str, dst: TileVar, *args: Any) -> TileVar:
        """Emit ``dst = opcode args`` — into ``pre`` when every tile operand is loop-invariant."""
        tiles = [a for a in args if isinstance(a, TileVar)]
        invariant = all(t.name in self.in_pre for t in tiles)
        stmt = TOp(opcode, dst, tuple(args), self.loc)
        spread = {*self.scalar_of, *self.spread} if self.scalar_of else ()
        if tiles and all(t.name in spread and t.shape == dst.shape for t in tiles):
            self.spread[dst.name] = stmt  # elementwise on one value spread down the rows
        if invariant:
            self.pre.append(stmt)
            self.in_pre.add(dst.name)
        else:
            self.body.append(stmt)
        return dst

    def lit(self, value: Any, dtype: dt.DType, kind: str | None = None) -> TileVar:
        """A tile filled with a constant (once, before the grid): ``[1, cols]`` unless
        ``kind`` says otherwise."""
        t = self.new(dtype, kind or ("row" if self.tc > 1 else "one"), "k")
        self.pre.append(TOp("TEXPANDS", t, (float(value),), self.loc))
        self.in_pre.add(t.name)
        return t

    def narrow(self, t: TileVar, *like: Any) -> TileVar:
        """``t``, or the ``[1, 1]`` tile of one value that ``t`` spreads down the rows when
        the tiles it meets (``like``) are rows: a column of ``tr`` rows does not broadcast
        against a ``[1, tc]`` row."""
        kinds = {self.kind(a) for a in like if isinstance(a, TileVar)}
        if "row" in kinds and kinds <= {"row", "one"}:
            return self.one(t) or t
        return t

    def one(self, t: TileVar) -> TileVar | None:
        """The ``[1, 1]`` tile of the one value ``t`` spreads down the rows (computed again
        on ``[1, 1]`` tiles where ``t`` is an op's result), or None."""
        if t.name in self.scalar_of:
            return self.scalar_of[t.name]
        stmt = self.spread.get(t.name)
        if stmt is None:
            return None
        args = [self.one(a) if isinstance(a, TileVar) else a for a in stmt.args]
        r = self.op(stmt.op, self.new(t.dtype, "one"), *args)
        self.scalar_of[t.name] = r
        return r

    def result_kind(self, *xs: Operand) -> str:
        ks = {self.kind(x) for x in xs if isinstance(x, TileVar)}
        for k in ("full", "col", "row", "one"):
            if k in ks:
                if k == "col" and "row" in ks:
                    return "full"
                return k
        return "one"

    def load(self, v: Var) -> TileVar:
        lw, plan = self.lw, self.plan
        kind = plan.kinds[v]
        if v in plan.windows:
            return self._load_window(v, plan.windows[v])
        buf = lw.buffer(v)
        size = v.aval.size
        logical_cols = {"full": plan.C, "col": 1, "row": plan.C, "one": 1}[kind]
        t = self.new(v.aval.dtype, kind, "x")
        row = {"full": self.row, "col": self.row}.get(kind, Expr())
        if v in plan.period:
            # the tile rows divide the period (choose_row_tile), so a tile never wraps
            reg = f"p{t.name}"
            self.body.append(SOp("SMOD", reg, (row, Expr.of(plan.period[v]))))
            row = Expr.reg(reg)
        col = self.col if kind in ("full", "row") else Expr()
        ld = self._tload(t, buf, (size // logical_cols, logical_cols), row, col)
        if (kind == "row" and self.grid_c == 1) or kind == "one":
            self.pre.append(ld)
            self.in_pre.add(t.name)
            if kind == "one" and (self.tr, self.tc) != (1, 1):
                # a scalar broadcasts as a [rows, 1] column
                col_t = self.new(v.aval.dtype, "col" if self.tr > 1 else "one", "s")
                if self.tr > 1:
                    self.pre.append(TOp("TCOLEXPAND", col_t, (t,), self.loc))
                    self.in_pre.add(col_t.name)
                    self.scalar_of[col_t.name] = t
                    return col_t
        else:
            self.body.append(ld)
        return t

    def _load_window(self, v: Var, w: Window) -> TileVar:
        """Load the tile of ``v`` from its window: the source's rows through the permutation
        (the tile's rows run along the last leading axis, one source axis), its columns from
        ``w.lo``."""
        lw, plan = self.lw, self.plan
        t = self.new(v.aval.dtype, plan.kinds[v], "x")
        P, k = w.src.aval.shape, len(w.perm) - 1
        if w.lead:
            # the tile's first row's leading indices, each stepped and offset into the source
            rows, cols, col = math.prod(P[:k]), P[-1], self.col + w.lo
            row = Expr.of(sum(st * math.prod(P[i + 1 : k]) for i, (st, _) in enumerate(w.lead)))
            for i, (_, step) in enumerate(w.lead):
                if plan.S[i] > 1:
                    row = row + Expr.reg(self._axis_index(i)) * (step * math.prod(P[i + 1 : k]))
        elif w.perm[:k] == tuple(range(k)):
            rows, cols, row = math.prod(P[:k]), P[-1], self.row + w.row
            col = self.col + w.lo
        else:
            # the output's leading index i of the tile's first row, source axis perm[i];
            # source axes up to a = perm[k-1] address rows of the view, the others columns
            O = plan.S[:-1]
            a = w.perm[k - 1]
            rows, cols = math.prod(P[: a + 1]), math.prod(P[a + 1 : k]) * P[-1]
            row, col = Expr(), self.col + w.lo
            for i in range(k):
                if O[i] == 1:
                    continue
                reg = self._axis_index(i)
                b = w.perm[i]
                if b <= a:
                    row = row + Expr.reg(reg) * math.prod(P[b + 1 : a + 1])
                else:
                    col = col + Expr.reg(reg) * (math.prod(P[b + 1 : k]) * P[-1])
        self.body.append(self._tload(t, lw.buffer(w.src), (rows, cols), row, col))
        return t

    def _tload(self, t: TileVar, buf: str, logical: tuple[int, int], row: Expr, col: Expr) -> TLoad:
        """The load of tile ``t`` at (``row``, ``col``) of the ``logical`` 2-D view of ``buf``:
        a window of its layout, or of a relayout copy when the tile is not one rectangle."""
        lay = self.lw.view(buf, logical)
        found = window(lay, logical[1], t.shape, row, col)
        if found is None:
            buf = relayout(self.lw, buf, logical, self.loc)
            found = window(self.lw.views[buf], logical[1], t.shape, row, col)
            assert found is not None
        wshape, wr, wc = found
        return TLoad(TileVar(t.name, Space.UB, t.dtype, wshape), buf, wr, wc, self.loc)

    def _axis_index(self, i: int) -> str:
        """The register holding leading axis ``i``'s index of the tile's first row (computed
        once per grid point)."""
        reg = f"ax{i}"
        if reg not in self.axes:
            self.axes.add(reg)
            O = self.plan.S[:-1]
            inner = math.prod(O[i + 1 :])
            row = self.row
            if inner > 1:
                self.body.append(SOp("SDIV", reg, (row, Expr.of(inner))))
                row = Expr.reg(reg)
            if i:
                self.body.append(SOp("SMOD", reg, (row, Expr.of(O[i]))))
            elif inner == 1:
                self.body.append(SOp("SMOV", reg, (row,)))
        return reg

    def given(self, v: Var, t: TileVar) -> None:
        """Use ``t`` as input ``v``'s tile instead of loading it; it counts as a tile made
        here, so the names of the tiles made after it are the same either way."""
        self._n += 1
        self.tiles[v] = t

    def emit(self) -> None:
        """The whole tile: load the inputs that have no tile yet (:meth:`given`), run the
        plan's rules and store its outputs (a concatenation piece by piece)."""
        loc = self.loc
        for v in self.plan.inputs:
            if v not in self.tiles:
                self.tiles[v] = self.load(v)
        for e in self.plan.eqns:
            if e.op in LAYOUT_OPS:
                continue  # windows of the loads and stores
            self.loc = e.loc or loc
            rule = OPS[e.op].rules["tile"]
            assert isinstance(rule, RowRule)
            args = [self.tiles[a] if isinstance(a, Var) else a for a in e.inputs]
            self.tiles[e.out] = rule.fn(self, e, args)
        self.loc = loc
        for v in self.plan.outputs:
            if v in self.plan.cats:
                self.store_cat(v)
            else:
                self.store(v, self.tiles[v])

    def store_cat(self, v: Var) -> None:
        """Store the pieces of a concatenation along the last axis, each at its columns."""
        lw, plan = self.lw, self.plan
        parts = plan.cats[v]
        cols = len(parts) * plan.C
        buf = lw.buffer(v)
        lay = lw.view(buf, (v.aval.size // cols, cols))
        for i, p in enumerate(parts):
            t = self.tiles[p]
            w = window(lay, cols, t.shape, self.row, self.col + i * plan.C)
            if w is None:
                raise TileError(
                    f"cannot store {v.aval} into its buffer laid out as {list(lay)}",
                    op="concat",
                )
            wshape, wr, wc = w
            self.body.append(
                TStore(buf, wr, wc, TileVar(t.name, t.space, t.dtype, wshape), self.loc)
            )

    def store(self, v: Var, t: TileVar) -> None:
        lw, plan = self.lw, self.plan
        kind = plan.kinds[v]
        buf = lw.buffer(v)
        logical_cols = {"full": plan.C, "col": 1, "row": plan.C, "one": 1}[kind]
        lay = lw.view(buf, (v.aval.size // logical_cols, logical_cols))
        if kind == "one" and self.kind(t) == "col":
            if plan.R == 1:
                kind = "col"  # one row: the column is the single value
            else:
                # broadcast down the rows of the tile; its first row holds the value
                t = TileVar(t.name, t.space, t.dtype, (1, t.shape[1]))
        elif kind == "row" and t.shape[0] > 1:
            # a row value computed with a scalar broadcast down a column is a whole tile of
            # equal rows: the first one is the value
            t = TileVar(t.name, t.space, t.dtype, (1, t.shape[1]))
        row = self.row if kind in ("full", "col") else Expr()
        col = self.col if kind in ("full", "row") else Expr()
        w = window(lay, logical_cols, t.shape, row, col)
        if w is None:
            raise TileError(
                f"cannot store {v.aval} into its buffer laid out as {list(lay)}",
                op=v.hint or "store",
            )
        wshape, wr, wc = w
        st = TStore(buf, wr, wc, TileVar(t.name, t.space, t.dtype, wshape), self.loc)
        if kind in ("row", "one"):
            # every grid point computes it; the first one writes it (a row: the first of
            # each column tile, which holds those columns)
            first = Expr.reg("r")
            if kind == "one" and self.grid_c > 1:
                first = first + Expr.reg("c")
            self.body.append(SOp("SMIN", "once", (first, Expr.of(1))))
            self.body.append(For("w", Expr.reg("once"), Expr.of(1), 1, (st,)))
        elif kind == "col" and self.grid_c > 1:
            # one value per row, which every column tile of the row computes: the first
            # column tile writes it (two would race)
            self.body.append(For("w", Expr.reg("c"), Expr.of(1), 1, (st,)))
        else:
            self.body.append(st)


_READERS: weakref.WeakKeyDictionary[Func, tuple[dict[Var, list[int]], set[Var]]] = (
    weakref.WeakKeyDictionary()
)


def _readers(f: Func) -> tuple[dict[Var, list[int]], set[Var]]:
    """The ``id`` of each equation that reads each value, and the outputs (kept per function:
    the lowering asks for every candidate kernel, and a scan of the whole function each time
    made it quadratic)."""
    r = _READERS.get(f)
    if r is None:
        readers: dict[Var, list[int]] = {}
        for e in f.eqns:
            for a in e.inputs:
                if isinstance(a, Var):
                    readers.setdefault(a, []).append(id(e))
        r = _READERS[f] = (readers, {o for o in f.outputs if isinstance(o, Var)})
    return r


def used_outside(f: Func, eqns: list[Eqn]) -> set[Var]:
    """The values ``eqns`` produce that other equations or the function's outputs read."""
    inside = {id(e) for e in eqns}
    readers, outputs = _readers(f)
    return {
        e.out
        for e in eqns
        if e.out in outputs or any(r not in inside for r in readers.get(e.out, ()))
    }


def ub_bytes_needed(plan: RowPlan, tr: int, tc: int) -> int:
    """An upper estimate of the UB a row kernel needs: I/O tiles twice (their DMA regions
    stay reserved), row, column and scalar tiles each, and twice the peak of the full tiles
    only the vector unit touches, which the allocator shares by liveness (the factor covers
    the rules' own temporaries and first-fit's gaps). A long elementwise chain keeps a few
    such tiles live at once, not one per value."""
    total = 0
    for e in plan.eqns:
        rule = OPS[e.op].rules.get("tile")
        if isinstance(rule, RowRule) and rule.scratch:
            total += rule.scratch * tr * tc + 8 * tc  # (and a row of indices or limits)
    stored = {p for ps in plan.cats.values() for p in ps}
    temps: dict[Any, int] = {}
    for v, k in plan.kinds.items():
        r, c = {"full": (tr, tc), "col": (tr, 1), "row": (1, tc), "one": (1, max(tc, tr))}[k]
        nb = -(-r * c * v.aval.dtype.itemsize // 32) * 32
        io = v in plan.inputs or v in plan.outputs or v in stored
        if k == "full" and not io:
            temps[v] = nb
            continue
        total += nb * (2 if io and k in ("full", "col") else 1)
    return total + min(2 * _peak_live(plan, temps), sum(temps.values()))


def _peak_live(plan: RowPlan, temps: dict[Any, int]) -> int:
    """The most bytes of ``temps`` live at once, each from the equation that makes it to the
    last one that reads it, in the plan's order (the order the kernel computes them)."""
    spans = plan.spans()
    delta = [0] * (len(plan.eqns) + 1)
    for v, nb in temps.items():
        b, d = spans.get(v, (0, 0))
        delta[b] += nb
        delta[max(d, b) + 1] -= nb
    return max(itertools.accumulate(delta, initial=0))


def choose_row_tile(lw: Lowering, plan: RowPlan, name: str) -> tuple[int, int]:
    """(rows, cols) of a row kernel's tile: the user's vec tile, checked, or the best that fits."""
    m = lw.machine
    cap = m.ub_bytes
    # Lowering needs only a part of UB per value set: liveness lets the allocator share the
    # rest, but the estimate keeps a margin for alignment.
    user = lw.cfg.vec
    col_split_ok = not plan.reduces
    if user is not None:
        tc = min(user[-1], plan.C)
        tr = min(math.prod(user[:-1]) if len(user) > 1 else 1, plan.R)
        need = partial_need(plan, tr, tc)
        itemsize = max(d.itemsize for d in plan.dtypes)
        problems = []
        if plan.C % tc:
            problems.append(f"does not divide its {plan.C} columns")
        if plan.R % tr and not partial_rows(plan):
            problems.append(f"does not divide its {plan.R} rows")
        if any(p % tr for p in plan.row_blocks()):
            problems.append(
                f"does not divide the {plan.row_blocks()} rows after which a broadcast "
                "operand repeats or a transposed operand's rows jump"
            )
        if tc != plan.C and not col_split_ok:
            problems.append(f"splits rows of {plan.C}, but the kernel reduces over whole rows")
        if tc != plan.C and (tc * itemsize) % m.align_bytes:
            problems.append(
                f"has {tc} columns = {tc * itemsize} bytes, not a multiple of {m.align_bytes}"
            )
        if need > cap:
            problems.append(f"needs {need} bytes of UB; {m.name} has {cap}")
        if problems:
            fit = _best_row_tile(lw, plan)
            raise TileError(
                f"vector tile {list(user)} for kernel @{name} (a [{plan.R},{plan.C}] view) "
                + " and ".join(problems),
                op="set_vec_tile_shapes",
                hint=f"a tile that fits: pto.set_vec_tile_shapes({fit[0]}, {fit[1]})",
            )
        return tr, tc
    return _best_row_tile(lw, plan)


def _best_row_tile(lw: Lowering, plan: RowPlan) -> tuple[int, int]:
    cap = lw.machine.ub_bytes
    workers = lw.workers("aiv")
    col_opts = (
        [plan.C]
        if plan.reduces
        else [d for d in divisors(plan.C) if d == plan.C or d * 4 % 32 == 0]
    )
    best: tuple[Any, ...] | None = None
    for tc in sorted(col_opts, reverse=True):
        for tr in divisors(plan.R):
            if any(p % tr for p in plan.row_blocks()):
                continue
            need = ub_bytes_needed(plan, tr, tc)
            if need > cap:
                continue
            points = (plan.R // tr) * (plan.C // tc)
            elems = tr * tc
            # Prefer every core busy, then big tiles up to 16K elements (DMA runs at full rate
            # from about 16 KiB), then fewer points.
            score = (min(points, workers), min(elems, 16384), tc == plan.C, -points)
            if best is None or score > best[0]:
                best = (score, tr, tc)
    if best is None:
        raise TileError(
            f"a [{1},{plan.C}] row does not fit UB ({cap} bytes) with its intermediates",
            op="lower",
            hint="without a vec tile setting, rows this long are walked in column chunks "
            "(pypto/tile/longrow.py)",
        )
    tr, tc = best[1], best[2]
    if partial_rows(plan):
        # a partial last row tile, when it beats the divisors by far (a prime row count
        # leaves them one row per tile); otherwise the divisor keeps its (simpler) kernel
        found = _best_partial_tile(lw, plan, col_opts)
        if found is not None and 3 * row_cycles(lw, plan, *found) < 2 * row_cycles(
            lw, plan, tr, tc
        ):
            return found
    return tr, tc


def partial_rows(plan: RowPlan) -> bool:
    """Whether a row kernel may end its grid in a partial tile of ``R mod tr`` rows: only when
    no operand repeats or jumps across rows (:meth:`RowPlan.row_blocks`)."""
    return not plan.row_blocks()


def partial_need(plan: RowPlan, tr: int, tc: int) -> int:
    """:func:`ub_bytes_needed` of ``[tr, tc]`` tiles, plus, when ``tr`` leaves a partial last
    tile, the tiles it keeps apart: the double buffers of its loads and stores and the
    scalars broadcast down its rows before the grid."""
    need = ub_bytes_needed(plan, tr, tc)
    tail = plan.R % tr
    if tail:
        for v, k in plan.kinds.items():
            r, c = {"full": (tail, tc), "col": (tail, 1), "row": (1, 0), "one": (tail, 1)}[k]
            nb = -(-r * c * v.aval.dtype.itemsize // 32) * 32
            if k == "one":
                need += nb
            elif k in ("full", "col") and (v in plan.inputs or v in plan.outputs):
                need += 2 * nb
        stored = [p for ps in plan.cats.values() for p in ps]
        need += sum(2 * -(-tail * tc * p.aval.dtype.itemsize // 32) * 32 for p in stored)
    return need


def row_cycles(lw: Lowering, plan: RowPlan, tr: int, tc: int) -> float:
    """A rough estimate of a row kernel's cycles with ``[tr, tc]`` tiles: the busiest core's
    grid points, each loading and storing its tiles (DMA start-up, then the bytes at the
    core's rate or its share of HBM) and running the kernel's vector ops; the loads, the
    compute and the stores of successive points overlap (double buffers). A partial last tile
    costs at most a full one."""
    m = lw.machine
    points = -(-plan.R // tr) * (plan.C // tc)
    busy = min(points, lw.workers("aiv"))
    rounds = -(-points // busy)
    share = m.hbm_gbps / m.clock_ghz / busy

    def nbytes(v: Var) -> list[int]:
        if v in plan.cats:
            return [tr * tc * p.aval.dtype.itemsize for p in plan.cats[v]]
        k = plan.kinds.get(v)
        if k == "full" or (k == "row" and tc != plan.C):
            return [tr * tc * v.aval.dtype.itemsize if k == "full" else tc * v.aval.dtype.itemsize]
        return [tr * v.aval.dtype.itemsize] if k == "col" else []

    def dma(vs: list[Var], rate: float) -> float:
        sizes = [n for v in vs for n in nbytes(v)]
        return len(sizes) * m.dma_latency + sum(sizes) / min(rate, share)

    load, store = dma(plan.inputs, m.gm_read), dma(plan.outputs, m.ub_gm)
    ops = sum(1 for e in plan.eqns if e.op not in LAYOUT_OPS)
    vec = ops * (m.vector_latency + -(-tr * tc * 4 // m.vector_bytes))
    # a point's loads overlap the previous point's stores: they share the core's HBM share
    moved = sum(n for v in [*plan.inputs, *plan.outputs] for n in nbytes(v)) / share
    return load + vec + store + (rounds - 1) * max(load, vec, store, moved)


def _row_multiple(lw: Lowering, plan: RowPlan) -> int:
    """The multiple of rows a tile must have for its loads and stores to be windows of the
    buffers' layouts (a buffer laid out in rows of ``k`` of the kernel's rows)."""
    k = 1
    for v in [*plan.inputs, *plan.outputs]:
        w = plan.windows.get(v)
        buf = lw.var_buf.get(w.src if w else v)
        lay = lw.views.get(buf) if buf is not None else None
        if lay is None:
            continue
        kind = plan.kinds.get(v, "full")
        cols = w.src.aval.shape[-1] if w else (plan.C if kind in ("full", "row") else 1)
        if v in plan.cats:
            cols = len(plan.cats[v]) * plan.C
        if lay[1] > cols and lay[1] % cols == 0:
            k = math.lcm(k, lay[1] // cols)
    return k


def _best_partial_tile(lw: Lowering, plan: RowPlan, col_opts: list[int]) -> tuple[int, int] | None:
    """The best ``[tr, tc]`` tile whose rows do not divide ``R`` (the last grid point takes the
    rest): even splits of the rows into a few rounds of the vector cores, or into the fewest
    tiles that fit UB; of whole rows when they fit (a narrow column tile moves short strided
    runs)."""
    cap = lw.machine.ub_bytes
    workers = lw.workers("aiv")
    unit = _row_multiple(lw, plan)
    best: tuple[Any, ...] | None = None
    for tc in sorted(col_opts, reverse=True):

        def fits(tr: int, tc: int = tc) -> bool:
            return partial_need(plan, tr, tc) <= cap

        # the most rows that fit (the need grows with the rows)
        lo, hi = 0, (plan.R - 1) // unit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid * unit):
                lo = mid
            else:
                hi = mid - 1
        most = lo * unit
        if most < 2:
            continue
        per = -(-workers // (plan.C // tc))  # row tiles that keep every core busy
        counts = {per * i for i in range(1, 17)} | {-(-plan.R // min(most, max(1, 16384 // tc)))}
        counts.add(-(-plan.R // most))
        for n in sorted(counts):
            even = -(-plan.R // n)
            tr = -(-even // unit) * unit
            if not 1 < tr <= most or plan.R % tr == 0 or not fits(tr):
                continue
            points = -(-plan.R // tr) * (plan.C // tc)
            # the fewest rows on the busiest core (the cores share the rows evenly), then big
            # tiles up to 16K elements, then fewer points
            score = (-(-(-points // workers) * tr), min(tr * tc, 16384), -points)
            if best is None or score > best[0]:
                best = (score, tr, tc)
        if best is not None:
            break
    return None if best is None else (best[1], best[2])


def long_rows(lw: Lowering, plan: RowPlan) -> bool:
    """Whether a row kernel walks its rows in column chunks (:mod:`pypto.tile.longrow`): it
    reduces over rows too long for UB, or no tile of its rows fits (no aligned split)."""
    if plan.reduces:
        return ub_bytes_needed(plan, 1, plan.C) > lw.machine.ub_bytes
    if lw.cfg.vec is not None:
        return False
    try:
        _best_row_tile(lw, plan)
    except TileError:
        return True
    return False


def lower_row_kernel(lw: Lowering, plan: RowPlan, name: str, loc: SourceLoc | None) -> None:
    if long_rows(lw, plan):
        from pypto.tile.longrow import lower_long_rows

        lower_long_rows(lw, plan, name, loc)
        return
    tr, tc = choose_row_tile(lw, plan, name)
    b = _emit_rows(lw, plan, tr, tc, loc)
    pre, body, post = b.pre, b.body, b.post
    n = -(-plan.R // tr)
    if plan.R % tr:
        part = _emit_rows(lw, plan, plan.R % tr, tc, loc, step=tr)
        pre, body, post = _with_partial(b, part, n)
    grid = [("r", n)]
    if plan.C // tc > 1:
        grid.append(("c", plan.C // tc))
    lw.add_kernel(
        Kernel(
            name,
            "vector",
            tuple(grid),
            (Section("aiv", tuple(body), tuple(pre), tuple(post)),),
            (("rows", tr), ("cols", tc)),
            loc=loc,
        )
    )


def _emit_rows(
    lw: Lowering, plan: RowPlan, tr: int, tc: int, loc: SourceLoc | None, step: int | None = None
) -> RowBuilder:
    """A builder holding the row kernel's statements for ``[tr, tc]`` tiles."""
    b = RowBuilder(lw, plan, tr, tc, step)
    b.loc = loc
    b.emit()
    return b


def tiles_of(s: Stmt) -> list[TileVar]:
    """The tiles a statement (and any loop's body) names, a definition first."""
    if isinstance(s, TLoad):
        return [s.dst]
    if isinstance(s, TStore):
        return [s.src]
    if isinstance(s, TOp):
        return [s.dst, *(a for a in s.args if isinstance(a, TileVar))]
    if isinstance(s, For):
        return [t for x in s.body for t in tiles_of(x)]
    if isinstance(s, SOp):
        return list(s.tiles)
    return []


def _renamed(s: Stmt, names: dict[str, str]) -> Stmt:
    """``s`` with its tiles renamed by ``names``."""

    def t(v: TileVar) -> TileVar:
        return TileVar(names[v.name], v.space, v.dtype, v.shape) if v.name in names else v

    if isinstance(s, TLoad):
        return TLoad(t(s.dst), s.tensor, s.row, s.col, s.loc)
    if isinstance(s, TStore):
        return TStore(s.tensor, s.row, s.col, t(s.src), s.loc, s.scale)
    if isinstance(s, TOp):
        args = tuple(t(a) if isinstance(a, TileVar) else a for a in s.args)
        return TOp(s.op, t(s.dst), args, s.loc)
    if isinstance(s, For):
        return For(s.reg, s.start, s.stop, s.step, tuple(_renamed(x, names) for x in s.body))
    if isinstance(s, SOp) and s.tiles:
        return SOp(s.op, s.dst, tuple(t(a) if isinstance(a, TileVar) else a for a in s.args), s.loc)
    return s


Variant = tuple[list[Stmt], list[Stmt], list[Stmt]]
"""(pre, body, post) of one tile extent's statements."""


def merge_variants(
    variants: Sequence[Variant], moved_apart: bool = True
) -> tuple[list[Stmt], list[list[Stmt]], list[Stmt]]:
    """One pre and post, and each variant's body, for code that runs one of ``variants`` per
    grid point (a full tile or a partial one, picked by 0/1-trip loops). Vector-only tiles
    keep the same names, so one buffer holds any variant's; a later variant's own tiles
    before the grid (a scalar broadcast down fewer rows) are renamed apart from the first
    variant's, and so are the tiles DMA moves when ``moved_apart`` (a double buffer of each
    variant's own)."""
    first = variants[0]
    used = {t.name for s in [*first[0], *first[1], *first[2]] for t in tiles_of(s)}
    taken = set(used)
    for v in variants[1:]:
        taken |= {t.name for s in [*v[0], *v[1], *v[2]] for t in tiles_of(s)}
    full_pre = {t.name for s in first[0] for t in tiles_of(s)}
    pre, bodies, post = list(first[0]), [list(first[1])], list(first[2])
    for v_pre, v_body, v_post in variants[1:]:
        names: dict[str, str] = {}

        def apart(name: str, names: dict[str, str] = names) -> None:
            new = name + "_p"
            while new in taken:
                new += "p"
            taken.add(new)
            names[name] = new

        for st in v_pre:
            st = _renamed(st, names)
            if st in first[0]:
                continue
            for t in tiles_of(st)[:1]:  # the tile it defines
                if t.name in used and t.name not in names:
                    apart(t.name)
            pre.append(_renamed(st, names))
        part_pre = {t.name for st in v_pre for t in tiles_of(st)}
        for st in walk(tuple(v_body)):
            moved = (
                [st.dst] if isinstance(st, TLoad) else [st.src] if isinstance(st, TStore) else []
            )
            for t in tiles_of(st):
                if t.name in names or t.name in part_pre:
                    continue
                # a tile the first variant's pre names, or one that DMA moves: a double
                # buffer of its own, alternating within the loop of its variant (so that the
                # next grid point's loads still overlap this one's compute and stores)
                if t.name in full_pre or (moved_apart and t in moved):
                    apart(t.name)
        bodies.append([_renamed(st, names) for st in v_body])
        post += [st for st in v_post if st not in post]
    return pre, bodies, post


def _with_partial(
    full: RowBuilder, part: RowBuilder, n: int
) -> tuple[list[Stmt], list[Stmt], list[Stmt]]:
    """(pre, body, post) of a row kernel whose last of ``n`` row tiles is partial: ``%last`` is
    1 only on it, and 0/1-trip loops on it run the full tile's statements or the partial
    tile's (:func:`merge_variants`)."""
    pre, (fb, pb), post = merge_variants(
        [(full.pre, full.body, full.post), (part.pre, part.body, part.post)]
    )
    body: list[Stmt] = [
        SOp("SMAX", "last", (Expr.reg("r") - (n - 2), Expr.of(0))),
        For("rf", Expr.reg("last"), Expr.of(1), 1, tuple(fb)),
        For("rp", Expr(), Expr.reg("last"), 1, tuple(pb)),
    ]
    return pre, body, post


# ---------------------------------------------------------------- the driver
def _groups(f: Func) -> list[tuple[str, list[Eqn]]]:
    names = dict(f.groups)
    out: list[tuple[str, list[Eqn]]] = []
    index: dict[str | None, int] = {}
    for e in f.eqns:
        g = e.group
        if g is None or g not in index:
            index[g] = len(out)
            out.append((names.get(g, e.op) if g else e.op, [e]))
            if g is None:
                index.pop(None)
        else:
            out[index[g]][1].append(e)
    return out


def lower_func(
    f: Func, machine: Machine, cfg: TileConfig | None = None, *, fuse: bool = True
) -> TileFunc:
    """The Tile IR of a (fused) Tensor IR function.

    With ``fuse``, consecutive groups that fit one row kernel together (a residual add before a
    norm, independent elementwise groups over the same rows) become one kernel, so their
    intermediates stay in UB; ``fuse=False`` keeps one kernel per group (the baseline).
    """
    if fuse:
        f = _transposes_per_reader(f)
    lw = Lowering(f, machine, cfg or TileConfig())
    outs = {o for o in f.outputs if isinstance(o, Var)}
    # a buffer is an output when any reshape view of it is
    alias: dict[Var, Var] = {}
    for e in f.eqns:
        if e.op == "reshape" and isinstance(e.inputs[0], Var):
            src = e.inputs[0]
            alias[e.out] = alias.get(src, src)
    lw.outputs_of = outs | {alias[o] for o in outs if o in alias}
    for p in f.params:
        lw.var_buf[p] = lw.new_buffer(p.hint or "arg", p.aval.dtype, p.aval.size, "in")
    for v, arr in f.consts:
        name = lw.new_buffer("c", v.aval.dtype, v.aval.size, "in")
        lw.var_buf[v] = name
        a = np.asarray(arr).reshape(-1, arr.shape[-1] if arr.ndim else 1)
        lw.views[name] = (a.shape[0], a.shape[1])
        lw.consts.append((name, a))
    pending: list[tuple[str, list[Eqn]]] = []
    # A matmul waits until the next kernel is known: a row kernel that reads its result only
    # through head-split windows becomes its epilogue (HEAD_EPILOGUES); anything else lowers
    # it first, so kernels keep program order.
    held: list[Eqn] = []  # the matmul, then reshapes of its result
    views: set[Var] = set()

    def release() -> None:
        if held:
            e = held[0]
            held.clear()
            views.clear()
            with at_location(e.loc), hinted(lw, [e]):
                lower_single(lw, e)

    def flush() -> None:
        if pending:
            eqns = [e for _, es in pending for e in es]
            if all(e.op in LAYOUT_OPS for e in eqns) and not (
                any(e.op == "concat" for e in eqns)
                and plan_row(lw, eqns, used_outside(f, eqns)) is not None
            ):
                # nothing to compute: the layout kernels move the bytes (a concatenation of
                # windows is one row kernel: each piece loaded and stored once)
                release()
                pending.clear()
                for e in eqns:
                    with at_location(e.loc), hinted(lw, [e]):
                        lower_single(lw, e)
                return
            # errors name the kernel's op (its last) rather than the line that called jit
            with at_location(eqns[-1].loc), hinted(lw, eqns):
                if held:
                    # the held matmul's result counts as the kernel's own value
                    plan = plan_row(lw, eqns, used_outside(f, [*held, *eqns]))
                    e = held[0]
                    if (
                        plan is not None
                        and any(w.src in views for w in plan.windows.values())
                        and _hints_agree([e, *eqns])
                    ):
                        with hinted(lw, [e, *eqns]):
                            if any(rule(lw, e, held[1:], plan) for rule in HEAD_EPILOGUES):
                                held.clear()
                                views.clear()
                                pending.clear()
                                return
                    release()
                plan = plan_row(lw, eqns, used_outside(f, eqns))
                assert plan is not None
                name = "_".join(dict.fromkeys(n for n, _ in pending))
                lower_row_kernel(lw, plan, lw.fresh(name), eqns[-1].loc)
            pending.clear()

    for gname, group in _groups(f):
        eqns = [e for e in group if id(e) not in lw.skip]
        if not eqns:
            continue
        if all(e.op == "reshape" for e in eqns):
            # a view of a value the pending kernel makes must not be read by it: flush first
            made = {e.out for _, es in pending for e in es}
            if any(a in made for e in eqns for a in e.inputs if isinstance(a, Var)):
                flush()
            for e in eqns:
                _reshape(lw, e)
                if held and e.inputs[0] == held[0].out and e.out.aval.ndim == 3:
                    held.append(e)
                    views.add(e.out)
            continue
        if fuse and _moves_last(eqns):
            # a transpose that moves the last axis waits as well: the matmul or attention that
            # reads it may load its operand transposed instead (GROUP_WINDOWS). A row kernel
            # waiting before it cannot read it through a window: that kernel goes first
            if not all(e.op in LAYOUT_OPS for _, es in pending for e in es):
                flush()
            release()
            pending.append((gname, eqns))
            continue
        if fuse and pending:
            layout = all(e.op in LAYOUT_OPS for _, es in pending for e in es)
            if layout and all(e.op in LAYOUT_OPS for e in eqns):
                # slices and transposes wait for the compute that reads them through windows
                if plan_row(lw, eqns, used_outside(f, eqns)) is not None:
                    pending.append((gname, eqns))
                    continue
                # or for a concatenation of them, itself a row kernel of windows
                if any(e.op == "concat" for e in eqns) and _merge_into(
                    lw, f, pending, (gname, eqns), release
                ):
                    continue
            elif _merge_into(lw, f, pending, (gname, eqns), release):
                continue
        pre: list[Eqn] = []
        if fuse and pending and plan_row(lw, eqns, used_outside(f, eqns)) is None:
            pre = _claim(lw, f, pending, eqns)
        flush()
        if not pre and plan_row(lw, eqns, used_outside(f, eqns)) is not None:
            pending.append((gname, eqns))
            continue
        release()
        if fuse and not pre and _splits_heads(f, lw, eqns):
            held.append(eqns[0])
            continue
        with at_location(eqns[-1].loc), hinted(lw, eqns):
            if len(eqns) > 1 or pre:
                lower_split(lw, eqns, pre)
            else:
                lower_single(lw, eqns[0])
    flush()
    release()
    return lw.result()


def _hints_agree(eqns: list[Eqn]) -> bool:
    """Whether the ``pto.hint`` of ``eqns`` allow one kernel (no key set two ways)."""
    try:
        kernel_hint(eqns)
    except TileError:
        return False
    return True


def _splits_heads(f: Func, lw: Lowering, eqns: list[Eqn]) -> bool:
    """Whether ``eqns`` is one matmul whose result is only read through reshapes into heads
    (``[M, N] -> [M, H, D]``): a row kernel after it may take it as its epilogue
    (:data:`HEAD_EPILOGUES`)."""
    if len(eqns) != 1 or eqns[0].op != "matmul" or not HEAD_EPILOGUES:
        return False
    out = eqns[0].out
    readers = [e for e in f.eqns if out in e.inputs]
    return (
        out.aval.ndim == 2
        and out not in lw.outputs_of
        and bool(readers)
        and all(e.op == "reshape" and e.out.aval.ndim == 3 for e in readers)
    )


def _transposes_per_reader(f: Func) -> Func:
    """``f`` with each transpose that only matmuls read moved next to them: a copy just
    before each reader (``xᵀ`` for every weight gradient of a layer, a head split that the
    forward and the backward products both read, one computed long before its product), so
    every matmul may read its copy in place instead of one transposed copy in GM. Only
    transposes that keep the last axis as one of the last two, and matmuls that open their
    group (the copy then runs just before it)."""
    readers: dict[Var, list[Eqn]] = {}
    for e in f.eqns:
        for a in set(e.inputs):
            if isinstance(a, Var):
                readers.setdefault(a, []).append(e)
    first: dict[str | None, Eqn] = {}
    for e in f.eqns:
        first.setdefault(e.group, e)

    def opens(r: Eqn) -> bool:
        return r.group is None or first[r.group] is r

    outs = {o for o in f.outputs if isinstance(o, Var)}
    many = {
        e.out: e
        for e in f.eqns
        if e.op == "transpose"
        and matmul_reads_in_place(tuple(e.kwargs["perm"]))
        and e.out not in outs
        and readers.get(e.out)
        and all(r.op == "matmul" and opens(r) for r in readers[e.out])
    }
    if not many:
        return f
    eqns: list[Eqn] = []
    for e in f.eqns:
        if e.out in many:
            continue
        copies: dict[Var, Var] = {}
        for a in e.inputs:
            if isinstance(a, Var) and a in many and a not in copies:
                copies[a] = Var(a.aval, a.hint)
                eqns.append(replace(many[a], out=copies[a], group=None))
        if copies:
            e = replace(
                e, inputs=tuple(copies.get(a, a) if isinstance(a, Var) else a for a in e.inputs)
            )
        eqns.append(e)
    return replace(f, eqns=tuple(eqns))


def _moves_last(eqns: list[Eqn]) -> bool:
    """Whether a group is one transpose that makes the last axis the second last (``x.T``, or
    a head split and ``.T`` in one): no row-kernel window, but a matmul's transposed read."""
    if len(eqns) != 1 or eqns[0].op != "transpose":
        return False
    perm = tuple(eqns[0].kwargs["perm"])
    return len(perm) >= 2 and perm[-2] == len(perm) - 1


def _claim(
    lw: Lowering, f: Func, pending: list[tuple[str, list[Eqn]]], group: list[Eqn]
) -> list[Eqn]:
    """The pending layout equations that ``group``'s kernel reads through windows instead
    (see :data:`GROUP_WINDOWS`), taken out of ``pending``: transposes only the group reads,
    and slices and concatenations read only by the group or each other."""
    inside = {id(e) for e in group}
    waiting = [e for _, es in pending for e in es]
    # transposes the group alone reads; slices and concatenations the group reads through
    # each other (a concatenation of row windows as a matmul's A)
    through = inside | {id(e) for e in waiting if e.op in ("slice", "concat")}
    cands = [
        e
        for e in waiting
        if e.op in ("transpose", "slice", "concat")
        and e.out not in lw.outputs_of
        and all(
            id(c) in (inside if e.op == "transpose" else through)
            for c in f.eqns
            if e.out in c.inputs
        )
    ]
    if not cands:
        return []
    for rule in GROUP_WINDOWS:
        took = rule(lw, group, cands)
        if took:
            ids = {id(e) for e in took}
            left = [(n, [e for e in es if id(e) not in ids]) for n, es in pending]
            pending[:] = [(n, es) for n, es in left if es]
            return took
    return []


def _merge_into(
    lw: Lowering,
    f: Func,
    pending: list[tuple[str, list[Eqn]]],
    group: tuple[str, list[Eqn]],
    release: Callable[[], None],
) -> bool:
    """Add ``group`` to the pending row kernel if they fit one kernel. Leading layout groups
    that keep it from fitting (a transpose also read elsewhere, say) become kernels of their
    own first, after the kernels ``release`` lowers (a matmul waiting for its epilogue)."""
    for drop in range(len(pending)):
        if drop and any(e.op not in LAYOUT_OPS for e in pending[drop - 1][1]):
            break
        merged = [e for _, es in pending[drop:] for e in es] + group[1]
        plan = plan_row(lw, merged, used_outside(f, merged))
        if plan is not None and _merges(lw, plan):
            if drop:
                release()
            for _, es in pending[:drop]:
                for e in es:
                    with at_location(e.loc), hinted(lw, [e]):
                        lower_single(lw, e)
            del pending[:drop]
            pending.append(group)
            return True
    return False


def _merges(lw: Lowering, plan: RowPlan) -> bool:
    """Whether groups merge into one row kernel: their hints agree and the tile fits."""
    try:
        with hinted(lw, plan.eqns):
            if not long_rows(lw, plan):
                choose_row_tile(lw, plan, "merged")
            else:
                from pypto.tile.longrow import takes

                # what the multi-pass kernel cannot take (argmax, windows) stays a kernel of
                # its own
                return not (plan.windows or plan.cats) and takes(plan)
    except TileError:
        return False
    return True


def kernel_hint(eqns: Sequence[Eqn]) -> dict[str, tuple[Any, Eqn]]:
    """The ``pto.hint`` of the kernel ``eqns`` fuse into: key -> (value, an eqn that sets it).

    Unhinted ops take the kernel's hint; two ops setting one key to different values is an
    error naming both lines.
    """
    out: dict[str, tuple[Any, Eqn]] = {}
    for e in eqns:
        for k, v in e.hint:
            prev = out.setdefault(k, (v, e))
            if prev[0] != v:
                raise TileError(
                    f"ops fused into one kernel have conflicting hints: {prev[1].op} at "
                    f"{prev[1].loc} has {k}={prev[0]!r}, {e.op} at {e.loc} has {k}={v!r}",
                    op="hint",
                    loc=e.loc,
                    hint="give the ops of one kernel the same pto.hint, or hint only one",
                )
    return out


@contextlib.contextmanager
def hinted(lw: Lowering, eqns: Sequence[Eqn]) -> Iterator[None]:
    """Lower ``eqns`` with their hint: its tile settings over ``lw.cfg`` meanwhile, and the
    kernels they make spread over its ``cores``."""
    h = kernel_hint(eqns)
    if not h:
        yield
        return
    base, first = lw.cfg, len(lw.kernels)
    lw.cfg = base.merged(from_hint(tuple((k, v) for k, (v, _) in h.items())))
    try:
        yield
    except TileError as err:
        tiled = [e for k, (_, e) in h.items() if k != "cores"]
        if not tiled or err.op == "hint":
            raise
        raise TileError(
            f"{err.detail} (with pto.hint at {tiled[0].loc})",
            op=err.op,
            loc=tiled[0].loc,
            hint=err.hint,
        ) from None
    finally:
        lw.cfg = base
    if "cores" in h:
        cores, e = h["cores"]
        lw.kernels[first:] = [spread(k, cores, lw.machine, e.loc) for k in lw.kernels[first:]]


GROUP_RULES: list[Callable[[Lowering, list[Eqn]], bool]] = []
"""Lowerings of whole groups that are not row kernels (a matmul with its epilogue, attention):
each returns whether it took the group (registered by :mod:`pypto.tile.matmul` and
:mod:`pypto.tile.attention`)."""

HEAD_EPILOGUES: list[Callable[[Lowering, Eqn, list[Eqn], RowPlan], bool]] = []
"""``rule(lw, matmul, views, plan)``: lower a matmul together with the row kernel ``plan`` that
reads its result only through windows of head-split ``views`` of it (reshapes ``[M, N] ->
[M, H, D]``; a rotary embedding after a Q or K projection), as one kernel; whether it did
(registered by :mod:`pypto.tile.matmul`)."""

GROUP_WINDOWS: list[Callable[[Lowering, list[Eqn], list[Eqn]], list[Eqn]]] = []
"""``rule(lw, group, layout)``: which of the ``layout`` equations waiting before a group —
transposes only it reads, slices and concatenations it reads through each other — its group
rule would read through DMA windows of their operands instead of running them as kernels
(attention's head splits, a matmul's transposed or head-split operands, a concatenation of
row windows as a matmul's A; registered by :mod:`pypto.tile.attention` and
:mod:`pypto.tile.matmul`). The rule that takes the group then finds them in ``lw.windows``
and must read each one so."""


def lower_split(lw: Lowering, eqns: Sequence[Eqn], pre: Sequence[Eqn] = ()) -> None:
    """A group that is not one row kernel: one kernel by a group rule that takes it (reading
    the transposes ``pre`` through windows), else its equations as the longest runs that fit
    one row kernel, the others on their own."""
    lw.windows = {e.out: e for e in pre}
    try:
        for rule in GROUP_RULES:
            if rule(lw, list(eqns)):
                return
    finally:
        lw.windows = {}
    for e in pre:
        lower_single(lw, e)
    # the rest as row kernels where runs of them fit one (a matmul's epilogue that its kernel
    # could not take is still one kernel), else equation by equation
    rest = list(eqns)
    while rest:
        for n in range(len(rest), 1, -1):
            plan = plan_row(lw, rest[:n], used_outside(lw.func, rest[:n]))
            if plan is not None and _merges(lw, plan):
                with at_location(rest[n - 1].loc):
                    name = "_".join(dict.fromkeys(e.op for e in rest[:n]))
                    lower_row_kernel(lw, plan, lw.fresh(name), rest[n - 1].loc)
                del rest[:n]
                break
        else:
            lower_single(lw, rest.pop(0))


def _reshape(lw: Lowering, e: Eqn) -> None:
    # A reshape moves no data: the result is a view of its operand's buffer; kernels that
    # read it reinterpret the layout (``window``) or copy it when they cannot (``relayout``).
    src = e.inputs[0]
    if isinstance(src, Var):
        lw.var_buf[e.out] = lw.buffer(src)
    else:
        lw.var_buf[e.out] = lw.const_buffer("lit", np.asarray(src.value).reshape(1, 1))


register_rule("tile", "reshape")(KernelRule(_reshape))


def lower_single(lw: Lowering, e: Eqn) -> None:
    rule = OPS[e.op].rules.get("tile")
    if isinstance(rule, KernelRule):
        rule.fn(lw, e)
        return
    if isinstance(rule, RowRule):
        plan = plan_row(lw, [e], {e.out})
        if plan is not None:
            lower_row_kernel(lw, plan, lw.fresh(e.op), e.loc)
            return
        general = OPS[e.op].rules.get("tile_general")
        if general is not None:
            general(lw, e)
            return
    raise TileError(
        f"no tile lowering for {e.op} on "
        + ", ".join(str(a.aval) for a in e.inputs)
        + f" -> {e.out.aval}",
        op=e.op,
        loc=e.loc,
        hint="run it with pto.jit(fn, backend='interpret') meanwhile",
    )
