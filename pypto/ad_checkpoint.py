"""``pto.ad_checkpoint``: rematerialisation with ``jax.ad_checkpoint``'s names (see
:mod:`pypto.graph.remat`).

>>> import pypto as pto
>>> from pypto import ad_checkpoint
>>> policy = ad_checkpoint.checkpoint_policies.save_only_these_names("h")
>>> f = ad_checkpoint.checkpoint(
...     lambda x: pto.sin(ad_checkpoint.checkpoint_name(pto.sin(x), "h")), policy=policy
... )
>>> ad_checkpoint.print_saved_residuals(lambda x: f(x).sum(), pto.ones(2))  # doctest: +ELLIPSIS
f32[2] from the argument x
f32[2] output of sin from ...
"""

from pypto.graph.remat import (
    checkpoint,
    checkpoint_name,
    checkpoint_policies,
    print_saved_residuals,
    remat,
    saved_residuals,
)

__all__ = [
    "checkpoint",
    "checkpoint_name",
    "checkpoint_policies",
    "print_saved_residuals",
    "remat",
    "saved_residuals",
]
