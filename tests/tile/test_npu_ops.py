"""Every op and composite of the table, compiled through the four levels and run on the
simulated NPU, equals JAX within the tolerance table — in float32, float16 and bfloat16 (and the
integer and bool dtypes the op takes), on ``tiny`` and on ``ascend910b``.

``CASES`` holds one program per op name; a new op without a case fails
``test_every_op_has_an_npu_case``. Every simulated run is checked for the machine-model
invariants (tests/conftest.py sets ``PYPTO_CHECK_SIM``).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

import jax
import ml_dtypes
import numpy as np
import pytest

import pypto as pto
from pypto.graph.tracer import trace
from pypto.ops.table import OPS
from pypto.reference import compare
from pypto.reference.jax_bridge import sum_lengths
from pypto.tile.examples import rms_norm_matmul

F = (pto.float32, pto.float16, pto.bfloat16)
I = (pto.int32, pto.int8)
MACHINES = ("tiny", "ascend910b")

Case = tuple[Callable[..., Any], list[tuple[tuple[int, ...], str]], tuple[pto.DType, ...]]
"""(program, operand shapes with a value kind, dtypes). Kinds: ``n`` normal, ``p`` positive,
``i`` small integers (as the dtype), ``b`` bool, ``x`` int32 indices."""

X, ROW, COL = (6, 40), (40,), (6, 1)
SQ = (2, 4, 4)


def _conditioned(a: Any) -> Any:
    """``a`` (``[..., 4, 4]``) plus a dominant diagonal, its rows reordered."""
    return pto.take(pto.where(np.eye(4, dtype=bool), a + 4.0, a), np.array([2, 0, 3, 1]), axis=-2)


@pto.custom_vjp
def _dense(x, w):
    return pto.tanh(x @ w)


_dense.defvjp(
    lambda x, w: (_dense(x, w), (x, w, _dense(x, w))),
    lambda r, g: ((g * (1 - r[2] * r[2])) @ r[1].T, r[0].T @ (g * (1 - r[2] * r[2]))),
)


def _spread(a: Any, m: int = 3, n: int = 3) -> Any:
    """The leading ``[m, n]`` block of ``a`` ``[..., 4, 4]`` plus a diagonal 0, 3, 6, …: its
    eigen- or singular values stay apart, so every rotation is well determined."""
    return a[..., :m, :n] + np.eye(m, n, dtype=np.float32) * np.arange(0.0, 3 * n, 3, np.float32)


def _flat(out: tuple[Any, list[Any]]) -> tuple[Any, ...]:
    """histogramdd's ``(counts, [edges...])`` as one tuple."""
    return (out[0], *out[1])


CASES: dict[str, Case] = {
    "exp": (pto.exp, [(X, "n")], F),
    "log": (pto.log, [(X, "p")], F),
    "sqrt": (pto.sqrt, [(X, "p")], F),
    "rsqrt": (pto.rsqrt, [(X, "p")], F),
    "reciprocal": (pto.reciprocal, [(X, "p")], F),
    "tanh": (pto.tanh, [(X, "n")], F),
    "sigmoid": (pto.sigmoid, [(X, "n")], F),
    "sin": (pto.sin, [(X, "n")], F),
    "cos": (pto.cos, [(X, "n")], F),
    "neg": (pto.neg, [(X, "n")], F + I),
    "abs": (pto.abs, [(X, "n")], F + I),
    "add": (lambda x, y, z: x + y + z + 1, [(X, "n"), (ROW, "n"), (COL, "n")], F + I),
    "sub": (lambda x, y: (x - y, 2 - x, y - x), [(X, "n"), (COL, "n")], F + I),
    "mul": (lambda x, y: x * y * 3, [(X, "n"), (ROW, "n")], F + I),
    "div": (lambda x, y: (x / y, 1 / y, x / 4), [(X, "n"), (X, "p")], F),
    "maximum": (lambda x, y: pto.maximum(x, y), [(X, "n"), (ROW, "n")], F + I),
    "minimum": (lambda x, y: pto.minimum(pto.minimum(x, y), 0.5), [(X, "n"), (COL, "n")], F),
    "pow": (lambda x, y: (x**y, x**2, x**0.5), [(X, "p"), (ROW, "n")], F),
    "equal": (lambda x, y: pto.equal(x, y), [(X, "i"), (ROW, "i")], F + I),
    "not_equal": (lambda x, y: pto.not_equal(x, 0), [(X, "i"), (ROW, "i")], F + I),
    "less": (lambda x, y: x < y, [(X, "n"), (COL, "n")], F + I),
    "less_equal": (lambda x, y: x <= 0.25, [(X, "n"), (COL, "n")], F),
    "greater": (lambda x, y: (x > y, x < 0), [(X, "n"), (ROW, "n")], F + I),
    "greater_equal": (lambda x, y: x >= y, [(X, "n"), (X, "n")], F),
    "where": (lambda x, y: pto.where(x > 0, x, y), [(X, "n"), (ROW, "n")], F + I),
    "cast": (
        lambda x: (x.astype(pto.float32), x.astype(pto.int32), x.astype(pto.bool_)),
        [(X, "n")],
        F,
    ),
    "bitcast_convert_type": (
        lambda x: (
            x.view(pto.int32 if x.dtype is pto.float32 else pto.float32)
            if x.dtype.itemsize == 4
            else (x * 2).view(pto.bfloat16 if x.dtype is pto.float16 else pto.float16) + 1
        ),
        [(X, "n")],
        (*F, pto.int32),
    ),
    "arctan": (lambda x: pto.arctan(x * 3), [(X, "n")], F),
    "arctan2": (lambda x, y: pto.arctan2(x, y), [(X, "n"), (ROW, "n")], F),
    "arcsin": (lambda x: pto.arcsin(pto.tanh(x)), [(X, "n")], F),
    "arccos": (lambda x: pto.arccos(pto.tanh(x)), [(X, "n")], F),
    "arcsinh": (lambda x: pto.arcsinh(x * 10), [(X, "n")], F),
    "arccosh": (lambda x: pto.arccosh(x + 1), [(X, "p")], F),
    "arctanh": (lambda x: pto.arctanh(pto.tanh(x) * 0.9), [(X, "n")], F),
    "pad": (
        lambda x: (
            pto.pad(x, ((1, 2), (3, 0)), constant_values=-1),
            pto.pad(x[:3, :5], ((4, 1), (2, 6)), "reflect"),
            pto.pad(x[:, :4], 2, "wrap") * 2,
            pto.pad(x[:4], ((1, 2), (3, 1)), "mean", stat_length=((2, 1), (3, 4))),
            pto.pad(x[:4], (2, 3), "median"),
            pto.pad(x[:3, :6], ((3, 2), (1, 4)), "linear_ramp", end_values=(2, -3)),
            pto.pad(x[:3, :5], ((4, 1), (2, 6)), "symmetric", reflect_type="odd"),
        ),
        [(X, "n")],
        F + I,
    ),
    "fabs": (lambda x: pto.fabs(x) + 1, [(X, "n")], F + I),
    "cbrt": (lambda x: pto.cbrt(x * 30), [(X, "n")], F),
    "sinc": (lambda x: pto.sinc(x * 2), [(X, "n")], F),
    "divmod": (lambda x, y: pto.divmod(x * 7, y), [(X, "n"), (ROW, "p")], F),
    "modf": (lambda x: pto.modf(x * 3), [(X, "n")], F),
    "matrix_transpose": (lambda x: pto.matrix_transpose(x) * 2, [(X, "n")], F + I),
    "vdot": (lambda x, y: pto.vdot(x[:2], x[2:4]) + 1, [(X, "n"), (ROW, "n")], F),
    "vecdot": (lambda x, y: pto.vecdot(x, y), [(X, "n"), (ROW, "n")], F),
    "matvec": (lambda x, y: pto.matvec(x, y), [(X, "n"), (ROW, "n")], F),
    "vecmat": (lambda x, y: pto.vecmat(y[:6], x), [(X, "n"), (ROW, "n")], F),
    "polyval": (lambda x, y: pto.polyval(y[:4], x), [(X, "n"), (ROW, "n")], F),
    "cov": (
        lambda x, y: pto.cov(x[:, :8], aweights=pto.abs(y[:8]) + 0.5),
        [(X, "n"), (ROW, "n")],
        F,
    ),
    "corrcoef": (lambda x: pto.corrcoef(x, rowvar=False), [(X, "n")], F),
    # (integer coordinates: a float running sum would round differently from JAX's)
    "gradient": (
        lambda x, y: pto.gradient(x, 0.5, pto.cumsum(pto.round(y * 4.0) + 1.0)),
        [(X, "n"), (ROW, "p")],
        F,
    ),
    "unwrap": (lambda x: pto.unwrap(x * 4.0, axis=0), [(X, "n")], F),
    "partition": (lambda x: pto.partition(x, 5), [(X, "i")], F + I),
    "argpartition": (lambda x: pto.argpartition(x, 2, axis=0), [(X, "i")], F + I),
    "resize": (lambda x: pto.resize(x, (7, 9)) * 2, [(X, "n")], F + I),
    "rollaxis": (lambda x: pto.rollaxis(x.reshape(2, 3, 40), 2) * 2, [(X, "n")], F),
    "array_equal": (
        lambda x, y: pto.array_equal(x, x * 1, True) & ~pto.array_equal(x, y),
        [(X, "n"), (ROW, "n")],
        F + I,
    ),
    "array_equiv": (
        lambda x, y: (pto.array_equiv(x[:1], x[:1] + 0), pto.array_equiv(x, y)),
        [(X, "n"), (ROW, "n")],
        F + I,
    ),
    "polyadd": (lambda x, y: pto.polyadd(y, x[0]) * 2, [(X, "n"), (ROW, "n")], F + I),
    "polysub": (lambda x, y: pto.polysub(x[1, :7], y) * 2, [(X, "n"), (ROW, "n")], F + I),
    "polymul": (lambda x, y: pto.polymul(y, x[0, :5]), [(X, "n"), (ROW, "n")], F),
    "polydiv": (lambda x, y: pto.polydiv(x[0, :8], y[:3]), [(X, "n"), (ROW, "p")], F),
    "polyder": (lambda x, y: pto.polyder(y[:9], 2), [(X, "n"), (ROW, "n")], F),
    "polyint": (lambda x, y: pto.polyint(y[:9], 2, y[9:11]), [(X, "n"), (ROW, "n")], F),
    "poly": (lambda x: pto.poly(x[0, :5] * 0.5), [(X, "n")], F),
    "trapezoid": (
        lambda x, y: (pto.trapezoid(x), pto.trapezoid(x, y, axis=1)),
        [(X, "n"), (ROW, "p")],
        F,
    ),
    "convolve": (lambda x, y: pto.convolve(y, x[0, :5]), [(X, "n"), (ROW, "n")], F),
    "correlate": (lambda x, y: pto.correlate(x[0, :5], y, "same"), [(X, "n"), (ROW, "n")], F),
    "interp": (
        lambda x, y: (
            pto.interp(x, pto.cumsum(y), y),
            pto.interp(x * 9, y * 7, y, period=5.0),
            pto.interp(x, pto.cumsum(y) - 2, y, "extrapolate", "extrapolate"),
        ),
        [(X, "n"), (ROW, "p")],
        F,
    ),
    "digitize": (lambda x, y: pto.digitize(x, pto.cumsum(y) - 10), [(X, "n"), (ROW, "p")], F),
    "bincount": (
        lambda x: (
            pto.bincount(x[0], length=8) + pto.bincount(x[1], x[2].astype(pto.float32), length=8)
        ),
        [(X, "x")],
        (pto.int32,),
    ),
    "diag": (
        lambda x, y: (pto.diag(y[:5], 1) * 2, pto.diag(x, -1) + 1),
        [(X, "n"), (ROW, "n")],
        F + I,
    ),
    "diagflat": (lambda x: pto.diagflat(x[:2, :3], -2) + 1, [(X, "n")], F + I),
    "array_split": (lambda x: [t * 2 for t in pto.array_split(x, 4, axis=0)], [(X, "n")], F),
    "hsplit": (lambda x: [t + 1 for t in pto.hsplit(x, [3, 10])], [(X, "n")], F),
    "vsplit": (lambda x: [t + 1 for t in pto.vsplit(x, 2)], [(X, "n")], F),
    "dsplit": (lambda x: [t * 3 for t in pto.dsplit(x.reshape(2, 3, 40), [7])], [(X, "n")], F),
    "unstack": (lambda x: [t - 1 for t in pto.unstack(x[:3], 1)[:4]], [(X, "n")], F + I),
    "broadcast_arrays": (
        lambda x, y: [t * 2 for t in pto.broadcast_arrays(x, y)],
        [(X, "n"), (ROW, "n")],
        F + I,
    ),
    "select": (
        lambda x, y: pto.select([x > 0.5, x < -0.5], [x, y], 0.0),
        [(X, "n"), (ROW, "n")],
        F,
    ),
    "put": (
        lambda x, y: pto.put(x, np.array([3, 239, 3, -1]), y[:2], inplace=False) * 2,
        [(X, "n"), (ROW, "n")],
        F + I,
    ),
    "put_along_axis": (
        lambda x, y: pto.put_along_axis(x, x[:, :2].astype(pto.int32) % 40, y[:2], 1, False),
        [(X, "i"), (ROW, "n")],
        F + I,
    ),
    "nonzero": (lambda x: pto.nonzero(x[:3] > 0, size=50, fill_value=-1), [(X, "n")], F),
    "flatnonzero": (lambda x: pto.flatnonzero(x[1], size=8), [(X, "i")], F + I),
    "argwhere": (lambda x: pto.argwhere(x[:2, :5] > 0, size=4), [(X, "n")], F),
    "unique": (
        lambda x: pto.unique(x[0], return_counts=True, return_inverse=True, size=9, fill_value=0),
        [(X, "i")],
        F + I,
    ),
    "unique_all": (lambda x: pto.unique_all(x[1:3], size=7, fill_value=0), [(X, "i")], F + I),
    "unique_counts": (lambda x: pto.unique_counts(x[0], size=5), [(X, "i")], F + I),
    "unique_inverse": (lambda x: pto.unique_inverse(x[:2, :9], size=6), [(X, "i")], F + I),
    "unique_values": (lambda x: pto.unique_values(x[4] * 2, size=4), [(X, "i")], F),
    "compress": (lambda x: pto.compress(x[:, 0] > 0, x, axis=0, size=3) * 2, [(X, "n")], F),
    "extract": (lambda x: pto.extract(x > 1, x, size=12, fill_value=-9), [(X, "i")], F + I),
    "histogram": (lambda x: pto.histogram(x, bins=8, range=(-2.0, 2.0)), [(X, "n")], F),
    "histogramdd": (lambda x: _flat(pto.histogramdd(x[:, :3], bins=(2, 3, 2))), [(X, "n")], F),
    "histogram2d": (
        lambda x, y: pto.histogram2d(x[0], y[:40], bins=3, weights=pto.abs(y)),
        [(X, "n"), (ROW, "n")],
        F,
    ),
    "histogram_bin_edges": (lambda x: pto.histogram_bin_edges(x, bins=5), [(X, "n")], F),
    "unravel_index": (
        lambda x: pto.unravel_index(x[0].astype(pto.int32), (5, 8)),
        [(X, "i")],
        F + I,
    ),
    "ravel_multi_index": (
        lambda x: pto.ravel_multi_index((x[0], x[1]), (4, 5), mode="wrap"),
        [(X, "x")],
        (pto.int32,),
    ),
    "choose": (
        lambda x, y: pto.choose(x[:2].astype(pto.int32), [y, y * 2, 1.0], mode="wrap"),
        [(X, "i"), (ROW, "n")],
        F,
    ),
    "fill_diagonal": (lambda x: pto.fill_diagonal(x, x[0, :6], inplace=False), [(X, "n")], F + I),
    "place": (
        lambda x, y: pto.place(x, x > 0, y[:7], inplace=False),
        [(X, "n"), (ROW, "n")],
        F,
    ),
    "delete": (lambda x: pto.delete(x, [0, 3, 39], axis=1) * 2, [(X, "n")], F + I),
    "insert": (lambda x, y: pto.insert(x, [1, 1, 6], y, axis=0), [(X, "n"), (ROW, "n")], F),
    "ediff1d": (lambda x: pto.ediff1d(x[:2], to_begin=1), [(X, "n")], F + I),
    "vander": (lambda x: pto.vander(x[0, :6] / 3, 4), [(X, "n")], F),
    "bitwise_count": (
        lambda x: (pto.bitwise_count(x * 97 + 11), pto.bitwise_count(~(x * 97))),
        [(X, "i")],
        I,
    ),
    "gcd": (lambda x: pto.gcd(x[:3] * 7, x[3:] * 5), [(X, "x")], (pto.int32,)),
    "lcm": (lambda x: pto.lcm(x[:3] % 20, x[3:] % 12), [(X, "x")], (pto.int32,)),
    "frexp": (lambda x: pto.frexp(x * 100.0), [(X, "n")], F),
    "ldexp": (lambda x: pto.ldexp(x, (x * 10).astype(pto.int32)), [(X, "n")], F),
    "setdiff1d": (
        lambda x, y: pto.setdiff1d(x[0], y[:6], size=12, fill_value=0),
        [(X, "i"), (ROW, "i")],
        F + I,
    ),
    "union1d": (lambda x, y: pto.union1d(x[0], y[:6], size=12), [(X, "i"), (ROW, "i")], F + I),
    "intersect1d": (
        lambda x, y: pto.intersect1d(x[0], y[:6], return_indices=True, size=12),
        [(X, "i"), (ROW, "i")],
        F + I,
    ),
    "setxor1d": (lambda x, y: pto.setxor1d(x[0], y[:6], size=12), [(X, "i"), (ROW, "i")], F + I),
    "isin": (lambda x, y: pto.isin(x, y[:5]), [(X, "i"), (ROW, "i")], F + I),
    "cumulative_sum": (
        lambda x: pto.cumulative_sum(x, axis=1, include_initial=True),
        [(X, "n")],
        F + I,
    ),
    "cumulative_prod": (lambda x: pto.cumulative_prod(x[0] * 0.1 + 1), [(X, "n")], F),
    "signbit": (lambda x: (pto.signbit(x * 0.0), pto.signbit(x - 1)), [(X, "n")], F + I),
    "isposinf": (lambda x: pto.isposinf(1 / (x * 0.0)), [(X, "n")], F),
    "isneginf": (lambda x: pto.isneginf(-1 / (x * 0.0)), [(X, "n")], F),
    "positive": (lambda x: pto.positive(x) * 2, [(X, "n")], F + I),
    "real": (lambda x: pto.real(x) + 1, [(X, "n")], F + I),
    "imag": (lambda x: pto.imag(x) + x, [(X, "n")], F + I),
    "conj": (lambda x: pto.conj(x) * 3, [(X, "n")], F + I),
    "iscomplex": (lambda x: pto.iscomplex(x) | (x > 0), [(X, "n")], F + I),
    "isreal": (lambda x: pto.isreal(x) & (x > 0), [(X, "n")], F + I),
    "angle": (lambda x: (pto.angle(x), pto.angle(x, True)), [(X, "n")], F + I),
    # (steps of one unit in the last place, measured in units: ±1, or 1/2 below a power of 2)
    "nextafter": (
        lambda x, y: (pto.nextafter(x, y) - x) / pto.spacing(x),
        [(X, "n"), (ROW, "n")],
        F,
    ),
    "spacing": (lambda x: pto.spacing(x * 100.0) / pto.spacing(x), [(X, "n")], F),
    "float_power": (lambda x, y: pto.float_power(pto.abs(x) + 1, y), [(X, "n"), (ROW, "n")], F + I),
    "rint": (lambda x: pto.rint(x * 3.0), [(X, "n")], F + I),
    "i0": (lambda x: pto.i0(x * 6.0), [(X, "n")], F + I),
    "copysign": (lambda x, y: pto.copysign(x, y * 0.0), [(X, "n"), (ROW, "n")], F),
    "reshape": (lambda x: (x.reshape(3, 80) * 2).reshape(240), [(X, "n")], F),
    "transpose": (lambda x: x.T + 1, [(X, "n")], F),
    "broadcast_to": (lambda x: pto.broadcast_to(x, (3, 6, 1)) * 2, [(COL, "n")], F),
    "concat": (lambda x, y: pto.concat([x, y], axis=0), [(X, "n"), (X, "n")], F),
    "slice": (lambda x: x[1:5, 3:30] * 2, [(X, "n")], F),
    "take": (lambda x, i: pto.take(x, i, axis=0), [(X, "n"), ((4,), "x")], F),
    "lax_pad": (  # the transpose of slices, and a constant fill with interior padding
        lambda x: (
            pto.grad(lambda y: (y[1:5, 2:9] * y[1:5, 2:9]).sum())(x),
            pto.lax.pad(x[:4, :6], -np.inf, [(1, 2, 1), (0, 3, 0)]),
        ),
        [(X, "n")],
        F,
    ),
    "matmul": (lambda a, b: a @ b, [((16, 32), "n"), ((32, 24), "n")], F),
    "sum": (lambda x: (x.sum(axis=-1), x.sum(axis=0), x.sum()), [(X, "n")], F + I),
    "max": (lambda x: (x.max(axis=-1), x.max(axis=0, keepdims=True)), [(X, "n")], F + I),
    "min": (lambda x: pto.min(x, axis=-1, keepdims=True), [(X, "n")], F + I),
    "argmax": (lambda x: (pto.argmax(x, axis=-1), pto.argmax(x, axis=0)), [(X, "n")], F + I),
    "relu": (pto.relu, [(X, "n")], F),
    "gelu": (pto.gelu, [(X, "n")], F),
    "silu": (pto.silu, [(X, "n")], F),
    "clip": (lambda x: pto.clip(x, -0.5, 0.75), [(X, "n")], F),
    "logical_and": (
        lambda x, y: ((x > 0) & (y < 0), pto.logical_and(x, y)),
        [(X, "i"), (ROW, "i")],
        F + I,
    ),
    "logical_or": (
        lambda x, y: ((x > 0) | (y < 0), pto.logical_or(x, 0)),
        [(X, "i"), (COL, "i")],
        F + I,
    ),
    "logical_xor": (lambda x, y: (x > 0) ^ (y > 1), [(X, "i"), (X, "i")], F + I),
    "logical_not": (lambda x: (~(x > 0), pto.logical_not(x)), [(X, "i")], F + I),
    "argmin": (lambda x: (pto.argmin(x, axis=-1), x.argmin(0)), [(X, "i")], F + I),
    "any": (lambda x: (pto.any(x > 2, -1), x.any(0)), [(X, "i")], F + I),
    "all": (lambda x: (pto.all(x, -1, keepdims=True), (x > -4).all()), [(X, "i")], F + I),
    "var": (lambda x: (x.var(-1), pto.var(x, 0, ddof=1)), [(X, "n")], F),
    "std": (lambda x: (x.std(-1, keepdims=True), pto.std(x)), [(X, "n")], F),
    "floor": (lambda x: pto.floor(x * 3), [(X, "n")], F + I),
    "ceil": (lambda x: pto.ceil(x * 3), [(X, "n")], F + I),
    "round": (lambda x: (pto.round(x * 4) / 4, pto.round(x * 2)), [(X, "n")], F + I),
    "mean": (lambda x: (x.mean(axis=-1), x.mean(axis=0)), [(X, "n")], F),
    "expand_dims": (lambda x: pto.expand_dims(x, 1) + 1, [(X, "n")], F),
    "squeeze": (lambda x: pto.squeeze(x, 1) * 2, [(COL, "n")], F),
    "split": (lambda x: tuple(p * 2 for p in pto.split(x, 2, axis=1)), [(X, "n")], F),
    "softmax": (lambda x: pto.softmax(x, -1), [(X, "n")], F),
    "log_softmax": (lambda x: pto.log_softmax(x, -1), [(X, "n")], F),
    "layer_norm": (lambda x, w: pto.layer_norm(x, w, w), [(X, "n"), (ROW, "n")], F),
    "rms_norm": (lambda x, w: pto.rms_norm(x, w), [(X, "n"), (ROW, "n")], F),
    "scaled_dot_product_attention": (
        lambda q, k, v: pto.scaled_dot_product_attention(q, k, v, causal=True),
        [((2, 16, 32), "n"), ((2, 16, 32), "n"), ((2, 16, 32), "n")],
        F,
    ),
    "dot_product_attention": (  # grouped heads (4 for 2), a window and padded keys
        lambda q, k, v: (
            pto.dot_product_attention(q, k, v, is_causal=True),
            pto.dot_product_attention(
                q, k, v, local_window_size=(3, 1), key_value_seq_lengths=np.array([9, 16])
            ),
        ),
        [((2, 16, 4, 8), "n"), ((2, 16, 2, 8), "n"), ((2, 16, 2, 8), "n")],
        F,
    ),
    "conv_general_dilated": (  # NHWC 3x3 strided, and a depthwise 1-d one with dilation
        lambda x, w, d: (
            pto.conv_general_dilated(
                x.reshape(2, 6, 10, 2),
                w,
                (2, 1),
                "SAME",
                dimension_numbers=("NHWC", "HWIO", "NHWC"),
            ),
            pto.conv_general_dilated(
                x[:4].reshape(1, 4, 40), d, (1,), "VALID", rhs_dilation=(3,), feature_group_count=4
            ),
        ),
        [(X, "n"), ((3, 3, 2, 4), "n"), ((4, 1, 2), "n")],
        F + I,
    ),
    "reduce_window": (  # max pooling 3x3/2 SAME, average pooling 2x2/2, a dilated lambda
        lambda x: (
            pto.lax.reduce_window(
                x.reshape(2, 6, 10, 2), -np.inf, pto.maximum, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"
            ),
            pto.lax.reduce_window(x.reshape(2, 6, 10, 2), 0, pto.add, (1, 2, 2, 1), (1, 2, 2, 1))
            / 4,
            pto.lax.reduce_window(
                x, 1, lambda a, b: a + b, (2, 3), (1, 2), ((1, 0), (0, 2)), (1, 1), (1, 2)
            ),
        ),
        [(X, "n")],
        F + I,
    ),
    "custom_vjp_call": (  # inlined before tiling, its backward fused like any other code
        lambda x, w: (_dense(x, w), pto.grad(lambda w: _dense(x, w).sum())(w)),
        [((16, 32), "n"), ((32, 24), "n")],
        F,
    ),
    "debug_print": (  # out of the program before the passes: the printed sums are outputs
        lambda x: (_printed(x), pto.grad(lambda x: _printed(x).astype(pto.float32).sum())(x)),
        [(X, "n")],
        F,
    ),
    "optimization_barrier": (  # dropped after CSE: a checkpoint's replay stays in the backward
        lambda x: (
            pto.lax.optimization_barrier(x) * 2 + x,
            pto.grad(lambda x: pto.checkpoint(lambda v: pto.tanh(pto.sin(v)))(x).sum())(x),
        ),
        [(X, "n")],
        F,
    ),
    "checkpoint_name": (  # a named value the policy saves, the rest recomputed
        lambda x: (
            pto.checkpoint_name(x, "x") + 1,
            pto.grad(lambda x: _named_remat(x).sum())(x),
        ),
        [(X, "n")],
        F,
    ),
    "stop_gradient": (  # the value forward (dropped before tiling), no cotangent backward
        lambda x, w: (
            pto.stop_gradient(x) * 2 + w,
            pto.grad(lambda x: (x * pto.stop_gradient(x * w)).sum())(x),
        ),
        [(X, "n"), (ROW, "n")],
        F,
    ),
    "square": (lambda x: pto.square(x) + x, [(X, "n")], F + I),
    "sign": (lambda x: pto.sign(x) * 2, [(X, "i")], F + I),
    "logsumexp": (lambda x: (pto.logsumexp(x, -1), pto.logsumexp(x * 30, 0)), [(X, "n")], F),
    "stack": (lambda x, y: pto.stack([x, y * 2], axis=1) + 1, [(X, "n"), (X, "n")], F),
    "swapaxes": (lambda x: pto.swapaxes(x.reshape(2, 3, 40), 0, 2) * 2, [(X, "n")], F),
    "moveaxis": (lambda x: pto.moveaxis(x.reshape(2, 3, 40), 0, -1) + 1, [(X, "n")], F),
    "flip": (lambda x: (pto.flip(x, 1) * 2, pto.flip(x)), [(X, "n")], F),
    "tril": (lambda x: pto.tril(x, 1) + 1, [(X, "n")], F + I),
    "triu": (lambda x: pto.triu(x.reshape(2, 3, 40), -1) * 2, [(X, "n")], F + I),
    "cumsum": (lambda x: (pto.cumsum(x, 1), x.cumsum(0) * 2), [(X, "n")], F + I),
    "cumprod": (lambda x: (pto.cumprod(x * 0.4, 1), x.cumprod(0) + 1), [(X, "n")], F + I),
    "cummax": (lambda x: (pto.cummax(x, 1), pto.cummax(x, 0, reverse=True) * 2), [(X, "n")], F + I),
    "cummin": (lambda x: (pto.cummin(x, 1, reverse=True), pto.cummin(x)), [(X, "n")], F + I),
    # the running reductions' core, along the middle axis (moved last by transposes around the
    # scan kernel)
    "scan": (
        lambda x: pto.cummax(x.reshape(2, 3, 40), 1) + pto.cumsum(x, 1).reshape(2, 3, 40),
        [(X, "n")],
        F + I,
    ),
    # cumprod's gradient: a linear recurrence from the end
    "scan_affine": (
        lambda x: pto.vjp(lambda u: pto.cumprod(u * 0.5, 1), x)[1](x)[0],
        [(X, "n")],
        F,
    ),
    # x in -4..4 and y in 0.25..2 ("p"); integers: y in -4..4 with its zeros (x % 0 is 0)
    "fmod": (lambda x, y: pto.fmod(x, y) + pto.fmod(x, 3), [(X, "n"), (ROW, "p")], F + I),
    "remainder": (lambda x, y: (x % y, x % -3), [(X, "n"), (ROW, "p")], F + I),
    "floor_divide": (lambda x, y: (x // y, x // -3), [(X, "n"), (COL, "p")], F + I),
    "bitwise_and": (lambda x, y: (x & y, x & 6), [(X, "i"), (ROW, "i")], I),
    "bitwise_or": (lambda x, y: (x | y) + 1, [(X, "i"), (COL, "i")], I),
    "bitwise_xor": (lambda x, y: x ^ y ^ 3, [(X, "i"), (X, "i")], I),
    "bitwise_not": (lambda x: ~x * 2, [(X, "i")], I),
    "left_shift": (lambda x, y: (x << (y + 4), x << 3), [(X, "i"), (ROW, "i")], I),
    "right_shift": (lambda x, y: (x >> (y + 4), x >> 1), [(X, "i"), (ROW, "i")], I),
    "prod": (lambda x: (pto.prod(x, 1), x.prod(0) * 2, pto.prod(x[:, :3])), [(X, "n")], F + I),
    # rows of 40 (padded to 64 for the sorting unit) and of 6; small integers make ties, log
    # makes NaN and -inf, x * 0 signed zeros
    "sort": (
        lambda x: (pto.sort(x), pto.sort(pto.log(x), 0, descending=True), (x * 0.0).sort()),
        [(X, "i")],
        F + I,
    ),
    "argsort": (
        lambda x: (
            pto.argsort(x),
            pto.argsort(pto.log(x), 0, descending=True),
            (x * 0.0).argsort(),
        ),
        [(X, "i")],
        F + I,
    ),
    "top_k": (lambda x: (*pto.top_k(x, 5), *pto.top_k(x.T * 0.0, 6)), [(X, "i")], F + I),
    "quantile": (
        lambda x: (pto.quantile(x, [0.1, 0.5, 0.9], axis=1), pto.quantile(x, 0.3, 0, "nearest")),
        [(X, "n")],
        F + I,
    ),
    "median": (lambda x: (pto.median(x, 1), pto.median(x, keepdims=True)), [(X, "i")], F + I),
    "percentile": (lambda x: pto.percentile(x, 25.0, axis=1) * 2, [(X, "n")], F),
    "nanquantile": (
        lambda x: (
            pto.nanquantile(pto.where(x > 0.5, math.nan, x), [0.2, 0.5], axis=1),
            pto.nanquantile(x, 0.7, 0, "nearest", keepdims=True),
        ),
        [(X, "n")],
        F,
    ),
    "nanmedian": (
        lambda x: pto.nanmedian(pto.where(x < -0.3, math.nan, x), axis=0),
        [(X, "n")],
        F,
    ),
    "nanpercentile": (
        lambda x: pto.nanpercentile(pto.where(x > 1.0, math.nan, x), 90.0, axis=1),
        [(X, "n")],
        F,
    ),
    "searchsorted": (
        lambda x: (
            pto.searchsorted(pto.sort(x[0]), x),
            pto.searchsorted(x[1].sort(), x[2], "right"),
        ),
        [(X, "i")],
        F + I,
    ),
    "lexsort": (lambda x: pto.lexsort([x, x * 0, x % 2], axis=0), [(X, "i")], F + I),
    # int32 keys wider than f32's mantissa: two radix passes
    "argsort_last": (
        lambda x: (
            pto.argsort(x.astype(pto.int32) * 999_983 + 5, descending=True),
            pto.top_k(x.astype(pto.int32) * -999_983, 3)[1],
        ),
        [(X, "i")],
        F + I,
    ),
    "gather_last": (lambda x: pto.sort(x * 2, 0) + 1, [(X, "n")], F + I),
    # a label's log-probability per row (indices 0..5 of 40), and down the first axis
    "take_along_axis": (
        lambda x, i: (
            pto.take_along_axis(x, i.reshape(15, 1)[:6].astype(pto.int32) - 2, axis=1),
            pto.take_along_axis(x, i.reshape(15, 1)[:6].astype(pto.int32), axis=0) * 2,
        ),
        [(X, "n"), ((5, 3), "x")],
        F + I,
    ),
    "one_hot": (lambda i: pto.one_hot(i, 8) * 2, [((5, 3), "x")], (pto.int32,)),
    "log1p": (lambda x: (pto.log1p(x * 1e-4), pto.log1p(pto.abs(x) * 3)), [(X, "n")], F),
    "expm1": (lambda x: (pto.expm1(x * 1e-4), pto.expm1(x * 3)), [(X, "n")], F),
    "softplus": (lambda x: pto.softplus(x * 4), [(X, "n")], F),
    "elu": (lambda x: (pto.elu(x), pto.elu(x * 3, 0.5)), [(X, "n")], F),
    "leaky_relu": (lambda x: pto.leaky_relu(x, 0.2) * 2, [(X, "n")], F + I),
    # NaN from the log of negatives, ±inf from 1 / 0 (values below 1/2 round to 0)
    "isnan": (lambda x: (pto.isnan(pto.log(x)), pto.isnan(x)), [(X, "n")], F + I),
    "isinf": (lambda x: (pto.isinf(1 / pto.round(x)), pto.isinf(x)), [(X, "n")], F + I),
    "isfinite": (lambda x: (pto.isfinite(pto.log(x)), pto.isfinite(x)), [(X, "n")], F + I),
    "nan_to_num": (
        lambda x: (pto.nan_to_num(pto.log(x), nan=-1.0), pto.nan_to_num(1 / pto.round(x))),
        [(X, "n")],
        F,
    ),
    "tensordot": (
        lambda a, b: pto.tensordot(a, b.reshape(2, 16, 24), ([0], [1])),
        [((16, 32), "n"), ((32, 24), "n")],
        F,
    ),
    "dot": (
        lambda a, b: (pto.dot(a, b), pto.dot(a.reshape(2, 8, 32), b)),
        [((16, 32), "n"), ((32, 24), "n")],
        F,
    ),
    "inner": (lambda a, b: pto.inner(a, b.T), [((16, 32), "n"), ((32, 24), "n")], F),
    "outer": (lambda a, b: pto.outer(a[0], b[:, 0]) * 2, [((16, 32), "n"), ((32, 24), "n")], F + I),
    "diagonal": (
        lambda x: (pto.diagonal(x, 2), pto.diagonal(x.reshape(2, 3, 40), -1, 2, 1) * 2),
        [(X, "n")],
        F + I,
    ),
    "trace": (lambda x: (pto.trace(x), pto.trace(x.reshape(2, 3, 40), 1, 1, 2)), [(X, "n")], F + I),
    "einsum": (  # a product with a transposed operand, a row-wise dot, batched over '...'
        lambda a, b: (
            pto.einsum("ij,kj->ik", a, b),
            pto.einsum("ij,ij->i", a, a),
            pto.einsum("...j,kj", a.reshape(2, 8, 32), b) + 1,
        ),
        [((16, 32), "n"), ((24, 32), "n")],
        F,
    ),
    # numpy's library (pypto/ops/numpy_lib.py)
    "log2": (lambda x: (pto.log2(x), pto.log2(x * 1e-3)), [(X, "p")], F),
    "log10": (lambda x: pto.log10(x * 100), [(X, "p")], F),
    "exp2": (lambda x: pto.exp2(x * 3), [(X, "n")], F),
    "sinh": (lambda x: (pto.sinh(x * 1e-3), pto.sinh(x * 3)), [(X, "n")], F),
    "cosh": (lambda x: pto.cosh(x * 3), [(X, "n")], F),
    "tan": (lambda x: pto.tan(x), [(X, "n")], F),
    "trunc": (lambda x: pto.trunc(x * 3), [(X, "n")], F + I),
    "deg2rad": (lambda x: pto.deg2rad(x * 90), [(X, "n")], F),
    "rad2deg": (lambda x: pto.rad2deg(x), [(X, "n")], F),
    "logaddexp": (lambda x, y: pto.logaddexp(x * 3, y), [(X, "n"), (ROW, "n")], F),
    "logaddexp2": (lambda x, y: pto.logaddexp2(x, y * 2), [(X, "n"), (COL, "n")], F),
    "hypot": (lambda x, y: pto.hypot(x, y), [(X, "n"), (ROW, "n")], F),
    # NaN from the log of negatives, ignored by fmax/fmin
    "fmax": (lambda x, y: pto.fmax(pto.log(x), y), [(X, "n"), (ROW, "n")], F),
    "fmin": (lambda x, y: pto.fmin(x, pto.log(y)), [(X, "n"), (COL, "n")], F),
    "heaviside": (lambda x: pto.heaviside(pto.round(x), 0.5), [(X, "n")], F),
    "isclose": (lambda x, y: pto.isclose(x, y + x, atol=0.5), [(X, "n"), (ROW, "n")], F + I),
    "allclose": (lambda x: (pto.allclose(x, x * 1.0001), pto.allclose(x, x + 1)), [(X, "n")], F),
    "count_nonzero": (
        lambda x: (pto.count_nonzero(x, 1), pto.count_nonzero(x)),
        [(X, "i")],
        F + I,
    ),
    "ptp": (lambda x: (pto.ptp(x, 0), pto.ptp(x, 1, keepdims=True)), [(X, "n")], F + I),
    "average": (
        lambda x, w: (pto.average(x, 1, w), pto.average(x, 0)),
        [(X, "n"), (ROW, "p")],
        F,
    ),
    "nansum": (lambda x: pto.nansum(pto.log(x), 1), [(X, "n")], F),
    "nanprod": (lambda x: pto.nanprod(pto.log(x), 0), [(X, "n")], F),
    "nanmean": (lambda x: pto.nanmean(pto.log(x), 1), [(X, "n")], F),
    "nanmax": (lambda x: (pto.nanmax(pto.log(x), 1), pto.nanmax(x)), [(X, "n")], F + I),
    "nanmin": (lambda x: pto.nanmin(pto.log(x), 0), [(X, "n")], F),
    "nanargmax": (lambda x: pto.nanargmax(pto.log(x), 1), [(X, "n")], F),
    "nanargmin": (lambda x: pto.nanargmin(pto.log(x), 0), [(X, "n")], F),
    "nanvar": (lambda x: pto.nanvar(pto.log(x), 1, ddof=1), [(X, "n")], F),
    "nanstd": (lambda x: pto.nanstd(pto.log(x), 0), [(X, "n")], F),
    "nancumsum": (lambda x: pto.nancumsum(pto.log(x), 1), [(X, "n")], F),
    "nancumprod": (lambda x: pto.nancumprod(pto.log(x) * 0.5, 1), [(X, "n")], F),
    "roll": (lambda x: (pto.roll(x, 3, 1), pto.roll(x, -2) * 2), [(X, "n")], F + I),
    "repeat": (
        lambda x: (pto.repeat(x, 2, 0), pto.repeat(x[:2], [1, 0], axis=0) + 1),
        [(X, "n")],
        F + I,
    ),
    "tile": (lambda x: pto.tile(x[:2, :8], (2, 1, 3)) * 2, [(X, "n")], F + I),
    "diff": (lambda x: (pto.diff(x), pto.diff(x, 2, 0, prepend=1)), [(X, "n")], F + I),
    "ravel": (lambda x: pto.ravel(x.T) + 1, [(X, "n")], F + I),
    "atleast_1d": (lambda x: pto.atleast_1d(x.sum()) * 2, [(X, "n")], F + I),
    "atleast_2d": (lambda x: pto.atleast_2d(x[0]) * 2, [(X, "n")], F + I),
    "atleast_3d": (lambda x: pto.atleast_3d(x) * 2, [(X, "n")], F + I),
    "hstack": (lambda x, y: pto.hstack([x, y.reshape(6, 1)]) + 1, [(X, "n"), (COL, "n")], F + I),
    "vstack": (lambda x, y: pto.vstack([x, y]) * 2, [(X, "n"), (ROW, "n")], F + I),
    "dstack": (lambda x: pto.dstack([x, x * 2]) + 1, [(X, "n")], F + I),
    "column_stack": (
        lambda x, y: pto.column_stack([x, y[:, 0]]) + 1,
        [(X, "n"), (COL, "n")],
        F + I,
    ),
    "append": (lambda x, y: pto.append(x, y) * 2, [(X, "n"), (ROW, "n")], F + I),
    "flipud": (lambda x: pto.flipud(x) + 1, [(X, "n")], F + I),
    "fliplr": (lambda x: pto.fliplr(x) * 2, [(X, "n")], F + I),
    "rot90": (
        lambda x: (pto.rot90(x) + 1, pto.rot90(x.reshape(2, 3, 40), 3, (2, 0))),
        [(X, "n")],
        F + I,
    ),
    "meshgrid": (
        lambda x, y: tuple(g * 2 for g in pto.meshgrid(x, y[:, 0])),
        [(ROW, "n"), (COL, "n")],
        F + I,
    ),
    "erf": (lambda x: (pto.erf(x), pto.erf(x * 1e-3), pto.gelu(x, False)), [(X, "n")], F),
    "erfc": (lambda x: pto.erfc(x * 3), [(X, "n")], F),
    "relu6": (lambda x: pto.relu6(x * 4), [(X, "n")], F),
    "hard_sigmoid": (lambda x: pto.hard_sigmoid(x * 4), [(X, "n")], F),
    "hard_silu": (lambda x: pto.hard_silu(x * 4), [(X, "n")], F),
    "hard_tanh": (lambda x: pto.hard_tanh(x * 2), [(X, "n")], F),
    "log_sigmoid": (lambda x: pto.log_sigmoid(x * 20), [(X, "n")], F),
    "selu": (lambda x: pto.selu(x), [(X, "n")], F),
    "celu": (lambda x: pto.celu(x, 0.5), [(X, "n")], F),
    "soft_sign": (lambda x: pto.soft_sign(x * 3), [(X, "n")], F),
    "mish": (lambda x: pto.mish(x * 3), [(X, "n")], F),
    "squareplus": (lambda x: (pto.squareplus(x * 3), pto.squareplus(x, 0.5)), [(X, "n")], F),
    "sparse_plus": (lambda x: pto.sparse_plus(x * 2), [(X, "n")], F),
    "sparse_sigmoid": (lambda x: pto.sparse_sigmoid(x * 2), [(X, "n")], F),
    "log1mexp": (lambda x: pto.log1mexp(x * 3), [(X, "p")], F),
    "logmeanexp": (lambda x: (pto.logmeanexp(x, -1), pto.logmeanexp(x, 0, x > 0)), [(X, "n")], F),
    "standardize": (
        lambda x: (pto.standardize(x), pto.standardize(x, 0, where=x > -1, algorithm="stable")),
        [(X, "n")],
        F,
    ),
    "glu": (lambda x: (pto.glu(x), pto.glu(x, 0)), [(X, "n")], F),
    # special functions: both sides of lgamma's and digamma's reflection, erf_inv and ndtri
    # towards their poles, log_ndtr far into the lower tail
    "lgamma": (lambda x: (pto.lgamma(x * 4), pto.lgamma(x + 0.3)), [(X, "n")], F),
    "digamma": (lambda x: (pto.digamma(x * 4), pto.digamma(0.5 - x * 0.4)), [(X, "p")], F),
    # within ±0.99: nearer ±1 an ulp of the tanh before it is magnified past float32's rtol
    "erf_inv": (lambda x: pto.erf_inv(pto.tanh(x) * 0.99), [(X, "n")], F),
    "ndtri": (lambda x: (pto.ndtri(x * 0.45), pto.ndtri(x * 1e-3)), [(X, "p")], F),
    "ndtr": (lambda x: pto.ndtr(x * 3), [(X, "n")], F),
    "log_ndtr": (lambda x: pto.log_ndtr(x * 8), [(X, "n")], F),
    "xlogy": (
        lambda x, y: (pto.xlogy(x, y), pto.xlogy(pto.relu(x), y - 1)),
        [(X, "n"), (ROW, "p")],
        F,
    ),
    "xlog1py": (lambda x, y: pto.xlog1py(pto.relu(x), y - 1), [(X, "n"), (COL, "p")], F),
    "logit": (lambda x: pto.logit(x * 0.45), [(X, "p")], F),
    "entr": (lambda x: pto.entr(x), [(X, "n")], F),
    "rel_entr": (lambda x, y: pto.rel_entr(x, y - 0.5), [(X, "n"), (ROW, "p")], F),
    "kl_div": (lambda x, y: pto.kl_div(x, y), [(X, "p"), (ROW, "p")], F),
    "i1e": (lambda x: (pto.i1e(x * 30), pto.i1e(x)), [(X, "n")], F),
    "zeta": (
        lambda x, y: (pto.zeta(x * 4 + 1.1, y), pto.zeta(3.0, -y * 2.5)),
        [(X, "p"), (ROW, "p")],
        F,
    ),
    "polygamma": (
        lambda n, x: (pto.polygamma(n, x * 3), pto.polygamma(1, 0.3 - x)),
        [(X, "x"), (X, "p")],
        F,
    ),
    "i0e": (lambda x: (pto.i0e(x * 12), pto.i0e(x)), [(X, "n")], F),
    "cross": (
        lambda x, y: (pto.cross(x[:, :3], y[:3]), pto.cross(x[:3], x[3:], axis=0)),
        [(X, "n"), (ROW, "n")],
        F + I,
    ),
    "kron": (lambda x, y: pto.kron(x[:2, :5], y[:3]) + 1, [(X, "n"), (ROW, "n")], F + I),
    # elimination: matrices made far from singular, rows reordered so that pivoting runs
    "solve": (lambda a, b: pto.linalg.solve(_conditioned(a), b), [(SQ, "n"), ((4, 3), "n")], F),
    "inv": (lambda a: pto.linalg.inv(_conditioned(a)), [(SQ, "n")], F),
    "det": (
        lambda a: (pto.linalg.det(_conditioned(a)), pto.linalg.det(a[:, :3, :3])),
        [(SQ, "n")],
        F,
    ),
    "slogdet": (lambda a: pto.linalg.slogdet(_conditioned(a)), [(SQ, "n")], F),
    "polyfit": (lambda x, y: pto.polyfit(y[:6], x[0, :6], 1), [(X, "n"), (ROW, "n")], F),
    "qr": (lambda x: pto.linalg.qr(x[:, :4] + 3 * np.eye(6, 4, dtype=np.float32)), [(X, "n")], F),
    # Jacobi rotations: float32 alone (float16 and bfloat16 are rounded float32 results)
    "eigh": (lambda a: pto.linalg.eigh(_spread(a[0])), [(SQ, "n")], (pto.float32,)),
    "eigvalsh": (
        lambda a: pto.linalg.eigvalsh(_spread(a, 2, 2), "U", False),
        [(SQ, "n")],
        (pto.float32,),
    ),
    "svd": (lambda a: pto.linalg.svd(_spread(a[0], 3, 2)), [(SQ, "n")], (pto.float32,)),
    "svdvals": (lambda a: pto.linalg.svdvals(_spread(a, 2, 3)), [(SQ, "n")], (pto.float32,)),
    "lstsq": (
        lambda a, b: pto.linalg.lstsq(_spread(a[0], 3, 2), b[:, 0]),
        [(SQ, "n"), ((3, 3), "n")],
        (pto.float32,),
    ),
    "matrix_rank": (
        lambda a: pto.linalg.matrix_rank(_spread(a, 2, 2)),
        [(SQ, "n")],
        (pto.float32,),
    ),
    "cholesky": (
        lambda a: pto.linalg.cholesky(a @ pto.swapaxes(a, -1, -2) + 0.5),
        [(SQ, "n")],
        F,
    ),
    "matrix_power": (
        lambda a: (pto.linalg.matrix_power(a * 0.5, 5), pto.linalg.matrix_power(a, 2)),
        [(SQ, "i")],
        F + I,
    ),
    "norm": (
        lambda x: (pto.linalg.norm(x, axis=1), pto.linalg.norm(x, 1), pto.linalg.norm(x, 3, 0)),
        [(X, "n")],
        F,
    ),
    "kernel_call": (
        lambda x, g, w: rms_norm_matmul(x, g, w, bm=16, bn=32, bk=16) + 1,
        [((32, 64), "n"), ((64,), "n"), ((64, 32), "n")],
        F,
    ),
}


_named_remat = pto.checkpoint(
    lambda v: pto.sin(pto.checkpoint_name(pto.exp(v * 0.5), "e")) * v,
    policy=pto.checkpoint_policies.save_only_these_names("e"),
)


def _printed(x: Any) -> Any:
    y = x * 2
    pto.debug.print("row sums {}", y.sum(1))  # a value inside the fused kernel, stored
    return pto.exp(y)


def make(shape: tuple[int, ...], kind: str, d: pto.DType, rng: np.random.Generator) -> Any:
    if kind == "x":
        return rng.integers(0, X[0], shape).astype(np.int32)
    if kind == "b":
        return rng.random(shape) < 0.5
    if d.is_integer or kind == "i":
        a = rng.integers(-4, 5, shape)
    elif kind == "p":
        a = rng.uniform(0.25, 2.0, shape)
    else:
        a = rng.normal(0.0, 1.0, shape)
    return a.astype(np.float32).astype(d.np) if d.is_floating else a.astype(d.np)


# The Jacobi decompositions' references are compiled by JAX whole: op by op, each new op and
# shape is a compile of its own (8 s for polyfit's hundreds of small ops, 0.7 s whole). Only
# for these: XLA's rewrites of a whole graph undo the compensated arithmetic of log1p, expm1,
# sinh or spacing, which the op-by-op reference keeps. (The rotations are plain arithmetic.)
_WHOLE_REFERENCE = {"eigh", "eigvalsh", "svd", "svdvals", "lstsq", "matrix_rank", "polyfit"}


def test_every_op_has_an_npu_case() -> None:
    assert set(OPS) == set(CASES), f"ops without an NPU case: {set(OPS) - set(CASES)}"


PARAMS = [
    pytest.param(name, d, m, id=f"{name}-{d.name}-{m}")
    for name, (_, _, dtypes) in CASES.items()
    for d in dtypes
    for m in MACHINES
    # the big machine runs every op in one float dtype (its cores only add idle lanes)
    if m == "tiny" or d is pto.float16
]


@pytest.mark.parametrize(("name", "dtype", "machine"), PARAMS)
def test_op_on_npu_equals_jax(name: str, dtype: pto.DType, machine: str) -> None:
    fn, specs, _ = CASES[name]
    # a seed of the case's name (not hash(): that changes with every process)
    rng = np.random.default_rng(zlib.crc32(f"{name}/{dtype.name}".encode()))
    args = [make(s, k, dtype, rng) for s, k in specs]
    tensors = [pto.tensor(a) for a in args]
    out = pto.jit(fn, machine=machine)(*tensors)
    ref = (jax.jit(pto.to_jax(fn)) if name in _WHOLE_REFERENCE else pto.to_jax(fn))(*args)
    outs = out if isinstance(out, tuple | list) else (out,)
    refs = ref if isinstance(ref, tuple | list) else (ref,)
    func, _, _ = trace(fn, tensors)
    for i, (o, r, k) in enumerate(zip(outs, refs, sum_lengths(func), strict=True)):
        assert o.shape == tuple(np.shape(r)), f"out[{i}] shape"
        c = compare(f"{name} out[{i}]", o, np.asarray(r), k=k)
        assert c.ok, str(c)


def test_npu_is_bit_exact_with_eager_on_elementwise_chains() -> None:
    """The numerics contract: fused kernels round every op where eager mode does."""
    rng = np.random.default_rng(0)
    for d in F:
        x = pto.tensor(rng.normal(0, 1, (24, 72)).astype(np.float32).astype(d.np))
        b = pto.tensor(rng.normal(0, 1, (72,)).astype(np.float32).astype(d.np))

        def f(x: Any, b: Any) -> Any:
            y = pto.gelu(x * 1.5 + b)
            return pto.where(y > 0.1, pto.exp(-y) / (1 + y * y), pto.tanh(y) - b)

        np.testing.assert_array_equal(
            np.asarray(pto.jit(f, machine="tiny")(x, b)), np.asarray(f(x, b)), err_msg=d.name
        )


def test_nextafter_and_spacing_are_bit_exact_with_eager_on_the_npu() -> None:
    tiny = np.finfo(np.float32).smallest_subnormal
    x = np.array([0.0, -0.0, 1.0, -2.0, 0.5, tiny, -3 * tiny, np.inf, -np.inf, np.nan, 6e4, 7.1])
    y = np.array([-0.0, 1.0, 2.0, 0.0, 0.0, -1.0, 1.0, 0.0, -np.inf, 1.0, np.inf, 7.1])
    f = pto.jit(lambda a, b: (pto.nextafter(a, b), pto.spacing(a)), machine="tiny")
    for d in F:
        top = float(ml_dtypes.finfo(d.np).max)  # towards inf: overflows to inf
        a = pto.tensor(np.r_[x, top, -top].astype(d.np))
        b = pto.tensor(np.r_[y, np.inf, 0.0].astype(d.np))
        for got, want in zip(f(a, b), (pto.nextafter(a, b), pto.spacing(a)), strict=True):
            g, w = np.asarray(got), np.asarray(want)
            u = np.uint32 if d is pto.float32 else np.uint16
            same = (g.view(u) == w.view(u)) | (
                np.isnan(g.astype(np.float32)) & np.isnan(w.astype(np.float32))
            )
            assert same.all(), (d.name, g, w)


def test_pow_of_negative_infinity_follows_jax_eagerly_and_on_the_npu() -> None:
    import jax.numpy as jnp

    x = np.array([-np.inf, -np.inf, -np.inf, -1.0, 4.0, np.inf], np.float32)
    y = np.array([0.5, -0.5, 3.0, 0.5, 0.5, -2.0], np.float32)
    want = np.asarray(jnp.power(x, y))  # inf, 0, -inf, nan, 2, 0
    for got in (pto.pow(x, y), pto.jit(lambda x, y: x**y, machine="tiny")(x, y)):
        np.testing.assert_array_equal(got.numpy(), want)


def test_stop_gradient_lowers_to_its_operand_without_the_tensor_passes() -> None:
    """The tensor passes drop ``stop_gradient`` once the graph is differentiated; lowered as
    traced, it is its operand inside the row kernel (no instruction of its own)."""
    from pypto.block import codegen, schedule
    from pypto.npu import machine, simulate
    from pypto.tile import config, lower_func

    x = np.arange(32 * 64, dtype=np.float32).reshape(32, 64)
    func, _, _ = trace(lambda x: pto.stop_gradient(x * 2.0) + 1.0, [pto.tensor(x)])
    assert [e.op for e in func.eqns] == ["mul", "stop_gradient", "add"]
    m = machine("tiny")
    tf = lower_func(func, m, config.TileConfig())
    (k,) = tf.kernels
    assert [s.op for s in k.sections[0].body if hasattr(s, "op")] == ["TMULS", "TADDS"]
    prof = simulate(codegen(schedule(tf, m)), m, {"a0": x})
    assert prof.outputs is not None
    np.testing.assert_array_equal(prof.outputs["out"], x * 2.0 + 1.0)


def test_one_value_down_the_rows_also_meets_rows_in_one_kernel() -> None:
    """A kernel of two fused groups: one over rows of two, one computing a [2] row once. A
    one-value operand spread down the rows for the first (a ``[2, 1]`` column) is also
    broadcast across the second's row, directly or after an op: from its ``[1, 1]`` tile,
    since a column of two rows does not broadcast to a ``[1, 2]`` row."""
    x0 = np.array([0.54784673, -0.92085314], np.float32)
    x1 = np.array([[[-1.836106], [-1.9338895], [1.253081]]], np.float32)
    w = np.random.default_rng(0).uniform(-1, 1, (1, 3, 2)).astype(np.float32)

    def direct(a: Any, b: Any) -> Any:
        return (pto.tanh(pto.sum(a, -1, keepdims=True) + (a + pto.tanh(b))) * w).sum()

    def scaled(a: Any, b: Any) -> Any:
        return (pto.tanh(pto.sum(a, -1, keepdims=True) * 0.25 + (a + pto.tanh(b))) * w).sum()

    for loss in (direct, scaled):
        g = pto.grad(loss, argnums=(0, 1))
        want = g(pto.tensor(x0), pto.tensor(x1))
        got = pto.jit(g, machine="tiny")(pto.tensor(x0), pto.tensor(x1))
        for o, r in zip(got, want, strict=True):
            np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)


def test_reduction_keywords_on_the_npu_equal_jax() -> None:
    """numpy's ``where``, ``initial`` and ``dtype`` compile to the NPU as masks and casts."""
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, (6, 40)).astype(np.float32)
    m = rng.random((6, 40)) < 0.7
    m[2] = False  # a row with nothing selected

    def f(x: Any, m: Any, lib: Any = pto) -> Any:
        f16 = pto.float16 if lib is pto else jnp.float16
        return (
            lib.sum(x, 1, where=m, initial=1.0),
            lib.max(x, axis=0, where=m, initial=-5.0),
            lib.min(x, axis=1, where=m, initial=5.0),
            lib.mean(x, axis=0, where=m),
            lib.var(x, axis=1, where=m, dtype=f16),
            lib.prod(x * 0.5 + 1, axis=0, where=m),
            lib.all(x > -1, axis=1, where=m),
            lib.sum(x, axis=0, dtype=f16),
        )

    got = pto.jit(f, machine="tiny")(pto.tensor(x), pto.tensor(m))
    want = f(x, m, jnp)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        c = compare(f"out[{i}]", g, np.asarray(w), k=40)
        assert c.ok, str(c)


def test_nan_reductions_variances_softmax_and_running_keywords_on_the_npu_equal_jax() -> None:
    """The nan-reductions' keywords, a variance's ``mean``/``correction``, softmax's and
    log_softmax's ``where`` and axes, and a running sum's ``dtype`` compile to the NPU."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(4)
    x = rng.normal(0, 1, (6, 40)).astype(np.float32)
    x[rng.random((6, 40)) < 0.2] = np.nan
    x[4] = np.nan  # a row of NaNs
    m = rng.random((6, 40)) < 0.7
    m[2] = False  # a row with nothing selected
    mu = rng.normal(0, 1, (6, 1)).astype(np.float32)

    def f(x: Any, m: Any, mu: Any, lib: Any = pto) -> Any:
        nn = pto if lib is pto else jax.nn
        f16 = pto.float16 if lib is pto else jnp.float16
        i32 = pto.int32 if lib is pto else jnp.int32
        c = lib.nan_to_num(x)
        return (
            lib.nansum(x, 1, where=m, initial=1.0),
            lib.nanmax(x, axis=0, where=m, initial=-5.0),
            lib.nanmin(x, axis=1),
            lib.nanmean(x, axis=0, where=m, dtype=f16),
            lib.nanvar(x, axis=1, where=m, ddof=1),
            lib.nanstd(x, axis=1, mean=mu),
            lib.nanprod(x * 0.5, axis=0, where=m),
            lib.var(c, axis=1, correction=1.5),
            lib.std(c, axis=1, where=m, mean=mu, keepdims=True),
            nn.softmax(c, -1, where=m),
            nn.log_softmax(c, (0, 1), where=m),
            lib.cumsum(c * 3, axis=1, dtype=i32),
            lib.nancumsum(x, 1, f16),
        )

    got = pto.jit(f, machine="tiny")(pto.tensor(x), pto.tensor(m), pto.tensor(mu))
    want = f(x, m, mu, jnp)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        c = compare(f"out[{i}]", g, np.asarray(w), k=240)
        assert c.ok, str(c)


def test_dot_product_attention_compiles_to_flash_attention() -> None:
    """jax.nn's layout costs no kernel of its own: the heads' transposes are read and
    written in place by the one attention kernel (kᵀ's transpose joins it), and with grouped
    heads the K/V tiles broadcast over their group of query heads."""
    rng = np.random.default_rng(5)

    def kernels(n: int, k: int) -> list[str]:
        q = pto.tensor(rng.normal(0, 1, (2, 64, n, 32)).astype(np.float16))
        kv = pto.tensor(rng.normal(0, 1, (2, 64, k, 32)).astype(np.float16))
        f = pto.jit(lambda q, kv: pto.dot_product_attention(q, kv, kv, is_causal=True))
        return [kern.name for kern in f.lower(q, kv).tile_ir.kernels]

    assert kernels(4, 4) == ["attention"]
    assert kernels(4, 2) == ["attention"]
    assert kernels(8, 1) == ["attention"]  # multi-query: one K/V head for all
