"""``pto.tree``: the short names of ``jax.tree`` over :mod:`pypto.tree_util`.

>>> import pypto as pto
>>> pto.tree.map(lambda x: x * 2, {"a": 1, "b": [2, 3]})
{'a': 2, 'b': [4, 6]}
>>> pto.tree.reduce(lambda a, b: a + b, {"a": 1, "b": [2, 3]})
6
"""

from pypto.graph.pytree import flatten, flatten_with_path, unflatten
from pypto.graph.pytree import tree_all as all
from pypto.graph.pytree import tree_map as map
from pypto.graph.pytree import tree_map_with_path as map_with_path
from pypto.graph.pytree import tree_reduce as reduce
from pypto.graph.pytree import tree_transpose as transpose
from pypto.tree_util import tree_leaves as leaves
from pypto.tree_util import tree_leaves_with_path as leaves_with_path
from pypto.tree_util import tree_structure as structure

__all__ = [
    "all",
    "flatten",
    "flatten_with_path",
    "leaves",
    "leaves_with_path",
    "map",
    "map_with_path",
    "reduce",
    "structure",
    "transpose",
    "unflatten",
]
