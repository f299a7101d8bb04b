"""The Tensor surface: operators and methods shared by eager tensors and graph tracers.

A value type subclasses :class:`TensorSurface`, provides ``shape`` and ``dtype``, and gets the
whole numpy-like surface, every method written once in terms of the functional API.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from pypto import dtypes as dt
from pypto.core.errors import TraceError
from pypto.ops import api, composite
from pypto.ops.table import Value


def _dims(args: tuple[Any, ...]) -> Any:
    """``f(2, 3)`` and ``f((2, 3))`` both mean the dims (2, 3)."""
    if len(args) == 1 and not isinstance(args[0], int):
        return args[0]
    return args


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
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Any]:
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self.shape[0]):
            yield api.getitem(self, i)

    __add__ = api.add

    def __radd__(self, o: Any) -> Any:
        return api.add(o, self)

    __sub__ = api.sub

    def __rsub__(self, o: Any) -> Any:
        return api.sub(o, self)

    __mul__ = api.mul

    def __rmul__(self, o: Any) -> Any:
        return api.mul(o, self)

    __truediv__ = api.div

    def __rtruediv__(self, o: Any) -> Any:
        return api.div(o, self)

    __pow__ = api.pow

    def __rpow__(self, o: Any) -> Any:
        return api.pow(o, self)

    __matmul__ = api.matmul

    def __rmatmul__(self, o: Any) -> Any:
        return api.matmul(o, self)

    __neg__ = api.neg

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        return api.abs(self)

    def __eq__(self, o: object) -> Any:
        return api.equal(self, o)

    def __ne__(self, o: object) -> Any:
        return api.not_equal(self, o)

    __lt__ = api.less

    __le__ = api.less_equal

    __gt__ = api.greater

    __ge__ = api.greater_equal

    def __getitem__(self, key: Any) -> Any:
        return api.getitem(self, key)

    @property
    def T(self) -> Any:
        """The tensor with its axes reversed."""
        return api.transpose(self)

    def astype(self, dtype: Any) -> Any:
        return api.cast(self, dtype)

    def reshape(self, *shape: Any) -> Any:
        return api.reshape(self, _dims(shape))

    def transpose(self, *axes: Any) -> Any:
        return api.transpose(self, _dims(axes) if axes else None)

    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
        return api.sum(self, axis, keepdims)

    def max(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
        return api.max(self, axis, keepdims)

    def min(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
        return api.min(self, axis, keepdims)

    def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
        return composite.mean(self, axis, keepdims)

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Any:
        return api.argmax(self, axis, keepdims)

    # Concrete Python values need data; a tracer refuses them with a TraceError.
    def _concrete(self, what: str) -> Any:
        raise TraceError(
            f"{what} needs a concrete value, but this tensor is traced",
            op=what,
            hint="use pto.where(cond, x, y) for data-dependent choices",
        )

    def __bool__(self) -> bool:
        return bool(self._concrete("bool"))

    def __int__(self) -> int:
        return int(self._concrete("int"))

    def __float__(self) -> float:
        return float(self._concrete("float"))

    def __index__(self) -> int:
        if not self.dtype.is_integer:
            raise TypeError(f"only integer tensors can be used as an index, not {self.dtype}")
        return int(self._concrete("index"))

    def item(self) -> Any:
        return self._concrete("item")
