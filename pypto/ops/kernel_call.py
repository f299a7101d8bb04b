"""The ``kernel_call`` primitive: a hand-written tile kernel applied to tensors.

A kernel (``@pto.kernel``, :mod:`pypto.tile.language`) is a Python function over tiles; the op
table knows it only through the small protocol below, so ``ops`` stays free of the levels
that build and run kernels. The equation names its kernel by ``kernel='name'`` (the text
round-trips through :data:`KERNELS`) and carries the kernel's static keyword arguments as
its other parameters. Eagerly and in the IR interpreter the kernel runs in interpret mode,
tile by tile on numpy; at the Tile level it is traced into one Tile IR kernel.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import TraceError
from pypto.ops.table import AVal, Cost, Op, Shape, register, register_rule

__all__ = ["KERNELS", "KernelLike", "find"]


class KernelLike(Protocol):
    """What the op table needs of a kernel."""

    name: str

    def out_aval(self, avals: tuple[AVal, ...], static: dict[str, Any]) -> AVal: ...

    def interpret(self, arrays: tuple[np.ndarray, ...], static: dict[str, Any]) -> np.ndarray: ...

    def jax(self, args: tuple[Any, ...], static: dict[str, Any]) -> Any: ...

    def cost(self, avals: tuple[AVal, ...], static: dict[str, Any]) -> Cost: ...


KERNELS: dict[str, KernelLike] = {}
"""Every kernel defined in this process, by its unique name."""


def find(name: str) -> KernelLike:
    k = KERNELS.get(name)
    if k is None:
        raise TraceError(
            f"no kernel named {name!r} is defined in this process",
            op="kernel_call",
            hint="define the @pto.kernel function (import its module) before using its IR",
        )
    return k


def _split(params: dict[str, Any]) -> tuple[KernelLike, dict[str, Any]]:
    static = dict(params)
    return find(static.pop("kernel")), static


def _shape(*avals: AVal, **params: Any) -> Shape:
    k, static = _split(params)
    return k.out_aval(avals, static).shape


def _dtype(*avals: AVal, **params: Any) -> dt.DType:
    k, static = _split(params)
    return k.out_aval(avals, static).dtype


def _impl(*arrays: np.ndarray, **params: Any) -> np.ndarray:
    k, static = _split(params)
    return k.interpret(arrays, static)


def _jax(*args: Any, **params: Any) -> Any:
    k, static = _split(params)
    return k.jax(args, static)


def _cost(*avals: AVal, out: AVal, **params: Any) -> Cost:
    k, static = _split(params)
    return k.cost(avals, static)


KERNEL_CALL = register(
    Op(
        name="kernel_call",
        kind="kernel",
        doc="a hand-written tile kernel (`@pto.kernel`) applied to tensors",
        shape_rule=_shape,
        dtype_rule=_dtype,
        impl=_impl,
        jax_impl=_jax,
        cost_rule=_cost,
        differentiable=False,
    )
)


@register_rule("vjp", "kernel_call")
def _no_vjp(ct: Any, *args: Any, out: Any = None, **params: Any) -> Any:
    # A kernel is opaque to autodiff: refusing beats the silent zero a non-differentiable
    # op would give.
    raise TraceError(
        f"cannot differentiate through the hand-written kernel @{params['kernel']}",
        op="grad",
        hint="give it a backward with pto.custom_vjp (defvjp(fwd, bwd))",
    )
