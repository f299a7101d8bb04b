"""``pto.lax``: structured control flow with ``jax.lax``'s signatures (see
:mod:`pypto.graph.control`), implicitly differentiated solvers (``custom_linear_solve``,
``custom_root``: :mod:`pypto.graph.solves`), convolutions and ``reduce_window``
(:mod:`pypto.ops.conv`), ``bitcast_convert_type``, ``pad``, the general ``gather`` and
scatters (:mod:`pypto.ops.gather`), and ``jax.lax``'s array functions
(:mod:`pypto.ops.lax_ops`: ``dot_general``, ``dynamic_slice``, ``select``, ``reduce_sum``, …)
and the incomplete gamma and beta functions (``igamma``, ``igammac``, ``betainc``, from
:mod:`pypto.scipy.special`, with ``igamma_grad_a`` and ``random_gamma_grad``).

>>> import pypto as pto
>>> pto.lax.fori_loop(0, 3, lambda i, v: v + i, 10).item()
13
"""

from typing import Any

import numpy as np

from pypto.graph.autodiff import vjp
from pypto.graph.control import cond, fori_loop, scan, switch, while_loop
from pypto.graph.control import map_ as map
from pypto.graph.solves import custom_linear_solve, custom_root
from pypto.ops import api as _api
from pypto.ops import bitcast_convert_type
from pypto.ops.conv import (
    ConvDimensionNumbers,
    conv,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_general_permutations,
    conv_general_shape_tuple,
    conv_shape_tuple,
    conv_transpose,
    conv_transpose_shape_tuple,
    conv_with_general_padding,
    padtype_to_pads,
    reduce_window,
    reduce_window_shape_tuple,
)
from pypto.ops.gather import *  # noqa: F403  (jax.lax's gather and scatters)
from pypto.ops.gather import __all__ as _gather_scatter
from pypto.ops.lax_ops import *  # noqa: F403  (jax.lax's array functions)
from pypto.ops.lax_ops import __all__ as _array_functions
from pypto.ops.numpy_lib import lax_pad as pad
from pypto.scipy.special import betainc, gammaln
from pypto.scipy.special import gammainc as igamma
from pypto.scipy.special import gammaincc as igammac

__all__ = [
    "ConvDimensionNumbers",
    "betainc",
    "bitcast_convert_type",
    "cond",
    "conv",
    "conv_dimension_numbers",
    "conv_general_dilated",
    "conv_general_permutations",
    "conv_general_shape_tuple",
    "conv_shape_tuple",
    "conv_transpose",
    "conv_transpose_shape_tuple",
    "conv_with_general_padding",
    "custom_linear_solve",
    "custom_root",
    "fori_loop",
    "igamma",
    "igamma_grad_a",
    "igammac",
    "map",
    "pad",
    "padtype_to_pads",
    "random_gamma_grad",
    "reduce_window",
    "reduce_window_shape_tuple",
    "scan",
    "switch",
    "while_loop",
    *_array_functions,
    *_gather_scatter,
]


def igamma_grad_a(a: Any, x: Any) -> Any:
    """``∂P(a, x)/∂a``, the derivative of :func:`igamma` in its first argument
    (``jax.lax.igamma_grad_a``): the gradient of pypto's ``gammainc`` itself, each region's
    method differentiated as written.

    >>> import pypto as pto
    >>> pto.lax.igamma_grad_a(pto.tensor([1.5]), pto.tensor([2.0])).numpy()
    array([-0.27743357], dtype=float32)
    """
    u, v = _api.promote("lax.igamma_grad_a", (a, x), inexact=True)
    shape = tuple(np.broadcast_shapes(tuple(u.shape), tuple(v.shape)))  # type: ignore[attr-defined]
    u, v = _api.broadcast_to(u, shape), _api.broadcast_to(v, shape)
    out, back = vjp(lambda t: igamma(t, v), u)
    return back(_api.add(_api.mul(out, 0.0), 1.0))[0]


def random_gamma_grad(a: Any, x: Any) -> Any:
    """``dx/da`` of a Gamma(a, 1) sample ``x`` held at its quantile, ``-∂ₐP / ∂ₓP``
    (``jax.lax.random_gamma_grad``: the reparameterised gradient of gamma sampling), with
    ``∂ₓP = xᵃ⁻¹e⁻ˣ/Γ(a)`` taken through its logarithm.

    >>> import pypto as pto
    >>> pto.lax.random_gamma_grad(pto.tensor([1.5]), pto.tensor([2.0])).numpy()
    array([1.28463], dtype=float32)
    """
    u, v = _api.promote("lax.random_gamma_grad", (a, x), inexact=True)
    log_density = _api.sub(_api.sub(_api.mul(_api.sub(u, 1.0), _api.log(v)), v), gammaln(u))
    return _api.div(_api.neg(igamma_grad_a(u, v)), _api.exp(log_density))
