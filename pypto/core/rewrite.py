"""Pattern-based local rewriting: a list of rules, each matching one op, applied to a fixpoint.

A rule sees a node and a view of its producers and returns a replacement or None. The level's
driver (e.g. :mod:`pypto.graph.passes.simplify`) decides what a node and a replacement are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    """``fn(node, ctx)`` → replacement or None, tried on nodes whose op is ``op``."""

    name: str
    op: str
    fn: Callable[[Any, Any], Any]


class PatternMatcher:
    """Rules indexed by op name, tried in order; the first that returns a replacement wins."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules
        self.by_op: dict[str, list[Rule]] = {}
        for r in rules:
            self.by_op.setdefault(r.op, []).append(r)

    def rewrite(self, op: str, node: Any, ctx: Any) -> tuple[str, Any] | None:
        for r in self.by_op.get(op, ()):
            out = r.fn(node, ctx)
            if out is not None:
                return r.name, out
        return None
