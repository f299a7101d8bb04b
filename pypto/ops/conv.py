"""Convolutions and windowed reductions with ``jax.lax``'s signatures:
``conv_general_dilated`` and its wrappers, and ``reduce_window`` (pooling).

A convolution is a composite: the input padded (and dilated, for a transposed convolution)
and one matmul of its patches by the kernel. At stride 1 the patches are contiguous rows of
the flattened, padded input, shifted once per kernel offset (:func:`_shifted_rows`), which the
NPU's matmul reads in place; otherwise they are cut as one strided slice per kernel offset
and stacked (im2col), and the kernel ``[groups, O/groups, I·K]`` multiplies the patches
``[N, groups, I·K, P]``. Either way it runs on the cube cores like any other product, and its
gradient is the decomposition's (slices scatter back, the matmul transposes).

>>> import pypto as pto
>>> x = pto.ones((1, 1, 4, 4))  # NCHW
>>> w = pto.ones((1, 1, 3, 3))  # OIHW
>>> pto.lax.conv(x, w, (1, 1), "SAME")[0, 0].numpy()
array([[4., 6., 6., 4.],
       [6., 9., 9., 6.],
       [6., 9., 9., 6.],
       [4., 6., 6., 4.]], dtype=float32)
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from pypto import dtypes as dt
from pypto.core.errors import DTypeError, ShapeError
from pypto.ops import api, composite, rules
from pypto.ops.composite import _composite
from pypto.ops.numpy_lib import lax_pad

__all__ = [
    "ConvDimensionNumbers",
    "conv",
    "conv_dimension_numbers",
    "conv_general_dilated",
    "conv_general_permutations",
    "conv_general_shape_tuple",
    "conv_shape_tuple",
    "conv_transpose",
    "conv_transpose_shape_tuple",
    "conv_with_general_padding",
    "padtype_to_pads",
    "reduce_window",
    "reduce_window_shape_tuple",
]

_OP = "conv_general_dilated"


class ConvDimensionNumbers(NamedTuple):
    """Where the batch, feature and spatial axes are: ``lhs_spec`` (batch, feature,
    spatial...) of the input, ``rhs_spec`` (out feature, in feature, spatial...) of the
    kernel, ``out_spec`` (batch, feature, spatial...) of the output, as ``jax.lax``'s."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def conv_dimension_numbers(
    lhs_shape: Sequence[int], rhs_shape: Sequence[int], dimension_numbers: Any
) -> ConvDimensionNumbers:
    """``dimension_numbers`` (None: ``NCHW, OIHW, NCHW``; three strings such as
    ``("NHWC", "HWIO", "NHWC")``; or the axes themselves) as :class:`ConvDimensionNumbers`.
    The spatial axes pair up in the order the kernel's spec names them, as in JAX.

    >>> conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
    """
    nd = len(lhs_shape)
    if len(rhs_shape) != nd:
        raise ShapeError(
            f"input and kernel need as many axes: {tuple(lhs_shape)} and {tuple(rhs_shape)}",
            op=_OP,
            hint="the kernel is [out features, in features, *window] in its own axis order",
        )
    if dimension_numbers is None:
        return ConvDimensionNumbers(*(tuple(range(nd)),) * 3)
    if isinstance(dimension_numbers, ConvDimensionNumbers) or (
        isinstance(dimension_numbers, tuple | list)
        and len(dimension_numbers) == 3
        and all(isinstance(s, tuple | list) for s in dimension_numbers)
    ):
        specs = [tuple(int(i) for i in s) for s in dimension_numbers]
        if any(sorted(s) != list(range(nd)) for s in specs):
            raise ShapeError(
                f"dimension_numbers {tuple(specs)} are not each a permutation of {nd} axes",
                op=_OP,
            )
        return ConvDimensionNumbers(*specs)
    if (
        not isinstance(dimension_numbers, tuple | list)
        or len(dimension_numbers) != 3
        or not all(isinstance(s, str) for s in dimension_numbers)
    ):
        raise ShapeError(
            f"dimension_numbers must be None or three strings, got {dimension_numbers!r:.80}",
            op=_OP,
            hint='e.g. ("NHWC", "HWIO", "NHWC"): N batch, C feature, O/I kernel features',
        )
    lhs, rhs, out = dimension_numbers
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for s, (a, b) in zip(dimension_numbers, pairs, strict=True):
        if len(s) != nd or s.count(a) != 1 or s.count(b) != 1 or len(set(s)) != len(s):
            raise ShapeError(
                f"dimension_numbers {tuple(dimension_numbers)}: {s!r} must have {nd} distinct "
                f"letters with {a!r} and {b!r} once each",
                op=_OP,
            )
    spatial = set(rhs) - {"O", "I"}
    if set(lhs) - {"N", "C"} != spatial or set(out) - {"N", "C"} != spatial:
        raise ShapeError(
            f"dimension_numbers {tuple(dimension_numbers)} name different spatial axes",
            op=_OP,
        )

    def perm(spec: str, pair: tuple[str, str]) -> tuple[int, ...]:
        # the spatial axes in the order the kernel's spec lists them
        sp = sorted(
            (i for i, c in enumerate(spec) if c not in pair), key=lambda i: rhs.index(spec[i])
        )
        return (spec.index(pair[0]), spec.index(pair[1]), *sp)

    return ConvDimensionNumbers(perm(lhs, pairs[0]), perm(rhs, pairs[1]), perm(out, pairs[2]))


def _conv_jax(
    lhs: Any,
    rhs: Any,
    window_strides: Any,
    padding: Any,
    lhs_dilation: Any = None,
    rhs_dilation: Any = None,
    dimension_numbers: Any = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Any:
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        dimension_numbers = jax.lax.ConvDimensionNumbers(*dimension_numbers)
    if isinstance(preferred_element_type, dt.DType):
        preferred_element_type = preferred_element_type.np
    return jax.lax.conv_general_dilated(
        lhs,
        rhs,
        window_strides,
        padding,
        lhs_dilation,
        rhs_dilation,
        dimension_numbers,
        feature_group_count,
        batch_group_count,
        precision,
        preferred_element_type,
    )


def _ints(name: str, v: Any, n: int, op: str = _OP) -> tuple[int, ...]:
    """A sequence of ``n`` positive ints (one per spatial axis), None for ones."""
    if v is None:
        return (1,) * n
    try:
        t = tuple(v)
    except TypeError:
        t = ()
    if len(t) != n or not all(isinstance(i, int | np.integer) and i >= 1 for i in t):
        raise ShapeError(
            f"{name} {v!r:.60} is not {n} positive ints, one per "
            + ("spatial axis" if op == _OP else "axis"),
            op=op,
            hint=f"e.g. {name}={(1,) * n}",
        )
    return tuple(int(i) for i in t)


def _pads(
    padding: Any,
    spatial: tuple[int, ...],
    window: tuple[int, ...],
    strides: tuple[int, ...],
    op: str = _OP,
) -> list[tuple[int, int]]:
    """(low, high) per spatial axis from ``"SAME"``, ``"SAME_LOWER"``, ``"VALID"`` or the
    pairs themselves (negative pairs crop); ``window`` is the dilated kernel's extent."""
    n = len(spatial)
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return [(0, 0)] * n
        if mode not in ("SAME", "SAME_LOWER"):
            raise ShapeError(
                f"padding {padding!r} is not 'SAME', 'SAME_LOWER', 'VALID' or (low, high) pairs",
                op=op,
            )
        out = []
        for size, k, s in zip(spatial, window, strides, strict=True):
            total = max((-(-size // s) - 1) * s + k - size, 0)
            small, big = total // 2, total - total // 2
            out.append((small, big) if mode == "SAME" else (big, small))
        return out
    try:
        pairs = [(int(lo), int(hi)) for lo, hi in padding]
    except (TypeError, ValueError):
        pairs = []
    if len(pairs) != n:
        raise ShapeError(
            f"padding {padding!r:.60} is not a string or {n} (low, high) pairs",
            op=op,
            hint=f"e.g. padding={((1, 1),) * n} or 'SAME'",
        )
    return pairs


def preferred(op: str, u: Any, v: Any, dtype: Any) -> tuple[Any, Any, Any]:
    """A product's operands widened to its ``preferred_element_type`` (the products of the
    narrower dtype are exact there, so the sum accumulates in the wider one), and that dtype
    (None: the usual one)."""
    if dtype is None:
        return u, v, None
    want = dt.dtype(dtype, op=op)
    if want.is_floating == u.dtype.is_floating and want.itemsize >= u.dtype.itemsize:
        u, v = api.cast(u, want), api.cast(v, want)
    return u, v, want


def _to(canon: Any, spec: tuple[int, ...]) -> Any:
    """An array in the canonical axis order (batch, feature, spatial...) laid out as
    ``spec`` says: axis ``spec[j]`` of the result is axis ``j`` of ``canon``."""
    return _permuted(canon, tuple(spec.index(i) for i in range(len(spec))))


SHIFT_WASTE = 2.0
"""the most rows of the padded input per output row the shifted-rows convolution computes
(the rest are cut away after the product); beyond it the convolution cuts its patches"""


def _shifted_rows(
    x: Any,
    w: Any,
    dn: ConvDimensionNumbers,
    pads: list[tuple[int, int]],
    ldil: tuple[int, ...],
    rdil: tuple[int, ...],
    strides: tuple[int, ...],
    groups: int,
    preferred_element_type: Any,
) -> Any:
    """A stride-1 convolution as one matmul over *shifted rows* of the padded input, or None
    when it does not apply (strides, feature groups, or too much waste).

    Flattened channels-last, the padded input is a ``[rows, C]`` matrix, and each kernel
    offset reads it shifted by a fixed number of rows: the offset's row in the flat padded
    grid. So the patches are the input's rows at nine (for 3x3) contiguous shifts side by side
    — no strided gathers — and the product runs over every position of the padded grid; the
    positions whose window would wrap past an edge are cut away after it (:data:`SHIFT_WASTE`
    bounds that waste). On the NPU each shift is one window of the padded input.
    """
    if any(s != 1 for s in strides) or groups != 1:
        return None
    nd = len(x.shape)
    n, c = x.shape[dn.lhs_spec[0]], x.shape[dn.lhs_spec[1]]
    o = w.shape[dn.rhs_spec[0]]
    space = [x.shape[a] for a in dn.lhs_spec[2:]]
    kernel = [w.shape[a] for a in dn.rhs_spec[2:]]
    padded = [
        lo + hi + (sz - 1) * d + 1 if sz else lo + hi
        for (lo, hi), sz, d in zip(pads, space, ldil, strict=True)
    ]
    window = [(k - 1) * r + 1 for k, r in zip(kernel, rdil, strict=True)]
    out = [p - e + 1 for p, e in zip(padded, window, strict=True)]
    if min(out, default=1) <= 0 or 0 in kernel or 0 in space or n * c * o == 0:
        return None
    grid, valid = math.prod(padded), math.prod(out)
    if grid > SHIFT_WASTE * valid:
        return None
    # channels last: [N, *space, C] and the kernel [*kernel, I, O]
    xl = _permuted(x, (dn.lhs_spec[0], *dn.lhs_spec[2:], dn.lhs_spec[1]))
    wl = _permuted(w, (*dn.rhs_spec[2:], dn.rhs_spec[1], dn.rhs_spec[0]))
    pitch = [math.prod(padded[j + 1 :]) for j in range(len(padded))]
    shifts = [
        sum(k * r * p for k, r, p in zip(offs, rdil, pitch, strict=True))
        for offs in itertools.product(*(range(k) for k in kernel))
    ]
    # the last image's last windows read past its end: one more image of zeros (in the same
    # pad, so the input is copied once), fewer rows than a second pad would copy
    extra = 1 if shifts[-1] else 0
    if extra or any(p != (0, 0) for p in pads) or ldil != (1,) * len(ldil):
        cfg = [(0, extra, 0), *((lo, hi, d - 1) for (lo, hi), d in zip(pads, ldil, strict=True))]
        xl = lax_pad(xl, 0, [*cfg, (0, 0, 0)])
    rows = n * grid
    flat = api.reshape(xl, ((n + extra) * grid, c))
    cuts = [api.getitem(flat, (slice(s, s + rows),)) if extra else flat for s in shifts]
    patches = api.concat(cuts, axis=1) if len(cuts) > 1 else cuts[0]
    wf = api.reshape(wl, (math.prod(kernel) * c, o))
    patches, wf, want = preferred(_OP, patches, wf, preferred_element_type)
    y = api.reshape(api.matmul(patches, wf), (n, *padded, o))
    if out != padded:
        y = api.getitem(y, (slice(None), *(slice(0, m) for m in out)))
    if want is not None and y.dtype is not want:
        y = api.cast(y, want)
    # y is [N, *out, O]: its axes in canonical order (N, O, spatial...), laid out as _to does
    canon = (0, nd - 1, *range(1, nd - 1))
    return _permuted(y, tuple(canon[dn.out_spec.index(i)] for i in range(nd)))


def _permuted(x: Any, perm: tuple[int, ...]) -> Any:
    return x if perm == tuple(range(len(perm))) else api.transpose(x, perm)


@_composite(
    "conv_general_dilated", "N-d convolution with jax.lax's options (im2col + matmul)", _conv_jax
)
def conv_general_dilated(
    lhs: Any,
    rhs: Any,
    window_strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: Any = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Any:
    """``jax.lax.conv_general_dilated``: the N-d convolution (a cross-correlation, the kernel
    not flipped) of ``lhs`` with the kernel ``rhs``.

    ``window_strides`` step the window; ``padding`` is ``"SAME"``, ``"SAME_LOWER"``,
    ``"VALID"`` or ``(low, high)`` per spatial axis (negative crops); ``lhs_dilation``
    spreads the input (a transposed convolution), ``rhs_dilation`` the kernel (atrous);
    ``dimension_numbers`` names the layouts (default ``NCHW``/``OIHW``/``NCHW``, e.g.
    ``("NHWC", "HWIO", "NHWC")``); ``feature_group_count`` splits the features into groups
    (a depthwise convolution has as many groups as features); ``preferred_element_type``
    is the result's dtype (for example float32 from float16, accumulated in it).
    ``precision`` is accepted and ignored: float16 and bfloat16 products accumulate in
    float32, as every pypto matmul does. ``batch_group_count`` must be 1.

    >>> import pypto as pto
    >>> x = pto.arange(5.0).reshape(1, 1, 5)  # one 1-d signal, NCW
    >>> pto.lax.conv_general_dilated(x, pto.ones((1, 1, 2)), (2,), "VALID").numpy()
    array([[[1., 5.]]], dtype=float32)
    """
    x: Any
    w: Any
    x, w = api.promote(_OP, (lhs, rhs))
    if x.dtype is dt.bool_:
        raise DTypeError(
            f"convolution of bools: {rules.show([api._aval(x), api._aval(w)])}",
            op=_OP,
            hint="cast to a number dtype first",
        )
    xs, ws = tuple(x.shape), tuple(w.shape)
    dn = conv_dimension_numbers(xs, ws, dimension_numbers)
    nd = len(xs)
    if nd < 2:
        raise ShapeError(f"needs at least batch and feature axes, got {api._aval(x)}", op=_OP)
    ns = nd - 2
    strides = _ints("window_strides", window_strides, ns)
    ldil = _ints("lhs_dilation", lhs_dilation, ns)
    rdil = _ints("rhs_dilation", rhs_dilation, ns)
    groups = rules.integer(_OP, "feature_group_count", feature_group_count)
    if rules.integer(_OP, "batch_group_count", batch_group_count) != 1:
        raise ShapeError(
            f"batch_group_count={batch_group_count} is not supported",
            op=_OP,
            hint="batch groups arise in the weight gradient of a grouped convolution; "
            "pto.grad of the convolution computes it without them",
        )
    n, c, *space = (xs[a] for a in dn.lhs_spec)
    o, i, *kernel = (ws[a] for a in dn.rhs_spec)
    if groups < 1 or c % groups or o % groups or c // groups != i:
        raise ShapeError(
            f"{c} input features in {groups} group(s) for a kernel of {i} input and {o} "
            f"output features ({rules.show([api._aval(x), api._aval(w)])}, in canonical order)",
            op=_OP,
            hint="the kernel's in-features are the input's features / feature_group_count, "
            "and its out-features a multiple of the groups",
        )
    window = tuple((k - 1) * r + 1 for k, r in zip(kernel, rdil, strict=True))
    if isinstance(padding, str) and ldil != (1,) * ns:
        raise ShapeError(
            "string padding with lhs_dilation (a transposed convolution)",
            op=_OP,
            hint="give (low, high) pairs, or use pto.lax.conv_transpose",
        )
    pads = _pads(padding, tuple(space), window, strides)
    shifted = _shifted_rows(x, w, dn, pads, ldil, rdil, strides, groups, preferred_element_type)
    if shifted is not None:
        return shifted
    x, w = _permuted(x, dn.lhs_spec), _permuted(w, dn.rhs_spec)
    if any(p != (0, 0) for p in pads) or ldil != (1,) * ns:
        cfg = [
            (0, 0, 0),
            (0, 0, 0),
            *((lo, hi, d - 1) for (lo, hi), d in zip(pads, ldil, strict=True)),
        ]
        x = lax_pad(x, 0, cfg)
    padded = x.shape[2:]
    out = tuple(max(0, (p - e) // s + 1) for p, e, s in zip(padded, window, strides, strict=True))
    # the patches: one strided slice of the input per kernel offset, stacked after the features
    cuts = []
    for offs in itertools.product(*(range(k) for k in kernel)):
        key = [slice(None), slice(None)]
        for off, r, s, m in zip(offs, rdil, strides, out, strict=True):
            key.append(slice(off * r, off * r + (m - 1) * s + 1, s) if m else slice(0, 0))
        cuts.append(api.getitem(x, tuple(key)))
    kk, pp = math.prod(kernel), math.prod(out)
    patches = composite.stack(cuts, 2) if len(cuts) > 1 else composite.expand_dims(cuts[0], 2)
    patches = api.reshape(patches, (n, groups, (c // groups) * kk, pp))
    wg = api.reshape(w, (groups, o // groups, i * kk))
    patches, wg, want = preferred(_OP, patches, wg, preferred_element_type)
    y = api.reshape(api.matmul(wg, patches), (n, o, *out))
    if want is not None and y.dtype is not want:
        y = api.cast(y, want)
    return _to(y, dn.out_spec)


def conv(
    lhs: Any,
    rhs: Any,
    window_strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Any:
    """``jax.lax.conv``: :func:`conv_general_dilated` in ``NCHW``/``OIHW`` with no dilation.

    >>> import pypto as pto
    >>> pto.lax.conv(pto.ones((1, 2, 3, 3)), pto.ones((4, 2, 2, 2)), (1, 1), "VALID").shape
    (1, 4, 2, 2)
    """
    return conv_general_dilated(
        lhs,
        rhs,
        window_strides,
        padding,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )


def conv_with_general_padding(
    lhs: Any,
    rhs: Any,
    window_strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    lhs_dilation: Sequence[int] | None,
    rhs_dilation: Sequence[int] | None,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> Any:
    """``jax.lax.conv_with_general_padding``: :func:`conv_general_dilated` with dilations,
    in ``NCHW``/``OIHW``."""
    return conv_general_dilated(
        lhs,
        rhs,
        window_strides,
        padding,
        lhs_dilation,
        rhs_dilation,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )


# ---- jax.lax's shape helpers of convolution code ---------------------------------------------


def padtype_to_pads(
    in_shape: Sequence[int],
    window_shape: Sequence[int],
    window_strides: Sequence[int],
    padding: Any,
) -> list[tuple[int, int]]:
    """``(low, high)`` per spatial axis for ``"SAME"``, ``"SAME_LOWER"`` or ``"VALID"``
    (``jax.lax.padtype_to_pads``).

    >>> padtype_to_pads((7, 8), (3, 3), (2, 2), "SAME")
    [(1, 1), (0, 1)]
    """
    name = getattr(padding, "name", padding)  # (JAX's PaddingType too)
    return _pads(
        str(name),
        tuple(int(n) for n in in_shape),
        tuple(int(k) for k in window_shape),
        tuple(int(s) for s in window_strides),
        "lax.padtype_to_pads",
    )


def _out_sizes(padded: Sequence[int], window: Sequence[int], strides: Sequence[int]) -> list[int]:
    """Window positions per axis: how many windows of ``window`` fit ``padded`` at ``strides``
    (none when the window is larger)."""
    return [max(0, (p - k) // s + 1) for p, k, s in zip(padded, window, strides, strict=True)]


def conv_shape_tuple(
    lhs_shape: Sequence[int],
    rhs_shape: Sequence[int],
    strides: Sequence[int],
    pads: Any,
    batch_group_count: int = 1,
) -> tuple[int, ...]:
    """The output shape of a convolution of ``NC...`` by ``OI...`` (``jax.lax.conv_shape_tuple``);
    ``pads`` is a padding string or ``(low, high)`` pairs.

    >>> conv_shape_tuple((2, 3, 9, 9), (8, 3, 3, 3), (2, 2), "SAME")
    (2, 8, 5, 5)
    """
    sp, win = tuple(lhs_shape[2:]), tuple(rhs_shape[2:])
    pairs = _pads(pads, sp, win, tuple(strides), "lax.conv_shape_tuple")
    padded = [n + lo + hi for n, (lo, hi) in zip(sp, pairs, strict=True)]
    spatial = _out_sizes(padded, win, strides)
    return (lhs_shape[0] // batch_group_count, rhs_shape[0], *spatial)


def conv_general_permutations(dimension_numbers: Any) -> tuple[tuple[int, ...], ...]:
    """The axis permutations that put the input, kernel and output of
    ``dimension_numbers`` (three strings, or :class:`ConvDimensionNumbers`) in ``NC...``,
    ``OI...`` and ``NC...`` order (``jax.lax.conv_general_permutations``).

    >>> conv_general_permutations(("NHWC", "HWIO", "NHWC"))
    ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    """
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return tuple(dimension_numbers)
    try:
        nd = len(dimension_numbers[0])
    except (TypeError, IndexError):
        nd = 0
    return tuple(conv_dimension_numbers((1,) * nd, (1,) * nd, dimension_numbers))


def conv_general_shape_tuple(
    lhs_shape: Sequence[int],
    rhs_shape: Sequence[int],
    window_strides: Sequence[int],
    padding: Any,
    dimension_numbers: Any,
) -> tuple[int, ...]:
    """The output shape of ``conv_general_dilated`` without dilation, in the output's own
    axis order (``jax.lax.conv_general_shape_tuple``).

    >>> nhwc = ("NHWC", "HWIO", "NHWC")
    >>> conv_general_shape_tuple((1, 5, 5, 3), (3, 3, 3, 8), (1, 1), "VALID", nhwc)
    (1, 3, 3, 8)
    """
    dn, lhs, rhs = _canonical(lhs_shape, rhs_shape, dimension_numbers)
    return _in_out_order(conv_shape_tuple(lhs, rhs, window_strides, padding), dn)


def _canonical(
    lhs_shape: Sequence[int], rhs_shape: Sequence[int], dimension_numbers: Any
) -> tuple[ConvDimensionNumbers, tuple[int, ...], tuple[int, ...]]:
    """The dimension numbers, and the input's and kernel's shapes as ``NC...`` and ``OI...``."""
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    return dn, tuple(lhs_shape[i] for i in dn.lhs_spec), tuple(rhs_shape[i] for i in dn.rhs_spec)


def _in_out_order(canonical: tuple[int, ...], dn: ConvDimensionNumbers) -> tuple[int, ...]:
    """An ``NC...`` output shape in the output's own axis order."""
    out = [0] * len(canonical)
    for pos, axis in enumerate(dn.out_spec):
        out[axis] = canonical[pos]
    return tuple(out)


def conv_transpose_shape_tuple(
    lhs_shape: Sequence[int],
    rhs_shape: Sequence[int],
    window_strides: Sequence[int],
    padding: Any,
    dimension_numbers: Any,
) -> tuple[int, ...]:
    """The output shape of ``conv_transpose``, in the output's own axis order
    (``jax.lax.conv_transpose_shape_tuple``): each spatial axis dilated by its stride, then
    padded as :func:`conv_transpose` pads it (pairs as given, "SAME" and "VALID" the forward's).

    >>> nhwc = ("NHWC", "HWIO", "NHWC")
    >>> conv_transpose_shape_tuple((1, 5, 5, 3), (3, 3, 3, 8), (2, 2), "SAME", nhwc)
    (1, 10, 10, 8)
    """
    dn, lhs, rhs = _canonical(lhs_shape, rhs_shape, dimension_numbers)
    # "SAME" and "VALID" are the forward's padding; pairs the transposed one's own
    pairs = (
        [_transpose_pads(k, s, padding) for k, s in zip(rhs[2:], window_strides, strict=True)]
        if isinstance(padding, str)
        else [(int(lo), int(hi)) for lo, hi in padding]
    )
    spatial = []
    for n, k, s, (lo, hi) in zip(lhs[2:], rhs[2:], window_strides, pairs, strict=True):
        spatial.append(max(0, (n - 1) * s + 1 + lo + hi - k + 1))
    return _in_out_order((lhs[0], rhs[0], *spatial), dn)


def reduce_window_shape_tuple(
    operand_shape: Sequence[int],
    window_dimensions: Sequence[int],
    window_strides: Sequence[int],
    padding: Sequence[tuple[int, int]],
    base_dilation: Sequence[int] | None = None,
    window_dilation: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """The output shape of ``reduce_window`` for ``(low, high)`` pairs
    (``jax.lax.reduce_window_shape_tuple``).

    >>> pads = ((0, 0), (0, 1), (0, 1), (0, 0))
    >>> pads = ((0, 0), (0, 1), (0, 1), (0, 0))
    >>> reduce_window_shape_tuple((8, 56, 56, 64), (1, 3, 3, 1), (1, 2, 2, 1), pads)
    (8, 28, 28, 64)
    """
    n = len(operand_shape)
    bd = base_dilation or (1,) * n
    wd = window_dilation or (1,) * n
    padded = [
        (d - 1) * b + 1 + lo + hi if d else lo + hi
        for d, b, (lo, hi) in zip(operand_shape, bd, padding, strict=True)
    ]
    window = [(k - 1) * w + 1 for k, w in zip(window_dimensions, wd, strict=True)]
    return tuple(_out_sizes(padded, window, window_strides))


def _transpose_pads(k: int, s: int, padding: Any) -> tuple[int, int]:
    """JAX's padding of one axis of a transposed convolution, from the forward one's."""
    if padding == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        low = k - 1
    else:
        lo, hi = (k - p - 1 for p in padding)
        total, low = lo + hi, lo
    return low, total - low


_TRANSPOSE_LAYOUTS = {
    2: ("NC", "IO", "NC"),
    3: ("NHC", "HIO", "NHC"),
    4: ("NHWC", "HWIO", "NHWC"),
    5: ("NHWDC", "HWDIO", "NHWDC"),
}


def conv_transpose(
    lhs: Any,
    rhs: Any,
    strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: Any = None,
    transpose_kernel: bool = False,
    precision: Any = None,
    preferred_element_type: Any = None,
    use_consistent_padding: bool = False,
) -> Any:
    """``jax.lax.conv_transpose``: the fractionally strided convolution (the input dilated by
    ``strides``), TensorFlow's layouts by default (``NHWC``/``HWIO``). ``"SAME"`` and
    ``"VALID"`` are the forward convolution's padding; pairs are the transposed one's own,
    unless ``use_consistent_padding`` (then the forward's too, as PyTorch). With
    ``transpose_kernel`` the kernel's window is flipped and its features swapped (the
    gradient of the forward convolution, Keras's ``Conv2DTranspose``).

    >>> import pypto as pto
    >>> pto.lax.conv_transpose(pto.ones((1, 2, 2, 1)), pto.ones((2, 2, 1, 1)), (2, 2), "SAME").shape
    (1, 4, 4, 1)
    """
    nd = len(lhs.shape)
    if dimension_numbers is None:
        if nd not in _TRANSPOSE_LAYOUTS:
            raise ShapeError(
                f"no default layout for {nd} axes",
                op="conv_transpose",
                hint="pass dimension_numbers",
            )
        dimension_numbers = _TRANSPOSE_LAYOUTS[nd]
    dn = conv_dimension_numbers(tuple(lhs.shape), tuple(rhs.shape), dimension_numbers)
    kernel = [rhs.shape[a] for a in dn.rhs_spec[2:]]
    rdil = _ints("rhs_dilation", rhs_dilation, nd - 2)
    strides = _ints("strides", strides, nd - 2)
    window = [(k - 1) * r + 1 for k, r in zip(kernel, rdil, strict=True)]
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        per_axis = [padding] * len(strides) if isinstance(padding, str) else list(padding)
        pads: Any = [
            _transpose_pads(k, s, p) for k, s, p in zip(window, strides, per_axis, strict=True)
        ]
    else:
        pads = padding
    w = api.asvalue(rhs, "conv_transpose")
    if rules.flag("conv_transpose", "transpose_kernel", transpose_kernel):
        w = composite.flip(w, dn.rhs_spec[2:])
        w = composite.swapaxes(w, dn.rhs_spec[0], dn.rhs_spec[1])
    return conv_general_dilated(
        lhs,
        w,
        (1,) * (nd - 2),
        pads,
        strides,
        rdil,
        dn,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )


# ---------------------------------------------------------------------- windowed reductions


def _lax_computations() -> dict[Any, str]:
    """The binary functions reduce_window knows by name: jax.lax's, pypto's, numpy's and
    Python's, to the pypto op that computes each."""
    table: dict[Any, str] = {}
    for name, fns in {
        "add": (jax.lax.add, api.add, np.add, operator.add),
        "maximum": (jax.lax.max, api.maximum, np.maximum),
        "minimum": (jax.lax.min, api.minimum, np.minimum),
        "mul": (jax.lax.mul, api.mul, np.multiply, operator.mul),
    }.items():
        for f in fns:
            table[f] = name
    return table


_BY_NAME = {"add": api.add, "maximum": api.maximum, "minimum": api.minimum, "mul": api.mul}
_JAX_BY_NAME = {
    "add": jax.lax.add,
    "maximum": jax.lax.max,
    "minimum": jax.lax.min,
    "mul": jax.lax.mul,
}


def _reduce_window_jax(
    operand: Any,
    init_value: Any,
    computation: Any,
    window_dimensions: Any,
    window_strides: Any = None,
    padding: Any = "VALID",
    base_dilation: Any = None,
    window_dilation: Any = None,
) -> Any:
    name = _lax_computations().get(computation)
    fn = _JAX_BY_NAME[name] if name else computation
    init = np.asarray(init_value, dtype=jax.numpy.result_type(operand))
    return jax.lax.reduce_window(
        operand,
        init,
        fn,
        window_dimensions,
        window_strides,
        padding,
        base_dilation,
        window_dilation,
    )


@_composite(
    "reduce_window",
    "a reduction over sliding windows (pooling), as jax.lax.reduce_window",
    _reduce_window_jax,
)
def reduce_window(
    operand: Any,
    init_value: Any,
    computation: Any,
    window_dimensions: Sequence[int],
    window_strides: Sequence[int] | None = None,
    padding: str | Sequence[tuple[int, int]] = "VALID",
    base_dilation: Sequence[int] | None = None,
    window_dilation: Sequence[int] | None = None,
) -> Any:
    """``jax.lax.reduce_window``: ``computation`` (a binary function: ``lax.add``,
    ``lax.max``, ``pto.maximum``, ``np.add``, ``operator.mul``, or any other that takes two
    tensors) folded over each window of ``window_dimensions`` (one size per axis), starting
    from ``init_value``; ``window_strides``, ``padding`` (``"SAME"``, ``"SAME_LOWER"``,
    ``"VALID"`` or pairs; padded elements are ``init_value``), ``base_dilation`` and
    ``window_dilation`` as in JAX. Max and average pooling are its usual uses.

    It is one strided slice of the (padded) operand per window offset, combined elementwise,
    so the compiled kernel reads the slices through windows and keeps the running result in
    UB. The gradient of a max goes to the window's maximum; where several elements tie it is
    split among them (JAX gives it to one).

    >>> import pypto as pto
    >>> x = pto.arange(16.0).reshape(1, 4, 4, 1)  # NHWC
    >>> pooled = pto.lax.reduce_window(x, -float("inf"), pto.maximum, (1, 2, 2, 1), (1, 2, 2, 1))
    >>> pooled[0, ..., 0].numpy()
    array([[ 5.,  7.],
           [13., 15.]], dtype=float32)
    """
    op = "reduce_window"
    x = api.asvalue(operand, op)
    nd = len(x.shape)  # type: ignore[attr-defined]
    window = _ints("window_dimensions", window_dimensions, nd, op)
    strides = _ints("window_strides", window_strides, nd, op)
    bdil = _ints("base_dilation", base_dilation, nd, op)
    wdil = _ints("window_dilation", window_dilation, nd, op)
    init = api.cast(api.asvalue(init_value, op), x.dtype)  # type: ignore[attr-defined]
    if tuple(init.shape):
        raise ShapeError(f"init_value must be a scalar, got {api._aval(init)}", op=op)
    name = _lax_computations().get(computation)
    fn = _BY_NAME[name] if name else computation
    if not callable(fn):
        raise ShapeError(
            f"computation must be a binary function, got {type(computation).__name__}",
            op=op,
            hint="e.g. jax.lax.max or pto.maximum for max pooling, jax.lax.add for a sum",
        )
    extent = tuple((k - 1) * r + 1 for k, r in zip(window, wdil, strict=True))
    shape = tuple(x.shape)  # type: ignore[attr-defined]
    pads = _pads(padding, shape, extent, strides, op)
    identity = {"add": 0, "mul": 1, "maximum": _extreme(x, False), "minimum": _extreme(x, True)}
    grow = [(lo, hi, d - 1) for (lo, hi), d in zip(pads, bdil, strict=True)]
    holes = any(p != (0, 0) for p in pads) or bdil != (1,) * nd
    sizes = [
        n + max(n - 1, 0) * mid + lo + hi for n, (lo, hi, mid) in zip(shape, grow, strict=True)
    ]
    out = tuple(max(0, (p - e) // s + 1) for p, e, s in zip(sizes, extent, strides, strict=True))
    # Strided windows over the next-to-last axis (NHWC pooling): that axis is folded into
    # the last one, [.., W/s, s·C], so each window offset is a unit-step slice of whole rows
    # (DMA rectangles) rather than one row per transfer. It needs W a multiple of s: the
    # padding grows by what is missing (never inside a window).
    fold = (
        name is not None
        and nd >= 2
        and strides[-2] > 1
        and window[-1] == 1
        and strides[-1] == 1
        and min(out) > 0
    )
    if fold:
        extra = -sizes[-2] % strides[-2]
        if extra:
            lo, hi, mid = grow[-2]
            grow[-2] = (lo, hi + extra, mid)
            holes = True
    real = None  # which elements of the padded operand are the operand's own
    if holes:
        # padding and dilation holes take no part in a window (XLA skips them): a known
        # computation pads with its identity; another one is applied only where real is
        x = lax_pad(x, identity[name] if name else init, grow)
        if name is None:
            real = _real(shape, grow)
    grown = tuple(x.shape)  # type: ignore[attr-defined]
    if fold:
        step = strides[-2]
        c = grown[-1]
        x = api.reshape(x, (*grown[:-2], grown[-2] // step, step * c))
    # a known computation folds the window's elements and takes the initial value last
    # (nothing to take when it is the identity); another starts from it, as XLA does
    # (every slice first, then the fold: compiled, the fold is one elementwise kernel)
    keys, cuts = [], []
    for offs in itertools.product(*(range(k) for k in window)):
        key = tuple(
            slice(o * r, o * r + (m - 1) * s + 1, s) if m else slice(0, 0)
            for o, r, s, m in zip(offs, wdil, strides, out, strict=True)
        )
        keys.append(key)
        if fold:
            q, rem = divmod(offs[-2] * wdil[-2], step)
            key = (*key[:-2], slice(q, q + out[-2]), slice(rem * c, (rem + 1) * c))
        cuts.append(api.getitem(x, key))
    known = name is not None
    acc: Any = None if known else api.broadcast_to(init, out)
    for key, cut in zip(keys, cuts, strict=True):
        if acc is None:
            acc = cut
        elif real is None:
            acc = fn(acc, cut)
        else:
            acc = api.where(real[key], fn(acc, cut), acc)
    if acc is None:  # an empty window: nothing but the initial value
        return api.broadcast_to(init, out)
    if name is not None and not _is(init_value, identity[name]):
        acc = fn(api.broadcast_to(init, out), acc)
    return api.cast(acc, x.dtype) if acc.dtype is not x.dtype else acc  # type: ignore[attr-defined]


def _real(shape: tuple[int, ...], grow: list[tuple[int, int, int]]) -> np.ndarray:
    """Which elements of an operand of ``shape`` padded by ``grow`` (low, high, interior per
    axis; a negative low or high crops, as ``lax.pad``) are the operand's own."""
    m = np.ones(shape, bool)
    for ax, (lo, hi, mid) in enumerate(grow):
        n = m.shape[ax]
        size = n + max(n - 1, 0) * mid
        d = np.zeros((*m.shape[:ax], size, *m.shape[ax + 1 :]), bool)
        at: list[Any] = [slice(None)] * m.ndim
        at[ax] = slice(0, size, mid + 1)
        d[tuple(at)] = m
        width = [(0, 0)] * m.ndim
        width[ax] = (max(lo, 0), max(hi, 0))
        d = np.pad(d, width)
        at[ax] = slice(-lo if lo < 0 else 0, d.shape[ax] + hi if hi < 0 else None)
        m = d[tuple(at)]
    return m


def _extreme(x: Any, largest: bool) -> Any:
    return api.extreme(x.dtype, largest)


def _is(init: Any, value: Any) -> bool:
    """Whether ``init`` is a number (not a traced value) equal to ``value``: the reduction's
    identity, which changes nothing."""
    if not isinstance(init, int | float | np.generic | np.ndarray):
        return False
    return bool(np.asarray(init) == value)
