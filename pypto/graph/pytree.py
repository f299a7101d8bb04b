"""Pytrees: nested tuples, named tuples, lists and dicts (and None) whose leaves are arrays
or scalars."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TreeDef:
    """The structure of a pytree without its leaves; hashable, so it can key a cache."""

    kind: str  # "leaf", "none", "tuple", "namedtuple", "list", "dict"
    children: tuple[TreeDef, ...] = ()
    keys: tuple[Any, ...] = ()  # a dict's keys; a named tuple's class

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = [str(c) for c in self.children]
        if self.kind == "dict":
            return (
                "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(self.keys, inner, strict=True)) + "}"
            )
        if self.kind == "list":
            return "[" + ", ".join(inner) + "]"
        if self.kind == "namedtuple":
            return f"{self.keys[0].__name__}(" + ", ".join(inner) + ")"
        return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"


_LEAF = TreeDef("leaf")
_NONE = TreeDef("none")


def flatten(tree: Any) -> tuple[list[Any], TreeDef]:
    """The leaves in order, and the structure.

    >>> leaves, tree = flatten({"b": 1, "a": (2, [3])})
    >>> leaves, str(tree)
    ([2, 3, 1], "{'a': (*, [*]), 'b': *}")
    >>> from typing import NamedTuple
    >>> class Pair(NamedTuple):
    ...     x: int
    ...     y: int
    >>> unflatten(flatten(Pair(1, 2))[1], [3, 4])
    Pair(x=3, y=4)
    """
    leaves: list[Any] = []
    return leaves, _flatten(tree, leaves)


def _flatten(t: Any, leaves: list[Any]) -> TreeDef:
    if t is None:
        return _NONE
    tt = type(t)
    if tt is tuple or tt is list:
        return TreeDef("tuple" if tt is tuple else "list", tuple(_flatten(c, leaves) for c in t))
    if isinstance(t, tuple) and hasattr(tt, "_fields"):  # a named tuple, as JAX takes it
        return TreeDef("namedtuple", tuple(_flatten(c, leaves) for c in t), (tt,))
    if tt is dict:
        keys = tuple(sorted(t))
        return TreeDef("dict", tuple(_flatten(t[k], leaves) for k in keys), keys)
    leaves.append(t)
    return _LEAF


def unflatten(td: TreeDef, leaves: Any) -> Any:
    """Rebuild a pytree of structure ``td`` from an iterable of leaves."""
    it = iter(leaves)
    return _unflatten(td, it)


def _unflatten(td: TreeDef, it: Any) -> Any:
    if td.kind == "leaf":
        return next(it)
    if td.kind == "none":
        return None
    kids = [_unflatten(c, it) for c in td.children]
    if td.kind == "tuple":
        return tuple(kids)
    if td.kind == "list":
        return kids
    if td.kind == "namedtuple":
        return td.keys[0](*kids)
    return dict(zip(td.keys, kids, strict=True))
