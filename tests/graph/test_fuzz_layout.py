"""Differential fuzzing of programs that change shapes: reshapes, transposes, strided and
reversed slices, concatenations, splits, takes, squeezes, broadcasts, reductions along any axis
with or without keepdims, argmax, integer round trips, and matmuls and attention of what they
give. Each program runs eagerly, through the interpreter (bit for bit equal), compiled for the
simulated NPU and in JAX. ``test_fuzz.py`` keeps its values' shapes; here every step may change
them, so the lowering's layouts, windows and relayouts meet each other at awkward sizes.

A step is drawn against the shapes the program has at that point (found by running the steps
so far eagerly), and recorded as plain data, so that a failing example prints as a readable
list of steps and replays exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import pypto as pto
from pypto.graph.tracer import trace
from pypto.reference import compare
from pypto.reference.jax_bridge import precisions, sum_lengths

from .test_fuzz import every_path, gradients

DTYPES = [pto.float32, pto.float16, pto.bfloat16]

Step = tuple[Any, ...]

UNARY: dict[str, Callable[[Any], Any]] = {
    "tanh": pto.tanh,
    "exp∘tanh": lambda x: pto.exp(pto.tanh(x)),
    "scale": lambda x: x * 0.75 + 0.25,
    "reciprocal": lambda x: pto.reciprocal(pto.abs(x) + 1),
    "pow": lambda x: pto.pow(pto.abs(x) + 0.5, 1.5) * 0.5,
    "sin": pto.sin,
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": pto.add,
    "mul": lambda x, y: pto.tanh(x) * y,
    "maximum": pto.maximum,
    "where": lambda x, y: pto.where(x > y, x, y * 0.5),
}
REDUCE: dict[str, Callable[..., Any]] = {
    "sum": lambda x, axis, keepdims: pto.sum(x, axis, keepdims=keepdims) * 0.25,
    "mean": pto.mean,
    "max": pto.max,
    "min": pto.min,
}
ROW: dict[str, Callable[[Any, int], Any]] = {
    "softmax": pto.softmax,
    "log_softmax": lambda x, a: pto.log_softmax(x, a) * 0.3,
}
KINDS = [
    "unary", "binary", "binary", "reshape", "transpose", "getitem", "getitem", "concat",
    "split", "take", "squeeze", "expand_dims", "broadcast_to", "reduce", "reduce", "row",
    "argmax", "int", "gram", "matvec", "attend",
]  # fmt: skip


def _T(y: Any) -> Any:
    n = y.ndim
    return y.transpose((*range(n - 2), n - 1, n - 2))


def apply(pool: list[Any], step: Step) -> Any:
    """The value a step adds to the pool: one function for every path (eager, traced, JAX)."""
    kind, src, *p = step
    x = pool[src]
    if kind == "unary":
        return UNARY[p[0]](x)
    if kind == "binary":
        other, name = p
        y = pool[other] if other >= 0 else pto.mean(pool[-other - 1])
        return BINARY[name](x, y)
    if kind == "reshape":
        return pto.reshape(x, p[0])
    if kind == "transpose":
        return pto.transpose(x, p[0])
    if kind == "getitem":
        return x[_key(p[0])]
    if kind == "concat":
        others, axis = p
        return pto.concat([x, *(pool[o] for o in others)], axis=axis)
    if kind == "split":
        indices, axis, pick = p
        return pto.split(x, list(indices), axis=axis)[pick] * 1.25
    if kind == "take":
        indices, axis = p
        return pto.take(x, np.asarray(indices, np.int32), axis=axis)
    if kind == "squeeze":
        return pto.squeeze(x, p[0])
    if kind == "expand_dims":
        return pto.expand_dims(x, p[0])
    if kind == "broadcast_to":
        return pto.broadcast_to(x, p[0]) * 0.5
    if kind == "reduce":
        name, axis, keepdims = p
        return REDUCE[name](x, axis, keepdims=keepdims)
    if kind == "row":
        return ROW[p[0]](x, p[1])
    if kind == "argmax":
        axis, keepdims = p
        return pto.argmax(x, axis, keepdims=keepdims).astype(x.dtype) * 0.25
    if kind == "int":
        i = pto.cast(x * 4, pto.int32)
        return pto.cast(pto.maximum(i * 3 - 1, -7), x.dtype) * 0.125
    if kind == "gram":
        return pto.tanh(x @ _T(x) * 0.3) @ x * 0.3
    if kind == "matvec":
        return pto.tanh(x @ pool[p[0]] * 0.3)
    if kind == "attend":
        kv, causal = p
        return pto.scaled_dot_product_attention(x, pool[kv], pool[kv], causal=causal)
    raise AssertionError(kind)


def _key(spec: tuple[Any, ...]) -> tuple[Any, ...]:
    """A recorded index (tuples for slices, so that it prints and compares) as a real one."""
    return tuple(
        slice(*s) if isinstance(s, tuple) else (Ellipsis if s == "..." else s) for s in spec
    )


def _factor(draw: st.DrawFn, n: int) -> tuple[int, ...]:
    """A random shape of 1-4 axes with ``n`` elements (size-1 axes included)."""
    dims: list[int] = []
    rest = n
    for _ in range(draw(st.integers(0, 3))):
        d = draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0]))
        dims.append(d)
        rest //= d
    dims.append(rest)
    return tuple(draw(st.permutations(dims)))


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _draw_step(draw: st.DrawFn, pool: list[Any], exact: list[bool]) -> tuple[Step, bool] | None:
    """One step against the pool's current shapes, and whether its value is exact (equal on
    every path: the inputs and what only moves, picks or takes extremes of them), or None."""
    src = draw(st.integers(0, len(pool) - 1))
    x = pool[src]
    shape, nd = tuple(x.shape), x.ndim
    kind = draw(st.sampled_from(KINDS))
    moves = exact[src]  # a layout step keeps exactness
    if kind == "unary":
        return ("unary", src, draw(st.sampled_from(sorted(UNARY)))), False
    if kind == "binary":
        fits = [i for i, y in enumerate(pool) if _broadcasts(shape, tuple(y.shape))]
        other = draw(st.sampled_from(fits)) if draw(st.booleans()) else -1 - src
        if other >= 0 and np.prod(np.broadcast_shapes(shape, tuple(pool[other].shape))) > 4096:
            return None
        name = draw(st.sampled_from(sorted(BINARY)))
        ex = name == "maximum" and moves and other >= 0 and exact[other]
        return ("binary", src, other, name), ex
    if kind == "reshape":
        return ("reshape", src, _factor(draw, int(np.prod(shape, dtype=int)))), moves
    if kind == "transpose":
        if nd < 2:
            return None
        return ("transpose", src, tuple(draw(st.permutations(range(nd))))), moves
    if kind == "getitem":
        if nd == 0:
            return None
        spec: list[Any] = []
        for n in shape:
            r = draw(st.integers(0, 5))
            if r == 0 and n > 1:
                spec.append(draw(st.integers(-n, n - 1)))
                continue
            if r == 1:
                spec.append(None)
            step = draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
            lo = draw(st.integers(0, n - 1))
            hi = draw(st.integers(lo + 1, n))
            spec.append((lo, hi, step) if step > 0 else (hi - 1, lo - 1 if lo else None, step))
        if nd > 1 and draw(st.booleans()):  # an Ellipsis for some trailing full axes
            spec = [*spec[: len(spec) - draw(st.integers(1, nd - 1))], "..."]
        return ("getitem", src, tuple(spec)), moves
    if kind == "concat":
        if nd == 0:
            return None
        axis = draw(st.integers(-nd, nd - 1))
        a = axis % nd

        def fits_at(y: Any) -> bool:
            ys = tuple(y.shape)
            return len(ys) == nd and all(i == a or ys[i] == shape[i] for i in range(nd))

        cand = [i for i, y in enumerate(pool) if fits_at(y)]
        others = tuple(draw(st.lists(st.sampled_from(cand), min_size=1, max_size=2)))
        if sum(pool[o].shape[a] for o in others) + shape[a] > 300:
            return None
        return ("concat", src, others, axis), moves and all(exact[o] for o in others)
    if kind == "split":
        if nd == 0:
            return None
        axis = draw(st.integers(0, nd - 1))
        n = shape[axis]
        cuts = tuple(sorted(draw(st.lists(st.integers(0, n), min_size=1, max_size=3))))
        bounds = [0, *cuts, n]
        pick = draw(st.integers(0, len(cuts)))
        if bounds[pick + 1] <= bounds[pick]:
            return None  # an empty piece
        return ("split", src, cuts, axis, pick), False
    if kind == "take":
        if nd == 0:
            return None
        axis = draw(st.integers(0, nd - 1))
        n = shape[axis]
        idx = tuple(draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=min(2 * n, 40))))
        return ("take", src, idx, axis), moves
    if kind == "squeeze":
        ones = [i for i, s in enumerate(shape) if s == 1]
        if not ones:
            return None
        return ("squeeze", src, draw(st.sampled_from(ones))), moves
    if kind == "expand_dims":
        return ("expand_dims", src, draw(st.integers(-nd - 1, nd))), moves
    if kind == "broadcast_to":
        target = [draw(st.integers(2, 5)) if s == 1 and draw(st.booleans()) else s for s in shape]
        if draw(st.booleans()) or target == list(shape):
            target = [draw(st.integers(1, 3)), *target]
        if int(np.prod(target)) > 4096:
            return None
        return ("broadcast_to", src, tuple(target)), moves
    if kind == "reduce":
        if nd == 0:
            return None
        name = draw(st.sampled_from(sorted(REDUCE)))
        r = draw(st.integers(0, 2))
        axis: Any = None
        if r == 1:
            axis = draw(st.integers(-nd, nd - 1))
        elif r == 2:
            axis = tuple(sorted(draw(st.sets(st.integers(0, nd - 1), min_size=1))))
        keep = draw(st.booleans())
        return ("reduce", src, name, axis, keep), moves and name in ("max", "min")
    if kind == "row":
        if nd == 0:
            return None
        name = draw(st.sampled_from(sorted(ROW)))
        return ("row", src, name, draw(st.integers(-nd, nd - 1))), False
    if kind == "argmax":
        # only of exact values: a near tie would pick another index on another path
        if not exact[src] or nd == 0:
            return None
        axis = draw(st.sampled_from([None, *range(nd)]))
        return ("argmax", src, axis, draw(st.booleans())), True
    if kind == "int":
        return (("int", src), True) if exact[src] else None
    if kind == "gram":
        if nd < 2 or shape[-1] * shape[-2] > 4096:
            return None
        return ("gram", src), False
    if kind == "matvec":
        # x [.., n] @ y [.., n, m] (or [n]): vector operands and broadcast batch axes
        if nd == 0:
            return None
        n = shape[-1]
        cand = [
            i
            for i, y in enumerate(pool)
            if (y.ndim == 1 and y.shape[0] == n)
            or (y.ndim >= 2 and y.shape[-2] == n and _broadcasts(shape[:-1], tuple(y.shape[:-2])))
        ]
        if not cand:
            return None
        return ("matvec", src, draw(st.sampled_from(cand))), False
    if kind == "attend":
        # queries x [.., lq, d] against keys and values y [.., lk, d] (often x itself, or a
        # value made from it: operands whose layouts other kernels chose)
        if nd < 2:
            return None
        cand = [
            i
            for i, y in enumerate(pool)
            if y.ndim >= 2
            and y.shape[-1] == shape[-1]
            and _broadcasts(shape[:-2], tuple(y.shape[:-2]))
        ]
        return ("attend", src, draw(st.sampled_from(cand)), draw(st.booleans())), False
    raise AssertionError(kind)


@st.composite
def programs(
    draw: st.DrawFn, sizes: list[int], limit: int = 1 << 12, length: int = 12
) -> tuple[list[np.ndarray], list[Step]]:
    dtype = draw(st.sampled_from(DTYPES))
    base = draw(st.lists(st.sampled_from(sizes), min_size=1, max_size=3))
    shapes = []
    for _ in range(draw(st.integers(1, 3))):
        drop = draw(st.integers(0, len(base) - 1))
        shapes.append(tuple(1 if draw(st.integers(0, 3)) == 0 else s for s in base[drop:]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    inputs = [rng.uniform(-2, 2, s).astype(np.float32).astype(dtype.np) for s in shapes]
    pool: list[Any] = [pto.tensor(a) for a in inputs]
    exact = [True] * len(pool)
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, length))):
        got = _draw_step(draw, pool, exact)
        if got is None:
            continue
        step, ex = got
        try:
            value = apply(pool, step)
        except pto.PyptoError:
            continue  # a step the shapes do not allow (the op's own error says why)
        if value.size == 0 or value.size > limit:
            continue
        steps.append(step)
        pool.append(value)
        exact.append(ex)
    assume(steps)
    return inputs, steps


def build(steps: list[Step]) -> Callable[..., Any]:
    def program(*xs: Any) -> Any:
        pool = list(xs)
        for step in steps:
            pool.append(apply(pool, step))
        return pool[-1], pool[len(xs) + (len(pool) - len(xs)) // 2]

    return program


def _check(name: str, got: Any, want: Any, k: int, p: Any, steps: list[Step]) -> None:
    c = compare(name, got, np.asarray(want), k=k, precision=p)
    assert c.ok, f"{c}\nsteps: {steps}"


@settings(max_examples=40)
@given(programs(list(range(1, 7))))
def test_layout_programs_agree_eager_interpret_npu_jax(prog: Any) -> None:
    inputs, steps = prog
    eager, staged, unfused, npu, ref, func = every_path(build(steps), inputs)
    tols = zip(sum_lengths(func), precisions(func), strict=True)
    for i, (e, s, u, n, r, (k, p)) in enumerate(zip(eager, staged, unfused, npu, ref, tols)):
        np.testing.assert_array_equal(np.asarray(e), np.asarray(s), err_msg=f"{steps}")
        np.testing.assert_array_equal(np.asarray(e), np.asarray(u), err_msg=f"{steps}")
        assert e.dtype == n.dtype and e.shape == n.shape == np.shape(r), steps
        _check(f"npu out[{i}]", n, e, k * (len(steps) + 1), p, steps)
        _check(f"out[{i}]", e, r, k * (len(steps) + 1), p, steps)


# ascend910b: several cores, column splits and edge tiles (sizes that are not tile multiples)
WIDE = [1, 2, 3, 16, 24, 48, 64, 100, 130, 200, 256]


@settings(max_examples=30)
@given(programs(WIDE, limit=1 << 16))
def test_layout_programs_on_ascend910b_agree_with_eager(prog: Any) -> None:
    inputs, steps = prog
    assume(sum(a.size for a in inputs) <= 1 << 16)
    fn = build(steps)
    tensors = [pto.tensor(a) for a in inputs]
    eager = fn(*tensors)
    npu = pto.jit(fn, machine="ascend910b")(*tensors)
    func = trace(fn, tensors)[0]
    tols = zip(sum_lengths(func), precisions(func), strict=True)
    for i, (e, n, (k, p)) in enumerate(zip(eager, npu, tols, strict=True)):
        assert e.dtype == n.dtype and e.shape == n.shape, steps
        _check(f"npu out[{i}]", n, e, k * (len(steps) + 1), p, steps)


@settings(max_examples=30)
@given(programs(list(range(1, 7))))
def test_layout_programs_gradients_agree_with_jax(prog: Any) -> None:
    """``grad`` through shape changes (their rules are slices, pads, scatter-adds and
    reductions of the cotangent), eagerly and compiled for the NPU, against ``jax.grad``."""
    inputs, steps = prog
    inputs = [a.astype(np.float32) for a in inputs]
    fn = build(steps)
    eager, npu, ref, ps = gradients(fn, inputs, len(steps))
    outs = fn(*[pto.tensor(a) for a in inputs])
    k = 4 * (len(steps) + 1) * max(a.size for a in [*inputs, *(np.asarray(o) for o in outs)])
    for i, (e, n, r, p) in enumerate(zip(eager, npu, ref, ps, strict=True)):
        c = compare(f"grad[{i}]", np.asarray(e), np.asarray(r), k=k, scale=1.0, precision=p)
        assert c.ok, f"{c}\nsteps: {steps}"
        c = compare(f"npu grad[{i}]", np.asarray(n), np.asarray(e), k=k, scale=1.0, precision=p)
        assert c.ok, f"{c}\nsteps: {steps}"
