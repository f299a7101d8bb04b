"""Passes and the one pass manager that runs them (every level uses it).

A :class:`Pass` is a named pure function from IR to IR. The :class:`PassManager` runs a list
of them, optionally verifying after each and keeping before/after snapshots for the views.

>>> p = Pass("double", lambda n: n * 2)
>>> out, snaps = PassManager((p, p), snapshots=True).run(3)
>>> out, [s.name for s in snaps]
(12, ['double', 'double'])
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


def verify_default() -> bool:
    """Verification after every pass: on in tests (PYPTO_VERIFY=1), off by default for speed."""
    return os.environ.get("PYPTO_VERIFY", "") not in ("", "0")


@dataclass(frozen=True)
class Pass:
    """A named IR → IR function."""

    name: str
    fn: Callable[[Any], Any]

    def __call__(self, ir: Any) -> Any:
        return self.fn(ir)


def ir_pass(name: str) -> Callable[[Callable[[Any], Any]], Pass]:
    """Decorator making a function a :class:`Pass` called ``name``."""

    def deco(fn: Callable[[Any], Any]) -> Pass:
        return Pass(name, fn)

    return deco


@dataclass(frozen=True)
class Snapshot:
    """One pass's effect: the IR text before and after, and how long it took."""

    name: str
    before: str
    after: str
    seconds: float

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True)
class PassManager:
    """Runs ``passes`` in order; ``verify`` calls ``ir.verify()`` after each one."""

    passes: Sequence[Pass]
    verify: bool | None = None
    snapshots: bool = False

    def run(self, ir: Any) -> tuple[Any, list[Snapshot]]:
        check = verify_default() if self.verify is None else self.verify
        snaps: list[Snapshot] = []
        for p in self.passes:
            before = str(ir) if self.snapshots else ""
            t0 = time.perf_counter()
            ir = p(ir)
            dt = time.perf_counter() - t0
            if check and hasattr(ir, "verify"):
                ir.verify()
            if self.snapshots:
                snaps.append(Snapshot(p.name, before, str(ir), dt))
        return ir, snaps
