"""Advanced indexing ``x[key]`` and the functional updates ``x.at[key].set/add/...`` against
JAX: keys of ints, slices (negative steps), None, ``...``, integer arrays on one or more axes
(lists, numpy arrays, tensors — traced under ``jit``), repeated and out-of-range positions and
static boolean masks; eagerly, staged, on the simulated NPU and through ``grad``.
"""

from __future__ import annotations

from typing import Any

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from jaxref import BF16, BOOL, F16, F32, I8, I32, assert_matches, shapes, values

import pypto as pto

Draw = st.DataObject

KINDS = ("set", "add", "subtract", "multiply", "divide", "power", "min", "max", "apply", "get")
ARITH = ("add", "subtract", "multiply", "divide", "power")


def _apply(t: Any) -> Any:
    return t * 2 + 1


def _key(data: Draw, shape: tuple[int, ...], *, oob: bool) -> tuple[list[Any], list[int]]:
    """A basic key with zero to two of its real entries replaced by integer arrays; the positions of
    the arrays in the key. With ``oob``, array entries may fall out of range."""
    basic = data.draw(hnp.basic_indices(shape, allow_newaxis=True), label="basic")
    key = list(basic) if isinstance(basic, tuple) else [basic]
    real = [j for j, k in enumerate(key) if k is not None and k is not Ellipsis]
    spots = real + ([len(key)] if len(real) < len(shape) and Ellipsis not in key else [])
    picks = (
        data.draw(st.lists(st.sampled_from(spots), max_size=2, unique=True), label="arrays")
        if spots
        else []
    )
    bshape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3), label="bshape")
    ell = [j for j, k in enumerate(key) if k is Ellipsis]
    axes = {
        j: sum(1 for k in key[:j] if k is not None and k is not Ellipsis)
        + (len(shape) - len(real) if ell and ell[0] < j else 0)
        for j in picks
    }
    arrays = []
    for j in sorted(picks):
        n = shape[axes[j]]
        lo, hi = (-n - 2, n + 1) if oob else (-n, n - 1)
        assume(lo <= hi)
        # each array broadcasts to bshape (a trailing part of it, or ones)
        ashape = data.draw(st.sampled_from([bshape, bshape[1:], (1,) * len(bshape)]))
        idx = np.asarray(
            data.draw(hnp.arrays(np.int32, ashape, elements=st.integers(lo, hi)), label="idx")
        )
        if j == len(key):
            key.append(idx)
        else:
            key[j] = idx
        arrays.append(j)
    return key, arrays


def _broadcasts_to(data: Draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``shape``: a trailing part of it, some sides 1."""
    n = data.draw(st.integers(0, len(shape)), label="y dims")
    ones = data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="y ones")
    return tuple(1 if o else s for o, s in zip(ones, shape[len(shape) - n :], strict=True))


def _jax_update(kind: str, a: np.ndarray, key: tuple[Any, ...], y: Any, **kw: Any) -> Any:
    ref = jnp.asarray(a).at[key]
    if kind == "get":
        return ref.get(**kw)
    if kind == "apply":
        return ref.apply(_apply, **kw)
    return getattr(ref, kind)(y, **kw)


def _pto_update(kind: str, x: Any, key: tuple[Any, ...], y: Any, **kw: Any) -> Any:
    ref = x.at[key]
    if kind == "get":
        return ref.get(**kw)
    if kind == "apply":
        return ref.apply(_apply, **kw)
    return getattr(ref, kind)(y, **kw)


@settings(max_examples=90, deadline=None)
@given(data=st.data())
def test_at_updates_match_jax(data: Draw) -> None:
    """Every kind of update, each key form, eagerly and staged with the index arrays traced;
    repeated positions and (for updates) positions out of range, which JAX drops."""
    kind = data.draw(st.sampled_from(KINDS), label="kind")
    dtypes = (
        (F32, BF16, I32, I8, BOOL) if kind in ("set", "min", "max", "get") else (F32, BF16, I32)
    )
    if kind == "power":
        dtypes = (F32, F16)
    d = data.draw(st.sampled_from(dtypes), label="dtype")
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), label="shape")
    a = values(data, d, shape)
    if kind == "power":
        a = np.abs(a) + np.asarray(0.5, d.np)
    key, arrays = _key(data, shape, oob=kind != "get")
    k_np = tuple(key)
    out_shape = np.empty(shape)[
        tuple(np.clip(k, -1, 0) if j in arrays else k for j, k in enumerate(key))
    ].shape
    y_shape = _broadcasts_to(data, out_shape)
    y = values(data, d, y_shape)
    if kind == "power":
        y = np.clip(y, -2, 2)
    x = pto.tensor(a)
    want = _jax_update(kind, a, k_np, y)
    tensors = [pto.tensor(key[j]) for j in arrays]

    def with_tensors(ts: list[Any]) -> tuple[Any, ...]:
        k = list(key)
        for j, t in zip(arrays, ts, strict=True):
            k[j] = t
        return tuple(k)

    tol = 4 if kind in ARITH else 1
    got = _pto_update(kind, x, k_np, pto.tensor(y))
    assert_matches(got, want, tol, what=f"{kind} at {k_np}")
    staged = pto.jit(
        lambda t, u, *ts: _pto_update(kind, t, with_tensors(list(ts)), u), backend="interpret"
    )
    assert_matches(staged(x, pto.tensor(y), *tensors), want, tol, what=f"staged {kind} {k_np}")


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_advanced_indexing_matches_numpy(data: Draw) -> None:
    """``x[key]`` with integer arrays on up to two axes and static boolean masks, as numpy
    places the arrays' axes; eager and staged."""
    d = data.draw(st.sampled_from((F32, I8, BOOL)), label="dtype")
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=1), label="shape")
    a = values(data, d, shape)
    key, arrays = _key(data, shape, oob=False)
    if data.draw(st.booleans(), label="mask") and not arrays:
        mask = np.asarray(data.draw(hnp.arrays(np.bool_, shape[:1]), label="mask values"))
        key = [mask, *key[1:]] if key and key[0] is not Ellipsis and key[0] is not None else [mask]
    k_np = tuple(key)
    want = a[k_np]
    x = pto.tensor(a)
    got = x[k_np]
    assert got.shape == want.shape and got.dtype.np == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)
    ts = [pto.tensor(key[j]) for j in arrays]

    def index(t: Any, *idx: Any) -> Any:
        k = list(key)
        for j, i in zip(arrays, idx, strict=True):
            k[j] = i
        return t[tuple(k)]

    np.testing.assert_array_equal(np.asarray(pto.jit(index, backend="interpret")(x, *ts)), want)


def test_repeated_positions() -> None:
    """A set keeps the last update of a position; add, min, max and apply take all of them,
    for static and traced positions (more repeats than the rounds take the one-hot form)."""
    a = np.arange(8, dtype=np.float32)
    idx = np.array([1, 5, 1, 1, 7, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1], np.int32)  # 1: 11 times
    y = np.linspace(-3, 4, idx.size).astype(np.float32)
    for kind in ("set", "add", "subtract", "min", "max", "multiply", "apply"):
        want = _jax_update(kind, a, (idx,), y)
        for index in (idx, pto.tensor(idx)):
            got = _pto_update(kind, pto.tensor(a), (index,), pto.tensor(y))
            assert_matches(got, want, 4, what=kind)
        staged = pto.jit(lambda t, i, u, k=kind: _pto_update(k, t, (i,), u), backend="interpret")
        assert_matches(staged(pto.tensor(a), pto.tensor(idx), pto.tensor(y)), want, 4, what=kind)


def test_add_of_infinities_and_nan_stays_where_it_goes() -> None:
    """A traced add sums on the cube through a one-hot; an infinity or NaN update reaches its
    own position only (0·inf would otherwise spread NaN)."""
    a = np.zeros((4, 2), np.float32)
    idx = np.array([0, 2, 2, 3], np.int32)
    y = np.array([[np.inf, 1], [-np.inf, 2], [np.inf, 3], [np.nan, -np.inf]], np.float32)
    want = jnp.asarray(a).at[idx].add(y)
    for d in (np.float32, jnp.bfloat16):
        f = pto.jit(lambda t, i, u: t.at[i].add(u), backend="interpret")
        got = f(pto.tensor(a.astype(d)), pto.tensor(idx), pto.tensor(y.astype(d)))
        assert_matches(got, want.astype(d), what=str(d))


def test_modes_and_negative_indices() -> None:
    x = jnp.arange(5.0)
    p = pto.arange(5.0)
    cases: list[tuple[Any, dict[str, Any], str, Any]] = [
        (10, {}, "add", 10.0),
        (20, {"mode": "clip"}, "add", 10.0),
        (-1, {}, "set", 99.0),
        (-1, {"wrap_negative_indices": False, "mode": "drop"}, "set", 99.0),
        (np.array([7, -9, 2]), {}, "set", 5.0),
        (np.array([7, -9, 2]), {"mode": "clip"}, "max", 5.0),
        (20, {"mode": "fill"}, "get", None),
        (20, {"mode": "fill", "fill_value": -1}, "get", None),
        (np.array([20, -1, 2]), {"mode": "clip"}, "get", None),
        (np.array([20, -1, 2]), {"mode": "fill"}, "get", None),
    ]
    for key, kw, kind, y in cases:
        want = _jax_update(kind, np.asarray(x), (key,), y, **kw)
        assert_matches(_pto_update(kind, p, (key,), y, **kw), want, what=f"{kind} {key} {kw}")
        if isinstance(key, np.ndarray):
            f = pto.jit(
                lambda t, i, k=kind, kw=kw, y=y: _pto_update(k, t, (i,), y, **kw),
                backend="interpret",
            )
            assert_matches(f(p, pto.tensor(key)), want, what=f"traced {kind} {key} {kw}")
    ints = jnp.arange(5, dtype=jnp.int8)
    assert_matches(
        pto.arange(5).astype(pto.int8).at[20].get(mode="fill"), ints.at[20].get(mode="fill")
    )
    assert_matches(
        pto.tensor([True, False]).at[5].get(mode="fill"),
        jnp.array([True, False]).at[5].get(mode="fill"),
    )


@pytest.mark.filterwarnings("ignore:scatter inputs have incompatible types")
def test_divide_and_power_follow_jax_dtypes() -> None:
    """``divide`` and ``power`` divide or raise ``x`` by ones with the values multiplied in:
    an integer ``x`` divides into floats."""
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    for kind, y in [("divide", 2), ("divide", 4.0), ("power", 2), ("multiply", 2.5)]:
        assert_matches(_pto_update(kind, pto.tensor(a), (1,), y), _jax_update(kind, a, (1,), y))


GRAD_CASES = [
    ("set", (slice(1, None, 2),)),
    ("set", (np.array([1, 1, 3]),)),
    ("add", (np.array([0, 2, 0]), 1)),
    ("subtract", (slice(None), np.array([[1], [0]]))),
    ("multiply", (np.array([3, 0]),)),
    ("divide", (2, slice(None, None, -1))),
    ("min", (np.array([1, 1, 2]),)),
    ("max", (Ellipsis, 0)),
]


@pytest.mark.parametrize(("kind", "key"), GRAD_CASES, ids=lambda c: str(c))
def test_update_gradients_match_jax(kind: str, key: tuple[Any, ...]) -> None:
    """d/dx and d/dy of a weighted sum of ``x.at[key].op(y)`` against ``jax.grad``, for static
    and (under jit) traced index arrays."""
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2.0, (4, 3)).astype(np.float32)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    out_shape = jnp.asarray(a)[key].shape
    y = rng.uniform(0.5, 2.0, out_shape).astype(np.float32)

    # (JAX differentiates a scatter-multiply only with unique positions, which these are)
    kw = {"unique_indices": True} if kind in ("multiply", "divide") else {}

    def jf(x: Any, u: Any) -> Any:
        return jnp.sum(getattr(x.at[key], kind)(u, **kw) * w)

    want = jax.grad(jf, argnums=(0, 1))(a, y)

    def pf(x: Any, u: Any, *ts: Any) -> Any:
        k = list(key)
        arrays = [j for j, e in enumerate(key) if isinstance(e, np.ndarray)]
        for j, t in zip(arrays, ts, strict=False):  # (eagerly, the numpy arrays stay)
            k[j] = t
        return pto.sum(getattr(x.at[tuple(k)], kind)(u) * w)

    for g in (
        pto.grad(pf, argnums=(0, 1))(pto.tensor(a), pto.tensor(y)),
        pto.jit(pto.grad(pf, argnums=(0, 1)), backend="interpret")(
            pto.tensor(a), pto.tensor(y), *(pto.tensor(e) for e in key if isinstance(e, np.ndarray))
        ),
    ):
        for got, exp in zip(g, want, strict=True):
            assert_matches(got, exp, 2, what=f"grad {kind} {key}")


NPU_CASES: list[tuple[str, Any, list[np.ndarray]]] = [
    # an embedding-table update: rows at traced positions, repeats summed on the cube
    (
        "add rows",
        lambda t, i, u: t.at[i].add(u),
        [np.zeros((16, 32)), np.array([3, 0, 3, 15, 7]), np.ones((5, 32))],
    ),
    (
        "set rows",
        lambda t, i, u: t.at[i].set(u),
        [np.zeros((16, 32)), np.array([3, 0, 3, 15]), np.ones((4, 32))],
    ),
    (
        "max cols",
        lambda t, i, u: t.at[:, i].max(u),
        [np.zeros((8, 24)), np.array([5, 5, 1]), np.ones((8, 3))],
    ),
    ("strided set", lambda t, u: t.at[1::2, ::-3].set(u), [np.zeros((8, 48)), np.ones((4, 16))]),
    (
        "static repeats",
        lambda t, u: t.at[np.array([2, 2, 5]), 1:].add(u),
        [np.zeros((8, 33)), np.ones((3, 32))],
    ),
    (
        "pairs",
        lambda t, i, j: t[i, j],
        [np.zeros((8, 40)), np.array([7, 0, 3]), np.array([39, 1, 0])],
    ),
]


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize(("name", "fn", "operands"), NPU_CASES, ids=[c[0] for c in NPU_CASES])
def test_updates_on_the_npu(
    name: str, fn: Any, operands: list[np.ndarray], dtype: pto.DType
) -> None:
    rng = np.random.default_rng(1)
    args = [
        o.astype(np.int32)
        if o.dtype.kind in "iu"
        else (o + rng.normal(size=o.shape)).astype(dtype.np)
        for o in operands
    ]
    tensors = [pto.tensor(o) for o in args]
    want = fn(*tensors)
    got = pto.jit(fn, machine="tiny")(*tensors)
    assert_matches(got, np.asarray(want), 2, what=name)


def test_errors_name_the_update() -> None:
    x = pto.zeros((3, 4))
    with pytest.raises(
        pto.ShapeError,
        match=r"at\[\]\.set.*cannot broadcast the update f32\[5\] to the shape \[3, 2\]",
    ):
        x.at[:, [0, 1]].set(pto.zeros(5))
    with pytest.raises(pto.ShapeError, match="unknown mode 'wrap'"):
        x.at[0].add(1.0, mode="wrap")
    with pytest.raises(pto.DTypeError, match="add into a bool tensor"):
        pto.tensor([True, False]).at[0].add(True)
    with pytest.raises(pto.ShapeError, match="boolean mask index") as e:
        x.at[x > 0].set(1.0)
    assert "pto.where" in str(e.value.hint)
    with pytest.raises(pto.BoundsError, match=r"a boolean mask of shape \[2\] for axes 0..0"):
        x[np.array([True, False])]
    with pytest.raises(pto.DTypeError, match="indices must be integers"):
        x[np.array([0.5])]
    with pytest.raises(
        pto.ShapeError, match=r"index arrays of shapes \[2\], \[3\] cannot be broadcast"
    ):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(pto.BoundsError, match="index 5 is out of range for axis 1 of size 4"):
        x[[0], [5]]
    f = pto.jit(lambda t, i: t.at[i].apply(pto.exp), backend="interpret")
    with pytest.raises(pto.ShapeError, match="apply at 40 traced positions") as e:
        f(pto.zeros(50), pto.zeros(40, pto.int32))
    assert "unique_indices=True" in str(e.value.hint)
    assert "test_at_vs_jax.py" in str(e.value)
    with pytest.raises(TypeError, match=r"x\.at\[key\]\.set"):
        x[0] = 1.0


def test_data_dependent_lengths_need_a_size_when_traced() -> None:
    """Eagerly the length is counted from the values; traced, ``size`` is asked for."""
    x = pto.tensor([0.0, 2.0, 0.0, 3.0])
    assert pto.nonzero(x)[0].shape == (2,)
    for fn in (pto.nonzero, pto.flatnonzero, pto.argwhere, pto.unique):
        f = pto.jit(lambda t, fn=fn: fn(t), backend="interpret")
        with pytest.raises(pto.TraceError, match="depends on the values") as e:
            f(x)
        assert "size=" in str(e.value.hint)
        assert "test_at_vs_jax.py" in str(e.value)
    with pytest.raises(pto.ShapeError, match="nonzero of a 0-d tensor"):
        pto.nonzero(pto.tensor(1.0))
    with pytest.raises(pto.ShapeError, match="size=4 for 3 slices"):
        pto.compress(pto.tensor([True, False, True]), pto.arange(3), size=4)


def test_where_of_a_condition_alone_is_nonzero() -> None:
    c = np.array([[0, 3, 0], [4, 0, 5]], np.int32)
    for got, want in zip(pto.where(pto.tensor(c)), jnp.where(c), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    f = pto.jit(lambda t: pto.where(t > 0, size=4, fill_value=-1), backend="interpret")
    for got, want in zip(f(c), jnp.where(c > 0, size=4, fill_value=-1), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    with pytest.raises(pto.TraceError, match="got x without y: give both, or neither"):
        pto.where(pto.tensor(c), 1.0)
    with pytest.raises(pto.TraceError, match="size and fill_value belong to where"):
        pto.where(pto.tensor(c), 1.0, 2.0, size=2)


def test_index_arrays_match_jax() -> None:
    """The index arrays known when tracing: the same values and dtypes as JAX's."""
    pairs: list[tuple[Any, Any]] = [
        (pto.indices((2, 3)), jnp.indices((2, 3))),
        (pto.indices((2, 1, 3), sparse=True), jnp.indices((2, 1, 3), sparse=True)),
        (pto.diag_indices(3, 3), jnp.diag_indices(3, 3)),
        (pto.tril_indices(3, -1, 4), jnp.tril_indices(3, -1, 4)),
        (pto.triu_indices(4, 1), jnp.triu_indices(4, 1)),
        (pto.tri(3, 4, 1), jnp.tri(3, 4, 1)),
        (pto.tri(2, dtype=pto.int8), jnp.tri(2, dtype=jnp.int8)),
    ]
    for got, want in pairs:
        gs, ws = (list(v) if isinstance(v, tuple) else [v] for v in (got, want))
        assert len(gs) == len(ws)
        for g, w in zip(gs, ws, strict=True):
            assert_matches(g, w)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    mask = np.array([True, False, True, True])
    for key in ([0, 2], [1, 3]), ([2], mask):
        got = pto.tensor(a)[pto.ix_(*key)]
        # (numpy's ix_: JAX's refuses boolean masks)
        assert_matches(got, a[np.ix_(*(np.asarray(k) for k in key))])
    x = pto.tensor(a)
    f = pto.jit(lambda t, r: t[pto.ix_(r, [0, 3])].sum(), backend="interpret")
    assert float(f(x, pto.tensor([2, 0]))) == float(a[np.ix_([2, 0], [0, 3])].sum())


def test_frexp_and_ldexp_keep_subnormals() -> None:
    """Against numpy, which keeps subnormals (JAX's CPU backend flushes them to zero)."""
    tiny = np.finfo(np.float32).tiny
    x = np.array([tiny / 4, -1.4e-45, tiny, 3.0, 1e-30, 0.75], np.float32)
    m, e = pto.frexp(pto.tensor(x))
    want_m, want_e = np.frexp(x)
    np.testing.assert_array_equal(m.numpy(), want_m)
    np.testing.assert_array_equal(e.numpy(), want_e)
    n = np.array([3, 10, -3, -150, 200, -149], np.int32)
    np.testing.assert_array_equal(pto.ldexp(pto.tensor(x), pto.tensor(n)).numpy(), np.ldexp(x, n))
    with pytest.raises(pto.DTypeError, match="the exponents must be integers"):
        pto.ldexp(pto.tensor(x), pto.tensor(x))
