"""The JAX bridge: the same computation as a JAX function, and numerics checks against it."""

from pypto.reference.compare import Comparison, compare
from pypto.reference.jax_bridge import CheckReport, check, eval_jax, to_jax

__all__ = ["CheckReport", "Comparison", "check", "compare", "eval_jax", "to_jax"]
