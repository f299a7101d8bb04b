"""The ``custom_vjp_call`` primitive: a call of a function with a user-defined backward.

A ``pto.custom_vjp`` or ``pto.custom_jvp`` function (:mod:`pypto.graph.custom_vjp`) traced
inside a transform is recorded as one equation, so autodiff applies its backward (for a
``custom_jvp``, its JVP rule transposed) instead of differentiating its body.
The op table knows such a function only through the protocol below (``ops`` imports no level).
The equation names its function by ``fn='name'`` (the text round-trips through :data:`CALLS`);
a function returning several tensors gives one equation per result, told apart by
``result=i``. The tensor passes inline the body before tiling, so lower levels never see it.
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import TraceError
from pypto.ops.table import AVal, Cost, Op, Shape, register, register_rule

__all__ = ["CALLS", "CallLike", "CallName", "find"]


class CallLike(Protocol):
    """What the op table needs of a function with a custom backward."""

    name: str

    def out_aval(self, avals: tuple[AVal, ...], result: int) -> AVal: ...

    def interpret(self, arrays: tuple[np.ndarray, ...], result: int) -> np.ndarray: ...

    def jax(self, args: tuple[Any, ...], result: int) -> Any: ...

    def cost(self, avals: tuple[AVal, ...], result: int) -> Cost: ...

    def vjp(self, ct: Any, args: tuple[Any, ...], result: int) -> tuple[Any, ...]: ...


CALLS: weakref.WeakValueDictionary[str, CallLike] = weakref.WeakValueDictionary()
"""Every live ``pto.custom_vjp`` function, by its unique name. Weak: an equation's ``fn``
parameter is a :class:`CallName`, which holds its function, so a function lives as long as
the user or a graph that calls it does (a ``cond`` traced on every call of a gradient is
not kept for the rest of the process)."""


class CallName(str):
    """A custom_vjp function's name (what the text form prints) that holds the function."""

    call: CallLike

    def __new__(cls, name: str, call: CallLike) -> CallName:
        out = super().__new__(cls, name)
        out.call = call
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        return (str, (str(self),))  # copies and pickles are the plain name


def find(name: str) -> CallLike:
    c = CALLS.get(name)
    if c is None:
        raise TraceError(
            f"no custom_vjp function named {name!r} is defined in this process",
            op="custom_vjp_call",
            hint="define the @pto.custom_vjp function (import its module) before using its IR",
        )
    return c


def _shape(*avals: AVal, fn: str, result: int = 0) -> Shape:
    return find(fn).out_aval(avals, result).shape


def _dtype(*avals: AVal, fn: str, result: int = 0) -> dt.DType:
    return find(fn).out_aval(avals, result).dtype


def _impl(*arrays: np.ndarray, fn: str, result: int = 0) -> np.ndarray:
    return find(fn).interpret(arrays, result)


def _jax(*args: Any, fn: str, result: int = 0) -> Any:
    return find(fn).jax(args, result)


def _cost(*avals: AVal, out: AVal, fn: str, result: int = 0) -> Cost:
    return find(fn).cost(avals, result)


CUSTOM_VJP_CALL = register(
    Op(
        name="custom_vjp_call",
        kind="call",
        doc="a call of a `pto.custom_vjp` or `pto.custom_jvp` function: its body forward, its "
        "own rule backward",
        shape_rule=_shape,
        dtype_rule=_dtype,
        impl=_impl,
        jax_impl=_jax,
        cost_rule=_cost,
    )
)


@register_rule("vjp", "custom_vjp_call")
def _vjp(ct: Any, *args: Any, out: Any = None, fn: str, result: int = 0) -> tuple[Any, ...]:
    return find(fn).vjp(ct, args, result)
