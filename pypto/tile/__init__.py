"""The Tile level: the Tile IR, tensor → tile lowering and the tile shapes in force.

Importing this package registers the tile rules of every op into the op table.
"""

from pypto.tile import attention, layout, matmul, reduce, rules  # noqa: F401  (registration)
from pypto.tile.config import (
    TileConfig,
    current,
    reset_tile_shapes,
    set_cube_tile_shapes,
    set_vec_tile_shapes,
    tile_shapes,
)
from pypto.tile.ir import Kernel, TileFunc, TileVar
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
]
