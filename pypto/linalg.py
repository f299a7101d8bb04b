"""``pto.linalg``: the linear algebra of ``jax.numpy.linalg`` that pypto computes.

>>> import pypto as pto
>>> float(pto.linalg.norm(pto.ones((2, 2))))
2.0
"""

from pypto.ops import diagonal, matmul, norm, outer, tensordot, trace
from pypto.ops.solvers import QRResult, cholesky, det, inv, matrix_power, qr, slogdet, solve

__all__ = [
    "QRResult",
    "cholesky",
    "det",
    "diagonal",
    "inv",
    "matmul",
    "matrix_power",
    "norm",
    "outer",
    "qr",
    "slogdet",
    "solve",
    "tensordot",
    "trace",
]
