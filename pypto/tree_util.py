"""``pto.tree_util``: pytrees with ``jax.tree_util``'s names (see :mod:`pypto.graph.pytree`).

Nested tuples, lists, dicts (keys sorted), named tuples and None are nodes; so are the
types registered here and those registered with JAX's own registry. Every transform takes
and returns pytrees with these rules.

>>> import pypto as pto
>>> params = {"w": pto.ones((2, 2)), "b": pto.zeros(2)}
>>> grads = pto.tree_util.tree_map(lambda p: 0.5 * p, params)
>>> new = pto.tree_util.tree_map(lambda p, g: p - g, params, grads)
>>> [x.shape for x in pto.tree_util.tree_leaves(new)]
[(2,), (2, 2)]
>>> [pto.tree_util.keystr(p) for p, _ in pto.tree_util.tree_flatten_with_path(params)[0]]
["['b']", "['w']"]
"""

from typing import Any

from pypto.graph.pytree import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    IsLeaf,
    Partial,
    SequenceKey,
    all_leaves,
    keystr,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    register_pytree_with_keys,
    tree_all,
    tree_map,
    tree_map_with_path,
    tree_reduce,
    tree_transpose,
)
from pypto.graph.pytree import TreeDef as PyTreeDef
from pypto.graph.pytree import flatten as tree_flatten
from pypto.graph.pytree import flatten_with_path as tree_flatten_with_path
from pypto.graph.pytree import unflatten as tree_unflatten

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "Partial",
    "PyTreeDef",
    "SequenceKey",
    "all_leaves",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "tree_all",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_structure",
    "tree_transpose",
    "tree_unflatten",
    "treedef_children",
]


def tree_leaves(tree: Any, is_leaf: IsLeaf = None) -> list[Any]:
    """The leaves, in order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: IsLeaf = None) -> PyTreeDef:
    """The structure without the leaves."""
    return tree_flatten(tree, is_leaf)[1]


def tree_leaves_with_path(tree: Any, is_leaf: IsLeaf = None) -> list[tuple[tuple[Any, ...], Any]]:
    """``(path, leaf)`` pairs, in leaf order."""
    return tree_flatten_with_path(tree, is_leaf)[0]


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The structures of a node's children."""
    return list(treedef.children)
