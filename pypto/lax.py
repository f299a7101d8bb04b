"""``pto.lax``: structured control flow with ``jax.lax``'s signatures (see
:mod:`pypto.graph.control`), convolutions and ``reduce_window`` (:mod:`pypto.ops.conv`),
``bitcast_convert_type``, ``pad``, and ``jax.lax``'s array functions
(:mod:`pypto.ops.lax_ops`: ``dot_general``, ``dynamic_slice``, ``select``, ``reduce_sum``, …).

>>> import pypto as pto
>>> pto.lax.fori_loop(0, 3, lambda i, v: v + i, 10).item()
13
"""

from pypto.graph.control import cond, fori_loop, scan, switch, while_loop
from pypto.graph.control import map_ as map
from pypto.ops import bitcast_convert_type
from pypto.ops.conv import (
    ConvDimensionNumbers,
    conv,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_transpose,
    conv_with_general_padding,
    reduce_window,
)
from pypto.ops.lax_ops import *  # noqa: F403  (jax.lax's array functions)
from pypto.ops.lax_ops import __all__ as _array_functions
from pypto.ops.numpy_lib import lax_pad as pad

__all__ = [
    "ConvDimensionNumbers",
    "bitcast_convert_type",
    "cond",
    "conv",
    "conv_dimension_numbers",
    "conv_general_dilated",
    "conv_transpose",
    "conv_with_general_padding",
    "fori_loop",
    "map",
    "pad",
    "reduce_window",
    "scan",
    "switch",
    "while_loop",
    *_array_functions,
]
