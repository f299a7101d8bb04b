"""``pto.lax.gather`` and the scatters against ``jax.lax``'s: dimension numbers of every kind
(collapsed and inserted axes, windows in any position, batching axes, axes taken whole or in
part), the three modes on windows that reach outside, repeats, eagerly, under ``jit`` with
traced indices, their gradients, on the NPU, and their errors."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest
from jaxref import assert_matches

import pypto as pto
from pypto.core.errors import DTypeError, ShapeError

lax = pto.lax
rng = np.random.default_rng(5)
X = rng.normal(size=(6, 7, 5)).astype(np.float32)

# (id, operand, indices, GatherDimensionNumbers fields, slice_sizes)
GATHERS: list[tuple[str, np.ndarray, np.ndarray, dict[str, Any], tuple[int, ...]]] = [
    (
        "rows, an embedding lookup",
        X[:, :, 0],
        np.array([[4], [0], [4], [5]]),
        dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)),
        (1, 7),
    ),
    (
        "points",
        X[:, :, 0],
        np.array([[1, 2], [5, 6], [0, 0]]),
        dict(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1)),
        (1, 1),
    ),
    (
        "windows reaching outside",
        X[:, :, 0],
        np.array([[[1, 2]], [[5, 6]], [[-2, 3]], [[4, 9]]]),
        dict(offset_dims=(2, 3), collapsed_slice_dims=(), start_index_map=(0, 1)),
        (2, 3),
    ),
    (
        "window axes first, starts in reverse",
        X,
        np.array([[3, 1], [0, 5]]),
        dict(offset_dims=(0, 1), collapsed_slice_dims=(2,), start_index_map=(2, 0)),
        (2, 7, 1),
    ),
    (
        "a window axis between batch axes",
        X,
        np.array([[[2], [0]], [[1], [3]], [[0], [0]]]),
        dict(offset_dims=(1, 3), collapsed_slice_dims=(1,), start_index_map=(1,)),
        (4, 1, 5),
    ),
    (
        "whole axes on both sides of the indexed one",
        X,
        np.array([[6], [2], [3]]),
        dict(offset_dims=(1, 2), collapsed_slice_dims=(1,), start_index_map=(1,)),
        (6, 1, 5),
    ),
    (
        "indexed axes apart, a whole one between",
        X,
        np.array([[1, 4], [5, 0]]),
        dict(offset_dims=(1, 2), collapsed_slice_dims=(2,), start_index_map=(0, 2)),
        (2, 7, 1),
    ),
    (
        "part of an axis no index starts",
        X[:, :, 0],
        np.array([[3], [1]]),
        dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)),
        (1, 4),
    ),
    (
        "batching axes",
        X,
        np.array([[[2], [0]], [[4], [4]], [[1], [6]], [[0], [3]], [[5], [5]], [[3], [2]]]),
        dict(
            offset_dims=(2,),
            collapsed_slice_dims=(1,),
            start_index_map=(1,),
            operand_batching_dims=(0,),
            start_indices_batching_dims=(0,),
        ),
        (1, 1, 5),
    ),
    (
        "no index vector entries, a batch of whole copies",
        X[0],
        np.zeros((3, 0), np.int32),
        dict(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=()),
        (7, 5),
    ),
    (
        "int8 indices",
        X[:, 0, :],
        np.array([[2, 1], [0, 3]], np.int8),
        dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1)),
        (1, 2),
    ),
]


def _gid(c: Any) -> str:
    return c[0]


@pytest.mark.parametrize("mode", [None, "clip", "fill", "promise_in_bounds"])
@pytest.mark.parametrize("case", GATHERS, ids=_gid)
def test_gather_matches_jax(case: Any, mode: str | None) -> None:
    _, x, idx, fields, sizes = case

    def run(lx: Any, x: Any, i: Any) -> Any:
        dn = lx.GatherDimensionNumbers(**fields)
        return lx.gather(x, i, dn, sizes, mode=mode)

    want = run(jax.lax, x, idx)
    assert_matches(run(lax, x, idx), want, what="eager")
    traced = pto.jit(lambda x, i: run(lax, x, i), backend="interpret")(x, idx)
    assert_matches(traced, want, what="jit")


def test_gather_of_ints_and_bools_fills_as_jax() -> None:
    xi = (X[:, :, 0] * 10).astype(np.int32)
    dn = dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    idx = np.array([[1], [9], [-1]])
    for x in (xi, xi > 0, xi.astype(np.int8)):
        want = jax.lax.gather(x, idx, jax.lax.GatherDimensionNumbers(**dn), (1, 3), mode="fill")
        got = lax.gather(x, idx, lax.GatherDimensionNumbers(**dn), (1, 3), mode="fill")
        assert_matches(got, want, what=str(x.dtype))
    want = jax.lax.gather(
        X[:, :, 0], idx, jax.lax.GatherDimensionNumbers(**dn), (1, 3), mode="fill", fill_value=-7
    )
    got = lax.gather(
        X[:, :, 0], idx, lax.GatherDimensionNumbers(**dn), (1, 3), mode="fill", fill_value=-7
    )
    assert_matches(got, want, what="fill_value")
    # JAX's own dimension numbers and mode enum are taken too
    jdn = jax.lax.GatherDimensionNumbers(**dn)
    clip = jax.lax.GatherScatterMode.CLIP
    assert_matches(
        lax.gather(X[:, :, 0], idx, jdn, (1, 3), mode=clip),
        jax.lax.gather(X[:, :, 0], idx, jdn, (1, 3), mode=clip),
    )


# (id, operand, indices, ScatterDimensionNumbers fields, updates' shape)
SCATTERS: list[tuple[str, np.ndarray, np.ndarray, dict[str, Any], tuple[int, ...]]] = [
    (
        "rows with repeats",
        X[:, :, 0],
        np.array([[4], [0], [4], [5]]),
        dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,)),
        (4, 7),
    ),
    (
        "points with repeats and windows outside",
        X[:, :, 0],
        np.array([[1, 2], [5, 6], [1, 2], [6, 0], [-1, 3]]),
        dict(
            update_window_dims=(), inserted_window_dims=(0, 1), scatter_dims_to_operand_dims=(0, 1)
        ),
        (5,),
    ),
    (
        "windows, some reaching outside",
        X[:, :, 0],
        np.array([[[1, 2]], [[5, 6]], [[2, 3]], [[4, 9]]]),
        dict(
            update_window_dims=(2, 3), inserted_window_dims=(), scatter_dims_to_operand_dims=(0, 1)
        ),
        (4, 1, 2, 3),
    ),
    (
        "window axes first, indexed axes apart",
        X,
        np.array([[1, 4], [5, 0], [1, 4]]),
        dict(
            update_window_dims=(0, 1),
            inserted_window_dims=(2,),
            scatter_dims_to_operand_dims=(0, 2),
        ),
        (2, 7, 3),
    ),
    (
        "batching axes",
        X,
        np.array([[[2], [0], [2]], [[4], [4], [1]], [[1], [6], [6]]] * 2),
        dict(
            update_window_dims=(2,),
            inserted_window_dims=(1,),
            scatter_dims_to_operand_dims=(1,),
            operand_batching_dims=(0,),
            scatter_indices_batching_dims=(0,),
        ),
        (6, 3, 5),
    ),
]

KINDS = ["scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max"]


def _sid(c: Any) -> str:
    return c[0]


@pytest.mark.parametrize("mode", [None, "clip", "promise_in_bounds"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", SCATTERS, ids=_sid)
def test_scatter_matches_jax(case: Any, kind: str, mode: str | None) -> None:
    _, x, idx, fields, ushape = case
    upd = np.random.default_rng(len(ushape)).normal(size=ushape).astype(np.float32)
    # repeats of a set keep one of the updates, which JAX leaves to XLA: only unique ones
    rows = len({tuple(r.ravel()) for r in idx.reshape(-1, idx.shape[-1])})
    if (
        kind == "scatter"
        and rows < idx.reshape(-1, idx.shape[-1]).shape[0]
        and not fields.get("operand_batching_dims")
    ):
        idx = np.unique(idx.reshape(-1, idx.shape[-1]), axis=0).reshape(-1, *idx.shape[1:])
        batch = next(a for a in range(upd.ndim) if a not in fields["update_window_dims"])
        upd = np.take(upd, range(idx.shape[0]), axis=batch)

    def run(lx: Any, x: Any, i: Any, u: Any) -> Any:
        dn = lx.ScatterDimensionNumbers(**fields)
        return getattr(lx, kind)(x, i, u, dn, mode=mode)

    want = run(jax.lax, x, idx, upd)
    k = 3 if kind in ("scatter_add", "scatter_sub") else 1
    assert_matches(run(lax, x, idx, upd), want, k, what="eager")
    traced = pto.jit(lambda x, i, u: run(lax, x, i, u), backend="interpret")(x, idx, upd)
    assert_matches(traced, want, k, what="jit")


def test_scatter_apply_and_integer_scatters_match_jax() -> None:
    dn = dict(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    idx = np.array([[1], [1], [3], [9]])
    x = np.arange(5, dtype=np.int32)
    for mode in (None, "clip"):
        want = jax.lax.scatter_apply(
            x,
            idx,
            lambda v: v * 2 + 1,
            jax.lax.ScatterDimensionNumbers(**dn),
            update_shape=(4,),
            mode=mode,
        )
        got = lax.scatter_apply(
            x,
            idx,
            lambda v: v * 2 + 1,
            lax.ScatterDimensionNumbers(**dn),
            update_shape=(4,),
            mode=mode,
        )
        assert_matches(got, want, what=f"apply {mode}")
    upd = np.array([5, -3, 7, 100], np.int32)
    for kind in KINDS[1:]:
        want = getattr(jax.lax, kind)(x, idx, upd, jax.lax.ScatterDimensionNumbers(**dn))
        got = getattr(lax, kind)(x, idx, upd, lax.ScatterDimensionNumbers(**dn))
        assert_matches(got, want, what=kind)


def test_gradients_of_gather_and_scatter_add_match_jax() -> None:
    _, x, idx, fields, sizes = GATHERS[2]  # windows, some reaching outside (clamped)

    def g(lx: Any, x: Any) -> Any:
        out = lx.gather(x, idx, lx.GatherDimensionNumbers(**fields), sizes, mode="clip")
        return (out**2).sum()

    want = jax.grad(lambda x: g(jax.lax, x))(x)
    assert_matches(pto.grad(lambda x: g(lax, x))(x), want, 4, what="grad gather")
    _, x, idx, fields, ushape = SCATTERS[0]
    upd = np.random.default_rng(1).normal(size=ushape).astype(np.float32)

    def s(lx: Any, x: Any, u: Any) -> Any:
        out = lx.scatter_add(x, idx, u, lx.ScatterDimensionNumbers(**fields))
        return (out * out).sum()

    want2 = jax.grad(lambda x, u: s(jax.lax, x, u), argnums=(0, 1))(x, upd)
    got2 = pto.grad(lambda x, u: s(lax, x, u), argnums=(0, 1))(x, upd)
    for a, b in zip(got2, want2, strict=True):
        assert_matches(a, b, 4, what="grad scatter_add")


def test_gather_and_scatter_add_on_the_npu_match_jax() -> None:
    _, x, idx, fields, sizes = GATHERS[0]
    gdn = fields

    def f(x: Any, i: Any, u: Any) -> Any:
        rows = lax.gather(x, i, lax.GatherDimensionNumbers(**gdn), sizes)
        sdn = lax.ScatterDimensionNumbers((1,), (0,), (0,))
        return lax.scatter_add(x, i, rows * u, sdn)

    u = np.float32(0.5) + np.zeros((4, 7), np.float32)

    def jf(x: Any, i: Any, u: Any) -> Any:
        rows = jax.lax.gather(x, i, jax.lax.GatherDimensionNumbers(**gdn), sizes)
        sdn = jax.lax.ScatterDimensionNumbers((1,), (0,), (0,))
        return jax.lax.scatter_add(x, i, rows * u, sdn)

    got = pto.jit(f, machine="tiny")(x, idx.astype(np.int32), u)
    assert_matches(got, jf(x, idx, u), 3, what="npu")


def test_bad_dimension_numbers_say_which_field() -> None:
    x = X[:, :, 0]
    i = np.array([[1], [2]])
    gdn = lax.GatherDimensionNumbers
    cases = [
        (
            lambda: lax.gather(x, i, gdn((1,), (0,), (0, 1)), (1, 7)),
            ShapeError,
            r"the index vectors have 1 entries for start_index_map=\(0, 1\)",
        ),
        (
            lambda: lax.gather(x, i, gdn((1,), (0,), (0,)), (2, 7)),
            ShapeError,
            r"operand axis 0 has no axis in the result, so its window is 1 wide, not 2",
        ),
        (
            lambda: lax.gather(x, i, gdn((1,), (0,), (0,)), (1, 8)),
            ShapeError,
            r"a window of 8 on operand axis 1 of 7",
        ),
        (
            lambda: lax.gather(x, i, gdn((2,), (0,), (0,)), (1, 7)),
            ShapeError,
            r"offset_dims=\(2,\) must be 1 sorted, distinct axes below 2",
        ),
        (
            lambda: lax.gather(x, i.astype(np.float32), gdn((1,), (0,), (0,)), (1, 7)),
            DTypeError,
            r"indices f32\[2,1\] must be integers",
        ),
        (
            lambda: lax.gather(x, i, gdn((1,), (0,), (0,)), (1, 7), mode="wrap"),
            ShapeError,
            r"unknown mode 'wrap'",
        ),
        (
            lambda: lax.scatter_add(
                x, i, np.ones((2, 7), np.int32), lax.ScatterDimensionNumbers((1,), (0,), (0,))
            ),
            DTypeError,
            r"updates i32\[2,7\] for operand f32\[6,7\]: the dtypes differ",
        ),
        (
            lambda: lax.scatter_add(
                x, i, np.ones((3, 7), np.float32), lax.ScatterDimensionNumbers((1,), (0,), (0,))
            ),
            ShapeError,
            r"updates \[3, 7\] for operand \[6, 7\] and indices \[2, 1\]: the windows and index "
            r"batches make \[2, 7\]",
        ),
    ]
    for fn, cls, msg in cases:
        with pytest.raises(cls, match=msg) as e:
            fn()
        assert "test_gather_scatter.py" in str(e.value), str(e.value)


def test_gather_and_scatter_add_under_vmap_match_jax() -> None:
    x = rng.normal(size=(3, 6, 7)).astype(np.float32)
    idx = np.array([[[4], [0]], [[1], [5]], [[2], [2]]])
    u = rng.normal(size=(3, 2, 7)).astype(np.float32)

    def g(lx: Any, x: Any, i: Any) -> Any:
        return lx.gather(x, i, lx.GatherDimensionNumbers((1,), (0,), (0,)), (1, 7))

    def s(lx: Any, x: Any, i: Any, u: Any) -> Any:
        return lx.scatter_add(x, i, u, lx.ScatterDimensionNumbers((1,), (0,), (0,)))

    want = jax.vmap(lambda a, b: g(jax.lax, a, b))(x, idx)
    assert_matches(pto.vmap(lambda a, b: g(lax, a, b))(x, idx), want, what="vmap gather")
    want = jax.vmap(lambda a, b, c: s(jax.lax, a, b, c))(x, idx, u)
    got = pto.vmap(lambda a, b, c: s(lax, a, b, c))(x, idx, u)
    assert_matches(got, want, 3, what="vmap scatter_add")
