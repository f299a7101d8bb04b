"""Python's cyclic garbage collector paused around the compiler and the simulator.

Both allocate hundreds of thousands of objects that stay live until they finish (IR nodes,
per-instruction closures, shadow entries), and each full collection rescans them and the
rest of the process without finding garbage: half the time of compiling or simulating a
20,000-instruction kernel.

>>> import gc
>>> with gc_paused():
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off inside the block, and back on after it (if it was on), whether
    the block ends or raises; the cycles made meanwhile are collected then. Nested uses
    leave it to the outermost."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
