"""Tensor-level passes, one per file; :data:`DEFAULT` is the pipeline ``jit`` runs."""

from pypto.graph.passes.barriers import drop_barriers
from pypto.graph.passes.constfold import constant_fold
from pypto.graph.passes.cse import cse
from pypto.graph.passes.dce import dce
from pypto.graph.passes.fusion import fuse, unfuse
from pypto.graph.passes.inlining import has_calls, inline
from pypto.graph.passes.shifted import shifted_sums
from pypto.graph.passes.simplify import simplify

SIMPLIFY = (simplify, shifted_sums, constant_fold, cse, dce)
DEFAULT = (*SIMPLIFY, drop_barriers, fuse)
UNFUSED = (*SIMPLIFY, drop_barriers, unfuse)

__all__ = [
    "DEFAULT",
    "UNFUSED",
    "constant_fold",
    "cse",
    "dce",
    "drop_barriers",
    "fuse",
    "has_calls",
    "inline",
    "shifted_sums",
    "simplify",
    "unfuse",
]
