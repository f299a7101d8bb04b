"""Where an op application goes: the stack of active traces.

Eager evaluation is the bottom of the stack; a graph tracer pushes itself while it stages a
function. Every op reaches the current trace through :func:`bind`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from pypto.core.errors import PyptoError

if TYPE_CHECKING:
    from pypto.ops.table import Op


class Trace(Protocol):
    """Something that applies ops to its own kind of values."""

    def process(self, op: Op, args: tuple[Any, ...], params: dict[str, Any]) -> Any: ...


_stack: list[Trace] = []


def set_base_trace(trace: Trace) -> None:
    """Install the bottom-of-stack trace (eager evaluation); called once on import."""
    if _stack:
        _stack[0] = trace
    else:
        _stack.append(trace)


def current_trace() -> Trace:
    return _stack[-1]


def eager_trace() -> Trace:
    """The bottom of the stack: push it to compute something eagerly inside a trace (a value
    that depends on static arguments alone)."""
    return _stack[0]


def is_eager() -> bool:
    return len(_stack) == 1


@contextmanager
def pushed(trace: Trace) -> Iterator[Trace]:
    _stack.append(trace)
    try:
        yield trace
    finally:
        _stack.pop()


def bind(op: Op, args: tuple[Any, ...], params: dict[str, Any]) -> Any:
    """Apply ``op`` to ``args`` in the current trace; user errors leave without internal frames."""
    try:
        return _stack[-1].process(op, args, params)
    except PyptoError as e:
        raise e.stripped() from None
