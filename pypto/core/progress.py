"""Progress bars for compile and simulation stages that take longer than a second.

Bars appear only after a second (tqdm's ``delay``), in notebooks as widgets and in terminals
as text; ``PYPTO_PROGRESS=0`` turns them off.

>>> with stages("compile f", ["trace", "lower"]) as step:
...     step("trace")
...     step("lower")
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["counter", "enabled", "stages"]


def enabled() -> bool:
    return os.environ.get("PYPTO_PROGRESS", "1") not in ("0", "")


def _tqdm(**kw: Any) -> Any:
    from tqdm.auto import tqdm

    return tqdm(delay=1.0, leave=False, disable=not enabled(), **kw)


@contextlib.contextmanager
def stages(desc: str, names: list[str]) -> Iterator[Callable[[str], None]]:
    """A bar over named stages: call ``step(name)`` as each one starts."""
    bar = _tqdm(total=len(names), desc=desc, unit="stage")
    started = 0

    def step(name: str) -> None:
        nonlocal started
        if started:
            bar.update(1)
        started += 1
        bar.set_postfix_str(name, refresh=False)

    try:
        yield step
        bar.update(bar.total - bar.n)
    finally:
        bar.close()


@contextlib.contextmanager
def counter(desc: str, unit: str) -> Iterator[Callable[[float], None]]:
    """A bar without a known end: call ``at(value)`` with the amount done so far."""
    bar = _tqdm(desc=desc, unit=unit, unit_scale=True)

    def at(value: float) -> None:
        bar.update(value - bar.n)

    try:
        yield at
    finally:
        bar.close()
