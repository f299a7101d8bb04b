"""The per-op lowering hints in force while ops are traced (``with pto.hint(...)``).

A hint is a sorted tuple of ``(key, value)`` pairs — ``vec``, ``cube``, ``cores``, ``swizzle``,
``double_buffer`` — already checked by :func:`pypto.tile.config.hint`. It lives here, in the
ground, because the tracer (``graph``) records it on equations and the tile level reads it
back; neither may import the other.

>>> with hinted((("cores", 4),)):
...     with hinted((("cores", 2), ("swizzle", 1))):
...         current()
(('cores', 2), ('swizzle', 1))
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

__all__ = ["Hint", "current", "hinted", "merge", "replaced"]

Hint = tuple[tuple[str, Any], ...]

_CURRENT: contextvars.ContextVar[Hint] = contextvars.ContextVar("pypto_hint", default=())


def current() -> Hint:
    """The hint that ops traced now carry (empty outside any ``pto.hint`` block)."""
    return _CURRENT.get()


def merge(outer: Hint, inner: Hint) -> Hint:
    """``inner`` over ``outer``: the inner value wins for every key it sets."""
    return tuple(sorted({**dict(outer), **dict(inner)}.items()))


@contextlib.contextmanager
def hinted(h: Hint) -> Iterator[Hint]:
    """Add ``h`` over the hint in force for the block."""
    with replaced(merge(current(), h)) as now:
        yield now


@contextlib.contextmanager
def replaced(h: Hint) -> Iterator[Hint]:
    """Exactly ``h`` for the block (re-binding recorded equations keeps their own hint)."""
    token = _CURRENT.set(h)
    try:
        yield h
    finally:
        _CURRENT.reset(token)
