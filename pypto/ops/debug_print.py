"""The ``debug_print`` primitive: ``pto.debug.print`` inside a trace.

The equation's inputs are the values to print, its parameters the format string, the names
of the keyword arguments (the last inputs) and ``id``, which tells two calls apart (so CSE
does not merge them) while a replay of one call keeps it (so CSE merges the replay into the
call). Its output is a bool token nobody reads. It is the one op of kind ``"effect"``: the
tensor passes keep it although nothing uses its output and never fold it; autodiff does not
replay it in the backward pass (the forward printed already); ``jit`` moves it out of the
program before the passes (:func:`pypto.graph.prints.extract`): its inputs become extra
outputs, printed once the program has run, so on the NPU the values printed are those the
simulated chip computed.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from pypto import dtypes as dt
from pypto.ops.table import AVal, Cost, Op, register, register_rule

__all__ = ["DEBUG_PRINT", "format_values", "new_id"]

_IDS = itertools.count()


def new_id() -> int:
    """A fresh ``id`` for a call of ``pto.debug.print``."""
    return next(_IDS)


def format_values(fmt: str, keys: tuple[str, ...], arrays: list[Any]) -> str:
    """``fmt`` formatted with the positional values, then the keyword ones (``keys``), as
    numpy arrays: as JAX formats them (a 0-d array formats as its item, a float32 as the
    double it converts to)."""
    vals = [np.asarray(a) for a in arrays]
    n = len(vals) - len(keys)
    return fmt.format(*vals[:n], **dict(zip(keys, vals[n:], strict=True)))


def _impl(*arrays: np.ndarray, fmt: str, keys: tuple[str, ...] = (), id: int = 0) -> np.ndarray:
    print(format_values(fmt, keys, list(arrays)), flush=True)
    return np.asarray(True)


def _jax(*args: Any, fmt: str, keys: tuple[str, ...] = (), id: int = 0) -> Any:
    import jax
    import jax.numpy as jnp

    n = len(args) - len(keys)
    jax.debug.print(fmt, *args[:n], **dict(zip(keys, args[n:], strict=True)))
    return jnp.asarray(True)


DEBUG_PRINT = register(
    Op(
        name="debug_print",
        kind="effect",
        doc="`pto.debug.print` under a trace: prints its inputs when the program runs",
        shape_rule=lambda *avals, **params: (),
        dtype_rule=lambda *avals, **params: dt.bool_,
        impl=_impl,
        jax_impl=_jax,
        # (the values it prints are read; nothing is computed)
        cost_rule=lambda *avals, out, **params: Cost(
            0, "none", sum(a.nbytes for a in avals), out.nbytes
        ),
        differentiable=False,
        dtypes=dt.ALL,
    )
)


@register_rule("batch", "debug_print")
def _batch(args: list[Any], batched: list[bool], size: int, out: AVal, **params: Any) -> Any:
    """Under ``vmap`` each example prints, in order (as JAX prints them)."""
    from pypto.core import dispatch
    from pypto.ops import api

    for i in range(size):
        one = [api.getitem(a, i) if b else a for a, b in zip(args, batched, strict=True)]
        dispatch.bind(DEBUG_PRINT, tuple(one), params)
    return api.broadcast_to(api.asvalue(np.asarray(True)), (size,))
