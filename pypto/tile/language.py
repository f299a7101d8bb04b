"""Hand-written tile kernels: ``@pto.kernel`` and the tile language of ``pto.tile``.

A kernel is a Python function over tiles. It receives one :class:`Ref` per input tensor and
one for its output, and its body loads tiles from them, computes on tiles and stores tiles
back, once per point of its ``grid``::

    @pto.kernel(grid=lambda x: (x.shape[0] // 64,), out=lambda x: x)
    def double(x, o):
        i = pto.tile.program_id(0)
        t = pto.tile.load(x, (i * 64, 0), (64, x.shape[1]))
        pto.tile.store(o, (i * 64, 0), t * 2.0)

The same body runs two ways:

* **interpret mode** (eagerly, and in ``pto.jit(..., backend="interpret")``): the body runs
  once per grid point on numpy tiles, like Triton's interpreter or Pallas' ``interpret=True``.
  ``print`` works, tiles are numpy arrays underneath, and a window outside a tensor is a
  :class:`~pypto.TileError` naming the grid point and the line;
* **compiled** (inside ``pto.jit``): the body is traced once, with the program ids and loop
  counters as registers, into one Tile IR kernel that enters the pipeline next to the kernels
  lowered from tensor ops, then goes through the Block level (buffers, double buffering,
  flags) to the ISA and the simulated NPU.

Tiles live in named memory spaces: ``UB`` (the vector cores; the default), ``L1``, ``L0A``,
``L0B`` (cube operands) and ``L0C`` (what :func:`matmul` produces). Arithmetic runs on the
vector cores and matmul on the cube core. A kernel that uses both runs on clusters (one cube
core and two vector cores, MPMD): where a vector op reads an ``L0C`` result, or the cube reads
a ``UB`` tile, the value is handed over through a GM workspace ring with cross-core flags, and
the two vector cores each take half the rows of the handed-over tiles. Interpret mode computes
each instruction with the simulator's numerics, so both modes agree (summation order aside).

Loops are :func:`range`; in a compiled kernel they stay loops (code size does not grow with
the trip count). A value carried from one iteration to the next is updated in place
(``acc[...] = ...``, ``acc += ...`` or ``matmul(..., acc=acc)``); a tile made inside a loop
cannot be used after it.

>>> import numpy as np, pypto as pto
>>> @pto.kernel(grid=(2,), out=pto.ShapeDtype((16, 8), pto.float32))
... def rowsum(x, o):
...     i = pto.tile.program_id(0)
...     t = pto.tile.load(x, (i * 8, 0), (8, 32))
...     pto.tile.store(o, (i * 8, 0), t.sum(axis=1) + t[:, :8])
>>> x = np.ones((16, 32), np.float32)
>>> rowsum(x).numpy()[0, :3]
array([33., 33., 33.], dtype=float32)
>>> f = pto.jit(lambda x: rowsum(x) * 2, machine="tiny")
>>> f(x).numpy()[0, :3]
array([66., 66., 66.], dtype=float32)
"""

from __future__ import annotations

import builtins
import functools
import inspect
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core import dispatch
from pypto.core.errors import DTypeError, PyptoError, ShapeError, SourceLoc, TileError, TraceError
from pypto.core.errors import user_location as _user_location
from pypto.graph.ir import Eqn, Var
from pypto.isa.ir import Cond, Expr, Space
from pypto.isa.opcodes import BINARY, REDUCTIONS, UNARY
from pypto.npu.semantics import _BINARY_FN, _CMP_FN, _UNARY_FN, _wide, to_dtype
from pypto.ops import api
from pypto.ops.kernel_call import KERNELS
from pypto.ops.table import OPS, AVal, Cost, register_rule
from pypto.tile.ir import For, Kernel, Ring, Section, SOp, Stmt, TileVar, TLoad, TOp, TStore
from pypto.tile.lower import KernelRule, Lowering, relayout

__all__ = [
    "Index",
    "PtoKernel",
    "Ref",
    "ShapeDtype",
    "Tile",
    "abs",
    "cos",
    "exp",
    "extract",
    "full",
    "gather",
    "gelu",
    "kernel",
    "load",
    "log",
    "matmul",
    "max",
    "maximum",
    "min",
    "minimum",
    "num_programs",
    "program_id",
    "range",
    "reciprocal",
    "relu",
    "rsqrt",
    "sigmoid",
    "sin",
    "sqrt",
    "store",
    "sum",
    "tanh",
    "where",
    "zeros",
]

SPACES = {s.name: s for s in (Space.UB, Space.L1, Space.L0A, Space.L0B, Space.L0C)}
CUBE = (Space.L1, Space.L0A, Space.L0B, Space.L0C)
F32 = np.dtype(np.float32)


def _loc() -> SourceLoc | None:
    return _user_location(2)


@dataclass(frozen=True)
class ShapeDtype:
    """The shape and dtype of a kernel's output (like ``jax.ShapeDtypeStruct``)."""

    shape: tuple[int, ...]
    dtype: dt.DType

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))
        object.__setattr__(self, "dtype", dt.dtype(self.dtype))


# ---------------------------------------------------------------- the builders of both modes
class _Mode:
    """What a body's tile operations do: compute (interpret) or record (trace)."""

    name: str = ""
    file: str = ""
    grid: tuple[int, ...] = ()
    loc: SourceLoc | None = None

    @property
    def where(self) -> str:
        return ""

    def body_line(self) -> SourceLoc | None:
        """The line of the kernel's own source file that is running (the body, or a helper
        in the same file), even when that file is inside pypto."""
        f: Any = sys._getframe(2)
        while f is not None:
            if f.f_code.co_filename == self.file:
                return SourceLoc(self.file, f.f_lineno)
            f = f.f_back
        return None

    def fail(self, cls: type[PyptoError], msg: str, hint: str | None = None) -> PyptoError:
        return cls(f"{msg}{self.where}", op=f"kernel @{self.name}", loc=self.loc, hint=hint)

    # what each mode provides
    def pid(self, axis: int) -> Any:
        raise NotImplementedError

    def range(self, start: Any, stop: Any, step: int) -> Iterator[Any]:
        raise NotImplementedError

    def op(
        self,
        opcode: str,
        shape: tuple[int, int],
        d: dt.DType,
        space: Space,
        args: tuple[Any, ...],
        out: Tile | None = None,
    ) -> Tile:
        raise NotImplementedError

    def load(self, ref: Ref, row: Any, col: Any, shape: tuple[int, int], space: Space) -> Tile:
        raise NotImplementedError

    def store(self, ref: Ref, row: Any, col: Any, t: Tile) -> None:
        raise NotImplementedError

    def to_vector(self, t: Tile, dtype: dt.DType | None = None) -> Tile:
        raise NotImplementedError

    def to_cube(self, t: Tile, space: Space) -> Tile:
        raise NotImplementedError

    def move(self, t: Tile, space: Space) -> Tile:
        return self.to_vector(t) if space is Space.UB else self.to_cube(t, space)

    def assign(self, dst: Tile, value: Any) -> None:
        raise NotImplementedError


_MODE: list[_Mode] = []


def _mode(what: str) -> _Mode:
    if not _MODE:
        raise TraceError(
            f"pto.tile.{what} is only meaningful inside a @pto.kernel body",
            op=f"tile.{what}",
            hint="call it from a function decorated with @pto.kernel",
        )
    m = _MODE[-1]
    m.loc = m.body_line() or _user_location(3)
    return m


class Index:
    """A program id or loop counter of a compiled kernel: an integer register. Affine
    arithmetic (``+ - *`` by integers) stays symbolic; ``//`` and ``%`` become scalar
    instructions. Python control flow on it cannot be staged (use :func:`range`)."""

    __slots__ = ("expr", "tr")

    def __init__(self, expr: Expr, tr: _Trace) -> None:
        self.expr = expr
        self.tr = tr

    def _other(self, o: Any) -> Expr:
        if isinstance(o, Index):
            return o.expr
        if isinstance(o, int) and not isinstance(o, bool):
            return Expr.of(o)
        raise self.tr.fail(TraceError, f"an index cannot be combined with {o!r}")

    def __add__(self, o: Any) -> Index:
        return Index(self.expr + self._other(o), self.tr)

    __radd__ = __add__

    def __sub__(self, o: Any) -> Index:
        return Index(self.expr - self._other(o), self.tr)

    def __rsub__(self, o: Any) -> Index:
        return Index(self._other(o) - self.expr, self.tr)

    def __mul__(self, o: Any) -> Index:
        if isinstance(o, Index):
            raise self.tr.fail(
                TraceError, "a product of two indices is not affine", "multiply by an integer"
            )
        return Index(self.expr * int(o), self.tr)

    __rmul__ = __mul__

    def __floordiv__(self, o: int) -> Index:
        return self.tr.scalar("SDIV", self, o)

    def __mod__(self, o: int) -> Index:
        return self.tr.scalar("SMOD", self, o)

    def __bool__(self) -> bool:
        raise self.tr.fail(
            TraceError,
            "Python control flow on a program id or loop counter cannot be compiled",
            "loop with pto.tile.range(...) (its bounds may be indices); branch on static values",
        )

    def _compare(self, o: object) -> bool:
        # a comparison would be decided once at trace time: refuse it as control flow
        return self.__bool__()

    __index__ = __bool__
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _compare
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Index({self.expr})"


IndexLike = int | Index


def view2d(shape: tuple[int, ...]) -> tuple[int, int]:
    """The rows x columns a kernel sees of a tensor: the last axis is the columns."""
    cols = shape[-1] if shape else 1
    return (math.prod(shape) // cols if cols else 0, cols)


@dataclass(eq=False)
class Ref:
    """A GM tensor as a kernel body sees it: ``shape``, ``dtype``, and its rows x columns view
    (the last axis is the columns) that :func:`load` and :func:`store` address."""

    name: str
    shape: tuple[int, ...]
    dtype: dt.DType
    role: str  # "in" or "out"
    array: np.ndarray | None = None  # interpret mode: the data, as [rows, cols]
    written: np.ndarray | None = None  # interpret mode: which output elements were stored
    buffer: str = ""  # trace mode: the GM buffer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def view(self) -> tuple[int, int]:
        return view2d(self.shape)

    def __repr__(self) -> str:
        return f"Ref({self.name}: {self.dtype.short}{list(self.shape)})"


@dataclass(eq=False)
class Tile:
    """A tile: ``shape`` (rows, cols), ``dtype`` and memory ``space``. In interpret mode
    ``value`` holds its numbers (``print(t)`` shows them); in a compiled kernel ``var`` is its
    Tile IR buffer."""

    shape: tuple[int, int]
    dtype: dt.DType
    space: Space
    value: np.ndarray | None = None
    var: TileVar | None = None
    scope: tuple[int, ...] = ()

    # ---- arithmetic (vector cores)
    def __add__(self, o: Any) -> Tile:
        return _binary("TADD", self, o)

    def __radd__(self, o: Any) -> Tile:
        return _binary("TADD", o, self)

    def __sub__(self, o: Any) -> Tile:
        return _binary("TSUB", self, o)

    def __rsub__(self, o: Any) -> Tile:
        return _binary("TSUB", o, self)

    def __mul__(self, o: Any) -> Tile:
        return _binary("TMUL", self, o)

    def __rmul__(self, o: Any) -> Tile:
        return _binary("TMUL", o, self)

    def __truediv__(self, o: Any) -> Tile:
        return _binary("TDIV", self, o)

    def __rtruediv__(self, o: Any) -> Tile:
        return _binary("TDIV", o, self)

    def __pow__(self, o: Any) -> Tile:
        return _binary("TPOW", self, o)

    def __neg__(self) -> Tile:
        return _unary("TNEG", self)

    def __iadd__(self, o: Any) -> Tile:
        return _binary("TADD", self, o, out=self)

    def __isub__(self, o: Any) -> Tile:
        return _binary("TSUB", self, o, out=self)

    def __imul__(self, o: Any) -> Tile:
        return _binary("TMUL", self, o, out=self)

    def __itruediv__(self, o: Any) -> Tile:
        return _binary("TDIV", self, o, out=self)

    def __lt__(self, o: Any) -> Tile:
        return _compare(Cond.LT, self, o)

    def __le__(self, o: Any) -> Tile:
        return _compare(Cond.LE, self, o)

    def __gt__(self, o: Any) -> Tile:
        return _compare(Cond.GT, self, o)

    def __ge__(self, o: Any) -> Tile:
        return _compare(Cond.GE, self, o)

    def eq(self, o: Any) -> Tile:
        """Elementwise ``==`` (a bool tile; ``==`` itself compares tile objects)."""
        return _compare(Cond.EQ, self, o)

    def ne(self, o: Any) -> Tile:
        """Elementwise ``!=``."""
        return _compare(Cond.NE, self, o)

    __hash__ = object.__hash__

    def astype(self, dtype: Any) -> Tile:
        """The tile converted to ``dtype`` (an ``L0C`` result converts on its way out)."""
        return _astype(self, dt.dtype(dtype))

    def sum(self, axis: int) -> Tile:
        """Sum over ``axis`` (1: per row, giving ``[rows, 1]``; 0: per column)."""
        return _reduce("sum", self, axis)

    def max(self, axis: int) -> Tile:
        return _reduce("max", self, axis)

    def min(self, axis: int) -> Tile:
        return _reduce("min", self, axis)

    @property
    def T(self) -> Tile:
        """The transposed tile (vector cores)."""
        m = _mode("transpose")
        x = m.to_vector(self)
        return m.op("TTRANS", (x.shape[1], x.shape[0]), x.dtype, Space.UB, (x,))

    def to(self, space: str) -> Tile:
        """A copy in another memory space: ``"L1"`` hands a vector tile to the cube core,
        ``"UB"`` an ``L0C`` result to the vector cores."""
        return _mode("to").move(self, _space(space))

    def __getitem__(self, key: Any) -> Tile:
        """A static sub-tile ``t[r0:r1, c0:c1]`` (see :func:`extract`)."""
        m = _mode("extract")
        if not (isinstance(key, tuple) and len(key) == 2):
            raise m.fail(ShapeError, f"index a tile with two slices, got {key!r}")
        starts, shape = [], []
        for k, n in zip(key, self.shape, strict=True):
            if not isinstance(k, slice) or k.step not in (None, 1):
                raise m.fail(ShapeError, f"tile index {key!r} is not two unit-step slices")
            a, b, _ = k.indices(n)
            starts.append(a)
            shape.append(b - a)
        return extract(self, (starts[0], starts[1]), (shape[0], shape[1]))

    def __setitem__(self, key: Any, value: Any) -> None:
        """``t[...] = value`` overwrites the tile in place (a value carried across loop
        iterations)."""
        m = _mode("assign")
        if key is not Ellipsis:
            raise m.fail(ShapeError, "assign a whole tile with t[...] = value")
        m.assign(self, value)

    def __repr__(self) -> str:
        head = f"Tile({self.space} {self.dtype.short}[{self.shape[0]},{self.shape[1]}]"
        if self.value is not None:
            return head + ")\n" + np.array2string(self.value, threshold=64)
        return head + f" {self.var.ref if self.var else ''})"

    def __bool__(self) -> bool:
        raise _mode("bool").fail(
            TraceError,
            "a tile has no single truth value",
            "use pto.tile.where(mask, a, b) for an elementwise choice",
        )


def _space(s: str | Space) -> Space:
    if isinstance(s, Space):
        return s
    sp = SPACES.get(str(s).upper())
    if sp is None:
        raise TileError(
            f"unknown memory space {s!r}", op="tile", hint=f"use one of {', '.join(SPACES)}"
        )
    return sp


# ---------------------------------------------------------------- interpret mode
class _Interp(_Mode):
    """Runs tile ops at once on numpy, with the simulator's numerics."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.point: tuple[int, ...] = ()
        self.grid: tuple[int, ...] = ()

    @property
    def where(self) -> str:
        return f" (grid point {self.point} of {self.grid})" if self.grid else ""

    def pid(self, axis: int) -> int:
        return self.point[axis]

    def range(self, start: int, stop: int, step: int) -> Iterator[int]:
        return iter(builtins.range(start, stop, step))

    def new(self, shape: tuple[int, int], d: dt.DType, space: Space) -> Tile:
        return Tile(shape, d, space, np.zeros(shape, d.np))

    def op(
        self,
        opcode: str,
        shape: tuple[int, int],
        d: dt.DType,
        space: Space,
        args: tuple[Any, ...],
        out: Tile | None = None,
    ) -> Tile:
        res = out if out is not None else self.new(shape, d, space)
        assert res.value is not None
        vals = [a.value if isinstance(a, Tile) else a for a in args]
        if opcode == "TMATMUL_ACC":  # accumulates into its destination
            vals.append(res.value)
        res.value[...] = _compute(opcode, d, shape, vals)
        return res

    def load(self, ref: Ref, row: int, col: int, shape: tuple[int, int], space: Space) -> Tile:
        self._bounds("load", ref, row, col, shape)
        assert ref.array is not None
        t = self.new(shape, ref.dtype, space)
        assert t.value is not None
        t.value[...] = ref.array[row : row + shape[0], col : col + shape[1]]
        return t

    def store(self, ref: Ref, row: int, col: int, t: Tile) -> None:
        self._bounds("store", ref, row, col, t.shape)
        assert ref.array is not None and ref.written is not None and t.value is not None
        r, c = t.shape
        ref.array[row : row + r, col : col + c] = to_dtype(t.value, ref.dtype.np)
        ref.written[row : row + r, col : col + c] = True

    def _bounds(self, what: str, ref: Ref, row: int, col: int, shape: tuple[int, int]) -> None:
        rows, cols = ref.view
        if row < 0 or col < 0 or row + shape[0] > rows or col + shape[1] > cols:
            raise self.fail(
                TileError,
                f"{what} of a {list(shape)} tile at row {row}, column {col} of {ref.name} "
                f"(viewed as [{rows},{cols}]) reaches outside it",
                "check the index arithmetic against the grid and the tensor's shape",
            )

    def to_vector(self, t: Tile, dtype: dt.DType | None = None) -> Tile:
        if t.space is Space.UB and dtype in (None, t.dtype):
            return t
        _check_to_vector(self, t)
        d = dtype or t.dtype
        assert t.value is not None
        return Tile(t.shape, d, Space.UB, to_dtype(t.value, d.np).copy())

    def to_cube(self, t: Tile, space: Space) -> Tile:
        if t.space is space:
            return t
        _check_to_cube(self, t, space)
        assert t.value is not None
        return Tile(t.shape, t.dtype, space, t.value.copy())

    def assign(self, dst: Tile, value: Any) -> None:
        src = _check_assign(self, dst, value)
        assert dst.value is not None
        if isinstance(src, Tile):
            assert src.value is not None
            dst.value[...] = np.broadcast_to(src.value, dst.shape)
        else:
            dst.value[...] = to_dtype(np.asarray(src, np.float64), dst.dtype.np)


def _compute(opcode: str, d: dt.DType, shape: tuple[int, int], vals: list[Any]) -> np.ndarray:
    """One instruction's result, as the simulator computes it (npu.semantics)."""
    dd = d.np

    def put(res: np.ndarray) -> np.ndarray:
        return res if res.dtype == dd else to_dtype(res, dd)

    if opcode in UNARY:
        return put(_UNARY_FN[opcode](_wide(vals[0])))
    if opcode in BINARY:
        return put(_BINARY_FN[opcode](_wide(vals[0]), _wide(vals[1])))
    if opcode.endswith("S") and opcode[:-1] in BINARY:
        s = np.asarray(vals[1]).astype(dd)
        s = s.astype(F32) if d.is_floating else s
        return put(_BINARY_FN[opcode[:-1]](_wide(vals[0]), s))
    if opcode == "TCMP":
        return _CMP_FN[vals[2]](_wide(vals[0]), _wide(vals[1]))
    if opcode == "TCMPS":
        x = vals[0]
        s = np.asarray(vals[1]).astype(x.dtype)
        return _CMP_FN[vals[2]](_wide(x), _wide(s) if x.dtype.kind == "f" else vals[1])
    if opcode == "TSEL":
        return np.where(vals[0], vals[1], vals[2])
    if opcode == "TGATHER":
        return vals[0].reshape(-1)[vals[1]]
    if opcode == "TCVT" or opcode == "TMOV":
        return to_dtype(vals[0], dd)
    if opcode == "TEXPANDS":
        return np.broadcast_to(to_dtype(np.asarray(vals[0], np.float64), dd), shape)
    if opcode in REDUCTIONS:
        kind, axis = REDUCTIONS[opcode]
        red: Any = {"sum": np.sum, "max": np.max, "min": np.min}[kind]
        return put(red(_wide(vals[0]), axis=axis, keepdims=True))
    if opcode in ("TROWEXPAND", "TCOLEXPAND"):
        return np.broadcast_to(vals[0], shape)
    if opcode == "TTRANS":
        return vals[0].T
    if opcode == "TEXTRACT":
        x, r, c = vals
        return x[r : r + shape[0], c : c + shape[1]]
    if opcode in ("TMATMUL", "TMATMUL_ACC"):
        a, b = vals[0], vals[1]
        wide = np.int32 if a.dtype == np.int8 else np.float32
        prod = np.matmul(a.astype(wide), b.astype(wide))
        return prod + vals[2] if opcode == "TMATMUL_ACC" else prod
    raise AssertionError(opcode)


# ---------------------------------------------------------------- trace mode
@dataclass
class _Cross:
    """A value handed between the cube core and the vector cores through a GM ring:
    ``dst`` (in the consumer's space) gets ``src`` (in the producer's)."""

    src: TileVar
    dst: TileVar
    ring: int
    loc: SourceLoc | None


class _Trace(_Mode):
    """Records the body as one stream of Tile IR statements (both core types interleaved);
    :meth:`kernel` splits it into the cube and vector sections."""

    def __init__(self, name: str, grid: tuple[int, ...]) -> None:
        self.name = name
        self.grid = grid
        self.blocks: list[list[Any]] = [[]]
        self.scope: list[int] = []
        self.n_loops = 0
        self.names: dict[str, int] = {}
        self.version: dict[str, int] = {}
        self.crossed: dict[tuple[str, int, str, str, tuple[int, ...]], TileVar] = {}
        self.crossings: list[_Cross] = []
        self.reg_range: dict[str, tuple[int, int] | None] = {
            f"pid{i}": (0, n - 1) for i, n in enumerate(grid)
        }

    def fresh(self, hint: str) -> str:
        n = self.names.get(hint, 0)
        self.names[hint] = n + 1
        return f"{hint}{n}"

    def emit(self, s: Any) -> None:
        self.blocks[-1].append(s)

    def pid(self, axis: int) -> Index:
        return Index(Expr.reg(f"pid{axis}"), self)

    def range(self, start: IndexLike, stop: IndexLike, step: int) -> Iterator[Index]:
        reg = self.fresh("k")
        lo, hi = _expr(start), _expr(stop)
        a, b = self.bounds(lo), self.bounds(hi)
        self.reg_range[reg] = (a[0], b[1] - 1) if a and b else None
        self.n_loops += 1
        self.scope.append(self.n_loops)
        self.blocks.append([])
        yield Index(Expr.reg(reg), self)
        body = self.blocks.pop()
        self.scope.pop()
        self.emit(For(reg, lo, hi, step, tuple(body)))

    def bounds(self, e: Expr) -> tuple[int, int] | None:
        """The least and greatest value of ``e`` over the registers' known ranges."""
        lo = hi = e.const
        for r, c in e.terms:
            rng = self.reg_range.get(r)
            if rng is None:
                return None
            lo += c * (rng[0] if c > 0 else rng[1])
            hi += c * (rng[1] if c > 0 else rng[0])
        return lo, hi

    def var(self, hint: str, shape: tuple[int, int], d: dt.DType, space: Space) -> TileVar:
        return TileVar(self.fresh(hint), space, d, shape)

    def use(self, t: Tile) -> TileVar:
        assert t.var is not None
        if tuple(self.scope[: len(t.scope)]) != t.scope:
            raise self.fail(
                TraceError,
                f"{t.var} was made inside a pto.tile.range loop and is used after it",
                "to carry a value out of a loop, make the tile before the loop and update it "
                "in place: acc[...] = ..., acc += ... or matmul(..., acc=acc)",
            )
        return t.var

    def wrap(self, v: TileVar) -> Tile:
        return Tile(v.shape, v.dtype, v.space, var=v, scope=tuple(self.scope))

    def new(self, shape: tuple[int, int], d: dt.DType, space: Space) -> Tile:
        return self.wrap(self.var("t", shape, d, space))

    def op(
        self,
        opcode: str,
        shape: tuple[int, int],
        d: dt.DType,
        space: Space,
        args: tuple[Any, ...],
        out: Tile | None = None,
    ) -> Tile:
        ins = tuple(self.use(a) if isinstance(a, Tile) else _targ(a) for a in args)
        if out is not None:
            dst = self.use(out)
            self.version[dst.name] = self.version.get(dst.name, 0) + 1
            res = out
        else:
            dst = self.var(_HINT.get(opcode, "t"), shape, d, space)
            res = self.wrap(dst)
        self.emit(TOp(opcode, dst, ins, self.loc))
        return res

    def load(
        self, ref: Ref, row: IndexLike, col: IndexLike, shape: tuple[int, int], space: Space
    ) -> Tile:
        r, c = _expr(row), _expr(col)
        self._bounds("load", ref, r, c, shape)
        v = self.var("ld", shape, ref.dtype, space)
        self.emit(TLoad(v, ref.buffer, r, c, self.loc))
        return self.wrap(v)

    def store(self, ref: Ref, row: IndexLike, col: IndexLike, t: Tile) -> None:
        r, c = _expr(row), _expr(col)
        self._bounds("store", ref, r, c, t.shape)
        self.emit(TStore(ref.buffer, r, c, self.use(t), self.loc))

    def _bounds(self, what: str, ref: Ref, row: Expr, col: Expr, shape: tuple[int, int]) -> None:
        rows, cols = ref.view
        br, bc = self.bounds(row), self.bounds(col)
        if br is None or bc is None:
            return  # computed registers: the interpret mode checks those windows
        if br[0] < 0 or bc[0] < 0 or br[1] + shape[0] > rows or bc[1] + shape[1] > cols:
            raise self.fail(
                TileError,
                f"{what} of a {list(shape)} tile at row {row} (up to {br[1]}), column {col} "
                f"(up to {bc[1]}) of {ref.name} (viewed as [{rows},{cols}]) reaches outside it",
                "check the index arithmetic against the grid and the tensor's shape",
            )

    def to_vector(self, t: Tile, dtype: dt.DType | None = None) -> Tile:
        if t.space is Space.UB and dtype in (None, t.dtype):
            return t
        _check_to_vector(self, t)
        return self._cross(t, Space.UB, dtype or t.dtype)

    def to_cube(self, t: Tile, space: Space) -> Tile:
        if t.space is space:
            return t
        _check_to_cube(self, t, space)
        if t.space is Space.L1:  # L1 → L0A/L0B stays on the cube core
            return self.op("TMOV", t.shape, t.dtype, space, (t,))
        return self._cross(t, space, t.dtype)

    def _cross(self, t: Tile, space: Space, d: dt.DType) -> Tile:
        src = self.use(t)
        key = (src.name, self.version.get(src.name, 0), space.name, d.name, tuple(self.scope))
        hit = self.crossed.get(key)
        if hit is None:
            hit = self.var("x", t.shape, d, space)
            ring = len(self.crossings)
            self.crossings.append(_Cross(src, hit, ring, self.loc))
            self.emit(self.crossings[-1])
            self.crossed[key] = hit
        return self.wrap(hit)

    def assign(self, dst: Tile, value: Any) -> None:
        src = _check_assign(self, dst, value)
        if isinstance(src, Tile):
            src = self.to_vector(src, dst.dtype) if src.space is Space.L0C else src
            if src.shape != dst.shape:
                src = _expand(self, src, dst.shape)
            self.op("TMOV", dst.shape, dst.dtype, dst.space, (src,), out=dst)
        else:
            self.op("TEXPANDS", dst.shape, dst.dtype, dst.space, (float(src),), out=dst)

    def scalar(self, opcode: str, a: Index, b: int) -> Index:
        if not isinstance(b, int) or isinstance(b, bool) or b <= 0:
            raise self.fail(TraceError, f"an index divided by {b!r}", "divide by a positive int")
        reg = self.fresh("s")
        self.emit(SOp(opcode, reg, (a.expr, Expr.of(b))))
        rng = self.bounds(a.expr)
        # floor division keeps the order; a floor remainder of a positive b is in 0..b-1
        if rng is not None:
            rng = (rng[0] // b, rng[1] // b) if opcode == "SDIV" else (0, b - 1)
        self.reg_range[reg] = rng
        return Index(Expr.reg(reg), self)


_HINT = {"TMATMUL": "mm", "TMATMUL_ACC": "mm", "TMOV": "mv", "TEXTRACT": "sub", "TCVT": "cv"}


def _expr(x: IndexLike) -> Expr:
    if isinstance(x, Index):
        return x.expr
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return Expr.of(int(x))
    raise TraceError(f"{x!r} is not an integer index", op="tile")


def _targ(a: Any) -> Any:
    if isinstance(a, Index):
        return a.expr
    if isinstance(a, Cond):
        return a
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool) and not isinstance(a, float):
        return Expr.of(int(a))
    return float(a)


# ---------------------------------------------------------------- checks shared by both modes
def _check_to_vector(m: _Mode, t: Tile) -> None:
    if t.space is not Space.L0C and t.space is not Space.UB:
        raise m.fail(
            TileError,
            f"a {t.space} tile cannot reach the vector cores",
            "vector ops read UB tiles and L0C results; load the data into UB instead",
        )


def _check_to_cube(m: _Mode, t: Tile, space: Space) -> None:
    ok = {
        Space.L1: (Space.UB,),
        Space.L0A: (Space.UB, Space.L1),
        Space.L0B: (Space.UB, Space.L1),
    }.get(space, ())
    if t.space not in ok:
        raise m.fail(
            TileError,
            f"a {t.space} tile cannot be moved to {space}",
            "the cube reads L0A/L0B tiles loaded from GM, moved from L1 or handed over from UB",
        )


def _check_assign(m: _Mode, dst: Tile, value: Any) -> Any:
    if dst.space is not Space.UB:
        raise m.fail(
            TileError,
            f"t[...] = ... writes UB tiles; this one is in {dst.space}",
            "accumulate into an L0C tile with matmul(a, b, acc=acc)",
        )
    if isinstance(value, Tile):
        if value.dtype is not dst.dtype and value.space is not Space.L0C:
            raise m.fail(
                DTypeError,
                f"assigning a {value.dtype.short} tile to a {dst.dtype.short} tile",
                f"convert it first: value.astype(pto.{dst.dtype.name})",
            )
        _broadcast(m, "assign", value.shape, dst.shape, into=dst.shape)
        return value
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return value
    raise m.fail(TraceError, f"cannot assign {type(value).__name__} to a tile")


def _broadcast(
    m: _Mode, what: str, a: tuple[int, int], b: tuple[int, int], into: tuple[int, int] | None = None
) -> tuple[int, int]:
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and x != 1 and y != 1:
            raise m.fail(
                ShapeError,
                f"{what}: tiles {list(a)} and {list(b)} do not broadcast",
                "a [rows,1] or [1,cols] tile broadcasts against a [rows,cols] tile",
            )
        out.append(builtins.max(x, y))
    shape = (out[0], out[1])
    if into is not None and shape != into:
        raise m.fail(ShapeError, f"{what}: a {list(a)} tile does not fit a {list(into)} tile")
    return shape


def _expand(m: _Mode, t: Tile, shape: tuple[int, int]) -> Tile:
    """``t`` broadcast to ``shape`` (a [rows,1] or [1,cols] tile across the other axis)."""
    if t.shape == shape:
        return t
    opcode = "TROWEXPAND" if t.shape[1] == 1 else "TCOLEXPAND"
    return m.op(opcode, shape, t.dtype, Space.UB, (t,))


# ---------------------------------------------------------------- the tile language
def program_id(axis: int) -> Any:
    """This grid point's coordinate along ``axis`` (an ``int`` in interpret mode)."""
    m = _mode("program_id")
    grid = m.grid
    if not 0 <= axis < len(grid):
        raise m.fail(ShapeError, f"program_id({axis}) of a {len(grid)}-d grid {grid}")
    return m.pid(axis)


def num_programs(axis: int) -> int:
    """The grid's extent along ``axis``."""
    m = _mode("num_programs")
    return int(m.grid[axis])


def range(start: IndexLike, stop: IndexLike | None = None, step: int = 1) -> Iterator[Any]:
    """``for k in pto.tile.range(n)``: a loop that stays a loop in the compiled kernel (its
    bounds may be program ids). In interpret mode, Python's ``range``."""
    m = _mode("range")
    if stop is None:
        start, stop = 0, start
    if not isinstance(step, int) or step <= 0:
        raise m.fail(ShapeError, f"range step must be a positive integer, got {step!r}")
    return m.range(start, stop, step)


def _window(m: _Mode, ref: Any, index: Sequence[IndexLike], shape: Sequence[int]) -> Any:
    if not isinstance(ref, Ref):
        raise m.fail(TraceError, f"expected a kernel argument (Ref), got {type(ref).__name__}")
    idx = tuple(index) if isinstance(index, (tuple, list)) else (index,)
    if len(idx) != builtins.max(ref.ndim, 1):
        raise m.fail(
            ShapeError,
            f"{ref.name} is {ref.ndim}-d {list(ref.shape)} but the index has {len(idx)} entries",
            "give one index per axis; the tile covers the last two axes",
        )
    shp = tuple(int(n) for n in shape)
    if ref.ndim <= 1:
        if len(shp) == 1:
            shp = (1, shp[0])
        return (0, idx[0] if idx else 0), shp
    if len(shp) != 2 or shp[0] <= 0 or shp[1] <= 0:
        raise m.fail(ShapeError, f"a tile shape is [rows, cols], got {list(shape)}")
    row: Any = idx[-2]
    stride = ref.shape[-2]
    for d in builtins.range(ref.ndim - 3, -1, -1):
        row = row + idx[d] * stride
        stride *= ref.shape[d]
    return (row, idx[-1]), shp


def load(ref: Ref, index: Sequence[IndexLike], shape: Sequence[int], space: str = "UB") -> Tile:
    """The tile of ``shape`` (rows, cols over the last two axes) at ``index`` (one entry per
    axis) of a kernel argument, in ``space`` (``UB`` for the vector cores, ``L1``/``L0A``/
    ``L0B`` for the cube)."""
    m = _mode("load")
    (row, col), shp = _window(m, ref, index, shape)
    sp = _space(space)
    if sp is Space.L0C:
        raise m.fail(TileError, "L0C holds matmul results; load into UB, L1, L0A or L0B")
    return m.load(ref, row, col, shp, sp)


def store(ref: Ref, index: Sequence[IndexLike], tile: Tile) -> None:
    """Write ``tile`` into the output at ``index``. UB tiles must have the output's dtype;
    an L0C result is converted on the way out (the fixpipe)."""
    m = _mode("store")
    if ref.role != "out":
        raise m.fail(TraceError, f"{ref.name} is an input; store into the kernel's output")
    (row, col), _ = _window(m, ref, index, tile.shape)
    if tile.space not in (Space.UB, Space.L0C):
        raise m.fail(TileError, f"a {tile.space} tile cannot be stored; move it to UB first")
    if tile.space is Space.UB and tile.dtype is not ref.dtype:
        raise m.fail(
            DTypeError,
            f"storing a {tile.dtype.short} tile into {ref.name} ({ref.dtype.short})",
            f"convert it first: tile.astype(pto.{ref.dtype.name})",
        )
    m.store(ref, row, col, tile)


def full(shape: Sequence[int], value: float, dtype: Any = dt.float32) -> Tile:
    """A UB tile filled with ``value``."""
    m = _mode("full")
    shp = (int(shape[0]), int(shape[1]))
    return m.op("TEXPANDS", shp, dt.dtype(dtype), Space.UB, (float(value),))


def zeros(shape: Sequence[int], dtype: Any = dt.float32) -> Tile:
    """A UB tile of zeros."""
    return full(shape, 0.0, dtype)


def extract(
    t: Tile, start: tuple[IndexLike, IndexLike], shape: Sequence[int], space: str | None = None
) -> Tile:
    """The sub-tile of ``shape`` at ``start`` (row, col): within UB, or from an L1 tile into
    ``L0A``/``L0B`` for the cube."""
    m = _mode("extract")
    sp = _space(space) if space is not None else t.space
    shp = (int(shape[0]), int(shape[1]))
    ok = (t.space is Space.UB and sp is Space.UB) or (
        t.space is Space.L1 and sp in (Space.L0A, Space.L0B)
    )
    if not ok:
        raise m.fail(TileError, f"cannot extract from a {t.space} tile into {sp}")
    if isinstance(m, _Interp):
        r, c = int(start[0]), int(start[1])
        if r < 0 or c < 0 or r + shp[0] > t.shape[0] or c + shp[1] > t.shape[1]:
            raise m.fail(TileError, f"sub-tile {list(shp)} at ({r}, {c}) of a {list(t.shape)} tile")
    return m.op("TEXTRACT", shp, t.dtype, sp, (t, start[0], start[1]))


def gather(t: Tile, idx: Tile) -> Tile:
    """``t``'s elements at the int32 indices ``idx`` (a tile of any shape, indices counted
    row-major over ``t``): the result has ``idx``'s shape and ``t``'s dtype (``TGATHER`` on the
    vector cores; 2- and 4-byte dtypes).

    >>> import numpy as np
    >>> import pypto as pto
    >>> from pypto.tile import language as pl
    >>> @pl.kernel(grid=(1,), out=pl.ShapeDtype((2, 4), pto.float32))
    ... def rev(x, i, y):
    ...     pl.store(y, (0, 0), pl.gather(pl.load(x, (0, 0), (2, 4)), pl.load(i, (0, 0), (2, 4))))
    >>> x = np.arange(8, dtype=np.float32).reshape(2, 4)
    >>> i = np.array([[3, 2, 1, 0], [7, 6, 5, 4]], np.int32)
    >>> rev(x, i).numpy()
    array([[3., 2., 1., 0.],
           [7., 6., 5., 4.]], dtype=float32)
    """
    m = _mode("gather")
    x = m.to_vector(t)
    ix = m.to_vector(idx)
    if ix.dtype is not dt.int32:
        raise m.fail(DTypeError, f"gather indices must be an i32 tile, got {ix.dtype.short}")
    if x.dtype.itemsize not in (2, 4):
        raise m.fail(
            DTypeError,
            f"gather of a {x.dtype.short} tile: TGATHER moves 2- or 4-byte elements",
            "convert the tile with .astype(pto.float16) or .astype(pto.int32) first",
        )
    if isinstance(m, _Interp):
        assert ix.value is not None
        n = x.shape[0] * x.shape[1]
        bad = ix.value[(ix.value < 0) | (ix.value >= n)]
        if bad.size:
            raise m.fail(
                TileError,
                f"gather index {int(bad.flat[0])} is outside the {n} elements of a "
                f"{list(x.shape)} tile",
            )
    return m.op("TGATHER", ix.shape, x.dtype, Space.UB, (x, ix))


def matmul(a: Tile, b: Tile, acc: Tile | None = None, out: Tile | None = None) -> Tile:
    """``a @ b`` on the cube core: an L0C tile in float32 (int32 for int8). Operands in L1 or
    UB are moved into L0A/L0B; ``acc`` accumulates in place (``acc += a @ b``); ``out``
    overwrites an earlier result's tile (a value carried across loop iterations)."""
    m = _mode("matmul")
    if a.shape[1] != b.shape[0]:
        raise m.fail(
            ShapeError, f"matmul of tiles {list(a.shape)} @ {list(b.shape)}: inner dims differ"
        )
    if a.dtype is not b.dtype or a.dtype not in (dt.float16, dt.bfloat16, dt.float32, dt.int8):
        raise m.fail(
            DTypeError,
            f"matmul of {a.dtype.short} by {b.dtype.short} tiles",
            "the cube multiplies f16, bf16, f32 or int8 tiles of one dtype",
        )
    x = m.to_cube(a, Space.L0A)
    y = m.to_cube(b, Space.L0B)
    shape = (a.shape[0], b.shape[1])
    d = dt.int32 if a.dtype is dt.int8 else dt.float32
    into = acc if acc is not None else out
    if into is None:
        return m.op("TMATMUL", shape, d, Space.L0C, (x, y))
    if acc is not None and out is not None:
        raise m.fail(TraceError, "matmul takes acc= (accumulate) or out= (overwrite), not both")
    if into.space is not Space.L0C or into.shape != shape or into.dtype is not d:
        raise m.fail(
            TileError,
            f"{'acc' if acc is not None else 'out'} must be an L0C {d.short}{list(shape)} "
            f"tile, got {into.space} {into.dtype.short}{list(into.shape)}",
            "pass the result of an earlier matmul",
        )
    return m.op("TMATMUL_ACC" if acc is not None else "TMATMUL", shape, d, Space.L0C, (x, y), into)


def _operands(m: _Mode, what: str, *xs: Any) -> tuple[list[Any], dt.DType]:
    tiles = [m.to_vector(x) for x in xs if isinstance(x, Tile)]
    if not tiles:
        raise m.fail(TraceError, f"{what} needs at least one tile operand")
    d = tiles[0].dtype
    for t in tiles[1:]:
        if t.dtype is not d:
            raise m.fail(
                DTypeError,
                f"{what} of {d.short} and {t.dtype.short} tiles",
                "convert one with .astype(...) (tiles do not promote)",
            )
    it = iter(tiles)
    out = [next(it) if isinstance(x, Tile) else x for x in xs]
    for x in out:
        if not isinstance(x, Tile) and not isinstance(x, (int, float, np.number)):
            raise m.fail(TraceError, f"{what} of a tile and {type(x).__name__}")
    return out, d


def _binary(opcode: str, x: Any, y: Any, out: Tile | None = None) -> Tile:
    m = _mode(BINARY[opcode])
    (a, b), d = _operands(m, BINARY[opcode], x, y)
    if out is not None and out.space is not Space.UB:
        raise m.fail(TileError, f"in-place {BINARY[opcode]} on a {out.space} tile")
    if isinstance(a, Tile) and isinstance(b, Tile):
        into = out.shape if out is not None else None
        shape = _broadcast(m, BINARY[opcode], a.shape, b.shape, into)
        # the vector unit broadcasts a [rows,1] or [1,cols] second operand; a broadcast
        # first operand is expanded first
        if a.shape != shape:
            a = _expand(m, a, shape)
        return m.op(opcode, shape, d, Space.UB, (a, b), out)
    if isinstance(a, Tile):
        return m.op(opcode + "S", a.shape, d, Space.UB, (a, float(b)), out)
    assert isinstance(b, Tile)
    if opcode in ("TADD", "TMUL", "TMAX", "TMIN"):
        return m.op(opcode + "S", b.shape, d, Space.UB, (b, float(a)), out)
    s = m.op("TEXPANDS", b.shape, d, Space.UB, (float(a),))
    return m.op(opcode, b.shape, d, Space.UB, (s, b), out)


def _unary(opcode: str, x: Tile) -> Tile:
    m = _mode(UNARY[opcode])
    if not isinstance(x, Tile):
        raise m.fail(TraceError, f"{UNARY[opcode]} of {type(x).__name__}: expected a tile")
    t = m.to_vector(x)
    return m.op(opcode, t.shape, t.dtype, Space.UB, (t,))


def _compare(cond: Cond, x: Any, y: Any) -> Tile:
    m = _mode("compare")
    (a, b), _ = _operands(m, "compare", x, y)
    if isinstance(a, Tile) and isinstance(b, Tile):
        shape = _broadcast(m, "compare", a.shape, b.shape)
        a = _expand(m, a, shape)
        b = _expand(m, b, shape)
        return m.op("TCMP", shape, dt.bool_, Space.UB, (a, b, cond))
    if not isinstance(a, Tile):
        flip = {Cond.LT: Cond.GT, Cond.LE: Cond.GE, Cond.GT: Cond.LT, Cond.GE: Cond.LE}
        a, b, cond = b, a, flip.get(cond, cond)
    return m.op("TCMPS", a.shape, dt.bool_, Space.UB, (a, float(b), cond))


def _astype(t: Tile, d: dt.DType) -> Tile:
    m = _mode("astype")
    if t.space is Space.L0C:
        return m.to_vector(t, d)
    x = m.to_vector(t)
    if x.dtype is d:
        return x
    return m.op("TCVT", x.shape, d, Space.UB, (x,))


def _reduce(kind: str, t: Tile, axis: int) -> Tile:
    m = _mode(kind)
    if axis not in (0, 1, -1, -2):
        raise m.fail(ShapeError, f"{kind} over axis {axis} of a 2-d tile")
    x = m.to_vector(t)
    opcode = ("TROW" if axis in (1, -1) else "TCOL") + kind.upper()
    shape = (x.shape[0], 1) if axis in (1, -1) else (1, x.shape[1])
    return m.op(opcode, shape, x.dtype, Space.UB, (x,))


def where(mask: Tile, a: Any, b: Any) -> Tile:
    """``a`` where ``mask`` holds, else ``b`` (tiles or scalars; one at least a tile)."""
    m = _mode("where")
    if not isinstance(mask, Tile) or mask.dtype is not dt.bool_:
        raise m.fail(DTypeError, "where needs a bool mask tile (from a comparison)")
    (x, y), d = _operands(m, "where", a, b)
    shape = mask.shape
    x = _expand(m, x, shape) if isinstance(x, Tile) else full(shape, float(x), d)
    y = _expand(m, y, shape) if isinstance(y, Tile) else full(shape, float(y), d)
    return m.op("TSEL", shape, d, Space.UB, (mask, x, y))


def _unary_fn(opcode: str) -> Callable[[Tile], Tile]:
    def fn(x: Tile) -> Tile:
        return _unary(opcode, x)

    fn.__name__ = UNARY[opcode].split()[0]
    fn.__doc__ = f"Elementwise {UNARY[opcode]} of a tile (vector cores)."
    return fn


exp = _unary_fn("TEXP")
log = _unary_fn("TLOG")
sqrt = _unary_fn("TSQRT")
rsqrt = _unary_fn("TRSQRT")
reciprocal = _unary_fn("TRECIP")
abs = _unary_fn("TABS")
relu = _unary_fn("TRELU")
tanh = _unary_fn("TTANH")
sigmoid = _unary_fn("TSIGMOID")
sin = _unary_fn("TSIN")
cos = _unary_fn("TCOS")
gelu = _unary_fn("TGELU")


def maximum(a: Any, b: Any) -> Tile:
    """Elementwise maximum (tiles broadcast [rows,1] / [1,cols]; a scalar operand too)."""
    return _binary("TMAX", a, b)


def minimum(a: Any, b: Any) -> Tile:
    """Elementwise minimum."""
    return _binary("TMIN", a, b)


def sum(t: Tile, axis: int) -> Tile:
    """``t.sum(axis)``."""
    return _reduce("sum", t, axis)


def max(t: Tile, axis: int) -> Tile:
    """``t.max(axis)``."""
    return _reduce("max", t, axis)


def min(t: Tile, axis: int) -> Tile:
    """``t.min(axis)``."""
    return _reduce("min", t, axis)


# ---------------------------------------------------------------- the kernel object
Static = dict[str, Any]
_STATIC_TYPES = (int, float, bool, str, type(None))


def _static_ok(v: Any) -> bool:
    if isinstance(v, tuple):
        return builtins.all(_static_ok(x) for x in v)
    return isinstance(v, _STATIC_TYPES)


class PtoKernel:
    """A hand-written tile kernel (made by :func:`kernel`). Calling it applies it to tensors
    (numpy arrays, Tensors, or traced values inside ``pto.jit``); keyword arguments are
    static parameters of the body (ints, floats, bools, strings, tuples of them)."""

    def __init__(
        self,
        fn: Callable[..., None],
        grid: tuple[int, ...] | Callable[..., tuple[int, ...]],
        out: Any,
        reference: Callable[..., Any] | None,
        name: str | None,
    ) -> None:
        self.body = fn
        self.grid_spec = grid
        self.out_spec = out
        self.reference = reference
        base = str(name or getattr(fn, "__name__", "kernel"))
        self.name = base
        n = 1
        while self.name in KERNELS and KERNELS[self.name] is not self:
            n += 1
            self.name = f"{base}_{n}"
        KERNELS[self.name] = self
        self.loc = _source_loc(fn)
        code = getattr(fn, "__code__", None)
        self.file = code.co_filename if code is not None else ""
        functools.update_wrapper(self, fn)

    # ---- the op-table protocol
    def _avals_grid(self, avals: Sequence[Any], static: Static) -> tuple[int, ...]:
        g = self.grid_spec
        g = _spec_call(g, avals, static) if callable(g) else g
        g = (g,) if isinstance(g, int) else tuple(int(n) for n in g)
        if not g or builtins.any(n <= 0 for n in g):
            raise TraceError(
                f"grid {g} of kernel @{self.name} for inputs "
                + ", ".join(str(a) for a in avals)
                + " has no points",
                op=f"kernel @{self.name}",
                loc=self.loc,
                hint="every grid extent must be a positive integer",
            )
        return g

    def out_aval(self, avals: tuple[AVal, ...], static: Static) -> AVal:
        spec = self.out_spec
        spec = _spec_call(spec, avals, static) if callable(spec) else spec
        if isinstance(spec, tuple) and len(spec) == 2 and not isinstance(spec[0], int):
            spec = ShapeDtype(spec[0], spec[1])
        try:
            shape = tuple(int(n) for n in spec.shape)
            d = dt.dtype(spec.dtype) if not isinstance(spec.dtype, dt.DType) else spec.dtype
        except (AttributeError, TypeError):
            raise TraceError(
                f"out= of kernel @{self.name} gave {spec!r}, not a shape and dtype",
                op=f"kernel @{self.name}",
                loc=self.loc,
                hint="return pto.ShapeDtype(shape, dtype) (or a value with .shape and .dtype)",
            ) from None
        return AVal(shape, d)

    def interpret(self, arrays: tuple[np.ndarray, ...], static: Static) -> np.ndarray:
        """Run the body once per grid point on numpy tiles (interpret mode)."""
        avals = tuple(AVal(tuple(a.shape), dt.from_numpy(a.dtype)) for a in arrays)
        out = self.out_aval(avals, static)
        grid = self._avals_grid(avals, static)
        refs = self._refs(avals, out)
        for r, a in zip(refs, arrays, strict=False):
            r.array = np.asarray(a).reshape(r.view)
        o = refs[-1]
        fill = np.nan if out.dtype.is_floating else 0
        o.array = np.full(o.view, fill, out.dtype.np)
        o.written = np.zeros(o.view, bool)
        mode = _Interp(self.name)
        mode.grid = grid
        mode.file = self.file
        _MODE.append(mode)
        try:
            for point in np.ndindex(*grid):
                mode.point = tuple(int(i) for i in point)
                self.body(*refs, **static)
        finally:
            _MODE.pop()
        if not o.written.all():
            r0, c0 = (int(i) for i in np.argwhere(~o.written)[0])
            raise TileError(
                f"kernel @{self.name} left {int((~o.written).sum())} of {o.written.size} "
                f"elements of its output unwritten (the first at row {r0}, column {c0} of "
                f"[{o.view[0]},{o.view[1]}])",
                op=f"kernel @{self.name}",
                loc=self.loc,
                hint="every output element must be stored by some grid point",
            )
        return o.array.reshape(out.shape)

    def jax(self, args: tuple[Any, ...], static: Static) -> Any:
        if self.reference is not None:
            return _spec_call(self.reference, args, static)
        import jax

        avals = tuple(AVal(tuple(a.shape), dt.from_numpy(np.dtype(a.dtype))) for a in args)
        out = self.out_aval(avals, static)
        spec = jax.ShapeDtypeStruct(out.shape, out.dtype.np)
        return jax.pure_callback(
            lambda *xs: self.interpret(tuple(np.asarray(x) for x in xs), static), spec, *args
        )

    def cost(self, avals: tuple[AVal, ...], static: Static) -> Cost:
        out = self.out_aval(avals, static)
        tr = self.trace(avals, static, [f"a{i}" for i in builtins.range(len(avals))] + ["o"])
        flops = _flops(tr.blocks[0], tr.grid)
        return Cost(
            flops=flops,
            unit="cube" if flops else "vector",
            bytes_in=builtins.sum(a.nbytes for a in avals),
            bytes_out=out.nbytes,
        )

    # ---- tracing
    def _refs(self, avals: Sequence[AVal], out: AVal, buffers: Sequence[str] = ()) -> list[Ref]:
        try:
            params = list(inspect.signature(self.body).parameters)
        except (TypeError, ValueError):
            params = []
        names = [p for p in params][: len(avals) + 1]
        names += [f"arg{i}" for i in builtins.range(len(names), len(avals) + 1)]
        refs = [
            Ref(names[i], tuple(a.shape), a.dtype, "in", buffer=buffers[i] if buffers else "")
            for i, a in enumerate(avals)
        ]
        refs.append(
            Ref(
                names[-1], tuple(out.shape), out.dtype, "out", buffer=buffers[-1] if buffers else ""
            )
        )
        return refs

    def trace(self, avals: Sequence[AVal], static: Static, buffers: Sequence[str]) -> _Trace:
        """The body traced once into a stream of Tile IR statements."""
        out = self.out_aval(tuple(avals), static)
        tr = _Trace(self.name, self._avals_grid(avals, static))
        tr.file = self.file
        _MODE.append(tr)
        try:
            self.body(*self._refs(avals, out, buffers), **static)
        finally:
            _MODE.pop()
        return tr

    def __call__(self, *args: Any, **static: Any) -> Any:
        for k, v in static.items():
            if k == "kernel" or not _static_ok(v):
                raise TraceError(
                    f"static argument {k}={v!r} of kernel @{self.name} is not an int, float, "
                    "bool, string or tuple of them",
                    op=f"kernel @{self.name}",
                    hint="pass tensors positionally; keyword arguments are compile-time constants",
                )
        vals = tuple(api.asvalue(a, f"kernel @{self.name}") for a in args)
        try:
            return dispatch.bind(OPS["kernel_call"], vals, {"kernel": self.name, **static})
        except PyptoError as e:
            raise e.stripped() from None

    def lower_tile(self, *args: Any, machine: Any = "ascend910b", **static: Any) -> Any:
        """The Tile IR of this kernel applied to ``args`` (a TileFunc)."""
        from pypto.compiler import jit

        return jit(lambda *xs: self(*xs, **static), machine=machine).lower(*args).tile_ir

    def __repr__(self) -> str:
        return f"<pto.kernel @{self.name}>"


def _spec_call(fn: Callable[..., Any], args: Sequence[Any], static: Static) -> Any:
    """``fn(*args, **static)`` for a ``grid=``, ``out=`` or ``reference=`` function, passing
    only the static arguments it names (``lambda x: ...`` need not take the tile sizes)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return fn(*args, **static)
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return fn(*args, **static)
    names = {p.name for p in params}
    return fn(*args, **{k: v for k, v in static.items() if k in names})


def _source_loc(fn: Any) -> SourceLoc | None:
    try:
        return SourceLoc(fn.__code__.co_filename, inspect.getsourcelines(fn)[1])
    except (AttributeError, TypeError, OSError):
        return None


def kernel(
    fn: Callable[..., None] | None = None,
    *,
    grid: tuple[int, ...] | int | Callable[..., Any],
    out: Any,
    reference: Callable[..., Any] | None = None,
    name: str | None = None,
) -> Any:
    """Make a tile kernel of ``fn(*inputs, output, **static)``.

    ``grid`` (a tuple, or a function of the inputs' shapes/dtypes and of the static arguments
    it names)
    says how many times the body runs; ``out`` (a :class:`ShapeDtype`, or such a function)
    gives the output. ``reference`` is an optional JAX function of the same arguments used to
    check the kernel (``pto.check``, ``pto.to_jax``); without it the JAX bridge runs the
    interpret mode through ``jax.pure_callback``. See :mod:`pypto.tile.language` for the tile
    language and an example.
    """

    def wrap(f: Callable[..., None]) -> PtoKernel:
        return PtoKernel(
            f,
            grid if callable(grid) or not isinstance(grid, int) else (grid,),
            out,
            reference,
            name,
        )

    return wrap(fn) if fn is not None else wrap


# ---------------------------------------------------------------- counting work
def _trips(f: For, env: dict[str, int]) -> int | None:
    try:
        lo, hi = f.start.eval(env), f.stop.eval(env)
    except KeyError:
        return None
    return builtins.max(0, -(-(hi - lo) // f.step))


def _flops(stmts: Sequence[Any], grid: tuple[int, ...]) -> int:
    """Cube FLOPs of the kernel over its whole grid (loops evaluated per grid point when
    their bounds depend on it)."""

    def count(items: Sequence[Any], env: dict[str, int]) -> int:
        total = 0
        for s in items:
            if isinstance(s, TOp) and s.op in ("TMATMUL", "TMATMUL_ACC"):
                a, b = s.args[0], s.args[1]
                assert isinstance(a, TileVar) and isinstance(b, TileVar)
                total += 2 * a.shape[0] * a.shape[1] * b.shape[1]
            elif isinstance(s, SOp):
                try:
                    x, y = (e.eval(env) for e in s.exprs)
                    env[s.dst] = x // y if s.op == "SDIV" else x % y
                except (KeyError, ValueError, ZeroDivisionError):
                    pass
            elif isinstance(s, For):
                n = _trips(s, env)
                if not n:
                    continue
                start = s.start.eval(env)
                inner = [x for x in _walk(s.body) if isinstance(x, For)]
                if builtins.any(s.reg in (*i.start.regs, *i.stop.regs) for i in inner):
                    for k in builtins.range(n):
                        total += count(s.body, {**env, s.reg: start + k * s.step})
                else:
                    total += n * count(s.body, {**env, s.reg: start})
        return total

    depends = builtins.any(
        isinstance(f, For)
        and builtins.any(r.startswith("pid") for r in (*f.start.regs, *f.stop.regs))
        for f in _walk(stmts)
    )
    if not depends:
        return math.prod(grid) * count(stmts, {f"pid{i}": 0 for i in builtins.range(len(grid))})
    return builtins.sum(
        count(stmts, {f"pid{i}": int(v) for i, v in enumerate(p)}) for p in np.ndindex(*grid)
    )


def _walk(stmts: Sequence[Any]) -> Iterator[Any]:
    for s in stmts:
        yield s
        if isinstance(s, For):
            yield from _walk(s.body)


# ---------------------------------------------------------------- into the Tile IR
def _section_of(s: Any) -> str:
    if isinstance(s, TLoad):
        return "aic" if s.dst.space in CUBE else "aiv"
    if isinstance(s, TStore):
        return "aic" if s.src.space in CUBE else "aiv"
    if isinstance(s, TOp):
        return "aic" if s.dst.space in CUBE else "aiv"
    return "both"


@dataclass
class _Split:
    """How the vector cores of a cluster share the vector work: ``rows``-row tiles are
    halved (core ``%sub`` takes rows ``%sub*half ..``; with one vector core, all of them)."""

    rows: int
    half: int
    tiles: dict[str, TileVar] = field(default_factory=dict)


def _lower_kernel(lw: Lowering, e: Eqn) -> None:
    k = KERNELS[e.kwargs["kernel"]]
    assert isinstance(k, PtoKernel)
    static = {a: b for a, b in e.params if a != "kernel"}
    avals = [a.aval for a in e.inputs]
    bufs = []
    for a in e.inputs:
        if not isinstance(a, Var):
            arr = np.asarray(a.value).reshape(1, 1)
            bufs.append(lw.const_buffer("lit", arr))
            continue
        b = lw.buffer(a)
        want = view2d(a.aval.shape)
        if lw.view(b, want) != want:
            b = relayout(lw, b, want, e.loc)
        bufs.append(b)
    ob = lw.buffer(e.out)
    ov = view2d(e.out.aval.shape)
    if lw.view(ob, ov) != ov:
        raise TileError(
            f"the output of kernel @{k.name} is already laid out as {lw.views[ob]}",
            op=f"kernel @{k.name}",
            loc=e.loc,
        )
    bufs.append(ob)
    try:
        tr = k.trace(avals, static, bufs)
    except PyptoError as err:
        raise err.stripped() from None
    lw.add_kernel(_build(lw, k, tr, e.loc))


def _build(lw: Lowering, k: PtoKernel, tr: _Trace, loc: SourceLoc | None) -> Kernel:
    stream = tr.blocks[0]
    kinds = {_section_of(s) for s in _walk(stream) if not isinstance(s, (For, SOp, _Cross))}
    grid = tuple((f"pid{i}", n) for i, n in enumerate(tr.grid))
    flops = _flops(stream, tr.grid)
    if "aic" not in kinds:
        sec = Section("aiv", _prune(_only(stream, "aiv", None, {})))
        return Kernel(lw.fresh(k.name), "kernel", grid, (sec,), loc=loc, flops=flops)
    split = None
    if tr.crossings:
        rows = {c.src.shape[0] for c in tr.crossings}
        nv = lw.machine.aiv_per_cluster
        if len(rows) != 1 or next(iter(rows)) % nv:
            raise TileError(
                f"kernel @{k.name} hands tiles of {sorted(rows)} rows between the cube and "
                "the vector cores; the two vector cores of a cluster split them by rows",
                op=f"kernel @{k.name}",
                loc=tr.crossings[0].loc,
                hint="hand over tiles of one even row count",
            )
        r = next(iter(rows))
        split = _Split(r, r // nv)
    elif "aiv" in kinds:
        raise TileError(
            f"kernel @{k.name} has cube and vector work that never meet",
            op=f"kernel @{k.name}",
            loc=loc,
            hint="split it into two kernels, or hand the cube's result to the vector ops",
        )
    m = lw.machine
    rings: list[Ring] = []
    ring_of: dict[int, tuple[str, str, str]] = {}
    for c in tr.crossings:
        d = c.dst.dtype
        ws_rows = m.clusters * 2 * c.src.shape[0]
        buf = lw.new_buffer("ws", d, ws_rows * c.src.shape[1])
        lw.views[buf] = (ws_rows, c.src.shape[1])
        slot, cnt = f"sl{c.ring}", f"cn{c.ring}"
        src_core = "aic" if c.src.space in CUBE else "aiv"
        rings.append(Ring(buf, src_core, slot))
        ring_of[c.ring] = (buf, slot, cnt)
    pre = tuple(SOp("SMOV", f"cn{c.ring}", (Expr(),)) for c in tr.crossings)
    aic = Section("aic", _prune(_only(stream, "aic", None, ring_of)), pre)
    sections = [aic]
    if split is not None:
        aiv_body = _prune(_only(stream, "aiv", split, ring_of))
        sections.append(Section("aiv", aiv_body, pre))
    if len(rings) * 2 > m.cross_flag_ids:
        raise TileError(
            f"kernel @{k.name} hands tiles over at {len(rings)} places; the machine has "
            f"{m.cross_flag_ids} cross-core flags (two per place)",
            op=f"kernel @{k.name}",
            loc=loc,
            hint="hand over fewer distinct values (reuse one hand-off, or fuse the vector ops)",
        )
    return Kernel(
        lw.fresh(k.name),
        "kernel",
        grid,
        tuple(sections),
        dist="cluster",
        loc=loc,
        flops=flops,
        rings=tuple(rings),
    )


def _only(
    stream: Sequence[Any],
    core: str,
    split: _Split | None,
    rings: dict[int, tuple[str, str, str]],
) -> tuple[Stmt, ...]:
    """The statements of ``stream`` one core type runs (loops and scalar work are shared)."""
    out: list[Stmt] = []
    for s in stream:
        if isinstance(s, For):
            body = _only(s.body, core, split, rings)
            if builtins.any(not isinstance(x, SOp) for x in body):
                out.append(For(s.reg, s.start, s.stop, s.step, body))
        elif isinstance(s, SOp):
            out.append(s)
        elif isinstance(s, _Cross):
            buf, slot, cnt = rings[s.ring]
            row = Expr.reg("blk") * (2 * s.src.shape[0]) + Expr.reg(slot) * s.src.shape[0]
            writer = "aic" if s.src.space in CUBE else "aiv"
            out.append(SOp("SMOD", slot, (Expr.reg(cnt), Expr.of(2))))
            if core == writer:
                src = _half(s.src, split, s.loc) if core == "aiv" else s.src
                off = _sub(split) if core == "aiv" else Expr()
                out.append(TStore(buf, row + off, Expr(), src, s.loc))
            else:
                dst = _half(s.dst, split, s.loc) if core == "aiv" else s.dst
                off = _sub(split) if core == "aiv" else Expr()
                out.append(TLoad(dst, buf, row + off, Expr(), s.loc))
            out.append(SOp("SADD", cnt, (Expr.reg(cnt), Expr.of(1))))
        elif _section_of(s) == core:
            out.append(_halve(s, split) if core == "aiv" and split is not None else s)
    return tuple(out)


def _prune(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """Without the scalar instructions whose registers this section never reads (index
    arithmetic the other core type needs)."""

    def reads(s: Stmt) -> list[str]:
        if isinstance(s, TLoad | TStore):
            return [*s.row.regs, *s.col.regs]
        if isinstance(s, TOp):
            return [r for a in s.args if isinstance(a, Expr) for r in a.regs]
        if isinstance(s, SOp):
            return [r for a in s.exprs for r in a.regs]
        assert isinstance(s, For)
        return [*s.start.regs, *s.stop.regs]

    used: set[str] = set()
    while True:
        kept = _keep(stmts, used)
        now = {r for s in _walk(kept) for r in reads(s)}
        if now <= used:
            return kept
        used |= now


def _keep(stmts: tuple[Stmt, ...], used: set[str]) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SOp) and s.dst not in used:
            continue
        if isinstance(s, For):
            s = For(s.reg, s.start, s.stop, s.step, _keep(s.body, used))
        out.append(s)
    return tuple(out)


def _sub(split: _Split | None) -> Expr:
    return Expr.reg("sub") * split.half if split is not None else Expr()


def _half(t: TileVar, split: _Split | None, loc: SourceLoc | None) -> TileVar:
    if split is None or t.shape[0] == 1:
        return t
    if t.shape[0] != split.rows:
        raise TileError(
            f"{t} is a vector tile of {t.shape[0]} rows in a kernel whose two vector cores "
            f"split {split.rows}-row tiles between them",
            op="kernel",
            loc=loc,
            hint=f"keep the vector tiles at {split.rows} rows (or 1 row for broadcast rows)",
        )
    return TileVar(t.name, t.space, t.dtype, (split.half, t.shape[1]))


def _halve(s: Stmt, split: _Split) -> Stmt:
    """A vector statement of a cluster kernel on this core's half of the rows."""
    loc = getattr(s, "loc", None)
    if isinstance(s, TLoad):
        d = _half(s.dst, split, loc)
        return TLoad(d, s.tensor, s.row + (_sub(split) if d is not s.dst else 0), s.col, loc)
    if isinstance(s, TStore):
        t = _half(s.src, split, loc)
        return TStore(s.tensor, s.row + (_sub(split) if t is not s.src else 0), s.col, t, loc)
    assert isinstance(s, TOp)
    if s.op.startswith("TCOL") or s.op == "TTRANS":
        src = s.args[0]
        if isinstance(src, TileVar) and src.shape[0] == split.rows:
            raise TileError(
                f"{s.op.lower()} of {src} needs all its rows, but the two vector cores of the "
                "cluster each hold half of them",
                op="kernel",
                loc=loc,
                hint="reduce over rows in a vector-only kernel",
            )
    if s.op == "TEXTRACT":
        src = s.args[0]
        assert isinstance(src, TileVar)
        if src.shape[0] == split.rows and s.dst.shape[0] != split.rows:
            raise TileError(
                f"a sub-tile of fewer rows from {src}, whose rows the vector cores split",
                op="kernel",
                loc=loc,
                hint="extract whole-row column blocks",
            )
    args = tuple(_half(a, split, loc) if isinstance(a, TileVar) else a for a in s.args)
    return TOp(s.op, _half(s.dst, split, loc), args, loc)


register_rule("tile", "kernel_call")(KernelRule(_lower_kernel))
