"""``pto.nn``: ``jax.nn``'s functions under their ``jax.nn`` names, and
:mod:`pypto.nn.initializers`.

The activations, normalisations and attention are pypto's own (``pto.nn.relu`` is
``pto.relu``); this namespace lets code written for ``jax.nn`` run unchanged.

>>> import pypto as pto
>>> pto.nn.relu(pto.tensor([-1.0, 2.0])).numpy()
array([0., 2.], dtype=float32)
"""

from typing import Any

from pypto.nn import initializers
from pypto.ops import (
    celu,
    dot_product_attention,
    elu,
    gelu,
    glu,
    hard_sigmoid,
    hard_silu,
    hard_swish,
    hard_tanh,
    leaky_relu,
    log1mexp,
    log_sigmoid,
    log_softmax,
    logmeanexp,
    logsumexp,
    mish,
    one_hot,
    relu,
    relu6,
    selu,
    sigmoid,
    silu,
    soft_sign,
    softmax,
    softplus,
    sparse_plus,
    sparse_sigmoid,
    squareplus,
    standardize,
    swish,
    tanh,
)

__all__ = [
    "celu",
    "dot_product_attention",
    "elu",
    "gelu",
    "glu",
    "hard_sigmoid",
    "hard_silu",
    "hard_swish",
    "hard_tanh",
    "identity",
    "initializers",
    "leaky_relu",
    "log1mexp",
    "log_sigmoid",
    "log_softmax",
    "logmeanexp",
    "logsumexp",
    "mish",
    "one_hot",
    "relu",
    "relu6",
    "selu",
    "sigmoid",
    "silu",
    "soft_sign",
    "softmax",
    "softplus",
    "sparse_plus",
    "sparse_sigmoid",
    "squareplus",
    "standardize",
    "swish",
    "tanh",
]


def identity(x: Any) -> Any:
    """The identity activation, as ``jax.nn.identity`` (not numpy's identity matrix,
    :func:`pypto.identity`)."""
    return x
