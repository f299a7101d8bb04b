"""Helpers of the differential tests against JAX: dtypes, input strategies, references, checks.

The tests import this module by its plain name (pytest puts ``tests/ops`` on ``sys.path``).

Compiling a JAX computation for a new shape costs ~40 ms on CPU, so the references are built to
reuse compiled kernels where the op's semantics allow it:

* elementwise ops: values do not depend on layout, so the operands are broadcast to the result
  shape (numpy's broadcasting, which is JAX's), flattened and padded into one of a few fixed
  buffer sizes: one kernel per dtype signature; the result dtype is the one JAX computes;
* layout ops move elements without arithmetic, so JAX moves an int32 iota of the source
  positions and the expected result is the input gathered at those positions (one kernel per
  shape, shared by all six dtypes); again shape and dtype come from ``jax.eval_shape``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import hypothesis.extra.numpy as hnp
import jax
import numpy as np
from hypothesis import strategies as st

import pypto as pto
from pypto.core.tolerance import tolerance

F32, F16, BF16 = pto.float32, pto.float16, pto.bfloat16
I32, I8, BOOL = pto.int32, pto.int8, pto.bool_
DTYPES: tuple[pto.DType, ...] = (F32, F16, BF16, I32, I8, BOOL)
FLOATS: tuple[pto.DType, ...] = (F32, F16, BF16)
INTS: tuple[pto.DType, ...] = (I32, I8)
NUMERIC: tuple[pto.DType, ...] = FLOATS + INTS

# Dims stay small: the point is the edge cases (0, 1, broadcasting), not the sizes.
MAX_SIDE = 4
MAX_DIMS = 3

SPECIALS = (0.0, -0.0, np.inf, -np.inf, np.nan)


def name_of(x: Any) -> str:
    """The dtype name of a JAX/numpy array or dtype, as pypto spells it (``bool``, ``bfloat16``)."""
    return np.dtype(getattr(x, "dtype", x)).name


# ---------------------------------------------------------------------------------------------
# Checking a result


def assert_matches(actual: Any, expected: Any, k: int = 1, what: str = "") -> None:
    """``actual`` (a pypto result) equals ``expected`` (JAX's): shape and dtype exactly, values
    within ``tolerance(dtype, k)`` (floats, compared in float32, NaN equal to NaN, infinities
    exact) or exactly (integers and bools)."""
    assert isinstance(actual, pto.Tensor), f"{what}: expected a Tensor, got {type(actual)}"
    e = np.asarray(expected)
    a = np.asarray(actual)
    assert actual.shape == e.shape, f"{what}: shape {actual.shape} != JAX {e.shape}"
    assert actual.dtype.name == name_of(e), f"{what}: dtype {actual.dtype} != JAX {name_of(e)}"
    # The stored array really has the declared dtype (float64 would masquerade as float32).
    assert a.dtype == actual.dtype.np, f"{what}: stored {a.dtype} for a {actual.dtype} tensor"
    d = actual.dtype
    if d.is_floating:
        rtol, atol = tolerance(d, k)
        np.testing.assert_allclose(
            a.astype(np.float32),
            e.astype(np.float32),
            rtol=rtol,
            atol=atol,
            equal_nan=True,
            err_msg=what,
        )
    else:
        np.testing.assert_array_equal(a, e, err_msg=what)


# ---------------------------------------------------------------------------------------------
# Drawing inputs


def shapes(min_dims: int = 0, max_dims: int = MAX_DIMS, min_side: int = 0) -> Any:
    return hnp.array_shapes(
        min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=MAX_SIDE
    )


def broadcast_shapes(n: int, min_dims: int = 0, min_side: int = 0) -> Any:
    """``n`` mutually broadcastable shapes (size-1 dims, missing leading dims, 0-d)."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=n, min_dims=min_dims, max_dims=MAX_DIMS, min_side=min_side, max_side=MAX_SIDE
    ).map(lambda s: s.input_shapes)


def rng(data: st.DataObject) -> np.random.Generator:
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


def values(
    data: st.DataObject,
    dtype: pto.DType,
    shape: Sequence[int],
    lo: float = -10.0,
    hi: float = 10.0,
    *,
    ints: tuple[int, int] | None = None,
    specials: Sequence[float] = (),
    discrete: bool | None = None,
) -> np.ndarray:
    """A numpy array of ``dtype``: floats uniform in [lo, hi] (or small integers, so that ties
    occur, when ``discrete``), sometimes with ``specials`` sprinkled in; integers uniform in
    ``ints`` (default: [lo, hi], clipped to the dtype); bools fair coins."""
    g = rng(data)
    shape = tuple(shape)
    if dtype is BOOL:
        return np.asarray(g.random(shape) < 0.5)
    if not dtype.is_floating:
        info = np.iinfo(dtype.np)
        a, b = ints if ints is not None else (int(lo), int(hi))
        return np.asarray(
            g.integers(max(a, info.min), min(b, info.max), size=shape, endpoint=True)
        ).astype(dtype.np)
    if discrete is None:
        discrete = data.draw(st.booleans(), label="discrete")
    if discrete:
        x = g.integers(math.ceil(lo), math.floor(hi), size=shape, endpoint=True).astype(np.float64)
    else:
        x = g.uniform(lo, hi, size=shape)
    if specials and data.draw(st.booleans(), label="specials"):
        mask = g.random(shape) < 0.25
        x = np.where(mask, g.choice(np.asarray(specials, np.float64), size=shape), x)
    with np.errstate(over="ignore", invalid="ignore"):  # out-of-range values become inf
        return np.asarray(x).astype(dtype.np)


def as_input(data: st.DataObject, a: np.ndarray, allow_numpy: bool = True) -> Any:
    """An operand holding the values of ``a``: a fresh Tensor, or a *view* — a strided slice,
    a reversed slice or a transpose of a bigger Tensor — or (``allow_numpy``) a numpy view."""
    kinds = ["tensor", "strided", "reversed", "transposed"] + (["numpy"] if allow_numpy else [])
    kind = data.draw(st.sampled_from(kinds), label="operand")
    nd = a.ndim
    if kind == "tensor":
        return pto.tensor(a)
    if kind == "transposed" and nd >= 2:
        perm = data.draw(st.permutations(range(nd)), label="perm")
        stored = pto.tensor(np.ascontiguousarray(np.transpose(a, np.argsort(perm))))
        return stored.T if perm == list(range(nd))[::-1] else stored.transpose(perm)
    if nd == 0:  # a 0-d view: one element picked out of a vector
        big = np.stack([a, a, a])
        big[0] = big[2] = 0
        return (big if kind == "numpy" else pto.tensor(big))[1]
    if kind == "reversed":
        big = np.ascontiguousarray(a[(slice(None, None, -1),) * nd])
        return pto.tensor(big)[(slice(None, None, -1),) * nd]
    # strided: every other element of a buffer twice the size, at an odd offset
    big = np.zeros(tuple(2 * s + 1 for s in a.shape), a.dtype)
    key = (slice(1, None, 2),) * nd
    big[key] = a
    return big[key] if kind == "numpy" else pto.tensor(big)[key]


def operands(
    data: st.DataObject, arrays: Sequence[np.ndarray], allow_numpy: bool = True
) -> list[Any]:
    """Each array as an operand (see :func:`as_input`); numpy arrays are accepted wherever a
    Tensor is, so all of them may be numpy views (operators need a Tensor on one side)."""
    return [as_input(data, a, allow_numpy) for a in arrays]


# ---------------------------------------------------------------------------------------------
# References


def _bucket(n: int) -> int:
    """The buffer size for ``n`` elements: one size holds every shape drawn here (4**3)."""
    return max(MAX_SIDE**MAX_DIMS, 1 << max(n - 1, 0).bit_length())


_JITTED: dict[Any, Any] = {}


def jitted(fn: Callable[..., Any], static: tuple[str, ...] = ()) -> Any:
    """``jax.jit(fn)``, made once per function (cheap dispatch; one compile per signature)."""
    key = (fn, static)
    if key not in _JITTED:
        _JITTED[key] = jax.jit(fn, static_argnames=static)
    return _JITTED[key]


def _with_constants(
    fn: Callable[..., Any], consts: tuple[tuple[int, Any], ...], params: Any
) -> Any:
    """jit of ``fn`` with Python scalars (by position) and keyword params baked in: the
    scalars reach ``fn`` as Python scalars, exactly as in a direct call (weak types, and e.g.
    ``jnp.power(x, 2)`` taking its integer-exponent path)."""
    key = (fn, tuple((i, type(c), c) for i, c in consts), params)
    if key not in _JITTED:

        def call(*arrays: Any) -> Any:
            args = list(arrays)
            for i, c in consts:
                args.insert(i, c)
            return fn(*args, **dict(params))

        _JITTED[key] = jax.jit(call)
    return _JITTED[key]


@dataclass(frozen=True)
class Member:
    """Function ``name`` of ``family`` (pairs of name and elementwise function): JAX computes
    it in one kernel with every function of the family that accepts the same operands, so that
    the kernel compiled for one op serves its whole family."""

    family: tuple[tuple[str, Callable[..., Any]], ...]
    name: str


_FAMILIES: dict[Any, Callable[..., Any]] = {}


def _family_fn(family: tuple[tuple[str, Callable[..., Any]], ...]) -> Callable[..., Any]:
    if family not in _FAMILIES:

        def run(*args: Any, **params: Any) -> dict[str, Any]:
            out = {}
            for name, f in family:
                try:
                    out[name] = f(*args, **params)
                except (TypeError, ValueError):  # it refuses these operands' dtypes
                    continue
            return out

        _FAMILIES[family] = run
    return _FAMILIES[family]


def jax_elementwise(
    fn: Callable[..., Any] | Member, *args: Any, static_scalars: bool = False, **params: Any
) -> np.ndarray:
    """``fn(*args, **params)`` computed by JAX for an elementwise ``fn`` (see the module
    docstring); ``args`` are numpy arrays or Python scalars (or None).

    Python scalars are jit arguments, which JAX keeps weakly typed as in a direct call; with
    ``static_scalars`` they are baked into the function instead (for ``jnp.power``, whose
    Python-int exponents take an exact repeated-multiplication path)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in args if isinstance(a, np.ndarray)))
    n = math.prod(shape)
    size = _bucket(n)
    flat: list[Any] = []
    consts: list[tuple[int, Any]] = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            buf = np.ones(size, a.dtype)  # padding lanes hold 1 (harmless for every op), cut below
            buf[:n] = np.broadcast_to(a, shape).reshape(-1)
            flat.append(buf)
        elif a is None or static_scalars:
            consts.append((i, a))
        else:
            flat.append(a)
    kernel = _family_fn(fn.family) if isinstance(fn, Member) else fn
    r = _with_constants(kernel, tuple(consts), tuple(sorted(params.items())))(*flat)
    if isinstance(fn, Member):
        if fn.name not in r:  # JAX refuses: raise its own error
            dict(fn.family)[fn.name](*args, **params)
        r = r[fn.name]
    r = np.asarray(r)
    assert r.shape == (size,), (r.shape, size)
    return r[:n].reshape(shape)


def jax_layout(fn: Callable[..., Any], *arrays: np.ndarray, extra: tuple[Any, ...] = ()) -> Any:
    """``fn(*arrays, *extra)`` for a data-movement ``fn`` (see the module docstring) whose
    elements all come from ``arrays``; ``extra`` are further arguments (e.g. indices). A list
    for a list-valued ``fn`` (split), else one array."""
    outs = jax.eval_shape(fn, *arrays, *extra)
    first = outs[0] if isinstance(outs, list | tuple) else outs
    offsets = np.cumsum([0, *(a.size for a in arrays)])
    iotas = [
        (np.arange(a.size, dtype=np.int32) + o).reshape(a.shape)
        for a, o in zip(arrays, offsets, strict=False)
    ]
    # The promoted inputs, flattened end to end (concat promotes like JAX; values are small).
    src = np.concatenate([np.asarray(a).astype(first.dtype).reshape(-1) for a in arrays])
    pos = fn(*iotas, *extra)

    def gather(p: Any, o: Any) -> np.ndarray:
        p = np.asarray(p)
        assert p.shape == o.shape, (p.shape, o)
        return src[p].astype(o.dtype)

    if isinstance(outs, list | tuple):
        return [gather(p, o) for p, o in zip(pos, outs, strict=True)]
    return gather(pos, outs)
