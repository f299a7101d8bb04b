"""The eager Tensor: an immutable numpy array with the shared Tensor surface.

Ops on eager tensors run at once through the op table's numpy implementations.
"""

from __future__ import annotations

import html
import warnings
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.core import dispatch
from pypto.core.errors import ConversionError, DTypeError, PyptoError, ShapeError
from pypto.ops import api
from pypto.ops.surface import TensorSurface
from pypto.ops.table import AVal, Op

# IEEE results (inf, nan) are values, not events, as in JAX: numpy's RuntimeWarnings raised from
# pypto's own frames are silenced. The filter matches only warnings attributed to pypto modules.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"pypto(\.|$)")

_BY_NP = dt._BY_NP
_ndarray = np.ndarray
_new = object.__new__


class Tensor(TensorSurface):
    """An eager tensor. Make one with :func:`pypto.tensor` or the creation functions.

    >>> import pypto as pto
    >>> x = pto.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=pto.float16)
    >>> x.shape, x.dtype
    ((2, 2), float16)
    >>> (x @ x).numpy()
    array([[ 7., 10.],
           [15., 22.]], dtype=float16)
    """

    __slots__ = ("_a",)
    _a: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return self._a.shape

    @property
    def dtype(self) -> dt.DType:  # type: ignore[override]
        return _BY_NP[self._a.dtype]

    @property
    def aval(self) -> AVal:
        return AVal(self._a.shape, _BY_NP[self._a.dtype])

    def numpy(self) -> np.ndarray:
        """A fresh, writable numpy copy of the data."""
        return self._a.copy()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        a = self._a if dtype is None else self._a.astype(dtype)
        if copy:
            return a.copy()
        v = a.view()
        v.flags.writeable = False  # the tensor is immutable; a view must not change it
        return v

    def _concrete(self, what: str) -> Any:
        if self._a.size != 1:
            raise ConversionError(
                f"{'an index' if what == 'index' else what + '()'} needs a tensor with one "
                f"element, got {self.aval} ({self._a.size} elements)",
                op=what,
                hint="reduce it first (e.g. x.sum(), x.max()) or index one element",
            )
        return self._a.reshape(()).item()

    def __repr__(self) -> str:
        body = np.array2string(
            self._a, separator=", ", threshold=200, edgeitems=3, prefix="Tensor("
        )
        return f"Tensor({body}, dtype={self.dtype.name})"

    def _repr_html_(self) -> str:
        return tensor_html(self._a, self.dtype)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": repr(self), "text/html": self._repr_html_()}


def _wrap(a: Any) -> Tensor:
    t = _new(Tensor)
    t._a = a if type(a) is _ndarray else np.asarray(a)
    return t


def tensor_html(a: np.ndarray, d: dt.DType, limit: int = 8) -> str:
    """An HTML card: shape and dtype, summary statistics, and a corner of the values."""
    head = f"<b>Tensor</b> <code>{d.short}[{','.join(map(str, a.shape))}]</code>"
    stats = ""
    if a.size and d.is_floating:
        f = a.astype(np.float32)
        stats = (
            f" &nbsp; min {np.nanmin(f):.4g} · max {np.nanmax(f):.4g} · "
            f"mean {np.nanmean(f):.4g}"
            + (
                f" · <span style='color:#c00'>{int(np.isnan(f).sum())} NaN</span>"
                if np.isnan(f).any()
                else ""
            )
        )
    view = a.reshape(1, 1) if a.ndim == 0 else a.reshape(1, -1) if a.ndim == 1 else a
    while view.ndim > 2:
        view = view[0]
    rows = view[:limit, :limit]
    cells = "".join(
        "<tr>"
        + "".join(
            f"<td style='padding:1px 6px;text-align:right'>{html.escape(str(v))}</td>" for v in row
        )
        + ("<td>…</td>" if view.shape[1] > limit else "")
        + "</tr>"
        for row in rows.tolist()
    )
    if view.shape[0] > limit:
        cells += "<tr><td>⋮</td></tr>"
    note = " <i>(first 2-d slice)</i>" if a.ndim > 2 else ""
    return (
        f"<div class='pypto-tensor'>{head}{stats}{note}"
        f"<table style='font-family:monospace;border-collapse:collapse'>{cells}</table></div>"
    )


class EagerTrace:
    """Evaluation at once: each op's numpy implementation on the operands' arrays."""

    def process(self, op: Op, args: tuple[Any, ...], params: dict[str, Any]) -> Tensor:
        arrays = tuple(a._a for a in args)
        if op.kind == "elementwise":
            if op.dtypes is not dt.ALL and _BY_NP[arrays[0].dtype] not in op.dtypes:
                self._check(op, args, params)
            try:
                return _wrap(op.impl(*arrays, **params))  # type: ignore[misc]
            except ValueError:
                self._check(op, args, params)  # raises the ShapeError that explains it
                raise
        self._check(op, args, params)
        return _wrap(op.impl(*arrays, **params))  # type: ignore[misc]

    @staticmethod
    def _check(op: Op, args: tuple[Any, ...], params: dict[str, Any]) -> None:
        avals = [a.aval for a in args]
        op.shape_rule(*avals, **params)  # type: ignore[misc]
        op.dtype_rule(*avals, **params)  # type: ignore[misc]

    def const(self, array: np.ndarray) -> Tensor:
        return _wrap(array)

    def composite(self, op: Op, args: tuple[Any, ...], params: dict[str, Any]) -> Any:
        try:
            return op.decompose(*args, **params)  # type: ignore[misc]
        except PyptoError as e:
            raise e.stripped() from None


_TRACE = EagerTrace()
dispatch.set_base_trace(_TRACE)
api.register_eager(Tensor, _wrap, _TRACE)


def tensor(data: Any, dtype: Any = None) -> Tensor:
    """A tensor from a Tensor, numpy array, nested list or Python scalar.

    Without ``dtype``: Python floats → float32, ints → int32, bools → bool; numpy float64 →
    float32 and int64 → int32 (as JAX does without 64-bit mode). The data is copied.

    >>> import pypto as pto
    >>> pto.tensor([1, 2, 3]).dtype
    int32
    """
    try:
        d = None if dtype is None else dt.dtype(dtype, op="tensor")
        if isinstance(data, Tensor):
            a = data._a if d is None else data._a.astype(d.np)
            return _wrap(a.copy())
        a = api.to_numpy(data, "tensor", d)
        return _wrap(a.copy() if a is data else a)
    except PyptoError as e:
        raise e.stripped() from None


def _shape(shape: Any, op: str = "zeros") -> tuple[int, ...]:
    return api._shape_arg(op, shape)


def _dtype(op: str, dtype: Any, default: dt.DType = dt.float32) -> dt.DType:
    return default if dtype is None else dt.dtype(dtype, op=op)


def _value_dtype(op: str, *values: Any) -> dt.DType:
    """The dtype of Python or numpy numbers, as pto.tensor would give them."""
    for v in values:
        if isinstance(v, str | bytes) or v is None:  # a str would read as a dtype name
            raise DTypeError(
                f"expected a number, got {type(v).__name__} {v!r}",
                op=op,
                hint="pass an int, a float or a bool",
            )
    return dt.result_type(*values)


def zeros(shape: Any, dtype: Any = None) -> Tensor:
    """A tensor of zeros (float32 by default).

    >>> import pypto as pto
    >>> pto.zeros((2, 3)).shape
    (2, 3)
    """
    try:
        return _wrap(np.zeros(_shape(shape, "zeros"), _dtype("zeros", dtype).np))
    except PyptoError as e:
        raise e.stripped() from None


def ones(shape: Any, dtype: Any = None) -> Tensor:
    """A tensor of ones (float32 by default)."""
    try:
        return _wrap(np.ones(_shape(shape, "ones"), _dtype("ones", dtype).np))
    except PyptoError as e:
        raise e.stripped() from None


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Tensor:
    """A tensor filled with ``fill_value``; the dtype defaults to that of the value."""
    try:
        d = _value_dtype("full", fill_value) if dtype is None else _dtype("full", dtype)
        return _wrap(np.full(_shape(shape, "full"), api.to_numpy(fill_value, "full", d)))
    except PyptoError as e:
        raise e.stripped() from None


def zeros_like(x: Any, dtype: Any = None) -> Tensor:
    """Zeros with the shape (and dtype, unless given) of ``x``."""
    try:
        v = api.asvalue(x, "zeros_like")
        return _wrap(np.zeros(v.shape, _dtype("zeros_like", dtype, v.dtype).np))  # type: ignore[attr-defined]
    except PyptoError as e:
        raise e.stripped() from None


def ones_like(x: Any, dtype: Any = None) -> Tensor:
    """Ones with the shape (and dtype, unless given) of ``x``."""
    try:
        v = api.asvalue(x, "ones_like")
        return _wrap(np.ones(v.shape, _dtype("ones_like", dtype, v.dtype).np))  # type: ignore[attr-defined]
    except PyptoError as e:
        raise e.stripped() from None


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Tensor:
    """``fill_value`` in the shape (and dtype, unless given) of ``x``.

    >>> import pypto as pto
    >>> pto.full_like(pto.zeros((2,), pto.int8), 3).numpy()
    array([3, 3], dtype=int8)
    """
    try:
        v = api.asvalue(x, "full_like")
        d = _dtype("full_like", dtype, v.dtype)  # type: ignore[attr-defined]
        _value_dtype("full_like", fill_value)
        return _wrap(np.full(v.shape, api.to_numpy(fill_value, "full_like", d)))  # type: ignore[attr-defined]
    except PyptoError as e:
        raise e.stripped() from None


def _count(op: str, name: str, n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise ShapeError(f"{name} must be an int, got {n!r}", op=op)
    if n < 0:
        raise ShapeError(f"{name} must be >= 0, got {n}", op=op)
    return int(n)


def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = None) -> Tensor:
    """An ``[n, m]`` matrix (square by default) with ones on diagonal ``k`` (0 the main one,
    positive above it) and zeros elsewhere, float32 by default, as ``jnp.eye``.

    >>> import pypto as pto
    >>> pto.eye(2, 3, 1).numpy()
    array([[0., 1., 0.],
           [0., 0., 1.]], dtype=float32)
    """
    try:
        rows = _count("eye", "n", n)
        cols = rows if m is None else _count("eye", "m", m)
        if isinstance(k, bool) or not isinstance(k, int | np.integer):
            raise ShapeError(f"k must be an int, got {k!r}", op="eye")
        return _wrap(np.eye(rows, cols, int(k), dtype=_dtype("eye", dtype).np))
    except PyptoError as e:
        raise e.stripped() from None


def linspace(
    start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None
) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (included unless ``endpoint`` is
    False), float32 by default, as ``jnp.linspace``; an integer dtype takes the floor.

    >>> import pypto as pto
    >>> pto.linspace(0, 1, 5).numpy()
    array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    try:
        count = _count("linspace", "num", num)
        _value_dtype("linspace", start, stop)
        if not isinstance(endpoint, bool | np.bool_):
            raise DTypeError(f"endpoint must be a bool, got {endpoint!r}", op="linspace")
        d = _dtype("linspace", dtype)
        a = np.linspace(float(start), float(stop), count, endpoint=bool(endpoint))
        return _wrap((np.floor(a) if d.is_integer else a).astype(d.np))
    except PyptoError as e:
        raise e.stripped() from None


def _spaced(op: str, values: np.ndarray, dtype: Any) -> Tensor:
    """Float64 ``values`` rounded once to ``dtype`` (float32 by default; an integer dtype
    truncates, as JAX's cast of its float result does)."""
    d = _dtype(op, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return _wrap((np.trunc(values) if d.is_integer else values).astype(d.np))


def logspace(
    start: Any,
    stop: Any,
    num: int = 50,
    endpoint: bool = True,
    base: Any = 10.0,
    dtype: Any = None,
) -> Tensor:
    """``base ** linspace(start, stop, num)``, float32 by default, as ``jnp.logspace``:
    computed in float64 and rounded once.

    >>> import pypto as pto
    >>> pto.logspace(0, 3, 4).numpy()
    array([   1.,   10.,  100., 1000.], dtype=float32)
    """
    try:
        count = _count("logspace", "num", num)
        _value_dtype("logspace", start, stop, base)
        if not isinstance(endpoint, bool | np.bool_):
            raise DTypeError(f"endpoint must be a bool, got {endpoint!r}", op="logspace")
        exps = np.linspace(float(start), float(stop), count, endpoint=bool(endpoint))
        return _spaced("logspace", np.power(float(base), exps), dtype)
    except PyptoError as e:
        raise e.stripped() from None


def geomspace(
    start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None
) -> Tensor:
    """``num`` values from ``start`` to ``stop`` in geometric progression (both of one sign,
    neither 0), float32 by default, as ``jnp.geomspace``: computed in float64 (the ends
    exact) and rounded once.

    >>> import pypto as pto
    >>> pto.geomspace(1, 1000, 4).numpy()
    array([   1.,   10.,  100., 1000.], dtype=float32)
    """
    try:
        count = _count("geomspace", "num", num)
        _value_dtype("geomspace", start, stop)
        if not isinstance(endpoint, bool | np.bool_):
            raise DTypeError(f"endpoint must be a bool, got {endpoint!r}", op="geomspace")
        a, b = float(start), float(stop)
        if a == 0 or b == 0 or (a < 0) != (b < 0):
            raise ShapeError(
                f"geomspace from {start!r} to {stop!r}: the ends must be nonzero and of one sign",
                op="geomspace",
            )
        return _spaced("geomspace", np.geomspace(a, b, count, endpoint=bool(endpoint)), dtype)
    except PyptoError as e:
        raise e.stripped() from None


def identity(n: int, dtype: Any = None) -> Tensor:
    """The ``[n, n]`` identity matrix (float32 by default), as ``jnp.identity``: :func:`eye`.

    >>> import pypto as pto
    >>> pto.identity(2, pto.int8).numpy()
    array([[1, 0],
           [0, 1]], dtype=int8)
    """
    try:
        return eye(_count("identity", "n", n), dtype=dtype)
    except PyptoError as e:
        raise e.stripped() from None


def empty(shape: Any, dtype: Any = None) -> Tensor:
    """A tensor of ``shape`` (float32 by default). Its values are zeros, as JAX's are: a
    functional array has no uninitialised memory to hand out.

    >>> import pypto as pto
    >>> pto.empty((2,)).numpy()
    array([0., 0.], dtype=float32)
    """
    try:
        return _wrap(np.zeros(_shape(shape, "empty"), _dtype("empty", dtype).np))
    except PyptoError as e:
        raise e.stripped() from None


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Tensor:
    """A 1-d tensor of the bytes of ``buffer`` read as ``dtype``, as ``jnp.frombuffer``:
    ``count`` items (-1: all) from byte ``offset`` on, copied. Python's ``float`` and ``int``
    read 8-byte items, as numpy's do, converted to float32 and int32 as JAX converts them.

    >>> import numpy as np, pypto as pto
    >>> pto.frombuffer(np.array([1.5, 2.0], np.float32).tobytes(), pto.float32).numpy()
    array([1.5, 2. ], dtype=float32)
    """
    try:
        d = _dtype("frombuffer", dtype)
        # (numpy's reading of float and int: float64 and int64 items)
        item = np.dtype(dtype) if dtype in (float, int) else d.np
        try:
            a = np.frombuffer(buffer, item, int(count), int(offset)).astype(d.np)
        except (TypeError, ValueError) as e:
            raise ShapeError(f"{e} (reading {d} from a buffer)", op="frombuffer") from None
        return _wrap(a)
    except PyptoError as e:
        raise e.stripped() from None


def array(object: Any, dtype: Any = None, copy: bool = True, order: str | None = None) -> Tensor:
    """A tensor of ``object``'s values, as ``jnp.array``: :func:`tensor` (always a copy;
    pypto's tensors are immutable, so ``copy`` and ``order`` change nothing).

    >>> import pypto as pto
    >>> pto.array([[1, 2]], pto.int8).numpy()
    array([[1, 2]], dtype=int8)
    """
    return tensor(object, dtype)


def asarray(a: Any, dtype: Any = None, order: str | None = None, *, copy: Any = None) -> Tensor:
    """``a`` as a tensor, as ``jnp.asarray``: a Tensor of the dtype asked is returned as it
    is; anything else is converted (:func:`tensor`).

    >>> import pypto as pto
    >>> x = pto.ones(2)
    >>> pto.asarray(x) is x
    True
    """
    if isinstance(a, Tensor) and (dtype is None or dt.dtype(dtype, op="asarray") is a.dtype):
        return a
    return tensor(a, dtype)


def copy(a: Any) -> Tensor:
    """A tensor with ``a``'s values, as ``jnp.copy``.

    >>> import pypto as pto
    >>> pto.copy(pto.tensor([1.0])).numpy()
    array([1.], dtype=float32)
    """
    return tensor(a)


def empty_like(prototype: Any, dtype: Any = None, shape: Any = None) -> Tensor:
    """Zeros of ``prototype``'s shape and dtype (``shape`` and ``dtype`` override them), as
    ``jnp.empty_like``: a functional array has no uninitialised memory to hand out.

    >>> import pypto as pto
    >>> pto.empty_like(pto.ones((2,), pto.int8)).numpy()
    array([0, 0], dtype=int8)
    """
    try:
        v = api.asvalue(prototype, "empty_like")
        d = _dtype("empty_like", dtype, v.dtype)  # type: ignore[attr-defined]
        s = tuple(v.shape) if shape is None else _shape(shape, "empty_like")  # type: ignore[attr-defined]
        return _wrap(np.zeros(s, d.np))
    except PyptoError as e:
        raise e.stripped() from None


def fromiter(iterable: Any, dtype: Any, count: int = -1) -> Tensor:
    """A 1-d tensor of the first ``count`` (-1: all) items of ``iterable``, as
    ``jnp.fromiter``.

    >>> import pypto as pto
    >>> pto.fromiter((i * i for i in range(4)), pto.int32).numpy()
    array([0, 1, 4, 9], dtype=int32)
    """
    try:
        d = _dtype("fromiter", dtype)
        try:
            a = np.fromiter(iterable, d.np, int(count))
        except ValueError as e:
            raise ShapeError(f"{e} (count={count})", op="fromiter") from None
        return _wrap(a)
    except PyptoError as e:
        raise e.stripped() from None


def fromfunction(function: Any, shape: Any, *, dtype: Any = float, **kwargs: Any) -> Any:
    """``function`` called once with one index tensor per axis (each of ``shape``, of
    ``dtype``: float32 by default), as ``jnp.fromfunction``; its result is returned.

    >>> import pypto as pto
    >>> pto.fromfunction(lambda i, j: i * 10 + j, (2, 3), dtype=pto.int32).numpy()
    array([[ 0,  1,  2],
           [10, 11, 12]], dtype=int32)
    """
    try:
        s = _shape(shape, "fromfunction")
        d = _dtype("fromfunction", dtype)
        grids: Any = np.indices(s, dtype=d.np) if s else []
        return function(*(_wrap(g) for g in grids), **kwargs)
    except PyptoError as e:
        raise e.stripped() from None


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Tensor:
    """Evenly spaced values in [start, stop); int32 for int arguments, else float32.

    >>> import pypto as pto
    >>> pto.arange(4).numpy()
    array([0, 1, 2, 3], dtype=int32)
    """
    try:
        if stop is None:
            start, stop = 0, start
        d = _value_dtype("arange", start, stop, step) if dtype is None else _dtype("arange", dtype)
        if step == 0:
            raise ShapeError("step cannot be zero", op="arange")
        return _wrap(np.arange(start, stop, step).astype(d.np))
    except PyptoError as e:
        raise e.stripped() from None
