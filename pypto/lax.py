"""``pto.lax``: structured control flow with ``jax.lax``'s signatures (see
:mod:`pypto.graph.control`), and ``bitcast_convert_type``.

>>> import pypto as pto
>>> pto.lax.fori_loop(0, 3, lambda i, v: v + i, 10).item()
13
"""

from pypto.graph.control import cond, fori_loop, scan, switch, while_loop
from pypto.graph.control import map_ as map

__all__ = ["cond", "fori_loop", "map", "scan", "switch", "while_loop"]
