"""What each instruction does to the bytes: numpy over views of the buffers, per instruction.

For every static instruction this builds two closures once per run:

* ``exec(core, item)`` performs the instruction on the byte arrays (functional mode), keeping
  the numerics contract: float16/bfloat16 math is done in float32 and rounded once; the cube
  accumulates in float32 (int32 for int8) through BLAS. A chain of TMATMUL/TMATMUL_ACC into one
  L0C tile is multiplied out in one BLAS call over its whole K when the fixpipe reads that tile
  (or another matmul overlaps it), so a K loop costs one large matmul, not many small ones;
* ``access(core, item)`` lists the memory ranges it reads and writes, for race detection:
  ``(key, r0, r1, c0, c1, is_write)``; on-chip ranges are byte ranges ``[r0, r1)`` with
  ``c0, c1 = 0, 1``, GM ranges are element rectangles of one tensor's 2-D view.

**Provenance.** A matmul needs its fp16/bf16 (int8) operands widened to float32 (int32). The
bytes that reach L0A/L0B are usually a GM input's bytes moved unchanged (TLOAD to L1, TEXTRACT
to L0A/L0B), and the same GM tile reaches many output tiles, so widening them at every matmul
repeats the same conversion. Each core therefore keeps, next to its L1/L0A/L0B bytes, *tags*:
``addr -> (tensor, row, col, rows, cols, nbytes)`` saying that the tile at ``addr`` holds exactly
that window of a GM tensor no instruction of the run writes (an ``in`` tensor). TLOAD sets a
tag, TEXTRACT carries it to the sub-window, and every other write to those buffers (or a
TLOAD with a conversion) drops the tags it overlaps. A matmul whose operand is tagged reads
the window of the tensor widened once per run (:class:`Widened`), which equals widening the
tile's bytes, and a chain whose tags are adjacent windows is one slice: no copy, no
concatenation. Untagged operands are copied and widened as before. The bytes still move
through every buffer; the tags only say where equal bytes can be found already widened.

``item`` is the tuple the front end queued: ``(sid, issue, *expression values)`` with the
values in operand order (tile address; GM row, column; other expressions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import SimulationError
from pypto.isa.ir import Cond, Expr, GmRef, Instr, Space, Tile
from pypto.isa.opcodes import BINARY, GM_STORES, REDUCTIONS, TILE_SCALAR, UNARY
from pypto.npu.compile import Compiled
from pypto.ops.elementwise import bit_shift, float_power
from pypto.ops.sorting import total_order_key

__all__ = ["SPACE_NO", "Widened", "build_access", "build_exec", "flush_l0c", "to_dtype", "untag"]

SPACE_NO: dict[Space, int] = {Space.L1: 0, Space.L0A: 1, Space.L0B: 2, Space.L0C: 3, Space.UB: 4}
F32 = np.dtype(np.float32)

Exec = Callable[[Any, tuple[Any, ...]], None]
Access = Callable[[Any, tuple[Any, ...]], list[tuple[int, int, int, int, int, bool]]]


def _wide(x: np.ndarray) -> np.ndarray:
    """float32 for float math (float16/bfloat16 are computed in float32 and rounded)."""
    return x.astype(F32) if x.dtype.kind == "f" or x.dtype == dt.bfloat16.np else x


def to_dtype(x: np.ndarray, d: np.dtype[Any]) -> np.ndarray:
    """Convert with the numerics contract: round to nearest even between floats; float → int
    truncates toward zero, saturates and maps NaN to 0; anything → bool is ``!= 0``."""
    if d == np.bool_:
        return x != 0
    if d.kind in "iu" and x.dtype.kind not in "iub":
        info = np.iinfo(d)
        y = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0))
        return np.clip(y, info.min, info.max).astype(d)
    return x.astype(d)


def _gelu(x: np.ndarray) -> np.ndarray:
    c = np.float32(0.7978845608028654)
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(c * (x + np.float32(0.044715) * x**3)))


_UNARY_FN: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "TEXP": np.exp,
    "TLOG": np.log,
    "TSQRT": np.sqrt,
    "TRSQRT": lambda x: np.float32(1.0) / np.sqrt(x),
    "TRECIP": lambda x: np.float32(1.0) / x,
    "TABS": np.abs,
    "TNEG": np.negative,
    "TRELU": lambda x: np.maximum(x, x.dtype.type(0)),
    "TTANH": np.tanh,
    "TSIGMOID": lambda x: np.float32(1.0) / (np.float32(1.0) + np.exp(-x)),
    "TSIN": np.sin,
    "TCOS": np.cos,
    "TGELU": _gelu,
    "TNOT": np.invert,
}


def fmod_values(x: np.ndarray, y: Any) -> np.ndarray:
    """C's fmod; pto-isa leaves an integer divisor of 0 to the target: 0 here, as
    ``jnp.fmod`` gives."""
    if x.dtype.kind == "i":
        y = np.asarray(y)
        return np.fmod(x, np.where(y == 0, np.ones((), y.dtype), y))
    return np.fmod(x, y)


_BINARY_FN: dict[str, Callable[[np.ndarray, Any], np.ndarray]] = {
    "TADD": np.add,
    "TSUB": np.subtract,
    "TMUL": np.multiply,
    "TDIV": np.divide,
    "TMAX": np.maximum,
    "TMIN": np.minimum,
    "TPOW": float_power,
    "TFMOD": fmod_values,
    "TAND": np.bitwise_and,
    "TOR": np.bitwise_or,
    "TXOR": np.bitwise_xor,
    "TSHL": bit_shift(True),
    "TSHR": bit_shift(False),
}
_CMP_FN: dict[Cond, Callable[[Any, Any], np.ndarray]] = {
    Cond.EQ: np.equal,
    Cond.NE: np.not_equal,
    Cond.LT: np.less,
    Cond.LE: np.less_equal,
    Cond.GT: np.greater,
    Cond.GE: np.greater_equal,
}


Tag = tuple[int, int, int, int, int, int, Any]
"""``(tensor, row, col, rows, cols, nbytes, dtype)``: the tile holds that window of a GM tensor."""
TAGGED = (SPACE_NO[Space.L1], SPACE_NO[Space.L0A], SPACE_NO[Space.L0B])
"""The buffers whose tiles carry provenance tags (the matmul operands' path)."""


class Widened:
    """The GM tensors no instruction writes, each widened once (float32, or int32 for int8) on
    first use: a tagged matmul operand is a window of one of these."""

    def __init__(self, gm2d: list[np.ndarray], immutable: frozenset[int]) -> None:
        self.gm2d = gm2d
        self.immutable = immutable
        self._cache: dict[tuple[int, Any], np.ndarray] = {}

    def get(self, tensor: int, wide: np.dtype[Any]) -> np.ndarray:
        key = (tensor, wide)
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = self.gm2d[tensor].astype(wide)
        return v


def untag(tags: dict[int, Tag], lo: int, hi: int) -> None:
    """Drop the tags of tiles overlapping bytes [lo, hi) (they are being overwritten)."""
    if tags:
        for a in [a for a, t in tags.items() if a < hi and lo < a + t[5]]:
            del tags[a]


Operand = Any
"""A matmul operand kept in a chain: a copy of the tile (its own dtype), or for a tagged tile
``(tensor, row, col, rows, cols, widened tensor)``."""


class _Chain:
    """Matmuls accumulating into one L0C tile, not yet multiplied: the accumulator equals
    (0 if ``fresh`` else its bytes) + concat(a, axis=1) @ concat(b, axis=0), in float32."""

    __slots__ = ("a", "b", "fresh", "nbytes", "shape", "wide")

    def __init__(
        self,
        shape: tuple[int, int],
        nbytes: int,
        fresh: bool,
        wide: np.dtype[Any],
        a: list[Operand],
        b: list[Operand],
    ) -> None:
        self.shape = shape
        self.nbytes = nbytes
        self.fresh = fresh
        self.wide = wide
        self.a = a
        self.b = b


def _widen(parts: list[Operand], axis: int, wide: np.dtype[Any]) -> np.ndarray:
    """The concatenation of a chain's operands along ``axis``, widened. Tagged windows of one
    tensor that continue each other along ``axis`` are one slice of the widened tensor."""
    first = parts[0]
    if type(first) is tuple:
        _, r, c, R, C, full = first
        for p in parts[1:]:
            if type(p) is not tuple or p[5] is not full:
                break
            if axis == 1 and p[1] == r and p[3] == R and p[2] == c + C:
                C += p[4]
            elif axis == 0 and p[2] == c and p[4] == C and p[1] == r + R:
                R += p[3]
            else:
                break
        else:
            return full[r : r + R, c : c + C]
    xs = [
        p[5][p[1] : p[1] + p[3], p[2] : p[2] + p[4]] if type(p) is tuple else p.astype(wide)
        for p in parts
    ]
    return xs[0] if len(xs) == 1 else np.concatenate(xs, axis=axis)


def flush_l0c(core: Any, lo: int, hi: int, drop: tuple[int, tuple[int, int]] | None = None) -> None:
    """Multiply out every pending chain overlapping L0C bytes [lo, hi) — one BLAS call per
    chain over its whole K. ``drop`` names a chain about to be overwritten (discarded)."""
    pending = core.pending
    for addr in [k for k, ch in pending.items() if k < hi and lo < k + ch.nbytes]:
        ch = pending.pop(addr)
        if drop == (addr, ch.shape):
            continue
        a = _widen(ch.a, 1, ch.wide)
        b = _widen(ch.b, 0, ch.wide)
        out = core.mem[SPACE_NO[Space.L0C]][addr : addr + ch.nbytes].view(ch.wide)
        out = out.reshape(ch.shape)
        if ch.fresh:
            np.matmul(a, b, out=out)
        else:
            out += np.matmul(a, b)


def _tile_slots(ins: Instr) -> list[tuple[Tile, int]]:
    """Each tile operand with the item index of its address."""
    out: list[tuple[Tile, int]] = []
    slot = 2
    for a in ins.args:
        if isinstance(a, Tile):
            out.append((a, slot))
            slot += 1
        elif isinstance(a, GmRef):
            slot += 2
        elif isinstance(a, Expr):
            slot += 1
    return out


def _viewer(t: Tile, slot: int) -> Callable[[Any, tuple[Any, ...]], np.ndarray]:
    """A function giving the numpy view of tile ``t`` for one queued item (views are cached
    per core and address: a run reuses a few addresses many times)."""
    sp = SPACE_NO[t.space]
    nb = t.nbytes
    npd = t.dtype.np
    shape = t.shape
    peer = t.peer
    cache: dict[tuple[int, int], np.ndarray] = {}

    def view(core: Any, item: tuple[Any, ...]) -> np.ndarray:
        a = item[slot]
        key = (core.idx, a)
        v = cache.get(key)
        if v is None:
            owner = core if peer is None else core.peers[peer]
            v = cache[key] = owner.mem[sp][a : a + nb].view(npd).reshape(shape)
        return v

    return view


def build_exec(
    cp: Compiled, sid: int, gm2d: list[np.ndarray], widened: Widened | None = None
) -> Exec | None:
    """The functional effect of instruction ``sid`` (None for pure synchronisation).
    ``widened`` enables the provenance tags (see the module doc)."""
    ex = _build_exec(cp, sid, gm2d, widened)
    ins = cp.instrs[sid]
    if ex is None or widened is None or ins.op in ("TLOAD", "TEXTRACT") or ins.op in GM_STORES:
        return ex  # no effect, no tags, or the instruction keeps the tags itself
    dst, slot = _tile_slots(ins)[0]
    sp = SPACE_NO[dst.space]
    if sp not in TAGGED:
        return ex
    nb, peer = dst.nbytes, dst.peer

    def tracked(core: Any, item: tuple[Any, ...]) -> None:
        ex(core, item)
        owner = core if peer is None else core.peers[peer]
        a = item[slot]
        untag(owner.tags[sp], a, a + nb)

    return tracked


def _build_exec(
    cp: Compiled, sid: int, gm2d: list[np.ndarray], widened: Widened | None
) -> Exec | None:
    ins = cp.instrs[sid]
    op = ins.op
    ts = _tile_slots(ins)
    if not ts or op == "SLD":
        # scalar, branch and synchronisation instructions touch no memory; SLD's read is the
        # front end's own (``peek`` in the simulator)
        return None
    if op == "TLOAD" or op in GM_STORES:
        info = cp.dma[sid]
        assert info is not None
        ((tile, t_slot),) = ts
        v = _viewer(*ts[0])
        g = gm2d[info.tensor]
        R, C = tile.shape
        rs = info.gm_slot
        t_nb = tile.nbytes
        if op == "TLOAD":
            sp = SPACE_NO[tile.space]
            if widened is None or sp not in TAGGED:

                def load(core: Any, item: tuple[Any, ...]) -> None:
                    r, c = item[rs], item[rs + 1]
                    np.copyto(v(core, item), g[r : r + R, c : c + C])

                return load
            ti = info.tensor
            npd = tile.dtype.np
            keep = ti in widened.immutable and npd == g.dtype

            def load_tagged(core: Any, item: tuple[Any, ...]) -> None:
                r, c = item[rs], item[rs + 1]
                np.copyto(v(core, item), g[r : r + R, c : c + C])
                a = item[t_slot]
                tags = core.tags[sp]
                untag(tags, a, a + t_nb)
                if keep:
                    tags[a] = (ti, r, c, R, C, t_nb, npd)

            return load_tagged
        gdt = g.dtype
        from_l0c = tile.space is Space.L0C
        # the fixpipe's scale multiplies in f32 before the cast rounds (one rounding)
        scale = np.float32(ins.args[2]) if op == "TSTORE_S" else None  # type: ignore[arg-type]

        def store(core: Any, item: tuple[Any, ...]) -> None:
            r, c = item[rs], item[rs + 1]
            if from_l0c and core.pending:
                flush_l0c(core, item[t_slot], item[t_slot] + t_nb)
            src = v(core, item)
            dst = g[r : r + R, c : c + C]
            if scale is not None:
                dst[...] = to_dtype(src * scale, gdt)
            elif src.dtype == gdt:
                np.copyto(dst, src)
            else:
                dst[...] = to_dtype(src, gdt)

        return store
    views = [_viewer(t, s) for t, s in ts]
    tiles = [t for t, _ in ts]
    if op in ("TMATMUL", "TMATMUL_ACC"):
        _, va, vb = views
        c_tile, c_slot = ts[0]
        wide = np.dtype(np.int32) if tiles[1].dtype is dt.int8 else F32
        acc = op == "TMATMUL_ACC"
        nb, shape = c_tile.nbytes, c_tile.shape
        operand_a = _operand(ts[1], va, wide, widened)
        operand_b = _operand(ts[2], vb, wide, widened)

        def matmul(core: Any, item: tuple[Any, ...]) -> None:
            # Keep the operands (L0A/L0B are reused at once); multiply when L0C is read.
            addr = item[c_slot]
            a, b = operand_a(core, item), operand_b(core, item)
            chain = core.pending.get(addr)
            if acc and chain is not None and chain.shape == shape:
                chain.a.append(a)
                chain.b.append(b)
                return
            flush_l0c(core, addr, addr + nb, drop=None if acc else (addr, shape))
            core.pending[addr] = _Chain(shape, nb, not acc, wide, [a], [b])

        return matmul
    if op in ("TMOV", "TCVT"):
        vd, vs = views
        dd = tiles[0].dtype.np
        from_l0c = tiles[1].space is Space.L0C
        s_slot, s_nb = ts[1][1], tiles[1].nbytes

        def mov(core: Any, item: tuple[Any, ...]) -> None:
            if from_l0c and core.pending:
                flush_l0c(core, item[s_slot], item[s_slot] + s_nb)
            s = vs(core, item)
            d = vd(core, item)
            d[...] = s if s.dtype == dd else to_dtype(s, dd)

        return mov
    if op == "TBITCAST":
        vd, vs = views
        dd = tiles[0].dtype.np

        def bitcast(core: Any, item: tuple[Any, ...]) -> None:
            vd(core, item)[...] = vs(core, item).view(dd)

        return bitcast
    if op == "TEXTRACT_T":
        vd, vs = views
        R, C = ts[0][0].shape
        r_slot, c_slot = ts[1][1] + 1, ts[1][1] + 2

        def extract_t(core: Any, item: tuple[Any, ...]) -> None:
            r, c = item[r_slot], item[c_slot]
            np.copyto(vd(core, item), vs(core, item)[r : r + C, c : c + R].T)

        return extract_t
    if op == "TEXTRACT":
        vd, vs = views
        (dst, d_slot), (src, s_slot) = ts
        R, C = dst.shape
        r_slot, c_slot = s_slot + 1, s_slot + 2
        d_sp, s_sp = SPACE_NO[dst.space], SPACE_NO[src.space]
        if widened is None or d_sp not in TAGGED:

            def extract(core: Any, item: tuple[Any, ...]) -> None:
                r, c = item[r_slot], item[c_slot]
                np.copyto(vd(core, item), vs(core, item)[r : r + R, c : c + C])

            return extract
        d_nb, s_nb, s_shape, npd = dst.nbytes, src.nbytes, src.shape, src.dtype.np

        def extract_tagged(core: Any, item: tuple[Any, ...]) -> None:
            r, c = item[r_slot], item[c_slot]
            np.copyto(vd(core, item), vs(core, item)[r : r + R, c : c + C])
            a = item[d_slot]
            tags = core.tags[d_sp]
            untag(tags, a, a + d_nb)
            t = core.tags[s_sp].get(item[s_slot]) if s_sp in TAGGED else None
            if t is not None and t[5] == s_nb and t[6] == npd and (t[3], t[4]) == s_shape:
                tags[a] = (t[0], t[1] + r, t[2] + c, R, C, d_nb, npd)

        return extract_tagged
    return _vector_exec(ins, tiles, views, lambda: cp.where(sid))


def _operand(
    ts: tuple[Tile, int], view: Any, wide: np.dtype[Any], widened: Widened | None
) -> Callable[[Any, tuple[Any, ...]], Operand]:
    """What a matmul keeps of one operand: its tag's window when the tile is tagged, else a
    copy of its bytes."""
    tile, slot = ts
    if widened is None or tile.peer is not None or SPACE_NO[tile.space] not in TAGGED:

        def copy(core: Any, item: tuple[Any, ...]) -> Operand:
            return view(core, item).copy()

        return copy
    sp, nb, shape, npd = SPACE_NO[tile.space], tile.nbytes, tile.shape, tile.dtype.np

    def operand(core: Any, item: tuple[Any, ...]) -> Operand:
        t = core.tags[sp].get(item[slot])
        if t is not None and t[5] == nb and t[6] == npd and (t[3], t[4]) == shape:
            return (t[0], t[1], t[2], t[3], t[4], widened.get(t[0], wide))
        return view(core, item).copy()

    return operand


def _put_structs(d: np.ndarray, vals: np.ndarray, ids: np.ndarray, per: int) -> None:
    """Write 8-byte (value, index) structures: an f32 value and its index, or an f16 value, two
    zero bytes and its index (pto-isa's layout for sorted half values)."""
    words = d.view(np.uint32)
    if per == 2:
        words[:, 0::2] = vals.view(np.uint32)
    else:
        words[:, 0::2] = vals.view(np.uint16)
    words[:, 1::2] = ids.view(np.uint32)


def _get_structs(s: np.ndarray, per: int) -> tuple[np.ndarray, np.ndarray]:
    words = s.view(np.uint32)
    vals = words[:, 0::2] if per == 2 else words[:, 0::2].astype(np.uint16)
    return vals.view(s.dtype), words[:, 1::2].view(np.int32)


def _vector_exec(ins: Instr, tiles: list[Tile], views: list[Any], where: Callable[[], str]) -> Exec:
    """``where`` describes the instruction for an error (formatted only when one is raised)."""
    op = ins.op
    vd = views[0]
    dd = tiles[0].dtype.np
    is_float = tiles[0].dtype.is_floating

    def put(d: np.ndarray, res: np.ndarray) -> None:
        d[...] = res if res.dtype == dd else to_dtype(res, dd)

    if op in UNARY:
        fn = _UNARY_FN[op]
        vs = views[1]

        def unary(core: Any, item: tuple[Any, ...]) -> None:
            put(vd(core, item), fn(_wide(vs(core, item))))

        return unary
    if op in BINARY:
        fb = _BINARY_FN[op]
        va, vb = views[1], views[2]

        def binary(core: Any, item: tuple[Any, ...]) -> None:
            put(vd(core, item), fb(_wide(va(core, item)), _wide(vb(core, item))))

        return binary
    if op in TILE_SCALAR:
        fs = _BINARY_FN[op[:-1]]
        raw = ins.args[2]
        assert isinstance(raw, float)
        # The scalar takes the tile's dtype first (a weak scalar, as in JAX).
        s = np.asarray(raw).astype(dd).astype(F32) if is_float else to_dtype(np.asarray(raw), dd)
        va = views[1]

        def scalar(core: Any, item: tuple[Any, ...]) -> None:
            put(vd(core, item), fs(_wide(va(core, item)), s))

        return scalar
    if op in ("TCMP", "TCMPS"):
        cond = ins.args[-1]
        assert isinstance(cond, Cond)
        fc = _CMP_FN[cond]
        va = views[1]
        if op == "TCMP":
            vb = views[2]

            def cmp(core: Any, item: tuple[Any, ...]) -> None:
                vd(core, item)[...] = fc(_wide(va(core, item)), _wide(vb(core, item)))

            return cmp
        raw = ins.args[2]
        assert isinstance(raw, float)
        sdt = tiles[1].dtype.np
        sc = _wide(np.asarray(raw).astype(sdt)) if tiles[1].dtype.is_floating else raw

        def cmps(core: Any, item: tuple[Any, ...]) -> None:
            vd(core, item)[...] = fc(_wide(va(core, item)), sc)

        return cmps
    if op == "TSEL":
        vm, va, vb = views[1:]

        def sel(core: Any, item: tuple[Any, ...]) -> None:
            vd(core, item)[...] = np.where(vm(core, item), va(core, item), vb(core, item))

        return sel
    if op == "TGATHER":
        vs, vi = views[1:]
        n = tiles[1].rows * tiles[1].cols

        def gather(core: Any, item: tuple[Any, ...]) -> None:
            idx = vi(core, item)
            if idx.size and (idx.min() < 0 or idx.max() >= n):
                bad = idx[(idx < 0) | (idx >= n)].flat[0]
                raise SimulationError(
                    f"{core.describe()}, pipe V, {where()}: index {bad} is outside the "
                    f"{n} elements of the source tile",
                    op="TGATHER",
                )
            np.take(vs(core, item).reshape(-1), idx, out=vd(core, item))

        return gather
    if op == "TSORT32":
        vs, vi = views[1:]
        per = 8 // tiles[0].dtype.itemsize

        def sort32(core: Any, item: tuple[Any, ...]) -> None:
            src, idx = vs(core, item), vi(core, item)
            r, c = src.shape
            blocks = src.reshape(r, c // 32, 32)
            order = np.argsort(~total_order_key(blocks), axis=-1, kind="stable")
            vals = np.take_along_axis(blocks, order, -1).reshape(r, c)
            ids = np.take_along_axis(idx.reshape(r, c // 32, 32), order, -1).reshape(r, c)
            _put_structs(vd(core, item), vals, ids, per)

        return sort32
    if op == "TMRGSORT2":
        v0, v1 = views[1:]
        per = 8 // tiles[0].dtype.itemsize

        def mrgsort2(core: Any, item: tuple[Any, ...]) -> None:
            a, ai = _get_structs(v0(core, item), per)
            b, bi = _get_structs(v1(core, item), per)
            vals, ids = np.concatenate([a, b], axis=1), np.concatenate([ai, bi], axis=1)
            order = np.argsort(~total_order_key(vals), axis=-1, kind="stable")
            _put_structs(
                vd(core, item),
                np.take_along_axis(vals, order, -1),
                np.take_along_axis(ids, order, -1),
                per,
            )

        return mrgsort2
    if op == "TMRGSORT":
        vs = views[1]
        per = 8 // tiles[0].dtype.itemsize
        run = ins.args[2]
        assert isinstance(run, int)

        def mrgsort(core: Any, item: tuple[Any, ...]) -> None:
            vals, ids = _get_structs(vs(core, item), per)
            _r, n = vals.shape
            out_v, out_i = np.empty_like(vals), np.empty_like(ids)
            # a merge of sorted runs, earlier runs first on ties, is the stable sort of the group
            for g in range(0, n, 4 * run):
                v = vals[:, g : g + 4 * run]
                order = np.argsort(~total_order_key(v), axis=-1, kind="stable")
                out_v[:, g : g + 4 * run] = np.take_along_axis(v, order, -1)
                out_i[:, g : g + 4 * run] = np.take_along_axis(ids[:, g : g + 4 * run], order, -1)
            _put_structs(vd(core, item), out_v, out_i, per)

        return mrgsort
    if op == "TEXPANDS":
        raw = ins.args[1]
        assert isinstance(raw, float)
        fill = to_dtype(np.asarray(raw, dtype=np.float64), np.dtype(dd))

        def expands(core: Any, item: tuple[Any, ...]) -> None:
            vd(core, item)[...] = fill

        return expands
    if op in REDUCTIONS:
        kind, axis = REDUCTIONS[op]
        vs = views[1]
        red: Any = {"sum": np.sum, "max": np.max, "min": np.min}[kind]

        def reduce(core: Any, item: tuple[Any, ...]) -> None:
            put(vd(core, item), red(_wide(vs(core, item)), axis=axis, keepdims=True))

        return reduce
    if op in ("TROWEXPAND", "TCOLEXPAND"):
        vs = views[1]

        def expand(core: Any, item: tuple[Any, ...]) -> None:
            d = vd(core, item)
            d[...] = np.broadcast_to(vs(core, item), d.shape)

        return expand
    assert op == "TTRANS", op
    vs = views[1]

    def trans(core: Any, item: tuple[Any, ...]) -> None:
        vd(core, item)[...] = vs(core, item).T

    return trans


def build_access(cp: Compiled, sid: int) -> Access | None:
    """The ranges instruction ``sid`` reads and writes (None when it touches no memory)."""
    ins = cp.instrs[sid]
    op = ins.op
    ts = _tile_slots(ins)
    if not ts or op == "SLD":  # SLD's read is checked by the front end (``peek``)
        return None
    Range = tuple[int, int, int, int, int, bool]
    simple: list[tuple[int, int, int, bool]] = []
    """(space, slot, nbytes, write) of whole tiles of the core itself: one comprehension"""
    parts: list[Callable[[Any, tuple[Any, ...]], Range]] = []

    def tile_part(t: Tile, slot: int, write: bool, window: tuple[int, int] | None = None) -> None:
        sp = SPACE_NO[t.space]
        nb = t.nbytes
        peer = t.peer
        isz = t.dtype.itemsize
        if window is None and peer is None:
            simple.append((sp, slot, nb, write))
            return
        if window is None:

            def part(core: Any, item: tuple[Any, ...]) -> Range:
                c = core.peers[peer]
                a = item[slot]
                return (c.idx * 8 + sp, a, a + nb, 0, 1, write)

        else:
            R, C = window

            def part(core: Any, item: tuple[Any, ...]) -> Range:
                # A sub-window at (row, col) = the next two item values: its bounding byte range.
                a = item[slot] + (item[slot + 1] * t.cols + item[slot + 2]) * isz
                return (core.idx * 8 + sp, a, a + ((R - 1) * t.cols + C) * isz, 0, 1, write)

        parts.append(part)

    if op == "TLOAD" or op in GM_STORES:
        info = cp.dma[sid]
        assert info is not None
        ((tile, slot),) = ts
        tile_part(tile, slot, op == "TLOAD")
        if info.tensor in cp.written_tensors:
            key = -1 - info.tensor
            R, C = tile.shape
            rs = info.gm_slot
            w = op != "TLOAD"

            def gm_part(core: Any, item: tuple[Any, ...]) -> Range:
                r, c = item[rs], item[rs + 1]
                return (key, r, r + R, c, c + C, w)

            parts.append(gm_part)
    elif op in ("TEXTRACT", "TEXTRACT_T"):
        (dst, ds), (src, ss) = ts
        tile_part(dst, ds, True)
        tile_part(src, ss, False, window=dst.shape if op == "TEXTRACT" else dst.shape[::-1])
    else:
        for i, (t, s) in enumerate(ts):
            tile_part(t, s, i == 0)
        if op == "TMATMUL_ACC":
            tile_part(ts[0][0], ts[0][1], False)
    specs = tuple(simple)

    if not parts:

        def access_simple(core: Any, item: tuple[Any, ...]) -> list[Range]:
            base = core.idx * 8
            return [(base + sp, item[s], item[s] + nb, 0, 1, w) for sp, s, nb, w in specs]

        return access_simple

    def access(core: Any, item: tuple[Any, ...]) -> list[Range]:
        base = core.idx * 8
        out = [(base + sp, item[s], item[s] + nb, 0, 1, w) for sp, s, nb, w in specs]
        for p in parts:
            out.append(p(core, item))
        return out

    return access
