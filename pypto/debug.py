"""``pto.debug``: printing from inside staged code, as ``jax.debug``.

>>> import pypto as pto
>>> @pto.jit
... def f(x):
...     y = pto.exp(x)
...     pto.debug.print("y = {y}, its sum {}", y.sum(), y=y)
...     return y * 2
>>> _ = f(pto.zeros(3))
y = [1. 1. 1.], its sum 3.0
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from pypto.core import dispatch
from pypto.core.errors import TraceError
from pypto.ops import api
from pypto.ops.debug_print import DEBUG_PRINT, format_values, new_id

__all__ = ["print"]


def print(fmt: str, *args: Any, ordered: bool = False, **kwargs: Any) -> None:
    """Print ``fmt.format(*args, **kwargs)`` with the values the program computes, as
    ``jax.debug.print``: at once eagerly; under ``jit``, ``grad``, ``vmap`` and the loops, when
    the staged program runs (once per run, once per unrolled iteration, once per example of
    a ``vmap``), on either backend — on the NPU, with the values the simulated chip computed.
    Values format as numpy arrays, as JAX formats them.

    Prints come out in program order after the program has run (``ordered`` is accepted:
    they are always ordered). ``grad`` prints the forward's values once. In a ``cond`` whose
    predicate is traced every branch runs, and so does every branch's print. Arguments are
    tensors, arrays or numbers; a format the values do not fit is a ``TraceError`` at the
    call.
    """
    if not isinstance(fmt, str):
        raise TraceError(
            f"debug.print needs a format string first, got {type(fmt).__name__}",
            op="debug.print",
            hint='e.g. pto.debug.print("x = {}", x)',
        )
    keys = tuple(kwargs)
    vals = []
    for i, a in enumerate((*args, *kwargs.values())):
        if isinstance(a, tuple | list | dict) or a is None:
            what = f"argument {i}" if i < len(args) else f"argument {keys[i - len(args)]!r}"
            raise TraceError(
                f"debug.print: {what} is a {type(a).__name__}; it prints tensors and numbers",
                op="debug.print",
                hint="pass the leaves as separate arguments",
            )
        vals.append(api.asvalue(a, "debug.print"))
    if dispatch.is_eager():
        builtins.print(format_values(fmt, keys, [np.asarray(v) for v in vals]), flush=True)
        return
    # the format must fit the values: check it now, at the caller's line, with stand-ins
    probe = [np.zeros(tuple(v.shape), v.dtype.np) for v in vals]  # type: ignore[attr-defined]
    try:
        format_values(fmt, keys, probe)
    except (IndexError, KeyError, ValueError, TypeError) as e:
        raise TraceError(
            f"debug.print: the format {fmt!r} does not fit the values "
            f"({', '.join(str(api._aval(v)) for v in vals)}): {type(e).__name__}: {e}",
            op="debug.print",
        ) from None
    params = {"fmt": fmt, "keys": keys, "id": new_id()}
    dispatch.bind(DEBUG_PRINT, tuple(vals), params)
