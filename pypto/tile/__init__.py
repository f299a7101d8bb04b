"""The Tile level: the Tile IR, tensor → tile lowering, the tile shapes in force, and the
tile language of hand-written kernels (``pto.tile.load``, ``pto.tile.matmul`` ...; see
:mod:`pypto.tile.language`).

Importing this package registers the tile rules of every op into the op table.

Called, the package is numpy's ``tile`` (``pto.tile(x, reps)``, :func:`pypto.ops.tile`): the
one name numpy's library and the Tile level share.
"""

import sys
import types
from typing import Any

from pypto.tile import attention, language, layout, reduce, rules, scan, sort  # noqa: F401  (registration)

# the matmul rules register on import; the name ``matmul`` is the tile language's
from pypto.tile import matmul as _matmul_rules  # noqa: F401
from pypto.tile.config import (
    TileConfig,
    current,
    reset_tile_shapes,
    set_cube_tile_shapes,
    set_vec_tile_shapes,
    tile_shapes,
)
from pypto.tile.ir import Kernel, TileFunc, TileVar
from pypto.tile.language import *  # noqa: F403  (the tile language: pto.tile.load ...)
from pypto.tile.lower import lower_func

__all__ = [
    "Kernel",
    "TileConfig",
    "TileFunc",
    "TileVar",
    "current",
    "lower_func",
    "reset_tile_shapes",
    "set_cube_tile_shapes",
    "set_vec_tile_shapes",
    "tile_shapes",
    *language.__all__,
]


class _TileModule(types.ModuleType):
    """This package, callable as numpy's ``tile`` (so ``pto.tile(x, (2, 2))`` works beside
    ``pto.tile.load``)."""

    def __call__(self, x: Any, reps: Any) -> Any:
        from pypto.ops import tile

        return tile(x, reps)


sys.modules[__name__].__class__ = _TileModule
