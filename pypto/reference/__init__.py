"""The JAX bridge: reference results and the comparison against the tolerance table."""

from pypto.reference.compare import Comparison, compare

__all__ = ["Comparison", "compare"]
