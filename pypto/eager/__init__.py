"""Eager mode: tensors that compute at once."""

from pypto.eager import random
from pypto.eager.tensor import (
    Tensor,
    arange,
    empty,
    eye,
    frombuffer,
    full,
    full_like,
    geomspace,
    identity,
    linspace,
    logspace,
    ones,
    ones_like,
    tensor,
    zeros,
    zeros_like,
)

__all__ = [
    "Tensor",
    "arange",
    "empty",
    "eye",
    "frombuffer",
    "full",
    "full_like",
    "geomspace",
    "identity",
    "linspace",
    "logspace",
    "ones",
    "ones_like",
    "random",
    "tensor",
    "zeros",
    "zeros_like",
]
