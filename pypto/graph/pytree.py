"""Pytrees: nested tuples, named tuples, lists and dicts (and None) whose leaves are arrays
or scalars, plus the node types registered here (``register_pytree_node``, dataclasses by
``register_dataclass``) or with JAX's own registry (a Flax or Equinox module, say).

The public namespaces are ``pto.tree_util`` and ``pto.tree``, as ``jax.tree_util`` and
``jax.tree``: the same names, the same leaf order (dict keys sorted, as JAX sorts them), the
same paths (``DictKey``, ``SequenceKey``, ``GetAttrKey``, ``FlattenedIndexKey``).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pypto.core.errors import TraceError

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "Partial",
    "SequenceKey",
    "TreeDef",
    "all_leaves",
    "flatten",
    "flatten_up_to",
    "flatten_with_path",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "tree_all",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_transpose",
    "unflatten",
]

IsLeaf = Callable[[Any], bool] | None


@dataclass(frozen=True, slots=True)
class TreeDef:
    """The structure of a pytree without its leaves; hashable, so it can key a cache.

    >>> leaves, tree = flatten({"b": 1, "a": (2, [3])})
    >>> tree.num_leaves, tree.num_nodes, tree.unflatten([4, 5, 6])
    (3, 6, {'a': (4, [5]), 'b': 6})
    """

    # "leaf", "none", "tuple", "namedtuple", "list", "dict", "custom" (registered here),
    # "jax" (registered with JAX's registry)
    kind: str
    children: tuple[TreeDef, ...] = ()
    # a dict's keys; a named tuple's class; a custom node's (class, aux data); a JAX node's
    # one-level treedef
    keys: tuple[Any, ...] = ()

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    @property
    def num_nodes(self) -> int:
        """Nodes and leaves, as JAX counts them (None is a node without children)."""
        return 1 + sum(c.num_nodes for c in self.children)

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """The pytree of this structure with ``leaves``."""
        return unflatten(self, leaves)

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
        if self.kind == "custom":
            return f"{self.keys[0].__name__}[{self.keys[1]!r}](" + ", ".join(inner) + ")"
        if self.kind == "jax":
            return f"jax[{self.keys[0]}](" + ", ".join(inner) + ")"
        return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"


_LEAF = TreeDef("leaf")
_NONE = TreeDef("none")


# ---- registered node types ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Node:
    flatten: Callable[[Any], tuple[Iterable[Any], Any]]
    unflatten: Callable[[Any, Iterable[Any]], Any]
    # (key, child) pairs and aux data, for paths; None: FlattenedIndexKey(i)
    with_keys: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Any]] | None = None


_REGISTRY: dict[type, _Node] = {}
_BUILTIN = (tuple, list, dict, type(None))
# types that are always leaves: no registry is asked about them (the fast path)
_LEAF_TYPES: tuple[type, ...] = (np.ndarray, np.generic, int, float, complex, bool, str, bytes)


def _check_type(nodetype: Any, op: str) -> None:
    if not isinstance(nodetype, type):
        raise TraceError(f"{op} takes a class, got {type(nodetype).__name__}", op=op)
    if nodetype in _BUILTIN or nodetype in _REGISTRY:
        raise TraceError(
            f"{op}: {nodetype.__name__} is already a pytree node type",
            op=op,
            hint="register a type once",
        )


def register_pytree_node(
    nodetype: type,
    flatten_func: Callable[[Any], tuple[Iterable[Any], Any]],
    unflatten_func: Callable[[Any, Iterable[Any]], Any],
) -> None:
    """Make ``nodetype`` a pytree node, as ``jax.tree_util.register_pytree_node``:
    ``flatten_func(x) -> (children, aux_data)`` (``aux_data`` hashable: it is part of the
    structure) and ``unflatten_func(aux_data, children) -> x``.

    >>> import pypto as pto
    >>> class Box:
    ...     def __init__(self, v, tag):
    ...         self.v, self.tag = v, tag
    >>> pto.tree_util.register_pytree_node(
    ...     Box, lambda b: ((b.v,), b.tag), lambda tag, kids: Box(kids[0], tag)
    ... )
    >>> pto.tree_util.tree_leaves([Box(1.0, "a"), 2.0])
    [1.0, 2.0]
    """
    _check_type(nodetype, "register_pytree_node")
    _REGISTRY[nodetype] = _Node(flatten_func, unflatten_func)


def register_pytree_with_keys(
    nodetype: type,
    flatten_with_keys: Callable[[Any], tuple[Iterable[tuple[Any, Any]], Any]],
    unflatten_func: Callable[[Any, Iterable[Any]], Any],
    flatten_func: Callable[[Any], tuple[Iterable[Any], Any]] | None = None,
) -> None:
    """As :func:`register_pytree_node`, with ``flatten_with_keys(x) -> ((key, child), ...),
    aux_data)`` giving the children's keys in paths (``jax.tree_util``'s namesake)."""
    _check_type(nodetype, "register_pytree_with_keys")

    def plain(x: Any) -> tuple[Iterable[Any], Any]:
        kids, aux = flatten_with_keys(x)
        return [c for _, c in kids], aux

    _REGISTRY[nodetype] = _Node(flatten_func or plain, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: ``cls.tree_flatten(self) -> (children, aux)`` and the classmethod
    ``cls.tree_unflatten(aux, children)`` make it a node (``jax.tree_util``'s namesake)."""
    register_pytree_node(cls, cls.tree_flatten, cls.tree_unflatten)  # type: ignore[attr-defined]
    return cls


def register_dataclass(
    nodetype: type,
    data_fields: Iterable[str] | None = None,
    meta_fields: Iterable[str] | None = None,
) -> type:
    """A dataclass as a node: its ``data_fields`` are children, its ``meta_fields`` part of
    the structure (static under ``jit``). Without the lists, a field with
    ``field(metadata=dict(static=True))`` is meta and every other one data, as in JAX.
    Returns the class (a decorator).

    >>> import dataclasses, pypto as pto
    >>> @pto.tree_util.register_dataclass
    ... @dataclasses.dataclass
    ... class Layer:
    ...     w: object
    ...     b: object
    ...     act: str = dataclasses.field(default="relu", metadata=dict(static=True))
    >>> leaves, tree = pto.tree_util.tree_flatten(Layer(1.0, 2.0))
    >>> leaves, tree.unflatten([3.0, 4.0])
    ([1.0, 2.0], Layer(w=3.0, b=4.0, act='relu'))
    """
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TraceError(
                f"register_dataclass: {getattr(nodetype, '__name__', nodetype)} is not a dataclass",
                op="register_dataclass",
                hint="decorate it with @dataclasses.dataclass first, or pass data_fields and "
                "meta_fields",
            )
        fields = [f for f in dataclasses.fields(nodetype) if f.init]
        data = [f.name for f in fields if not f.metadata.get("static", False)]
        meta = [f.name for f in fields if f.metadata.get("static", False)]
    else:
        data, meta = list(data_fields or ()), list(meta_fields or ())

    def with_keys(x: Any) -> tuple[list[tuple[Any, Any]], Any]:
        return [(GetAttrKey(n), getattr(x, n)) for n in data], tuple(getattr(x, n) for n in meta)

    def rebuild(aux: Any, kids: Iterable[Any]) -> Any:
        return nodetype(**dict(zip(data, kids, strict=True)), **dict(zip(meta, aux, strict=True)))

    register_pytree_with_keys(nodetype, with_keys, rebuild)
    return nodetype


class Partial(functools.partial):
    """``functools.partial`` whose bound arguments are pytree children (the function is
    structure): a function with bound tensors passes through ``jit`` and transforms, as
    ``jax.tree_util.Partial``.

    >>> import pypto as pto
    >>> add = pto.tree_util.Partial(pto.add, 1.0)
    >>> pto.tree_util.tree_leaves(add), float(add(2.0))
    ([1.0], 3.0)
    """

    def __new__(cls, func: Callable[..., Any], *args: Any, **kw: Any) -> Partial:
        if isinstance(func, functools.partial):
            # flatten a partial of a partial, so the function is never a child
            args, kw = func.args + args, {**func.keywords, **kw}
            func = func.func
        return super().__new__(cls, func, *args, **kw)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, kids: Partial(func, *kids[0], **kids[1]),  # type: ignore[index]
)


def _register_dicts() -> None:
    """``OrderedDict`` (keys in their order) and ``defaultdict`` (keys sorted, the factory
    part of the structure), as JAX registers them."""
    from collections import OrderedDict, defaultdict

    register_pytree_with_keys(
        OrderedDict,
        lambda d: ([(DictKey(k), v) for k, v in d.items()], tuple(d)),
        lambda keys, kids: OrderedDict(zip(keys, kids, strict=True)),
    )
    register_pytree_with_keys(
        defaultdict,
        lambda d: ([(DictKey(k), d[k]) for k in sorted(d)], (d.default_factory, tuple(sorted(d)))),
        lambda aux, kids: defaultdict(aux[0], zip(aux[1], kids, strict=True)),
    )


def _jax_node(t: Any) -> tuple[list[Any], Any] | None:
    """``t``'s children and one-level structure when JAX's registry has its type (only
    asked once ``jax`` is imported: a type registered there was registered by then)."""
    jtu = sys.modules.get("jax.tree_util")
    if jtu is None or type(t).__module__.startswith(("jax", "jaxlib")):
        return None
    kids, td = jtu.tree_flatten(t, is_leaf=lambda x: x is not t)
    if td.num_nodes == 1 and td.num_leaves == 1:
        return None  # a leaf to JAX as well
    return kids, td


# ---- flatten and unflatten ------------------------------------------------------------------


def flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list[Any], TreeDef]:
    """The leaves in order, and the structure; ``is_leaf(x)`` True stops at ``x``.

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
    return leaves, _flatten(tree, leaves, is_leaf)


def _flatten(t: Any, leaves: list[Any], is_leaf: IsLeaf) -> TreeDef:
    if is_leaf is not None and is_leaf(t):
        leaves.append(t)
        return _LEAF
    if t is None:
        return _NONE
    tt = type(t)
    if tt is tuple or tt is list:
        return TreeDef(
            "tuple" if tt is tuple else "list", tuple(_flatten(c, leaves, is_leaf) for c in t)
        )
    if tt is dict:
        keys = tuple(sorted(t))
        return TreeDef("dict", tuple(_flatten(t[k], leaves, is_leaf) for k in keys), keys)
    if isinstance(t, _LEAF_TYPES):
        leaves.append(t)
        return _LEAF
    node = _REGISTRY.get(tt)
    if node is not None:
        kids, aux = node.flatten(t)
        return TreeDef("custom", tuple(_flatten(c, leaves, is_leaf) for c in kids), (tt, aux))
    if isinstance(t, tuple) and hasattr(tt, "_fields"):  # a named tuple, as JAX takes it
        return TreeDef("namedtuple", tuple(_flatten(c, leaves, is_leaf) for c in t), (tt,))
    if not hasattr(t, "shape"):  # (tensors are leaves to every registry)
        found = _jax_node(t)
        if found is not None:
            return TreeDef(
                "jax", tuple(_flatten(c, leaves, is_leaf) for c in found[0]), (found[1],)
            )
    leaves.append(t)
    return _LEAF


def unflatten(td: TreeDef, leaves: Iterable[Any]) -> Any:
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
    if td.kind == "custom":
        return _REGISTRY[td.keys[0]].unflatten(td.keys[1], kids)
    if td.kind == "jax":
        return td.keys[0].unflatten(kids)
    return dict(zip(td.keys, kids, strict=True))


def all_leaves(xs: Iterable[Any], is_leaf: IsLeaf = None) -> bool:
    """Whether every one of ``xs`` is a leaf."""
    return all(flatten(x, is_leaf)[1].kind == "leaf" for x in xs)


def _children(td: TreeDef, t: Any) -> list[Any] | None:
    """``t``'s children when its node is ``td``'s kind and shape (None: it is not)."""
    tt = type(t)
    if td.kind == "none":
        return [] if t is None else None
    if td.kind in ("tuple", "list"):
        ok = tt is (tuple if td.kind == "tuple" else list) and len(t) == len(td.children)
        return list(t) if ok else None
    if td.kind == "namedtuple":
        return list(t) if tt is td.keys[0] else None
    if td.kind == "dict":
        return [t[k] for k in td.keys] if tt is dict and tuple(sorted(t)) == td.keys else None
    if td.kind == "custom":
        if tt is not td.keys[0]:
            return None
        kids, aux = _REGISTRY[tt].flatten(t)
        return list(kids) if aux == td.keys[1] else None
    if td.kind == "jax":
        found = _jax_node(t)
        return found[0] if found is not None and found[1] == td.keys[0] else None
    return None


def flatten_up_to(td: TreeDef, tree: Any, op: str = "tree_map") -> list[Any]:
    """The subtrees of ``tree`` at the leaves of ``td``, which must be a prefix of its
    structure (JAX's ``flatten_up_to``)."""
    out: list[Any] = []

    def walk(d: TreeDef, t: Any) -> None:
        if d.kind == "leaf":
            out.append(t)
            return
        kids = _children(d, t)
        if kids is None or len(kids) != len(d.children):
            raise TraceError(
                f"{op}: a subtree is {flatten(t)[1]} where the first tree has {d}",
                op=op,
                hint="every tree must have the first one's structure (or extend its leaves)",
            )
        for c, k in zip(d.children, kids, strict=True):
            walk(c, k)

    walk(td, tree)
    return out


# ---- paths ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DictKey:
    """A dict entry in a path: ``['key']``."""

    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclass(frozen=True, slots=True)
class SequenceKey:
    """A tuple or list entry in a path: ``[i]``."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx}]"


@dataclass(frozen=True, slots=True)
class GetAttrKey:
    """A named tuple's or dataclass's field in a path: ``.name``."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    """The i-th child of a node registered without keys: ``[<flat index i>]``."""

    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


def keystr(path: tuple[Any, ...]) -> str:
    """A path as text, e.g. ``['layers'][0].w``."""
    return "".join(str(k) for k in path)


def flatten_with_path(
    tree: Any, is_leaf: IsLeaf = None
) -> tuple[list[tuple[tuple[Any, ...], Any]], TreeDef]:
    """``((path, leaf), ...)`` in leaf order, and the structure."""
    leaves, td = flatten(tree, is_leaf)
    paths: list[tuple[Any, ...]] = []

    def walk(d: TreeDef, t: Any, path: tuple[Any, ...]) -> None:
        if d.kind == "leaf":
            paths.append(path)
            return
        if d.kind == "dict":
            keys: list[Any] = [DictKey(k) for k in d.keys]
        elif d.kind == "namedtuple":
            keys = [GetAttrKey(f) for f in d.keys[0]._fields]
        elif d.kind == "custom" and _REGISTRY[d.keys[0]].with_keys is not None:
            keys = [k for k, _ in _REGISTRY[d.keys[0]].with_keys(t)[0]]  # type: ignore[misc]
        elif d.kind in ("custom", "jax"):
            keys = [FlattenedIndexKey(i) for i in range(len(d.children))]
        else:
            keys = [SequenceKey(i) for i in range(len(d.children))]
        kids = _children(d, t) or []
        for c, k, sub in zip(d.children, keys, kids, strict=True):
            walk(c, sub, (*path, k))

    walk(td, tree, ())
    return list(zip(paths, leaves, strict=True)), td


# ---- maps and reductions --------------------------------------------------------------------


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:
    """``f`` applied leaf by leaf, with the matching subtrees of ``rest`` (each with
    ``tree``'s structure, or extending its leaves), as ``jax.tree_util.tree_map``.

    >>> tree_map(lambda a, b: a + b, {"w": 1, "b": (2, 3)}, {"w": 10, "b": (20, 30)})
    {'b': (22, 33), 'w': 11}
    """
    leaves, td = flatten(tree, is_leaf)
    others = [flatten_up_to(td, r) for r in rest]
    return unflatten(td, (f(*xs) for xs in zip(leaves, *others, strict=True)))


def tree_map_with_path(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:
    """``f(path, leaf, *others)`` leaf by leaf (``jax.tree_util.tree_map_with_path``)."""
    pairs, td = flatten_with_path(tree, is_leaf)
    others = [flatten_up_to(td, r, "tree_map_with_path") for r in rest]
    return unflatten(td, (f(p, x, *xs) for (p, x), *xs in zip(pairs, *others, strict=True)))


_NO_INIT = object()


def tree_reduce(
    f: Callable[[Any, Any], Any], tree: Any, initializer: Any = _NO_INIT, is_leaf: IsLeaf = None
) -> Any:
    """``functools.reduce(f, leaves[, initializer])``."""
    leaves = flatten(tree, is_leaf)[0]
    if initializer is _NO_INIT:
        if not leaves:
            raise TraceError(
                "tree_reduce of a tree without leaves and no initializer",
                op="tree_reduce",
                hint="pass an initializer",
            )
        return functools.reduce(f, leaves)
    return functools.reduce(f, leaves, initializer)


def tree_all(tree: Any, is_leaf: IsLeaf = None) -> bool:
    """Whether every leaf is truthy (a tensor leaf: every element)."""
    return all(bool(np.all(np.asarray(x))) for x in flatten(tree, is_leaf)[0])


def tree_transpose(outer: TreeDef, inner: TreeDef, tree: Any) -> Any:
    """A tree of ``outer`` structure whose leaves are trees of ``inner`` structure, turned
    into an ``inner`` tree of ``outer`` trees (``jax.tree_util.tree_transpose``)."""
    subs = flatten_up_to(outer, tree, "tree_transpose")
    cols = [flatten_up_to(inner, s, "tree_transpose") for s in subs]
    return unflatten(
        inner, (unflatten(outer, [c[i] for c in cols]) for i in range(inner.num_leaves))
    )


_register_dicts()
