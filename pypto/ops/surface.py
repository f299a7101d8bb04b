"""The Tensor surface: operators and methods shared by eager tensors and graph tracers.

A value type subclasses :class:`TensorSurface`, provides ``shape`` and ``dtype``, and gets the
whole numpy-like surface, every method written once in terms of the functional API. Methods are
the API functions themselves where the signatures agree, so an error's traceback shows one
pypto frame; the others re-raise a PyptoError with ``e.stripped()``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pypto import dtypes as dt
from pypto.core.errors import ConversionError, DTypeError, PyptoError, TraceError
from pypto.ops import api, composite, indexing
from pypto.ops.table import Value


def _reflected(fn: Any) -> Any:
    """``other <op> self`` as the method ``self.__r<op>__(other)``."""

    def method(self: Any, other: Any) -> Any:
        try:
            return fn(other, self)
        except PyptoError as e:
            raise e.stripped() from None

    method.__name__ = method.__qualname__ = f"reflected_{fn.__name__}"
    return method


def _dims(args: tuple[Any, ...]) -> Any:
    """``f(2, 3)`` and ``f((2, 3))`` both mean the dims (2, 3)."""
    if len(args) == 1 and not isinstance(args[0], int):
        return args[0]
    return args


def _logical(sym: str, fn: Any, bitwise: Any, reflected: bool = False) -> Any:
    """The operator ``sym``: ``fn`` (logical_and, ...) when every operand is bool, else
    ``bitwise`` (bitwise_and, ...), as numpy's operator is on integers; floats are refused
    by the bitwise function, with a message that names the operator's two meanings."""

    def method(self: Any, *other: Any) -> Any:
        args = (*other, self) if reflected else (self, *other)
        try:
            vals = [api.asvalue(a, fn.__name__) for a in args]
            if all(v.dtype is dt.bool_ for v in vals):  # type: ignore[attr-defined]
                return fn(*vals)
            if any(v.dtype.is_floating for v in vals):  # type: ignore[attr-defined]
                shown = " and ".join(str(api._aval(v)) for v in vals)
                mask = f"(x > 0) {sym} (y > 0)" if sym != "~" else "~(x > 0)"
                raise DTypeError(
                    f"{sym} of {shown}: {sym} is logical on bool tensors and bitwise on "
                    "integers; a float has no bits to combine",
                    op=bitwise.__name__,
                    hint=f"for a mask, compare first, e.g. {mask}; for bits, cast to an integer",
                )
            return bitwise(*args)  # the originals: a Python int stays weak
        except PyptoError as e:
            raise e.stripped() from None

    method.__name__ = method.__qualname__ = f"op_{fn.__name__}"
    return method


class TensorSurface(Value):
    """Operators ``+ - * / @ ** -``, comparisons, basic indexing, and the reduction methods."""

    __slots__ = ()
    # numpy defers to our reflected operators instead of converting us to an array.
    __array_ufunc__ = None
    __hash__ = None  # type: ignore[assignment]  # == is elementwise, as in numpy and JAX

    shape: tuple[int, ...]
    dtype: dt.DType

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise ConversionError(
                f"len() of a 0-d tensor {api._aval(self)}",
                op="len",
                hint="a 0-d tensor has no length",
            )
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        if not self.shape:
            raise ConversionError(
                f"iteration over a 0-d tensor {api._aval(self)}",
                op="iter",
                hint="a 0-d tensor has no elements to iterate; use float(x) or x.item()",
            )
        for i in range(self.shape[0]):
            yield api.getitem(self, i)

    __add__ = api.add
    __radd__ = _reflected(api.add)
    __sub__ = api.sub
    __rsub__ = _reflected(api.sub)
    __mul__ = api.mul
    __rmul__ = _reflected(api.mul)
    __truediv__ = api.div
    __rtruediv__ = _reflected(api.div)
    __pow__ = api.pow
    __rpow__ = _reflected(api.pow)
    __floordiv__ = composite.floor_divide
    __rfloordiv__ = _reflected(composite.floor_divide)
    __mod__ = composite.remainder
    __rmod__ = _reflected(composite.remainder)
    __matmul__ = api.matmul
    __rmatmul__ = _reflected(api.matmul)
    __neg__ = api.neg
    __abs__ = api.abs

    def __pos__(self) -> Any:
        return self

    __and__ = _logical("&", composite.logical_and, api.bitwise_and)
    __rand__ = _logical("&", composite.logical_and, api.bitwise_and, reflected=True)
    __or__ = _logical("|", composite.logical_or, api.bitwise_or)
    __ror__ = _logical("|", composite.logical_or, api.bitwise_or, reflected=True)
    __xor__ = _logical("^", composite.logical_xor, api.bitwise_xor)
    __rxor__ = _logical("^", composite.logical_xor, api.bitwise_xor, reflected=True)
    __invert__ = _logical("~", composite.logical_not, api.bitwise_not)
    __lshift__ = api.left_shift
    __rlshift__ = _reflected(api.left_shift)
    __rshift__ = api.right_shift
    __rrshift__ = _reflected(api.right_shift)

    __eq__ = api.equal
    __ne__ = api.not_equal
    __lt__ = api.less
    __le__ = api.less_equal
    __gt__ = api.greater
    __ge__ = api.greater_equal
    __getitem__ = api.getitem

    def __setitem__(self, key: Any, value: Any) -> None:
        # immutable, as JAX arrays are: an in-place write cannot be staged into a graph
        raise TypeError(
            f"tensors are immutable: x[...] = ... cannot change {api._aval(self)}; build the "
            "new tensor instead: x = x.at[key].set(value) (or .add, ...), as in JAX"
        )

    @property
    def at(self) -> indexing.IndexUpdateHelper:
        """JAX's functional updates: ``x.at[key].set(y)``, ``.add(y)``, ``.get()``, ...
        (see :class:`pypto.ops.indexing.IndexUpdateHelper`)."""
        return indexing.IndexUpdateHelper(self)

    @property
    def T(self) -> Any:
        """The tensor with its axes reversed."""
        return api.transpose(self)

    def astype(self, dtype: Any) -> Any:
        try:
            return api.cast(self, dtype)
        except PyptoError as e:
            raise e.stripped() from None

    def view(self, dtype: Any) -> Any:
        """numpy's ``a.view(dtype)``: the same bits as ``dtype`` (of the same element size)."""
        try:
            return api.bitcast_convert_type(self, dtype)
        except PyptoError as e:
            raise e.stripped() from None

    def reshape(self, *shape: Any) -> Any:
        try:
            return api.reshape(self, _dims(shape))
        except PyptoError as e:
            raise e.stripped() from None

    def transpose(self, *axes: Any) -> Any:
        try:
            return api.transpose(self, _dims(axes) if axes else None)
        except PyptoError as e:
            raise e.stripped() from None

    # (x, axis=None, keepdims=False): the functions are the methods.
    sum = api.sum
    max = api.max
    min = api.min
    mean = composite.mean
    var = composite.var
    std = composite.std
    argmax = api.argmax
    argmin = composite.argmin
    any = composite.any
    all = composite.all
    clip = composite.clip
    squeeze = composite.squeeze
    cumsum = composite.cumsum
    cumprod = composite.cumprod
    sort = composite.sort
    argsort = composite.argsort
    prod = composite.prod
    swapaxes = composite.swapaxes

    def flatten(self) -> Any:
        """The elements as a 1-d tensor, in row-major order."""
        try:
            return api.reshape(self, (-1,))
        except PyptoError as e:
            raise e.stripped() from None

    ravel = flatten

    # Concrete Python values need data; a tracer refuses them with a TraceError.
    def _concrete(self, what: str) -> Any:
        raise TraceError(
            f"{what}() needs a concrete value, but this tensor {api._aval(self)} is traced",
            op=what,
            hint="use pto.where(cond, x, y) for data-dependent choices, pto.lax.cond for branches",
        )

    def __bool__(self) -> bool:
        try:
            return bool(self._concrete("bool"))
        except PyptoError as e:
            raise e.stripped() from None

    def __int__(self) -> int:
        try:
            return int(self._concrete("int"))
        except PyptoError as e:
            raise e.stripped() from None

    def __float__(self) -> float:
        try:
            return float(self._concrete("float"))
        except PyptoError as e:
            raise e.stripped() from None

    def __index__(self) -> int:
        if not self.dtype.is_integer:
            raise DTypeError(
                f"only integer tensors can be used as an index, not {api._aval(self)}",
                op="index",
                hint="cast it first, e.g. x.astype(pto.int32)",
            )
        try:
            return int(self._concrete("index"))
        except PyptoError as e:
            raise e.stripped() from None

    def item(self) -> Any:
        """The value of a one-element tensor as a Python scalar."""
        try:
            return self._concrete("item")
        except PyptoError as e:
            raise e.stripped() from None
