"""``pto.tree_util`` and ``pto.tree`` against ``jax.tree_util`` and ``jax.tree``: leaf order,
structures, paths, maps and transposes over every kind of node, registered node types through
``jit`` and ``grad``, and the errors."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, NamedTuple

import jax
import numpy as np
import pytest

import pypto as pto
from pypto import tree_util as ptu


class Point(NamedTuple):
    x: Any
    y: Any


TREES = [
    1.0,
    None,
    (),
    [1, (2, None), {"b": 3, "a": [4, 5]}],
    {"z": {"y": (1,)}, "a": None, "m": [2, {"k": 3}]},
    Point(1, (2, 3)),
    collections.OrderedDict([("b", 1), ("a", 2)]),
    collections.defaultdict(list, {"q": 1, "p": (2, 3)}),
    [Point([1, 2], {"u": None, "v": 3}), collections.OrderedDict(c=4)],
]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_leaves_structure_and_paths_match_jax(tree: Any) -> None:
    leaves, td = ptu.tree_flatten(tree)
    assert leaves == jax.tree_util.tree_leaves(tree)
    assert td.num_leaves == jax.tree_util.tree_structure(tree).num_leaves
    assert td.num_nodes == jax.tree_util.tree_structure(tree).num_nodes
    assert ptu.tree_unflatten(td, leaves) == tree
    assert type(td.unflatten(leaves)) is type(tree)
    ours = [(ptu.keystr(p), x) for p, x in ptu.tree_leaves_with_path(tree)]
    theirs = [(jax.tree_util.keystr(p), x) for p, x in jax.tree_util.tree_leaves_with_path(tree)]
    assert ours == theirs
    doubled = ptu.tree_map(lambda v: v * 2, tree)
    assert doubled == jax.tree_util.tree_map(lambda v: v * 2, tree)
    assert pto.tree.map(lambda v: v * 2, tree) == doubled
    assert pto.tree.leaves(tree) == leaves and pto.tree.structure(tree) == td


def test_maps_with_several_trees_paths_and_is_leaf() -> None:
    a = {"w": [1, 2], "b": 3}
    b = {"w": [10, 20], "b": 30}
    assert ptu.tree_map(lambda x, y: x + y, a, b) == {"w": [11, 22], "b": 33}
    # the others may extend the first tree's leaves (a prefix)
    assert ptu.tree_map(lambda x, y: (x, y), {"w": 1, "b": 2}, {"w": [5, 6], "b": (7,)}) == {
        "w": (1, [5, 6]),
        "b": (2, (7,)),
    }
    with pytest.raises(pto.TraceError, match=r"tree_map: a subtree is \[\*\] where the first"):
        ptu.tree_map(lambda x, y: x, {"w": [1, 2]}, {"w": [1]})
    with_path = ptu.tree_map_with_path(lambda p, x: f"{ptu.keystr(p)}={x}", a)
    assert with_path == jax.tree_util.tree_map_with_path(
        lambda p, x: f"{jax.tree_util.keystr(p)}={x}", a
    )
    # is_leaf stops the walk where it says
    tree = {"pair": (1, 2), "one": 3}

    def stop(x):
        return isinstance(x, tuple)

    assert ptu.tree_leaves(tree, is_leaf=stop) == jax.tree_util.tree_leaves(tree, is_leaf=stop)
    assert ptu.tree_map(lambda t: sum(t), {"p": (1, 2), "q": (3,)}, is_leaf=stop) == {
        "p": 3,
        "q": 3,
    }


def test_reduce_all_and_transpose_match_jax() -> None:
    tree = {"a": [1, 2], "b": (3, 4)}
    assert ptu.tree_reduce(lambda x, y: x + y, tree) == 10
    assert ptu.tree_reduce(lambda x, y: x + y, tree, 100) == 110
    assert pto.tree.reduce(max, tree) == 4
    with pytest.raises(pto.TraceError, match="no initializer"):
        ptu.tree_reduce(max, {})
    assert ptu.tree_all([True, (1, np.ones(3))]) and not ptu.tree_all([True, np.array([1, 0])])
    outer = ptu.tree_structure([0, 0, 0])
    inner = ptu.tree_structure({"x": 0, "y": 0})
    rows = [{"x": i, "y": 10 * i} for i in range(3)]
    ours = ptu.tree_transpose(outer, inner, rows)
    j_outer = jax.tree_util.tree_structure([0, 0, 0])
    j_inner = jax.tree_util.tree_structure({"x": 0, "y": 0})
    assert (
        ours
        == jax.tree_util.tree_transpose(j_outer, j_inner, rows)
        == {
            "x": [0, 1, 2],
            "y": [0, 10, 20],
        }
    )
    assert [str(c) for c in ptu.treedef_children(inner)] == ["*", "*"]


# ---- registered node types ------------------------------------------------------------


class Box:
    def __init__(self, value: Any, tag: str) -> None:
        self.value, self.tag = value, tag

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Box) and (self.value, self.tag) == (other.value, other.tag)


ptu.register_pytree_node(Box, lambda b: ((b.value,), b.tag), lambda tag, kids: Box(kids[0], tag))


@ptu.register_pytree_node_class
class Pair:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b

    def tree_flatten(self) -> tuple[tuple[Any, Any], None]:
        return (self.a, self.b), None

    @classmethod
    def tree_unflatten(cls, aux: None, kids: Any) -> Pair:
        return cls(*kids)


@ptu.register_dataclass
@dataclasses.dataclass
class Dense:
    w: Any
    b: Any
    act: str = dataclasses.field(default="tanh", metadata=dict(static=True))

    def __call__(self, x: Any) -> Any:
        y = x @ self.w + self.b
        return pto.tanh(y) if self.act == "tanh" else y


def test_registered_nodes_flatten_rebuild_and_name_their_paths() -> None:
    tree = [Box(1, "t"), Pair(2, Box(3, "u")), Dense(4, 5, "relu")]
    leaves, td = ptu.tree_flatten(tree)
    assert leaves == [1, 2, 3, 4, 5]
    back = td.unflatten([10, 20, 30, 40, 50])
    assert (
        back[0] == Box(10, "t") and back[1].b == Box(30, "u") and back[2] == Dense(40, 50, "relu")
    )
    # the aux data is structure: another tag is another tree
    assert ptu.tree_structure(Box(1, "t")) != ptu.tree_structure(Box(1, "v"))
    assert ptu.tree_structure(Dense(1, 2)) != ptu.tree_structure(Dense(1, 2, "relu"))
    paths = [ptu.keystr(p) for p, _ in ptu.tree_leaves_with_path(tree)]
    assert paths == [
        "[0][<flat index 0>]",
        "[1][<flat index 0>]",
        "[1][<flat index 1>][<flat index 0>]",
        "[2].w",
        "[2].b",
    ]
    assert "Box['t'](*)" in str(td)
    with pytest.raises(pto.TraceError, match="Box is already a pytree node type"):
        ptu.register_pytree_node(Box, lambda b: ((), None), lambda a, k: None)
    with pytest.raises(pto.TraceError, match="int is not a dataclass"):
        ptu.register_dataclass(int)


class JaxOnly:
    """A node registered with JAX's registry only (as a Flax or Equinox module is)."""

    def __init__(self, w: Any, b: Any) -> None:
        self.w, self.b = w, b


jax.tree_util.register_pytree_node(
    JaxOnly, lambda m: ((m.w, m.b), None), lambda aux, kids: JaxOnly(*kids)
)


def test_transforms_take_registered_nodes_and_jaxs() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    w = rng.normal(size=(3, 2)).astype(np.float32)
    b = rng.normal(size=(2,)).astype(np.float32)

    def loss(layer: Any, x: Any) -> Any:
        return (pto.tanh(x @ layer.w + layer.b) ** 2).sum()

    def j_loss(w: Any, b: Any, x: Any) -> Any:
        return (jax.numpy.tanh(x @ w + b) ** 2).sum()

    jw, jb = jax.grad(j_loss, argnums=(0, 1))(w, b, x)
    for layer in (Dense(w, b), JaxOnly(w, b)):
        for g in (pto.grad(loss)(layer, x), pto.jit(pto.grad(loss), machine="tiny")(layer, x)):
            assert type(g) is type(layer)
            np.testing.assert_allclose(np.asarray(g.w), jw, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(np.asarray(g.b), jb, rtol=1e-4, atol=1e-5)
    # the static field selects the code: each value its own trace
    f = pto.jit(lambda layer, x: layer(x))
    np.testing.assert_allclose(
        np.asarray(f(Dense(w, b, "none"), x)), x @ w + b, rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        np.asarray(f(Dense(w, b), x)), np.tanh(x @ w + b), rtol=1e-5, atol=1e-5
    )
    # an SGD step over a registered model
    new = ptu.tree_map(lambda p, g: p - 0.1 * g, Dense(w, b), pto.grad(loss)(Dense(w, b), x))
    np.testing.assert_allclose(np.asarray(new.w), w - 0.1 * jw, rtol=1e-4, atol=1e-5)


def test_partial_carries_its_arguments_as_leaves() -> None:
    scale = ptu.Partial(pto.multiply, np.float32(3.0))
    assert ptu.tree_leaves(scale) == [np.float32(3.0)]
    f = pto.jit(lambda g, x: g(x))
    np.testing.assert_allclose(np.asarray(f(scale, np.ones(2, np.float32))), [3.0, 3.0])
    nested = ptu.Partial(ptu.Partial(pto.add, 1.0), 2.0)
    assert nested.func is pto.add and float(nested()) == 3.0
