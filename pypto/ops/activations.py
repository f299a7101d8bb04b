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

import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

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


def _dpa_jax(q: Any, k: Any, v: Any, bias: Any = None, mask: Any = None, **kw: Any) -> Any:
    return jax.nn.dot_product_attention(q, k, v, bias, mask, **kw)


# jax.nn's fill for masked logits (finite, so a row that sees no key averages the values)
_LARGE_NEGATIVE = -0.7 * float(np.finfo(np.float32).max)


@_composite(
    "dot_product_attention",
    "jax.nn's attention: [B, T, N, H] layout, grouped heads, bias, masks, sequence lengths",
    _dpa_jax,
    region=False,  # its softmax (and so the flash-attention pattern) groups on its own
)
def dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    bias: Any = None,
    mask: Any = None,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    query_seq_lengths: Any = None,
    key_value_seq_lengths: Any = None,
    local_window_size: int | tuple[int, int] | None = None,
    implementation: str | None = None,
    return_residual: bool = False,
) -> Any:
    """``jax.nn.dot_product_attention``: ``softmax(q kᵀ · scale + bias, masked) v`` per head,
    with JAX's layout and keywords.

    ``query`` is ``[B, T, N, H]`` (or ``[T, N, H]``), ``key`` and ``value`` ``[B, S, K, H]``
    with ``N`` a multiple of ``K``: query head ``n`` attends with key/value head
    ``n // (N / K)`` (grouped-query attention; ``K = 1`` is multi-query). ``bias`` and
    ``mask`` (bool, True = keep) broadcast to ``[B, N, T, S]``; ``is_causal`` lets query
    ``i`` see keys ``j ≤ i``; ``local_window_size`` ``(left, right)`` (or one int for both)
    keeps keys ``i - left ≤ j ≤ i + right``; ``query_seq_lengths`` and
    ``key_value_seq_lengths`` (int32 ``[B]``) mask the padding, and the output rows past a
    query length are 0. As in JAX, a query that sees no key gets the mean of the values
    (the masked logits are a large finite negative there), and ``return_residual`` also
    gives the logsumexp of each row of logits, ``[B, T, N]``.

    It is :func:`~pypto.scaled_dot_product_attention` on the heads: with no residual,
    ``pto.jit`` compiles it to one flash-attention kernel that reads and writes the
    ``[B, T, N, H]`` layout in place, each group's K/V tiles broadcast over its query heads
    (no copy), and a ``bias`` of full ``[.., T, S]`` extent added tile by tile. The logits
    are rounded to the inputs' dtype once, as in ``scaled_dot_product_attention`` and the
    NPU's fixpipe; JAX keeps float16 and bfloat16 logits in float32.

    >>> import pypto as pto
    >>> q = pto.random.normal(0, (2, 8, 4, 16))  # [B, T, N, H]
    >>> kv = pto.random.normal(1, (2, 8, 2, 16))  # two key/value heads for four query heads
    >>> pto.dot_product_attention(q, kv, kv, is_causal=True).shape
    (2, 8, 4, 16)
    """
    op = "dot_product_attention"
    if implementation not in (None, "xla"):
        raise ShapeError(
            f"implementation={implementation!r} is not available",
            op=op,
            hint="leave implementation=None: pypto computes attention one way on every backend",
        )
    q, k, v = api.promote(op, (query, key, value), inexact=True)
    three = len(q.shape) == 3  # type: ignore[attr-defined]
    q, k, v = (_four_d(op, name, t) for name, t in (("query", q), ("key", k), ("value", v)))
    b, t, n, h = q.shape
    bk, s, kh, hk = k.shape
    if (bk, h) != (b, hk) or tuple(v.shape[:3]) != (b, s, kh) or n % kh:
        raise ShapeError(
            f"query {tuple(q.shape)}, key {tuple(k.shape)} and value {tuple(v.shape)} do not "
            "fit [B, T, N, H], [B, S, K, H], [B, S, K, Hv] with N a multiple of K",
            op=op,
            hint="the heads are axis -2; key and value share B, S and K, and query shares B and H",
        )
    g = n // kh

    def heads(x: Any, grouped: bool) -> Any:
        """[B, L, heads, H] → [B, K, G, L, H] (grouped) or [B, K, 1, L, H]: the heads split
        first, so one transpose reads the operand (the attention kernel reads it in place)."""
        if g == 1:
            return api.transpose(x, (0, 2, 1, 3))
        _, ln, _, hx = x.shape
        x = api.reshape(x, (b, ln, kh, g if grouped else 1, hx))
        return api.transpose(x, (0, 2, 3, 1, 4))

    def to_groups(x: Any, name: str) -> Any:
        """A bias or mask over [B, N, T, S] in the grouped layout of the logits."""
        x = _four_d(op, name, api.asvalue(x, op))
        xb, xn, xt, xs = x.shape
        if xn not in (1, n):
            raise ShapeError(
                f"{name} of shape {tuple(x.shape)} has {xn} heads for {n}",
                op=op,
                hint="give it one head (broadcast) or one per query head: [B, N, T, S]",
            )
        if g == 1:
            return x
        return api.reshape(x, (xb, 1, 1, xt, xs) if xn == 1 else (xb, kh, g, xt, xs))

    # The masks are selects to -inf, the pattern the flash kernel takes: the constant ones
    # (causal, window) each on its own, so the kernel knows a causal mask by its array; the
    # others made first, so that their selects join the product's kernel.
    fixed: list[np.ndarray] = []
    if is_causal:
        fixed.append(composite.causal_mask(t, s))
    if local_window_size is not None:
        left, right = _window(op, local_window_size)
        i, j = np.arange(t)[:, None], np.arange(s)[None, :]
        fixed.append((i <= j + left) & (i >= j - right))
    static = np.logical_and.reduce(fixed) if fixed else np.ones((t, s), bool)
    varied: list[Any] = []
    if mask is not None:
        varied.append(to_groups(api.cast(api.asvalue(mask, op), dt.bool_), "mask"))
    rows = _padding(op, "query_seq_lengths", query_seq_lengths, b, t, g, (-1, 1))
    cols = _padding(op, "key_value_seq_lengths", key_value_seq_lengths, b, s, g, (1, -1))
    varied += [m for m in (rows, cols) if m is not None]
    seen = None  # whether each query sees a key: jax.nn's finite fill averages the values
    if varied or not static.any(-1).all():
        every = functools.reduce(composite.logical_and, [*fixed, *varied])
        seen = composite.any(every, -1, True)
        # a query that sees nothing sees every key here (its result is replaced below): its
        # softmax stays finite, and so does the gradient through it
        if static.any(-1).all():
            keep = functools.reduce(composite.logical_and, varied)
        else:
            keep, fixed = every, []
        keep = composite.logical_or(keep, composite.logical_not(seen))
        varied = [api.broadcast_to(keep, (*keep.shape[:-2], t, s))]  # (as the kernel loads it)
    # the bias first: made after the product, its reshape would end the product's kernel
    # before the add could join it (and the flash kernel could take it)
    bg = None if bias is None else api.cast(to_groups(bias, "bias"), q.dtype)
    qh, kt, vh = heads(q, True), heads(k, False), heads(v, False)
    sc = scale if scale is not None else 1.0 / math.sqrt(h)
    logits = api.mul(api.matmul(qh, api.transpose(kt, composite._swap_last(len(kt.shape)))), sc)
    if bg is not None:
        logits = api.add(logits, bg)
    for m in (*fixed, *varied):
        logits = api.where(m, logits, -math.inf)
    out = api.matmul(composite.softmax(logits, -1), vh)
    if seen is not None:
        out = api.where(seen, out, composite.mean(vh, -2, True))
    if rows is not None:  # the padding queries' rows are 0 (a product, as JAX's)
        out = api.mul(out, api.cast(rows, out.dtype))
    out = _from_heads(out, b, t, n)
    if three:
        out = api.reshape(out, tuple(out.shape[1:]))
    if not rules.flag(op, "return_residual", return_residual):
        return out
    lse = composite.logsumexp(api.cast(logits, dt.float32), -1, True)
    if seen is not None:
        lse = api.where(seen, lse, _LARGE_NEGATIVE)
    lse = api.reshape(_from_heads(lse, b, t, n), (b, t, n) if not three else (t, n))
    return out, api.stop_gradient(api.cast(lse, k.dtype))


def _four_d(op: str, name: str, x: Any) -> Any:
    """jax.nn's ``_ensure_4d``: a 3-d operand gets a batch axis of 1."""
    nd = len(x.shape)
    if nd == 3:
        return api.reshape(x, (1, *x.shape))
    if nd != 4:
        raise ShapeError(
            f"{name} must be 3-d or 4-d, got {api._aval(x)}",
            op=op,
            hint="[B, T, N, H] for the query, [B, S, K, H] for keys and values",
        )
    return x


def _from_heads(x: Any, b: int, t: int, n: int) -> Any:
    """The grouped layout [B, K, G, T, H] (or [B, N, T, H]) back to [B, T, N, H]."""
    if len(x.shape) == 4:
        return api.transpose(x, (0, 2, 1, 3))
    return api.reshape(api.transpose(x, (0, 3, 1, 2, 4)), (b, t, n, x.shape[-1]))


def _window(op: str, w: Any) -> tuple[int, int]:
    if isinstance(w, int | np.integer) and not isinstance(w, bool):
        return int(w), int(w)
    if isinstance(w, tuple | list) and len(w) == 2:
        return rules.integer(op, "local_window_size", w[0]), rules.integer(
            op, "local_window_size", w[1]
        )
    raise ShapeError(
        f"local_window_size must be an int or a pair (left, right), got {w!r:.60}",
        op=op,
        hint="e.g. local_window_size=(128, 0): each query sees the 128 keys before it",
    )


def _padding(op: str, name: str, lengths: Any, b: int, size: int, g: int, at: tuple) -> Any:
    """The mask of the positions below each batch row's length, shaped to broadcast over the
    logits: ``at`` puts the positions on the query (-1, 1) or key (1, -1) axis."""
    if lengths is None:
        return None
    ln = api.asvalue(lengths, op)
    if tuple(ln.shape) != (b,) or ln.dtype.is_floating or ln.dtype is dt.bool_:  # type: ignore[attr-defined]
        raise ShapeError(
            f"{name} must be integers of shape ({b},), one per batch row; got {api._aval(ln)}",
            op=op,
        )
    pos = np.arange(size, dtype=np.int32).reshape(at)
    lead = (b, 1, 1) if g > 1 else (b, 1)
    return api.less(pos, api.reshape(ln, (*lead, 1, 1)))
