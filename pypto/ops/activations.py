"""``erf``, ``erfc`` and more of ``jax.nn``'s activations, as composites over the core ops.

``erf`` is a sum of its Taylor series below 0.84 and ``1 - erfc`` above, ``erfc`` the Chebyshev
fit of Numerical Recipes (``erfcc``: a relative error below 1.2e-7 everywhere) times
``exp(-x²)``: float32-accurate, and built from ops the vector unit has. The exact GELU
(``pto.gelu(x, approximate=False)``, PyTorch's default) is ``x · erfc(-x / √2) / 2``.

At a kink the gradient is JAX's: ``relu6`` passes none of the cotangent at 0 and 6 (JAX's
custom derivative), ``hard_tanh`` all of it at ±1 and ``celu`` all of it at 0 (JAX's formulas).
So these are written with ``where`` on the side of the kink JAX's derivative takes, not with
``maximum``/``minimum``, whose ties pass half.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax

from pypto import dtypes as dt
from pypto.core.errors import ShapeError
from pypto.ops import api, composite, rules
from pypto.ops.composite import _composite
from pypto.ops.numpy_lib import _narrow, _wide

# Numerical Recipes' erfcc: erfc(z) = t·exp(-z² + P(t)), t = 1 / (1 + z/2), z >= 0
_ERFC = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)
# erf(x) = 2/√π · Σ (-1)ⁿ x^(2n+1) / (n! (2n+1)): its coefficients in x², to n = 12 (below
# _SWITCH the next term is under 1e-11 of the sum)
_TAYLOR = tuple(
    (-1) ** n * 2 / math.sqrt(math.pi) / (math.factorial(n) * (2 * n + 1)) for n in range(13)
)
# where erf switches to 1 - erfc (fdlibm's point): erfc's relative error there is a third of
# erf's
_SWITCH = 0.84375


def _horner(v: Any, coefs: tuple[float, ...]) -> Any:
    """``coefs[0] + v·(coefs[1] + v·(…))``."""
    acc = api.add(api.mul(v, coefs[-1]), coefs[-2])
    for c in coefs[-3::-1]:
        acc = api.add(api.mul(acc, v), c)
    return acc


def _erfc_pos(z: Any) -> Any:
    """erfc of ``z >= 0``: relative error below 1.2e-7."""
    t = api.div(1.0, api.add(api.mul(z, 0.5), 1.0))
    return api.mul(t, api.exp(api.sub(_horner(t, _ERFC), api.mul(z, z))))


def _erf32(v: Any) -> Any:
    small = api.less(api.abs(v), _SWITCH)
    xs = api.where(small, v, 0.0)  # each branch sees only its own inputs (no NaN gradients)
    near = api.mul(xs, _horner(api.mul(xs, xs), _TAYLOR))
    z = api.where(small, 1.0, api.abs(v))
    far = api.mul(composite.sign(v), api.sub(1.0, _erfc_pos(z)))
    return api.where(small, near, far)


def _erfc32(v: Any) -> Any:
    small = api.less(api.abs(v), _SWITCH)
    near = api.sub(1.0, _erf32(api.where(small, v, 0.0)))
    z = api.where(small, 1.0, api.abs(v))
    tail = _erfc_pos(z)
    far = api.where(api.less(v, 0.0), api.sub(2.0, tail), tail)
    return api.where(small, near, far)


@_composite("erf", "the error function, elementwise", jax.scipy.special.erf)
def erf(x: Any) -> Any:
    """The error function ``2/√π ∫₀ˣ exp(-t²) dt``, float32-accurate (a Taylor sum below 0.84,
    ``1 - erfc`` above); float16 and bfloat16 through float32, rounded once.

    >>> import pypto as pto
    >>> pto.erf(pto.tensor([0.0, 0.5, 2.0])).numpy().round(6)
    array([0.      , 0.5205  , 0.995322], dtype=float32)
    """
    (v,), d = _wide("erf", x)
    return _narrow(_erf32(v), d)


@_composite(
    "erfc", "the complementary error function 1 - erf(x), elementwise", jax.scipy.special.erfc
)
def erfc(x: Any) -> Any:
    """``1 - erf(x)``, accurate in relative terms where it is tiny (large ``x``).

    >>> import pypto as pto
    >>> f"{float(pto.erfc(pto.tensor(5.0))):.5g}"  # 1 - erf(5) would be 0 in float32
    '1.5375e-12'
    """
    (v,), d = _wide("erfc", x)
    return _narrow(_erfc32(v), d)


def _gelu_exact(x: Any) -> Any:
    """``x · erfc(-x/√2) / 2`` in float32 (``1 + erf`` would cancel for negative ``x``)."""
    (v,), d = _wide("gelu", x)
    return _narrow(api.mul(api.mul(v, 0.5), _erfc32(api.mul(v, -1 / math.sqrt(2.0)))), d)


@_composite("relu6", "min(max(x, 0), 6)", jax.nn.relu6)
def relu6(x: Any) -> Any:
    """``min(max(x, 0), 6)``.

    >>> import pypto as pto
    >>> pto.relu6(pto.tensor([-1.0, 3.0, 9.0])).numpy()
    array([0., 3., 6.], dtype=float32)
    """
    (v,) = api.promote("relu6", (x,), inexact=True)
    # the flat sides include 0 and 6 (no cotangent there); a NaN takes the middle
    return api.where(api.less_equal(v, 0.0), 0.0, api.where(api.greater_equal(v, 6.0), 6.0, v))


@_composite("hard_sigmoid", "relu6(x + 3) / 6", jax.nn.hard_sigmoid)
def hard_sigmoid(x: Any) -> Any:
    """The piecewise-linear sigmoid ``relu6(x + 3) / 6``."""
    (v,) = api.promote("hard_sigmoid", (x,), inexact=True)
    return api.div(relu6(api.add(v, 3.0)), 6.0)


@_composite("hard_silu", "x · hard_sigmoid(x) (hard swish)", jax.nn.hard_silu)
def hard_silu(x: Any) -> Any:
    """``x · hard_sigmoid(x)``, also called hard swish (``pto.hard_swish``).

    >>> import pypto as pto
    >>> pto.hard_silu(pto.tensor([-4.0, 1.0, 4.0])).numpy()
    array([-0.       ,  0.6666667,  4.       ], dtype=float32)
    """
    (v,) = api.promote("hard_silu", (x,), inexact=True)
    return api.mul(v, hard_sigmoid(v))


@_composite("hard_tanh", "clip(x, -1, 1)", jax.nn.hard_tanh)
def hard_tanh(x: Any) -> Any:
    """``x`` limited to [-1, 1]; integers stay integers (bools become int32), as JAX's."""
    v = api.asvalue(x, "hard_tanh")
    if v.dtype is dt.bool_:  # type: ignore[attr-defined]
        v = api.cast(v, dt.int32)
    # ±1 belong to the middle (the whole cotangent there), as in JAX's nested where
    return api.where(api.greater(v, 1), 1, api.where(api.less(v, -1), -1, v))


@_composite("log_sigmoid", "log(sigmoid(x)) = -softplus(-x)", jax.nn.log_sigmoid)
def log_sigmoid(x: Any) -> Any:
    """``log(sigmoid(x))`` as ``-softplus(-x)``: no overflow and no ``log(0)`` for large
    negative ``x``.

    >>> import pypto as pto
    >>> pto.log_sigmoid(pto.tensor([-100.0, 0.0])).numpy()
    array([-100.       ,   -0.6931472], dtype=float32)
    """
    (v,) = api.promote("log_sigmoid", (x,), inexact=True)
    return api.neg(composite.softplus(api.neg(v)))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@_composite("selu", "scale · elu(x, alpha) with the self-normalising constants", jax.nn.selu)
def selu(x: Any) -> Any:
    """The scaled ELU of Klambauer et al.: ``1.0507 · elu(x, 1.6733)``."""
    (v,) = api.promote("selu", (x,), inexact=True)
    return api.mul(composite.elu(v, _SELU_ALPHA), _SELU_SCALE)


@_composite("celu", "x above 0, alpha·expm1(x / alpha) below", jax.nn.celu)
def celu(x: Any, alpha: float = 1.0) -> Any:
    """The continuously differentiable ELU: ``x`` above 0, ``alpha · expm1(x / alpha)``
    below."""
    (v,) = api.promote("celu", (x,), inexact=True)
    # JAX's sum of the two sides: at 0 each passes half the cotangent, together all of it
    neg = api.mul(composite.expm1(api.div(api.minimum(v, 0.0), alpha)), alpha)
    return api.add(api.maximum(v, 0.0), neg)


@_composite("soft_sign", "x / (|x| + 1)", jax.nn.soft_sign)
def soft_sign(x: Any) -> Any:
    """``x / (|x| + 1)``."""
    (v,) = api.promote("soft_sign", (x,), inexact=True)
    return api.div(v, api.add(api.abs(v), 1.0))


@_composite("mish", "x · tanh(softplus(x))", jax.nn.mish)
def mish(x: Any) -> Any:
    """``x · tanh(softplus(x))``.

    >>> import pypto as pto
    >>> f"{float(pto.mish(pto.tensor(1.0))):.4f}"
    '0.8651'
    """
    (v,) = api.promote("mish", (x,), inexact=True)
    return api.mul(v, api.tanh(composite.softplus(v)))


@_composite("glu", "gated linear unit: first half · sigmoid(second half) along an axis", jax.nn.glu)
def glu(x: Any, axis: int = -1) -> Any:
    """The gated linear unit: ``x`` split in two halves along ``axis``, the first times the
    sigmoid of the second.

    >>> import pypto as pto
    >>> pto.glu(pto.tensor([[2.0, 0.0]])).numpy()
    array([[1.]], dtype=float32)
    """
    (v,) = api.promote("glu", (x,), inexact=True)
    a = composite._axis("glu", v, axis)
    n = v.shape[a]  # type: ignore[attr-defined]
    if n % 2:
        raise ShapeError(
            f"glu splits axis {axis} in halves, but its length is {n}: {api._aval(v)}",
            op="glu",
            hint="give that axis an even length",
        )
    first, second = composite.split(v, 2, a)
    return api.mul(first, api.sigmoid(second))


@_composite("squareplus", "(x + sqrt(x² + b)) / 2, a smooth relu", jax.nn.squareplus)
def squareplus(x: Any, b: Any = 4) -> Any:
    """``(x + sqrt(x² + b)) / 2``, a smooth ReLU (Barron, 2021): ``b`` sets the width of the
    bend; ``sqrt(b) / 2`` at 0.

    >>> import pypto as pto
    >>> pto.squareplus(pto.tensor([-3.0, 0.0, 3.0])).numpy()
    array([0.30277562, 1.        , 3.3027756 ], dtype=float32)
    """
    (v,) = api.promote("squareplus", (x,), inexact=True)
    return api.div(api.add(v, api.sqrt(api.add(api.mul(v, v), b))), 2.0)


@_composite("sparse_plus", "0 below -1, (x + 1)² / 4 between, x above 1", jax.nn.sparse_plus)
def sparse_plus(x: Any) -> Any:
    """0 for ``x <= -1``, ``(x + 1)² / 4`` between, ``x`` for ``x >= 1``: a softplus that is
    exactly 0 and exactly linear outside [-1, 1].

    >>> import pypto as pto
    >>> pto.sparse_plus(pto.tensor([-2.0, 0.0, 2.0])).numpy()
    array([0.  , 0.25, 2.  ], dtype=float32)
    """
    (v,) = api.promote("sparse_plus", (x,), inexact=True)
    inner = api.div(composite.square(api.add(v, 1.0)), 4.0)
    return api.where(api.less_equal(v, -1.0), 0.0, api.where(api.greater_equal(v, 1.0), v, inner))


@_composite(
    "sparse_sigmoid", "clip(x + 1, 0, 2) / 2, sparse_plus's derivative", jax.nn.sparse_sigmoid
)
def sparse_sigmoid(x: Any) -> Any:
    """``clip(x + 1, 0, 2) / 2``: a sigmoid that is exactly 0 below -1 and 1 above 1 (the
    derivative of :func:`sparse_plus`).

    >>> import pypto as pto
    >>> pto.sparse_sigmoid(pto.tensor([-2.0, 0.5, 2.0])).numpy()
    array([0.  , 0.75, 1.  ], dtype=float32)
    """
    (v,) = api.promote("sparse_sigmoid", (x,), inexact=True)
    return api.mul(composite.clip(api.add(v, 1.0), 0.0, 2.0), 0.5)


_LN2 = math.log(2.0)


@_composite("log1mexp", "log(1 - exp(-x)), accurate for small and large x", jax.nn.log1mexp)
def log1mexp(x: Any) -> Any:
    """``log(1 - exp(-x))`` for ``x >= 0`` (NaN below): ``log(-expm1(-x))`` below ln 2 and
    ``log1p(-exp(-x))`` above, each where it keeps its digits (Mächler's rule, as JAX's).

    >>> import pypto as pto
    >>> pto.log1mexp(pto.tensor([1e-6, 1.0, 30.0])).numpy()
    array([-1.3815511e+01, -4.5867512e-01, -9.3576229e-14], dtype=float32)
    """
    (v,) = api.promote("log1mexp", (x,), inexact=True)
    small = api.less(v, _LN2)
    # each side sees only the inputs it is chosen for, so the other's derivative (an inf at 0
    # or where exp(-x) rounds to 1) never meets the zero cotangent where gives it
    lo = api.where(small, v, _LN2)
    hi = api.where(small, _LN2, v)
    return api.where(
        small,
        api.log(api.neg(composite.expm1(api.neg(lo)))),
        composite.log1p(api.neg(api.exp(api.neg(hi)))),
    )


@_composite("logmeanexp", "log(mean(exp(x))) = logsumexp(x) - log(count)", jax.nn.logmeanexp)
def logmeanexp(
    x: Any, axis: int | Sequence[int] | None = None, where: Any = None, keepdims: bool = False
) -> Any:
    """``log(mean(exp(x)))`` over ``axis`` (all when None), as ``jax.nn.logmeanexp``:
    :func:`pto.logsumexp` less the log of the count (of the elements ``where`` selects).

    >>> import pypto as pto
    >>> f"{float(pto.logmeanexp(pto.tensor([1000.0, 1000.0]))):.1f}"
    '1000.0'
    """
    (v,) = api.promote("logmeanexp", (x,), inexact=True)
    axes = rules.normalize_axes("logmeanexp", axis, api._aval(v))
    lse = composite.logsumexp(v, axes, keepdims, where=where)
    if where is None:
        n = math.prod(v.shape[a] for a in axes)  # type: ignore[attr-defined]
        return api.sub(lse, math.log(n) if n else -math.inf)  # (a weak scalar: lse's dtype)
    ones = api.reduction_keywords("logmeanexp", composite._ones_as(v), mask=where, fill=0.0)
    return api.sub(lse, api.log(api.cast(api.sum(ones, axes, keepdims), lse.dtype)))


@_composite("standardize", "(x - mean) / sqrt(variance + epsilon) over axes", jax.nn.standardize)
def standardize(
    x: Any,
    axis: int | Sequence[int] | None = -1,
    mean: Any = None,
    variance: Any = None,
    epsilon: Any = 1e-5,
    where: Any = None,
    *,
    algorithm: str = "fast",
) -> Any:
    """``(x - mean) · rsqrt(variance + epsilon)`` over ``axis``, as ``jax.nn.standardize``:
    the mean and variance of ``x`` (of the elements ``where`` selects) unless given. The
    variance is ``mean(x²) - mean²`` clipped at 0 (``algorithm="fast"``, JAX's default) or
    ``mean((x - mean)²)`` (``"stable"``).

    >>> import pypto as pto
    >>> pto.standardize(pto.tensor([1.0, 2.0, 3.0]), epsilon=0.0).numpy()
    array([-1.224745,  0.      ,  1.224745], dtype=float32)
    """
    if algorithm not in ("fast", "stable"):
        raise ShapeError(
            f"unknown algorithm {algorithm!r}",
            op="standardize",
            hint='use algorithm="fast" (mean(x²) - mean²) or "stable" (mean((x - mean)²))',
        )
    (v,) = api.promote("standardize", (x,), inexact=True)
    axes = rules.normalize_axes("standardize", axis, api._aval(v))
    mu = composite.mean(v, axes, True, where=where) if mean is None else mean
    if variance is None:
        if algorithm == "stable":
            c = api.sub(v, mu)
            variance = composite.mean(api.mul(c, c), axes, True, where=where)
        else:
            sq = composite.mean(api.mul(v, v), axes, True, where=where)
            variance = api.maximum(api.sub(sq, api.mul(mu, mu)), 0.0)
    return api.mul(api.sub(v, mu), api.rsqrt(api.add(variance, epsilon)))
