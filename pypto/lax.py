"""``pto.lax``: structured control flow with ``jax.lax``'s signatures (see
:mod:`pypto.graph.control`), ``bitcast_convert_type`` and ``pad``.

>>> import pypto as pto
>>> pto.lax.fori_loop(0, 3, lambda i, v: v + i, 10).item()
13
"""

from pypto.graph.control import cond, fori_loop, scan, switch, while_loop
from pypto.graph.control import map_ as map
from pypto.ops import bitcast_convert_type
from pypto.ops.numpy_lib import lax_pad as pad

__all__ = [
    "bitcast_convert_type",
    "cond",
    "fori_loop",
    "map",
    "pad",
    "scan",
    "switch",
    "while_loop",
]
