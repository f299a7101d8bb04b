"""``pto.scipy``: ``jax.scipy``'s namespaces that pypto has, under their names.

>>> import pypto as pto
>>> float(pto.scipy.special.gammaln(pto.tensor(5.0)))  # log 4!
3.178054...
"""

from pypto.scipy import special, stats

__all__ = ["special", "stats"]
