"""``pto.linalg``: the linear algebra of ``jax.numpy.linalg`` that pypto computes.

>>> import pypto as pto
>>> float(pto.linalg.norm(pto.ones((2, 2))))
2.0
"""

from pypto.ops import diagonal, matmul, norm, outer, tensordot, trace

__all__ = ["diagonal", "matmul", "norm", "outer", "tensordot", "trace"]
