"""pypto's benchmarks: groups of timed rows, run by ``python -m bench`` (``make bench``).

A benchmark group is one module of this package. At import it registers a :class:`Group`: a
name, a title, the columns of its table and a ``run(settings)`` function that yields rows
(plain JSON-serialisable dicts). The runner (``bench/__main__.py``) imports the modules listed
in :data:`GROUP_MODULES`, runs the selected groups, prints one markdown table per group and
writes ``bench/results/<group>.json`` and ``bench/results/latest.json``.

To add a group (compile time, simulator throughput, roofline efficiency, ...): write
``bench/<name>.py`` ending in ``register(Group(...))`` and append it to ``GROUP_MODULES``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]
"""One result: JSON-serialisable values keyed by name (the table's columns pick from them)."""

GROUP_MODULES: tuple[str, ...] = (
    "bench.eager_overhead",
    "bench.graph_compile",
    "bench.npu_sim",
    "bench.lowering",
    "bench.kernels",
)
"""The modules that define benchmark groups, in the order the runner runs them."""


@dataclass(frozen=True)
class Settings:
    """How hard to measure: ``quick`` trades precision for speed (smoke tests)."""

    quick: bool = False
    repeats: int = 201
    """Timed batches per candidate; the reported time is their median."""
    batch_seconds: float = 0.002
    """Target duration of one batch; small ops loop many times inside a batch."""
    case_seconds: float = 10.0
    """Time budget of one row: slow rows (or a loaded machine) get fewer, never < 11, batches."""

    @classmethod
    def for_mode(cls, quick: bool) -> Settings:
        return cls(quick=True, repeats=3, batch_seconds=0.001, case_seconds=1.0) if quick else cls()


def _text(v: Any) -> str:
    return "" if v is None else str(v)


@dataclass(frozen=True)
class Column:
    """A table column: its header, the row key it shows, how to format and align that value."""

    header: str
    key: str
    fmt: Callable[[Any], str] = _text
    align: str = "left"
    """``"left"`` or ``"right"`` (numbers)."""


@dataclass(frozen=True)
class Group:
    """A benchmark group: ``run(settings)`` yields rows, ``columns`` say how to print them."""

    name: str
    title: str
    columns: tuple[Column, ...]
    run: Callable[[Settings], Iterator[Row]]
    notes: tuple[str, ...] = field(default=())
    """Lines printed under the table (how to read it)."""


_REGISTRY: dict[str, Group] = {}


def register(group: Group) -> Group:
    """Add ``group`` to the registry (a module calls this once, at import)."""
    if group.name in _REGISTRY and _REGISTRY[group.name] is not group:
        raise ValueError(f"benchmark group {group.name!r} is registered twice")
    _REGISTRY[group.name] = group
    return group


def groups() -> dict[str, Group]:
    """Every registered group by name, in registration order, after loading the group modules."""
    for module in GROUP_MODULES:
        importlib.import_module(module)
    return dict(_REGISTRY)
